//! Count-min sketches, cell for cell the same as RedisBloom's `CMSk-TYPE`.
//!
//! # The idea
//!
//! A count-min sketch (Cormode and Muthukrishnan, "An improved data stream summary: the count-min
//! sketch and its applications", J. Algorithms 2005) estimates how often each item of a stream
//! occurred, in a fixed `width × depth` grid of counters. Every row has its own hash function; an
//! increment adds to one counter per row, and a query answers the **minimum** of the item's `depth`
//! counters. Collisions only ever add, so the estimate never falls below the true count; with
//! `width = ⌈2/ε⌉` and `depth = ⌈log₀.₅ δ⌉` it exceeds it by more than `ε·N` (N = the total of all
//! increments) with probability at most `δ`.
//!
//! ```text
//!   item x ──MurmurHash2(x, seed r) mod width──▶ column c(x, r)
//!
//!             col 0   col 1   col 2   ...  col w−1
//!   row 0   [   0   |   2   |   7   | ... |   0   ]     cell number r·width + c
//!   row 1   [   9   |   0   |   0   | ... |   0   ]
//!   ...                                                 estimate(x) = min over rows
//! ```
//!
//! # Hashing (cms.md §6)
//!
//! Row `r` uses the classic 32-bit MurmurHash2 with seed `r` (truncated to 32 bits), column
//! `hash mod width`. Worked values: `foo` lands in cells 13, 26, 56, 65, 87 of a 20 × 5 sketch.
//!
//! # Counters (cms.md §8)
//!
//! Counters are u32 and **saturate** at 4294967295 (`cell = min(cell + v, 2³²−1)`, computed without
//! wrap-around for any `0 ≤ v < 2⁶³`). The total `count` is u64 and wraps modulo 2⁶⁴; `CMS.INFO`
//! prints it as a signed integer. An increment's reply is the item's estimate right after its own
//! update; the command layer turns an estimate of exactly 2³²−1 into RedisBloom's element error.
//!
//! # Dimensions from probabilities (cms.md §7)
//!
//! `width = ceil(2 / error)` in double precision; `depth = ceil(log10f(f32(p)) / log10f(0.5))` in
//! **single** precision (the quotient of two `f32` logarithms). Both are converted to u64 the way
//! GCC's x86-64 code does it ([`f64_to_u64_like_c`]), because the two out-of-range outcomes decide
//! between two different error texts.
//!
//! # Merging (cms.md §9)
//!
//! `dest[j] = Σ wᵢ·Sᵢ[j]` for signed 64-bit weights. Every product and every partial sum (in source
//! order) must stay within i64 and each final cell within `[0, 2³²−1]`; the total `Σ wᵢ·countᵢ`
//! (counts read unsigned) must keep its products and partial sums within i64 and end ≥ 0. Any failure
//! and nothing is written: [`CountMinSketch::merge`] builds the result in a new sketch first, so a
//! destination that is also a source reads its old cells.
//!
//! # Storage and snapshots
//!
//! The counters are kept little-endian in the shared paged array ([`PagedBytes`], as cuckoo
//! filters keep their buckets), in pages of [`PAGE_BYTES`] (16 384 counters): a never-written page
//! reads as zeros and is allocated on the first increment into it, and a snapshot clone copies the
//! page table only (a write after it copies one page). The never-written bytes count as reserved
//! memory for `used_memory` and `maxmemory`, as RedisBloom's `calloc` of the whole array would. The
//! bytes of the pages, in order, are exactly the RDB counters string.
//!
//! # RDB (`CMSk-TYPE`, encoding version 0; cms.md §11)
//!
//! ```text
//! UINT width   UINT depth   UINT count   STRING counters (width·depth·4 bytes, u32 LE, row-major)   EOF
//! ```
//!
//! [`CountMinSketch::from_raw_parts`] rejects width or depth 0 and a counters string whose length
//! is not `4·width·depth`, computed **with overflow checks** (RedisBloom computes it modulo 2⁶⁴ and
//! so accepts `width = 2⁶²` with an empty string: CVE-2026-62356). The count is not checked.
//!
//! # Memory safety
//!
//! `4·width·depth` is computed with checked arithmetic and compared with the allocation ceiling
//! (physical memory) before the page table is allocated; the page table itself is reserved
//! fallibly. `CMS.INITBYDIM k 1000000 1000000` is an error, never an abort.

use super::bloom::alloc_ceiling;
use super::murmur::murmur2_32;
use super::pages::{Page, PagedBytes};

/// Bytes per counter page (a multiple of 4).
pub const PAGE_BYTES: usize = 64 * 1024;
// A never-written page is a slice of the shared zeros.
const _: () = assert!(PAGE_BYTES <= super::pages::ZEROS_LEN && PAGE_BYTES.is_multiple_of(4));

/// The saturated counter value; an estimate equal to it is reported as `INCRBY overflow`.
pub const CELL_MAX: u32 = u32::MAX;

/// Why a sketch could not be created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateError {
    /// A dimension below 1 or `width × depth > 2⁶³ − 1`: `CMS: invalid init arguments`.
    Invalid,
    /// The counters cannot be held: `CMS: Insufficient memory to create the key`.
    OutOfMemory,
}

/// Why a merge was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeError {
    /// A source's dimensions differ from the destination's.
    Dimensions,
    /// A product, partial sum or result out of range (§9): `CMS: MERGE overflow`.
    Overflow,
    /// The result could not be allocated.
    OutOfMemory,
}

/// Why an RDB value was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawPartsError {
    ZeroDimension,
    /// `4·width·depth` overflows or exceeds the allocation ceiling.
    TooLarge,
    /// The counters string's length is not `4·width·depth`.
    Length {
        got: u64,
        want: u64,
    },
}

impl std::fmt::Display for RawPartsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RawPartsError::ZeroDimension => f.write_str("width or depth is 0"),
            RawPartsError::TooLarge => f.write_str("counters too large"),
            RawPartsError::Length { got, want } => {
                write!(f, "counters string is {got} bytes, expected {want}")
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Dimensions
// ---------------------------------------------------------------------------------------------

/// C's conversion of a non-negative double to `size_t` as GCC compiles it for x86-64 (cms.md §7):
/// truncation below 2⁶⁴ (values from 2⁶³ up read as negative when taken as signed), and 0 from 2⁶⁴
/// on and for +∞ (the "integer indefinite" value minus 2⁶³).
pub fn f64_to_u64_like_c(v: f64) -> u64 {
    const TWO_64: f64 = 18446744073709551616.0;
    if v >= TWO_64 || v.is_nan() {
        0
    } else {
        // In range (and truncating) for 0 ≤ v < 2⁶⁴; negative inputs cannot occur here.
        v as u64
    }
}

/// `(width, depth)` for `CMS.INITBYPROB error probability` (cms.md §7), before validation.
pub fn dims_for_error(error: f64, probability: f64) -> (u64, u64) {
    let width = f64_to_u64_like_c((2.0 / error).ceil());
    // Single precision throughout, then ceil (in double, which changes nothing for an f32 value).
    let q: f32 = (probability as f32).log10() / 0.5f32.log10();
    let depth = f64_to_u64_like_c((q as f64).ceil());
    (width, depth)
}

/// RedisBloom's dimension check: both ≥ 1 read as signed, and `width ≤ (2⁶³−1) / depth`.
pub fn dims_valid(width: u64, depth: u64) -> bool {
    let (w, d) = (width as i64, depth as i64);
    w >= 1 && d >= 1 && w <= i64::MAX / d
}

/// `4·width·depth` if it fits in u64.
fn counters_len(width: u64, depth: u64) -> Option<u64> {
    width.checked_mul(depth)?.checked_mul(4)
}

// ---------------------------------------------------------------------------------------------
// Counter pages
// ---------------------------------------------------------------------------------------------

/// The counters, little-endian, in the shared copy-on-write page array (see the essay).
#[derive(Debug, Clone, PartialEq)]
struct Cells {
    bytes: PagedBytes,
}

impl Cells {
    /// `len` bytes of zero counters: only the page table is allocated, and the bytes are counted
    /// as reserved (as RedisBloom's `calloc`).
    fn zeroed(len: u64) -> Result<Cells, CreateError> {
        if len > alloc_ceiling() {
            return Err(CreateError::OutOfMemory);
        }
        let bytes = PagedBytes::zeroed(len, 4, PAGE_BYTES).ok_or(CreateError::OutOfMemory)?;
        Ok(Cells { bytes })
    }

    #[inline]
    fn get(&self, cell: u64) -> u32 {
        // Pages hold whole counters, so a counter never straddles two.
        match self.bytes.slice(cell * 4, 4) {
            Some(b) => u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            None => 0,
        }
    }

    /// Saturating add; returns the new value.
    #[inline]
    fn add(&mut self, cell: u64, v: u64) -> u32 {
        let old = self.get(cell);
        if v == 0 {
            return old;
        }
        let new = (old as u64).saturating_add(v).min(CELL_MAX as u64) as u32;
        if new != old {
            self.bytes.write_from(cell * 4, &new.to_le_bytes());
        }
        new
    }

    /// Counters from their RDB bytes; all-zero pages stay unallocated.
    fn from_bytes(data: &[u8]) -> Result<Cells, CreateError> {
        let mut cells = Cells::zeroed(data.len() as u64)?;
        cells.bytes.write_from(0, data);
        Ok(cells)
    }
}

// ---------------------------------------------------------------------------------------------
// The sketch
// ---------------------------------------------------------------------------------------------

/// A count-min sketch (see the module essay).
#[derive(Debug, Clone, PartialEq)]
pub struct CountMinSketch {
    width: u64,
    depth: u64,
    count: u64,
    cells: Cells,
}

impl CountMinSketch {
    /// An all-zero sketch. The caller has applied [`dims_valid`]; this checks the memory.
    pub fn new(width: u64, depth: u64) -> Result<CountMinSketch, CreateError> {
        if width == 0 || depth == 0 {
            return Err(CreateError::Invalid);
        }
        let len = counters_len(width, depth).ok_or(CreateError::OutOfMemory)?;
        Ok(CountMinSketch {
            width,
            depth,
            count: 0,
            cells: Cells::zeroed(len)?,
        })
    }

    /// Rebuilds a sketch from its RDB fields, validating every field against the others first.
    pub fn from_raw_parts(
        width: u64,
        depth: u64,
        count: u64,
        counters: &[u8],
    ) -> Result<CountMinSketch, RawPartsError> {
        if width == 0 || depth == 0 {
            return Err(RawPartsError::ZeroDimension);
        }
        let want = counters_len(width, depth).ok_or(RawPartsError::TooLarge)?;
        if counters.len() as u64 != want {
            return Err(RawPartsError::Length {
                got: counters.len() as u64,
                want,
            });
        }
        let cells = Cells::from_bytes(counters).map_err(|_| RawPartsError::TooLarge)?;
        Ok(CountMinSketch {
            width,
            depth,
            count,
            cells,
        })
    }

    pub fn width(&self) -> u64 {
        self.width
    }

    pub fn depth(&self) -> u64 {
        self.depth
    }

    /// The total of all increments, modulo 2⁶⁴ (or the merged total).
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The counter number of `item` in row `r`.
    #[inline]
    fn cell(&self, item: &[u8], r: u64) -> u64 {
        r * self.width + (murmur2_32(item, r as u32) as u64) % self.width
    }

    /// Adds `v` to the item's counter in every row (saturating) and to the total (wrapping);
    /// returns the item's estimate after the update.
    pub fn incr_by(&mut self, item: &[u8], v: u64) -> u32 {
        let mut min = CELL_MAX;
        for r in 0..self.depth {
            let c = self.cell(item, r);
            min = min.min(self.cells.add(c, v));
        }
        self.count = self.count.wrapping_add(v);
        min
    }

    /// The item's estimate: the minimum of its counters.
    pub fn query(&self, item: &[u8]) -> u32 {
        (0..self.depth)
            .map(|r| self.cells.get(self.cell(item, r)))
            .min()
            .unwrap_or(0)
    }

    /// The counter number `i` (row-major), for tests and diagnostics.
    pub fn cell_value(&self, i: u64) -> u32 {
        self.cells.get(i)
    }

    /// The weighted sum of `sources` (each `(sketch, weight)`), with `width × depth` dimensions and
    /// every check of the module essay; nothing is changed on error. The caller replaces the
    /// destination with the result.
    pub fn merge(
        width: u64,
        depth: u64,
        sources: &[(&CountMinSketch, i64)],
    ) -> Result<CountMinSketch, MergeError> {
        if sources
            .iter()
            .any(|(s, _)| s.width != width || s.depth != depth)
        {
            return Err(MergeError::Dimensions);
        }
        // The total first: cheap, and it fails fast for wrapped counts.
        let mut total: i64 = 0;
        for (s, w) in sources {
            let p =
                i64::try_from(s.count as i128 * *w as i128).map_err(|_| MergeError::Overflow)?;
            total = total.checked_add(p).ok_or(MergeError::Overflow)?;
        }
        if total < 0 {
            return Err(MergeError::Overflow);
        }
        let mut out = CountMinSketch::new(width, depth).map_err(|_| MergeError::OutOfMemory)?;
        let mut sums: Vec<i64> = Vec::new();
        let page_len = out.cells.bytes.page_len();
        for p in 0..out.cells.bytes.page_count() {
            let n = out.cells.bytes.page_size(p) / 4;
            sums.clear();
            sums.resize(n, 0);
            let mut any = false;
            for (s, w) in sources {
                // An unallocated page adds only zeros: no product, no change to a partial sum.
                let Some(page) = s.cells.bytes.allocated_page(p) else {
                    continue;
                };
                if *w == 0 {
                    continue;
                }
                for (sum, b) in sums.iter_mut().zip(page.chunks_exact(4)) {
                    let v = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64;
                    let prod = v.checked_mul(*w).ok_or(MergeError::Overflow)?;
                    *sum = sum.checked_add(prod).ok_or(MergeError::Overflow)?;
                }
                any = true;
            }
            if !any {
                continue;
            }
            let mut bytes: Vec<u8> = Vec::new();
            bytes
                .try_reserve_exact(n * 4)
                .map_err(|_| MergeError::OutOfMemory)?;
            for &sum in &sums {
                let v = u32::try_from(sum).map_err(|_| MergeError::Overflow)?;
                bytes.extend_from_slice(&v.to_le_bytes());
            }
            // All-zero results leave the page unallocated.
            out.cells.bytes.write_from(p as u64 * page_len, &bytes);
        }
        out.count = total as u64;
        Ok(out)
    }

    /// The counters as the RDB string's pages, in order (their lengths add up to `4·width·depth`);
    /// never-written pages as [`Page::Zeros`].
    pub fn counter_pages(&self) -> impl Iterator<Item = Page<'_>> + Clone + '_ {
        self.cells.bytes.pages_ref()
    }

    /// Stops counting the never-written counters as reserved (see `store::pages::Reservation`).
    pub fn uncount_reservations(&self) {
        self.cells.bytes.uncount_reservation();
    }

    /// Length of the RDB counters string.
    pub fn counters_len(&self) -> u64 {
        self.cells.bytes.len()
    }

    /// `MEMORY USAGE`'s type figure in RedisBloom's current line: the C struct and the counters.
    pub fn memory_usage(&self) -> u64 {
        32 + 4 * self.width * self.depth
    }
}

#[cfg(test)]
mod tests;
