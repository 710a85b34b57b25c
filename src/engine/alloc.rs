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

/// log2 of the grain of [`FLOOR`]: 64 KiB.
const GRAIN_SHIFT: u32 = 16;

/// The sum over the stripes of each stripe's total rounded down to a multiple of 64 KiB. A thread
/// adds to it only when its stripe's total crosses a multiple of the grain, so the `maxmemory`
/// check before every deny-oom command reads one line that changes about once per 64 KiB a core
/// allocates or frees, instead of summing sixteen lines that every allocation on every core
/// writes (with two threads on the shared keyspace lock, the sum's misses cost SET 15–25 % of its
/// throughput in `bench_scaling`). The rounding telescopes: each stripe update adds
/// `floor(new) - floor(old)`, so `FLOOR` is exactly the sum of the floors whatever the
/// interleaving, and the true total lies in `[FLOOR, FLOOR + STRIPES × 64 KiB)`
/// ([`surely_at_most`]).
static FLOOR: AtomicIsize = AtomicIsize::new(0);

/// How far above [`FLOOR`] the true total can be: every stripe just under its next grain.
const FLOOR_SLACK: usize = STRIPES << GRAIN_SHIFT;

#[inline]
fn count(delta: isize) {
    let old = counter().fetch_add(delta, Ordering::Relaxed);
    let new = old.wrapping_add(delta);
    // Arithmetic shifts floor negative totals too (a stripe whose thread frees what another
    // allocated goes below zero).
    let crossed = (new >> GRAIN_SHIFT) - (old >> GRAIN_SHIFT);
    if crossed != 0 {
        FLOOR.fetch_add(crossed << GRAIN_SHIFT, Ordering::Relaxed);
    }
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

/// Whether [`used_memory`] is at most `limit` by [`FLOOR`] alone: true proves it, false says
/// only that it may not be (the caller then reads the exact figure). The common answer before a
/// deny-oom command under a `maxmemory` far above the data costs two loads of lines that rarely
/// change.
#[inline]
pub fn surely_at_most(limit: u64) -> bool {
    let floor = FLOOR.load(Ordering::Relaxed).max(0) as u64;
    floor
        .saturating_add(FLOOR_SLACK as u64)
        .saturating_add(crate::store::pages::reserved_bytes())
        <= limit
}

/// `used_memory` as Redis reports it with RedisBloom loaded: the heap plus what filters have
/// reserved and not yet written (RedisBloom `calloc`s a filter whole, and the allocator counts it
/// from that moment). The `maxmemory` check uses the same figure, so a server with reserved
/// filters refuses deny-oom commands as Redis would.
pub fn used_memory() -> usize {
    heap_bytes().saturating_add(crate::store::pages::reserved_bytes() as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The allocator is not installed in unit tests, so `count` is driven by hand: threads add
    /// and remove amounts across many grains, and afterwards `FLOOR` is exactly the sum of the
    /// stripes' floors, the true total lies within the slack above it, and the cheap comparison
    /// never proves a limit the total is over.
    #[test]
    fn the_floor_is_the_sum_of_the_stripes_floors_and_bounds_the_total() {
        let threads: Vec<_> = (0..6u64)
            .map(|t| {
                std::thread::spawn(move || {
                    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ t;
                    let mut held = Vec::new();
                    for _ in 0..20_000 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        if x.is_multiple_of(3) && !held.is_empty() {
                            let n: isize = held.swap_remove((x as usize / 3) % held.len());
                            count(-n);
                        } else {
                            let n = (x % 200_000) as isize;
                            held.push(n);
                            count(n);
                        }
                    }
                    // Leave some behind, freed by another thread below (a stripe below zero).
                    held
                })
            })
            .collect();
        let left: Vec<isize> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        let half = left.len() / 2;
        let freer = std::thread::spawn({
            let first: Vec<isize> = left[..half].to_vec();
            move || first.into_iter().for_each(|n| count(-n))
        });
        freer.join().unwrap();
        let floors: isize = USED
            .iter()
            .map(|s| (s.0.load(Ordering::Relaxed) >> GRAIN_SHIFT) << GRAIN_SHIFT)
            .sum();
        assert_eq!(FLOOR.load(Ordering::Relaxed), floors);
        let total = heap_bytes();
        assert_eq!(total as isize, left[half..].iter().sum::<isize>());
        let floor = FLOOR.load(Ordering::Relaxed) as usize;
        assert!(
            floor <= total && total < floor + FLOOR_SLACK,
            "{floor} {total}"
        );
        for limit in [
            0,
            1,
            total.saturating_sub(1),
            total,
            total + 1,
            floor + FLOOR_SLACK,
        ]
        .into_iter()
        .chain((0..64).map(|i| total.saturating_sub(FLOOR_SLACK) + i * 40_000))
        {
            if surely_at_most(limit as u64) {
                assert!(total <= limit, "{limit} {total}");
            }
        }
        assert!(surely_at_most((floor + FLOOR_SLACK) as u64));
        assert!(surely_at_most(u64::MAX));
    }
}
