//! RFC 4950 answers to expired label TTLs (`build_ttl_exceeded`): IPv6,
//! the cases that get no answer, and every truncation of a labelled
//! frame (the IPv4 answer is checked on a worker in
//! `datapath/tests/mpls_worker.rs`); the same answer for down the LSP
//! (`build_ttl_exceeded_lsp`, RFC 3032 §2.3.2) and when it goes there
//! (`ttl_exceeded_down_lsp`); the class of an IP packet to label.

use pipeline::l3::{RouterInterface, Urpf};
use pipeline::mpls::{
    build_ttl_exceeded, build_ttl_exceeded_lsp, class_of_customer_frame, class_of_ip,
    ttl_exceeded_down_lsp, IcmpTunneling,
};
use std::net::IpAddr;
use wire::checksum::{combine, finish, sum};

const LL: u128 = 0xfe80 << 112 | 1;
const GLOBAL: u128 = 0x2001_0db8 << 96 | 0x99;

fn iface(v6: Vec<u128>) -> RouterInterface {
    RouterInterface {
        port: 0,
        mac: [2, 0, 0, 0, 0, 1],
        v4: vec![(0x0a00_0001, 24)],
        v6: v6.into_iter().map(|a| (a, 64)).collect(),
        mtu: 1500,
        urpf: Urpf::Off,
        vlan: None,
        vrf: 0,
    }
}

fn labelled(labels: &[(u32, u8)], payload: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 9, 0x88, 0x47];
    for (i, (l, ttl)) in labels.iter().enumerate() {
        let s = u32::from(i + 1 == labels.len());
        f.extend_from_slice(&(l << 12 | s << 8 | *ttl as u32).to_be_bytes());
    }
    f.extend_from_slice(payload);
    f
}

fn ipv6_udp(src: u128, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; 40 + len];
    p[0] = 0x60;
    p[4..6].copy_from_slice(&(len as u16).to_be_bytes());
    p[6] = 17;
    p[7] = 1;
    p[8..24].copy_from_slice(&src.to_be_bytes());
    p[24..40].copy_from_slice(&(0x2001_0db8_0000_0001u128 << 64 | 7).to_be_bytes());
    for (k, b) in p[40..].iter_mut().enumerate() {
        *b = k as u8 | 1;
    }
    p
}

fn ipv4(src: [u8; 4], proto: u8, first: u8, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[8] = 1;
    p[9] = proto;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&[203, 0, 113, 9]);
    p[20] = first;
    p
}

#[test]
fn ipv6_answer_carries_the_stack_with_a_valid_checksum() {
    let src = 0x2001_0db8_0000_0005u128 << 64 | 2;
    // 300 bytes: the quote stops at 128.
    let inner = ipv6_udp(src, 260);
    let f = labelled(&[(16, 1), (17, 9), (18, 200)], &inner);
    let mut out = vec![0u8; 2048];
    let n = build_ttl_exceeded(&f, &iface(vec![LL, GLOBAL]), &mut out);
    let a = &out[..n];
    assert_eq!(n, 14 + 40 + 8 + 128 + 8 + 12);
    assert_eq!((&a[0..6], &a[12..14]), (&f[6..12], &[0x86, 0xdd][..]));
    let ip = &a[14..54];
    assert_eq!((ip[6], ip[7]), (58, 64), "ICMPv6, hop limit 64");
    assert_eq!(
        &ip[8..24],
        &GLOBAL.to_be_bytes(),
        "a global source, not fe80::"
    );
    assert_eq!(&ip[24..40], &src.to_be_bytes());
    let icmp = &a[54..];
    assert_eq!(u16::from_be_bytes([ip[4], ip[5]]) as usize, icmp.len());
    assert_eq!(
        (icmp[0], icmp[1], icmp[4]),
        (3, 0, 16),
        "time exceeded, 16 × 8 bytes quoted"
    );
    let mut acc = sum(icmp);
    acc = combine(acc, sum(&ip[8..40]));
    acc = combine(acc, icmp.len() as u32);
    acc = combine(acc, 58);
    assert_eq!(finish(acc), 0, "ICMPv6 checksum with the pseudo-header");
    assert_eq!(&icmp[8..136], &inner[..128]);
    let ext = &icmp[136..];
    assert_eq!((ext[0], finish(sum(ext))), (0x20, 0));
    assert_eq!(
        (u16::from_be_bytes([ext[4], ext[5]]), ext[6], ext[7]),
        (16, 1, 1)
    );
    assert_eq!(&ext[8..], &f[14..26], "the stack as received");
    // Only a link-local address: it answers from that.
    let n = build_ttl_exceeded(&f, &iface(vec![LL]), &mut out);
    assert_eq!(&out[14 + 8..14 + 24], &LL.to_be_bytes());
    assert!(n > 0);
}

#[test]
fn no_answer_where_none_is_due() {
    let mut out = vec![0u8; 2048];
    let ifc = iface(vec![GLOBAL]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "ICMP error inside",
            labelled(&[(16, 1)], &ipv4([10, 1, 1, 1], 1, 3, 60)),
        ),
        (
            "multicast source",
            labelled(&[(16, 1)], &ipv4([224, 1, 1, 1], 17, 0, 60)),
        ),
        (
            "broadcast source",
            labelled(&[(16, 1)], &ipv4([255; 4], 17, 0, 60)),
        ),
        (
            "unspecified source",
            labelled(&[(16, 1)], &ipv4([0; 4], 17, 0, 60)),
        ),
        ("pseudowire payload", labelled(&[(16, 1)], &[0u8; 64])),
        ("no bottom of stack", {
            let mut f = labelled(&[(16, 1)], &[]);
            f[16] &= !1;
            f
        }),
        ("IPv6 ICMPv6 inside", {
            let mut p = ipv6_udp(GLOBAL + 5, 40);
            p[6] = 58;
            labelled(&[(16, 1)], &p)
        }),
        ("not labelled", {
            let mut f = labelled(&[(16, 1)], &ipv4([10, 1, 1, 1], 17, 0, 60));
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f
        }),
    ];
    for (what, f) in cases {
        assert_eq!(build_ttl_exceeded(&f, &ifc, &mut out), 0, "{what}");
    }
    // No IPv6 address on the interface: no IPv6 answer.
    let f = labelled(&[(16, 1)], &ipv6_udp(GLOBAL + 5, 40));
    assert_eq!(build_ttl_exceeded(&f, &iface(vec![]), &mut out), 0);
    // An answer that does not fit the buffer is not written.
    let f = labelled(&[(16, 1)], &ipv4([10, 1, 1, 1], 17, 0, 60));
    assert_eq!(build_ttl_exceeded(&f, &ifc, &mut out[..100]), 0);
    assert!(build_ttl_exceeded(&f, &ifc, &mut out) > 0);
}

#[test]
fn every_truncation_is_safe() {
    let ifc = iface(vec![GLOBAL]);
    let mut out = vec![0u8; 2048];
    for f in [
        labelled(&[(16, 1), (17, 2)], &ipv4([10, 1, 1, 1], 17, 0, 80)),
        labelled(&[(16, 1)], &ipv6_udp(GLOBAL + 1, 80)),
    ] {
        for cut in 0..=f.len() {
            let n = build_ttl_exceeded(&f[..cut], &ifc, &mut out);
            assert!(n <= out.len());
            if n > 0 {
                // Whatever was quoted came from the frame.
                assert!(cut > 14 + 4);
            }
            let m = build_ttl_exceeded_lsp(&f[..cut], &ifc, &mut out);
            assert!(m <= out.len());
            assert!(m == 0 || m > n, "an answer either way, the stack again");
            let _ = ttl_exceeded_down_lsp(IcmpTunneling::Auto, &f[..cut], |_| false);
        }
    }
}

/// Down the LSP: the same ICMP message under the received stack, every
/// TTL 255, S bits as received, EtherType MPLS.
#[test]
fn answer_down_the_lsp_carries_the_stack_in_front() {
    let ifc = iface(vec![LL, GLOBAL]);
    let mut back = vec![0u8; 2048];
    let mut down = vec![0u8; 2048];
    let src = 0x2001_0db8_0000_0005u128 << 64 | 2;
    for f in [
        labelled(&[(16, 1), (17, 9), (18, 200)], &ipv6_udp(src, 100)),
        labelled(&[(16, 1)], &ipv4([10, 1, 1, 1], 17, 0, 60)),
    ] {
        let n = build_ttl_exceeded(&f, &ifc, &mut back);
        let m = build_ttl_exceeded_lsp(&f, &ifc, &mut down);
        let stack = (f[14..].chunks(4).position(|e| e[2] & 1 == 1).unwrap() + 1) * 4;
        assert_eq!(m, n + stack);
        assert_eq!(
            &down[..12],
            &back[..12],
            "the same MACs (rewritten on the way)"
        );
        assert_eq!(&down[12..14], &[0x88, 0x47]);
        for (k, e) in down[14..14 + stack].chunks(4).enumerate() {
            let r = &f[14 + 4 * k..18 + 4 * k];
            assert_eq!(
                (&e[..3], e[3]),
                (&r[..3], 255),
                "entry {k}: label, TC, S kept; TTL 255"
            );
        }
        assert_eq!(&down[14 + stack..m], &back[14..n], "the same IP packet");
    }
    // What gets no answer back gets none down the LSP either.
    let f = labelled(&[(16, 1)], &ipv4([224, 1, 1, 1], 17, 0, 60));
    assert_eq!(build_ttl_exceeded_lsp(&f, &ifc, &mut down), 0);
    let f = labelled(&[(16, 1)], &ipv4([10, 1, 1, 1], 17, 0, 60));
    assert_eq!(build_ttl_exceeded_lsp(&f, &ifc, &mut down[..100]), 0);
}

#[test]
fn when_the_answer_goes_down_the_lsp() {
    let v4 = ipv4([10, 1, 1, 1], 17, 0, 60);
    let one = labelled(&[(16, 1)], &v4);
    let two = labelled(&[(16, 1), (17, 9)], &v4);
    let null_then_one = labelled(&[(0, 9), (16, 1)], &v4);
    let v6 = labelled(&[(16, 1)], &ipv6_udp(GLOBAL + 5, 40));
    let routed = |_: IpAddr| true;
    let unrouted = |_: IpAddr| false;
    let auto = IcmpTunneling::Auto;
    assert!(!ttl_exceeded_down_lsp(auto, &one, routed), "routed: back");
    assert!(
        ttl_exceeded_down_lsp(auto, &one, unrouted),
        "no route: down"
    );
    assert!(
        ttl_exceeded_down_lsp(auto, &two, routed),
        "a label below: down"
    );
    assert!(
        !ttl_exceeded_down_lsp(auto, &null_then_one, routed),
        "explicit null is no service label"
    );
    assert!(ttl_exceeded_down_lsp(auto, &null_then_one, unrouted));
    // The source asked about is the packet's, of its family.
    let mut asked = None;
    ttl_exceeded_down_lsp(auto, &v6, |a| {
        asked = Some(a);
        true
    });
    assert_eq!(asked, Some(IpAddr::from((GLOBAL + 5).to_be_bytes())));
    ttl_exceeded_down_lsp(auto, &one, |a| {
        asked = Some(a);
        true
    });
    assert_eq!(asked, Some(IpAddr::from([10, 1, 1, 1])));
    assert!(ttl_exceeded_down_lsp(IcmpTunneling::Always, &one, routed));
    assert!(!ttl_exceeded_down_lsp(IcmpTunneling::Never, &two, unrouted));
    // Not IP under the stack: no answer, nowhere.
    assert!(!ttl_exceeded_down_lsp(
        auto,
        &labelled(&[(16, 1)], &[0u8; 64]),
        unrouted
    ));
}

#[test]
fn class_of_an_ip_packet_to_label() {
    let mut f = vec![0u8; 14];
    f.extend_from_slice(&ipv4([10, 1, 1, 1], 17, 0, 60));
    f[15] = 46 << 2; // EF
    assert_eq!(class_of_ip(&f, 14, None), 5);
    assert_eq!(
        class_of_ip(&f, 14, Some(2)),
        2,
        "the input policy's set-pcp wins"
    );
    f[15] = 10 << 2; // AF11
    assert_eq!(class_of_ip(&f, 14, None), 1);
    let mut g = vec![0u8; 14];
    g.extend_from_slice(&ipv6_udp(GLOBAL, 8));
    g[14] = 0x6b; // traffic class 0xb8: EF
    g[15] = 0x80;
    assert_eq!(class_of_ip(&g, 14, None), 5);
    assert_eq!(class_of_ip(&g[..20], 14, None), 0, "not IP: class 0");
}

/// A customer frame entering a pseudowire: the policy's 802.1p, else its
/// own tag's, else its IP precedence, else 0.
#[test]
fn class_of_a_customer_frame_into_a_pseudowire() {
    let mut ip = vec![0u8; 12];
    ip.extend_from_slice(&[0x08, 0x00]);
    ip.extend_from_slice(&ipv4([10, 1, 1, 1], 17, 0, 60));
    ip[15] = 46 << 2; // EF
    assert_eq!(class_of_customer_frame(&ip, None), 5);
    assert_eq!(class_of_customer_frame(&ip, Some(3)), 3, "set-pcp wins");
    // The same packet tagged with priority 2: the tag's priority.
    let mut tagged = ip.clone();
    tagged.splice(12..12, [0x81, 0x00, 2 << 5, 100]);
    assert_eq!(class_of_customer_frame(&tagged, None), 2);
    let mut qinq = tagged.clone();
    qinq[12..14].copy_from_slice(&[0x88, 0xa8]);
    qinq[14] = 6 << 5;
    assert_eq!(class_of_customer_frame(&qinq, None), 6, "the outer tag");
    // Not IP, untagged (ARP): 0, however its bytes look.
    let mut arp = ip.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(class_of_customer_frame(&arp, None), 0);
    assert_eq!(class_of_customer_frame(&ip[..13], None), 0, "runt");
}
