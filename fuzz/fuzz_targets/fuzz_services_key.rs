//! Fuzz the services stage's frame parser and re-marker: arbitrary frames
//! at arbitrary EtherType offsets. Nothing may panic; a re-marked IPv4
//! header keeps a valid checksum if it had one. A non-initial fragment's
//! key carries no L4 fields, and a list compiled with the fragment policy
//! (`tables::acl::fragment_lines`) decides every key as the linear
//! reference of the policy does (issue 13).
#![no_main]

use pipeline::services::{extract_key, ip_len, tos};
use std::sync::LazyLock;
use tables::acl::{fragment_lines, AclKey, Classifier, L4OnFragments, Match};

/// A small IPv4 + IPv6 list: the deny on a 0-based port range,
/// a permit with ports, a fragments-only deny, an ICMP type, then permit.
fn rules() -> Vec<(Match, L4OnFragments)> {
    use L4OnFragments::{MatchL3, NoMatch};
    let m = |family, proto, dst_port, fragment| Match {
        family: Some(family),
        proto,
        dst_port,
        fragment,
        ..Match::default()
    };
    vec![
        (m(4, Some(17), Some((0, 1023)), None), NoMatch),
        (m(6, Some(17), Some((0, 1023)), None), NoMatch),
        (m(4, Some(6), Some((80, 80)), None), MatchL3),
        (m(6, None, None, Some(true)), NoMatch),
        (
            Match {
                src_port: Some((8, 8)),
                ..m(4, Some(1), None, None)
            },
            NoMatch,
        ),
        (Match::default(), MatchL3),
    ]
}

static LIST: LazyLock<(Classifier, Vec<u32>, Vec<(Match, L4OnFragments)>)> = LazyLock::new(|| {
    let rules = rules();
    let (mut lines, mut line_rule) = (Vec::new(), Vec::new());
    for (i, (m, p)) in rules.iter().enumerate() {
        for l in fragment_lines(m, *p) {
            lines.push(l);
            line_rule.push(i as u32);
        }
    }
    (Classifier::compile(&lines), line_rule, rules)
});

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    let off = 12 + (data[0] as usize % 8);
    let frame = &data[1..];
    let mut k = AclKey::default();
    let l3 = extract_key(frame, off, 1, &mut k);
    if k.fragment {
        assert_eq!((k.src_port, k.dst_port, k.tcp_flags), (0, 0, 0));
    }
    let (c, line_rule, rules) = &*LIST;
    let got = c.lookup(&k).map(|l| line_rule[l as usize]);
    let want = rules
        .iter()
        .position(|(m, p)| m.matches_under_policy(&k, *p))
        .map(|i| i as u32);
    assert_eq!(got, want, "{k:?}");
    let _ = tos(frame, l3, k.family);
    let _ = ip_len(frame, l3, k.family);
    let mut f = frame.to_vec();
    let _ = pipeline::qos::set_dscp(&mut f, l3, data[0] & 63);
    let _ = pipeline::qos::dscp(&f, l3);
});
