//! The label FIB: what to do with an incoming label, which labels an IP
//! route pushes, pseudowires, and precomputed backup paths.
//!
//! Terms (RFC 3031): the **ILM** (incoming label map) maps each of the
//! 2^20 labels to an [`IlmAction`]; an **NHLFE** (next-hop label
//! forwarding entry, [`Nhlfe`]) is "push these labels and send to this IP
//! next hop", with a primary [`Path`] and an optional precomputed backup.
//! **FTN** (FEC to NHLFE): an IP route pushes labels by pointing its LPM
//! value at an NHLFE id ([`NHLFE_BIT`] | index) instead of a plain next-hop
//! id — or at an ECMP group (in [`NextHopTable`]) whose members are NHLFE
//! ids, one label stack per ECMP next hop. This is additive: the LPM tables
//! and the next-hop table are unchanged, and a reader that only knows
//! [`NextHopTable::resolve`] finds no next hop for a labelled target
//! (a drop, never a wrong forward). [`Lfib::resolve`] understands both.
//!
//! **Fast reroute.** Every NHLFE may name a *protection id*: the resource
//! (a link or adjacency) its primary path depends on. While that id is
//! up, readers take the primary path; once the control plane marks it
//! down ([`Lfib::set_protection`]) every NHLFE naming it — however many
//! LSPs, FTNs and pseudowires use them — takes its backup. One store.
//!
//! **Facility backup (link protection).** A port may be guarded by a
//! protection id and a *bypass* path ([`Lfib::set_facility_backup`]):
//! while the id is down, every path whose next hop leaves through that
//! port — plain next hops, NHLFEs, ECMP members, pseudowire transports —
//! is sent to the bypass next hop instead, with the bypass labels pushed
//! on top of its own (RFC 4090 facility backup: the frame reaches the
//! same neighbour with the stack it expects). Installed before the
//! failure; the switch is the same single store.
//!
//! Concurrency is that of [`crate::nexthop`]: one writer (an internal
//! mutex), lock-free readers. ILM entries are single 64-bit words, so a
//! reader sees an old or a new action, never a mix; NHLFE and pseudowire
//! slots are small seqlocks.
//!
//! Memory: the ILM is one word per label (8 MiB for the whole label
//! space, allocated zeroed so untouched pages cost nothing); per-label
//! counters ([`LabelCounters`]) are per worker, single writer, 16 bytes
//! per label, also zero-allocated.

use crate::nexthop::{is_group, NextHop, NextHopTable, GROUP_BIT};
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

/// Number of label values.
pub const LABEL_SPACE: usize = 1 << 20;
/// Largest label.
pub const MAX_LABEL: u32 = (LABEL_SPACE - 1) as u32;
/// Labels below this are reserved (RFC 3032/7274); the ILM refuses them:
/// the pipeline handles 0 (IPv4 explicit null), 1 (router alert),
/// 2 (IPv6 explicit null) and drops the others.
pub const FIRST_UNRESERVED: u32 = 16;
/// Implicit null: signalled, never on the wire. An outgoing stack never
/// contains it: "implicit null" means push nothing (PHP).
pub const IMPLICIT_NULL: u32 = 3;
/// Target ids with this bit (and not [`GROUP_BIT`]) name an NHLFE.
pub const NHLFE_BIT: u32 = 1 << 29;
/// Target ids with this bit resolve in the **default VRF's** next-hop
/// table (through this LFIB), whichever VRF's FIB holds them: the routes
/// a VRF imports from the VPN push the VPN label under the transport
/// label and leave by the provider uplinks (docs/vrf.md, "L3VPN"). The
/// rest of the id is an ordinary target (next hop, NHLFE or group) of the
/// default VRF; clear the bit before [`Lfib::resolve`].
pub const VIA_DEFAULT_BIT: u32 = 1 << 28;
/// Most labels one path pushes (transport + remote-LFA/TI-LFA labels;
/// a pseudowire adds its own label on top of its transport's stack).
pub const MAX_PUSH: usize = 4;

/// Whether a target id names an NHLFE.
#[inline]
pub fn is_nhlfe(target: u32) -> bool {
    target & (NHLFE_BIT | GROUP_BIT) == NHLFE_BIT
}

/// Why an LFIB update was refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LfibError {
    /// Label above 1,048,575.
    LabelRange,
    /// Incoming label 0..=15: reserved, handled by the pipeline.
    ReservedLabel,
    /// Outgoing stack deeper than [`MAX_PUSH`], or holding implicit null
    /// or a label above 20 bits.
    BadStack,
    /// Index outside the table's capacity.
    BadId,
    /// A target id that is neither a next hop, an NHLFE nor a group, or a
    /// path whose next hop is a group.
    BadTarget,
}

impl std::fmt::Display for LfibError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LfibError::LabelRange => "label above 1048575",
            LfibError::ReservedLabel => "label 0-15 is reserved",
            LfibError::BadStack => "outgoing label stack too deep or holds implicit-null",
            LfibError::BadId => "index outside the table",
            LfibError::BadTarget => "target is not a next hop, NHLFE or ECMP group",
        })
    }
}

impl std::error::Error for LfibError {}

/// Outgoing labels, outermost first (as on the wire). Empty means push
/// nothing: implicit null / penultimate-hop pop.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Hash)]
pub struct LabelStack {
    len: u8,
    labels: [u32; MAX_PUSH],
}

impl LabelStack {
    /// The empty stack (implicit null).
    pub const EMPTY: LabelStack = LabelStack {
        len: 0,
        labels: [0; MAX_PUSH],
    };

    /// Checked constructor. Implicit-null entries are dropped (FRR sends
    /// them in label lists meaning "nothing"), so `[3]` is the empty stack.
    pub fn new(labels: &[u32]) -> Result<LabelStack, LfibError> {
        let mut s = LabelStack::EMPTY;
        for &l in labels {
            if l > MAX_LABEL {
                return Err(LfibError::BadStack);
            }
            if l == IMPLICIT_NULL {
                continue;
            }
            if s.len as usize == MAX_PUSH {
                return Err(LfibError::BadStack);
            }
            s.labels[s.len as usize] = l;
            s.len += 1;
        }
        Ok(s)
    }

    /// The labels, outermost first.
    #[inline]
    pub fn as_slice(&self) -> &[u32] {
        &self.labels[..self.len as usize]
    }

    /// Number of labels.
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether nothing is pushed.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// One way out: an IP next hop (an id in the [`NextHopTable`], never a
/// group) and the labels to push toward it.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Hash)]
pub struct Path {
    pub next_hop: u32,
    pub labels: LabelStack,
}

/// A next-hop label forwarding entry: primary path, optional precomputed
/// backup (LFA / remote-LFA / TI-LFA from FRR, or configured), and the
/// protection id whose state chooses between them.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Hash)]
pub struct Nhlfe {
    pub primary: Path,
    pub backup: Option<Path>,
    /// The link/adjacency the primary depends on. While it is down the
    /// backup is used; with no backup the entry has no path (drop).
    pub protection: Option<u32>,
}

/// What an incoming label means.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum IlmAction {
    /// Pop the top label and push the NHLFE's labels toward its next hop:
    /// one label is a **swap**, none is **PHP** (pop and forward what is
    /// below), label 0 or 2 is a swap to **explicit null**, more labels
    /// swap and push. `target` is an NHLFE id or an ECMP group of them.
    Forward { target: u32 },
    /// Pop; the label was the bottom one and the payload is routed in IP
    /// table `table` (0 = the global table; a VRF otherwise). `af` says
    /// what the payload is (`Any`: from its first nibble). A label that is
    /// not the bottom one is popped and the next label looked up.
    PopLookup { af: PopAf, table: u16 },
    /// Pop; the payload belongs to pseudowire `pw` (its attachment circuit
    /// and control-word setting are in the pseudowire table).
    PopToPseudowire { pw: u32 },
}

/// The payload family of a [`IlmAction::PopLookup`].
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum PopAf {
    Any,
    Ipv4,
    Ipv6,
}

const K_FORWARD: u64 = 1;
const K_POP: u64 = 2;
const K_PW: u64 = 3;

impl IlmAction {
    fn encode(self) -> u64 {
        match self {
            IlmAction::Forward { target } => K_FORWARD << 60 | target as u64,
            IlmAction::PopLookup { af, table } => {
                let a = match af {
                    PopAf::Any => 0,
                    PopAf::Ipv4 => 1,
                    PopAf::Ipv6 => 2,
                };
                K_POP << 60 | a << 32 | table as u64
            }
            IlmAction::PopToPseudowire { pw } => K_PW << 60 | pw as u64,
        }
    }

    #[inline]
    fn decode(w: u64) -> Option<IlmAction> {
        match w >> 60 {
            K_FORWARD => Some(IlmAction::Forward { target: w as u32 }),
            K_POP => Some(IlmAction::PopLookup {
                af: match (w >> 32) & 3 {
                    1 => PopAf::Ipv4,
                    2 => PopAf::Ipv6,
                    _ => PopAf::Any,
                },
                table: w as u16,
            }),
            K_PW => Some(IlmAction::PopToPseudowire { pw: w as u32 }),
            _ => None,
        }
    }
}

/// Pseudowire service type (RFC 4446 PW types used by RFC 4448).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum PwType {
    /// Type 4, "Ethernet tagged mode": one pseudowire per VLAN; the VLAN
    /// tag travels in the frame.
    EthernetTagged,
    /// Type 5, "Ethernet raw mode": a whole port.
    Ethernet,
}

/// A pseudowire as the data path needs it, both directions.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub struct Pseudowire {
    /// Attachment circuit id (the data path's port / port+VLAN binding).
    pub ac: u32,
    pub pw_type: PwType,
    /// Control word on this pseudowire (negotiated by LDP).
    pub control_word: bool,
    /// The label the remote PE assigned (bottom of our stack on encap).
    pub remote_label: u32,
    /// How to reach the remote PE: an NHLFE id, an ECMP group of them, or
    /// a plain next-hop id (peer directly connected, implicit-null
    /// transport).
    pub transport: u32,
}

/// A resolved way out for one frame.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Resolved {
    /// Next-hop id (in the [`NextHopTable`]) and what it holds.
    pub next_hop_id: u32,
    pub next_hop: NextHop,
    /// Labels to push, outermost first.
    pub labels: LabelStack,
    /// The backup path was taken (the primary's protection id is down).
    pub on_backup: bool,
}

/// Capacities of an [`Lfib`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct LfibSize {
    /// NHLFE slots (LSP out-segments and FTN label stacks).
    pub nhlfes: usize,
    /// Pseudowire slots.
    pub pseudowires: usize,
    /// Attachment circuit ids `0..acs` that may map to a pseudowire.
    pub acs: usize,
    /// Protection ids.
    pub protections: usize,
}

impl Default for LfibSize {
    /// 131,072 NHLFEs, 16,384 pseudowires, 65,536 attachment circuits and
    /// 4,096 protection ids.
    fn default() -> Self {
        LfibSize {
            nhlfes: 1 << 17,
            pseudowires: 1 << 14,
            acs: 1 << 16,
            protections: 4096,
        }
    }
}

#[derive(Default)]
struct PathSlot {
    next_hop: AtomicU32,
    len: AtomicU32,
    labels: [AtomicU32; MAX_PUSH],
}

impl PathSlot {
    fn store(&self, p: &Path) {
        self.next_hop.store(p.next_hop, Ordering::Relaxed);
        self.len.store(p.labels.len as u32, Ordering::Relaxed);
        for (a, &l) in self.labels.iter().zip(&p.labels.labels) {
            a.store(l, Ordering::Relaxed);
        }
    }

    #[inline]
    fn load(&self) -> Path {
        let mut labels = LabelStack::EMPTY;
        labels.len = (self.len.load(Ordering::Relaxed) as usize).min(MAX_PUSH) as u8;
        for (l, a) in labels.labels.iter_mut().zip(&self.labels) {
            *l = a.load(Ordering::Relaxed);
        }
        Path {
            next_hop: self.next_hop.load(Ordering::Relaxed),
            labels,
        }
    }
}

const NH_PRESENT: u64 = 1 << 63;
const NH_BACKUP: u64 = 1 << 62;
const NH_PROTECTED: u64 = 1 << 61;

#[derive(Default)]
#[repr(C)]
struct NhlfeSlot {
    seq: AtomicU32,
    /// present | has backup | protected, protection id in the low 32 bits.
    head: AtomicU64,
    primary: PathSlot,
    backup: PathSlot,
}

// SAFETY: atomics and arrays of them only; all zero is `Default` (not
// present, no paths).
unsafe impl crate::huge::Zeroable for NhlfeSlot {}

/// Ports that may carry a facility backup (port ids are 16 bits).
pub const GUARDED_PORTS: usize = 1 << 16;

#[derive(Default)]
struct BypassSlot {
    seq: AtomicU32,
    path: PathSlot,
}

const PW_PRESENT: u32 = 1 << 31;
const PW_CW: u32 = 1 << 30;
const PW_TAGGED: u32 = 1 << 29;

#[derive(Default)]
struct PwSlot {
    seq: AtomicU32,
    flags: AtomicU32,
    ac: AtomicU32,
    remote_label: AtomicU32,
    transport: AtomicU32,
}

#[inline]
fn write_begin(seq: &AtomicU32) -> u32 {
    let s = seq.load(Ordering::Relaxed);
    seq.store(s.wrapping_add(1), Ordering::Relaxed);
    fence(Ordering::Release);
    s
}

#[inline]
fn write_end(seq: &AtomicU32, s: u32) {
    seq.store(s.wrapping_add(2), Ordering::Release);
}

#[inline]
fn read<T>(seq: &AtomicU32, f: impl Fn() -> T) -> T {
    loop {
        let s1 = seq.load(Ordering::Acquire);
        if s1 & 1 == 0 {
            let v = f();
            fence(Ordering::Acquire);
            if seq.load(Ordering::Relaxed) == s1 {
                return v;
            }
        }
        std::hint::spin_loop();
    }
}

/// `n` zeroed 64-bit atomics from `calloc`: untouched pages stay unmapped.
fn zeroed_atomics64(n: usize) -> Box<[AtomicU64]> {
    let b: Box<[u64]> = vec![0u64; n].into_boxed_slice();
    let p = Box::into_raw(b) as *mut [AtomicU64];
    // SAFETY: AtomicU64 has the same size, alignment and bit validity as
    // u64, and the pointer comes from a Box of exactly this slice length.
    unsafe { Box::from_raw(p) }
}

/// The label FIB: ILM, NHLFEs, pseudowires, protection state.
pub struct Lfib {
    /// The label space's actions (8 MiB) and the NHLFEs (64 bytes each:
    /// 8 MiB at the default 131,072), read per packet: 2 MB pages
    /// committed as touched (`tables::huge`; under 2 MiB, as in tests'
    /// small sizes, 4 KB pages).
    ilm: crate::huge::HugeArray<AtomicU64>,
    nhlfes: crate::huge::HugeArray<NhlfeSlot>,
    pws: Box<[PwSlot]>,
    /// Attachment circuit → pseudowire id + 1 (0: none).
    ac_pw: Box<[AtomicU32]>,
    /// Protection id → down.
    down: Box<[AtomicBool]>,
    /// Protection id → times it went down (control plane only).
    switches: Box<[AtomicU64]>,
    /// Port → protection id + 1 of its facility backup (0: none).
    port_guard: Box<[AtomicU32]>,
    /// Protection id → bypass path of the port it guards.
    bypass: Box<[BypassSlot]>,
    w: Mutex<()>,
}

impl Lfib {
    /// An empty LFIB over the whole label space.
    pub fn new(size: LfibSize) -> Lfib {
        Lfib {
            ilm: crate::huge::HugeArray::with_backing(
                LABEL_SPACE,
                crate::huge::Backing::HugeOnTouch,
            ),
            nhlfes: crate::huge::HugeArray::with_backing(
                size.nhlfes,
                crate::huge::Backing::HugeOnTouch,
            ),
            pws: (0..size.pseudowires).map(|_| PwSlot::default()).collect(),
            ac_pw: crate::lpm4::zeroed_atomics(size.acs),
            down: (0..size.protections)
                .map(|_| AtomicBool::new(false))
                .collect(),
            switches: (0..size.protections).map(|_| AtomicU64::new(0)).collect(),
            port_guard: crate::lpm4::zeroed_atomics(GUARDED_PORTS),
            bypass: (0..size.protections)
                .map(|_| BypassSlot::default())
                .collect(),
            w: Mutex::new(()),
        }
    }

    /// Bytes of the ILM and NHLFE arrays, and of them on huge pages now
    /// (reads `/proc/self/smaps`: not for the packet path).
    pub fn memory(&self) -> (usize, Option<usize>) {
        let ranges: Vec<_> = [self.ilm.advised_range(), self.nhlfes.advised_range()]
            .into_iter()
            .flatten()
            .collect();
        (
            self.ilm.bytes() + self.nhlfes.bytes(),
            crate::huge::huge_bytes_in(&ranges),
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.w.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn check_target(&self, target: u32, allow_plain: bool) -> Result<(), LfibError> {
        if is_group(target) {
            Ok(())
        } else if is_nhlfe(target) {
            if ((target & !NHLFE_BIT) as usize) < self.nhlfes.len() {
                Ok(())
            } else {
                Err(LfibError::BadId)
            }
        } else if allow_plain && target & NHLFE_BIT == 0 {
            Ok(())
        } else {
            Err(LfibError::BadTarget)
        }
    }

    // ---- ILM ----------------------------------------------------------

    /// Install or replace the action for incoming `label` (writer side).
    pub fn set_ilm(&self, label: u32, action: IlmAction) -> Result<(), LfibError> {
        if label > MAX_LABEL {
            return Err(LfibError::LabelRange);
        }
        if label < FIRST_UNRESERVED {
            return Err(LfibError::ReservedLabel);
        }
        match action {
            // A swap needs labels or at least an NHLFE; a plain next hop is
            // allowed too (PHP toward a next hop that needs no NHLFE).
            IlmAction::Forward { target } => self.check_target(target, true)?,
            IlmAction::PopToPseudowire { pw } if pw as usize >= self.pws.len() => {
                return Err(LfibError::BadId)
            }
            _ => {}
        }
        let _g = self.lock();
        self.ilm[label as usize].store(action.encode(), Ordering::Release);
        Ok(())
    }

    /// Remove the entry for `label` (writer side); frames with it then
    /// miss (dropped, counted by the pipeline).
    pub fn clear_ilm(&self, label: u32) {
        if let Some(e) = self.ilm.get(label as usize) {
            let _g = self.lock();
            e.store(0, Ordering::Release);
        }
    }

    /// The action for `label` (reader side, lock-free, one load).
    #[inline]
    pub fn ilm(&self, label: u32) -> Option<IlmAction> {
        IlmAction::decode(self.ilm.get(label as usize)?.load(Ordering::Acquire))
    }

    /// Installed ILM entries, in label order (any thread; walks the table).
    pub fn ilm_entries(&self) -> Vec<(u32, IlmAction)> {
        self.ilm
            .iter()
            .enumerate()
            .filter_map(|(l, w)| Some((l as u32, IlmAction::decode(w.load(Ordering::Acquire))?)))
            .collect()
    }

    // ---- NHLFEs -------------------------------------------------------

    /// Install or replace NHLFE `index`; its target id is
    /// `NHLFE_BIT | index`. Every ILM entry, FTN and pseudowire pointing
    /// at it follows at once.
    pub fn set_nhlfe(&self, index: u32, e: &Nhlfe) -> Result<u32, LfibError> {
        let slot = self.nhlfes.get(index as usize).ok_or(LfibError::BadId)?;
        for p in std::iter::once(&e.primary).chain(e.backup.as_ref()) {
            if is_group(p.next_hop) || p.next_hop & NHLFE_BIT != 0 {
                return Err(LfibError::BadTarget);
            }
        }
        if let Some(pid) = e.protection {
            if pid as usize >= self.down.len() {
                return Err(LfibError::BadId);
            }
        }
        let mut head = NH_PRESENT;
        if e.backup.is_some() {
            head |= NH_BACKUP;
        }
        if let Some(pid) = e.protection {
            head |= NH_PROTECTED | pid as u64;
        }
        let _g = self.lock();
        let s = write_begin(&slot.seq);
        slot.head.store(head, Ordering::Relaxed);
        slot.primary.store(&e.primary);
        if let Some(b) = &e.backup {
            slot.backup.store(b);
        }
        write_end(&slot.seq, s);
        Ok(NHLFE_BIT | index)
    }

    /// Remove NHLFE `index`; targets naming it then have no path.
    pub fn clear_nhlfe(&self, index: u32) {
        if let Some(slot) = self.nhlfes.get(index as usize) {
            let _g = self.lock();
            let s = write_begin(&slot.seq);
            slot.head.store(0, Ordering::Relaxed);
            write_end(&slot.seq, s);
        }
    }

    /// NHLFE `index` as stored (any thread).
    pub fn nhlfe(&self, index: u32) -> Option<Nhlfe> {
        let slot = self.nhlfes.get(index as usize)?;
        let (head, primary, backup) = read(&slot.seq, || {
            (
                slot.head.load(Ordering::Relaxed),
                slot.primary.load(),
                slot.backup.load(),
            )
        });
        (head & NH_PRESENT != 0).then(|| Nhlfe {
            primary,
            backup: (head & NH_BACKUP != 0).then_some(backup),
            protection: (head & NH_PROTECTED != 0).then_some(head as u32),
        })
    }

    /// The path NHLFE `index` uses now (reader side, lock-free): the
    /// primary, or the backup while the protection id is down.
    #[inline]
    pub fn active_path(&self, index: u32) -> Option<(Path, bool)> {
        let slot = self.nhlfes.get(index as usize)?;
        read(&slot.seq, || {
            let head = slot.head.load(Ordering::Relaxed);
            if head & NH_PRESENT == 0 {
                return None;
            }
            let down = head & NH_PROTECTED != 0
                && self
                    .down
                    .get(head as u32 as usize)
                    .is_some_and(|d| d.load(Ordering::Relaxed));
            if !down {
                Some((slot.primary.load(), false))
            } else if head & NH_BACKUP != 0 {
                Some((slot.backup.load(), true))
            } else {
                None
            }
        })
    }

    // ---- Protection ---------------------------------------------------

    /// Mark protection id `pid` down (use backups) or up (primaries):
    /// one store, whatever the number of NHLFEs that name it.
    pub fn set_protection(&self, pid: u32, down: bool) -> Result<(), LfibError> {
        let was = self
            .down
            .get(pid as usize)
            .ok_or(LfibError::BadId)?
            .swap(down, Ordering::AcqRel);
        if down && !was {
            self.switches[pid as usize].fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Times protection id `pid` went from up to down.
    pub fn protection_switches(&self, pid: u32) -> u64 {
        self.switches
            .get(pid as usize)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Guard `port` with protection id `pid` and a precomputed `bypass`
    /// (next hop on another port, labels pushed on top of the protected
    /// path's own): while `pid` is down, whatever would leave through
    /// `port` takes the bypass. Replaces an earlier guard of the port.
    pub fn set_facility_backup(&self, port: u16, pid: u32, bypass: &Path) -> Result<(), LfibError> {
        let slot = self.bypass.get(pid as usize).ok_or(LfibError::BadId)?;
        if is_group(bypass.next_hop) || bypass.next_hop & NHLFE_BIT != 0 {
            return Err(LfibError::BadTarget);
        }
        let _g = self.lock();
        let s = write_begin(&slot.seq);
        slot.path.store(bypass);
        write_end(&slot.seq, s);
        self.port_guard[port as usize].store(pid + 1, Ordering::Release);
        Ok(())
    }

    /// Remove `port`'s facility backup.
    pub fn clear_facility_backup(&self, port: u16) {
        let _g = self.lock();
        self.port_guard[port as usize].store(0, Ordering::Release);
    }

    /// `port`'s facility backup: protection id and bypass path.
    pub fn facility_backup(&self, port: u16) -> Option<(u32, Path)> {
        let pid = self.port_guard[port as usize]
            .load(Ordering::Acquire)
            .checked_sub(1)?;
        let slot = self.bypass.get(pid as usize)?;
        Some((pid, read(&slot.seq, || slot.path.load())))
    }

    /// The bypass to take instead of leaving through `port`, when `port`
    /// is guarded and its protection id is down (reader side).
    #[inline]
    fn bypass_of(&self, port: u16) -> Option<Path> {
        let g = self.port_guard[port as usize].load(Ordering::Relaxed);
        if g == 0 {
            return None;
        }
        let pid = (g - 1) as usize;
        if !self.down.get(pid)?.load(Ordering::Acquire) {
            return None;
        }
        let slot = self.bypass.get(pid)?;
        Some(read(&slot.seq, || slot.path.load()))
    }

    /// Whether protection id `pid` is down.
    pub fn protection_down(&self, pid: u32) -> bool {
        self.down
            .get(pid as usize)
            .is_some_and(|d| d.load(Ordering::Acquire))
    }

    // ---- Pseudowires --------------------------------------------------

    /// Pseudowire ids `0..n` this LFIB holds (also bounded by its
    /// attachment-circuit map: ac id = pseudowire id in Lanyard).
    pub fn pseudowire_capacity(&self) -> usize {
        self.pws.len().min(self.ac_pw.len())
    }

    /// Install or replace pseudowire `id`, and map its attachment circuit
    /// to it (an AC another pseudowire had is taken over).
    pub fn set_pseudowire(&self, id: u32, pw: &Pseudowire) -> Result<(), LfibError> {
        let slot = self.pws.get(id as usize).ok_or(LfibError::BadId)?;
        let ac = self.ac_pw.get(pw.ac as usize).ok_or(LfibError::BadId)?;
        if pw.remote_label > MAX_LABEL || pw.remote_label < FIRST_UNRESERVED {
            return Err(LfibError::LabelRange);
        }
        self.check_target(pw.transport, true)?;
        let mut flags = PW_PRESENT;
        if pw.control_word {
            flags |= PW_CW;
        }
        if pw.pw_type == PwType::EthernetTagged {
            flags |= PW_TAGGED;
        }
        let _g = self.lock();
        let s = write_begin(&slot.seq);
        slot.flags.store(flags, Ordering::Relaxed);
        slot.ac.store(pw.ac, Ordering::Relaxed);
        slot.remote_label.store(pw.remote_label, Ordering::Relaxed);
        slot.transport.store(pw.transport, Ordering::Relaxed);
        write_end(&slot.seq, s);
        ac.store(id + 1, Ordering::Release);
        Ok(())
    }

    /// Remove pseudowire `id` and its attachment-circuit mapping.
    pub fn clear_pseudowire(&self, id: u32) {
        let Some(pw) = self.pseudowire(id) else {
            return;
        };
        let slot = &self.pws[id as usize];
        let _g = self.lock();
        if let Some(ac) = self.ac_pw.get(pw.ac as usize) {
            let _ = ac.compare_exchange(id + 1, 0, Ordering::AcqRel, Ordering::Relaxed);
        }
        let s = write_begin(&slot.seq);
        slot.flags.store(0, Ordering::Relaxed);
        write_end(&slot.seq, s);
    }

    /// Pseudowire `id` (reader side, lock-free).
    #[inline]
    pub fn pseudowire(&self, id: u32) -> Option<Pseudowire> {
        let slot = self.pws.get(id as usize)?;
        let (flags, ac, remote_label, transport) = read(&slot.seq, || {
            (
                slot.flags.load(Ordering::Relaxed),
                slot.ac.load(Ordering::Relaxed),
                slot.remote_label.load(Ordering::Relaxed),
                slot.transport.load(Ordering::Relaxed),
            )
        });
        (flags & PW_PRESENT != 0).then_some(Pseudowire {
            ac,
            pw_type: if flags & PW_TAGGED != 0 {
                PwType::EthernetTagged
            } else {
                PwType::Ethernet
            },
            control_word: flags & PW_CW != 0,
            remote_label,
            transport,
        })
    }

    /// The pseudowire attachment circuit `ac` feeds, if any.
    #[inline]
    pub fn pseudowire_of_ac(&self, ac: u32) -> Option<u32> {
        let v = self.ac_pw.get(ac as usize)?.load(Ordering::Acquire);
        v.checked_sub(1)
    }

    // ---- Resolution (reader side) -------------------------------------

    /// What target id `target` (a plain next-hop id, an NHLFE id, or an
    /// ECMP group mixing both) means for a flow with `hash`: next hop and
    /// labels to push. Lock-free, no allocation. `None`: no path (missing
    /// entry, or primary down without backup).
    #[inline]
    pub fn resolve(&self, nh: &NextHopTable, target: u32, hash: u32) -> Option<Resolved> {
        let member = if is_group(target) {
            nh.select(target & !GROUP_BIT, hash)?
        } else {
            target
        };
        let (path, on_backup) = if is_nhlfe(member) {
            self.active_path(member & !NHLFE_BIT)?
        } else {
            (
                Path {
                    next_hop: member,
                    labels: LabelStack::EMPTY,
                },
                false,
            )
        };
        let next_hop = nh.get(path.next_hop)?;
        if let Some(b) = self.bypass_of(next_hop.port) {
            // Facility backup: the bypass labels go on top of the
            // protected path's own; a stack too deep has no path.
            let mut labels = b.labels;
            for &l in path.labels.as_slice() {
                if labels.len() >= MAX_PUSH {
                    return None;
                }
                labels.labels[labels.len()] = l;
                labels.len += 1;
            }
            return Some(Resolved {
                next_hop_id: b.next_hop,
                next_hop: nh.get(b.next_hop)?,
                labels,
                on_backup: true,
            });
        }
        Some(Resolved {
            next_hop_id: path.next_hop,
            next_hop,
            labels: path.labels,
            on_backup,
        })
    }
}

/// Per-label packet and byte counters of one worker (single writer: the
/// worker; any thread may read and sum across workers).
pub struct LabelCounters {
    packets: Box<[AtomicU64]>,
    bytes: Box<[AtomicU64]>,
}

impl Default for LabelCounters {
    fn default() -> Self {
        LabelCounters {
            packets: zeroed_atomics64(LABEL_SPACE),
            bytes: zeroed_atomics64(LABEL_SPACE),
        }
    }
}

impl LabelCounters {
    /// Count one frame of `len` bytes received with top label `label`
    /// (owner thread only: a load and a store, no atomic RMW).
    #[inline]
    pub fn count(&self, label: u32, len: usize) {
        let i = label as usize & (LABEL_SPACE - 1);
        let p = &self.packets[i];
        p.store(p.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        let b = &self.bytes[i];
        b.store(
            b.load(Ordering::Relaxed).wrapping_add(len as u64),
            Ordering::Relaxed,
        );
    }

    /// (packets, bytes) for `label`.
    pub fn get(&self, label: u32) -> (u64, u64) {
        let i = label as usize & (LABEL_SPACE - 1);
        (
            self.packets[i].load(Ordering::Relaxed),
            self.bytes[i].load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lpm4::Lpm4;
    use crate::nexthop::Group;
    use std::collections::HashMap;
    use std::net::{IpAddr, Ipv4Addr};
    use std::sync::Arc;

    fn via(port: u16, last: u8) -> NextHop {
        NextHop {
            port,
            gateway: Some(IpAddr::V4(Ipv4Addr::new(10, 0, port as u8, last))),
        }
    }

    fn stack(l: &[u32]) -> LabelStack {
        LabelStack::new(l).unwrap()
    }

    /// The default-size LFIB's ILM (8 MiB) and NHLFEs (131,072 × 64 B)
    /// are advised for 2 MB pages and 2 MB-aligned, and work; a small
    /// NHLFE array (8,192, 512 KiB) is not advised.
    #[test]
    fn big_arrays_on_huge_pages() {
        let t = Lfib::new(LfibSize::default());
        assert_eq!(std::mem::size_of::<NhlfeSlot>(), 64);
        assert_eq!(t.memory().0, (8 << 20) + (1 << 17) * 64);
        for a in [t.ilm.advised_range(), t.nhlfes.advised_range()] {
            let (start, len) = a.expect("advised");
            assert_eq!(start % crate::huge::HUGE_PAGE, 0);
            assert!(len >= 8 << 20);
        }
        let e = Nhlfe {
            primary: Path {
                next_hop: 1,
                labels: stack(&[1000]),
            },
            backup: None,
            protection: None,
        };
        let id = t.set_nhlfe((1 << 17) - 1, &e).unwrap();
        t.set_ilm(MAX_LABEL, IlmAction::Forward { target: id })
            .unwrap();
        assert_eq!(t.ilm(MAX_LABEL), Some(IlmAction::Forward { target: id }));
        assert!(t
            .memory()
            .1
            .is_some_and(|h| h <= 4 * crate::huge::HUGE_PAGE));
        let s = small();
        assert!(!s.nhlfes.advised());
    }

    fn small() -> Lfib {
        Lfib::new(LfibSize {
            nhlfes: 8192,
            pseudowires: 4096,
            acs: 4096,
            protections: 16,
        })
    }

    #[test]
    fn label_stack_rules() {
        assert_eq!(stack(&[3]), LabelStack::EMPTY);
        assert_eq!(stack(&[100, 3, 200]).as_slice(), &[100, 200]);
        assert_eq!(LabelStack::new(&[1 << 20]), Err(LfibError::BadStack));
        assert_eq!(LabelStack::new(&[16; 5]), Err(LfibError::BadStack));
        assert_eq!(stack(&[16; 4]).len(), 4);
    }

    #[test]
    fn ilm_actions_round_trip_and_reserved_labels_refused() {
        let t = small();
        let acts = [
            IlmAction::Forward {
                target: NHLFE_BIT | 5,
            },
            IlmAction::Forward {
                target: GROUP_BIT | 7,
            },
            IlmAction::Forward { target: 12 },
            IlmAction::PopLookup {
                af: PopAf::Ipv6,
                table: 42,
            },
            IlmAction::PopLookup {
                af: PopAf::Any,
                table: 0,
            },
            IlmAction::PopToPseudowire { pw: 4095 },
        ];
        for (i, a) in acts.iter().enumerate() {
            let label = MAX_LABEL - i as u32;
            t.set_ilm(label, *a).unwrap();
            assert_eq!(t.ilm(label), Some(*a));
        }
        assert_eq!(t.ilm_entries().len(), acts.len());
        assert_eq!(
            t.set_ilm(15, acts[0]),
            Err(LfibError::ReservedLabel),
            "reserved"
        );
        assert_eq!(t.set_ilm(1 << 20, acts[0]), Err(LfibError::LabelRange));
        assert_eq!(
            t.set_ilm(16, IlmAction::PopToPseudowire { pw: 4096 }),
            Err(LfibError::BadId)
        );
        assert_eq!(
            t.set_ilm(
                16,
                IlmAction::Forward {
                    target: NHLFE_BIT | 8192
                }
            ),
            Err(LfibError::BadId)
        );
        t.clear_ilm(MAX_LABEL);
        assert_eq!(t.ilm(MAX_LABEL), None);
        assert_eq!(t.ilm(1 << 20), None, "out of range reads miss");
    }

    /// FTN: an IP route pointing at a group whose members carry different
    /// label stacks (one implicit-null member) pushes per ECMP next hop.
    #[test]
    fn ftn_per_ecmp_next_hop() {
        let nh = NextHopTable::new(16, 4);
        let t = small();
        nh.set(1, via(1, 1)).unwrap();
        nh.set(2, via(2, 1)).unwrap();
        let a = t
            .set_nhlfe(
                0,
                &Nhlfe {
                    primary: Path {
                        next_hop: 1,
                        labels: stack(&[1000, 2000]),
                    },
                    ..Nhlfe::default()
                },
            )
            .unwrap();
        // Member 2 is a plain next hop: its neighbour advertised implicit null.
        let g = nh
            .set_group(
                0,
                &Group {
                    members: vec![a, 2],
                },
            )
            .unwrap();
        let fib = Lpm4::with_nodes(16);
        fib.insert(0xc633_6400, 24, g).unwrap();
        let target = fib.lookup(0xc633_6401).unwrap();
        let lo = t.resolve(&nh, target, 0).unwrap();
        assert_eq!(lo.next_hop, via(1, 1));
        assert_eq!(lo.labels.as_slice(), &[1000, 2000]);
        let hi = t.resolve(&nh, target, u32::MAX).unwrap();
        assert_eq!(hi.next_hop, via(2, 1));
        assert!(hi.labels.is_empty());
        // The plain next-hop resolver refuses a labelled target: a drop,
        // never a forward without its labels.
        assert_eq!(nh.resolve(a, 0), None);
    }

    /// F-MPLS fast reroute: 3,072 pseudowires and 3,072 LSPs over one
    /// link move to their backups with one store, and back.
    #[test]
    fn one_store_moves_every_protected_entry_to_backup() {
        let nh = NextHopTable::new(16, 4);
        let t = small();
        nh.set(1, via(1, 1)).unwrap();
        nh.set(2, via(2, 1)).unwrap();
        let link = 3;
        let n = 3072u32;
        for i in 0..n {
            let e = Nhlfe {
                primary: Path {
                    next_hop: 1,
                    labels: stack(&[10_000 + i]),
                },
                backup: Some(Path {
                    next_hop: 2,
                    labels: stack(&[50_000, 20_000 + i]),
                }),
                protection: Some(link),
            };
            let id = t.set_nhlfe(i, &e).unwrap();
            t.set_ilm(100_000 + i, IlmAction::Forward { target: id })
                .unwrap();
            t.set_pseudowire(
                i,
                &Pseudowire {
                    ac: i,
                    pw_type: PwType::EthernetTagged,
                    control_word: i % 2 == 0,
                    remote_label: 200_000 + i,
                    transport: id,
                },
            )
            .unwrap();
        }
        let check = |down: bool| {
            for i in 0..n {
                let Some(IlmAction::Forward { target }) = t.ilm(100_000 + i) else {
                    panic!()
                };
                let r = t.resolve(&nh, target, i).unwrap();
                let pw = t.pseudowire(t.pseudowire_of_ac(i).unwrap()).unwrap();
                let p = t.resolve(&nh, pw.transport, i).unwrap();
                assert_eq!(r, p);
                assert_eq!(r.on_backup, down);
                if down {
                    assert_eq!(r.next_hop.port, 2);
                    assert_eq!(r.labels.as_slice(), &[50_000, 20_000 + i]);
                } else {
                    assert_eq!(r.next_hop.port, 1);
                    assert_eq!(r.labels.as_slice(), &[10_000 + i]);
                }
            }
        };
        check(false);
        t.set_protection(link, true).unwrap();
        check(true);
        t.set_protection(link, false).unwrap();
        check(false);
        // Another link going down changes nothing here.
        t.set_protection(4, true).unwrap();
        check(false);
        assert_eq!(t.set_protection(16, true), Err(LfibError::BadId));
    }

    /// Link protection of a port: plain next hops, NHLFEs, ECMP members
    /// and pseudowire transports leaving through it all take the bypass
    /// (its labels on top of theirs) with one store; others are untouched.
    #[test]
    fn facility_backup_moves_everything_leaving_through_a_port() {
        let nh = NextHopTable::new(16, 4);
        let t = small();
        nh.set(1, via(1, 1)).unwrap(); // protected port 1
        nh.set(2, via(2, 1)).unwrap(); // bypass on port 2
        nh.set(3, via(3, 1)).unwrap(); // unrelated port 3
        let mut targets = vec![1u32];
        for i in 0..100u32 {
            let id = t
                .set_nhlfe(
                    i,
                    &Nhlfe {
                        primary: Path {
                            next_hop: 1,
                            labels: stack(&[1000 + i]),
                        },
                        backup: None,
                        protection: None,
                    },
                )
                .unwrap();
            targets.push(id);
        }
        let plain3 = 3u32;
        assert_eq!(t.facility_backup(1), None);
        t.set_facility_backup(
            1,
            7,
            &Path {
                next_hop: 2,
                labels: stack(&[500]),
            },
        )
        .unwrap();
        assert_eq!(t.facility_backup(1).unwrap().0, 7);
        let check = |down: bool| {
            for (k, &tg) in targets.iter().enumerate() {
                let r = t.resolve(&nh, tg, 0).unwrap();
                let own: Vec<u32> = if k == 0 {
                    vec![]
                } else {
                    vec![1000 + k as u32 - 1]
                };
                if down {
                    assert_eq!((r.next_hop_id, r.next_hop.port, r.on_backup), (2, 2, true));
                    let mut want = vec![500];
                    want.extend(&own);
                    assert_eq!(r.labels.as_slice(), &want[..]);
                } else {
                    assert_eq!((r.next_hop.port, r.on_backup), (1, false));
                    assert_eq!(r.labels.as_slice(), &own[..]);
                }
            }
            let r = t.resolve(&nh, plain3, 0).unwrap();
            assert_eq!((r.next_hop.port, r.on_backup), (3, false));
        };
        check(false);
        assert_eq!(t.protection_switches(7), 0);
        t.set_protection(7, true).unwrap();
        t.set_protection(7, true).unwrap();
        check(true);
        assert_eq!(t.protection_switches(7), 1, "a repeated down is no switch");
        t.set_protection(7, false).unwrap();
        check(false);
        // Too deep a stack with the bypass on top: no path, not a cut stack.
        let deep = t
            .set_nhlfe(
                200,
                &Nhlfe {
                    primary: Path {
                        next_hop: 1,
                        labels: stack(&[16, 17, 18, 19]),
                    },
                    backup: None,
                    protection: None,
                },
            )
            .unwrap();
        t.set_protection(7, true).unwrap();
        assert_eq!(t.resolve(&nh, deep, 0), None);
        t.clear_facility_backup(1);
        assert_eq!(t.resolve(&nh, deep, 0).unwrap().next_hop.port, 1);
        assert_eq!(
            t.set_facility_backup(1, 9999, &Path::default()),
            Err(LfibError::BadId)
        );
    }

    #[test]
    fn unprotected_or_backupless_entries() {
        let nh = NextHopTable::new(4, 1);
        let t = small();
        nh.set(0, via(0, 1)).unwrap();
        let e = Nhlfe {
            primary: Path {
                next_hop: 0,
                labels: stack(&[77]),
            },
            backup: None,
            protection: Some(1),
        };
        let id = t.set_nhlfe(9, &e).unwrap();
        assert_eq!(t.nhlfe(9), Some(e));
        assert!(t.resolve(&nh, id, 0).is_some());
        t.set_protection(1, true).unwrap();
        assert_eq!(t.resolve(&nh, id, 0), None, "primary down, no backup");
        t.clear_nhlfe(9);
        assert_eq!(t.nhlfe(9), None);
        assert_eq!(
            t.set_nhlfe(
                0,
                &Nhlfe {
                    primary: Path {
                        next_hop: GROUP_BIT,
                        labels: LabelStack::EMPTY
                    },
                    ..e
                }
            ),
            Err(LfibError::BadTarget)
        );
        assert_eq!(t.set_nhlfe(8192, &e), Err(LfibError::BadId));
    }

    #[test]
    fn pseudowire_ac_mapping() {
        let t = small();
        let pw = Pseudowire {
            ac: 7,
            pw_type: PwType::Ethernet,
            control_word: true,
            remote_label: 300,
            transport: NHLFE_BIT,
        };
        t.set_pseudowire(1, &pw).unwrap();
        assert_eq!(t.pseudowire(1), Some(pw));
        assert_eq!(t.pseudowire_of_ac(7), Some(1));
        // Pseudowire 2 takes AC 7 over; clearing 1 leaves 2's mapping.
        t.set_pseudowire(2, &pw).unwrap();
        t.clear_pseudowire(1);
        assert_eq!(t.pseudowire_of_ac(7), Some(2));
        t.clear_pseudowire(2);
        assert_eq!(t.pseudowire_of_ac(7), None);
        assert_eq!(t.pseudowire(2), None);
        assert_eq!(
            t.set_pseudowire(
                0,
                &Pseudowire {
                    remote_label: 3,
                    ..pw
                }
            ),
            Err(LfibError::LabelRange)
        );
        assert_eq!(
            t.set_pseudowire(0, &Pseudowire { ac: 4096, ..pw }),
            Err(LfibError::BadId)
        );
    }

    /// Random ILM writes against a HashMap model.
    #[test]
    fn ilm_matches_reference_model() {
        let t = small();
        let mut model: HashMap<u32, IlmAction> = HashMap::new();
        let mut x: u64 = 0x1234_5678;
        for _ in 0..50_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let label = 16 + (x >> 11) as u32 % 5000;
            match x % 4 {
                0 => {
                    t.clear_ilm(label);
                    model.remove(&label);
                }
                1 => {
                    let a = IlmAction::Forward {
                        target: NHLFE_BIT | ((x >> 40) as u32 % 8192),
                    };
                    t.set_ilm(label, a).unwrap();
                    model.insert(label, a);
                }
                2 => {
                    let a = IlmAction::PopToPseudowire {
                        pw: (x >> 40) as u32 % 4096,
                    };
                    t.set_ilm(label, a).unwrap();
                    model.insert(label, a);
                }
                _ => assert_eq!(t.ilm(label), model.get(&label).copied()),
            }
        }
        let mut want: Vec<_> = model.into_iter().collect();
        want.sort_by_key(|e| e.0);
        let got = t.ilm_entries();
        assert_eq!(got.len(), want.len());
        for ((gl, ga), (wl, wa)) in got.iter().zip(&want) {
            assert_eq!((gl, ga), (wl, wa));
        }
    }

    /// Readers never see a primary path of one version with the labels of
    /// another.
    #[test]
    fn concurrent_readers_never_see_torn_nhlfes() {
        let t = Arc::new(small());
        let stop = Arc::new(AtomicBool::new(false));
        let mk = |k: u32| Nhlfe {
            primary: Path {
                next_hop: k,
                labels: LabelStack::new(&vec![16 + k; 1 + k as usize % MAX_PUSH]).unwrap(),
            },
            backup: None,
            protection: None,
        };
        t.set_nhlfe(0, &mk(0)).unwrap();
        let r = {
            let (t, stop) = (t.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while n == 0 || !stop.load(Ordering::Relaxed) {
                    let (p, _) = t.active_path(0).unwrap();
                    let k = p.next_hop;
                    assert_eq!(p.labels.len(), 1 + k as usize % MAX_PUSH);
                    assert!(p.labels.as_slice().iter().all(|&l| l == 16 + k));
                    n += 1;
                }
                n
            })
        };
        for i in 0..100_000u32 {
            t.set_nhlfe(0, &mk(i % 1000)).unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        assert!(r.join().unwrap() > 0);
    }

    #[test]
    fn label_counters() {
        let c = LabelCounters::default();
        c.count(16, 100);
        c.count(16, 60);
        c.count(MAX_LABEL, 1);
        assert_eq!(c.get(16), (2, 160));
        assert_eq!(c.get(MAX_LABEL), (1, 1));
        assert_eq!(c.get(17), (0, 0));
    }
}
