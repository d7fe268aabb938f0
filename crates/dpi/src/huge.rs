//! Fixed arrays for the engine's big tables (flow index and entries, the
//! usage table), in memory the kernel backs with 2 MB transparent huge
//! pages where it can.
//!
//! Why: a packet of an established flow touches three or four random
//! places in hundreds of megabytes (the index slot, the flow entry, the
//! subscriber × service entry). With 4 KB pages each of those is also a
//! TLB miss, and on a virtual machine a TLB miss walks two page tables.
//! 2 MB pages make the whole working set fit the TLB (measured in
//! docs/performance.md, "Inline engine per packet and per connection").
//!
//! The array is an anonymous mapping aligned to 2 MB, advised
//! `MADV_HUGEPAGE` (honoured with THP `always` or `madvise`, the Debian
//! default) and populated with `MADV_POPULATE_WRITE` when it is built, so
//! the packet path never takes a page fault on it. Both advices are hints:
//! without them (older kernels, THP `never`) the array is an ordinary
//! zeroed mapping and everything works, only slower.

use std::ptr::NonNull;

/// Types whose all-zero bytes are a valid value (the arrays start zeroed).
///
/// # Safety
/// Implement only for types made of integers, atomics and arrays or
/// `#[repr(C)]` structs of them, with no drop glue that matters.
pub unsafe trait Zeroable {}

// SAFETY: integers and atomics are valid as zero.
unsafe impl Zeroable for u64 {}
// SAFETY: as above.
unsafe impl Zeroable for std::sync::atomic::AtomicU64 {}

const HUGE: usize = 2 << 20;

/// A zero-initialised array of `len` `T`s in huge-page-backed memory. See
/// the module docs. Elements are never dropped (they are [`Zeroable`]).
pub struct HugeArray<T> {
    ptr: NonNull<T>,
    len: usize,
    /// The whole mapping (for `munmap`); null when `len` is 0.
    map: *mut libc::c_void,
    map_len: usize,
}

// SAFETY: the array owns its memory; sharing it is sharing `[T]`.
unsafe impl<T: Send> Send for HugeArray<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for HugeArray<T> {}

impl<T: Zeroable> HugeArray<T> {
    /// `len` zeroed elements. Running out of memory aborts, as a `Vec`
    /// would.
    pub fn zeroed(len: usize) -> HugeArray<T> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .expect("huge array size overflows");
        if bytes == 0 {
            return HugeArray {
                ptr: NonNull::dangling(),
                len,
                map: std::ptr::null_mut(),
                map_len: 0,
            };
        }
        // Room to align the start to 2 MB when the array is that big.
        let map_len = if bytes >= HUGE { bytes + HUGE } else { bytes };
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
        let start = if bytes >= HUGE {
            (map as usize).next_multiple_of(HUGE)
        } else {
            map as usize
        };
        // Hints (see the module docs); failures leave plain pages.
        // SAFETY: [start, start + bytes) lies inside the mapping made
        // above (start + bytes <= map + map_len).
        unsafe {
            if bytes >= HUGE {
                libc::madvise(
                    start as *mut libc::c_void,
                    bytes
                        .next_multiple_of(HUGE)
                        .min(map as usize + map_len - start),
                    libc::MADV_HUGEPAGE,
                );
            }
            libc::madvise(start as *mut libc::c_void, bytes, libc::MADV_POPULATE_WRITE);
        }
        HugeArray {
            // mmap returns page-aligned memory: aligned for any `T` with
            // alignment up to 4096 (ours: at most 64).
            ptr: NonNull::new(start as *mut T).expect("mmap returned null"),
            len,
            map,
            map_len,
        }
    }
}

impl<T> HugeArray<T> {
    /// Bytes of the elements (not of the alignment slack).
    pub fn bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }
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
            // SAFETY: the mapping made in `zeroed`, unmapped once.
            unsafe { libc::munmap(self.map, self.map_len) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_writable_and_aligned() {
        for len in [0usize, 1, 1000, (4 << 20) / 8 + 3] {
            let mut a: HugeArray<u64> = HugeArray::zeroed(len);
            assert_eq!(a.len(), len);
            assert!(a.iter().all(|&v| v == 0));
            if let Some(last) = a.last_mut() {
                *last = 7;
            }
            assert_eq!(a.iter().sum::<u64>(), if len > 0 { 7 } else { 0 });
            if len * 8 >= HUGE {
                assert_eq!(a.as_ptr() as usize % HUGE, 0);
            }
        }
    }
}
