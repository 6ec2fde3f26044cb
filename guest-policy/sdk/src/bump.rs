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

pub struct Bump {
    /// Where the next block may start, and the end of the current region.
    next: Cell<usize>,
    end: Cell<usize>,
}

// A policy guest is one thread (the allocator is only installed for targets
// without shared-memory atomics): nothing here is shared between threads.
unsafe impl Sync for Bump {}

impl Bump {
    pub const fn new() -> Self {
        Bump { next: Cell::new(0), end: Cell::new(0) }
    }

    /// Makes room for `size` bytes at `align`; the block's address, or None.
    fn reserve(&self, size: usize, align: usize) -> Option<usize> {
        loop {
            let start = self.next.get().checked_next_multiple_of(align)?;
            let end = start.checked_add(size)?;
            if self.end.get() != 0 && end <= self.end.get() {
                self.next.set(end);
                return Some(start);
            }
            let missing =
                if self.end.get() == 0 { size.checked_add(align)? } else { end - self.end.get() };
            self.grow(missing)?;
        }
    }

    /// Adds the pages for at least `bytes` more: exactly as many as needed,
    /// so a guest can use memory up to the host's limit. Returns whether they
    /// follow the current region. When they do not (first use, or something
    /// else in the guest, WASI's libc, grew memory meanwhile), they become
    /// the current region.
    fn grow(&self, bytes: usize) -> Option<bool> {
        let pages = bytes.div_ceil(PAGE);
        let previous = wasm32::memory_grow(0, pages);
        if previous == usize::MAX {
            return None;
        }
        let base = previous.checked_mul(PAGE)?;
        let end = base.checked_add(pages.checked_mul(PAGE)?)?;
        let follows = self.end.get() != 0 && base == self.end.get();
        if !follows {
            self.next.set(base);
        }
        self.end.set(end);
        Some(follows)
    }
}

impl Default for Bump {
    fn default() -> Self {
        Bump::new()
    }
}

unsafe impl GlobalAlloc for Bump {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.reserve(layout.size(), layout.align())
            .map_or(core::ptr::null_mut(), |at| at as *mut u8)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // Only the newest block can be given back.
        if ptr as usize + layout.size() == self.next.get() {
            self.next.set(ptr as usize);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let at = ptr as usize;
        if at + layout.size() == self.next.get() {
            // The newest block shrinks or grows in place, growing memory
            // under it when the new pages follow: a `Vec` doubling at the
            // top of the heap does not leave its old copies behind.
            let Some(end) = at.checked_add(new_size) else {
                return core::ptr::null_mut();
            };
            if end <= self.end.get() || self.grow(end - self.end.get()) == Some(true) {
                self.next.set(end);
                return ptr;
            }
        } else if new_size <= layout.size() {
            return ptr;
        }
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return core::ptr::null_mut();
        };
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            unsafe { core::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size)) };
        }
        new
    }
}
