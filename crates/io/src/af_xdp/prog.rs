//! The steering XDP program, built as BPF instructions here (no compiler,
//! no object file), its XSKMAP, and attaching it to an interface.
//!
//! The program is five instructions:
//! `return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)`: a frame
//! on a queue with a socket in the map goes to that socket, anything else
//! (a queue Lanyard has no socket on) goes to the kernel as if there were
//! no program.
//!
//! It is attached through a BPF link (`BPF_LINK_CREATE`): the kernel
//! detaches it when the last descriptor of the link closes, so a run that
//! crashes or is killed leaves nothing on the interface. A program attached
//! the older way (netlink `IFLA_XDP`, which outlives its process) that is
//! named [`PROG_NAME`] is a stale one of ours: it is detached and replaced.
//! Any other program on the interface belongs to someone else and is left
//! alone (the port falls back; see `control::ports`).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Name of the program in the kernel (`bpftool prog`, `ip link`).
pub const PROG_NAME: &str = "lanyard_xsk";

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_GET_FD_BY_ID: libc::c_long = 13;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
const BPF_LINK_CREATE: libc::c_long = 28;

const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
/// `BPF_F_XDP_HAS_FRAGS`: the program copes with multi-buffer frames
/// (it never reads packet data), so a veth or NIC with an MTU above one
/// page still takes it in driver mode.
const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;

pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

const IFLA_XDP: u16 = 43;
const IFLA_XDP_FD: u16 = 1;
const IFLA_XDP_ATTACHED: u16 = 2;
const IFLA_XDP_FLAGS: u16 = 3;
const IFLA_XDP_PROG_ID: u16 = 4;
const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const RTM_SETLINK: u16 = 19;
const NLMSG_ERROR: u16 = 2;

/// Where the program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpMode {
    /// In the driver (veth's NAPI, a NIC's receive path): before any skb.
    Native,
    /// Generic (skb) mode: after the skb is built; works on any device.
    Generic,
}

impl XdpMode {
    pub fn as_str(self) -> &'static str {
        match self {
            XdpMode::Native => "native",
            XdpMode::Generic => "generic",
        }
    }
    fn flags(self) -> u32 {
        match self {
            XdpMode::Native => XDP_FLAGS_DRV_MODE,
            XdpMode::Generic => XDP_FLAGS_SKB_MODE,
        }
    }
}

/// `union bpf_attr`, as bytes: every command here fits in 128.
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Attr {
        Attr([0; 128])
    }
    fn u32(&mut self, off: usize, v: u32) -> &mut Self {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, off: usize, v: u64) -> &mut Self {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
}

fn bpf(cmd: libc::c_long, attr: &mut Attr) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, zero-padded `union bpf_attr` of the size
    // passed; pointers inside it (set by the callers) point to live buffers.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.0.as_mut_ptr(),
            attr.0.len() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn fd_of(r: libc::c_long) -> OwnedFd {
    // SAFETY: the bpf(2) call returned a fresh descriptor (CLOEXEC) we own.
    unsafe { OwnedFd::from_raw_fd(r as RawFd) }
}

/// An XSKMAP with `entries` slots (one per receive queue).
pub fn create_xskmap(entries: u32) -> io::Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32(0, BPF_MAP_TYPE_XSKMAP)
        .u32(4, 4)
        .u32(8, 4)
        .u32(12, entries.max(1));
    a.0[28..28 + 9].copy_from_slice(b"lanyard_q");
    bpf(BPF_MAP_CREATE, &mut a).map(fd_of)
}

/// Put socket `xsk` in slot `queue` of `map`.
pub fn map_set(map: &OwnedFd, queue: u32, xsk: RawFd) -> io::Result<()> {
    let key = queue;
    let val = xsk as u32;
    let mut a = Attr::new();
    a.u32(0, map.as_raw_fd() as u32)
        .u64(8, &key as *const u32 as u64)
        .u64(16, &val as *const u32 as u64)
        .u64(24, 0);
    bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ())
}

/// One BPF instruction (`struct bpf_insn`).
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    (code as u64)
        | (((dst & 0xf) | ((src & 0xf) << 4)) as u64) << 8
        | ((off as u16) as u64) << 16
        | ((imm as u32) as u64) << 32
}

/// The steering program's instructions for XSKMAP `map_fd`.
pub fn steering_program(map_fd: RawFd) -> [u64; 6] {
    const LDX_W: u8 = 0x61; // BPF_LDX | BPF_MEM | BPF_W
    const LD_IMM64: u8 = 0x18; // BPF_LD | BPF_IMM | BPF_DW
    const MOV64_K: u8 = 0xb7; // BPF_ALU64 | BPF_MOV | BPF_K
    const CALL: u8 = 0x85; // BPF_JMP | BPF_CALL
    const EXIT: u8 = 0x95; // BPF_JMP | BPF_EXIT
    const PSEUDO_MAP_FD: u8 = 1;
    const RX_QUEUE_INDEX: i16 = 16; // offsetof(struct xdp_md, rx_queue_index)
    const REDIRECT_MAP: i32 = 51; // BPF_FUNC_redirect_map
    const XDP_PASS: i32 = 2;
    [
        insn(LDX_W, 2, 1, RX_QUEUE_INDEX, 0), // r2 = ctx->rx_queue_index
        insn(LD_IMM64, 1, PSEUDO_MAP_FD, 0, map_fd), // r1 = &xsks
        0,                                    // (second half of the 64-bit load)
        insn(MOV64_K, 3, 0, 0, XDP_PASS),     // r3 = XDP_PASS (on a miss)
        insn(CALL, 0, 0, 0, REDIRECT_MAP),    // r0 = bpf_redirect_map(r1, r2, r3)
        insn(EXIT, 0, 0, 0, 0),
    ]
}

/// Load the steering program for `map`. `frags`: mark it multi-buffer
/// capable (needed in driver mode when the MTU exceeds a page).
pub fn load_program(map: &OwnedFd, frags: bool) -> io::Result<OwnedFd> {
    let insns = steering_program(map.as_raw_fd());
    let license = b"GPL\0";
    let mut log = vec![0u8; 4096];
    let mut a = Attr::new();
    a.u32(0, BPF_PROG_TYPE_XDP)
        .u32(4, insns.len() as u32)
        .u64(8, insns.as_ptr() as u64)
        .u64(16, license.as_ptr() as u64)
        .u32(24, 1)
        .u32(28, log.len() as u32)
        .u64(32, log.as_mut_ptr() as u64)
        .u32(44, if frags { BPF_F_XDP_HAS_FRAGS } else { 0 })
        .u32(68, BPF_XDP);
    a.0[48..48 + PROG_NAME.len()].copy_from_slice(PROG_NAME.as_bytes());
    bpf(BPF_PROG_LOAD, &mut a).map(fd_of).map_err(|e| {
        let end = log.iter().position(|&b| b == 0).unwrap_or(0);
        let msg = String::from_utf8_lossy(&log[..end]);
        io::Error::new(e.kind(), format!("BPF_PROG_LOAD: {e} {}", msg.trim()))
    })
}

/// Attach `prog` to `ifindex` through a BPF link in `mode`. The program
/// stays attached while the returned descriptor is open.
pub fn link_attach(prog: &OwnedFd, ifindex: u32, mode: XdpMode) -> io::Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32(0, prog.as_raw_fd() as u32)
        .u32(4, ifindex)
        .u32(8, BPF_XDP)
        .u32(12, mode.flags());
    bpf(BPF_LINK_CREATE, &mut a).map(fd_of)
}

/// What netlink says is attached to an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attached {
    pub prog_id: u32,
    /// `XDP_ATTACHED_*`: 1 driver, 2 generic, 3 hardware, 4 several.
    pub how: u8,
    /// The program's name (empty if it could not be read).
    pub name: String,
}

/// The XDP program on `ifindex`, if any.
pub fn attached(ifindex: u32) -> io::Result<Option<Attached>> {
    let mut req = nl_header(RTM_GETLINK, libc::NLM_F_REQUEST as u16, ifindex);
    finish(&mut req);
    let reply = nl_roundtrip(&req)?;
    let Some((prog_id, how)) = parse_xdp(&reply) else {
        return Ok(None);
    };
    if prog_id == 0 {
        return Ok(None);
    }
    let name = prog_name(prog_id).unwrap_or_default();
    Ok(Some(Attached { prog_id, how, name }))
}

/// Attach (`Some(prog)`) or detach (`None`) a program the netlink way,
/// which survives the process (what an older or crashed tool leaves).
/// `flags` is the mode the program was attached in.
pub fn netlink_set(ifindex: u32, prog: Option<&OwnedFd>, flags: u32) -> io::Result<()> {
    let mut req = nl_header(
        RTM_SETLINK,
        (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16,
        ifindex,
    );
    let fd: i32 = prog.map(|p| p.as_raw_fd()).unwrap_or(-1);
    let mut nested = Vec::new();
    push_attr(&mut nested, IFLA_XDP_FD, &fd.to_ne_bytes());
    push_attr(&mut nested, IFLA_XDP_FLAGS, &flags.to_ne_bytes());
    push_attr(&mut req, IFLA_XDP | 0x8000, &nested);
    finish(&mut req);
    let reply = nl_roundtrip(&req)?;
    match nl_error(&reply) {
        Some(0) | None => Ok(()),
        Some(e) => Err(io::Error::from_raw_os_error(-e)),
    }
}

/// The name of program `id` (`BPF_PROG_GET_FD_BY_ID` + info).
fn prog_name(id: u32) -> io::Result<String> {
    let mut a = Attr::new();
    a.u32(0, id);
    let fd = bpf(BPF_PROG_GET_FD_BY_ID, &mut a).map(fd_of)?;
    let mut info = [0u8; 256];
    let mut a = Attr::new();
    a.u32(0, fd.as_raw_fd() as u32)
        .u32(4, info.len() as u32)
        .u64(8, info.as_mut_ptr() as u64);
    bpf(BPF_OBJ_GET_INFO_BY_FD, &mut a)?;
    let name = &info[64..80];
    let end = name.iter().position(|&b| b == 0).unwrap_or(16);
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
}

fn nl_header(kind: u16, flags: u16, ifindex: u32) -> Vec<u8> {
    let mut m = vec![0u8; 32];
    m[4..6].copy_from_slice(&kind.to_ne_bytes());
    m[6..8].copy_from_slice(&flags.to_ne_bytes());
    m[8..12].copy_from_slice(&1u32.to_ne_bytes());
    // ifinfomsg: family AF_UNSPEC, index at offset 4 of it.
    m[20..24].copy_from_slice(&(ifindex as i32).to_ne_bytes());
    m
}

fn finish(m: &mut [u8]) {
    let len = m.len() as u32;
    m[0..4].copy_from_slice(&len.to_ne_bytes());
}

fn push_attr(buf: &mut Vec<u8>, kind: u16, data: &[u8]) {
    let len = 4 + data.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(data);
    buf.resize(buf.len().next_multiple_of(4), 0);
}

fn nl_roundtrip(req: &[u8]) -> io::Result<Vec<u8>> {
    // SAFETY: plain socket(2); the result is checked.
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: sends a live buffer of its length to the kernel.
    let r = unsafe { libc::send(fd.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = vec![0u8; 32 * 1024];
    // SAFETY: receives into a live buffer of its length.
    let r = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(r as usize);
    Ok(buf)
}

fn ne16(b: &[u8], o: usize) -> u16 {
    u16::from_ne_bytes([b[o], b[o + 1]])
}

fn ne32(b: &[u8], o: usize) -> u32 {
    u32::from_ne_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

/// The errno of an `NLMSG_ERROR` reply (0 = ack).
fn nl_error(msg: &[u8]) -> Option<i32> {
    (msg.len() >= 20 && ne16(msg, 4) == NLMSG_ERROR).then(|| ne32(msg, 16) as i32)
}

/// `(IFLA_XDP_PROG_ID, IFLA_XDP_ATTACHED)` of an `RTM_NEWLINK` reply.
/// Any bytes are safe.
pub fn parse_xdp(msg: &[u8]) -> Option<(u32, u8)> {
    if msg.len() < 32 || ne16(msg, 4) != RTM_NEWLINK {
        return None;
    }
    let end = (ne32(msg, 0) as usize).min(msg.len());
    let mut a = 32;
    while a + 4 <= end {
        let alen = ne16(msg, a) as usize;
        if alen < 4 || a + alen > end {
            return None;
        }
        if ne16(msg, a + 2) & 0x3fff == IFLA_XDP {
            let (mut id, mut how) = (0, 0);
            let mut n = a + 4;
            while n + 4 <= a + alen {
                let nlen = ne16(msg, n) as usize;
                if nlen < 4 || n + nlen > a + alen {
                    break;
                }
                match ne16(msg, n + 2) & 0x3fff {
                    IFLA_XDP_PROG_ID if nlen >= 8 => id = ne32(msg, n + 4),
                    IFLA_XDP_ATTACHED if nlen >= 5 => how = msg[n + 4],
                    _ => {}
                }
                n += nlen.next_multiple_of(4);
            }
            return Some((id, how));
        }
        a += alen.next_multiple_of(4);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_encode_as_the_kernel_expects() {
        let p = steering_program(7);
        // r2 = *(u32 *)(r1 + 16)
        assert_eq!(p[0], 0x0000_0000_0010_1261);
        // ld_imm64 r1, map fd 7 (src = BPF_PSEUDO_MAP_FD)
        assert_eq!(p[1], 0x0000_0007_0000_1118);
        assert_eq!(p[2], 0);
        assert_eq!(p[3], 0x0000_0002_0000_03b7);
        assert_eq!(p[4], 0x0000_0033_0000_0085);
        assert_eq!(p[5], 0x95);
    }

    #[test]
    fn xdp_attribute_parser_takes_any_bytes() {
        assert_eq!(parse_xdp(&[]), None);
        assert_eq!(parse_xdp(&[0xff; 40]), None);
        let mut m = nl_header(RTM_NEWLINK, 0, 3);
        let mut nested = Vec::new();
        push_attr(&mut nested, IFLA_XDP_ATTACHED, &[1]);
        push_attr(&mut nested, IFLA_XDP_PROG_ID, &42u32.to_ne_bytes());
        push_attr(&mut m, IFLA_XDP | 0x8000, &nested);
        finish(&mut m);
        assert_eq!(parse_xdp(&m), Some((42, 1)));
        for cut in 0..m.len() {
            let mut t = m[..cut].to_vec();
            if t.len() >= 4 {
                let l = t.len() as u32;
                t[0..4].copy_from_slice(&l.to_ne_bytes());
            }
            let _ = parse_xdp(&t);
        }
    }
}
