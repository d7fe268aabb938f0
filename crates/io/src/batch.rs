//! A fixed-capacity batch of frames in one arena: the unit of work of the
//! data path. Filling, reading and clearing never allocate.

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

/// Frames copied out of receive rings, each with the port it came from.
pub struct FrameBatch {
    arena: Box<[u8]>,
    off: [u32; BATCH_MAX],
    len: [u32; BATCH_MAX],
    port: [u16; BATCH_MAX],
    count: usize,
    used: usize,
    /// Frames the batch takes before it reports full (see
    /// [`FrameBatch::set_quota`]); `BATCH_MAX` normally.
    limit: usize,
}

impl Default for FrameBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameBatch {
    pub fn new() -> Self {
        FrameBatch {
            arena: vec![0u8; ARENA_BYTES].into_boxed_slice(),
            off: [0; BATCH_MAX],
            len: [0; BATCH_MAX],
            port: [0; BATCH_MAX],
            count: 0,
            used: 0,
            limit: BATCH_MAX,
        }
    }

    /// Forget all frames (the arena is reused as is) and any quota.
    #[inline]
    pub fn clear(&mut self) {
        self.count = 0;
        self.used = 0;
        self.limit = BATCH_MAX;
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
        let o = self.off[i] as usize;
        &self.arena[o..o + self.len[i] as usize]
    }

    #[inline]
    pub fn frame_mut(&mut self, i: usize) -> &mut [u8] {
        let o = self.off[i] as usize;
        let l = self.len[i] as usize;
        &mut self.arena[o..o + l]
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
        let o = self.used;
        Some(&mut self.arena[o..o + MAX_FRAME_LEN])
    }

    /// Append the frame written into the last `slot()` (length `len`).
    #[inline]
    pub fn commit(&mut self, len: usize, port: u16) {
        debug_assert!(len <= MAX_FRAME_LEN && !self.is_full());
        let len = len.min(MAX_FRAME_LEN);
        self.off[self.count] = self.used as u32;
        self.len[self.count] = len as u32;
        self.port[self.count] = port;
        self.count += 1;
        // Keep frames 64-byte aligned so headers start on a cache line.
        self.used += (len + 63) & !63;
    }

    /// Keep only the frames for which `keep(i)` is true, in order (their
    /// bytes stay where they are; no copy, no allocation). Used by the
    /// MPLS stage to take labelled frames out of a routed batch.
    pub fn retain(&mut self, mut keep: impl FnMut(usize) -> bool) {
        let mut w = 0;
        for r in 0..self.count {
            if keep(r) {
                self.off[w] = self.off[r];
                self.len[w] = self.len[r];
                self.port[w] = self.port[r];
                w += 1;
            }
        }
        self.count = w;
    }

    /// Take the 802.1Q tag out of frame `i` (the MAC addresses move up
    /// over it: 12 bytes, no copy of the payload) and give the frame to
    /// port `port`. The caller checked that the frame is tagged.
    #[inline]
    pub fn pop_vlan_tag(&mut self, i: usize, port: u16) {
        let o = self.off[i] as usize;
        if self.len[i] < 18 {
            return;
        }
        self.arena.copy_within(o..o + 12, o + 4);
        self.off[i] += 4;
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
        let o = self.off[i] as usize;
        self.arena[o..o + data.len()].copy_from_slice(data);
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
