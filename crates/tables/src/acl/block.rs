//! One block per classifier: every table's bins and rule records in one
//! contiguous allocation, on 2 MB pages when the classifier is large
//! (docs/acl.md, "One block").
//!
//! Why: a lookup probes one random bin and one random bucket in each of
//! several tables. With every table's arrays allocated apart, each at a
//! few hundred KiB, none reaches the 2 MB a huge page needs; in one block
//! a 32,292-rule classifier (1.5–2.8 MiB) is one or two 2 MB pages, so
//! those probes take no TLB miss. Small classifiers (tests, the per-port
//! lists of a switch: a 621-line list is tens of KiB) stay on the heap:
//! a 2 MB page each would waste memory for no TLB gain, as the VRF FIBs'
//! `FibConfig::huge_pages` threshold does for the FIB.

use crate::huge::{Backing, HugeArray, Zeroable, HUGE_PAGE};
use std::ptr::NonNull;

/// From this size a classifier's block goes on 2 MB pages (rounded up to
/// whole 2 MB pages, committed at compile: the packet path never takes a
/// page fault on it). 1 MiB: past the L2 cache and the reach of the
/// first-level TLB many times over, while a classifier under it wastes
/// at most 1 MiB of its page.
pub const HUGE_MIN_BYTES: usize = 1 << 20;

/// A cache line of the block (its unit of allocation and alignment).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(crate) struct Line([u64; 8]);

const LINE: usize = std::mem::size_of::<Line>();

// SAFETY: a line is 8 integers.
unsafe impl Zeroable for Line {}

/// A read-only array inside a [`Block`]: valid while the block that
/// holds it lives (the classifier owns both and never hands the array
/// out past its own lifetime).
pub(crate) struct Arr<T> {
    ptr: NonNull<T>,
    len: usize,
}

// SAFETY: an `Arr` is a shared view of immutable data owned by the
// classifier (the block is never written after `pack`).
unsafe impl<T: Sync> Send for Arr<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for Arr<T> {}

impl<T> Arr<T> {
    /// An empty array (before [`pack`], and for arrays a table lacks).
    pub(crate) fn empty() -> Arr<T> {
        Arr {
            ptr: NonNull::dangling(),
            len: 0,
        }
    }

    /// The address range of the elements (start, bytes).
    #[cfg(test)]
    pub(crate) fn range(&self) -> (usize, usize) {
        (self.ptr.as_ptr() as usize, std::mem::size_of_val(&**self))
    }
}

impl<T> std::ops::Deref for Arr<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: `len` initialised elements copied in by `pack` (or none
        // at a dangling, aligned pointer), alive as long as the block.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

/// The memory of one classifier's tables.
pub(crate) enum Block {
    /// Below [`HUGE_MIN_BYTES`]: one heap allocation of cache lines.
    Heap(Box<[Line]>),
    /// From [`HUGE_MIN_BYTES`]: whole 2 MB pages, advised and populated;
    /// the bytes the arrays use.
    Huge(HugeArray<Line>, usize),
}

impl Block {
    /// One allocation of `bytes` (zeroed, 64-byte aligned).
    fn new(bytes: usize) -> Block {
        let lines = bytes.div_ceil(LINE);
        if bytes >= HUGE_MIN_BYTES {
            // Whole pages: HugeArray advises only from 2 MB on.
            let lines = lines.max(HUGE_PAGE / LINE);
            Block::Huge(HugeArray::with_backing(lines, Backing::Huge), bytes)
        } else {
            Block::Heap(vec![Line([0; 8]); lines].into_boxed_slice())
        }
    }

    fn base(&mut self) -> *mut u8 {
        match self {
            Block::Heap(b) => b.as_mut_ptr() as *mut u8,
            Block::Huge(h, _) => h.as_mut_ptr() as *mut u8,
        }
    }

    /// Bytes the arrays use (a huge block commits whole 2 MB pages
    /// beyond them: [`Block::advised_range`]).
    pub(crate) fn bytes(&self) -> usize {
        match self {
            Block::Heap(b) => std::mem::size_of_val(&**b),
            Block::Huge(_, used) => *used,
        }
    }

    /// The range advised for 2 MB pages (see
    /// [`HugeArray::advised_range`]), if the block is large.
    pub(crate) fn advised_range(&self) -> Option<(usize, usize)> {
        match self {
            Block::Heap(_) => None,
            Block::Huge(h, _) => h.advised_range(),
        }
    }

    /// The start and length of the block (tests).
    #[cfg(test)]
    pub(crate) fn range(&self) -> (usize, usize) {
        match self {
            Block::Heap(b) => (b.as_ptr() as usize, std::mem::size_of_val(&**b)),
            Block::Huge(h, _) => (h.as_ptr() as usize, h.bytes()),
        }
    }
}

/// Places arrays one after another in a block, each on a cache line.
pub(crate) struct Packer {
    bytes: usize,
}

impl Packer {
    pub(crate) fn new() -> Packer {
        Packer { bytes: 0 }
    }

    /// Reserve room for `v`; returns its offset.
    pub(crate) fn reserve<T>(&mut self, v: &[T]) -> usize {
        const { assert!(std::mem::align_of::<T>() <= LINE) };
        let at = self.bytes;
        self.bytes += std::mem::size_of_val(v).next_multiple_of(LINE);
        at
    }

    /// The block, sized for what was reserved.
    pub(crate) fn block(&self) -> Block {
        Block::new(self.bytes)
    }
}

/// Copy `v` into `block` at `offset` (from [`Packer::reserve`], same
/// `v`), returning the array there.
pub(crate) fn place<T: Copy>(block: &mut Block, offset: usize, v: &[T]) -> Arr<T> {
    if v.is_empty() {
        return Arr::empty();
    }
    let end = offset + std::mem::size_of_val(v);
    assert!(end <= block.bytes(), "array past its block");
    // SAFETY: [offset, end) lies inside the block (checked), is 64-byte
    // aligned (offsets are multiples of a line, the block is
    // line-aligned; T's alignment is at most a line) and no other array
    // was placed over it (the packer hands out disjoint ranges).
    unsafe {
        let p = block.base().add(offset) as *mut T;
        std::ptr::copy_nonoverlapping(v.as_ptr(), p, v.len());
        Arr {
            ptr: NonNull::new_unchecked(p),
            len: v.len(),
        }
    }
}
