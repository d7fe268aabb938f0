use super::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn linear(rules: &[Match], k: &AclKey) -> Option<u32> {
    rules.iter().position(|m| m.matches(k)).map(|i| i as u32)
}

/// `lookup` and `lookup_batch` agree with the linear scan on every key.
fn check(rules: &[Match], keys: &[AclKey]) -> Classifier {
    let c = Classifier::compile(rules);
    for k in keys {
        assert_eq!(c.lookup(k), linear(rules, k), "key {k:?}");
    }
    check_batch(&c, rules, keys);
    assert_one_block(&c);
    c
}

/// `lookup_batch` and its interleaved path (whatever the size) over
/// `keys` in slices of varied lengths (partial groups, an `out` longer
/// than `keys`) agree with the linear scan.
fn check_batch(c: &Classifier, rules: &[Match], keys: &[AclKey]) {
    type Batch = fn(&Classifier, &[AclKey], &mut [Option<u32>]);
    let paths: [Batch; 2] = [Classifier::lookup_batch, Classifier::lookup_interleaved];
    for path in paths {
        let mut out = vec![Some(u32::MAX); keys.len() + 3];
        let mut i = 0;
        let mut step = 1;
        while i < keys.len() {
            let end = (i + step).min(keys.len());
            path(c, &keys[i..end], &mut out[i..]);
            i = end;
            step = step % 21 + 1;
        }
        for (k, o) in keys.iter().zip(&out) {
            assert_eq!(*o, linear(rules, k), "batch, key {k:?}");
        }
        assert!(out[keys.len()..].iter().all(|o| *o == Some(u32::MAX)));
    }
}

fn v4(a: u32) -> u128 {
    a as u128
}

fn tcp4(dst: u32, len: u8, port: u16) -> Match {
    Match {
        family: Some(4),
        dst_ip: Some((v4(dst), len)),
        proto: Some(6),
        dst_port: Some((port, port)),
        ..Default::default()
    }
}

fn key4(src: u32, dst: u32, proto: u8, sport: u16, dport: u16) -> AclKey {
    AclKey {
        ethertype: 0x0800,
        family: 4,
        src_ip: v4(src),
        dst_ip: v4(dst),
        proto,
        src_port: sport,
        dst_port: dport,
        ..Default::default()
    }
}

#[test]
fn classifier_is_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<Classifier>();
}

#[test]
fn empty_list_matches_nothing() {
    let c = Classifier::compile(&[]);
    assert!(c.is_empty());
    assert_eq!(c.len(), 0);
    assert_eq!(c.lookup(&AclKey::default()), None);
    assert_eq!(c.stats().tables, 0);
}

#[test]
fn any_matches_everything() {
    let rules = [Match::default()];
    let c = Classifier::compile(&rules);
    assert_eq!(c.lookup(&AclKey::default()), Some(0));
    assert_eq!(c.lookup(&key4(1, 2, 17, 3, 4)), Some(0));
}

#[test]
fn field_macs() {
    let a = [0x02, 0, 0, 0, 0, 1];
    let b = [0x02, 0, 0, 0, 0, 2];
    let oui = [0x00, 0x1b, 0x21, 0, 0, 0];
    let oui_mask = [0xff, 0xff, 0xff, 0, 0, 0];
    let all = [0xff; 6];
    let rules = [
        Match {
            dst_mac: Some((a, all)),
            ..Default::default()
        },
        Match {
            src_mac: Some((oui, oui_mask)),
            ..Default::default()
        },
        // Odd mask: only the group bit of the destination.
        Match {
            dst_mac: Some(([0x01, 0, 0, 0, 0, 0], [0x01, 0, 0, 0, 0, 0])),
            ..Default::default()
        },
        // Value bits outside the mask are ignored.
        Match {
            src_mac: Some(([0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff], [0, 0, 0, 0, 0, 0xff])),
            ..Default::default()
        },
    ];
    let k = |dst: [u8; 6], src: [u8; 6]| AclKey {
        dst_mac: dst,
        src_mac: src,
        ..Default::default()
    };
    let c = check(&rules, &[]);
    assert_eq!(c.lookup(&k(a, b)), Some(0));
    assert_eq!(c.lookup(&k(b, [0x00, 0x1b, 0x21, 9, 9, 9])), Some(1));
    assert_eq!(c.lookup(&k(b, [0x00, 0x1b, 0x22, 9, 9, 9])), None);
    assert_eq!(c.lookup(&k([0xff; 6], b)), Some(2));
    assert_eq!(c.lookup(&k(b, [0, 0, 0, 0, 0, 0xff])), Some(3));
    assert_eq!(c.lookup(&k(b, [0, 0, 0, 0, 0, 0xfe])), None);
}

#[test]
fn field_ethertype_and_vlan() {
    let rules = [
        Match {
            ethertype: Some(0x0806),
            vlan: Some((10, 10)),
            ..Default::default()
        },
        Match {
            vlan: Some((100, 199)),
            ..Default::default()
        },
        Match {
            ethertype: Some(0x86dd),
            ..Default::default()
        },
        // Empty range: never matches.
        Match {
            vlan: Some((5, 4)),
            ..Default::default()
        },
    ];
    let k = |e: u16, v: u16| AclKey {
        ethertype: e,
        vlan: v,
        ..Default::default()
    };
    let c = check(&rules, &[]);
    assert_eq!(c.lookup(&k(0x0806, 10)), Some(0));
    assert_eq!(c.lookup(&k(0x0806, 11)), None);
    assert_eq!(c.lookup(&k(0x0806, 100)), Some(1));
    assert_eq!(c.lookup(&k(0x0800, 199)), Some(1));
    assert_eq!(c.lookup(&k(0x0800, 200)), None);
    assert_eq!(c.lookup(&k(0x86dd, 200)), Some(2));
    assert_eq!(c.lookup(&k(0, 4)), None);
    assert_eq!(c.lookup(&k(0, 5)), None);
    assert_eq!(c.stats().unmatchable, 1);
}

#[test]
fn field_family() {
    let rules = [
        Match {
            family: Some(6),
            ..Default::default()
        },
        Match {
            family: Some(0),
            ..Default::default()
        },
    ];
    let c = check(&rules, &[]);
    let mut k = AclKey::default();
    assert_eq!(c.lookup(&k), Some(1));
    k.family = 6;
    assert_eq!(c.lookup(&k), Some(0));
    k.family = 4;
    assert_eq!(c.lookup(&k), None);
}

#[test]
fn field_ipv4_prefixes_nest_and_normalise() {
    let rules = [
        // Host bits set: normalised to 10.1.2.0/24.
        Match {
            family: Some(4),
            src_ip: Some((v4(0x0a01_02ff), 24)),
            dst_ip: Some((v4(0xc0a8_0001), 32)),
            ..Default::default()
        },
        Match {
            family: Some(4),
            src_ip: Some((v4(0x0a01_0000), 16)),
            ..Default::default()
        },
        // Length past the width clamps to /32; bits above 32 ignored.
        Match {
            family: Some(4),
            dst_ip: Some((1u128 << 100 | v4(0x0b00_0001), 200)),
            ..Default::default()
        },
        Match {
            family: Some(4),
            src_ip: Some((0, 0)),
            ..Default::default()
        },
    ];
    let c = check(&rules, &[]);
    assert_eq!(c.lookup(&key4(0x0a01_0203, 0xc0a8_0001, 6, 1, 2)), Some(0));
    assert_eq!(c.lookup(&key4(0x0a01_0203, 0xc0a8_0002, 6, 1, 2)), Some(1));
    assert_eq!(c.lookup(&key4(0x0a01_0303, 0xc0a8_0001, 6, 1, 2)), Some(1));
    assert_eq!(c.lookup(&key4(0x0a02_0303, 0x0b00_0001, 6, 1, 2)), Some(2));
    assert_eq!(c.lookup(&key4(0x0a02_0303, 0x0b00_0002, 6, 1, 2)), Some(3));
    let mut k6 = key4(0x0a01_0203, 0xc0a8_0001, 6, 1, 2);
    k6.family = 6;
    assert_eq!(c.lookup(&k6), None);
}

#[test]
fn field_proto_ports_flags_dscp() {
    let rules = [
        // tcp any any eq 22 established-ish: ACK set.
        Match {
            family: Some(4),
            proto: Some(6),
            dst_port: Some((22, 22)),
            tcp_flags: Some((0x10, 0x10)),
            ..Default::default()
        },
        // SYN without ACK to 22.
        Match {
            family: Some(4),
            proto: Some(6),
            dst_port: Some((22, 22)),
            tcp_flags: Some((0x02, 0x12)),
            ..Default::default()
        },
        Match {
            family: Some(4),
            proto: Some(17),
            src_port: Some((1024, 65535)),
            dst_port: Some((0, 1023)),
            ..Default::default()
        },
        Match {
            family: Some(4),
            proto: Some(17),
            dst_port: Some((5000, 5100)),
            ..Default::default()
        },
        // ICMP echo request (type 8 in src_port, code 0 in dst_port).
        Match {
            family: Some(4),
            proto: Some(1),
            src_port: Some((8, 8)),
            dst_port: Some((0, 0)),
            ..Default::default()
        },
        Match {
            family: Some(4),
            dscp: Some(46),
            ..Default::default()
        },
        // Flag value outside the mask: never matches.
        Match {
            family: Some(4),
            tcp_flags: Some((0x01, 0x02)),
            ..Default::default()
        },
    ];
    let c = check(&rules, &[]);
    let mut k = key4(1, 2, 6, 40000, 22);
    k.tcp_flags = 0x18;
    assert_eq!(c.lookup(&k), Some(0));
    k.tcp_flags = 0x02;
    assert_eq!(c.lookup(&k), Some(1));
    k.tcp_flags = 0x01;
    assert_eq!(c.lookup(&k), None);
    k.dst_port = 23;
    k.tcp_flags = 0x10;
    assert_eq!(c.lookup(&k), None);
    assert_eq!(c.lookup(&key4(1, 2, 17, 1024, 53)), Some(2));
    assert_eq!(c.lookup(&key4(1, 2, 17, 1023, 53)), None);
    assert_eq!(c.lookup(&key4(1, 2, 17, 1024, 1024)), None);
    assert_eq!(c.lookup(&key4(1, 2, 17, 1, 5000)), Some(3));
    assert_eq!(c.lookup(&key4(1, 2, 17, 1, 5100)), Some(3));
    assert_eq!(c.lookup(&key4(1, 2, 17, 1, 5101)), None);
    assert_eq!(c.lookup(&key4(1, 2, 1, 8, 0)), Some(4));
    assert_eq!(c.lookup(&key4(1, 2, 1, 0, 0)), None);
    let mut k = key4(1, 2, 47, 0, 0);
    k.dscp = 46;
    assert_eq!(c.lookup(&k), Some(5));
    k.dscp = 0;
    assert_eq!(c.lookup(&k), None);
    assert_eq!(c.stats().unmatchable, 1);
}

#[test]
fn first_match_wins_over_more_specific_later_rule() {
    let rules = [
        Match {
            family: Some(4),
            dst_ip: Some((v4(0x0a00_0000), 8)),
            ..Default::default()
        },
        tcp4(0x0a00_0001, 32, 80),
    ];
    let c = check(&rules, &[]);
    assert_eq!(c.lookup(&key4(9, 0x0a00_0001, 6, 1, 80)), Some(0));
}

/// The acceptance shape: 10,000 denies of TCP to a host or /24 on
/// distinct, non-sequential ports, then permit any.
#[test]
fn ten_thousand_denies_then_permit_any() {
    const N: usize = 10_000;
    let mut rules = Vec::with_capacity(N + 1);
    let mut r = StdRng::seed_from_u64(10_000);
    let mut ports: Vec<u16> = (1..=u16::MAX).collect();
    for i in (1..ports.len()).rev() {
        ports.swap(i, r.gen_range(0..=i));
    }
    for (i, &port) in ports.iter().take(N).enumerate() {
        let (dst, len) = if i % 2 == 0 {
            (0xc000_0200 | (i as u32 % 200), 32)
        } else {
            (0x0a00_0000 | (i as u32 % 256) << 8, 24)
        };
        rules.push(tcp4(dst, len, port));
    }
    rules.push(Match::default());
    let c = Classifier::compile(&rules);
    let last = N - 1;
    let m = &rules[last];
    let (dst, _) = m.dst_ip.unwrap();
    let port = m.dst_port.unwrap().0;
    // The 10,000th deny matches exactly its traffic.
    assert_eq!(
        c.lookup(&key4(0x0102_0304, dst as u32 | 0x7f, 6, 999, port)),
        Some(last as u32)
    );
    assert_eq!(
        c.lookup(&key4(0x0102_0304, dst as u32 | 0x7f, 17, 999, port)),
        Some(N as u32)
    );
    assert_eq!(
        c.lookup(&key4(0x0102_0304, dst as u32 ^ 0x100, 6, 999, port)),
        Some(N as u32)
    );
    // Every deny, on its own traffic; and keys matching none hit the
    // permit.
    for (i, m) in rules[..N].iter().enumerate() {
        let d = m.dst_ip.unwrap().0 as u32;
        let p = m.dst_port.unwrap().0;
        assert_eq!(c.lookup(&key4(7, d, 6, 1, p)), Some(i as u32));
    }
    for &p in &ports[N..] {
        let k = key4(7, 0x0a00_0101, 6, 1, p);
        assert_eq!(c.lookup(&k), Some(N as u32));
        assert_eq!(linear(&rules, &k), Some(N as u32));
    }
    let s = c.stats();
    assert!(s.tables <= 4, "{s:?}");
    assert!(s.largest_bucket <= BUCKET_CAP);
}

#[test]
fn ipv6_list() {
    let p = |s: u128, l: u8| Some((s, l));
    let base: u128 = 0x2001_0db8 << 96;
    let rules = [
        Match {
            family: Some(6),
            src_ip: p(base | 1, 128),
            ..Default::default()
        },
        Match {
            family: Some(6),
            dst_ip: p(base | 0xffff << 64, 64),
            proto: Some(6),
            dst_port: Some((443, 443)),
            ..Default::default()
        },
        Match {
            family: Some(6),
            src_ip: p(base, 32),
            dst_ip: p(base | 0x1234 << 80, 48),
            proto: Some(17),
            ..Default::default()
        },
        // ICMPv6 neighbour solicitation (type 135).
        Match {
            family: Some(6),
            proto: Some(58),
            src_port: Some((135, 136)),
            ..Default::default()
        },
        // Length past 128 clamps.
        Match {
            family: Some(6),
            dst_ip: p(base | 9, 255),
            ..Default::default()
        },
        Match {
            family: Some(6),
            src_ip: p(0, 0),
            ..Default::default()
        },
    ];
    let k = |src: u128, dst: u128, proto: u8, sp: u16, dp: u16| AclKey {
        ethertype: 0x86dd,
        family: 6,
        src_ip: src,
        dst_ip: dst,
        proto,
        src_port: sp,
        dst_port: dp,
        ..Default::default()
    };
    let c = check(&rules, &[]);
    assert_eq!(c.lookup(&k(base | 1, 5, 6, 1, 1)), Some(0));
    assert_eq!(
        c.lookup(&k(base | 2, base | 0xffff << 64 | 7, 6, 1, 443)),
        Some(1)
    );
    assert_eq!(
        c.lookup(&k(base | 2, base | 0xfffe << 64 | 7, 6, 1, 443)),
        Some(5)
    );
    assert_eq!(
        c.lookup(&k(base | 2, base | 0x1234 << 80 | 1, 17, 1, 1)),
        Some(2)
    );
    assert_eq!(
        c.lookup(&k(base ^ 1 << 96, base | 0x1234 << 80, 17, 1, 1)),
        Some(5)
    );
    assert_eq!(c.lookup(&k(3, 4, 58, 136, 0)), Some(3));
    assert_eq!(c.lookup(&k(3, base | 9, 17, 1, 0)), Some(4));
    // An IPv4 key with the same low bits does not match IPv6 rules.
    let mut k4 = k(base | 1, 5, 6, 1, 1);
    k4.family = 4;
    assert_eq!(c.lookup(&k4), None);
}

// ---- randomized exactness ----

/// Small pools so that prefixes nest, ports overlap and keys collide.
struct Gen {
    r: StdRng,
    v4: Vec<u32>,
    v6: Vec<u128>,
    macs: Vec<[u8; 6]>,
    ports: Vec<u16>,
    /// Whether `rule` may return a rule with no field (a catch-all,
    /// which shadows every later rule).
    catch_alls: bool,
}

impl Gen {
    fn new(seed: u64) -> Gen {
        let mut r = StdRng::seed_from_u64(seed);
        let v4 = (0..6)
            .map(|_| r.gen::<u32>() & 0xffff_f0f0 | 0x0a00_0000)
            .collect();
        let v6 = (0..6)
            .map(|_| (0x2001_0db8u128 << 96) | (r.gen::<u128>() & 0xff00_ff00_0000_0000_0000_00ff))
            .collect();
        let macs = (0..4).map(|_| r.gen()).collect();
        let ports = (0..6).map(|_| r.gen_range(0..2000)).collect();
        Gen {
            r,
            v4,
            v6,
            macs,
            ports,
            catch_alls: true,
        }
    }

    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.r.gen_range(0..v.len())]
    }

    fn prefix(&mut self, fam: u8) -> (u128, u8) {
        let r = self.r.gen_range(0..20);
        if fam == 6 {
            let a = self.pick(&self.v6.clone());
            let len = [0, 16, 32, 40, 48, 56, 64, 100, 127, 128, 129, 200][r % 12];
            (a ^ (self.r.gen::<u128>() & 1), len)
        } else {
            let a = self.pick(&self.v4.clone()) as u128;
            let len = [
                0, 8, 12, 16, 20, 23, 24, 25, 28, 30, 31, 32, 32, 33, 40, 24, 16,
            ][r % 17];
            // Sometimes junk above bit 32.
            let junk = if r == 19 { 1u128 << 77 } else { 0 };
            (a ^ (self.r.gen::<u128>() & 0x101) | junk, len)
        }
    }

    fn range(&mut self) -> (u16, u16) {
        match self.r.gen_range(0..8) {
            0 => (0, 1023),
            1 => (1024, 65535),
            2 => {
                let p = self.pick(&self.ports.clone());
                (p, p.saturating_add(self.r.gen_range(0..300)))
            }
            3 => {
                let p = self.pick(&self.ports.clone());
                (p + 1, p) // empty
            }
            _ => {
                let p = self.pick(&self.ports.clone());
                (p, p)
            }
        }
    }

    fn mac(&mut self) -> ([u8; 6], [u8; 6]) {
        let v = self.pick(&self.macs.clone());
        let m = match self.r.gen_range(0..4) {
            0 => [0xff, 0xff, 0xff, 0, 0, 0],
            1 => self.r.gen(),
            _ => [0xff; 6],
        };
        (v, m)
    }

    fn rule(&mut self) -> Match {
        let mut m = Match::default();
        let kind = self.r.gen_range(0..10);
        if kind < 2 {
            // L2 only.
            if self.r.gen_bool(0.5) {
                m.dst_mac = Some(self.mac());
            }
            if self.r.gen_bool(0.4) {
                m.src_mac = Some(self.mac());
            }
            if self.r.gen_bool(0.4) {
                m.ethertype = Some([0x0800, 0x86dd, 0x0806][self.r.gen_range(0..3)]);
            }
            if self.r.gen_bool(0.3) {
                let v = self.r.gen_range(0..20);
                m.vlan = Some((v, v + self.r.gen_range(0..4)));
            }
            if self.r.gen_bool(0.1) {
                m.family = Some([0, 4, 6][self.r.gen_range(0..3)]);
            }
            if !self.catch_alls && m == Match::default() {
                m.ethertype = Some(0x0806);
            }
            return m;
        }
        let fam = match kind {
            2..=5 => 4,
            6..=8 => 6,
            _ => 0,
        };
        if fam != 0 {
            m.family = Some(fam);
        }
        // fam 0: family-less rule with L3/L4 fields (read as IPv4).
        let f = if fam == 0 { 4 } else { fam };
        if self.r.gen_bool(0.6) {
            m.src_ip = Some(self.prefix(f));
        }
        if self.r.gen_bool(0.7) {
            m.dst_ip = Some(self.prefix(f));
        }
        if self.r.gen_bool(0.7) {
            m.proto = Some([6, 17, 1, 58, 6, 17][self.r.gen_range(0..6)]);
        }
        if self.r.gen_bool(0.3) {
            m.src_port = Some(self.range());
        }
        if self.r.gen_bool(0.6) {
            m.dst_port = Some(self.range());
        }
        if self.r.gen_bool(0.1) {
            let mask = self.r.gen::<u8>();
            let v = if self.r.gen_bool(0.9) {
                self.r.gen::<u8>() & mask
            } else {
                self.r.gen()
            };
            m.tcp_flags = Some((v, mask));
        }
        if self.r.gen_bool(0.1) {
            m.dscp = Some([0, 10, 46][self.r.gen_range(0..3)]);
        }
        if self.r.gen_bool(0.1) {
            m.vlan = Some((0, self.r.gen_range(0..10)));
        }
        if self.r.gen_bool(0.05) {
            m.dst_mac = Some(self.mac());
        }
        if self.r.gen_bool(0.05) {
            m.fragment = Some(self.r.gen_bool(0.5));
        }
        m
    }

    fn in_range(&mut self, r: Option<(u16, u16)>) -> u16 {
        match r {
            Some((lo, hi)) if lo <= hi => {
                // Ends of the range are where off-by-ones live.
                match self.r.gen_range(0..4) {
                    0 => lo,
                    1 => hi,
                    _ => self.r.gen_range(lo..=hi),
                }
            }
            _ => self.r.gen(),
        }
    }

    fn in_prefix(&mut self, p: Option<(u128, u8)>, fam: u8) -> u128 {
        let width = if fam == 6 { 128 } else { 32 };
        let rnd = if fam == 6 {
            self.r.gen::<u128>()
        } else {
            self.r.gen::<u32>() as u128
        };
        match p {
            Some((a, l)) => {
                let m = ip_mask(width, l as u32);
                a & m | rnd & !m
            }
            None => {
                if fam == 6 {
                    self.pick(&self.v6.clone()) ^ (rnd & 0xffff)
                } else {
                    self.pick(&self.v4.clone()) as u128 ^ (rnd & 0xffff)
                }
            }
        }
    }

    /// A key matching `m` (when it can match), then maybe perturbed.
    fn key_for(&mut self, m: &Match) -> AclKey {
        let fam = m.family.unwrap_or([4, 6, 0][self.r.gen_range(0..3)] as u8);
        let mac = |g: &mut Gen, f: Option<([u8; 6], [u8; 6])>| match f {
            Some((v, mask)) => {
                let x: [u8; 6] = g.r.gen();
                std::array::from_fn(|i| v[i] & mask[i] | x[i] & !mask[i])
            }
            None => g.pick(&g.macs.clone()),
        };
        let mut k = AclKey {
            src_mac: mac(self, m.src_mac),
            dst_mac: mac(self, m.dst_mac),
            ethertype: m.ethertype.unwrap_or(match fam {
                4 => 0x0800,
                6 => 0x86dd,
                _ => 0x0806,
            }),
            vlan: self.in_range(m.vlan.or(Some((0, 20)))),
            family: fam,
            src_ip: self.in_prefix(m.src_ip, fam),
            dst_ip: self.in_prefix(m.dst_ip, fam),
            proto: m.proto.unwrap_or([6, 17, 1, 58][self.r.gen_range(0..4)]),
            src_port: self.in_range(m.src_port),
            dst_port: self.in_range(m.dst_port),
            tcp_flags: match m.tcp_flags {
                Some((v, mask)) => v & mask | self.r.gen::<u8>() & !mask,
                None => self.r.gen(),
            },
            dscp: m.dscp.unwrap_or([0, 10, 46][self.r.gen_range(0..3)]),
            fragment: m.fragment.unwrap_or(self.r.gen_bool(0.1)),
        };
        // Perturb one field half the time: near misses.
        match self.r.gen_range(0..20) {
            0 => k.src_ip ^= 1 << self.r.gen_range(0..32),
            1 => k.dst_ip ^= 1 << self.r.gen_range(0..32),
            2 => k.dst_port = k.dst_port.wrapping_add(1),
            3 => k.src_port = k.src_port.wrapping_sub(1),
            4 => k.proto = self.r.gen(),
            5 => k.family = [0, 4, 6][self.r.gen_range(0..3)],
            6 => k.vlan = k.vlan.wrapping_add(1),
            7 => k.dst_mac[5] ^= 1,
            8 => k.tcp_flags ^= 1 << self.r.gen_range(0..8),
            9 => k.dscp ^= 2,
            10 => k.src_ip |= 1 << 100,
            11 => k.fragment = !k.fragment,
            _ => {}
        }
        k
    }

    fn random_key(&mut self) -> AclKey {
        let fam = [0u8, 4, 6][self.r.gen_range(0..3)];
        let mut k = self.key_for(&Match::default());
        k.family = fam;
        k.src_port = self.r.gen();
        k.dst_port = self.r.gen();
        k
    }
}

fn random_round(seed: u64, n_rules: usize, n_keys: usize) -> Classifier {
    random_round_with(seed, n_rules, n_keys, true)
}

fn random_round_with(seed: u64, n_rules: usize, n_keys: usize, catch_alls: bool) -> Classifier {
    let mut g = Gen::new(seed);
    g.catch_alls = catch_alls;
    let mut rules: Vec<Match> = (0..n_rules).map(|_| g.rule()).collect();
    if g.r.gen_bool(0.3) {
        rules.push(Match::default());
    }
    let mut keys = Vec::with_capacity(n_keys);
    for i in 0..n_keys {
        if rules.is_empty() || i % 8 == 0 {
            keys.push(g.random_key());
        } else {
            let m = rules[g.r.gen_range(0..rules.len())].clone();
            keys.push(g.key_for(&m));
        }
    }
    check(&rules, &keys)
}

/// Random rule lists mixing every field type against the linear scan.
#[test]
fn random_lists_match_linear_scan() {
    for seed in 0..400u64 {
        let n = [0, 1, 2, 5, 10, 30, 100, 300][seed as usize % 8];
        random_round(seed, n, 400);
    }
}

/// Larger random lists: enough rules to fill buckets, build many tables
/// and reach the table bound.
#[test]
fn random_large_lists_match_linear_scan() {
    let mut overflowed = false;
    for seed in 0..5u64 {
        // No catch-all before the end: it would shadow the rest.
        let c = random_round_with(1000 + seed, 2000 + 1000 * seed as usize, 2500, false);
        let s = c.stats();
        overflowed |= s.overflow_rules > 0;
        assert!(s.tables <= MAX_TABLES + 4, "{s:?}");
    }
    assert!(overflowed, "no list reached the table bound");
}

/// Many rules that agree on every hashed bit (only TCP flags differ):
/// one long bucket, still exact.
#[test]
fn identical_hash_keys_overflow_a_bucket() {
    let mut rules: Vec<Match> = (0..=255u8)
        .map(|f| Match {
            family: Some(4),
            proto: Some(6),
            tcp_flags: Some((f, 0xff)),
            ..Default::default()
        })
        .collect();
    rules.push(Match::default());
    let keys: Vec<AclKey> = (0..=255u8)
        .map(|f| {
            let mut k = key4(1, 2, 6, 3, 4);
            k.tcp_flags = f;
            k
        })
        .collect();
    let c = check(&rules, &keys);
    assert!(c.stats().tables <= MAX_TABLES + 2);
}

/// Compile at the sizes of the requirement, spot-checked against the scan.
#[test]
fn compiles_32k_rules() {
    let mut g = Gen::new(32_292);
    let mut r = StdRng::seed_from_u64(5);
    let mut rules: Vec<Match> = (0..32_291)
        .map(|i| {
            if i % 3 == 0 {
                g.rule()
            } else {
                let mut m = tcp4(r.gen(), [24, 32][i % 2], r.gen());
                if i % 5 == 0 {
                    m.src_ip = Some((r.gen::<u32>() as u128, r.gen_range(8..=32)));
                }
                m
            }
        })
        .collect();
    rules.push(Match::default());
    let t = std::time::Instant::now();
    let c = Classifier::compile(&rules);
    eprintln!(
        "compiled {} rules in {:?}: {:?}",
        rules.len(),
        t.elapsed(),
        (c.stats().tables, c.memory_bytes())
    );
    let keys: Vec<AclKey> = (0..3000)
        .map(|i| {
            if i % 4 == 0 {
                g.random_key()
            } else {
                let m = rules[r.gen_range(0..rules.len())].clone();
                g.key_for(&m)
            }
        })
        .collect();
    for k in &keys {
        assert_eq!(c.lookup(k), linear(&rules, k), "{k:?}");
    }
    check_batch(&c, &rules, &keys);
    assert_one_block(&c);
}

/// Every table's arrays lie in the classifier's one block, apart from
/// each other; the block is on 2 MB pages (advised, whole aligned pages)
/// exactly when it is [`HUGE_MIN_BYTES`] or more.
fn assert_one_block(c: &Classifier) {
    let ((start, len), arrays) = c.layout();
    let mut arrays: Vec<(usize, usize)> = arrays.into_iter().filter(|a| a.1 > 0).collect();
    assert!(!arrays.is_empty() || c.stats().tables == 0);
    arrays.sort_unstable();
    for &(a, n) in &arrays {
        assert!(
            a >= start && a + n <= start + len,
            "array {a:#x}+{n} outside block {start:#x}+{len}"
        );
        assert_eq!(a % 64, 0, "array not on a cache line");
    }
    for w in arrays.windows(2) {
        assert!(w[0].0 + w[0].1 <= w[1].0, "arrays overlap: {w:?}");
    }
    let used: usize = arrays.iter().map(|a| a.1).sum();
    assert!(used <= len);
    let large = used >= HUGE_MIN_BYTES;
    match c.advised_range() {
        Some((a, n)) => {
            assert!(large, "{used} bytes advised for huge pages");
            assert_eq!((a, a % crate::huge::HUGE_PAGE), (start, 0));
            assert_eq!(n % crate::huge::HUGE_PAGE, 0);
            assert!(n >= used);
            let huge = c.huge_backed_bytes().expect("smaps readable");
            assert!(huge <= n, "{huge} > {n}");
            eprintln!("block {len} bytes ({used} used), {huge} on 2 MB pages");
        }
        None => {
            assert!(!large, "{used} bytes not advised");
            assert_eq!(c.huge_backed_bytes(), Some(0));
            // Heap: no more than the arrays and their alignment.
            assert!(len <= used + 64 * arrays.len().max(1), "{len} for {used}");
        }
    }
}

/// Small classifiers (the random lists: up to thousands of rules) are one
/// heap block each, not a 2 MB page; large ones (a 32,292-rule IPv6 list:
/// `compiles_32k_rules` does IPv4) are one advised block whose answers
/// are the scan's.
#[test]
fn block_is_one_allocation_on_huge_pages_when_large() {
    for (seed, n) in [(1, 0), (2, 1), (3, 40), (4, 300), (5, 3_000)] {
        let c = random_round(seed, n, 200);
        assert!(c.memory_bytes() < HUGE_MIN_BYTES);
        assert_eq!(c.advised_range(), None);
        assert_one_block(&c);
    }
    // 16,000 distinct /64 + port rules in front of a cut-stressing list.
    let (list, keys) = cut_list(11, 16_000, &[6]);
    let mut rules: Vec<Match> = (0..16_000u32)
        .map(|i| Match {
            family: Some(6),
            dst_ip: Some(((0x2001_0db9u128 << 96) | (i as u128) << 64, 64)),
            proto: Some(17),
            dst_port: Some((i as u16, i as u16)),
            ..Match::default()
        })
        .collect();
    rules.extend(list);
    let c = check(&rules, &keys);
    assert!(c.memory_bytes() >= HUGE_MIN_BYTES, "{}", c.memory_bytes());
    assert!(c.advised_range().is_some());
    assert_one_block(&c);
}

/// First matching rule of `rules` (each with its fragment policy) by the
/// linear reference.
fn linear_policy(rules: &[(Match, L4OnFragments)], k: &AclKey) -> Option<u32> {
    rules
        .iter()
        .position(|(m, p)| m.matches_under_policy(k, *p))
        .map(|i| i as u32)
}

/// Compile `rules` through [`fragment_lines`]; returns the classifier and
/// the rule of each line.
fn compile_policy(rules: &[(Match, L4OnFragments)]) -> (Classifier, Vec<u32>) {
    let mut lines = Vec::new();
    let mut line_rule = Vec::new();
    for (i, (m, p)) in rules.iter().enumerate() {
        for l in fragment_lines(m, *p) {
            lines.push(l);
            line_rule.push(i as u32);
        }
    }
    (Classifier::compile(&lines), line_rule)
}

/// As a non-initial fragment carries it: no ports, no flags.
fn as_fragment(mut k: AclKey) -> AclKey {
    k.fragment = true;
    k.src_port = 0;
    k.dst_port = 0;
    k.tcp_flags = 0;
    k
}

/// Issue 13: `deny udp 203.0.113.0/24 destination-port 0-1023; permit`
/// dropped the later fragments of a permitted datagram to port 5000 (the
/// key carried port 0, inside 0-1023). Under the policy a deny that tests
/// L4 fields never matches a non-initial fragment, a permit that does
/// matches it on its L3 fields, and rules without L4 fields match as
/// always.
#[test]
fn issue13_non_initial_fragments_follow_the_policy() {
    use L4OnFragments::{MatchL3, NoMatch};
    let net: u32 = 0xcb00_7100; // 203.0.113.0
    let deny_low = Match {
        family: Some(4),
        src_ip: Some((net as u128, 24)),
        proto: Some(17),
        dst_port: Some((0, 1023)),
        ..Default::default()
    };
    let first = key4(net | 5, 0x0a00_0001, 17, 40000, 5000);
    let later = as_fragment(first);
    // The defect, without the policy: the fragment's port 0 is in 0-1023.
    assert!(deny_low.matches(&later));
    for (deny, permit) in [
        (deny_low.clone(), Match::default()),
        (
            Match {
                src_port: Some((0, 1023)),
                dst_port: None,
                ..deny_low.clone()
            },
            Match::default(),
        ),
    ] {
        let rules = [(deny, NoMatch), (permit, MatchL3)];
        let (c, line_rule) = compile_policy(&rules);
        let rule = |k: &AclKey| c.lookup(k).map(|l| line_rule[l as usize]);
        assert_eq!(rule(&first), Some(1));
        assert_eq!(rule(&later), Some(1), "later fragment denied");
        // A datagram the deny covers: its first fragment is denied.
        let low = key4(net | 5, 0x0a00_0001, 17, 53, 53);
        assert_eq!(rule(&low), Some(0));
        assert_eq!(linear_policy(&rules, &later), Some(1));
    }
    // `permit udp any host 10.0.0.1 destination-port 5000` then the
    // implicit deny: the later fragments of UDP to 10.0.0.1 pass (the
    // permit matches them on addresses and protocol), those to another
    // host or of another protocol do not.
    let permit = Match {
        family: Some(4),
        dst_ip: Some((0x0a00_0001, 32)),
        proto: Some(17),
        dst_port: Some((5000, 5000)),
        ..Default::default()
    };
    let rules = [(permit, MatchL3)];
    let (c, line_rule) = compile_policy(&rules);
    let rule = |k: &AclKey| c.lookup(k).map(|l| line_rule[l as usize]);
    assert_eq!(rule(&first), Some(0));
    assert_eq!(rule(&later), Some(0));
    assert_eq!(rule(&key4(1, 0x0a00_0001, 17, 1, 5001)), None);
    assert_eq!(rule(&as_fragment(key4(1, 0x0a00_0002, 17, 1, 5000))), None);
    assert_eq!(rule(&as_fragment(key4(1, 0x0a00_0001, 6, 1, 5000))), None);
    // A rule that says `fragment: true` (the `fragments` keyword) meets
    // only non-initial fragments; rules without L4 fields meet both.
    let frag_only = Match {
        family: Some(4),
        fragment: Some(true),
        ..Default::default()
    };
    let rules = [(frag_only, NoMatch), (Match::default(), MatchL3)];
    let (c, _) = compile_policy(&rules);
    assert_eq!(c.lookup(&later), Some(0));
    assert_eq!(c.lookup(&first), Some(1));
    // IPv6 the same way.
    let deny6 = Match {
        family: Some(6),
        proto: Some(17),
        dst_port: Some((0, 1023)),
        ..Default::default()
    };
    let rules = [(deny6, NoMatch), (Match::default(), MatchL3)];
    let (c, line_rule) = compile_policy(&rules);
    let mut k6 = key4(1, 2, 17, 1000, 5000);
    k6.family = 6;
    k6.ethertype = 0x86dd;
    k6.src_ip = 0x2001_0db8 << 96;
    assert_eq!(c.lookup(&k6).map(|l| line_rule[l as usize]), Some(1));
    assert_eq!(
        c.lookup(&as_fragment(k6)).map(|l| line_rule[l as usize]),
        Some(1)
    );
    k6.dst_port = 53;
    assert_eq!(c.lookup(&k6).map(|l| line_rule[l as usize]), Some(0));
}

/// Random lists with random actions (permit: L3 match on fragments;
/// deny: no match), keys half of them non-initial fragments: the compiled
/// lines agree with the linear reference of the policy.
#[test]
fn issue13_random_lists_follow_the_fragment_policy() {
    for seed in 0..300u64 {
        let mut g = Gen::new(13_000 + seed);
        let n = [1, 2, 5, 10, 30, 100][seed as usize % 6];
        let mut rules: Vec<(Match, L4OnFragments)> = (0..n)
            .map(|_| {
                let p = if g.r.gen_bool(0.5) {
                    L4OnFragments::MatchL3
                } else {
                    L4OnFragments::NoMatch
                };
                (g.rule(), p)
            })
            .collect();
        if g.r.gen_bool(0.3) {
            rules.push((Match::default(), L4OnFragments::MatchL3));
        }
        let (c, line_rule) = compile_policy(&rules);
        for i in 0..300 {
            let m = rules[g.r.gen_range(0..rules.len())].0.clone();
            let mut k = if i % 8 == 0 {
                g.random_key()
            } else {
                g.key_for(&m)
            };
            if i % 2 == 0 {
                k = as_fragment(k);
            }
            let got = c.lookup(&k).map(|l| line_rule[l as usize]);
            assert_eq!(got, linear_policy(&rules, &k), "seed {seed}, key {k:?}");
        }
    }
}

// ---- the default rule, bins and fixed-width verification ----

/// The first rule that matches every key is the default answer: kept in
/// no table, the rules after it shadowed; rules that merely look wide
/// (a fragment condition, a family) are not it.
#[test]
fn catch_all_rule_is_the_default() {
    let any = Match::default();
    let wide = Match {
        src_port: Some((0, 65535)),
        dst_port: Some((0, 65535)),
        tcp_flags: Some((0, 0)),
        ..Default::default()
    };
    let not_fragments = Match {
        fragment: Some(false),
        ..Default::default()
    };
    let v4_only = Match {
        family: Some(4),
        ..Default::default()
    };
    let mut keys: Vec<AclKey> = Vec::new();
    for (i, fam) in [(0u32, 4u8), (1, 6), (2, 0), (3, 4)] {
        let mut k = key4(7, 0x0a00_0001 + i, 6, 1000, 80 + i as u16);
        k.family = fam;
        keys.push(k);
        keys.push(AclKey {
            fragment: true,
            ..k
        });
        keys.push(AclKey { proto: 17, ..k });
    }
    let rules = vec![
        tcp4(0x0a00_0001, 32, 80),
        not_fragments.clone(),
        v4_only.clone(),
        any.clone(),
        tcp4(0x0a00_0002, 32, 81),
        any.clone(),
    ];
    let in_tables = |s: &ClassifierStats| s.per_table.iter().map(|t| t.rules).sum::<usize>();
    let s = check(&rules, &keys).stats();
    assert_eq!((s.default_rule, s.shadowed, in_tables(&s)), (Some(3), 2, 3));
    // Explicit full ranges and an empty flag mask match everything too.
    let rules = vec![v4_only.clone(), tcp4(0x0a00_0002, 32, 81), wide, any];
    let s = check(&rules, &keys).stats();
    assert_eq!((s.default_rule, s.shadowed, in_tables(&s)), (Some(2), 1, 2));
    // First: every key answers 0, no table at all.
    let s = check(&[Match::default(), not_fragments], &keys).stats();
    assert_eq!((s.default_rule, s.shadowed, s.tables), (Some(0), 1, 0));
    // None: a family-only and a fragment-only rule are not catch-alls.
    let s = check(&[v4_only, tcp4(0x0a00_0002, 32, 81)], &keys).stats();
    assert_eq!(s.default_rule, None);
}

/// Randomized, quickcheck style: random lists (nested and overlapping
/// prefixes, overlapping port ranges, any/exact ports, protocol any,
/// IPv4, IPv6, family-less and L2 rules, catch-alls anywhere) with
/// copies of rules that differ only in unhashed bits (TCP flags, a
/// range's low bits: long buckets), compiled with bins sized for 1 to 64
/// buckets (64: the fewest bins that can hold them), against the linear
/// scan, `lookup` and both batch paths.
#[test]
fn random_lists_with_twins_and_catch_alls_match_linear_scan() {
    let mut long_bucket = false;
    let mut defaulted = false;
    let mut overflowed = false;
    for seed in 0..160u64 {
        compile::TEST_BIN_LOAD.with(|c| c.set([1, 3, 8, 64][seed as usize / 4 % 4]));
        let mut g = Gen::new(5000 + seed);
        let n = [20, 60, 200, 700][seed as usize % 4];
        let mut rules: Vec<Match> = Vec::with_capacity(n + 40);
        for _ in 0..n {
            let m = g.rule();
            // Twins: same hashed bits, other flags or port low bits.
            if g.r.gen_bool(0.15) {
                for _ in 0..g.r.gen_range(1..6) {
                    let mut t = m.clone();
                    if g.r.gen_bool(0.5) {
                        let mask = g.r.gen::<u8>();
                        t.tcp_flags = Some((g.r.gen::<u8>() & mask, mask));
                    } else if let Some((lo, hi)) = t.dst_port {
                        t.dst_port = Some((lo, hi.saturating_add(g.r.gen_range(0..3))));
                    }
                    rules.push(t);
                }
            }
            rules.push(m);
        }
        if g.r.gen_bool(0.3) {
            let at = g.r.gen_range(0..=rules.len());
            rules.insert(at, Match::default());
        }
        let keys: Vec<AclKey> = (0..300)
            .map(|i| {
                if i % 6 == 0 {
                    g.random_key()
                } else {
                    let m = rules[g.r.gen_range(0..rules.len())].clone();
                    g.key_for(&m)
                }
            })
            .collect();
        let c = check(&rules, &keys);
        let s = c.stats();
        long_bucket |= s.largest_bucket > 2;
        defaulted |= s
            .default_rule
            .is_some_and(|d| (d as usize) < rules.len() - 1);
        overflowed |= c.tables.iter().any(|t| t.overflowed_bins() > 0);
    }
    compile::TEST_BIN_LOAD.with(|c| c.set(3));
    assert!(long_bucket && defaulted && overflowed);
}

/// Tables of thousands of buckets compiled into as few bins as can hold
/// them (most bins full, buckets far from their home bin): every rule's
/// own traffic still finds it, and misses (next address, next port, other
/// protocol) find nothing or a later rule; IPv4 and IPv6.
#[test]
fn full_bins_are_walked_to_the_bucket() {
    let mut r = StdRng::seed_from_u64(77);
    for load in [64, 8, 3] {
        compile::TEST_BIN_LOAD.with(|c| c.set(load));
        for fam in [4u8, 6] {
            let mut rules: Vec<Match> = (0..3000)
                .map(|_| {
                    let (a, len) = if fam == 6 {
                        (
                            (0x2001_0db8u128 << 96) | r.gen::<u128>() >> 32,
                            [128, 64][r.gen_range(0..2)],
                        )
                    } else {
                        (r.gen::<u32>() as u128, [32, 24][r.gen_range(0..2)])
                    };
                    Match {
                        family: Some(fam),
                        dst_ip: Some((a, len)),
                        proto: Some([6, 17][r.gen_range(0..2)]),
                        dst_port: Some({
                            let p = r.gen_range(1..60000);
                            (p, p + r.gen_range(0..2))
                        }),
                        ..Default::default()
                    }
                })
                .collect();
            rules.push(Match {
                family: Some(fam),
                proto: Some(17),
                ..Default::default()
            });
            let mut keys = Vec::new();
            for m in &rules[..3000] {
                let (a, _) = m.dst_ip.unwrap();
                let (p, _) = m.dst_port.unwrap();
                let k = AclKey {
                    family: fam,
                    src_ip: 9,
                    dst_ip: a,
                    proto: m.proto.unwrap(),
                    src_port: 1000,
                    dst_port: p,
                    ..Default::default()
                };
                keys.push(k);
                keys.push(AclKey {
                    dst_ip: a ^ 1 << 70 ^ 1 << 20,
                    ..k
                });
                keys.push(AclKey {
                    dst_port: p.wrapping_sub(1),
                    ..k
                });
                keys.push(AclKey {
                    proto: 23 - k.proto,
                    ..k
                });
            }
            let c = check(&rules, &keys);
            if load == 64 {
                let full: usize = c.tables.iter().map(|t| t.overflowed_bins()).sum();
                assert!(full > 10, "{full} full bins");
            }
        }
    }
    compile::TEST_BIN_LOAD.with(|c| c.set(3));
}

// ---- the first level (cut) ----

/// A list that stresses the cut: for one family or both, many tables
/// (prefixes of every length from a pool of networks that nest, some
/// under one /32 for IPv6 so the window must skip it; wide and narrow
/// port ranges; any-address rules; protocol-only rules), priorities
/// interleaved across tables so that a wrongly skipped table changes
/// answers.
fn cut_list(seed: u64, n: usize, fams: &[u8]) -> (Vec<Match>, Vec<AclKey>) {
    let mut r = StdRng::seed_from_u64(seed);
    let nets4: Vec<u32> = (0..40).map(|_| r.gen()).collect();
    let nets6: Vec<u128> = (0..40)
        .map(|_| (0x2001_0db8u128 << 96) | r.gen::<u128>() >> 32)
        .collect();
    let mut rules = Vec::with_capacity(n + 1);
    for _ in 0..n {
        let fam = fams[r.gen_range(0..fams.len())];
        let (width, net): (u32, u128) = if fam == 6 {
            (128, nets6[r.gen_range(0..nets6.len())])
        } else {
            (32, nets4[r.gen_range(0..nets4.len())] as u128)
        };
        let pfx = |r: &mut StdRng| -> Option<(u128, u8)> {
            let len = match r.gen_range(0..10) {
                0..=2 => return None,
                3 => r.gen_range(1..=8),
                4 => r.gen_range(9..=16),
                5 | 6 => r.gen_range(17..=24),
                _ => r.gen_range(25..=32),
            } * (width / 32);
            let noise = r.gen::<u128>() & ((1u128 << (width - 8)) - 1);
            Some((net ^ noise >> r.gen_range(0..8), len as u8))
        };
        let mut m = Match {
            family: Some(fam),
            src_ip: pfx(&mut r),
            dst_ip: pfx(&mut r),
            ..Default::default()
        };
        m.proto = match r.gen_range(0..10) {
            0..=4 => Some(6),
            5..=7 => Some(17),
            8 => Some(if fam == 6 { 58 } else { 1 }),
            _ => None,
        };
        let port = |r: &mut StdRng| -> Option<(u16, u16)> {
            match r.gen_range(0..10) {
                0..=3 => None,
                4 | 5 => {
                    let p = r.gen_range(0..200);
                    Some((p, p))
                }
                6 => Some((0, 1023)),
                7 => Some((1024, u16::MAX)),
                8 => {
                    let lo = r.gen();
                    Some((lo, lo.saturating_add(r.gen_range(0..3000))))
                }
                _ => {
                    // Unaligned wide range: spans many port cells.
                    let lo = r.gen_range(0..30_000);
                    Some((lo, lo + r.gen_range(1000..30_000)))
                }
            }
        };
        if m.proto != Some(1) && m.proto != Some(58) {
            m.dst_port = port(&mut r);
            if r.gen_bool(0.2) {
                m.src_port = port(&mut r);
            }
        }
        rules.push(m);
    }
    // Any-address, any-port rules of a protocol deep in the list, and
    // the closing permit.
    for (i, p) in [(n / 3, 47u8), (2 * n / 3, 17)] {
        rules.insert(
            i,
            Match {
                family: Some(fams[0]),
                proto: Some(p),
                ..Default::default()
            },
        );
    }
    rules.push(Match::default());
    let keys = (0..3000)
        .map(|i| {
            let m = rules[r.gen_range(0..rules.len() - 1)].clone();
            let fam = m.family.unwrap_or(4);
            let width = if fam == 6 { 128 } else { 32 };
            let ip = |r: &mut StdRng, p: Option<(u128, u8)>| {
                let rnd = if fam == 6 {
                    r.gen::<u128>()
                } else {
                    r.gen::<u32>() as u128
                };
                match p {
                    Some((a, l)) => {
                        let mk = ip_mask(width, l as u32);
                        a & mk | rnd & !mk
                    }
                    None => rnd,
                }
            };
            let port = |r: &mut StdRng, p: Option<(u16, u16)>| match p {
                Some((lo, hi)) => [lo, hi, r.gen_range(lo..=hi)][r.gen_range(0..3)],
                None => r.gen(),
            };
            let mut k = AclKey {
                family: fam,
                src_ip: ip(&mut r, m.src_ip),
                dst_ip: ip(&mut r, m.dst_ip),
                proto: m.proto.unwrap_or([6, 17, 47][r.gen_range(0..3)]),
                src_port: port(&mut r, m.src_port),
                dst_port: port(&mut r, m.dst_port),
                ..Default::default()
            };
            // Near misses at cell edges: a flipped address bit, a port
            // just past a range.
            match i % 7 {
                0 => k.dst_ip ^= 1 << r.gen_range(0..width),
                1 => k.src_ip ^= 1 << r.gen_range(0..width),
                2 => k.dst_port = k.dst_port.wrapping_add(1),
                3 => k.dst_port = k.dst_port.wrapping_sub(1),
                _ => {}
            }
            k
        })
        .collect();
    (rules, keys)
}

/// The cut keeps first match exact on lists built to stress it (IPv4,
/// IPv6, both in one list), with `lookup`, `lookup_batch` and the
/// interleaved path, and it is built (for at least one family).
#[test]
fn cut_lists_match_linear_scan() {
    for (seed, fams) in [
        (1u64, &[4u8][..]),
        (2, &[6]),
        (3, &[4, 6]),
        (4, &[4]),
        (5, &[6, 4]),
    ] {
        for n in [300, 3000] {
            let (rules, keys) = cut_list(seed * 100 + n as u64, n, fams);
            let c = check(&rules, &keys);
            let s = c.stats();
            assert!(s.tables >= 3, "{s:?}");
            // A family's cut is left out when it would filter little.
            assert!(!s.cuts.is_empty(), "no cut: {s:?}");
        }
    }
}

/// Where the cut earns its keep: on a list whose rules are specific in
/// different fields (destination, source, port), a key is left only
/// the tables that can hold its match, and a key no rule's cells meet
/// probes nothing.
#[test]
fn cut_leaves_few_tables_per_key() {
    let mut r = StdRng::seed_from_u64(77);
    let mut rules = Vec::new();
    for i in 0..3000u32 {
        let a = r.gen::<u32>() as u128;
        let mut m = Match {
            family: Some(4),
            ..Default::default()
        };
        match i % 3 {
            0 => m.dst_ip = Some((a, 24)),
            1 => m.src_ip = Some((a, 16)),
            _ => {
                m.proto = Some(6);
                let p = r.gen_range(1..u16::MAX);
                m.dst_port = Some((p, p));
            }
        }
        rules.push(m);
    }
    rules.push(Match::default());
    let keys: Vec<AclKey> = (0..2000)
        .map(|_| key4(r.gen(), r.gen(), 6, r.gen(), r.gen()))
        .collect();
    let c = check(&rules, &keys);
    let s = c.stats();
    assert!(s.tables >= 3, "{s:?}");
    let probed: usize = keys.iter().map(|k| c.tables_for(k)).sum();
    assert!(
        probed * 4 < keys.len() * s.tables,
        "{probed} probes for {} keys over {} tables",
        keys.len(),
        s.tables
    );
    // An IPv6 key meets no IPv4 table.
    let mut k6 = key4(1, 2, 6, 3, 4);
    k6.family = 6;
    assert_eq!(c.tables_for(&k6), 0);
}

/// A broad rule early in the list and narrow ones after it, in other
/// tables and cells: the broad one must still win in every cell it
/// spans (a cut that kept only the cell of a range's ends, or of a
/// prefix's first address, fails this).
#[test]
fn cut_keeps_priority_across_cells() {
    for fam in [4u8, 6] {
        // IPv6: the IPv4 layout under 2001:db8::/32.
        let (base, sh, off) = if fam == 6 {
            ((0x2001_0db8u128 << 96) | 0x0a00_0000 << 64, 64, 32)
        } else {
            (0x0a00_0000, 0, 0)
        };
        let mut rules = vec![
            // 0: the broad destination prefix (a /12), any port.
            Match {
                family: Some(fam),
                dst_ip: Some((base, 12 + off)),
                proto: Some(6),
                dst_port: Some((1000, 40_000)),
                ..Default::default()
            },
        ];
        let mut r = StdRng::seed_from_u64(fam as u64);
        for i in 0..2000u32 {
            let d = base | (r.gen::<u32>() as u128 & 0x000f_ffff) << sh;
            rules.push(Match {
                family: Some(fam),
                dst_ip: Some((d, 24 + off)),
                src_ip: (i % 2 == 0).then(|| (r.gen::<u128>(), 16 + off)),
                proto: Some(6),
                dst_port: Some((i as u16 * 20, i as u16 * 20 + 5)),
                ..Default::default()
            });
        }
        rules.push(Match::default());
        let keys: Vec<AclKey> = rules[1..rules.len() - 1]
            .iter()
            .map(|m| {
                let (d, _) = m.dst_ip.unwrap();
                let s = m.src_ip.map_or(r.gen(), |s| s.0);
                let lo = m.dst_port.unwrap().0;
                AclKey {
                    family: fam,
                    src_ip: s,
                    dst_ip: d | 7,
                    proto: 6,
                    dst_port: lo + 2,
                    ..Default::default()
                }
            })
            .collect();
        let c = check(&rules, &keys);
        let broad = keys
            .iter()
            .filter(|k| (1000..=40_000).contains(&k.dst_port))
            .count();
        assert!(broad > 1000);
        for k in &keys {
            let want = if (1000..=40_000).contains(&k.dst_port) {
                0
            } else {
                1
            };
            assert_eq!(c.lookup(k).map(|i| i.min(1)), Some(want), "{k:?}");
        }
    }
}

/// Odd lists compile and stay exact: more than 64 tables (one per
/// family value: no cut, every table probed), families without a cut
/// beside IPv4/IPv6 ones, lengths past the width, empty ranges, full
/// ranges, one rule.
#[test]
fn cut_odd_lists_compile_and_stay_exact() {
    let mut r = StdRng::seed_from_u64(9);
    let mut rules: Vec<Match> = (0..100u8)
        .map(|f| Match {
            family: Some(f),
            dst_ip: Some((r.gen::<u32>() as u128, [8, 24, 40, 255][f as usize % 4])),
            dst_port: Some(if f % 5 == 0 { (9, 3) } else { (0, u16::MAX) }),
            ..Default::default()
        })
        .collect();
    rules.push(Match {
        family: Some(4),
        src_ip: Some((!0, 255)),
        ..Default::default()
    });
    let keys: Vec<AclKey> = (0..3000)
        .map(|i| {
            let m = &rules[i % rules.len()];
            let mut k = key4(r.gen(), m.dst_ip.map_or(7, |d| d.0 as u32), 6, 1, r.gen());
            k.family = m.family.unwrap_or(4);
            if i % 3 == 0 {
                k.dst_ip ^= 1 << r.gen_range(0..32);
            }
            k
        })
        .collect();
    let c = check(&rules, &keys);
    assert!(c.stats().tables > 64 && c.stats().cuts.is_empty());
    // The same families, fewer of them: a cut for IPv4 and IPv6 beside
    // tables of other families.
    rules.retain(|m| m.family.is_some_and(|f| f < 12));
    let c = check(&rules, &keys);
    assert!(c.stats().tables <= 64, "{:?}", c.stats());
    for one in rules.chunks(1) {
        check(one, &keys[..50]);
    }
}
