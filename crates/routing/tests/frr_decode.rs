//! Decodes a real FPM byte stream captured from zebra 8.4 (Debian 12,
//! `dplane_fpm_nl`, `no fpm use-next-hop-groups`): two static IPv4 routes
//! (one ECMP), one static IPv6 route, and the connected routes. Netlink
//! integers are host-endian; the capture was taken on x86-64.
#![cfg(target_endian = "little")]

use routing::frr::fpm::{FpmStats, FrameReader, StreamDecoder};
use routing::frr::{NextHop, NextHops, Prefix, RouteUpdate};

const CAPTURE: &str = "010100403c0000001800010500000000d72c6ebe02100000fec4000100000000080001000a0a0000080006001400000008000500c0000201080004000300000001010054500000001800010500000000d72c6ebe02100000fec4000100000000080001000a140000080006001400000024000980100000000300000008000500c0000201100000000300000008000500c000020201010038340000001800010500000000d72c6ebe02180000fe0200010000000008000100c00002000800060014000000080004000300000001010044400000001800010400000000d72c6ebe0a400000fe020001000000001400010020010db80000000000000000000000000800060014000000080004000300000001010058540000001800010400000000d72c6ebe0a300000fec40001000000001400010020010db801000000000000000000000008000600140000001400050020010db8000000000000000000000001080004000300000001010044400000001800010400000000d72c6ebe0a400000fe0200010000000014000100fe80000000000000000000000000000008000600140000000800040002000000";

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn gw(a: &str, ifindex: u32) -> NextHop {
    NextHop {
        gateway: Some(a.parse().unwrap()),
        ifindex,
        weight: 1,
    }
}

#[test]
fn decodes_zebra_capture() {
    let bytes = unhex(CAPTURE);
    let mut reader = FrameReader::new();
    reader.extend(&bytes);
    let stats = FpmStats::default();
    let mut out = Vec::new();
    StreamDecoder::default()
        .drain(&mut reader, &stats, &mut out)
        .unwrap();
    assert_eq!(reader.pending(), 0);
    let c = stats.snapshot();
    assert_eq!((c.frames, c.routes_added, c.decode_errors), (6, 6, 0));

    let find = |p: &str| {
        let p: Prefix = p.parse().unwrap();
        out.iter()
            .find_map(|u| match u {
                RouteUpdate::Add {
                    prefix,
                    table,
                    protocol,
                    metric,
                    nexthops,
                    replace,
                } if *prefix == p => Some((*table, *protocol, *metric, nexthops.clone(), *replace)),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{p} missing from {out:?}"))
    };
    assert_eq!(
        find("10.10.0.0/16"),
        (254, 196, 20, NextHops::List(vec![gw("192.0.2.1", 3)]), true)
    );
    assert_eq!(
        find("10.20.0.0/16"),
        (
            254,
            196,
            20,
            NextHops::List(vec![gw("192.0.2.1", 3), gw("192.0.2.2", 3)]),
            true
        )
    );
    assert_eq!(
        find("2001:db8:100::/48"),
        (
            254,
            196,
            20,
            NextHops::List(vec![gw("2001:db8::1", 3)]),
            false
        )
    );
    // (zebra sets NLM_F_REPLACE on IPv4 routes only, unless started with
    // --v6-rr-semantics.)
    // Connected route: protocol kernel (2), interface only.
    assert_eq!(
        find("192.0.2.0/24").3,
        NextHops::List(vec![NextHop {
            gateway: None,
            ifindex: 3,
            weight: 1
        }])
    );
}

#[test]
fn capture_survives_every_split_point() {
    let bytes = unhex(CAPTURE);
    for cut in 0..bytes.len() {
        let mut reader = FrameReader::new();
        let stats = FpmStats::default();
        let mut out = Vec::new();
        let mut d = StreamDecoder::default();
        reader.extend(&bytes[..cut]);
        d.drain(&mut reader, &stats, &mut out).unwrap();
        reader.extend(&bytes[cut..]);
        d.drain(&mut reader, &stats, &mut out).unwrap();
        assert_eq!(out.len(), 6, "cut at {cut}");
    }
}
