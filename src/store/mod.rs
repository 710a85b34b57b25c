//! The keyspace and the data structures (floor 6). Pure Rust: no sockets, no RESP, no files.
//! Imports only `numeric` from the bottom floor.
pub mod access;
pub mod bloom;
pub mod chunked_set;
pub mod cms;
pub mod cuckoo;
pub mod db;
pub mod entry;
pub mod hll;
pub mod keytable;
pub mod murmur;
pub mod pages;
pub mod string;
pub mod tdigest;
pub mod topk;
pub mod value;

pub use db::{Db, Store};
pub use string::Str;
pub use value::Value;

/// One step of splitmix64 (Vigna): advances `state` and returns a well-mixed 64-bit value. The
/// store's one generator: Top-K's decay draws, RANDOMKEY's segment and slot draws, test data.
#[inline]
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Hints the CPU to start loading the cache line at `p`.
#[inline]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: PREFETCHT0 is a hint: it never faults, whatever the address, and reads
        // nothing into the program. SSE is baseline on x86-64.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
