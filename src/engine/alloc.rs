//! A counting global allocator: `used_memory` for INFO and the `maxmemory` check.
//!
//! Redis reports the allocator's view of memory; we count the same way, by wrapping the system
//! allocator and keeping a running total of live bytes.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

pub struct CountingAlloc;

/// The running total is split into stripes, one cache line each, and a thread adds to its own
/// stripe: one shared counter is a line every allocation and free on every core writes, and with
/// the shared keyspace lock (`commands::shared_path`) readers on two cores would bounce it
/// between them at every reply. A block freed on another thread than the one that allocated it
/// leaves one stripe up and another down; only the sum means anything.
const STRIPES: usize = 16;

#[repr(align(128))]
struct Stripe(AtomicIsize);

static USED: [Stripe; STRIPES] = [const { Stripe(AtomicIsize::new(0)) }; STRIPES];

/// The stripe the next thread takes (round robin).
static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's stripe, `usize::MAX` until its first allocation. `const`-initialized and
    /// without a destructor, so reading it never allocates and works while a thread is exiting.
    static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
}

#[inline]
fn counter() -> &'static AtomicIsize {
    let i = STRIPE
        .try_with(|s| {
            let i = s.get();
            if i < STRIPES {
                i
            } else {
                let i = NEXT_STRIPE.fetch_add(1, Ordering::Relaxed) % STRIPES;
                s.set(i);
                i
            }
        })
        .unwrap_or(0);
    &USED[i].0
}

#[inline]
fn count(delta: isize) {
    counter().fetch_add(delta, Ordering::Relaxed);
}

// SAFETY: every method forwards to `System` with the same arguments, so the allocator contract
// (alignment, size, pointer provenance) is exactly System's; the only addition is an atomic counter
// update that touches no allocated memory (the thread-local stripe index is a `const` `Cell`, which
// never allocates).
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc::alloc`'s contract.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` through this allocator with this layout.
        unsafe { System.dealloc(ptr, layout) };
        count(-(layout.size() as isize));
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged; `ptr`/`layout` come from this allocator.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(new_size as isize - layout.size() as isize);
        }
        p
    }
}

/// Live heap bytes (0 when the counting allocator is not installed, e.g. in unit tests).
pub fn heap_bytes() -> usize {
    let sum: isize = USED.iter().map(|s| s.0.load(Ordering::Relaxed)).sum();
    sum.max(0) as usize
}

/// `used_memory` as Redis reports it with RedisBloom loaded: the heap plus what filters have
/// reserved and not yet written (RedisBloom `calloc`s a filter whole, and the allocator counts it
/// from that moment). The `maxmemory` check uses the same figure, so a server with reserved
/// filters refuses deny-oom commands as Redis would.
pub fn used_memory() -> usize {
    heap_bytes().saturating_add(crate::store::pages::reserved_bytes() as usize)
}
