//! A bump allocator for policy guests (feature `bump-allocator`, on by
//! default).
//!
//! The host runs every decision in a fresh instance and throws the instance
//! away afterwards, so a guest never needs memory back: allocating is a
//! pointer bump, freeing only returns the newest block. Lifting a fleet
//! allocates several strings per pod, and with a general-purpose allocator
//! that bookkeeping was most of a decision's fuel (see BENCHMARKS.md). The
//! host's memory limit still bounds the whole: growing past it traps, and the
//! host reports a memory failure as for any other guest.
//!
//! A guest that allocates and frees a great deal within one decision should
//! turn the feature off (`default-features = false`) and keep the standard
//! allocator.

use core::alloc::{GlobalAlloc, Layout};
use core::arch::wasm32;
use core::cell::Cell;

const PAGE: usize = 65536;
/// Pages added at a time: fewer calls into the host than one page each.
const GROW_PAGES: usize = 16;

pub struct Bump {
    next: Cell<usize>,
    end: Cell<usize>,
}

// A policy guest is one thread: nothing here is shared between threads.
unsafe impl Sync for Bump {}

impl Bump {
    pub const fn new() -> Self {
        Bump { next: Cell::new(0), end: Cell::new(0) }
    }

    /// Makes room for `size` bytes at `align`; the block's address, or None.
    fn reserve(&self, size: usize, align: usize) -> Option<usize> {
        let start = self.next.get().checked_add(align - 1)? & !(align - 1);
        let end = start.checked_add(size)?;
        if end <= self.end.get() && self.end.get() != 0 {
            self.next.set(end);
            return Some(start);
        }
        // Grow. Something else in the guest (WASI's libc) may have grown
        // memory too, so the new pages start where the host says they do.
        let pages = size.checked_add(align)?.div_ceil(PAGE).max(GROW_PAGES);
        let previous = wasm32::memory_grow(0, pages);
        if previous == usize::MAX {
            return None;
        }
        let base = previous * PAGE;
        let (from, to) = if base == self.end.get() { (self.next.get(), base + pages * PAGE) } else { (base, base + pages * PAGE) };
        let start = from.checked_add(align - 1)? & !(align - 1);
        let end = start.checked_add(size)?;
        if end > to {
            return None;
        }
        self.next.set(end);
        self.end.set(to);
        Some(start)
    }
}

impl Default for Bump {
    fn default() -> Self {
        Bump::new()
    }
}

unsafe impl GlobalAlloc for Bump {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.reserve(layout.size(), layout.align()).map_or(core::ptr::null_mut(), |at| at as *mut u8)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // Only the newest block can be given back.
        if ptr as usize + layout.size() == self.next.get() {
            self.next.set(ptr as usize);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // The newest block grows or shrinks in place when there is room.
        let at = ptr as usize;
        if at + layout.size() == self.next.get() {
            if let Some(end) = at.checked_add(new_size).filter(|end| *end <= self.end.get()) {
                self.next.set(end);
                return ptr;
            }
        }
        if new_size <= layout.size() {
            return ptr;
        }
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return core::ptr::null_mut();
        };
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            unsafe { core::ptr::copy_nonoverlapping(ptr, new, layout.size()) };
        }
        new
    }
}
