//! Paged byte arrays as their readers see them: one [`Page`] at a time, never the whole array.
//!
//! Bloom links and cuckoo sub-filters keep their bytes in copy-on-write pages, and a page that was
//! never written is not allocated at all (it reads as zeros). Anything that must walk the whole
//! array — the RDB writer behind SAVE, BGSAVE and DUMP, and later the AOF rewrite and the
//! replication full sync — takes an iterator of [`Page`]s, so it can hold one page at a time and
//! write a never-allocated page straight from the shared [`ZEROS`] instead of materialising it.
//! The iterators are `Clone`, so a writer that needs two passes (LZF needs the compressed length
//! before the bytes) walks the pages twice rather than gathering them.

/// A read-only page of zeros, shared by every never-written page.
pub static ZEROS: [u8; ZEROS_LEN] = [0; ZEROS_LEN];
/// Length of [`ZEROS`]; no page is longer, so a zero page is always one slice of it.
pub const ZEROS_LEN: usize = 64 * 1024;

/// One page of a paged byte array, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page<'a> {
    /// `n` bytes that were never written: all zeros, nothing allocated (`n ≤ ZEROS_LEN`).
    Zeros(usize),
    /// Bytes held in an allocated page.
    Bytes(&'a [u8]),
}

impl<'a> Page<'a> {
    /// The page's length in bytes.
    #[allow(clippy::len_without_is_empty)] // a page is never empty
    pub fn len(&self) -> usize {
        match self {
            Page::Zeros(n) => *n,
            Page::Bytes(b) => b.len(),
        }
    }

    /// The page's bytes; a zero page borrows [`ZEROS`].
    pub fn bytes(&self) -> &'a [u8] {
        match *self {
            Page::Zeros(n) => &ZEROS[..n.min(ZEROS_LEN)],
            Page::Bytes(b) => b,
        }
    }

    /// True for a never-written page.
    pub fn is_zeros(&self) -> bool {
        matches!(self, Page::Zeros(_))
    }
}

// ---------------------------------------------------------------------------------------------
// Reserved bytes
// ---------------------------------------------------------------------------------------------

use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes reserved by live paged arrays and not (yet) allocated as pages, process-wide.
static RESERVED: AtomicU64 = AtomicU64::new(0);

/// Bytes that filters have reserved but not allocated. RedisBloom `calloc`s a filter whole at
/// creation, and Redis's `used_memory` counts it from that moment, so the server adds this to the
/// allocator's count for `used_memory` and the `maxmemory` check: a reservation commits memory
/// even while the kernel (or our paging) has not backed it yet.
pub fn reserved_bytes() -> u64 {
    RESERVED.load(Ordering::Relaxed)
}

/// The reserved-but-unallocated part of one paged array, kept in [`reserved_bytes`] while the
/// array lives. A clone counts again (COPY makes a second filter that may fill up); a snapshot's
/// clone is [`Reservation::uncount`]ed, since it only shares pages for the time of a save, as
/// Redis's forked child does outside `used_memory`.
#[derive(Debug)]
pub struct Reservation {
    unbacked: u64,
    counted: bool,
}

impl Reservation {
    /// `bytes` reserved, none allocated.
    pub fn new(bytes: u64) -> Reservation {
        RESERVED.fetch_add(bytes, Ordering::Relaxed);
        Reservation {
            unbacked: bytes,
            counted: true,
        }
    }

    /// `n` of the reserved bytes were just allocated (a page was written for the first time):
    /// from now on the allocator counts them.
    pub fn backed(&mut self, n: u64) {
        let n = n.min(self.unbacked);
        self.unbacked -= n;
        if self.counted {
            RESERVED.fetch_sub(n, Ordering::Relaxed);
        }
    }

    /// Stops counting this reservation (the copy a snapshot holds).
    pub fn uncount(&mut self) {
        if self.counted {
            RESERVED.fetch_sub(self.unbacked, Ordering::Relaxed);
            self.counted = false;
        }
    }

    /// Reserved bytes not allocated.
    pub fn unbacked(&self) -> u64 {
        self.unbacked
    }
}

impl Clone for Reservation {
    fn clone(&self) -> Reservation {
        Reservation::new(self.unbacked)
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.counted {
            RESERVED.fetch_sub(self.unbacked, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Other tests create filters concurrently, so only this reservation's own figures are checked
    // here; tests/memory.rs checks the process-wide total through INFO.
    #[test]
    fn a_reservation_shrinks_as_it_is_backed() {
        let mut a = Reservation::new(1000);
        a.backed(300);
        assert_eq!(a.unbacked(), 700);
        a.backed(5000);
        assert_eq!(a.unbacked(), 0);
        let b = Reservation::new(10).clone();
        assert_eq!(b.unbacked(), 10);
    }
}
