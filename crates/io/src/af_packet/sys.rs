//! Kernel ABI of AF_PACKET rings (`<linux/if_packet.h>`), declared here so the
//! crate does not depend on which of these the `libc` version exports.

#![allow(non_camel_case_types, dead_code)]

use std::mem::size_of;

pub const SOL_PACKET: libc::c_int = 263;
pub const PACKET_ADD_MEMBERSHIP: libc::c_int = 1;
pub const PACKET_RX_RING: libc::c_int = 5;
pub const PACKET_STATISTICS: libc::c_int = 6;
pub const PACKET_VERSION: libc::c_int = 10;
pub const PACKET_TX_RING: libc::c_int = 13;
pub const PACKET_LOSS: libc::c_int = 14;
pub const PACKET_VNET_HDR: libc::c_int = 15;
pub const PACKET_FANOUT: libc::c_int = 18;
pub const PACKET_QDISC_BYPASS: libc::c_int = 20;
pub const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

pub const PACKET_MR_PROMISC: libc::c_ushort = 1;
pub const PACKET_FANOUT_HASH: u32 = 0;
pub const TPACKET_V2: libc::c_int = 1;
pub const TPACKET_V3: libc::c_int = 2;
pub const ETH_P_ALL: u16 = 0x0003;
/// `struct virtio_net_hdr` (PACKET_VNET_HDR).
pub const VNET_HDR_LEN: usize = 10;

// Frame / block status bits.
pub const TP_STATUS_KERNEL: u32 = 0;
pub const TP_STATUS_USER: u32 = 1 << 0;
pub const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
pub const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
pub const TP_STATUS_AVAILABLE: u32 = 0;
pub const TP_STATUS_SEND_REQUEST: u32 = 1 << 0;
pub const TP_STATUS_SENDING: u32 = 1 << 1;
pub const TP_STATUS_WRONG_FORMAT: u32 = 1 << 2;

pub const TPACKET_ALIGNMENT: usize = 16;

pub const fn tpacket_align(x: usize) -> usize {
    (x + TPACKET_ALIGNMENT - 1) & !(TPACKET_ALIGNMENT - 1)
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
pub struct tpacket_req3 {
    pub tp_block_size: u32,
    pub tp_block_nr: u32,
    pub tp_frame_size: u32,
    pub tp_frame_nr: u32,
    pub tp_retire_blk_tov: u32,
    pub tp_sizeof_priv: u32,
    pub tp_feature_req_word: u32,
}

/// `struct tpacket_req` (TPACKET_V1/V2 rings).
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub struct tpacket_req {
    pub tp_block_size: u32,
    pub tp_block_nr: u32,
    pub tp_frame_size: u32,
    pub tp_frame_nr: u32,
}

/// `struct tpacket_stats` (PACKET_STATISTICS on a V1/V2 socket).
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub struct tpacket_stats {
    pub tp_packets: u32,
    pub tp_drops: u32,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
pub struct tpacket_stats_v3 {
    pub tp_packets: u32,
    pub tp_drops: u32,
    pub tp_freeze_q_cnt: u32,
}

/// `struct tpacket3_hdr` (with the `hv1` variant inlined).
#[repr(C)]
pub struct tpacket3_hdr {
    pub tp_next_offset: u32,
    pub tp_sec: u32,
    pub tp_nsec: u32,
    pub tp_snaplen: u32,
    pub tp_len: u32,
    pub tp_status: u32,
    pub tp_mac: u16,
    pub tp_net: u16,
    pub tp_rxhash: u32,
    pub tp_vlan_tci: u32,
    pub tp_vlan_tpid: u16,
    pub hv1_padding: u16,
    pub tp_padding: [u8; 8],
}

/// `struct tpacket2_hdr`: note `tp_status` comes first here (offset 0), unlike
/// `tpacket3_hdr` (offset 20).
#[repr(C)]
pub struct tpacket2_hdr {
    pub tp_status: u32,
    pub tp_len: u32,
    pub tp_snaplen: u32,
    pub tp_mac: u16,
    pub tp_net: u16,
    pub tp_sec: u32,
    pub tp_nsec: u32,
    pub tp_vlan_tci: u16,
    pub tp_vlan_tpid: u16,
    pub tp_padding: [u8; 4],
}

/// `struct tpacket_hdr_v1` inside `struct tpacket_block_desc`.
#[repr(C)]
pub struct tpacket_block_desc {
    pub version: u32,
    pub offset_to_priv: u32,
    pub block_status: u32,
    pub num_pkts: u32,
    pub offset_to_first_pkt: u32,
    pub blk_len: u32,
    pub seq_num: u64,
    pub ts_first_pkt: [u32; 2],
    pub ts_last_pkt: [u32; 2],
}

#[repr(C)]
pub struct packet_mreq {
    pub mr_ifindex: libc::c_int,
    pub mr_type: libc::c_ushort,
    pub mr_alen: libc::c_ushort,
    pub mr_address: [u8; 8],
}

/// `TPACKET3_HDRLEN`: aligned header plus a `sockaddr_ll`.
pub const TPACKET3_HDRLEN: usize =
    tpacket_align(size_of::<tpacket3_hdr>()) + size_of::<libc::sockaddr_ll>();
/// Where a transmit frame's data starts, relative to its slot: the kernel
/// reads it at `tp_hdrlen - sizeof(sockaddr_ll)` (no `PACKET_TX_HAS_OFF`).
pub const TX_DATA_OFFSET: usize = TPACKET3_HDRLEN - size_of::<libc::sockaddr_ll>();

/// `TPACKET2_HDRLEN`: aligned header plus a `sockaddr_ll`.
pub const TPACKET2_HDRLEN: usize =
    tpacket_align(size_of::<tpacket2_hdr>()) + size_of::<libc::sockaddr_ll>();
/// Transmit data offset in a V2 slot (see [`TX_DATA_OFFSET`]).
pub const TX2_DATA_OFFSET: usize = TPACKET2_HDRLEN - size_of::<libc::sockaddr_ll>();
/// Where the kernel puts an untagged Ethernet frame in a V2 receive slot
/// (`tpacket_rcv`: `netoff = TPACKET_ALIGN(tp_hdrlen + max(maclen, 16))`,
/// `macoff = netoff - maclen`, maclen = 14): 80 − 14 = 66. A slot of size S
/// holds frames of up to S − 66 bytes; longer ones are truncated.
pub const RX2_MAC_OFFSET: usize = tpacket_align(TPACKET2_HDRLEN + 16) - 14;

/// Offsets of the transmit header fields we write, per version.
pub const TX3_STATUS_OFFSET: usize = 20;
pub const TX3_LEN_OFFSET: usize = 16;
pub const TX3_SNAPLEN_OFFSET: usize = 12;
pub const TX2_STATUS_OFFSET: usize = 0;
pub const TX2_LEN_OFFSET: usize = 4;
pub const TX2_SNAPLEN_OFFSET: usize = 8;

const _: () = assert!(size_of::<tpacket2_hdr>() == 32);
const _: () = assert!(TPACKET2_HDRLEN == 52);
const _: () = assert!(TX2_DATA_OFFSET == 32);
const _: () = assert!(RX2_MAC_OFFSET == 66);
const _: () = assert!(std::mem::offset_of!(tpacket3_hdr, tp_status) == TX3_STATUS_OFFSET);
const _: () = assert!(std::mem::offset_of!(tpacket3_hdr, tp_len) == TX3_LEN_OFFSET);
const _: () = assert!(std::mem::offset_of!(tpacket3_hdr, tp_snaplen) == TX3_SNAPLEN_OFFSET);
const _: () = assert!(std::mem::offset_of!(tpacket2_hdr, tp_status) == TX2_STATUS_OFFSET);
const _: () = assert!(std::mem::offset_of!(tpacket2_hdr, tp_len) == TX2_LEN_OFFSET);
const _: () = assert!(std::mem::offset_of!(tpacket2_hdr, tp_snaplen) == TX2_SNAPLEN_OFFSET);
const _: () = assert!(size_of::<tpacket3_hdr>() == 48);
const _: () = assert!(size_of::<tpacket_block_desc>() == 48);
const _: () = assert!(size_of::<tpacket_req3>() == 28);
const _: () = assert!(TPACKET3_HDRLEN == 68);
const _: () = assert!(TX_DATA_OFFSET == 48);
