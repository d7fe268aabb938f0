//! Shared "parse everything, call every accessor, round-trip every Repr"
//! drivers. Used by the stable no-panic tests (`tests/no_panic.rs`,
//! `tests/scapy_fixtures.rs`) and by the cargo-fuzz targets in `fuzz/`
//! (included with `#[path]`), so both check the same property.
//!
//! Every function accepts arbitrary bytes and must never panic except on a
//! broken round-trip invariant (which is a real bug).

#![allow(dead_code)]

use std::net::{Ipv4Addr, Ipv6Addr};

use wire::{
    arp, ethernet, icmp, icmpv6, ipv4, ipv6, parse_tags, tcp, udp, vlan, EtherType, IpPair,
    IpProtocol,
};

/// Splits the pseudo-header prefix used by the fuzz_udp / fuzz_tcp /
/// fuzz_icmpv6 inputs: byte 0 odd → 32 bytes of IPv6 src+dst follow, even →
/// 8 bytes of IPv4 src+dst follow; the rest is the L4 message.
pub fn split_ips(data: &[u8]) -> Option<(IpPair, &[u8])> {
    let (&sel, rest) = data.split_first()?;
    if sel & 1 == 1 {
        if rest.len() < 32 {
            return None;
        }
        let mut s = [0u8; 16];
        let mut d = [0u8; 16];
        s.copy_from_slice(&rest[..16]);
        d.copy_from_slice(&rest[16..32]);
        Some((
            IpPair::V6 {
                src: Ipv6Addr::from(s),
                dst: Ipv6Addr::from(d),
            },
            &rest[32..],
        ))
    } else {
        if rest.len() < 8 {
            return None;
        }
        let s = Ipv4Addr::new(rest[0], rest[1], rest[2], rest[3]);
        let d = Ipv4Addr::new(rest[4], rest[5], rest[6], rest[7]);
        Some((IpPair::V4 { src: s, dst: d }, &rest[8..]))
    }
}

/// Ethernet frame, its tags, and whatever it carries.
pub fn ethernet(data: &[u8]) {
    let Ok(f) = ethernet::Frame::new_checked(data) else {
        return;
    };
    let _ = (f.dst_addr(), f.src_addr(), f.ethertype(), f.payload().len());
    let d = f.dst_addr();
    let _ = (
        d.is_broadcast(),
        d.is_multicast(),
        d.is_unicast(),
        d.to_string(),
    );
    let repr = ethernet::Repr::parse(&f).expect("checked frame parses");
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut ethernet::Frame::new_unchecked(&mut out[..]))
        .expect("emit");
    assert_eq!(out[..], data[..ethernet::HEADER_LEN]);

    let Ok(l2) = parse_tags(&f) else { return };
    for (i, th) in [l2.outer, l2.inner].into_iter().flatten().enumerate() {
        let start = ethernet::HEADER_LEN + i * vlan::TAG_LEN;
        let tag = vlan::Tag::new_checked(&data[start..]).expect("tag bytes present");
        let _ = (
            tag.pcp(),
            tag.dei(),
            tag.vlan_id(),
            tag.ethertype(),
            tag.payload().len(),
        );
        let mut b = [0u8; vlan::TAG_LEN];
        th.tag
            .emit(&mut vlan::Tag::new_unchecked(&mut b[..]))
            .expect("tag emit");
        assert_eq!(b[..], data[start..start + vlan::TAG_LEN]);
    }
    let payload = &data[l2.payload_offset..];
    match l2.ethertype {
        EtherType::Arp => arp(payload),
        EtherType::Ipv4 => ipv4(payload),
        EtherType::Ipv6 => ipv6(payload),
        _ => {}
    }
}

/// ARP packet.
pub fn arp(data: &[u8]) {
    let Ok(p) = arp::Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.hardware_type(),
        p.protocol_type(),
        p.hardware_len(),
        p.protocol_len(),
    );
    let _ = (p.operation(), p.total_len());
    let _ = (p.source_hardware_addr(), p.source_protocol_addr());
    let _ = (p.target_hardware_addr(), p.target_protocol_addr());
    let Ok(repr) = arp::Repr::parse(&p) else {
        return;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut arp::Packet::new_unchecked(&mut out[..]))
        .expect("emit");
    assert_eq!(out[..], data[..arp::ETHERNET_IPV4_LEN]);
}

/// IPv4 packet and its payload.
pub fn ipv4(data: &[u8]) {
    let Ok(p) = ipv4::Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.version(),
        p.header_len(),
        p.dscp(),
        p.ecn(),
        p.total_len(),
        p.ident(),
    );
    let _ = (
        p.dont_frag(),
        p.more_frags(),
        p.frag_offset(),
        p.is_fragment(),
        p.ttl(),
    );
    let _ = (
        p.protocol(),
        p.checksum(),
        p.src_addr(),
        p.dst_addr(),
        p.options().len(),
    );
    let _ = (p.verify_checksum(), p.payload().len());

    // Data-path mutations keep a valid checksum valid.
    let mut copy = data.to_vec();
    let mut m = ipv4::Packet::new_checked(&mut copy[..]).expect("same bytes");
    let valid = m.verify_checksum();
    let _ = m.decrement_ttl();
    m.remark_dscp(wire::Dscp::EF);
    m.remark_ecn(wire::Ecn::Ce);
    assert_eq!(m.verify_checksum(), valid);

    let Ok(repr) = ipv4::Repr::parse(&p) else {
        return;
    };
    let mut out = vec![0u8; repr.buffer_len() + repr.payload_len];
    repr.emit(&mut ipv4::Packet::new_unchecked(&mut out[..]))
        .expect("emit");
    let back = ipv4::Repr::parse(&ipv4::Packet::new_checked(&out[..]).expect("re-check"))
        .expect("re-parse");
    assert_eq!(back, repr);
    if p.header_len() == ipv4::HEADER_LEN {
        let mut orig = data[..ipv4::HEADER_LEN].to_vec();
        orig[6] &= 0x7f; // reserved flag is not represented
        let mut emitted = out[..ipv4::HEADER_LEN].to_vec();
        // Compare without checksums (the reserved bit changes the sum).
        orig[10..12].fill(0);
        emitted[10..12].fill(0);
        assert_eq!(emitted, orig);
    }
    if p.frag_offset() != 0 {
        return;
    }
    let ips = IpPair::V4 {
        src: p.src_addr(),
        dst: p.dst_addr(),
    };
    l4(p.protocol(), &ips, p.payload());
}

/// IPv6 packet, its extension headers and its upper layer.
pub fn ipv6(data: &[u8]) {
    let Ok(p) = ipv6::Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.version(),
        p.traffic_class(),
        p.dscp(),
        p.ecn(),
        p.flow_label(),
    );
    let _ = (
        p.payload_len(),
        p.next_header(),
        p.hop_limit(),
        p.src_addr(),
        p.dst_addr(),
    );
    let _ = p.payload().len();
    for h in p.ext_headers() {
        let Ok(h) = h else { break };
        let _ = (
            h.kind,
            h.offset,
            h.next_header,
            h.data.len(),
            h.fragment(),
            h.body().len(),
        );
        assert_eq!(&data[h.offset..h.offset + h.data.len()], h.data);
    }
    let repr = ipv6::Repr::parse(&p).expect("checked packet parses");
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut ipv6::Packet::new_unchecked(&mut out[..]))
        .expect("emit");
    assert_eq!(out[..], data[..ipv6::HEADER_LEN]);

    let Ok(upper) = p.upper_layer() else { return };
    let end = ipv6::HEADER_LEN + usize::from(p.payload_len());
    assert!(upper.offset <= end);
    if upper.fragment.is_some_and(|f| !f.is_first()) {
        return;
    }
    let ips = IpPair::V6 {
        src: p.src_addr(),
        dst: p.dst_addr(),
    };
    l4(upper.protocol, &ips, &data[upper.offset..end]);
}

/// Dispatches an upper-layer message.
pub fn l4(protocol: IpProtocol, ips: &IpPair, data: &[u8]) {
    match protocol {
        IpProtocol::Icmp => icmp(data),
        IpProtocol::Icmpv6 => icmpv6_with(ips, data),
        IpProtocol::Udp => udp_with(ips, data),
        IpProtocol::Tcp => tcp_with(ips, data),
        _ => {}
    }
}

/// ICMP message.
pub fn icmp(data: &[u8]) {
    let Ok(p) = icmp::Packet::new_checked(data) else {
        return;
    };
    let _ = (p.msg_type(), p.code(), p.checksum(), p.rest_of_header());
    let _ = (
        p.echo_ident(),
        p.echo_seq_no(),
        p.data().len(),
        p.verify_checksum(),
    );
    let Ok(repr) = icmp::Repr::parse(&p) else {
        return;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut icmp::Packet::new_unchecked(&mut out[..]))
        .expect("emit");
    assert_eq!(out[4..], data[4..]);
    let out_p = icmp::Packet::new_checked(&out[..]).expect("re-check");
    assert_eq!(icmp::Repr::parse(&out_p).expect("re-parse"), repr);
}

/// ICMPv6 message with the pseudo-header prefix (see [`split_ips`]).
pub fn icmpv6(data: &[u8]) {
    if let Some((ips, rest)) = split_ips(data) {
        icmpv6_with(&ips, rest);
    }
}

/// ICMPv6 message.
pub fn icmpv6_with(ips: &IpPair, data: &[u8]) {
    let Ok(p) = icmpv6::Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.msg_type(),
        p.code(),
        p.checksum(),
        p.rest_of_header(),
        p.echo_ident(),
    );
    let _ = (
        p.echo_seq_no(),
        p.data().len(),
        p.nd_target_addr(),
        p.na_flags(),
    );
    let _ = p.verify_checksum(ips);
    if let Ok(opts) = p.nd_options() {
        for o in opts {
            let Ok(o) = o else { break };
            let _ = (o.kind, o.data.len(), o.lladdr());
        }
    }
    let Ok(repr) = icmpv6::Repr::parse(&p, ips) else {
        return;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut icmpv6::Packet::new_unchecked(&mut out[..]), ips)
        .expect("emit");
    let out_p = icmpv6::Packet::new_checked(&out[..]).expect("re-check");
    assert_eq!(icmpv6::Repr::parse(&out_p, ips).expect("re-parse"), repr);
}

/// UDP datagram with the pseudo-header prefix.
pub fn udp(data: &[u8]) {
    if let Some((ips, rest)) = split_ips(data) {
        udp_with(&ips, rest);
    }
}

/// UDP datagram.
pub fn udp_with(ips: &IpPair, data: &[u8]) {
    let Ok(p) = udp::Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.src_port(),
        p.dst_port(),
        p.len(),
        p.is_empty(),
        p.checksum(),
    );
    let _ = (p.payload().len(), p.verify_checksum(ips));
    let Ok(repr) = udp::Repr::parse(&p, ips) else {
        return;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut udp::Packet::new_unchecked(&mut out[..]), ips)
        .expect("emit");
    assert_eq!(out[..6], data[..6]);
    assert_eq!(out[8..], data[8..out.len()]);
    let out_p = udp::Packet::new_checked(&out[..]).expect("re-check");
    assert!(out_p.verify_checksum(ips));
    assert_eq!(udp::Repr::parse(&out_p, ips).expect("re-parse"), repr);
}

/// TCP segment with the pseudo-header prefix.
pub fn tcp(data: &[u8]) {
    if let Some((ips, rest)) = split_ips(data) {
        tcp_with(&ips, rest);
    }
}

/// TCP segment.
pub fn tcp_with(ips: &IpPair, data: &[u8]) {
    let Ok(p) = tcp::Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.src_port(),
        p.dst_port(),
        p.seq_number(),
        p.ack_number(),
        p.header_len(),
    );
    let f = p.flags();
    let _ = (f.fin(), f.syn(), f.rst(), f.psh(), f.ack(), f.urg());
    let _ = (
        p.window_len(),
        p.checksum(),
        p.urgent_at(),
        p.options().len(),
    );
    let _ = (p.payload().len(), p.verify_checksum(ips));
    for o in p.option_iter() {
        if o.is_err() {
            break;
        }
    }
    let Ok(repr) = tcp::Repr::parse(&p, ips) else {
        return;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut tcp::Packet::new_unchecked(&mut out[..]), ips)
        .expect("emit");
    let mut orig = data.to_vec();
    orig[12] &= 0xf1; // reserved bits are not represented
    assert_eq!(out[..16], orig[..16]);
    assert_eq!(out[18..], orig[18..]);
    let out_p = tcp::Packet::new_checked(&out[..]).expect("re-check");
    assert_eq!(tcp::Repr::parse(&out_p, ips).expect("re-parse"), repr);
}

/// MPLS: walk the stack and a control word; then, with parameters taken
/// from the first bytes, push / swap / pop on the rest placed in a buffer
/// with headroom, encapsulate and decapsulate it as a pseudowire. A push
/// followed by a pop of the same entries must give the frame back.
pub fn mpls(data: &[u8]) {
    use wire::mpls::{self, ControlWord, Lse, OuterHeader, Span, Stack};
    if let Ok(st) = Stack::new_checked(data) {
        assert!(st.depth() >= 1 && st.depth() <= mpls::MAX_DEPTH);
        assert!(st.get(st.depth() - 1).unwrap().bos);
        assert_eq!(st.iter().count(), st.depth());
        let _ = mpls::guess_payload(st.payload());
    }
    if let Ok(cw) = ControlWord::read(data) {
        let mut b = [0u8; 4];
        cw.write(&mut b).unwrap();
        assert_eq!(ControlWord::read(&b).unwrap(), cw);
    }
    let Some((&[sel, n, head], rest)) = data.split_first_chunk::<3>() else {
        return;
    };
    let hdr = if sel & 1 == 0 { 14 } else { 18 };
    let n = 1 + (n as usize % 5);
    let headroom = head as usize % 48;
    let mut buf = vec![0u8; headroom + rest.len() + (sel as usize >> 4)];
    buf[headroom..headroom + rest.len()].copy_from_slice(rest);
    let f = Span {
        start: headroom,
        len: rest.len(),
    };
    let lses: Vec<Lse> = (0..n)
        .map(|i| Lse::from_u32(u32::from(sel).wrapping_mul(0x9e37_79b9) ^ i as u32))
        .collect();
    let before = buf.clone();
    if let Ok(g) = mpls::push(&mut buf, f, hdr, &lses) {
        assert_eq!(g.len, f.len + 4 * n);
        let was_mpls = rest.len() >= hdr && rest[hdr - 2..hdr] == [0x88, 0x47];
        let et = if was_mpls {
            0x8847
        } else {
            u16::from_be_bytes([rest[hdr - 2], rest[hdr - 1]])
        };
        // Pop walks the whole stack: it needs the old one to be valid
        // and the two together within MAX_DEPTH.
        let walkable = !was_mpls
            || Stack::new_checked(&rest[hdr..]).is_ok_and(|s| s.depth() + n <= mpls::MAX_DEPTH);
        if walkable {
            let top = Lse::read(&g.of(&buf).unwrap()[hdr..]).unwrap();
            mpls::swap(g.of_mut(&mut buf).unwrap(), hdr, top.label, top.tc, top.ttl).unwrap();
            let h = mpls::pop(&mut buf, g, hdr, n, et).expect("pop what was pushed");
            assert_eq!(h.len, f.len);
            assert_eq!(h.of(&buf).unwrap(), &before[f.start..f.start + f.len]);
        }
    }
    let _ = mpls::pop(&mut buf, f, hdr, n, 0x0800);
    let outer = OuterHeader {
        dst: [sel; 6],
        src: [head; 6],
        vlan_tci: (sel & 2 != 0).then_some(0x0064),
    };
    let cw = (sel & 4 != 0).then_some(ControlWord::default());
    let mut buf = vec![0u8; 64 + rest.len()];
    buf[64..].copy_from_slice(rest);
    let f = Span {
        start: 64,
        len: rest.len(),
    };
    if let Ok(g) = mpls::eth_encap(&mut buf, f, &outer, &lses, cw) {
        let off = outer.len() + 4 * n;
        let d = mpls::eth_decap(&buf, g, off, cw.is_some());
        if rest.len() >= 14 {
            assert_eq!(d.expect("decap what was encapsulated").inner, f);
        }
    }
    let _ = mpls::eth_decap(&buf, f, head as usize, sel & 8 != 0);
}
