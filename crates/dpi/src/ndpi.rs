//! A thin binding to nDPI (`libndpi`, LGPL-3.0, linked dynamically from
//! Debian's `libndpi-dev` 4.2): the dozen calls the engine needs, written
//! by hand against `/usr/include/ndpi/ndpi_api.h` (API version 8668).
//!
//! * [`Ndpi`] is one detection module. nDPI's module keeps caches that
//!   classification writes to, so each worker owns its own (`Send`, not
//!   `Sync`); building one takes about 40 ms and a few MB.
//! * [`FlowPool`] preallocates nDPI's per-flow state (`ndpi_flow_struct`,
//!   688 bytes in 4.2) for the flows *being classified*: a flow takes a
//!   slot on the first packet nDPI must see (`crate::first_packet`) and gives it back when its application is
//!   decided (or it gives up, or the flow ends), so classified flows cost
//!   nothing here. No allocation per flow on our side; what nDPI's
//!   dissectors allocate inside a slot (host names, certificate fields)
//!   is freed with `ndpi_free_flow_data` when the slot is released.
//!
//! The input path is [`Ndpi::process`]: an IP packet (the slice given is
//! all nDPI may read; lengths over 65,535 are cut, as its length argument
//! is 16 bits). Fuzzed by `fuzz_dpi_classify`.

use std::ffi::CStr;
use std::os::raw::{c_char, c_uint};
use std::ptr::NonNull;

/// nDPI's protocol id of "not (yet) known".
pub const UNKNOWN: u16 = 0;

/// Protocol ids the engine and tests name (nDPI's `ndpi_protocol_ids.h`).
pub mod ids {
    pub const DNS: u16 = 5;
    pub const HTTP: u16 = 7;
    pub const ICMP: u16 = 81;
    pub const ICMPV6: u16 = 102;
    pub const BITTORRENT: u16 = 37;
    pub const TLS: u16 = 91;
    pub const SSH: u16 = 92;
}

/// Size of nDPI's protocol bitmask (`NDPI_NUM_BITS` = 512 bits).
const BITMASK_WORDS: usize = 512 / 32;

#[repr(C)]
struct Bitmask {
    fds_bits: [u32; BITMASK_WORDS],
}

/// `ndpi_protocol` (8 bytes, returned by value).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Protocol {
    pub master: u16,
    pub app: u16,
    pub category: u32,
}

impl Protocol {
    /// The most specific protocol nDPI named (`app` if known, else `master`).
    pub fn id(&self) -> u16 {
        if self.app != UNKNOWN {
            self.app
        } else {
            self.master
        }
    }
}

#[repr(C)]
struct DetectionModule {
    _private: [u8; 0],
}

#[repr(C)]
struct FlowStruct {
    _private: [u8; 0],
}

#[link(name = "ndpi")]
extern "C" {
    fn ndpi_get_api_version() -> u16;
    fn ndpi_revision() -> *const c_char;
    fn ndpi_init_detection_module(prefs: u32) -> *mut DetectionModule;
    fn ndpi_set_protocol_detection_bitmask2(m: *mut DetectionModule, mask: *const Bitmask);
    fn ndpi_finalize_initialization(m: *mut DetectionModule);
    fn ndpi_exit_detection_module(m: *mut DetectionModule);
    fn ndpi_detection_get_sizeof_ndpi_flow_struct() -> u32;
    fn ndpi_detection_process_packet(
        m: *mut DetectionModule,
        flow: *mut FlowStruct,
        packet: *const u8,
        len: u16,
        time_ms: u64,
    ) -> Protocol;
    fn ndpi_detection_giveup(
        m: *mut DetectionModule,
        flow: *mut FlowStruct,
        guess: u8,
        guessed: *mut u8,
    ) -> Protocol;
    fn ndpi_extra_dissection_possible(m: *mut DetectionModule, flow: *mut FlowStruct) -> u8;
    fn ndpi_free_flow_data(flow: *mut FlowStruct);
    fn ndpi_get_proto_name(m: *mut DetectionModule, id: u16) -> *const c_char;
    fn ndpi_get_proto_by_name(m: *mut DetectionModule, name: *const c_char) -> u16;
    fn ndpi_get_num_supported_protocols(m: *mut DetectionModule) -> c_uint;
}

/// The API version these declarations were written against.
pub const API_VERSION: u16 = 8668;

/// Why a module could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NdpiError {
    /// The installed library is another API version than this binding's.
    Version {
        found: u16,
        want: u16,
    },
    InitFailed,
}

impl std::fmt::Display for NdpiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NdpiError::Version { found, want } => {
                write!(f, "libndpi API version {found}, this build expects {want} (Debian libndpi-dev 4.2)")
            }
            NdpiError::InitFailed => write!(f, "ndpi_init_detection_module failed"),
        }
    }
}

impl std::error::Error for NdpiError {}

/// nDPI's release string (e.g. "4.2.0").
pub fn revision() -> String {
    // SAFETY: a static NUL-terminated string.
    unsafe { CStr::from_ptr(ndpi_revision()) }
        .to_string_lossy()
        .into_owned()
}

/// Bytes of nDPI's per-flow state (`ndpi_flow_struct`), as a pool slot
/// holds it (rounded up to 16).
pub fn flow_state_bytes() -> usize {
    // SAFETY: a plain query.
    (unsafe { ndpi_detection_get_sizeof_ndpi_flow_struct() } as usize).next_multiple_of(16)
}

/// One nDPI detection module with every protocol enabled. See the module docs.
pub struct Ndpi {
    m: NonNull<DetectionModule>,
    protocols: u16,
}

// SAFETY: the module is used by one thread at a time (no `Sync`); nothing
// in it is tied to the thread that made it.
unsafe impl Send for Ndpi {}

/// nDPI 4.2 initialises libgcrypt inside `ndpi_init_detection_module`
/// (`gcry_check_version` unless already finished), and libgcrypt aborts the
/// process when two threads do that at once: workers and tests that build
/// modules in parallel must take turns. Control path only.
static MODULE_LIFECYCLE: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Ndpi {
    pub fn new() -> Result<Ndpi, NdpiError> {
        let _turn = MODULE_LIFECYCLE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // SAFETY: plain calls into the library in the documented order:
        // init, bitmask, finalize; one thread at a time (above).
        unsafe {
            let found = ndpi_get_api_version();
            if found != API_VERSION {
                return Err(NdpiError::Version {
                    found,
                    want: API_VERSION,
                });
            }
            let m = NonNull::new(ndpi_init_detection_module(0)).ok_or(NdpiError::InitFailed)?;
            let all = Bitmask {
                fds_bits: [u32::MAX; BITMASK_WORDS],
            };
            ndpi_set_protocol_detection_bitmask2(m.as_ptr(), &all);
            ndpi_finalize_initialization(m.as_ptr());
            let protocols =
                ndpi_get_num_supported_protocols(m.as_ptr()).min(u32::from(u16::MAX)) as u16;
            Ok(Ndpi { m, protocols })
        }
    }

    /// Number of protocol ids (ids are `0..protocols()`).
    pub fn protocols(&self) -> u16 {
        self.protocols
    }

    /// nDPI's name of a protocol id ("Unknown" for ids it does not know).
    pub fn name(&self, id: u16) -> String {
        if id >= self.protocols {
            return "Unknown".into();
        }
        // SAFETY: id is in range; nDPI returns a pointer into its tables.
        let p = unsafe { ndpi_get_proto_name(self.m.as_ptr(), id) };
        if p.is_null() {
            return "Unknown".into();
        }
        // SAFETY: NUL-terminated, lives as long as the module.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// The id of a protocol by nDPI's name (case-insensitive), if known.
    pub fn id(&self, name: &str) -> Option<u16> {
        let c = std::ffi::CString::new(name).ok()?;
        // SAFETY: a valid C string; the call only reads it.
        let id = unsafe { ndpi_get_proto_by_name(self.m.as_ptr(), c.as_ptr()) };
        // nDPI answers UNKNOWN (0) for names it does not know.
        (id != UNKNOWN || name.eq_ignore_ascii_case("unknown")).then_some(id)
    }

    /// Feeds one IP packet of a flow to nDPI (see the module docs).
    #[inline]
    pub fn process(&mut self, pool: &mut FlowPool, slot: u32, ip: &[u8], now_ms: u64) -> Protocol {
        let len = ip.len().min(usize::from(u16::MAX));
        if len == 0 {
            return Protocol::default();
        }
        // SAFETY: the slot is a live, zero-initialised-then-nDPI-owned flow
        // struct of the size nDPI asked for; the packet pointer is valid
        // for `len` bytes and nDPI reads at most `len`.
        unsafe {
            ndpi_detection_process_packet(
                self.m.as_ptr(),
                pool.ptr(slot),
                ip.as_ptr(),
                len as u16,
                now_ms,
            )
        }
    }

    /// True when nDPI would still like packets of a flow it has named
    /// (e.g. a TLS certificate after the SNI).
    pub fn wants_more(&mut self, pool: &mut FlowPool, slot: u32) -> bool {
        // SAFETY: as in `process`.
        unsafe { ndpi_extra_dissection_possible(self.m.as_ptr(), pool.ptr(slot)) != 0 }
    }

    /// nDPI's final answer for a flow it has not named yet; with `guess`
    /// it guesses from ports and address lists. Returns (protocol, guessed).
    pub fn give_up(&mut self, pool: &mut FlowPool, slot: u32, guess: bool) -> (Protocol, bool) {
        let mut guessed = 0u8;
        // SAFETY: as in `process`; `guessed` is a valid out-pointer.
        let p = unsafe {
            ndpi_detection_giveup(
                self.m.as_ptr(),
                pool.ptr(slot),
                u8::from(guess),
                &mut guessed,
            )
        };
        (p, guessed != 0)
    }
}

impl Drop for Ndpi {
    fn drop(&mut self) {
        let _turn = MODULE_LIFECYCLE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // SAFETY: the module was made by `ndpi_init_detection_module` and
        // is dropped once.
        unsafe { ndpi_exit_detection_module(self.m.as_ptr()) }
    }
}

/// Preallocated nDPI per-flow states for flows being classified.
pub struct FlowPool {
    mem: NonNull<u8>,
    layout: std::alloc::Layout,
    size: usize,
    free: Vec<u32>,
    live: Vec<bool>,
}

// SAFETY: owned memory, used by one thread at a time.
unsafe impl Send for FlowPool {}

impl FlowPool {
    /// `slots` flow states (at least 1), all reserved now.
    pub fn new(slots: u32) -> FlowPool {
        // SAFETY: a plain query.
        let size =
            (unsafe { ndpi_detection_get_sizeof_ndpi_flow_struct() } as usize).next_multiple_of(16);
        let slots = slots.max(1);
        let layout =
            std::alloc::Layout::from_size_align(size * slots as usize, 64).expect("pool layout");
        // SAFETY: non-zero size.
        let mem = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
            .unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        FlowPool {
            mem,
            layout,
            size,
            free: (0..slots).rev().collect(),
            live: vec![false; slots as usize],
        }
    }

    /// Bytes per slot (nDPI's flow struct, rounded to 16).
    pub fn slot_bytes(&self) -> usize {
        self.size
    }

    pub fn capacity(&self) -> usize {
        self.live.len()
    }

    pub fn in_use(&self) -> usize {
        self.live.len() - self.free.len()
    }

    /// Memory reserved by the pool.
    pub fn memory_bytes(&self) -> usize {
        self.layout.size()
    }

    fn ptr(&mut self, slot: u32) -> *mut FlowStruct {
        assert!(self.live[slot as usize], "nDPI flow slot {slot} not live");
        // SAFETY: slot < capacity (checked by the index above).
        unsafe { self.mem.as_ptr().add(slot as usize * self.size) as *mut FlowStruct }
    }

    /// A zeroed flow state, or `None` when all are in use.
    pub fn alloc(&mut self) -> Option<u32> {
        let slot = self.free.pop()?;
        self.live[slot as usize] = true;
        // SAFETY: in bounds; nDPI expects a zeroed struct for a new flow.
        unsafe {
            std::ptr::write_bytes(
                self.mem.as_ptr().add(slot as usize * self.size),
                0,
                self.size,
            )
        };
        Some(slot)
    }

    /// Frees what nDPI allocated inside the slot and returns it.
    pub fn release(&mut self, slot: u32) {
        if !self.live.get(slot as usize).copied().unwrap_or(false) {
            return;
        }
        let p = self.ptr(slot);
        // SAFETY: a live flow struct; nDPI frees its members only.
        unsafe { ndpi_free_flow_data(p) };
        self.live[slot as usize] = false;
        self.free.push(slot);
    }
}

impl Drop for FlowPool {
    fn drop(&mut self) {
        for slot in 0..self.live.len() as u32 {
            self.release(slot);
        }
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.mem.as_ptr(), self.layout) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{build, parse_ethernet, ACK, SYN, TCP, UDP};

    fn feed(n: &mut Ndpi, pool: &mut FlowPool, slot: u32, frame: &[u8], t: u64) -> Protocol {
        let p = parse_ethernet(frame).unwrap();
        n.process(pool, slot, &frame[p.l3..], t)
    }

    #[test]
    fn version_names_and_ids() {
        let n = Ndpi::new().unwrap();
        assert!(revision().starts_with('4'));
        assert!(n.protocols() > 200);
        assert_eq!(n.name(ids::HTTP), "HTTP");
        assert_eq!(n.id("tls"), Some(ids::TLS));
        assert_eq!(n.id("no-such-protocol"), None);
        assert_eq!(n.name(60000), "Unknown");
    }

    #[test]
    fn http_request_is_recognised_and_slot_reused() {
        let mut n = Ndpi::new().unwrap();
        let mut pool = FlowPool::new(2);
        let s = pool.alloc().unwrap();
        let c = [10, 0, 0, 1];
        let sv = [10, 0, 0, 2];
        feed(
            &mut n,
            &mut pool,
            s,
            &build::v4(TCP, c, sv, 40000, 8080, SYN, b""),
            1,
        );
        feed(
            &mut n,
            &mut pool,
            s,
            &build::v4(TCP, sv, c, 8080, 40000, SYN | ACK, b""),
            2,
        );
        feed(
            &mut n,
            &mut pool,
            s,
            &build::v4(TCP, c, sv, 40000, 8080, ACK, b""),
            3,
        );
        let req = b"GET /index.html HTTP/1.1\r\nHost: example.com\r\nUser-Agent: curl/7.88\r\nAccept: */*\r\n\r\n";
        let p = feed(
            &mut n,
            &mut pool,
            s,
            &build::v4(TCP, c, sv, 40000, 8080, ACK, req),
            4,
        );
        assert_eq!(p.id(), ids::HTTP, "{p:?}");
        pool.release(s);
        assert_eq!(pool.in_use(), 0);
        let again = pool.alloc().unwrap();
        assert_eq!(again, s);
        pool.release(again);
    }

    #[test]
    fn dns_query_is_recognised_from_one_packet() {
        let mut n = Ndpi::new().unwrap();
        let mut pool = FlowPool::new(1);
        let s = pool.alloc().unwrap();
        // Query for example.com A.
        let q = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01";
        let p = feed(
            &mut n,
            &mut pool,
            s,
            &build::v4(UDP, [10, 0, 0, 1], [10, 0, 0, 2], 5555, 53, 0, q),
            1,
        );
        assert_eq!(p.id(), ids::DNS, "{p:?}");
    }

    #[test]
    fn pool_exhaustion_is_none_and_garbage_is_harmless() {
        let mut n = Ndpi::new().unwrap();
        let mut pool = FlowPool::new(1);
        let s = pool.alloc().unwrap();
        assert!(pool.alloc().is_none());
        for len in 0..200usize {
            let junk: Vec<u8> = (0..len).map(|i| (i * 37 + len) as u8).collect();
            let _ = n.process(&mut pool, s, &junk, len as u64);
        }
        let (p, _) = n.give_up(&mut pool, s, false);
        let _ = p.id();
        pool.release(s);
        pool.release(s); // double release is ignored
        assert_eq!(pool.in_use(), 0);
    }
}
