//! Frames produced by scapy (an independent encoder) — see
//! `fixtures/make_fixtures.py`, whose expressions the expected values below
//! repeat. For every fixture: parse every layer and check its fields, verify
//! every checksum, rebuild the frame from the `Repr`s and compare bytes, and
//! check that every truncation is rejected without panicking.

#[path = "support/exercise.rs"]
mod exercise;

use std::net::{Ipv4Addr, Ipv6Addr};

use wire::{
    arp, ethernet, icmp, icmpv6, ipv4, ipv6, parse_tags, tcp, udp, vlan, ArpOperation, Dscp, Ecn,
    Error, EtherType, IpPair, IpProtocol, L2Headers, MacAddress, Result, TcpOption,
};

const ALL: [&str; 14] = [
    "arp_request",
    "arp_reply",
    "dot1q_ipv4_udp",
    "qinq_ipv4_udp",
    "ipv4_tcp_syn_options",
    "ipv4_tcp_data",
    "ipv4_icmp_echo",
    "ipv6_udp",
    "ipv6_hbh_frag_udp",
    "ipv6_dstopt_routing_ah_udp",
    "ipv6_icmpv6_echo",
    "ipv6_icmpv6_ns",
    "ipv6_icmpv6_na",
    "ipv6_tcp",
];

fn load(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}.hex", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let hex: String = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .flat_map(|l| l.chars().filter(|c| !c.is_whitespace()))
        .collect();
    assert!(text.starts_with("# scapy: "), "{name}: no scapy comment");
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

fn mac(s: &str) -> MacAddress {
    s.parse().unwrap()
}

fn v4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

/// Every layer of a frame, as `Repr`s.
#[derive(Debug)]
struct Decoded<'a> {
    eth: ethernet::Repr,
    l2: L2Headers,
    net: Net<'a>,
    l4: L4<'a>,
}

#[derive(Debug)]
enum Net<'a> {
    Arp(arp::Repr),
    V4(ipv4::Repr),
    /// Fixed header, raw extension headers, upper-layer protocol.
    V6(ipv6::Repr, &'a [u8], ipv6::UpperLayer),
}

#[derive(Debug, PartialEq)]
enum L4<'a> {
    None,
    Udp(udp::Repr<'a>),
    Tcp(tcp::Repr<'a>),
    Icmp(icmp::Repr<'a>),
    Icmpv6(icmpv6::Repr<'a>),
}

fn decode_l4<'a>(proto: IpProtocol, ips: &IpPair, b: &'a [u8]) -> Result<L4<'a>> {
    Ok(match proto {
        IpProtocol::Udp => L4::Udp(udp::Repr::parse(&udp::Packet::new_checked(b)?, ips)?),
        IpProtocol::Tcp => L4::Tcp(tcp::Repr::parse(&tcp::Packet::new_checked(b)?, ips)?),
        IpProtocol::Icmp => L4::Icmp(icmp::Repr::parse(&icmp::Packet::new_checked(b)?)?),
        IpProtocol::Icmpv6 => {
            L4::Icmpv6(icmpv6::Repr::parse(&icmpv6::Packet::new_checked(b)?, ips)?)
        }
        _ => L4::None,
    })
}

fn decode(frame: &[u8]) -> Result<Decoded<'_>> {
    let f = ethernet::Frame::new_checked(frame)?;
    let eth = ethernet::Repr::parse(&f)?;
    let l2 = parse_tags(&f)?;
    let payload = &frame[l2.payload_offset..];
    let (net, l4) = match l2.ethertype {
        EtherType::Arp => {
            let a = arp::Repr::parse(&arp::Packet::new_checked(payload)?)?;
            if payload.len() != arp::ETHERNET_IPV4_LEN {
                return Err(Error::Malformed("trailing bytes"));
            }
            (Net::Arp(a), L4::None)
        }
        EtherType::Ipv4 => {
            let p = ipv4::Packet::new_checked(payload)?;
            let r = ipv4::Repr::parse(&p)?;
            let ips = IpPair::V4 {
                src: r.src_addr,
                dst: r.dst_addr,
            };
            // `payload` borrows `frame`, so this slice outlives `p`.
            let body = &payload[p.header_len()..usize::from(p.total_len())];
            (Net::V4(r), decode_l4(r.protocol, &ips, body)?)
        }
        EtherType::Ipv6 => {
            let p = ipv6::Packet::new_checked(payload)?;
            let r = ipv6::Repr::parse(&p)?;
            let up = p.upper_layer()?;
            let ips = IpPair::V6 {
                src: r.src_addr,
                dst: r.dst_addr,
            };
            let end = ipv6::HEADER_LEN + r.payload_len;
            let l4 = decode_l4(up.protocol, &ips, &payload[up.offset..end])?;
            (Net::V6(r, &payload[ipv6::HEADER_LEN..up.offset], up), l4)
        }
        _ => return Err(Error::Unsupported("ethertype")),
    };
    Ok(Decoded { eth, l2, net, l4 })
}

fn emit_l4(l4: &L4, ips: &IpPair, out: &mut Vec<u8>) {
    let start = out.len();
    let len = match l4 {
        L4::None => 0,
        L4::Udp(r) => r.buffer_len(),
        L4::Tcp(r) => r.buffer_len(),
        L4::Icmp(r) => r.buffer_len(),
        L4::Icmpv6(r) => r.buffer_len(),
    };
    out.resize(start + len, 0);
    let b = &mut out[start..];
    match l4 {
        L4::None => {}
        L4::Udp(r) => r.emit(&mut udp::Packet::new_unchecked(b), ips).unwrap(),
        L4::Tcp(r) => r.emit(&mut tcp::Packet::new_unchecked(b), ips).unwrap(),
        L4::Icmp(r) => r.emit(&mut icmp::Packet::new_unchecked(b)).unwrap(),
        L4::Icmpv6(r) => r.emit(&mut icmpv6::Packet::new_unchecked(b), ips).unwrap(),
    }
}

/// Rebuilds the frame from its `Repr`s (IPv6 extension headers copied raw).
fn encode(d: &Decoded) -> Vec<u8> {
    let mut out = vec![0u8; ethernet::HEADER_LEN];
    d.eth
        .emit(&mut ethernet::Frame::new_unchecked(&mut out[..]))
        .unwrap();
    for th in [d.l2.outer, d.l2.inner].into_iter().flatten() {
        let at = out.len();
        out.resize(at + vlan::TAG_LEN, 0);
        th.tag
            .emit(&mut vlan::Tag::new_unchecked(&mut out[at..]))
            .unwrap();
    }
    // TPIDs are written by the preceding header's EtherType field.
    let at = out.len();
    match &d.net {
        Net::Arp(a) => {
            out.resize(at + a.buffer_len(), 0);
            a.emit(&mut arp::Packet::new_unchecked(&mut out[at..]))
                .unwrap();
        }
        Net::V4(r) => {
            out.resize(at + r.buffer_len(), 0);
            let ips = IpPair::V4 {
                src: r.src_addr,
                dst: r.dst_addr,
            };
            emit_l4(&d.l4, &ips, &mut out);
            let total = out.len();
            r.emit(&mut ipv4::Packet::new_unchecked(&mut out[at..total]))
                .unwrap();
        }
        Net::V6(r, exts, _) => {
            out.resize(at + r.buffer_len(), 0);
            r.emit(&mut ipv6::Packet::new_unchecked(&mut out[at..]))
                .unwrap();
            out.extend_from_slice(exts);
            let ips = IpPair::V6 {
                src: r.src_addr,
                dst: r.dst_addr,
            };
            emit_l4(&d.l4, &ips, &mut out);
        }
    }
    out
}

#[test]
fn every_fixture_rebuilds_byte_for_byte() {
    for name in ALL {
        if name == "ipv6_dstopt_routing_ah_udp" {
            continue; // scapy leaves its UDP checksum 0, see the dedicated test
        }
        let frame = load(name);
        let d = decode(&frame).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(encode(&d), frame, "{name}");
    }
}

#[test]
fn every_truncation_is_rejected() {
    for name in ALL {
        let frame = load(name);
        for n in 0..frame.len() {
            let cut = &frame[..n];
            assert!(decode(cut).is_err(), "{name}: prefix {n} decoded");
            exercise::ethernet(cut);
        }
        exercise::ethernet(&frame);
    }
}

#[test]
fn every_single_byte_mutation_is_safe() {
    for name in ALL {
        let frame = load(name);
        for i in 0..frame.len() {
            for v in [0x00u8, 0x01, 0x7f, 0x80, 0xff, frame[i] ^ 0x10] {
                let mut m = frame.clone();
                m[i] = v;
                exercise::ethernet(&m);
                let _ = decode(&m);
            }
        }
    }
}

#[test]
fn arp_request() {
    let frame = load("arp_request");
    let d = decode(&frame).unwrap();
    assert!(d.eth.dst_addr.is_broadcast());
    assert_eq!(d.eth.src_addr, mac("00:11:22:33:44:55"));
    assert_eq!(d.eth.ethertype, EtherType::Arp);
    let Net::Arp(a) = d.net else { panic!() };
    assert_eq!(
        a,
        arp::Repr {
            operation: ArpOperation::Request,
            source_hardware_addr: mac("00:11:22:33:44:55"),
            source_protocol_addr: v4("192.0.2.1"),
            target_hardware_addr: mac("00:00:00:00:00:00"),
            target_protocol_addr: v4("192.0.2.2"),
        }
    );
}

#[test]
fn arp_reply() {
    let frame = load("arp_reply");
    let d = decode(&frame).unwrap();
    assert_eq!(d.eth.dst_addr, mac("00:11:22:33:44:55"));
    let Net::Arp(a) = d.net else { panic!() };
    assert_eq!(a.operation, ArpOperation::Reply);
    assert_eq!(a.source_hardware_addr, mac("66:77:88:99:aa:bb"));
    assert_eq!(a.source_protocol_addr, v4("192.0.2.2"));
    assert_eq!(a.target_hardware_addr, mac("00:11:22:33:44:55"));
    assert_eq!(a.target_protocol_addr, v4("192.0.2.1"));
}

#[test]
fn dot1q_ipv4_udp() {
    let frame = load("dot1q_ipv4_udp");
    let d = decode(&frame).unwrap();
    assert_eq!(d.eth.ethertype, EtherType::Vlan);
    let outer = d.l2.outer.unwrap();
    assert_eq!(outer.tpid, EtherType::Vlan);
    assert_eq!(
        (outer.tag.pcp, outer.tag.dei, outer.tag.vlan_id.get()),
        (5, true, 100)
    );
    assert!(d.l2.inner.is_none());
    assert_eq!((d.l2.ethertype, d.l2.payload_offset), (EtherType::Ipv4, 18));
    let Net::V4(ip) = d.net else { panic!() };
    assert_eq!((ip.src_addr, ip.dst_addr), (v4("10.0.0.1"), v4("10.0.0.2")));
    assert_eq!(
        (ip.ttl, ip.dscp, ip.ecn, ip.ident),
        (64, Dscp::EF, Ecn::NotEct, 0x1234)
    );
    assert!(ip.dont_frag && !ip.more_frags && ip.frag_offset == 0);
    assert_eq!(ip.protocol, IpProtocol::Udp);
    let L4::Udp(u) = d.l4 else { panic!() };
    assert_eq!(
        (u.src_port, u.dst_port, u.payload),
        (12345, 53, &b"hello udp"[..])
    );

    // Data-path edits on the view keep the checksum valid (RFC 1624).
    let mut f = frame.clone();
    let mut p = ipv4::Packet::new_checked(&mut f[18..]).unwrap();
    assert_eq!(p.decrement_ttl().unwrap(), 63);
    p.remark_dscp(Dscp::new(10).unwrap());
    assert!(p.verify_checksum());
    let mut full = ipv4::Packet::new_checked(f[18..].to_vec()).unwrap();
    let incremental = full.checksum();
    full.fill_checksum();
    assert_eq!(full.checksum(), incremental);
}

#[test]
fn qinq_ipv4_udp() {
    let frame = load("qinq_ipv4_udp");
    let d = decode(&frame).unwrap();
    let (o, i) = (d.l2.outer.unwrap(), d.l2.inner.unwrap());
    assert_eq!(o.tpid, EtherType::QinQ);
    assert_eq!((o.tag.pcp, o.tag.dei, o.tag.vlan_id.get()), (3, false, 200));
    assert_eq!(i.tpid, EtherType::Vlan);
    assert_eq!((i.tag.pcp, i.tag.dei, i.tag.vlan_id.get()), (1, false, 300));
    assert_eq!((d.l2.ethertype, d.l2.payload_offset), (EtherType::Ipv4, 22));
    let Net::V4(ip) = d.net else { panic!() };
    assert_eq!(
        (ip.src_addr, ip.dst_addr, ip.ttl, ip.ident),
        (v4("10.1.0.1"), v4("10.1.0.2"), 32, 7)
    );
    let L4::Udp(u) = d.l4 else { panic!() };
    assert_eq!(
        (u.src_port, u.dst_port, u.payload),
        (1000, 2000, &b"qinq"[..])
    );
}

#[test]
fn ipv4_tcp_syn_options() {
    let frame = load("ipv4_tcp_syn_options");
    let d = decode(&frame).unwrap();
    let Net::V4(ip) = d.net else { panic!() };
    assert_eq!(
        (ip.src_addr, ip.dst_addr),
        (v4("192.0.2.10"), v4("198.51.100.20"))
    );
    assert_eq!((ip.ttl, ip.ident, ip.protocol), (63, 4321, IpProtocol::Tcp));
    let L4::Tcp(t) = d.l4 else { panic!() };
    assert_eq!(
        (t.src_port, t.dst_port, t.seq_number),
        (40000, 443, 1_000_000)
    );
    assert!(t.flags.syn() && !t.flags.ack());
    assert_eq!(t.flags.0, tcp::Flags::SYN);
    assert_eq!(t.window_len, 64240);
    assert!(t.payload.is_empty());
    let opts: Vec<_> = tcp::TcpOptions::new(t.options)
        .map(|o| o.unwrap())
        .collect();
    assert_eq!(
        opts,
        [
            TcpOption::MaxSegmentSize(1460),
            TcpOption::SackPermitted,
            TcpOption::Timestamp(123456, 0),
            TcpOption::NoOp,
            TcpOption::WindowScale(7),
        ]
    );
}

#[test]
fn ipv4_tcp_data() {
    let frame = load("ipv4_tcp_data");
    let d = decode(&frame).unwrap();
    let Net::V4(ip) = d.net else { panic!() };
    assert!(ip.dont_frag);
    assert_eq!(ip.ident, 4322);
    let L4::Tcp(t) = d.l4 else { panic!() };
    assert_eq!((t.src_port, t.dst_port), (40000, 80));
    assert_eq!(
        (t.seq_number, t.ack_number, t.window_len),
        (1_000_001, 2_000_001, 502)
    );
    assert!(t.flags.psh() && t.flags.ack() && !t.flags.syn());
    assert_eq!(t.payload, b"GET / HTTP/1.0\r\n\r\n");
    let opts: Vec<_> = tcp::TcpOptions::new(t.options)
        .map(|o| o.unwrap())
        .collect();
    assert_eq!(
        opts,
        [
            TcpOption::NoOp,
            TcpOption::NoOp,
            TcpOption::Timestamp(123460, 987654)
        ]
    );
}

#[test]
fn ipv4_icmp_echo() {
    let frame = load("ipv4_icmp_echo");
    let d = decode(&frame).unwrap();
    let Net::V4(ip) = d.net else { panic!() };
    assert_eq!(
        (ip.src_addr, ip.dst_addr, ip.ttl, ip.protocol),
        (v4("192.0.2.1"), v4("192.0.2.2"), 64, IpProtocol::Icmp)
    );
    assert_eq!(
        d.l4,
        L4::Icmp(icmp::Repr::EchoRequest {
            ident: 0x4242,
            seq_no: 7,
            data: b"ping-payload-0123"
        })
    );
    let p = icmp::Packet::new_checked(&frame[34..]).unwrap();
    assert!(p.verify_checksum());
    assert_eq!(p.msg_type(), icmp::Message::EchoRequest);
}

#[test]
fn ipv6_udp() {
    let frame = load("ipv6_udp");
    let d = decode(&frame).unwrap();
    let Net::V6(ip, exts, up) = d.net else {
        panic!()
    };
    assert_eq!(
        (ip.src_addr, ip.dst_addr),
        (v6("2001:db8::1"), v6("2001:db8::2"))
    );
    assert_eq!(
        (ip.hop_limit, ip.dscp, ip.ecn, ip.flow_label),
        (64, Dscp::EF, Ecn::NotEct, 0x12345)
    );
    assert_eq!((ip.next_header, ip.payload_len), (IpProtocol::Udp, 16));
    assert!(exts.is_empty());
    assert_eq!(
        (up.protocol, up.offset, up.ext_count),
        (IpProtocol::Udp, 40, 0)
    );
    let L4::Udp(u) = d.l4 else { panic!() };
    assert_eq!(
        (u.src_port, u.dst_port, u.payload),
        (5353, 5353, &b"hello v6"[..])
    );
}

#[test]
fn ipv6_hbh_frag_udp() {
    let frame = load("ipv6_hbh_frag_udp");
    let d = decode(&frame).unwrap();
    let Net::V6(ip, _, up) = d.net else { panic!() };
    assert_eq!(ip.next_header, IpProtocol::HopByHop);
    assert_eq!(
        (up.protocol, up.offset, up.ext_count),
        (IpProtocol::Udp, 56, 2)
    );
    let f = up.fragment.unwrap();
    assert_eq!((f.offset, f.more_frags, f.ident), (0, true, 0xabcdef));
    let p = ipv6::Packet::new_checked(&frame[14..]).unwrap();
    let hs: Vec<_> = p.ext_headers().map(|h| h.unwrap()).collect();
    assert_eq!(hs.len(), 2);
    assert_eq!(
        (hs[0].kind, hs[0].offset, hs[0].data.len()),
        (IpProtocol::HopByHop, 40, 8)
    );
    // Router alert option (RFC 2711): type 5, length 2, value 0.
    assert_eq!(&hs[0].body()[..4], &[5, 2, 0, 0]);
    assert_eq!(
        (hs[1].kind, hs[1].offset, hs[1].next_header),
        (IpProtocol::Ipv6Frag, 48, IpProtocol::Udp)
    );
    let L4::Udp(u) = d.l4 else { panic!() };
    assert_eq!(
        (u.src_port, u.dst_port, u.payload),
        (1111, 2222, &b"fragmented"[..])
    );
}

#[test]
fn ipv6_dstopt_routing_ah_udp() {
    // scapy does not compute a UDP checksum under AH: it leaves 0, which is
    // invalid over IPv6 (RFC 8200 section 8.1) — and the parser says so.
    let frame = load("ipv6_dstopt_routing_ah_udp");
    assert_eq!(decode(&frame).unwrap_err(), Error::Checksum);
    let p = ipv6::Packet::new_checked(&frame[14..]).unwrap();
    let kinds: Vec<_> = p.ext_headers().map(|h| h.unwrap().kind).collect();
    assert_eq!(
        kinds,
        [IpProtocol::Ipv6Opts, IpProtocol::Ipv6Route, IpProtocol::Ah]
    );
    let routing = p.ext_headers().nth(1).unwrap().unwrap();
    assert_eq!(&routing.data[8..], &v6("2001:db8::99").octets());
    let up = p.upper_layer().unwrap();
    assert_eq!(
        (up.protocol, up.offset, up.ext_count, up.fragment),
        (IpProtocol::Udp, 40 + 8 + 24 + 24, 3, None)
    );
    let ips = IpPair::V6 {
        src: p.src_addr(),
        dst: p.dst_addr(),
    };
    let u = udp::Packet::new_checked(&frame[14 + up.offset..]).unwrap();
    assert_eq!(
        (u.src_port(), u.dst_port(), u.payload()),
        (3333, 4444, &b"ext"[..])
    );
    assert_eq!(u.checksum(), 0);
    assert!(!u.verify_checksum(&ips));
    assert!(u.verify_checksum(&IpPair::V4 {
        src: v4("0.0.0.0"),
        dst: v4("0.0.0.0")
    }));
    // Fill the checksum and everything parses and rebuilds.
    let mut fixed = frame.clone();
    udp::Packet::new_checked(&mut fixed[14 + up.offset..])
        .unwrap()
        .fill_checksum(&ips);
    let d = decode(&fixed).unwrap();
    assert_eq!(encode(&d), fixed);
}

#[test]
fn ipv6_icmpv6_echo() {
    let frame = load("ipv6_icmpv6_echo");
    let d = decode(&frame).unwrap();
    assert_eq!(
        d.l4,
        L4::Icmpv6(icmpv6::Repr::EchoRequest {
            ident: 0x77,
            seq_no: 3,
            data: b"ping6"
        })
    );
}

#[test]
fn ipv6_icmpv6_ns() {
    let frame = load("ipv6_icmpv6_ns");
    let d = decode(&frame).unwrap();
    assert_eq!(d.eth.dst_addr, mac("33:33:ff:00:00:02"));
    assert!(d.eth.dst_addr.is_multicast());
    let Net::V6(ip, _, _) = d.net else { panic!() };
    assert_eq!(
        (ip.src_addr, ip.dst_addr, ip.hop_limit),
        (v6("fe80::1"), v6("ff02::1:ff00:2"), 255)
    );
    assert_eq!(
        d.l4,
        L4::Icmpv6(icmpv6::Repr::NeighborSolicit {
            target_addr: v6("fe80::2"),
            source_lladdr: Some(mac("02:00:00:00:00:01")),
        })
    );
}

#[test]
fn ipv6_icmpv6_na() {
    let frame = load("ipv6_icmpv6_na");
    let d = decode(&frame).unwrap();
    assert_eq!(
        d.l4,
        L4::Icmpv6(icmpv6::Repr::NeighborAdvert {
            router: false,
            solicited: true,
            override_: true,
            target_addr: v6("fe80::2"),
            target_lladdr: Some(mac("02:00:00:00:00:02")),
        })
    );
}

#[test]
fn ipv6_tcp() {
    let frame = load("ipv6_tcp");
    let d = decode(&frame).unwrap();
    let Net::V6(ip, _, _) = d.net else { panic!() };
    assert_eq!(
        (ip.src_addr, ip.dst_addr),
        (v6("2001:db8::10"), v6("2001:db8::20"))
    );
    let L4::Tcp(t) = d.l4 else { panic!() };
    assert_eq!(
        (t.src_port, t.dst_port, t.seq_number, t.ack_number),
        (50000, 22, 42, 4242)
    );
    assert_eq!(
        (t.flags.0, t.window_len, t.payload),
        (tcp::Flags::ACK, 512, &b"ssh"[..])
    );
    let opts: Vec<_> = tcp::TcpOptions::new(t.options)
        .map(|o| o.unwrap())
        .collect();
    assert_eq!(
        opts,
        [TcpOption::NoOp, TcpOption::NoOp, TcpOption::Timestamp(1, 2)]
    );
    // Wrong pseudo-header (swapped addresses of another flow) fails.
    let bad = IpPair::V6 {
        src: v6("2001:db8::10"),
        dst: v6("2001:db8::21"),
    };
    let seg = &frame[54..];
    assert!(!tcp::Packet::new_checked(seg).unwrap().verify_checksum(&bad));
}
