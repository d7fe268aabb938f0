//! Fixed arrays for the big tables (LPM first levels and node pools, the
//! flow cache, the neighbour table, the inline engine's flow index and
//! entries and usage table), in memory the kernel backs with 2 MB
//! transparent huge pages where it can.
//!
//! Why: a lookup with a random destination touches one or more random
//! places in tens to hundreds of megabytes (the LPM's first-level entry
//! and its nodes, a flow's index slot and entry). With 4 KB pages each of
//! those is also a TLB miss, and on a virtual machine a TLB miss walks two
//! page tables. 2 MB pages make the whole working set fit the TLB
//! (measured in docs/performance.md, "Inline engine per packet and per
//! connection" and "Huge pages for the FIB and the flow cache").
//!
//! An array of 2 MB or more is an anonymous mapping whose elements start
//! on a 2 MB boundary, advised `MADV_HUGEPAGE` (honoured with THP `always`
//! or `madvise`, the Debian default). [`Backing`] chooses when its memory
//! is committed: at build ([`Backing::Huge`], `MADV_POPULATE_WRITE`: all
//! of it resident from the start, the packet path never takes a page fault
//! on it) or on first write ([`Backing::HugeOnTouch`]: a 2 MB page per
//! touched 2 MB, for pools used from the start on and first levels that
//! fill as routes arrive), or ordinary 4 KB pages on first write
//! ([`Backing::Small`], for the many small VRF tables whose sparse writes
//! would each cost 2 MB). The advices are hints: without them (older
//! kernels, THP `never`, no free 2 MB page) the array is an ordinary
//! zeroed mapping and everything works, only slower.
//!
//! The advised range is its own mapping area (a 4 KB unadvised margin on
//! each side keeps the kernel from merging it with a neighbouring
//! mapping), so [`HugeArray::huge_backed_bytes`] can read how much of it is
//! on huge pages from `/proc/self/smaps` for `show` and the tests.

use std::ptr::NonNull;

/// Types whose all-zero bytes are a valid value (the arrays start zeroed).
///
/// # Safety
/// Implement only for types made of integers, atomics and arrays or
/// `#[repr(C)]` structs of them, with no drop glue that matters.
pub unsafe trait Zeroable {}

// SAFETY: integers and atomics are valid as zero.
unsafe impl Zeroable for u8 {}
// SAFETY: as above.
unsafe impl Zeroable for u32 {}
// SAFETY: as above.
unsafe impl Zeroable for u64 {}
// SAFETY: as above.
unsafe impl Zeroable for std::sync::atomic::AtomicU32 {}
// SAFETY: as above.
unsafe impl Zeroable for std::sync::atomic::AtomicU64 {}

/// A transparent huge page (x86-64, aarch64 with 4 KB base pages).
pub const HUGE_PAGE: usize = 2 << 20;

/// Margin left unadvised before and after the advised range.
const MARGIN: usize = 4096;

/// How a [`HugeArray`]'s memory is backed and committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// 2 MB pages, all committed when the array is built.
    Huge,
    /// 2 MB pages, each committed on the first write to its 2 MB.
    HugeOnTouch,
    /// Ordinary pages committed on first write (no advice).
    Small,
}

/// A zero-initialised array of `len` `T`s in huge-page-backed memory. See
/// the module docs. Elements are never dropped (they are [`Zeroable`]).
pub struct HugeArray<T> {
    ptr: NonNull<T>,
    len: usize,
    /// The whole mapping (for `munmap`); null when `len` is 0.
    map: *mut libc::c_void,
    map_len: usize,
    /// Length of the range advised `MADV_HUGEPAGE` from `ptr` (0: none).
    advised: usize,
}

// SAFETY: the array owns its memory; sharing it is sharing `[T]`.
unsafe impl<T: Send> Send for HugeArray<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for HugeArray<T> {}

impl<T: Zeroable> HugeArray<T> {
    /// `len` zeroed elements on huge pages, committed now
    /// ([`Backing::Huge`]). Running out of memory aborts, as a `Vec`
    /// would.
    pub fn zeroed(len: usize) -> HugeArray<T> {
        HugeArray::with_backing(len, Backing::Huge)
    }

    /// `len` zeroed elements backed as `backing` says. Running out of
    /// address space aborts, as a `Vec` would.
    pub fn with_backing(len: usize, backing: Backing) -> HugeArray<T> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .expect("huge array size overflows");
        if bytes == 0 {
            return HugeArray {
                ptr: NonNull::dangling(),
                len,
                map: std::ptr::null_mut(),
                map_len: 0,
                advised: 0,
            };
        }
        let huge = backing != Backing::Small && bytes >= HUGE_PAGE;
        let advised = if huge {
            bytes.next_multiple_of(HUGE_PAGE)
        } else {
            0
        };
        // Room to align the start to 2 MB after a margin, and a margin
        // after the advised range.
        let map_len = if huge {
            advised + HUGE_PAGE + MARGIN
        } else {
            bytes
        };
        // SAFETY: a fresh private anonymous mapping; no existing memory
        // is named.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            let layout = std::alloc::Layout::from_size_align(bytes, 4096)
                .unwrap_or(std::alloc::Layout::new::<T>());
            std::alloc::handle_alloc_error(layout);
        }
        let start = if huge {
            // map is page-aligned, so start - map is in [MARGIN, HUGE_PAGE]
            // and start + advised <= map + map_len - MARGIN.
            (map as usize + MARGIN).next_multiple_of(HUGE_PAGE)
        } else {
            map as usize
        };
        // Hints (see the module docs); failures leave plain pages.
        // SAFETY: [start, start + advised) and [start, start + bytes) lie
        // inside the mapping made above (see the comment on `start`).
        unsafe {
            if huge {
                libc::madvise(start as *mut libc::c_void, advised, libc::MADV_HUGEPAGE);
            }
            if backing == Backing::Huge {
                libc::madvise(start as *mut libc::c_void, bytes, libc::MADV_POPULATE_WRITE);
            }
        }
        HugeArray {
            // mmap returns page-aligned memory: aligned for any `T` with
            // alignment up to 4096 (ours: at most 64).
            ptr: NonNull::new(start as *mut T).expect("mmap returned null"),
            len,
            map,
            map_len,
            advised,
        }
    }
}

impl<T> HugeArray<T> {
    /// Bytes of the elements (not of the alignment slack).
    pub fn bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }

    /// Whether the array was advised for huge pages (2 MB or more, not
    /// [`Backing::Small`]).
    pub fn advised(&self) -> bool {
        self.advised != 0
    }

    /// The advised range (start address, bytes), if any: what
    /// [`huge_bytes_in`] takes, so that a thread that must not read
    /// `/proc` (a worker) can hand its arrays' ranges to one that may.
    pub fn advised_range(&self) -> Option<(usize, usize)> {
        (self.advised != 0).then_some((self.ptr.as_ptr() as usize, self.advised))
    }

    /// Bytes of this array the kernel backs with huge pages right now
    /// (`AnonHugePages` of its range in `/proc/self/smaps`); `Some(0)` for
    /// an array not advised or not (yet) on huge pages, `None` when smaps
    /// cannot be read. Reads the whole smaps file: for `show` and tests,
    /// never the packet path.
    pub fn huge_backed_bytes(&self) -> Option<usize> {
        huge_bytes_in(self.advised_range().as_slice())
    }
}

/// Bytes of the given ranges (from [`HugeArray::advised_range`]) on huge
/// pages now: one read of `/proc/self/smaps` (`Some(0)` without ranges,
/// without reading; `None` when smaps cannot be read).
pub fn huge_bytes_in(ranges: &[(usize, usize)]) -> Option<usize> {
    if ranges.is_empty() {
        return Some(0);
    }
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    Some(
        ranges
            .iter()
            .map(|&(start, len)| anon_huge_in(&smaps, start, len))
            .sum(),
    )
}

/// Sum of `AnonHugePages` over the mapping areas of `smaps` that overlap
/// `[start, start + len)`, each capped at its overlap (exact for a
/// [`HugeArray`]'s advised range, which is an area of its own).
pub fn anon_huge_in(smaps: &str, start: usize, len: usize) -> usize {
    let end = start + len;
    let mut total = 0;
    let mut overlap = 0usize;
    for line in smaps.lines() {
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else { continue };
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                overlap = b.min(end).saturating_sub(a.max(start));
                continue;
            }
        }
        if first == "AnonHugePages:" && overlap > 0 {
            let kb: usize = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
            total += (kb * 1024).min(overlap);
        }
    }
    total
}

impl<T> std::ops::Deref for HugeArray<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: `len` initialised (zeroed, `Zeroable`) elements.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> std::ops::DerefMut for HugeArray<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` is unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> Drop for HugeArray<T> {
    fn drop(&mut self) {
        if !self.map.is_null() {
            // SAFETY: the mapping made in `with_backing`, unmapped once.
            unsafe { libc::munmap(self.map, self.map_len) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn zeroed_writable_and_aligned() {
        for backing in [Backing::Huge, Backing::HugeOnTouch, Backing::Small] {
            for len in [0usize, 1, 1000, (4 << 20) / 8 + 3] {
                let mut a: HugeArray<u64> = HugeArray::with_backing(len, backing);
                assert_eq!(a.len(), len);
                assert_eq!(a.bytes(), len * 8);
                assert!(a.iter().all(|&v| v == 0));
                if let Some(last) = a.last_mut() {
                    *last = 7;
                }
                assert_eq!(a.iter().sum::<u64>(), if len > 0 { 7 } else { 0 });
                let big = len * 8 >= HUGE_PAGE;
                assert_eq!(a.advised(), big && backing != Backing::Small);
                if a.advised() {
                    assert_eq!(a.as_ptr() as usize % HUGE_PAGE, 0);
                }
                if len > 0 {
                    assert_eq!(a.as_ptr() as usize % 4096, 0);
                }
            }
        }
    }

    #[test]
    fn atomics_start_zero() {
        let a: HugeArray<AtomicU32> = HugeArray::with_backing(1 << 20, Backing::HugeOnTouch);
        assert_eq!(a[12345].load(Ordering::Relaxed), 0);
        a[12345].store(9, Ordering::Relaxed);
        assert_eq!(a.iter().map(|x| x.load(Ordering::Relaxed)).sum::<u32>(), 9);
    }

    /// The start address of a mapping in /proc/self/maps, if any.
    fn mapped(addr: usize) -> bool {
        std::fs::read_to_string("/proc/self/maps")
            .unwrap()
            .lines()
            .filter_map(|l| l.split_whitespace().next()?.split_once('-'))
            .filter_map(|(a, b)| {
                Some((
                    usize::from_str_radix(a, 16).ok()?,
                    usize::from_str_radix(b, 16).ok()?,
                ))
            })
            .any(|(a, b)| a <= addr && addr < b)
    }

    #[test]
    fn drop_unmaps() {
        let a: HugeArray<u64> = HugeArray::with_backing(3 << 20, Backing::HugeOnTouch);
        let p = a.as_ptr() as usize;
        assert!(mapped(p));
        drop(a);
        assert!(!mapped(p), "mapping still present after drop");
    }

    #[test]
    fn smaps_parsing() {
        let smaps = "\
7f0000000000-7f0000400000 rw-p 00000000 00:00 0
Size:               4096 kB
AnonHugePages:      4096 kB
7f0000400000-7f0000401000 rw-p 00000000 00:00 0
AnonHugePages:         0 kB
7f0000600000-7f0000a00000 rw-p 00000000 00:00 0 [heap]
AnonHugePages:      2048 kB
";
        let base = 0x7f00_0000_0000usize;
        assert_eq!(anon_huge_in(smaps, base, 4 << 20), 4 << 20);
        // Partly covered areas count at most their overlap.
        assert_eq!(anon_huge_in(smaps, base + (1 << 20), 1 << 20), 1 << 20);
        assert_eq!(anon_huge_in(smaps, base + (4 << 20), 3 << 20), 1 << 20);
        assert_eq!(anon_huge_in(smaps, base + (10 << 20), 1 << 20), 0);
    }

    /// Whether the kernel's THP mode allows huge pages for advised memory.
    fn thp_mode() -> Option<String> {
        let s = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
        let m = s.split_once('[')?.1.split_once(']')?.0;
        Some(m.to_string())
    }

    /// Reads the backing of a populated and an on-touch array. Huge backing
    /// is only reported, not required: with THP `never` the kernel gives
    /// none, and with `madvise`/`always` a fragmented host may refuse.
    #[test]
    fn huge_backing_reported() {
        let a: HugeArray<u64> = HugeArray::zeroed((8 << 20) / 8);
        let got = a.huge_backed_bytes().expect("smaps readable");
        assert!(got <= 8 << 20, "more huge bytes than the range: {got}");
        assert_eq!(got % HUGE_PAGE, 0);
        let mode = thp_mode();
        eprintln!("THP {mode:?}: populated 8 MiB array, {got} bytes on huge pages");
        if mode.as_deref() == Some("never") {
            assert_eq!(got, 0);
        }
        // On touch: nothing before the first write, at most the touched
        // 2 MB after it.
        let mut b: HugeArray<u64> = HugeArray::with_backing((8 << 20) / 8, Backing::HugeOnTouch);
        assert_eq!(b.huge_backed_bytes(), Some(0));
        b[0] = 1;
        let touched = b.huge_backed_bytes().unwrap();
        assert!(touched <= HUGE_PAGE, "{touched}");
        eprintln!("on touch: one write, {touched} bytes on huge pages");
        let s: HugeArray<u64> = HugeArray::with_backing((8 << 20) / 8, Backing::Small);
        assert_eq!(s.huge_backed_bytes(), Some(0));
    }
}
