//! The bidirectional flow table of one worker.
//!
//! Both directions of a connection are one entry: the key is the 5-tuple
//! in canonical order (the smaller (address, port) end first), so a packet
//! and its reply hash to the same slot with one lookup. The entry remembers
//! which end opened the flow, so each packet is *original* (from the
//! opener) or *reply*.
//!
//! ## State
//!
//! TCP is tracked lightly, as a fast path can afford: flags only, no
//! sequence windows. SYN → `SynSent`; the reply's SYN+ACK → `SynRecv`; the
//! opener's ACK → `Established`; a FIN from one end → `FinWait`, from both
//! → `TimeWait`; RST from either → `Closed`. A flow picked up mid-stream
//! (first packet not a SYN, e.g. after a restart) starts `Established`, as
//! Linux conntrack does with `tcp_loose`. A SYN on a `TimeWait`/`Closed`
//! flow reopens it. UDP is `Unreplied` until a reply, then `Replied`; ICMP
//! and other protocols have one state. Each state has its own idle timeout
//! ([`Timeouts`]).
//!
//! ## Memory (fixed, all reserved in [`FlowTable::new`])
//!
//! * entries: `capacity` × 112 bytes (key 40, times 16, packets and bytes
//!   per direction 32, subscriber and classification slots 8, the
//!   subscriber's total usage entry 4, application and service 4, state
//!   and flags 4, padding 4), dense: live flows occupy
//!   `entries[..len]` and a removal moves the last entry into the hole;
//! * index: `2 × capacity` slots × 8 bytes, open addressing, Robin Hood
//!   order, backward-shift deletion; a slot holds the key hash's upper 32
//!   bits (the tag) and the entry number + 1 (0 = empty).
//!
//! So 112 + 16 = **128 bytes per flow** of capacity: 8,000,000 flows take
//! 1,024 MB (capacity rounds up to a power of two: 8,388,608 → 1,074 MB).
//! Both arrays are [`HugeArray`]s: 2 MB pages where the kernel gives them,
//! and committed when the table is built (no page fault on the packet
//! path).
//!
//! ## Table full
//!
//! A new flow when the table is full (or its probe run too long) first
//! reclaims room: it samples [`EVICT_SAMPLE`] entries from the sweep
//! cursor, removes one whose state timeout has passed (counted as
//! `expired`) or else the one idle longest if it has been idle at least
//! `evict_min_idle_ms` (counted `evicted_idle`). If every sampled flow is
//! active the new flow is refused (counted `refused_full`) and the caller
//! passes the packet unclassified. Nothing is dropped silently.

use crate::huge::{HugeArray, Zeroable};
use crate::packet::{Tuple, ACK, FIN, ICMP, ICMPV6, RST, SYN, TCP, UDP};

/// Entries the table-full path looks at for a victim.
pub const EVICT_SAMPLE: usize = 32;

/// Longest distance (in index slots) of a key from its home slot.
pub const MAX_PROBE: usize = 128;

/// How far ahead of its cursor the sweep announces expired flows
/// ([`FlowTable::sweep_active`]'s `ahead`).
const SWEEP_AHEAD: usize = 4;

/// Smallest capacity [`FlowTable::new`] gives.
pub const MIN_CAPACITY: usize = 16;

/// Bytes of memory per flow of capacity (entry + two index slots).
pub const BYTES_PER_FLOW: usize = std::mem::size_of::<Entry>() + 2 * 8;

/// Flow state; each has its own idle timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum State {
    SynSent = 0,
    SynRecv = 1,
    Established = 2,
    FinWait = 3,
    TimeWait = 4,
    Closed = 5,
    UdpUnreplied = 6,
    UdpReplied = 7,
    Icmp = 8,
    Other = 9,
}

impl State {
    pub const ALL: [State; 10] = [
        State::SynSent,
        State::SynRecv,
        State::Established,
        State::FinWait,
        State::TimeWait,
        State::Closed,
        State::UdpUnreplied,
        State::UdpReplied,
        State::Icmp,
        State::Other,
    ];

    fn from_u8(v: u8) -> State {
        State::ALL[usize::from(v).min(9)]
    }

    pub fn name(self) -> &'static str {
        match self {
            State::SynSent => "syn-sent",
            State::SynRecv => "syn-recv",
            State::Established => "established",
            State::FinWait => "fin-wait",
            State::TimeWait => "time-wait",
            State::Closed => "closed",
            State::UdpUnreplied => "udp-unreplied",
            State::UdpReplied => "udp-replied",
            State::Icmp => "icmp",
            State::Other => "other",
        }
    }
}

/// Idle timeouts per state, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    pub ms: [u64; 10],
    /// A full table evicts a flow only if it has been idle this long.
    pub evict_min_idle_ms: u64,
}

impl Default for Timeouts {
    /// Shorter than Linux conntrack's for established TCP (1 h, not 5 days):
    /// an inline box sized in flows cannot keep forgotten connections.
    fn default() -> Timeouts {
        let s = 1000;
        Timeouts {
            ms: [
                30 * s,   // syn-sent
                30 * s,   // syn-recv
                3600 * s, // established
                120 * s,  // fin-wait
                10 * s,   // time-wait
                10 * s,   // closed (RST)
                30 * s,   // udp-unreplied
                120 * s,  // udp-replied
                30 * s,   // icmp
                60 * s,   // other
            ],
            evict_min_idle_ms: 1000,
        }
    }
}

impl Timeouts {
    #[inline]
    pub fn of(&self, s: State) -> u64 {
        self.ms[s as usize]
    }
}

/// Counters of the table's own events (single writer: the owning worker).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableCounters {
    pub created: u64,
    /// Removed by the sweep or the table-full path after their timeout.
    pub expired: u64,
    /// Removed before their timeout to make room (idle ≥ evict_min_idle).
    pub evicted_idle: u64,
    /// New flows refused: table full and every sampled flow active.
    pub refused_full: u64,
}

/// The canonical key packed into words: `k[0..2]` end A, `k[2..4]` end B,
/// `k[4]` = a_port | b_port << 16 | proto << 32 | v6 << 40.
#[derive(Clone, Copy, Debug)]
struct Key([u64; 5]);

impl PartialEq for Key {
    /// Word compares without branches (the derived one calls `memcmp`).
    #[inline(always)]
    fn eq(&self, o: &Key) -> bool {
        let (a, b) = (&self.0, &o.0);
        ((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3]) | (a[4] ^ b[4])) == 0
    }
}

impl Eq for Key {}

/// Flags in `Entry::flags`.
const F_OPENER_IS_A: u8 = 1;
const F_FIN_ORIG: u8 = 2;
const F_FIN_REPLY: u8 = 4;
const F_REPLIED: u8 = 8;
/// The upper four bits belong to the engine ([`FlowMut::set_user`]).
const F_USER: u8 = 0xf0;

/// 112 bytes; see the module docs. (Aligning it to 128 bytes, one
/// cache-line pair per entry, was measured no faster: 144 bytes per flow
/// for nothing.)
#[derive(Clone, Copy)]
struct Entry {
    k: Key,
    first_ms: u64,
    last_ms: u64,
    /// [original, reply].
    packets: [u64; 2],
    bytes: [u64; 2],
    sub: u32,
    class: u32,
    /// The subscriber's total usage entry (caps, quota; [`NONE`]: none).
    total: u32,
    app: u16,
    service: u16,
    state: u8,
    flags: u8,
    sub_gen: u16,
}

const _: () = assert!(std::mem::size_of::<Entry>() == 112);

// SAFETY: integers only; all-zero is a (never read) valid entry.
unsafe impl Zeroable for Entry {}

/// "No slot": subscriber unknown / not being classified.
pub const NONE: u32 = u32::MAX;

/// What the caller may read and write of a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flow {
    /// The opener's end and the other end.
    pub opener: Tuple,
    pub state: State,
    pub first_ms: u64,
    pub last_ms: u64,
    /// [original direction, reply direction].
    pub packets: [u64; 2],
    pub bytes: [u64; 2],
    /// Subscriber slot ([`NONE`]: none).
    pub sub: u32,
    /// Classification slot ([`NONE`]: not being classified).
    pub class: u32,
    /// The subscriber's total usage entry ([`NONE`]: none).
    pub total: u32,
    pub app: u16,
    pub service: u16,
    /// Free for the engine (classification verdict bits).
    pub sub_gen: u16,
    /// The engine's four flag bits.
    pub user: u8,
}

/// Mutable view of the fields the engine owns in one entry.
pub struct FlowMut<'a> {
    e: &'a mut Entry,
}

impl FlowMut<'_> {
    pub fn sub(&self) -> (u32, u16) {
        (self.e.sub, self.e.sub_gen)
    }
    pub fn set_sub(&mut self, slot: u32, gen: u16) {
        self.e.sub = slot;
        self.e.sub_gen = gen;
    }
    pub fn class(&self) -> u32 {
        self.e.class
    }
    pub fn total(&self) -> u32 {
        self.e.total
    }
    pub fn set_total(&mut self, t: u32) {
        self.e.total = t;
    }
    pub fn set_class(&mut self, c: u32) {
        self.e.class = c;
    }
    pub fn app(&self) -> u16 {
        self.e.app
    }
    pub fn service(&self) -> u16 {
        self.e.service
    }
    pub fn set_app(&mut self, app: u16, service: u16) {
        self.e.app = app;
        self.e.service = service;
    }
    pub fn state(&self) -> State {
        State::from_u8(self.e.state)
    }
    pub fn packets(&self) -> [u64; 2] {
        self.e.packets
    }
    /// The tuple of the flow's first packet (its opener's direction).
    pub fn opener(&self) -> Tuple {
        self.e.flow().opener
    }
    pub fn first_ms(&self) -> u64 {
        self.e.first_ms
    }
    pub fn bytes(&self) -> [u64; 2] {
        self.e.bytes
    }
    /// The engine's four flag bits (`0..=0xf`).
    pub fn user(&self) -> u8 {
        self.e.flags >> 4
    }
    pub fn set_user(&mut self, bits: u8) {
        self.e.flags = (self.e.flags & !F_USER) | (bits << 4);
    }
}

/// Result of [`FlowTable::track`].
#[derive(Debug)]
pub enum Track {
    /// The packet belongs to entry `idx` (valid until the next removal);
    /// `new` when this packet created it, `orig` when it travels from the
    /// opener. `removed` is a flow the table-full path removed to make
    /// room (the caller releases what it held).
    Hit {
        idx: usize,
        new: bool,
        orig: bool,
        removed: Option<Flow>,
    },
    /// A new flow and no room: counted in `refused_full`. `removed` is
    /// set in the rare case where room was made but the new key's probe
    /// run was still too long.
    Full { removed: Option<Flow> },
}

#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a).wrapping_mul(u128::from(b));
    (p as u64) ^ ((p >> 64) as u64)
}

/// A hint to load the cache line holding `p` (nothing on other CPUs).
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Canonical key of a tuple and whether the packet's source is end A.
#[inline(always)]
fn canonical(t: &Tuple) -> (Key, bool) {
    let src_is_a = (t.src, t.sport) <= (t.dst, t.dport);
    let (a, ap, b, bp) = if src_is_a {
        (t.src, t.sport, t.dst, t.dport)
    } else {
        (t.dst, t.dport, t.src, t.sport)
    };
    (
        Key([
            a as u64,
            (a >> 64) as u64,
            b as u64,
            (b >> 64) as u64,
            u64::from(ap) | u64::from(bp) << 16 | u64::from(t.proto) << 32 | u64::from(t.v6) << 40,
        ]),
        src_is_a,
    )
}

impl Entry {
    fn flow(&self) -> Flow {
        let k = &self.k.0;
        let a = u128::from(k[0]) | u128::from(k[1]) << 64;
        let b = u128::from(k[2]) | u128::from(k[3]) << 64;
        let (ap, bp) = (k[4] as u16, (k[4] >> 16) as u16);
        let proto = (k[4] >> 32) as u8;
        let v6 = (k[4] >> 40) & 1 == 1;
        let opener = if self.flags & F_OPENER_IS_A != 0 {
            Tuple {
                src: a,
                dst: b,
                sport: ap,
                dport: bp,
                proto,
                v6,
            }
        } else {
            Tuple {
                src: b,
                dst: a,
                sport: bp,
                dport: ap,
                proto,
                v6,
            }
        };
        Flow {
            opener,
            state: State::from_u8(self.state),
            first_ms: self.first_ms,
            last_ms: self.last_ms,
            packets: self.packets,
            bytes: self.bytes,
            sub: self.sub,
            class: self.class,
            total: self.total,
            app: self.app,
            service: self.service,
            sub_gen: self.sub_gen,
            user: self.flags >> 4,
        }
    }

    fn proto(&self) -> u8 {
        (self.k.0[4] >> 32) as u8
    }

    /// Advances the state machine for one packet.
    #[inline]
    fn step(&mut self, orig: bool, flags: u8) {
        let proto = self.proto();
        if !orig {
            self.flags |= F_REPLIED;
        }
        let s = State::from_u8(self.state);
        let next = match proto {
            TCP => {
                if flags & RST != 0 {
                    State::Closed
                } else if flags & SYN != 0 && flags & ACK == 0 {
                    if orig && matches!(s, State::TimeWait | State::Closed) {
                        self.flags &= !(F_FIN_ORIG | F_FIN_REPLY);
                        State::SynSent
                    } else {
                        s
                    }
                } else {
                    if flags & FIN != 0 {
                        self.flags |= if orig { F_FIN_ORIG } else { F_FIN_REPLY };
                    }
                    let fins = self.flags & (F_FIN_ORIG | F_FIN_REPLY);
                    if fins == F_FIN_ORIG | F_FIN_REPLY {
                        State::TimeWait
                    } else if fins != 0 {
                        if s == State::Closed {
                            s
                        } else {
                            State::FinWait
                        }
                    } else {
                        match s {
                            State::SynSent if !orig && flags & SYN != 0 => State::SynRecv,
                            State::SynRecv if orig && flags & ACK != 0 => State::Established,
                            // A reply without SYN+ACK: the handshake was missed.
                            State::SynSent if !orig => State::Established,
                            _ => s,
                        }
                    }
                }
            }
            UDP => {
                if self.flags & F_REPLIED != 0 {
                    State::UdpReplied
                } else {
                    State::UdpUnreplied
                }
            }
            _ => s,
        };
        self.state = next as u8;
    }
}

fn initial_state(proto: u8, flags: u8) -> State {
    match proto {
        TCP if flags & RST != 0 => State::Closed,
        TCP if flags & SYN != 0 && flags & ACK == 0 => State::SynSent,
        TCP => State::Established,
        UDP => State::UdpUnreplied,
        ICMP | ICMPV6 => State::Icmp,
        _ => State::Other,
    }
}

/// The bidirectional flow table of one worker. See the module docs.
pub struct FlowTable {
    /// Live flows are `entries[..len]`.
    entries: HugeArray<Entry>,
    len: usize,
    /// `tag << 32 | (entry + 1)`; 0 = empty.
    index: HugeArray<u64>,
    mask: usize,
    shift: u32,
    seed: [u64; 4],
    cursor: usize,
    timeouts: Timeouts,
    counters: TableCounters,
    /// Live flows per state (for `show`).
    per_state: [u64; 10],
}

impl FlowTable {
    /// A table of up to `capacity` flows (rounded up to a power of two, at
    /// least [`MIN_CAPACITY`], at most 2^30). All memory is reserved here.
    pub fn new(capacity: usize, timeouts: Timeouts) -> FlowTable {
        use std::hash::{BuildHasher, RandomState};
        let cap = capacity.clamp(MIN_CAPACITY, 1 << 30).next_power_of_two();
        let slots = cap * 2;
        let rs = RandomState::new();
        let seed = [
            rs.hash_one(1u64) | 1,
            rs.hash_one(2u64) | 1,
            rs.hash_one(3u64) | 1,
            rs.hash_one(4u64) | 1,
        ];
        FlowTable {
            entries: HugeArray::zeroed(cap),
            len: 0,
            index: HugeArray::zeroed(slots),
            mask: slots - 1,
            shift: 32 - slots.trailing_zeros(),
            seed,
            cursor: 0,
            timeouts,
            counters: TableCounters::default(),
            per_state: [0; 10],
        }
    }

    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes reserved by this table.
    pub fn memory_bytes(&self) -> usize {
        self.entries.bytes() + self.index.bytes()
    }

    /// The arrays' ranges advised for 2 MB pages (see
    /// [`HugeArray::advised_range`]).
    pub fn advised_ranges(&self) -> impl Iterator<Item = (usize, usize)> {
        [self.entries.advised_range(), self.index.advised_range()]
            .into_iter()
            .flatten()
    }

    pub fn counters(&self) -> TableCounters {
        self.counters
    }

    pub fn timeouts(&self) -> &Timeouts {
        &self.timeouts
    }

    /// Live flows in each state, indexed by `State as usize`.
    pub fn per_state(&self) -> [u64; 10] {
        self.per_state
    }

    #[inline(always)]
    fn hash(&self, k: &Key) -> u32 {
        let s = &self.seed;
        let k = &k.0;
        let a = fold(k[0] ^ s[0], k[1] ^ s[1]);
        let b = fold(k[2] ^ s[2], k[3] ^ s[3]);
        let c = fold(k[4] ^ s[1], s[0]);
        ((fold(a ^ s[3], b ^ c ^ s[2])) >> 32) as u32
    }

    #[inline(always)]
    fn home(&self, tag: u32) -> usize {
        (tag >> self.shift) as usize
    }

    #[inline(always)]
    fn dist(&self, pos: usize, slot: u64) -> usize {
        pos.wrapping_sub(self.home((slot >> 32) as u32)) & self.mask
    }

    /// First stage of a batch's prefetch: starts loading the index slot
    /// where `t`'s flow is found (no effect on the table).
    #[inline]
    pub fn prefetch_index(&self, t: &Tuple) {
        let (k, _) = canonical(t);
        prefetch(&self.index[self.home(self.hash(&k))]);
    }

    /// Second stage, once the slot is likely cached: starts loading the
    /// entry of the first slot in `t`'s probe run with its tag (usually
    /// its flow's entry). Reads the index only; never the entries.
    #[inline]
    pub fn prefetch_entry(&self, t: &Tuple) {
        let (k, _) = canonical(t);
        let tag = self.hash(&k);
        let mut pos = self.home(tag);
        for _ in 0..4 {
            let s = self.index[pos];
            if s == 0 {
                return;
            }
            if (s >> 32) as u32 == tag {
                let i = (s as u32 - 1) as usize;
                if let Some(e) = self.entries.get(i) {
                    // An entry spans two or three lines: fetch both ends.
                    let p = e as *const Entry as *const u8;
                    prefetch(p);
                    prefetch(p.wrapping_add(std::mem::size_of::<Entry>() - 1));
                }
                return;
            }
            pos = (pos + 1) & self.mask;
        }
    }

    /// The engine's (class, service) of `t`'s flow if it is in the table
    /// (for the prefetch's third stage; reads, changes nothing).
    #[inline]
    pub fn class_of(&self, t: &Tuple) -> Option<(u32, u16)> {
        let (k, _) = canonical(t);
        self.find(&k)
            .map(|i| (self.entries[i].class, self.entries[i].service))
    }

    /// Finds the entry of `t` (either direction) without changing it.
    pub fn get(&self, t: &Tuple) -> Option<Flow> {
        let (k, _) = canonical(t);
        self.find(&k).map(|i| self.entries[i].flow())
    }

    fn find(&self, k: &Key) -> Option<usize> {
        let tag = self.hash(k);
        let mut pos = self.home(tag);
        let mut d = 0;
        loop {
            let s = self.index[pos];
            if s == 0 || self.dist(pos, s) < d || d > MAX_PROBE {
                return None;
            }
            if (s >> 32) as u32 == tag {
                let i = (s as u32 - 1) as usize;
                if self.entries[i].k == *k {
                    return Some(i);
                }
            }
            d += 1;
            pos = (pos + 1) & self.mask;
        }
    }

    /// Accounts one packet of `bytes` bytes with TCP `flags` at `now_ms`:
    /// finds its flow (either direction) or creates it, advances the state.
    #[inline]
    pub fn track(&mut self, t: &Tuple, flags: u8, bytes: u32, now_ms: u64) -> Track {
        self.track_or(t, flags, bytes, now_ms, || {})
    }

    /// [`FlowTable::track`], calling `absent` once the index shows `t` has
    /// no flow yet, before the new entry is written: the engine starts
    /// loading the new flow's subscriber there, so that cache miss
    /// overlaps the entry's instead of following it. Not called for a
    /// packet of a known flow.
    #[inline]
    pub fn track_or(
        &mut self,
        t: &Tuple,
        flags: u8,
        bytes: u32,
        now_ms: u64,
        absent: impl FnOnce(),
    ) -> Track {
        let (k, src_is_a) = canonical(t);
        let tag = self.hash(&k);
        let mut pos = self.home(tag);
        let mut d = 0;
        loop {
            let s = self.index[pos];
            if s == 0 {
                break;
            }
            if (s >> 32) as u32 == tag {
                let i = (s as u32 - 1) as usize;
                let e = &mut self.entries[i];
                if e.k == k {
                    let orig = src_is_a == (e.flags & F_OPENER_IS_A != 0);
                    let dir = usize::from(!orig);
                    e.packets[dir] += 1;
                    e.bytes[dir] += u64::from(bytes);
                    e.last_ms = now_ms;
                    let before = e.state;
                    e.step(orig, flags);
                    let after = e.state;
                    if before != after {
                        self.per_state[usize::from(before)] -= 1;
                        self.per_state[usize::from(after)] += 1;
                    }
                    return Track::Hit {
                        idx: i,
                        new: false,
                        orig,
                        removed: None,
                    };
                }
            }
            if self.dist(pos, s) < d {
                break;
            }
            d += 1;
            pos = (pos + 1) & self.mask;
            if d > MAX_PROBE {
                break;
            }
        }
        absent();
        self.create(k, tag, src_is_a, t.proto, flags, bytes, now_ms)
    }

    #[cold]
    #[allow(clippy::too_many_arguments)]
    fn create(
        &mut self,
        k: Key,
        tag: u32,
        src_is_a: bool,
        proto: u8,
        flags: u8,
        bytes: u32,
        now_ms: u64,
    ) -> Track {
        let mut removed = None;
        if self.len == self.entries.len() {
            match self.make_room(now_ms) {
                Some(f) => removed = Some(f),
                None => {
                    self.counters.refused_full += 1;
                    return Track::Full { removed: None };
                }
            }
        }
        let state = initial_state(proto, flags);
        let e = Entry {
            k,
            first_ms: now_ms,
            last_ms: now_ms,
            packets: [1, 0],
            bytes: [u64::from(bytes), 0],
            sub: NONE,
            class: NONE,
            total: NONE,
            app: 0,
            service: 0,
            state: state as u8,
            flags: if src_is_a { F_OPENER_IS_A } else { 0 },
            sub_gen: 0,
        };
        // Eviction may have shifted the index: recompute the position.
        match self.insert(tag, e) {
            Some(i) => {
                self.counters.created += 1;
                self.per_state[state as usize] += 1;
                Track::Hit {
                    idx: i,
                    new: true,
                    orig: true,
                    removed,
                }
            }
            None => {
                // Probe run too long (a pathological hash cluster).
                self.counters.refused_full += 1;
                Track::Full { removed }
            }
        }
    }

    fn insert(&mut self, tag: u32, e: Entry) -> Option<usize> {
        let mut pos = self.home(tag);
        let mut d = 0;
        loop {
            let s = self.index[pos];
            if s == 0 || self.dist(pos, s) < d {
                break;
            }
            d += 1;
            pos = (pos + 1) & self.mask;
            if d > MAX_PROBE {
                return None;
            }
        }
        let mut end = pos;
        loop {
            let s = self.index[end];
            if s == 0 {
                break;
            }
            if self.dist(end, s) + 1 > MAX_PROBE {
                return None;
            }
            end = (end + 1) & self.mask;
        }
        while end != pos {
            let prev = end.wrapping_sub(1) & self.mask;
            self.index[end] = self.index[prev];
            end = prev;
        }
        let n = self.len;
        self.entries[n] = e;
        self.len += 1;
        self.index[pos] = u64::from(tag) << 32 | (n as u64 + 1);
        Some(n)
    }

    /// Table full: reclaim one entry (see the module docs).
    fn make_room(&mut self, now_ms: u64) -> Option<Flow> {
        let n = self.len;
        if n == 0 {
            return None;
        }
        let mut oldest = usize::MAX;
        let mut oldest_idle = 0;
        for j in 0..EVICT_SAMPLE.min(n) {
            let i = (self.cursor + j) % n;
            let e = &self.entries[i];
            let idle = now_ms.saturating_sub(e.last_ms);
            if idle >= self.timeouts.of(State::from_u8(e.state)) {
                self.counters.expired += 1;
                self.cursor = i;
                return Some(self.remove(i));
            }
            if idle > oldest_idle || oldest == usize::MAX {
                oldest = i;
                oldest_idle = idle;
            }
        }
        self.cursor = (self.cursor + EVICT_SAMPLE) % n;
        if oldest_idle >= self.timeouts.evict_min_idle_ms {
            self.counters.evicted_idle += 1;
            return Some(self.remove(oldest));
        }
        None
    }

    fn slot_of(&self, i: usize) -> usize {
        let tag = self.hash(&self.entries[i].k);
        let want = u64::from(tag) << 32 | (i as u64 + 1);
        let mut pos = self.home(tag);
        while self.index[pos] != want {
            pos = (pos + 1) & self.mask;
        }
        pos
    }

    /// Removes entry `i` (the last entry moves into its place).
    fn remove(&mut self, i: usize) -> Flow {
        let mut pos = self.slot_of(i);
        loop {
            let next = (pos + 1) & self.mask;
            let s = self.index[next];
            if s == 0 || self.dist(next, s) == 0 {
                self.index[pos] = 0;
                break;
            }
            self.index[pos] = s;
            pos = next;
        }
        let last = self.len - 1;
        if i != last {
            let slot = self.slot_of(last);
            self.index[slot] = (self.index[slot] & !0xffff_ffff) | (i as u64 + 1);
            self.entries.swap(i, last);
        }
        let e = self.entries[last];
        self.len = last;
        self.per_state[usize::from(e.state)] -= 1;
        e.flow()
    }

    /// The flow at `idx` (as returned by [`FlowTable::track`]).
    pub fn flow(&self, idx: usize) -> Flow {
        self.entries[idx].flow()
    }

    /// The engine's fields of the flow at `idx`.
    #[inline]
    pub fn at(&mut self, idx: usize) -> FlowMut<'_> {
        FlowMut {
            e: &mut self.entries[idx],
        }
    }

    /// Incremental expiry: looks at up to `budget` flows from the cursor
    /// (wrapping) and removes those idle past their state's timeout,
    /// handing each to `gone`. Returns the number removed.
    pub fn sweep(&mut self, now_ms: u64, budget: usize, gone: &mut dyn FnMut(Flow)) -> usize {
        self.sweep_active(now_ms, budget, u64::MAX, gone, &mut |_| false, &mut |_| {})
    }

    /// [`FlowTable::sweep`], and each live flow looked at whose interval
    /// started `active_ms` or more ago goes to `interim`; if it returns
    /// true the flow's interval starts again: its packet and byte counts
    /// go back to zero and its first time becomes `now_ms` (an exporter's
    /// active timeout: each record carries the traffic since the last).
    pub fn sweep_active(
        &mut self,
        now_ms: u64,
        budget: usize,
        active_ms: u64,
        gone: &mut dyn FnMut(Flow),
        interim: &mut dyn FnMut(Flow) -> bool,
        ahead: &mut dyn FnMut(&Flow),
    ) -> usize {
        let mut removed = 0;
        let mut looked = 0;
        while looked < budget && self.len > 0 {
            if self.cursor >= self.len {
                self.cursor = 0;
            }
            let i = self.cursor;
            looked += 1;
            // An entry a few ahead that will be removed too: `ahead` may
            // start loading what its `gone` reads (the engine's usage
            // entries), so that miss overlaps the entries before it.
            let j = i + SWEEP_AHEAD;
            if looked + SWEEP_AHEAD <= budget && j < self.len {
                let a = &self.entries[j];
                if now_ms.saturating_sub(a.last_ms) >= self.timeouts.of(State::from_u8(a.state)) {
                    ahead(&a.flow());
                }
            }
            let e = &self.entries[i];
            if now_ms.saturating_sub(e.last_ms) >= self.timeouts.of(State::from_u8(e.state)) {
                self.counters.expired += 1;
                removed += 1;
                gone(self.remove(i));
                continue; // the last entry moved to `i`
            }
            if now_ms.saturating_sub(e.first_ms) >= active_ms && interim(e.flow()) {
                let e = &mut self.entries[i];
                e.packets = [0; 2];
                e.bytes = [0; 2];
                e.first_ms = now_ms;
            }
            self.cursor = i + 1;
        }
        removed
    }

    /// Removes every flow, handing each to `gone`.
    pub fn clear(&mut self, gone: &mut dyn FnMut(Flow)) {
        for e in &self.entries[..self.len] {
            gone(e.flow());
        }
        self.len = 0;
        self.index.iter_mut().for_each(|s| *s = 0);
        self.per_state = [0; 10];
        self.cursor = 0;
    }

    /// Every live flow (for `show`; not for the packet path).
    pub fn for_each(&self, f: &mut dyn FnMut(&Flow)) {
        for e in &self.entries[..self.len] {
            f(&e.flow());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(src: u128, sport: u16, dst: u128, dport: u16, proto: u8) -> Tuple {
        Tuple {
            src,
            dst,
            sport,
            dport,
            proto,
            v6: false,
        }
    }

    fn rev(x: &Tuple) -> Tuple {
        Tuple {
            src: x.dst,
            dst: x.src,
            sport: x.dport,
            dport: x.sport,
            ..*x
        }
    }

    fn hit(r: Track) -> (usize, bool, bool) {
        match r {
            Track::Hit { idx, new, orig, .. } => (idx, new, orig),
            Track::Full { .. } => panic!("full"),
        }
    }

    #[test]
    fn both_directions_are_one_entry() {
        let mut ft = FlowTable::new(64, Timeouts::default());
        // Opener is the larger end, so canonical order swaps it.
        let a = t(0x0a00_0009, 40000, 0x0a00_0001, 80, TCP);
        let (i, new, orig) = hit(ft.track(&a, SYN, 60, 0));
        assert!(new && orig);
        let (j, new, orig) = hit(ft.track(&rev(&a), SYN | ACK, 60, 1));
        assert_eq!(i, j);
        assert!(!new && !orig);
        assert_eq!(ft.len(), 1);
        let f = ft.get(&rev(&a)).unwrap();
        assert_eq!(f.opener, a);
        assert_eq!(f.packets, [1, 1]);
        assert_eq!(f.bytes, [60, 60]);
        assert_eq!(f.state, State::SynRecv);
    }

    #[test]
    fn track_or_calls_absent_only_for_new_flows() {
        let mut ft = FlowTable::new(64, Timeouts::default());
        let mut calls = 0;
        let flows: Vec<Tuple> = (0..40).map(|i| t(1, 1000 + i, 2, 53, UDP)).collect();
        for (n, f) in flows.iter().enumerate() {
            let (_, new, _) = hit(ft.track_or(f, 0, 60, 0, || calls += 1));
            assert!(new);
            assert_eq!(calls, n + 1);
        }
        // Known flows, either direction, among many: never.
        for f in &flows {
            let (_, new, _) = hit(ft.track_or(&rev(f), 0, 60, 1, || calls += 1));
            assert!(!new);
        }
        assert_eq!(calls, flows.len());
        assert_eq!(ft.len(), flows.len());
    }

    #[test]
    fn sweep_announces_expired_flows_ahead_and_only_those() {
        let mut ft = FlowTable::new(64, Timeouts::default());
        // Even ports idle since 0 (expired at 100 s), odd ones busy.
        for i in 0..20u16 {
            let f = t(1, 1000 + i, 2, 53, UDP);
            ft.track(&f, 0, 60, 0);
            if i % 2 == 1 {
                ft.track(&f, 0, 60, 99_000);
            }
        }
        let now = 100_000;
        let mut ahead = Vec::new();
        let mut gone = Vec::new();
        let n = ft.sweep_active(
            now,
            64,
            u64::MAX,
            &mut |f| gone.push(f.opener.sport),
            &mut |_| false,
            &mut |f| {
                assert!(now - f.last_ms >= Timeouts::default().of(f.state));
                ahead.push(f.opener.sport);
            },
        );
        assert_eq!(n, 10);
        gone.sort_unstable();
        assert_eq!(gone, (0..10).map(|i| 1000 + 2 * i).collect::<Vec<_>>());
        // Every announced flow is one that went, announced before it went.
        assert!(!ahead.is_empty());
        assert!(ahead.iter().all(|p| gone.contains(p) && p % 2 == 0));
        assert_eq!(ft.len(), 10);
    }

    #[test]
    fn tcp_states_follow_flags() {
        let mut ft = FlowTable::new(64, Timeouts::default());
        let a = t(1, 1000, 2, 22, TCP);
        let st = |ft: &FlowTable| ft.get(&a).unwrap().state;
        ft.track(&a, SYN, 0, 0);
        assert_eq!(st(&ft), State::SynSent);
        ft.track(&rev(&a), SYN | ACK, 0, 0);
        assert_eq!(st(&ft), State::SynRecv);
        ft.track(&a, ACK, 0, 0);
        assert_eq!(st(&ft), State::Established);
        ft.track(&a, FIN | ACK, 0, 0);
        assert_eq!(st(&ft), State::FinWait);
        ft.track(&rev(&a), FIN | ACK, 0, 0);
        assert_eq!(st(&ft), State::TimeWait);
        // Port reuse reopens the flow.
        ft.track(&a, SYN, 0, 0);
        assert_eq!(st(&ft), State::SynSent);
        ft.track(&rev(&a), RST, 0, 0);
        assert_eq!(st(&ft), State::Closed);
        assert_eq!(ft.per_state()[State::Closed as usize], 1);
        assert_eq!(ft.per_state().iter().sum::<u64>(), 1);
        // Mid-stream pickup.
        let b = t(3, 1, 4, 2, TCP);
        ft.track(&b, ACK, 0, 0);
        assert_eq!(ft.get(&b).unwrap().state, State::Established);
    }

    #[test]
    fn udp_and_icmp_states_and_timeouts() {
        let to = Timeouts::default();
        let mut ft = FlowTable::new(64, to);
        let u = t(1, 5000, 2, 53, UDP);
        ft.track(&u, 0, 0, 0);
        assert_eq!(ft.get(&u).unwrap().state, State::UdpUnreplied);
        ft.track(&rev(&u), 0, 0, 10);
        assert_eq!(ft.get(&u).unwrap().state, State::UdpReplied);
        let i = t(1, 7, 2, 7, ICMP);
        ft.track(&i, 0, 0, 0);
        assert_eq!(ft.get(&i).unwrap().state, State::Icmp);
        let mut gone = Vec::new();
        // ICMP times out at 30 s, replied UDP lives 120 s.
        ft.sweep(to.of(State::Icmp) + 1, 100, &mut |f| gone.push(f));
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].opener, i);
        assert!(ft.get(&u).is_some());
        ft.sweep(10 + to.of(State::UdpReplied), 100, &mut |f| gone.push(f));
        assert!(ft.is_empty());
        assert_eq!(ft.counters().expired, 2);
    }

    #[test]
    fn full_table_evicts_idle_first_then_refuses_and_counts() {
        let to = Timeouts {
            evict_min_idle_ms: 1000,
            ..Timeouts::default()
        };
        let mut ft = FlowTable::new(16, to);
        for n in 0..16u16 {
            hit(ft.track(&t(1, n, 2, 80, TCP), ACK, 0, 0));
        }
        assert_eq!(ft.len(), 16);
        // All active (idle 500 ms < 1000): refused, counted, nothing lost.
        assert!(matches!(
            ft.track(&t(1, 100, 2, 80, TCP), ACK, 0, 500),
            Track::Full { .. }
        ));
        assert_eq!(ft.counters().refused_full, 1);
        assert_eq!(ft.len(), 16);
        // Refresh all but flow 5; at 2000 ms flow 5 is the idle one.
        for n in (0..16u16).filter(|&n| n != 5) {
            ft.track(&t(1, n, 2, 80, TCP), ACK, 0, 1500);
        }
        match ft.track(&t(1, 100, 2, 80, TCP), ACK, 0, 2000) {
            Track::Hit { new, removed, .. } => {
                assert!(new);
                assert_eq!(removed.unwrap().opener, t(1, 5, 2, 80, TCP));
            }
            Track::Full { .. } => panic!("should evict"),
        }
        assert_eq!(ft.counters().evicted_idle, 1);
        assert!(ft.get(&t(1, 5, 2, 80, TCP)).is_none());
        // Every other flow is still found.
        for n in (0..16u16).filter(|&n| n != 5) {
            assert!(ft.get(&t(1, n, 2, 80, TCP)).is_some(), "{n}");
        }
    }

    #[test]
    fn many_flows_insert_find_remove_consistently() {
        let mut ft = FlowTable::new(1 << 12, Timeouts::default());
        let cap = ft.capacity() as u16;
        for n in 0..cap {
            let x = t(u128::from(n) * 7919, n, 99, 443, UDP);
            assert!(matches!(
                ft.track(&x, 0, 100, u64::from(n)),
                Track::Hit { new: true, .. }
            ));
        }
        for n in 0..cap {
            let x = t(u128::from(n) * 7919, n, 99, 443, UDP);
            assert!(ft.get(&rev(&x)).is_some());
        }
        // Expire the older half.
        let mut gone = 0;
        while ft.sweep(u64::from(cap / 2) - 1 + 30_000, 10_000, &mut |_| gone += 1) > 0 {}
        assert_eq!(gone, usize::from(cap / 2));
        for n in 0..cap {
            let x = t(u128::from(n) * 7919, n, 99, 443, UDP);
            assert_eq!(ft.get(&x).is_some(), n >= cap / 2, "{n}");
        }
        assert_eq!(ft.per_state().iter().sum::<u64>() as usize, ft.len());
    }

    #[test]
    fn memory_per_flow_is_documented_figure() {
        assert_eq!(BYTES_PER_FLOW, 128);
        let ft = FlowTable::new(1 << 10, Timeouts::default());
        assert_eq!(ft.memory_bytes(), 1024 * 128);
    }
}
