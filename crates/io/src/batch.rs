//! A fixed-capacity batch of frames in one arena: the unit of work of the
//! data path. Filling, reading and clearing never allocate.
//!
//! A frame is either a copy in the batch's arena or, from an AF_XDP port
//! on its worker's shared UMEM ([`crate::af_xdp::shared`]), the UMEM chunk
//! the kernel received it into, held (not back in the fill ring) until the
//! frame is moved to another port's transmit ring
//! ([`FrameBatch::take_chunk`]) or the batch is cleared.

use crate::af_xdp::shared::SharedUmem;
use std::sync::Arc;

/// Most frames in one batch.
pub const BATCH_MAX: usize = 256;
/// Longest frame Lanyard handles, without FCS: 9,216-byte jumbo frames plus
/// room for two pushed tags (802.1ad outer + 802.1Q inner).
pub const MAX_FRAME_LEN: usize = 9216 + 8;
/// Size of a batch's arena. A batch counts as full once less than one
/// maximum-length frame fits, so jumbo frames never fail to fit.
pub const ARENA_BYTES: usize = 512 * 1024;

const _: () = assert!(ARENA_BYTES >= 2 * MAX_FRAME_LEN);
const _: () = assert!(ARENA_BYTES <= u32::MAX as usize);

/// No UMEM chunk: the frame is a copy in the arena.
const NO_CHUNK: u64 = u64::MAX;

/// Frames copied out of receive rings (or held in a shared UMEM), each
/// with the port it came from.
pub struct FrameBatch {
    /// The arena (`ARENA_BYTES`, from `Box::into_raw`; freed in `Drop`).
    /// Kept as a raw pointer: frames are addressed by pointer, arena or
    /// UMEM alike.
    arena: *mut u8,
    ptr: [*mut u8; BATCH_MAX],
    len: [u32; BATCH_MAX],
    port: [u16; BATCH_MAX],
    /// Per frame: the shared-UMEM chunk it lies in, or `NO_CHUNK`.
    chunk: [u64; BATCH_MAX],
    /// Frames holding a chunk (0: `clear` has nothing to give back).
    held: usize,
    /// The shared UMEM held chunks belong to (kept once set: one clone
    /// per worker, not per frame).
    umem: Option<Arc<SharedUmem>>,
    count: usize,
    used: usize,
    /// Frames the batch takes before it reports full (see
    /// [`FrameBatch::set_quota`]); `BATCH_MAX` normally.
    limit: usize,
}

// SAFETY: the batch owns its arena; held chunks lie in a UMEM the batch
// keeps alive (`umem`), used by the thread that owns the batch.
unsafe impl Send for FrameBatch {}

impl Default for FrameBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for FrameBatch {
    fn drop(&mut self) {
        self.clear();
        // SAFETY: the arena came from `Box::into_raw` of this length.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.arena, ARENA_BYTES)) });
    }
}

impl FrameBatch {
    pub fn new() -> Self {
        let arena = Box::into_raw(vec![0u8; ARENA_BYTES].into_boxed_slice()) as *mut u8;
        FrameBatch {
            arena,
            ptr: [arena; BATCH_MAX],
            len: [0; BATCH_MAX],
            port: [0; BATCH_MAX],
            chunk: [NO_CHUNK; BATCH_MAX],
            held: 0,
            umem: None,
            count: 0,
            used: 0,
            limit: BATCH_MAX,
        }
    }

    /// Forget all frames (the arena is reused as is) and any quota; held
    /// UMEM chunks go back to their ports' fill rings.
    #[inline]
    pub fn clear(&mut self) {
        if self.held > 0 {
            self.release_from(0);
        }
        self.count = 0;
        self.used = 0;
        self.limit = BATCH_MAX;
    }

    /// Give back every chunk still held by frames `from..count`.
    fn release_from(&mut self, from: usize) {
        let Some(u) = self.umem.as_ref() else { return };
        for i in from..self.count {
            let c = std::mem::replace(&mut self.chunk[i], NO_CHUNK);
            if c != NO_CHUNK {
                u.give_back(c);
                self.held -= 1;
            }
        }
    }

    /// Let the batch take at most `n` more frames before it reports full
    /// (`None`: up to its capacity). The worker gives each receive port a
    /// quota this way, so one busy port cannot fill a whole batch while
    /// others wait; every backend stops at a full batch.
    #[inline]
    pub fn set_quota(&mut self, n: Option<usize>) {
        self.limit = match n {
            Some(n) => (self.count + n).min(BATCH_MAX),
            None => BATCH_MAX,
        };
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.count
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// True when no further frame of maximum length is guaranteed to fit.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.count >= self.limit || ARENA_BYTES - self.used < MAX_FRAME_LEN
    }

    /// How many more frames may be appended (by count; see `is_full`).
    #[inline]
    pub fn space(&self) -> usize {
        if self.is_full() {
            0
        } else {
            self.limit - self.count
        }
    }

    /// Frame `i` (panics if `i >= len()`, like slice indexing).
    #[inline]
    pub fn frame(&self, i: usize) -> &[u8] {
        assert!(i < self.count);
        // SAFETY: frame `i` is `len[i]` bytes at `ptr[i]`, in the arena or
        // in a UMEM chunk this batch holds; the borrow is tied to `&self`.
        unsafe { std::slice::from_raw_parts(self.ptr[i], self.len[i] as usize) }
    }

    #[inline]
    pub fn frame_mut(&mut self, i: usize) -> &mut [u8] {
        assert!(i < self.count);
        // SAFETY: as in `frame`, borrowed through `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr[i], self.len[i] as usize) }
    }

    /// Ingress port id of frame `i`.
    #[inline]
    pub fn port(&self, i: usize) -> u16 {
        self.port[i]
    }

    /// Writable space for the next frame (`MAX_FRAME_LEN` bytes), or `None`
    /// if the batch is full. Follow with [`FrameBatch::commit`].
    #[inline]
    pub fn slot(&mut self) -> Option<&mut [u8]> {
        if self.is_full() {
            return None;
        }
        // SAFETY: `used + MAX_FRAME_LEN <= ARENA_BYTES` (not full); the
        // borrow is tied to `&mut self`.
        Some(unsafe { std::slice::from_raw_parts_mut(self.arena.add(self.used), MAX_FRAME_LEN) })
    }

    /// Append the frame written into the last `slot()` (length `len`).
    #[inline]
    pub fn commit(&mut self, len: usize, port: u16) {
        debug_assert!(len <= MAX_FRAME_LEN && !self.is_full());
        let len = len.min(MAX_FRAME_LEN);
        // SAFETY: inside the arena (`slot` lent this place).
        self.ptr[self.count] = unsafe { self.arena.add(self.used) };
        self.len[self.count] = len as u32;
        self.port[self.count] = port;
        self.chunk[self.count] = NO_CHUNK;
        self.count += 1;
        // Keep frames 64-byte aligned so headers start on a cache line.
        self.used += (len + 63) & !63;
    }

    /// Append a frame the kernel received into chunk `chunk` of `umem`,
    /// `len` bytes at offset `addr` (not copied: the batch holds the chunk
    /// until [`FrameBatch::take_chunk`] or `clear`). The caller checked
    /// that the batch has room by count (`space() > 0`) and that
    /// `[addr, addr + len)` lies in the chunk.
    #[inline]
    pub fn commit_umem(&mut self, umem: &Arc<SharedUmem>, addr: u64, len: usize, port: u16) {
        debug_assert!(self.count < self.limit);
        if !self.umem.as_ref().is_some_and(|u| Arc::ptr_eq(u, umem)) {
            if self.held > 0 {
                // Chunks of another UMEM (never: one per worker) go back first.
                self.release_from(0);
            }
            self.umem = Some(umem.clone());
        }
        // SAFETY: inside the UMEM mapping (the caller checked).
        self.ptr[self.count] = unsafe { umem.base().add(addr as usize) };
        self.len[self.count] = len as u32;
        self.port[self.count] = port;
        self.chunk[self.count] = addr & !(crate::af_xdp::shared::CHUNK_BYTES as u64 - 1);
        self.held += 1;
        self.count += 1;
    }

    /// The shared UMEM frame `i` lies in, if it is a held chunk.
    #[inline]
    pub fn umem_of(&self, i: usize) -> Option<&Arc<SharedUmem>> {
        if i < self.count && self.chunk[i] != NO_CHUNK {
            self.umem.as_ref()
        } else {
            None
        }
    }

    /// Rewrite frame `i`, a held UMEM chunk, in place for a port whose
    /// encapsulation puts `tag` (an 802.1Q/ad tag, or none) after the MAC
    /// addresses in front of the part from `inner_off` on; pad to `min`
    /// bytes as the pipeline's egress writer does. Returns the frame's new
    /// UMEM offset and length (the frame now is that), or `None` (nothing
    /// changed) when it is not a held chunk or the chunk has no room.
    pub fn rewrite_umem(
        &mut self,
        i: usize,
        inner_off: usize,
        tag: Option<[u8; 4]>,
        min: usize,
    ) -> Option<(u64, usize)> {
        let u = self.umem_of(i)?;
        let base = u.base();
        let chunk = self.chunk[i];
        let len = self.len[i] as usize;
        if inner_off < 12 || inner_off > len {
            return None;
        }
        let hdr = if tag.is_some() { 16 } else { 12 };
        // SAFETY: `ptr[i]` lies in the chunk at `base + chunk`.
        let start = unsafe { self.ptr[i].offset_from(base) } as usize;
        let new_start = (start + inner_off).checked_sub(hdr)?;
        let mut new_len = hdr + (len - inner_off);
        if new_len < min && new_len < len {
            new_len = min;
        }
        let chunk_end = chunk as usize + crate::af_xdp::shared::CHUNK_BYTES;
        if new_start < chunk as usize || new_start + new_len > chunk_end {
            return None;
        }
        // SAFETY: both ranges lie in the held chunk (checked); `copy`
        // handles the overlap of the moved addresses.
        unsafe {
            let p = base.add(new_start);
            if new_start != start {
                std::ptr::copy(base.add(start), p, 12);
            }
            if let Some(t) = tag {
                std::ptr::copy_nonoverlapping(t.as_ptr(), p.add(12), 4);
            }
            let body = hdr + (len - inner_off);
            if new_len > body {
                std::ptr::write_bytes(p.add(body), 0, new_len - body);
            }
            self.ptr[i] = p;
        }
        self.len[i] = new_len as u32;
        Some((new_start as u64, new_len))
    }

    /// Frame `i`'s chunk leaves the batch (it went to a transmit ring):
    /// `clear` no longer gives it back.
    #[inline]
    pub fn take_chunk(&mut self, i: usize) {
        if i < self.count && self.chunk[i] != NO_CHUNK {
            self.chunk[i] = NO_CHUNK;
            self.held -= 1;
        }
    }

    /// Keep only the frames for which `keep(i)` is true, in order (their
    /// bytes stay where they are; no copy, no allocation). Used by the
    /// MPLS stage to take labelled frames out of a routed batch. The
    /// chunks of frames left out go back to their fill rings.
    pub fn retain(&mut self, mut keep: impl FnMut(usize) -> bool) {
        let mut w = 0;
        for r in 0..self.count {
            if keep(r) {
                self.ptr[w] = self.ptr[r];
                self.len[w] = self.len[r];
                self.port[w] = self.port[r];
                self.chunk[w] = self.chunk[r];
                w += 1;
            } else if self.chunk[r] != NO_CHUNK {
                if let Some(u) = self.umem.as_ref() {
                    u.give_back(self.chunk[r]);
                }
                self.held -= 1;
            }
        }
        self.count = w;
    }

    /// Take the 802.1Q tag out of frame `i` (the MAC addresses move up
    /// over it: 12 bytes, no copy of the payload) and give the frame to
    /// port `port`. The caller checked that the frame is tagged.
    #[inline]
    pub fn pop_vlan_tag(&mut self, i: usize, port: u16) {
        if i >= self.count || self.len[i] < 18 {
            return;
        }
        // SAFETY: the frame's first 16 bytes (it is at least 18 long).
        unsafe {
            std::ptr::copy(self.ptr[i], self.ptr[i].add(4), 12);
            self.ptr[i] = self.ptr[i].add(4);
        }
        self.len[i] -= 4;
        self.port[i] = port;
    }

    /// Overwrite frame `i` with `data` where it is, when `data` is no
    /// longer than the frame (a labelled frame replaced by the packet
    /// popped from it: it needs no room, so a full batch still takes it).
    /// Returns false, changing nothing, when `data` is longer.
    #[inline]
    pub fn replace(&mut self, i: usize, data: &[u8]) -> bool {
        if i >= self.count || data.len() > self.len[i] as usize {
            return false;
        }
        // SAFETY: the frame's first `data.len()` bytes (checked); `data`
        // may be a copy of it, never an overlapping borrow (`&mut self`).
        unsafe { std::ptr::copy(data.as_ptr(), self.ptr[i], data.len()) };
        self.len[i] = data.len() as u32;
        true
    }

    /// Copy `data` in as a new frame. Returns false if full or too long.
    pub fn push(&mut self, port: u16, data: &[u8]) -> bool {
        if data.len() > MAX_FRAME_LEN {
            return false;
        }
        match self.slot() {
            Some(s) => {
                s[..data.len()].copy_from_slice(data);
                self.commit(data.len(), port);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_shrinks_a_frame_in_place_even_when_full() {
        let mut b = FrameBatch::new();
        while b.push(7, &[1; 64]) {}
        assert!(b.is_full());
        let n = b.len();
        assert!(b.replace(3, &[2; 60]));
        assert_eq!((b.len(), b.frame(3), b.port(3)), (n, &[2u8; 60][..], 7));
        assert_eq!(b.frame(4), &[1u8; 64][..], "its neighbour untouched");
        assert!(!b.replace(3, &[3; 61]), "longer than the frame now");
        assert!(!b.replace(n, &[3; 10]), "no such frame");
        assert_eq!(b.frame(3), &[2u8; 60][..]);
    }

    /// A frame the "kernel" put in chunk `c` of `u` (after the 256 bytes
    /// of headroom it leaves), committed to `b` as a held chunk.
    fn umem_frame(u: &Arc<SharedUmem>, b: &mut FrameBatch, c: u64, f: &[u8]) -> u64 {
        let addr = c * crate::af_xdp::shared::CHUNK_BYTES as u64 + 256;
        // SAFETY: inside the UMEM (chunk c of region 0).
        unsafe { std::ptr::copy_nonoverlapping(f.as_ptr(), u.base().add(addr as usize), f.len()) };
        b.commit_umem(u, addr, f.len(), 1);
        addr
    }

    #[test]
    fn umem_frames_are_rewritten_in_place_and_their_chunks_go_home() {
        let u = Arc::new(SharedUmem::new(1, 64, 16).expect("memfd UMEM"));
        let mut b = FrameBatch::new();
        assert!(b.push(9, &[7; 60]), "an arena frame first");
        let mut tagged = vec![0u8; 64];
        tagged[..12].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        tagged[12..16].copy_from_slice(&[0x81, 0x00, 0x00, 0x0a]);
        tagged[16..18].copy_from_slice(&[0x08, 0x00]);
        for (k, x) in tagged[18..].iter_mut().enumerate() {
            *x = k as u8;
        }
        let a1 = umem_frame(&u, &mut b, 3, &tagged);
        umem_frame(&u, &mut b, 5, &tagged[..60]);
        let a3 = umem_frame(&u, &mut b, 6, &tagged);
        assert_eq!(b.len(), 4);
        assert!(b.umem_of(0).is_none() && b.umem_of(1).is_some());
        assert_eq!(b.frame(1), &tagged[..]);

        // Popped: the addresses move up 4 bytes, the rest stays.
        let (na, nl) = b.rewrite_umem(1, 16, None, 60).expect("room");
        assert_eq!((na, nl), (a1 + 4, 60));
        let mut want = tagged[..12].to_vec();
        want.extend_from_slice(&tagged[16..]);
        assert_eq!(b.frame(1), &want[..]);
        // A 60-byte tagged frame popped to 56 is padded back to 60.
        let (_, nl) = b.rewrite_umem(2, 16, None, 60).expect("room");
        assert_eq!(nl, 60);
        assert_eq!(&b.frame(2)[56..], &[0, 0, 0, 0]);
        // Pushed: a new tag in the headroom in front.
        let (na, nl) = b
            .rewrite_umem(3, 16, Some([0x88, 0xa8, 0x20, 0x14]), 60)
            .expect("room");
        assert_eq!((na, nl), (a3, 64));
        assert_eq!(&b.frame(3)[12..16], &[0x88, 0xa8, 0x20, 0x14]);
        assert_eq!(&b.frame(3)[16..], &tagged[16..]);
        assert!(b.rewrite_umem(0, 12, None, 60).is_none(), "an arena frame");

        // Frame 1 went to a transmit ring; the others come back on clear
        // (and on retain, for those it leaves out).
        b.take_chunk(1);
        b.retain(|i| i != 2);
        assert_eq!(u.back_len(0), 1, "frame 2's chunk is home");
        b.clear();
        assert_eq!(u.back_len(0), 2, "frame 3's too, not frame 1's");
    }

    #[test]
    fn retain_keeps_order_and_room() {
        let mut b = FrameBatch::new();
        for k in 0..5u8 {
            assert!(b.push(k as u16, &[k; 60]));
        }
        b.retain(|i| i % 2 == 0);
        assert_eq!(b.len(), 3);
        assert_eq!((b.port(1), b.frame(1)[0]), (2, 2));
        assert!(b.push(9, &[9; 60]));
        assert_eq!(b.frame(3)[0], 9);
    }

    #[test]
    fn pop_vlan_tag_moves_the_addresses_over_the_tag() {
        let mut b = FrameBatch::new();
        let mut f = vec![0u8; 64];
        f[..12].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        f[12..16].copy_from_slice(&[0x81, 0x00, 0x00, 0x64]);
        f[16..18].copy_from_slice(&[0x08, 0x00]);
        f[18] = 0x45;
        assert!(b.push(3, &f));
        b.pop_vlan_tag(0, 40);
        assert_eq!(b.port(0), 40);
        assert_eq!(b.frame(0).len(), 60);
        assert_eq!(&b.frame(0)[..12], &f[..12]);
        assert_eq!(&b.frame(0)[12..15], &[0x08, 0x00, 0x45]);
    }

    #[test]
    fn fills_to_count_limit_with_small_frames() {
        let mut b = FrameBatch::new();
        let f = [0xabu8; 60];
        let mut n = 0;
        while b.push(3, &f) {
            n += 1;
        }
        assert_eq!(n, BATCH_MAX);
        assert_eq!(b.frame(BATCH_MAX - 1), &f[..]);
        assert_eq!(b.port(7), 3);
        b.clear();
        assert!(b.is_empty() && b.space() == BATCH_MAX);
    }

    #[test]
    fn quota_caps_what_one_fill_takes() {
        let mut b = FrameBatch::new();
        let f = [7u8; 60];
        b.set_quota(Some(10));
        let mut n = 0;
        while b.push(1, &f) {
            n += 1;
        }
        assert_eq!((n, b.len(), b.space()), (10, 10, 0));
        b.set_quota(Some(BATCH_MAX));
        assert_eq!(b.space(), BATCH_MAX - 10);
        b.set_quota(Some(5));
        while b.push(2, &f) {}
        b.set_quota(None);
        assert_eq!((b.len(), b.space()), (15, BATCH_MAX - 15));
        b.set_quota(Some(3));
        b.clear();
        assert_eq!(b.space(), BATCH_MAX, "clear lifts the quota");
    }

    #[test]
    fn jumbo_frames_always_fit_until_full() {
        let mut b = FrameBatch::new();
        let f = vec![1u8; MAX_FRAME_LEN];
        let mut n = 0;
        while b.push(0, &f) {
            n += 1;
        }
        assert!(n >= ARENA_BYTES / (MAX_FRAME_LEN + 64) - 1);
        assert!(
            !b.push(0, &[0u8; 60]),
            "full batch refuses even small frames"
        );
        assert!(!FrameBatch::new().push(0, &vec![0u8; MAX_FRAME_LEN + 1]));
    }
}
