//! Operator signatures: payload patterns at offsets, ports, addresses.
//!
//! A signature names the service it puts a flow in and any of:
//! * `protocol` (tcp, udp or a number),
//! * `ports` (a range; either end of the flow),
//! * `addresses` (a prefix; either end of the flow),
//! * `payload` (bytes that must appear at `offset` of a packet's transport
//!   payload, in either direction, at most [`MAX_PATTERN`] bytes).
//!
//! Signatures are tried in the order written, on every packet of a flow
//! still being classified, *before* nDPI: the first match decides the
//! flow (they take precedence over the library). A flow that one of the
//! payload signatures could still match (its protocol, ports and
//! addresses fit) is not decided by nDPI before the engine's
//! `signature_depth` packets have been seen, so a pattern in the second
//! or third packet still wins.

use crate::packet::Tuple;
use crate::subscriber::Prefix;

/// Longest payload pattern, bytes.
pub const MAX_PATTERN: usize = 64;

/// Most signatures.
pub const MAX_SIGNATURES: usize = 256;

/// A payload pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    pub offset: u16,
    pub bytes: Vec<u8>,
}

impl Pattern {
    /// Parses `"text"` (with `\xNN`, `\\`, `\"` escapes) or `hex:0a0b…`.
    pub fn parse_bytes(s: &str) -> Result<Vec<u8>, String> {
        let out = if let Some(hex) = s.strip_prefix("hex:") {
            if hex.len() % 2 != 0 {
                return Err(format!("'{s}': odd number of hex digits"));
            }
            (0..hex.len())
                .step_by(2)
                .map(|i| {
                    u8::from_str_radix(hex.get(i..i + 2).unwrap_or("zz"), 16)
                        .map_err(|_| format!("'{s}': not hex"))
                })
                .collect::<Result<Vec<u8>, String>>()?
        } else {
            let mut out = Vec::new();
            let b = s.as_bytes();
            let mut i = 0;
            while i < b.len() {
                if b[i] == b'\\' {
                    match b.get(i + 1) {
                        Some(b'x') => {
                            let h = s
                                .get(i + 2..i + 4)
                                .ok_or_else(|| format!("'{s}': \\x needs two hex digits"))?;
                            out.push(
                                u8::from_str_radix(h, 16)
                                    .map_err(|_| format!("'{s}': bad \\x{h}"))?,
                            );
                            i += 4;
                        }
                        Some(b'\\') => {
                            out.push(b'\\');
                            i += 2;
                        }
                        Some(b'r') => {
                            out.push(b'\r');
                            i += 2;
                        }
                        Some(b'n') => {
                            out.push(b'\n');
                            i += 2;
                        }
                        _ => return Err(format!("'{s}': unknown escape (\\xNN, \\\\, \\r, \\n)")),
                    }
                } else {
                    out.push(b[i]);
                    i += 1;
                }
            }
            out
        };
        if out.is_empty() || out.len() > MAX_PATTERN {
            return Err(format!("payload pattern must be 1..={MAX_PATTERN} bytes"));
        }
        Ok(out)
    }

    #[inline]
    fn matches(&self, payload: &[u8]) -> bool {
        let o = usize::from(self.offset);
        payload.get(o..o + self.bytes.len()) == Some(&self.bytes[..])
    }
}

/// One operator signature (compiled: the service is an id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    pub name: String,
    pub service: u16,
    pub protocol: Option<u8>,
    pub ports: Option<(u16, u16)>,
    pub addresses: Option<Prefix>,
    pub payload: Option<Pattern>,
}

impl Signature {
    /// Protocol, ports and addresses fit the flow.
    #[inline]
    fn fits(&self, t: &Tuple) -> bool {
        if let Some(p) = self.protocol {
            if p != t.proto {
                return false;
            }
        }
        if let Some((lo, hi)) = self.ports {
            let inr = |p: u16| lo <= p && p <= hi;
            if !inr(t.sport) && !inr(t.dport) {
                return false;
            }
        }
        if let Some(pre) = &self.addresses {
            if pre.v6 != t.v6 || !(covers(pre, t.src) || covers(pre, t.dst)) {
                return false;
            }
        }
        true
    }
}

fn covers(p: &Prefix, addr: u128) -> bool {
    let width = if p.v6 { 128 } else { 32 };
    if p.len == 0 {
        return true;
    }
    let shift = width - u32::from(p.len);
    (addr >> shift) == (p.addr >> shift)
}

/// The compiled signature list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Signatures {
    list: Vec<Signature>,
}

impl Signatures {
    pub fn new(list: Vec<Signature>) -> Result<Signatures, String> {
        if list.len() > MAX_SIGNATURES {
            return Err(format!(
                "{} signatures; at most {MAX_SIGNATURES}",
                list.len()
            ));
        }
        Ok(Signatures { list })
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn get(&self, i: usize) -> Option<&Signature> {
        self.list.get(i)
    }

    /// True if a payload signature could still match this flow.
    pub fn payload_candidate(&self, t: &Tuple) -> bool {
        self.list.iter().any(|s| s.payload.is_some() && s.fits(t))
    }

    /// The first signature matching a packet of the flow `t` with
    /// transport `payload`.
    #[inline]
    pub fn find(&self, t: &Tuple, payload: &[u8]) -> Option<usize> {
        self.list
            .iter()
            .position(|s| s.fits(t) && s.payload.as_ref().is_none_or(|p| p.matches(payload)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{TCP, UDP};

    fn t(sport: u16, dport: u16, proto: u8) -> Tuple {
        Tuple {
            src: 0x0a00_0001,
            dst: 0xc000_0201,
            sport,
            dport,
            proto,
            v6: false,
        }
    }

    fn sig(name: &str, service: u16) -> Signature {
        Signature {
            name: name.into(),
            service,
            protocol: None,
            ports: None,
            addresses: None,
            payload: None,
        }
    }

    #[test]
    fn patterns_parse() {
        assert_eq!(Pattern::parse_bytes("GET \\x2f").unwrap(), b"GET /");
        assert_eq!(Pattern::parse_bytes("hex:00ff").unwrap(), [0, 255]);
        assert!(Pattern::parse_bytes("hex:0").is_err());
        assert!(Pattern::parse_bytes("\\q").is_err());
        assert!(Pattern::parse_bytes("").is_err());
        assert!(Pattern::parse_bytes(&"a".repeat(65)).is_err());
    }

    #[test]
    fn first_matching_signature_wins_with_every_constraint() {
        let a = Signature {
            payload: Some(Pattern {
                offset: 2,
                bytes: b"LY".to_vec(),
            }),
            protocol: Some(TCP),
            ..sig("lanyard-proto", 7)
        };
        let b = Signature {
            ports: Some((9000, 9100)),
            ..sig("game", 8)
        };
        let c = Signature {
            addresses: Some(Prefix::parse("192.0.2.0/24").unwrap()),
            protocol: Some(UDP),
            ..sig("partner", 9)
        };
        let s = Signatures::new(vec![a, b, c]).unwrap();
        assert_eq!(s.find(&t(1, 2, TCP), b"xxLYzz"), Some(0));
        assert_eq!(s.find(&t(1, 2, TCP), b"xLYzz"), None);
        assert_eq!(s.find(&t(1, 2, UDP), b"xxLYzz"), Some(2));
        assert_eq!(s.find(&t(9050, 2, TCP), b""), Some(1));
        assert_eq!(s.find(&t(2, 9100, TCP), b"xxLY"), Some(0));
        assert!(s.payload_candidate(&t(1, 2, TCP)));
        assert!(!s.payload_candidate(&t(1, 2, UDP)));
    }
}
