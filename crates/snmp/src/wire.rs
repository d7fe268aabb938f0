//! The PDUs the subagent sends with variables in them (Response, Notify),
//! encoded here rather than by the `agentx` crate: the crate's
//! OctetString is a Rust `String`, so it cannot carry binary octets such
//! as a MAC address (`ifPhysAddress`), and its TimeTicks is signed.
//! Requests from the master are still decoded by the crate. Everything
//! is written little-endian (NETWORK_BYTE_ORDER clear), as the crate
//! writes, which RFC 2741 lets the subagent choose per PDU.

use agentx::pdu::Header;

/// AgentX header length.
pub const HEADER: usize = 20;
const RESPONSE: u8 = 18;
const NOTIFY: u8 = 12;

/// An SNMP value as AgentX carries it (RFC 2741 5.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Integer(i32),
    /// Any octets: text (DisplayString) or binary (PhysAddress).
    OctetString(Vec<u8>),
    ObjectIdentifier(Vec<u32>),
    Counter32(u32),
    Gauge32(u32),
    TimeTicks(u32),
    Counter64(u64),
    NoSuchObject,
    NoSuchInstance,
    EndOfMibView,
}

impl Value {
    pub fn text(s: &str) -> Value {
        Value::OctetString(s.as_bytes().to_vec())
    }
}

/// An object identifier (RFC 2741 5.1), without prefix compression.
/// At most 255 sub-identifiers are written (RFC 2741 allows 128; the
/// crate decodes what the master sends, so longer ones never arrive).
fn put_oid(out: &mut Vec<u8>, o: &[u32]) {
    let o = &o[..o.len().min(255)];
    out.extend_from_slice(&[o.len() as u8, 0, 0, 0]);
    for s in o {
        out.extend_from_slice(&s.to_le_bytes());
    }
}

fn put_octets(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
    out.resize(out.len() + (4 - b.len() % 4) % 4, 0);
}

fn put_varbind(out: &mut Vec<u8>, name: &[u32], v: &Value) {
    let ty: u16 = match v {
        Value::Integer(_) => 2,
        Value::OctetString(_) => 4,
        Value::ObjectIdentifier(_) => 6,
        Value::Counter32(_) => 65,
        Value::Gauge32(_) => 66,
        Value::TimeTicks(_) => 67,
        Value::Counter64(_) => 70,
        Value::NoSuchObject => 128,
        Value::NoSuchInstance => 129,
        Value::EndOfMibView => 130,
    };
    out.extend_from_slice(&ty.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    put_oid(out, name);
    match v {
        Value::Integer(i) => out.extend_from_slice(&i.to_le_bytes()),
        Value::OctetString(b) => put_octets(out, b),
        Value::ObjectIdentifier(o) => put_oid(out, o),
        Value::Counter32(n) | Value::Gauge32(n) | Value::TimeTicks(n) => {
            out.extend_from_slice(&n.to_le_bytes())
        }
        Value::Counter64(n) => out.extend_from_slice(&n.to_le_bytes()),
        Value::NoSuchObject | Value::NoSuchInstance | Value::EndOfMibView => {}
    }
}

fn pdu(ty: u8, session: u32, transaction: u32, packet: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(&[1, ty, 0, 0]);
    out.extend_from_slice(&session.to_le_bytes());
    out.extend_from_slice(&transaction.to_le_bytes());
    out.extend_from_slice(&packet.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// The Response to the request `h`: error status and index, then the
/// variables (none when the status is an error).
pub fn response(h: &Header, status: u16, index: u16, vbs: &[(Vec<u32>, Value)]) -> Vec<u8> {
    let mut p = Vec::with_capacity(8 + vbs.len() * 48);
    p.extend_from_slice(&0u32.to_le_bytes()); // sysUpTime: the master ignores it
    p.extend_from_slice(&status.to_le_bytes());
    p.extend_from_slice(&index.to_le_bytes());
    for (n, v) in vbs {
        put_varbind(&mut p, n, v);
    }
    pdu(RESPONSE, h.session_id, h.transaction_id, h.packet_id, &p)
}

/// A Notify PDU (RFC 2741 6.2.10): `snmpTrapOID.0` first, the master
/// adds `sysUpTime.0` and sends the notification to its trap sinks.
pub fn notify(session: u32, packet: u32, vbs: &[(Vec<u32>, Value)]) -> Vec<u8> {
    let mut p = Vec::new();
    for (n, v) in vbs {
        put_varbind(&mut p, n, v);
    }
    pdu(NOTIFY, session, 0, packet, &p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentx::encodings::{OctetString, Value as Crate};
    use agentx::pdu::{Response, Type};

    /// What the crate decodes from our Response equals what we meant,
    /// for every value it can represent.
    #[test]
    fn the_crate_reads_our_responses() {
        let mut h = Header::new(Type::Get);
        h.session_id = 7;
        h.transaction_id = 8;
        h.packet_id = 9;
        let vbs = vec![
            (vec![1, 3, 6, 1, 2, 1, 2, 2, 1, 2, 1], Value::text("sw1x")),
            (vec![1, 3, 6, 1, 2, 1, 2, 2, 1, 2, 2], Value::text("sw10x")),
            (vec![1, 3, 6, 1, 2, 1, 2, 2, 1, 1, 1], Value::Integer(-3)),
            (vec![1, 3], Value::Counter64(u64::MAX - 1)),
            (vec![1, 4], Value::TimeTicks(12345)),
            (vec![1, 5], Value::ObjectIdentifier(vec![1, 3, 6, 1, 6])),
            (vec![1, 6], Value::EndOfMibView),
        ];
        let b = response(&h, 0, 0, &vbs);
        let r = Response::from_bytes(&b).unwrap();
        assert_eq!(
            (
                r.header.session_id,
                r.header.transaction_id,
                r.header.packet_id
            ),
            (7, 8, 9)
        );
        let got: Vec<Crate> = r.vb.unwrap().0.into_iter().map(|v| v.data).collect();
        assert_eq!(got[0], Crate::OctetString(OctetString("sw1x".into())));
        assert_eq!(got[1], Crate::OctetString(OctetString("sw10x".into())));
        assert_eq!(got[2], Crate::Integer(-3));
        assert_eq!(got[3], Crate::Counter64(u64::MAX - 1));
        assert_eq!(got[4], Crate::TimeTicks(12345));
        assert_eq!(got[5].to_owned(), {
            let id = agentx::encodings::ID::try_from(vec![1u32, 3, 6, 1, 6]).unwrap();
            Crate::ObjectIdentifier(id)
        });
        assert_eq!(got[6], Crate::EndOfMibView);
    }

    /// Binary octets go out as they are, length first, padded to 4.
    #[test]
    fn binary_octets_are_kept_and_padded() {
        let mac = [0x02, 0xff, 0x00, 0x80, 0xfe, 0x01];
        let b = notify(3, 4, &[(vec![1, 2], Value::OctetString(mac.to_vec()))]);
        assert_eq!(b[1], NOTIFY);
        let len = u32::from_le_bytes([b[16], b[17], b[18], b[19]]) as usize;
        assert_eq!(b.len(), HEADER + len);
        // type, reserved, OID (4 + 2*4), length, 6 octets, 2 of padding
        let vb = &b[HEADER..];
        assert_eq!(u16::from_le_bytes([vb[0], vb[1]]), 4);
        assert_eq!(&vb[16..20], &6u32.to_le_bytes());
        assert_eq!(&vb[20..26], &mac);
        assert_eq!(&vb[26..28], &[0, 0]);
        assert_eq!(vb.len(), 28);
    }
}
