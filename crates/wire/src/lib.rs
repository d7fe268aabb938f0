//! # wire — Lanyard's packet-format layer
//!
//! This crate is the lowest layer of Lanyard: it knows how the bytes of
//! Ethernet II, 802.1Q / 802.1ad tags, MPLS label stacks and Ethernet
//! pseudowires, ARP, IPv4, IPv6 (with extension-header
//! walk), ICMP, ICMPv6, UDP and TCP are laid out, and nothing else.
//!
//! Every format has two forms (smoltcp style):
//!
//! * a zero-copy **view** (`ipv4::Packet<T: AsRef<[u8]>>`) with
//!   `new_checked` / `new_unchecked` / `check_len`, getters, and setters when
//!   `T: AsMut<[u8]>`. The data path uses views only.
//! * a small validated **`Repr`** with `parse`, `buffer_len` and `emit`, used
//!   by builders, tests and the lab.
//!
//! ## Example
//!
//! ```
//! use wire::{EthernetFrame, EtherType, IpProtocol, Ipv4Packet, parse_tags};
//!
//! // 802.1Q-tagged IPv4 header (VLAN 100, PCP 5), as received.
//! let mut frame = [0u8; 38];
//! frame[12..18].copy_from_slice(&[0x81, 0x00, 0xa0, 0x64, 0x08, 0x00]);
//! frame[18..22].copy_from_slice(&[0x45, 0x00, 0x00, 0x14]);
//! frame[26] = 64; // TTL
//! frame[27] = 17; // UDP
//! Ipv4Packet::new_unchecked(&mut frame[18..]).fill_checksum();
//!
//! let eth = EthernetFrame::new_checked(&frame[..])?;
//! let l2 = parse_tags(&eth)?;
//! assert_eq!(l2.outer.unwrap().tag.vlan_id.get(), 100);
//! assert_eq!(l2.ethertype, EtherType::Ipv4);
//!
//! let mut ip = Ipv4Packet::new_checked(&mut frame[l2.payload_offset..])?;
//! assert_eq!(ip.protocol(), IpProtocol::Udp);
//! ip.decrement_ttl()?; // incremental checksum update
//! assert!(ip.verify_checksum());
//! # Ok::<(), wire::Error>(())
//! ```
//!
//! ## Contract
//!
//! * **No panics on input.** Truncated or malformed bytes give an [`Error`];
//!   once `new_checked` has succeeded, no accessor of that view may panic.
//!   (Views made with `new_unchecked` on short buffers may panic: that is the
//!   point of the unchecked constructor.) `emit` checks the buffer length and
//!   returns [`Error::Truncated`] instead of panicking.
//! * **No I/O, no clock, no allocation per packet.** Views borrow the buffer;
//!   `Repr`s hold only scalars and borrowed slices.
//! * **No policy.** This crate never decides what to do with a packet.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod arp;
pub mod checksum;
mod error;
pub mod ethernet;
pub mod icmp;
pub mod icmp_header;
pub mod icmpv6;
pub mod igmp;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod lacp;
pub mod mld;
pub mod mpls;
pub mod netflow;
pub mod offload;
pub mod stp;
pub mod tcp;
pub mod udp;
pub mod vlan;
pub mod vrrp;
pub mod vswitch;

pub use error::{Error, Result};

pub use arp::{Operation as ArpOperation, Packet as ArpPacket, Repr as ArpRepr};
pub use ethernet::{EtherType, Frame as EthernetFrame, MacAddress, Repr as EthernetRepr};
pub use icmp::{Message as IcmpMessage, Packet as IcmpPacket, Repr as IcmpRepr};
pub use icmpv6::{Message as Icmpv6Message, Packet as Icmpv6Packet, Repr as Icmpv6Repr};
pub use ip::{Dscp, Ecn, IpPair, IpProtocol};
pub use ipv4::{Packet as Ipv4Packet, Repr as Ipv4Repr};
pub use ipv6::{
    ExtHeader as Ipv6ExtHeader, ExtHeaders as Ipv6ExtHeaders, Packet as Ipv6Packet,
    Repr as Ipv6Repr, UpperLayer as Ipv6UpperLayer,
};
pub use mpls::{ControlWord as MplsControlWord, Lse as MplsLse, Stack as MplsStack};
pub use tcp::{Flags as TcpFlags, Packet as TcpPacket, Repr as TcpRepr, TcpOption, TcpOptions};
pub use udp::{Packet as UdpPacket, Repr as UdpRepr};
pub use vlan::{parse_tags, L2Headers, Repr as VlanRepr, Tag as VlanTag, TaggedHeader, VlanId};
