//! A counting global allocator: `used_memory` for INFO and the `maxmemory` check.
//!
//! Redis reports the allocator's view of memory; we count the same way, by wrapping the system
//! allocator and keeping a running total of live bytes.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct CountingAlloc;

static USED: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards to `System` with the same arguments, so the allocator contract
// (alignment, size, pointer provenance) is exactly System's; the only addition is an atomic counter
// update that touches no allocated memory.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc::alloc`'s contract.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            USED.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` through this allocator with this layout.
        unsafe { System.dealloc(ptr, layout) };
        USED.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            USED.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged; `ptr`/`layout` come from this allocator.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            USED.fetch_sub(layout.size(), Ordering::Relaxed);
            USED.fetch_add(new_size, Ordering::Relaxed);
        }
        p
    }
}

/// Live heap bytes (0 when the counting allocator is not installed, e.g. in unit tests).
pub fn heap_bytes() -> usize {
    USED.load(Ordering::Relaxed)
}

/// `used_memory` as Redis reports it with RedisBloom loaded: the heap plus what filters have
/// reserved and not yet written (RedisBloom `calloc`s a filter whole, and the allocator counts it
/// from that moment). The `maxmemory` check uses the same figure, so a server with reserved
/// filters refuses deny-oom commands as Redis would.
pub fn used_memory() -> usize {
    heap_bytes().saturating_add(crate::store::pages::reserved_bytes() as usize)
}
