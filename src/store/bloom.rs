//! Scalable Bloom filters, bit-identical with RedisBloom.
//!
//! # The idea
//!
//! A Bloom filter answers "have I seen this item?" with no false negatives and a tunable rate of
//! false positives, in a few bits per item. A plain filter has a fixed capacity; past it the false
//! positive rate climbs. RedisBloom therefore stores a *scalable* Bloom filter (Almeida, Baquero,
//! Preguiça, Hutchison, "Scalable Bloom Filters", IPL 2007): a **chain** of plain filters, called
//! **links** here. When the newest link has taken as many items as its capacity, a new link is
//! appended with `growth` times the capacity and half the error rate. The rates form a geometric
//! series, so the whole chain stays under the rate the user asked for:
//!
//! ```text
//!   rate r, growth g        link 0        link 1          link 2            ...
//!   capacity              c             c·g             c·g²
//!   error                 r/2           r/4             r/8           (Σ < r)
//! ```
//!
//! A non-scaling chain (option `NO_SCALING`) has one link built at the full rate `r`; once it is
//! full, adds of new items fail with "non scaling filter is full".
//!
//! # Hashing (bloom.md §7.1, §7.3)
//!
//! Every item is hashed once per command into a pair `(a, b)` with MurmurHash64A:
//! `a = H(item, 0xc6a4a7935bd1e995)`, `b = H(item, a)`. Probe `i` (0 ≤ i < k) of a link is bit
//! `(a + i·b) mod 2^64 mod bits`. Bits are numbered least-significant first inside each byte, so
//! bit `x` is `byte[x >> 3] & (1 << (x & 7))`. The same pair serves every link of the chain, which
//! is why a lookup costs one hash however long the chain is. Chains without the `FORCE64` option
//! (only in dumps from very old versions) use 32-bit MurmurHash2 for the pair instead.
//!
//! # Sizing (bloom.md §7.2)
//!
//! A link for `entries` items at rate `e` gets `bpe = |ln e| / ln²2` bits per entry, truncated to
//! an integer bit count, rounded **up to a multiple of 64 bits** (never to a power of two), and
//! `k = ceil(ln 2 · bpe)` probes. The constants are RedisBloom's truncated decimals
//! (`0.480453013918201` and `0.693147180559945`); a more precise `ln 2` changes `k` for rates that
//! are powers of two (0.25 gives 2.000000000000001 → k = 3), so they must stay as they are. The
//! rounded bit count is the modulus. Old dumps may hold power-of-two links (`n2 > 0`, modulus
//! `2^n2`) or `ENTS_IS_BITS` chains; they load and answer queries, and a scale-out on such a chain
//! follows the old sizing rules (§7.4), but nothing here creates them.
//!
//! Worked example: the default filter (capacity 100, rate 0.01) has one link at 0.005:
//! bpe 11.0277…, 1102 bits, rounded to 1152 bits = 144 bytes, k = 8. `BF.INFO` reports
//! `Size = 32 + 64·nfilters + Σ bytes` = 240: the sizes of RedisBloom's C structs, whatever our own
//! layout costs, so that clients see the same numbers on both servers.
//!
//! # Paging and snapshots
//!
//! A link's bit array is split into pages of [`PAGE_BYTES`] (2 KiB), each an `Option<Arc<[u8]>>`.
//! * `None` is a page that has never had a bit set and reads as zeros. Reserving a 1 GiB filter
//!   costs a page table of 524 288 entries (8 MiB), not 1 GiB; a page is allocated on its first
//!   write, where RedisBloom's `calloc` would fault a fresh 4 KiB page in. The never-written bytes
//!   still count as reserved memory (`store::pages::Reservation`) for `used_memory`/`maxmemory`.
//! * Cloning a filter (what a snapshot does to the keyspace) copies the page table and bumps
//!   reference counts. The first write to a shared page copies that one page (copy-on-write via
//!   `Arc::get_mut`), so a snapshot of a 1 GiB filter under a write load costs 2 KiB per page the
//!   writers touch, not 1 GiB.
//! * An array and its clones also share one lineage token (`Pages::lineage`): while an array
//!   holds its token alone, none of its pages has another owner, and the add path writes them in
//!   place without reading each page's count (one header per probe otherwise).
//! * The last page of a link is exactly as long as the bytes left, so a 144-byte link costs 144
//!   bytes plus a 16-byte page-table entry and the `Arc` counts.
//!
//! ## Why 2 KiB (issue 10, measured on the shared 2-core build machine, so ±30 %)
//!
//! Adds to a large sparse filter touch one page per bit set: a 1.38 GB link (capacity 10^9 at
//! 0.01, k = 8) after 3 000 adds has 24 000 bits on ~23 000 distinct pages. The page size trades
//! that against the page table (16 bytes per page, 0.8 % of the filter at 2 KiB) that every probe
//! reads and every snapshot copies:
//!
//! ```text
//!  page     RSS, 1.38 GB link + 3000 adds    dense 120 MB link (benches/bloom.rs "large")
//!           (tests/memory.rs, VmRSS)         exists_absent   add_new   snapshot clone
//!  64 KiB   917 MB (measured)                320 ns          1.20 µs   57 µs
//!   4 KiB   ~106 MB (23 170 pages × 4128 B + 5.4 MB table; computed)
//!   2 KiB    61 MB (measured)                814 ns          1.60 µs   2.9 ms
//! ```
//!
//! 4 KiB (the kernel's page, what RedisBloom pays) misses the 100 MB target because every
//! touched page is a whole page either way; 2 KiB meets it with room. The price is on large
//! *dense* filters: the page table (940 KB for 120 MB, 10.8 MB for 1.38 GB) no longer fits in
//! L2, so a probe of an out-of-cache filter pays a second miss (the measured exists is ~2.5× the
//! 64 KiB figure on this noisy machine), and a BGSAVE snapshot copies the table and bumps one
//! reference count per written page under the keyspace lock (2.9 ms per 120 MB dense, so ~33 ms
//! for a dense 1.38 GB filter, against ~1 ms with 64 KiB pages). Small filters (the common case)
//! are one page either way and see no difference. Run `cargo bench --bench bloom -- large`.
//!
//! A probe costs one extra indexed load (the page table) over a flat array.
//!
//! # Memory safety
//!
//! Every size that comes from a client or a dump is checked before anything is allocated for it:
//! a link larger than the machine's physical memory (or a chain whose links add up to more) is
//! refused with [`CreateError::OutOfMemory`], and page tables are allocated with
//! `try_reserve_exact`. RedisBloom aborts the process on such input; we answer with an error.
//!
//! # Dumps
//!
//! `BF.SCANDUMP` sends a header (chain fields, then 53 bytes per link, packed little-endian; layout
//! in [`ScalingBloom::header`]) followed by the concatenation of all links' bit arrays, link 0 first.
//! Iterator `it ≥ 1` addresses byte `it − 1` of that concatenation; a chunk never crosses a link
//! boundary and is at most 16 MiB. `BF.LOADCHUNK` validates a header completely before it
//! allocates the (all-zero) links, then copies chunks in place.
//!
//! # RDB (`MBbloom--`, encoding version 4; rdb.md §4.3)
//!
//! Writing, field by field: UINT [`ScalingBloom::size`], UINT [`ScalingBloom::nfilters`], UINT
//! [`ScalingBloom::options`], UINT [`ScalingBloom::growth`]; then for each of
//! [`ScalingBloom::links`] (oldest first): UINT [`Link::entries`], DOUBLE [`Link::error`], UINT
//! [`Link::hashes`], DOUBLE [`Link::bpe`], UINT [`Link::bits`], UINT [`Link::n2`], STRING of
//! [`Link::bytes`] bytes (the concatenation of [`Link::bit_slices`]), UINT [`Link::size`]; then EOF.
//! Reading: decode the same fields into [`RawLink`]s (the STRING becomes `data`; refuse one
//! shorter than `ceil(bits/8)` before building) and call [`ScalingBloom::from_raw_parts`], which
//! applies RedisBloom's load checks and ours (NaN error, absurd `k`, memory ceiling).

use std::mem::MaybeUninit;
use std::sync::atomic::{fence, Ordering};
use std::sync::{Arc, OnceLock};

use smallvec::SmallVec;

use super::murmur::bloom_hash;
use super::pages::{zeroed_box, Page, Reservation, FLAT_MAX, ZEROS};

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

/// Chain option: links are not rounded up to a power of two (every filter created since RedisBloom 2.0).
pub const OPT_NOROUND: u32 = 1;
/// Chain option: very old filters whose `entries` was a bit count. Only affects scale-out sizing.
pub const OPT_ENTS_IS_BITS: u32 = 2;
/// Chain option: 64-bit hashing (MurmurHash64A). Without it the pair is 32-bit MurmurHash2.
pub const OPT_FORCE64: u32 = 4;
/// Chain option: never append links; adds fail once the only link is full.
pub const OPT_NO_SCALING: u32 = 8;
/// All option bits a valid dump may carry.
pub const OPT_ALL: u32 = OPT_NOROUND | OPT_ENTS_IS_BITS | OPT_FORCE64 | OPT_NO_SCALING;

/// Each new link's error rate is the previous one's times this; link 0 of a scaling chain too.
pub const TIGHTENING_RATIO: f64 = 0.5;
/// `ln(2)^2` truncated exactly as RedisBloom writes it; part of the format (see the essay).
const LN2_SQUARED: f64 = 0.480453013918201;
/// `ln(2)` truncated exactly as RedisBloom writes it; decides `k`. Not `std::f64::consts::LN_2`:
/// the extra digits change `k` for error rates that are powers of two.
#[allow(clippy::approx_constant)]
const LN2: f64 = 0.693147180559945;

/// The largest `k` we accept from a dump. The smallest positive error rate gives bpe ≈ 1549.5 and
/// so k = 1075; anything above can only be crafted and would cost seconds per item.
pub const MAX_HASHES: u32 = 1100;

/// Size of one page of a link's bit array.
pub const PAGE_BYTES: usize = 2 * 1024;
const PAGE_SHIFT: u32 = 11;
const _: () = assert!(PAGE_BYTES == 1 << PAGE_SHIFT && PAGE_BYTES <= super::pages::ZEROS_LEN);

/// Chains up to this size (about half a Zen 2 / Skylake-SP L2) are not prefetched (see
/// [`ScalingBloom::prefetch`]).
pub(super) const PREFETCH_MIN_BYTES: u64 = 256 * 1024;

/// Links with at most this many probes have them computed once per item, for the prefetch and
/// the write alike ([`NewestProbes`]); `k` is 7 at the default 1% and grows by one per link of a
/// scaling chain, so this covers error rates down to about 10⁻⁷ (a longer `k` takes the old path:
/// probes computed for the prefetch and again for the write).
const PROBE_CACHE: usize = 24;

/// Fixed part of a SCANDUMP header: chain size (8), nfilters (4), options (4), growth (4).
pub const HEADER_FIXED_LEN: usize = 20;
/// Per-link part of a SCANDUMP header.
pub const HEADER_LINK_LEN: usize = 53;
/// SCANDUMP never sends more than this many bytes in one chunk.
pub const MAX_SCANDUMP_CHUNK: u64 = 16 * 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// Why a link or chain could not be created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateError {
    /// The bit array is larger than this machine can hold, or its allocation failed.
    /// BF.RESERVE: `ERR Insufficient memory to create filter`.
    OutOfMemory,
    /// The parameters cannot describe a link (entries 0, error outside (0,1), sizes overflowing).
    /// BF.RESERVE: `ERR could not create filter`.
    Invalid,
}

/// Why an add did not happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddError {
    /// The chain is non-scaling and its link is at capacity (`ERR non scaling filter is full`).
    Full,
    /// A new link (or a page of one) could not be built (`ERR problem inserting into filter`).
    Failed,
}

/// Why BF.LOADCHUNK refused its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkError {
    /// A header that fails validation, or an iterator inconsistent with the data length
    /// (`ERR received bad data`).
    BadData,
    /// The chunk's start is not inside any link (`ERR invalid offset - no link found`).
    NoLink,
    /// The chunk runs past the end of its link (`ERR invalid chunk - Too big for current filter`).
    TooBig,
}

/// Why raw parts (from an RDB value) do not make a valid chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawPartsError {
    /// No links at all.
    NoLinks,
    /// A link fails the integrity rules (error, n2, bits, hashes) of bloom.md §10.3.
    BadLink,
    /// The bit arrays are too large for this machine.
    OutOfMemory,
}

// ---------------------------------------------------------------------------------------------
// Allocation ceiling
// ---------------------------------------------------------------------------------------------

/// The most bytes one chain's bit arrays may take: the machine's physical memory (`MemTotal`),
/// or 64 GiB when that cannot be read. Beyond it an allocation could only end in the OOM killer.
pub fn alloc_ceiling() -> u64 {
    static CEILING: OnceLock<u64> = OnceLock::new();
    *CEILING.get_or_init(|| {
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find(|l| l.starts_with("MemTotal:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|kb| kb.parse::<u64>().ok())
            })
            .map(|kb| kb.saturating_mul(1024))
            .unwrap_or(64 << 30)
    })
}

// ---------------------------------------------------------------------------------------------
// Paged bit array
// ---------------------------------------------------------------------------------------------

/// Zeros for reading pages that were never written.
static ZERO_PAGE: &[u8] = &ZEROS;

/// A bit array of `len` bytes: flat (one allocation, made at creation) up to [`FLAT_MAX`] bytes,
/// else in copy-on-write pages (see "Paging and snapshots" in the essay).
#[derive(Clone)]
enum PagedBits {
    /// The whole array, allocated; a clone copies it.
    Flat(Box<[u8]>),
    /// Larger arrays: page table, pages, reservation (behind one pointer: rare, and it keeps the
    /// link small).
    Paged(Box<Pages>),
}

#[derive(Clone)]
struct Pages {
    /// Page `p` holds bytes `p·PAGE_BYTES ..`; `None` reads as zeros.
    pages: Vec<Option<Arc<[u8]>>>,
    len: u64,
    /// The bytes of never-written pages, counted as reserved memory (see `store::pages`).
    reserved: Reservation,
    /// One token shared by this array and every array cloned from it, or from those: a page
    /// `Arc` only ever reaches another array through such a clone (a new page is allocated
    /// unshared, and [`PagedBits::pages`] lends pages, never clones them). So while this array
    /// holds the only reference to its token, none of its pages has another owner, and one load
    /// answers for every page what [`Arc::strong_count`] would page by page: the add path
    /// ([`Pages::prefetch_locate`]) read each probe's page header for it, an extra cache line per
    /// probe (issue 15: ~40 instructions and 0.03 µs an item of a pipelined BF.MADD on a 12 MB
    /// filter). Declared after `pages`: a clone drops its pages before its token (fields drop in
    /// order), so a count of 1 read with an `Acquire` fence orders every use of the clone's pages
    /// before our writes, as the page's own count did.
    lineage: Arc<()>,
}

/// Summarises instead of printing megabytes of bits.
impl std::fmt::Debug for PagedBits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (pages, allocated) = match self {
            PagedBits::Flat(_) => (1, 1),
            PagedBits::Paged(p) => (p.pages.len(), p.pages.iter().flatten().count()),
        };
        f.debug_struct("PagedBits")
            .field("len", &self.len())
            .field("pages", &pages)
            .field("allocated", &allocated)
            .finish()
    }
}

/// Equal contents, whether a page is allocated or not.
impl PartialEq for PagedBits {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.slices().zip(other.slices()).all(|(a, b)| a == b)
    }
}

impl PagedBits {
    /// An all-zero array; allocates only the page table (a flat array: the whole array).
    fn zeroed(len: u64) -> Result<Self, CreateError> {
        if len > alloc_ceiling() {
            return Err(CreateError::OutOfMemory);
        }
        if len <= FLAT_MAX {
            return zeroed_box(len as usize)
                .map(PagedBits::Flat)
                .ok_or(CreateError::OutOfMemory);
        }
        let npages = usize::try_from(len.div_ceil(PAGE_BYTES as u64))
            .map_err(|_| CreateError::OutOfMemory)?;
        let mut pages = Vec::new();
        pages
            .try_reserve_exact(npages)
            .map_err(|_| CreateError::OutOfMemory)?;
        pages.resize(npages, None);
        Ok(PagedBits::Paged(Box::new(Pages {
            pages,
            len,
            reserved: Reservation::new(len),
            lineage: Arc::new(()),
        })))
    }

    /// Length in bytes.
    #[inline]
    fn len(&self) -> u64 {
        match self {
            PagedBits::Flat(b) => b.len() as u64,
            PagedBits::Paged(p) => p.len,
        }
    }

    #[inline]
    fn get_bit(&self, x: u64) -> bool {
        let byte = x >> 3;
        match self {
            PagedBits::Flat(b) => b
                .get(byte as usize)
                .is_some_and(|b| b & (1 << (x & 7)) != 0),
            PagedBits::Paged(pg) => {
                let p = (byte >> PAGE_SHIFT) as usize;
                let off = (byte as usize) & (PAGE_BYTES - 1);
                match pg.pages.get(p) {
                    Some(Some(page)) => page.get(off).is_some_and(|b| b & (1 << (x & 7)) != 0),
                    _ => false,
                }
            }
        }
    }

    /// Hints the CPU to fetch the byte holding bit `x`. Probes land on random cache lines of
    /// arrays far larger than L2, so issuing the first probes of every link at once overlaps their
    /// cache misses instead of paying them one after another.
    #[inline]
    fn prefetch(&self, x: u64) {
        let byte = x >> 3;
        match self {
            PagedBits::Flat(b) => prefetch_byte(b.get(byte as usize)),
            PagedBits::Paged(pg) => pg.prefetch_byte(byte),
        }
    }

    /// [`PagedBits::prefetch`] of each of `bits`, the array's form matched once.
    #[inline]
    fn prefetch_all(&self, bits: &[u64]) {
        match self {
            PagedBits::Flat(b) => {
                for &x in bits {
                    prefetch_byte(b.get((x >> 3) as usize));
                }
            }
            PagedBits::Paged(pg) => {
                for &x in bits {
                    pg.prefetch_byte(x >> 3);
                }
            }
        }
    }

    /// Sets bit `x`; answers whether it was clear.
    #[inline]
    fn set_bit(&mut self, x: u64) -> Result<bool, AddError> {
        let byte = x >> 3;
        let mask = 1u8 << (x & 7);
        match self {
            PagedBits::Flat(b) => {
                let b = b.get_mut(byte as usize).ok_or(AddError::Failed)?;
                let was_clear = *b & mask == 0;
                *b |= mask;
                Ok(was_clear)
            }
            PagedBits::Paged(pg) => pg.set_bits(byte, mask),
        }
    }

    /// Copies bytes `offset .. offset + len` (in range) into `out`.
    fn read_into(&self, mut offset: u64, len: u64, out: &mut Vec<u8>) {
        let end = (offset + len).min(self.len());
        let pg = match self {
            PagedBits::Flat(b) => {
                out.extend_from_slice(&b[offset.min(end) as usize..end as usize]);
                return;
            }
            PagedBits::Paged(pg) => pg,
        };
        while offset < end {
            let p = (offset >> PAGE_SHIFT) as usize;
            let off = (offset as usize) & (PAGE_BYTES - 1);
            let n = ((pg.page_len(p) - off) as u64).min(end - offset) as usize;
            match pg.pages.get(p) {
                Some(Some(page)) => out.extend_from_slice(&page[off..off + n]),
                _ => out.extend_from_slice(&ZERO_PAGE[..n]),
            }
            offset += n as u64;
        }
    }

    /// Overwrites bytes from `offset` with `data` (the caller checked the range). All-zero runs
    /// landing on never-written pages stay unallocated.
    fn write(&mut self, mut offset: u64, mut data: &[u8]) -> Result<(), AddError> {
        let pg = match self {
            PagedBits::Flat(b) => {
                let start = offset as usize;
                b.get_mut(start..start + data.len())
                    .ok_or(AddError::Failed)?
                    .copy_from_slice(data);
                return Ok(());
            }
            PagedBits::Paged(pg) => pg,
        };
        while !data.is_empty() {
            let p = (offset >> PAGE_SHIFT) as usize;
            let off = (offset as usize) & (PAGE_BYTES - 1);
            let n = (pg.page_len(p) - off).min(data.len());
            let (head, rest) = data.split_at(n);
            let untouched = matches!(pg.pages.get(p), Some(None));
            if untouched && off == 0 && n == pg.page_len(p) {
                // A whole never-written page (what a load writes): allocated straight from the
                // data, not from the zeros and then overwritten.
                if head.iter().any(|&b| b != 0) {
                    pg.pages[p] = Some(Arc::from(head));
                    pg.reserved.backed(n as u64);
                }
            } else if !(untouched && head.iter().all(|&b| b == 0)) {
                let page = pg.page_mut(p)?;
                page[off..off + n].copy_from_slice(head);
            }
            data = rest;
            offset += n as u64;
        }
        Ok(())
    }

    /// The array as consecutive slices (never-written pages as zeros).
    fn slices(&self) -> impl Iterator<Item = &[u8]> + Clone + '_ {
        self.pages().map(|p| p.bytes())
    }

    /// The array page by page, never-written pages as [`Page::Zeros`], for streaming writers.
    fn pages(&self) -> impl Iterator<Item = Page<'_>> + Clone + '_ {
        let (flat, pg): (Option<&[u8]>, Option<&Pages>) = match self {
            PagedBits::Flat(b) => ((!b.is_empty()).then_some(&b[..]), None),
            PagedBits::Paged(pg) => (None, Some(&**pg)),
        };
        let table: &[Option<Arc<[u8]>>] = pg.map_or(&[], |pg| &pg.pages[..]);
        flat.into_iter()
            .map(Page::Bytes)
            .chain(table.iter().enumerate().map(move |(p, page)| match page {
                Some(page) => Page::Bytes(&page[..]),
                None => Page::Zeros(pg.map_or(0, |pg| pg.page_len(p))),
            }))
    }

    /// Bytes actually allocated for pages (for INFO memory figures).
    fn resident_bytes(&self) -> u64 {
        match self {
            PagedBits::Flat(b) => b.len() as u64,
            PagedBits::Paged(pg) => {
                pg.pages
                    .iter()
                    .flatten()
                    .map(|p| p.len() as u64)
                    .sum::<u64>()
                    + (pg.pages.capacity() * std::mem::size_of::<Option<Arc<[u8]>>>()) as u64
                    + std::mem::size_of::<Pages>() as u64
            }
        }
    }

    /// Stops counting never-written bytes as reserved (the copy a snapshot holds).
    fn uncount_reservation(&self) {
        if let PagedBits::Paged(pg) = self {
            pg.reserved.uncount();
        }
    }
}

/// Hints the CPU to fetch `b` (see [`PagedBits::prefetch`]); nothing for `None`.
#[inline]
fn prefetch_byte(b: Option<&u8>) {
    if let Some(b) = b {
        prefetch_ptr(b as *const u8);
    }
}

#[inline]
fn prefetch_ptr(p: *const u8) {
    super::prefetch(p);
}

impl Pages {
    /// Prefetches byte `byte` if its page is allocated (a never-written page reads as zeros).
    #[inline]
    fn prefetch_byte(&self, byte: u64) {
        let p = (byte >> PAGE_SHIFT) as usize;
        let off = (byte as usize) & (PAGE_BYTES - 1);
        if let Some(Some(page)) = self.pages.get(p) {
            prefetch_byte(page.get(off));
        }
    }

    /// Prefetches the bytes holding `bits` and writes where each is to `out`: true when every
    /// one lies in an allocated page this array alone holds, so that the write can go straight
    /// to them ([`NewestProbes::bytes`]); false (some of `out` unwritten) when one is in a zero
    /// page or a page a snapshot shares.
    #[inline]
    fn prefetch_locate(&self, bits: &[u64], out: &mut [MaybeUninit<*mut u8>]) -> bool {
        // No other array holds any of our pages ([`Pages::lineage`]): no page header to read.
        let alone = Arc::strong_count(&self.lineage) == 1;
        let mut direct = true;
        for (&x, slot) in bits.iter().zip(out.iter_mut()) {
            let byte = x >> 3;
            let p = (byte >> PAGE_SHIFT) as usize;
            let off = (byte as usize) & (PAGE_BYTES - 1);
            match self.pages.get(p) {
                Some(Some(page)) if off < page.len() => {
                    // In bounds of the page's allocation (`off < len`).
                    let at = (Arc::as_ptr(page) as *mut u8).wrapping_add(off);
                    prefetch_ptr(at);
                    direct &= alone || Arc::strong_count(page) == 1;
                    slot.write(at);
                }
                _ => direct = false,
            }
        }
        direct
    }

    /// Length of page `p` (the last page is short).
    fn page_len(&self, p: usize) -> usize {
        let start = (p as u64) << PAGE_SHIFT;
        (self.len - start).min(PAGE_BYTES as u64) as usize
    }

    /// Sets the bits of `mask` in byte `byte`; answers whether any was clear.
    #[inline]
    fn set_bits(&mut self, byte: u64, mask: u8) -> Result<bool, AddError> {
        let p = (byte >> PAGE_SHIFT) as usize;
        let off = (byte as usize) & (PAGE_BYTES - 1);
        // Fast path: the page is ours alone and the bit may already be set.
        if let Some(Some(page)) = self.pages.get_mut(p) {
            if off < page.len() && Arc::strong_count(page) == 1 {
                // Pairs with the Release decrement of a snapshot's clone that was just dropped,
                // so its reads of this page happen before our write (what `Arc::get_mut` does,
                // minus its locked compare-exchange: one per bit set was a fifth of BF.MADD, and
                // a locked instruction between probes kept their cache misses from overlapping).
                fence(Ordering::Acquire);
                // SAFETY: `&mut self` gives us the only access to this `Arc`; its strong count is
                // 1, so no other `Arc` to the page exists anywhere, and none can appear while we
                // hold `&mut self` (a clone needs an `Arc` to clone from). Page `Arc`s are never
                // downgraded, so there are no `Weak`s either. The page is therefore not aliased
                // and writing one byte of it, in bounds (`off < len`), is sound.
                let b = unsafe { &mut *(Arc::as_ptr(page) as *mut u8).add(off) };
                let was_clear = *b & mask != mask;
                *b |= mask;
                return Ok(was_clear);
            }
            if page.get(off).is_some_and(|b| b & mask == mask) {
                return Ok(false);
            }
        }
        let page = self.page_mut(p)?;
        let b = page.get_mut(off).ok_or(AddError::Failed)?;
        let was_clear = *b & mask != mask;
        *b |= mask;
        Ok(was_clear)
    }

    /// Page `p` ready for writing: allocated if it was a zero page, copied if a snapshot shares it.
    fn page_mut(&mut self, p: usize) -> Result<&mut [u8], AddError> {
        let len = self.page_len(p);
        let slot = self.pages.get_mut(p).ok_or(AddError::Failed)?;
        match slot {
            None => {
                // Straight into the Arc's allocation from the shared zeros: one allocation and
                // one copy (a zeroed Vec turned into an Arc was two allocations, a fill, a copy
                // and a free: ~1,200 instructions per page, 400 per BF.MADD filling a new filter).
                *slot = Some(Arc::from(&ZERO_PAGE[..len]));
                self.reserved.backed(len as u64);
            }
            Some(page) => {
                if Arc::get_mut(page).is_none() {
                    let copy: Arc<[u8]> = Arc::from(&page[..]);
                    *page = copy;
                }
            }
        }
        match slot {
            Some(page) => Arc::get_mut(page).ok_or(AddError::Failed),
            None => Err(AddError::Failed),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Links
// ---------------------------------------------------------------------------------------------

/// Probe bits [`Link::holds`] reads before it tests any of them.
const CHECK_HEAD: usize = 3;

/// Links up to this size are checked head first ([`Link::holds`]).
const CHECK_HEAD_MAX_BYTES: u64 = 2 << 20;

/// One plain Bloom filter of a chain. Field meanings are bloom.md §1's.
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    entries: u64,
    error: f64,
    bpe: f64,
    hashes: u32,
    n2: u8,
    size: u64,
    /// Probe modulus: `2^n2` for old power-of-two links, else `bits`.
    modulus: Modulus,
    data: PagedBits,
}

/// The shape of a link as the sizing function computes it (§7.2, §7.4).
struct LinkShape {
    entries: u64,
    bpe: f64,
    hashes: u32,
    bits: u64,
    bytes: u64,
    n2: u8,
}

/// `ceil(ln 2 · bpe)`: the `k` a link with this `bpe` must have.
fn hashes_for_bpe(bpe: f64) -> f64 {
    (LN2 * bpe).ceil()
}

/// RedisBloom's `bloom_init` sizing, for a chain with `options`.
fn size_link(entries: u64, error: f64, options: u32) -> Result<LinkShape, CreateError> {
    if entries < 1 || !(error > 0.0 && error < 1.0) {
        return Err(CreateError::Invalid);
    }
    let bpe = (-(error.ln() / LN2_SQUARED)).abs();
    const TWO_64: f64 = 18446744073709551616.0;
    let (entries, bits, n2) = if options & OPT_ENTS_IS_BITS != 0 {
        // `entries` is log2 of the bit count. RedisBloom admits 64 (an undefined shift); we don't.
        if entries > 63 {
            return Err(CreateError::Invalid);
        }
        let bits = 1u64 << entries;
        (((bits as f64) / bpe) as u64, bits, entries as u8)
    } else {
        let product = entries as f64 * bpe;
        if !product.is_finite() || product >= TWO_64 {
            return Err(CreateError::Invalid);
        }
        if options & OPT_NOROUND != 0 {
            let bits = (product as u64).max(1);
            (entries, bits, 0u8)
        } else {
            let lex = product.log2().floor();
            if !(0.0..63.0).contains(&lex) {
                return Err(CreateError::Invalid);
            }
            let n2 = lex as u32 + 1;
            let bits = 1u64 << n2;
            let extra = ((bits as f64 - product) / bpe) as u64;
            (entries.saturating_add(extra), bits, n2 as u8)
        }
    };
    let bytes = bits.div_ceil(64) * 8;
    let stored_bits = bytes.checked_mul(8).ok_or(CreateError::Invalid)?;
    let hashes = hashes_for_bpe(bpe);
    if !(hashes >= 0.0 && hashes <= MAX_HASHES as f64) {
        return Err(CreateError::Invalid);
    }
    Ok(LinkShape {
        entries,
        bpe,
        hashes: hashes as u32,
        bits: stored_bits,
        bytes,
        n2,
    })
}

impl Link {
    /// A new, empty link for `entries` items at `error`, sized for a chain with `options`.
    fn new(entries: u64, error: f64, options: u32) -> Result<Link, CreateError> {
        let shape = size_link(entries, error, options)?;
        let data = PagedBits::zeroed(shape.bytes)?;
        Ok(Link::from_shape(shape, error, 0, data))
    }

    fn from_shape(shape: LinkShape, error: f64, size: u64, data: PagedBits) -> Link {
        Link {
            entries: shape.entries,
            error,
            bpe: shape.bpe,
            hashes: shape.hashes,
            n2: shape.n2,
            size,
            modulus: Modulus::new(shape.bits, shape.n2),
            data,
        }
    }

    /// Prefetches the first `n` probes of `(a, b)`.
    #[inline]
    fn prefetch(&self, a: u64, b: u64, n: u32) {
        let mut probes = self.modulus.probes(a, b);
        for _ in 0..n.min(self.hashes) {
            self.data.prefetch(probes.next_bit());
        }
    }

    /// Writes the `k` probe bits of `(a, b)` to `out`, when they fit; false (nothing written)
    /// when `k` exceeds [`PROBE_CACHE`].
    #[inline]
    fn probe_bits(&self, a: u64, b: u64, out: &mut [MaybeUninit<u64>; PROBE_CACHE]) -> bool {
        let k = self.hashes as usize;
        if k > PROBE_CACHE {
            return false;
        }
        let mut probes = self.modulus.probes(a, b);
        for slot in &mut out[..k] {
            slot.write(probes.next_bit());
        }
        true
    }

    /// [`Link::check`] of probe bits computed by [`Link::probe_bits`].
    #[inline]
    fn check_bits(&self, bits: &[u64]) -> bool {
        bits.iter().all(|&x| self.data.get_bit(x))
    }

    /// [`Link::set`] of probe bits computed by [`Link::probe_bits`]. The array's form is matched
    /// once for all `k` bits, not per bit.
    #[inline]
    fn set_bits(&mut self, bits: &[u64]) -> Result<bool, AddError> {
        let mut any_clear = false;
        match &mut self.data {
            PagedBits::Paged(pg) => {
                for &x in bits {
                    any_clear |= pg.set_bits(x >> 3, 1u8 << (x & 7))?;
                }
            }
            flat => {
                for &x in bits {
                    any_clear |= flat.set_bit(x)?;
                }
            }
        }
        Ok(any_clear)
    }

    /// Whether all `k` probe bits of `(a, b)` are set. Stops at the first clear bit.
    #[inline]
    fn check(&self, a: u64, b: u64) -> bool {
        self.rest_set(&mut self.modulus.probes(a, b), 0)
    }

    /// Whether probes `from..k` of `probes` (positioned at probe `from`) are all set, stopping
    /// at the first clear one: [`Link::check`] from probe 0, [`Link::holds`] after its head.
    #[inline]
    fn rest_set(&self, probes: &mut Probes, from: u32) -> bool {
        (from..self.hashes).all(|_| self.data.get_bit(probes.next_bit()))
    }

    /// Whether all `k` probe bits of `(a, b)` are set, for a lookup: a link up to
    /// [`CHECK_HEAD_MAX_BYTES`] reads its first [`CHECK_HEAD`] bits without a branch between them
    /// and tests them once, and the rest, read only when those are all set, stop at the first
    /// clear one; a larger link is [`Link::check`]ed. See [`ScalingBloom::any_link_holds`] for
    /// why. The head is a fixed-size array and a flat link's bytes are matched once, so its
    /// reads are straight-line code (issue 15, callgrind, -P 1 BF.EXISTS on 12 links: a head of
    /// four read in a loop over `get_bit` cost ~60 instructions a link more than early exit, as
    /// straight-line code ~50, a head of three ~33).
    #[inline]
    fn holds(&self, a: u64, b: u64) -> bool {
        let flat = match &self.data {
            PagedBits::Flat(bytes) => Some(bytes),
            PagedBits::Paged(pg) if pg.len <= CHECK_HEAD_MAX_BYTES => None,
            PagedBits::Paged(_) => return self.check(a, b),
        };
        if self.hashes < CHECK_HEAD as u32 {
            return self.check(a, b);
        }
        let mut probes = self.modulus.probes(a, b);
        let head: [u64; CHECK_HEAD] = std::array::from_fn(|_| probes.next_bit());
        let all = match flat {
            Some(bytes) => {
                // Probe bits are below `m ≤ bits`, so in bounds; `get` turns that unproven fact
                // into a read of 0 rather than a panic path.
                let bit = |x: u64| bytes.get((x >> 3) as usize).map_or(0, |&v| v >> (x & 7));
                head.iter().fold(1, |all, &x| all & bit(x)) & 1 != 0
            }
            None => head.iter().fold(true, |all, &x| all & self.data.get_bit(x)),
        };
        all && self.rest_set(&mut probes, CHECK_HEAD as u32)
    }

    /// Sets all `k` probe bits; answers whether any was clear (the item is new to this link).
    #[inline]
    fn set(&mut self, a: u64, b: u64) -> Result<bool, AddError> {
        let mut probes = self.modulus.probes(a, b);
        let mut any_clear = false;
        for _ in 0..self.hashes {
            any_clear |= self.data.set_bit(probes.next_bit())?;
        }
        Ok(any_clear)
    }

    /// Capacity: items this link takes before the chain scales.
    pub fn entries(&self) -> u64 {
        self.entries
    }
    /// False-positive rate this link was built for.
    pub fn error(&self) -> f64 {
        self.error
    }
    /// Bits per entry, derived from `error`.
    pub fn bpe(&self) -> f64 {
        self.bpe
    }
    /// Number of probes `k`.
    pub fn hashes(&self) -> u32 {
        self.hashes
    }
    /// Size of the bit array in bits; always `bytes() * 8` (sizing and dump validation make it
    /// so, which is why it is not stored).
    pub fn bits(&self) -> u64 {
        self.data.len() * 8
    }
    /// Power-of-two exponent of old layouts; 0 for every link created by a command.
    pub fn n2(&self) -> u8 {
        self.n2
    }
    /// Items added to this link.
    pub fn size(&self) -> u64 {
        self.size
    }
    /// Size of the bit array in bytes.
    pub fn bytes(&self) -> u64 {
        self.data.len()
    }
    /// The bit array as consecutive slices, in order; their lengths add up to `bytes()`. Pages never
    /// written come out as zeros.
    pub fn bit_slices(&self) -> impl Iterator<Item = &[u8]> + Clone + '_ {
        self.data.slices()
    }
    /// The bit array page by page (never-written pages as [`Page::Zeros`], nothing allocated); the
    /// RDB writer streams them into the link's string.
    pub fn bit_pages(&self) -> impl Iterator<Item = Page<'_>> + Clone + '_ {
        self.data.pages()
    }
    /// The bit array as one vector (a copy).
    pub fn to_bytes(&self) -> Vec<u8> {
        let len = self.data.len();
        let mut out = Vec::with_capacity(len as usize);
        self.data.read_into(0, len, &mut out);
        out
    }
}

/// The probe modulus `m` of a link (`2^n2` for old power-of-two layouts, else the bit count) and
/// `2^64 mod m`, which lets [`Probes`] step through `(a + i·b) mod 2^64 mod m` without dividing.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Modulus {
    m: u64,
    wrap: u64,
}

impl Modulus {
    /// `bits ≥ 1` and `n2 ≤ 63` are guaranteed by sizing and by dump validation.
    fn new(bits: u64, n2: u8) -> Modulus {
        let m = if n2 > 0 { 1u64 << n2 } else { bits.max(1) };
        Modulus {
            m,
            wrap: (u64::MAX % m + 1) % m,
        }
    }

    #[inline]
    fn probes(self, a: u64, b: u64) -> Probes {
        let bm = b % self.m;
        // The step after a wrapped sum, `bm - 2^64 mod m` reduced mod m; `bm + (m - wrap)` < 2m
        // ≤ 2^64 cannot overflow.
        let mut bw = bm + (self.m - self.wrap);
        if bw >= self.m {
            bw -= self.m;
        }
        Probes {
            x: a,
            b,
            r: a % self.m,
            bm,
            bw,
            m: self.m,
        }
    }
}

/// The probe sequence `x_i = (a + i·b) mod 2^64`, bit `x_i mod m`, by additions: two divisions per
/// link instead of one per probe. With `r = x_i mod m`, the next residue is `r + (b mod m)`, or
/// `r + (b mod m) - (2^64 mod m)` when the 64-bit sum `x_i + b` wrapped, reduced mod `m`; both
/// steps are reduced up front, so a probe costs one add, one select and one compare-subtract.
struct Probes {
    x: u64,
    b: u64,
    r: u64,
    /// `b mod m`: the step when `x_i + b` does not wrap.
    bm: u64,
    /// `(b - 2^64) mod m`: the step when it does.
    bw: u64,
    m: u64,
}

impl Probes {
    /// The current probe's bit; advances to the next.
    #[inline]
    fn next_bit(&mut self) -> u64 {
        let bit = self.r;
        let (x, wrapped) = self.x.overflowing_add(self.b);
        self.x = x;
        let step = if wrapped { self.bw } else { self.bm };
        // r, step < m ≤ 2^63 (links are far smaller; n2 ≤ 63), so the sum cannot overflow.
        let mut r = self.r + step;
        if r >= self.m {
            r -= self.m;
        }
        self.r = r;
        bit
    }
}

/// Link fields as stored in a dump, before validation. The RDB reader fills one per link.
#[derive(Clone, Debug, PartialEq)]
pub struct RawLink {
    pub entries: u64,
    pub error: f64,
    pub bpe: f64,
    /// Stored as a full integer in RDB; anything above [`MAX_HASHES`] is refused.
    pub hashes: u64,
    pub bits: u64,
    /// Stored as a full integer in RDB; anything above 63 is refused rather than truncated.
    pub n2: u64,
    /// Items in the link.
    pub size: u64,
    /// The bit array; its length is the link's `bytes`.
    pub data: BitArray,
}

/// A link's bit array under construction, in the filter's own pages, so a loader can stream a
/// gigabyte-sized array into place without holding a second copy (and all-zero pages of a sparse
/// filter are never allocated).
#[derive(Clone, Debug)]
pub struct BitArray(PagedBits);

/// Equal bytes, however they are paged.
impl PartialEq for BitArray {
    fn eq(&self, other: &BitArray) -> bool {
        self.0.len() == other.0.len() && self.0.slices().flatten().eq(other.0.slices().flatten())
    }
}

impl BitArray {
    /// `len` zero bytes (only the page table is allocated).
    pub fn zeroed(len: u64) -> Result<BitArray, RawPartsError> {
        PagedBits::zeroed(len)
            .map(BitArray)
            .map_err(|_| RawPartsError::OutOfMemory)
    }

    /// A copy of `bytes`.
    pub fn from_bytes(bytes: &[u8]) -> Result<BitArray, RawPartsError> {
        let mut a = BitArray::zeroed(bytes.len() as u64)?;
        a.write(0, bytes)?;
        Ok(a)
    }

    /// Writes `data` at byte `offset`; zeros written to a page never written before leave it
    /// unallocated.
    pub fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), RawPartsError> {
        if offset.saturating_add(data.len() as u64) > self.0.len() {
            return Err(RawPartsError::BadLink);
        }
        self.0
            .write(offset, data)
            .map_err(|_| RawPartsError::OutOfMemory)
    }

    pub fn len(&self) -> u64 {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.len() == 0
    }
}

/// bloom.md §10.3 step 2.4 for one link, minus the allocation: error, n2, bits, hashes. Also
/// refuses what no real filter has (NaN error, absurd k).
fn link_fields_valid(error: f64, n2: u64, bits: u64, bytes: u64, bpe: f64, hashes: u64) -> bool {
    if !(error > 0.0 && error < 1.0) {
        return false;
    }
    if n2 > 63 {
        return false;
    }
    if n2 != 0 && bits < (1u64 << n2) {
        return false;
    }
    if bits == 0 || bytes.checked_mul(8) != Some(bits) {
        return false;
    }
    if hashes > MAX_HASHES as u64 {
        return false;
    }
    let k = hashes_for_bpe(bpe);
    k.is_finite() && k == hashes as f64
}

// ---------------------------------------------------------------------------------------------
// The chain
// ---------------------------------------------------------------------------------------------

/// A scalable Bloom filter: the value of a `MBbloom--` key.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalingBloom {
    /// Items successfully added across all links (BF.CARD).
    size: u64,
    /// Bit set of `OPT_*`.
    options: u32,
    /// Expansion factor for new links; stored even for non-scaling chains.
    growth: u32,
    /// Never empty; the newest link is last. The first link lives inside the chain's own
    /// allocation (most filters never scale).
    links: SmallVec<[Link; 1]>,
}

/// One item's probe bits in the newest link of a chain, computed once for both its prefetch and
/// its write (issue 15: computing them twice, once to prefetch and once to set, was a fifth of a
/// 10-item BF.MADD). Valid only while the chain has `links` links: an add that opens a link
/// makes them stale, and they are recomputed.
struct NewestProbes {
    links: usize,
    /// The first `k` of `bits` are written: `k` is 0 at first and set only right after
    /// [`Link::probe_bits`] wrote that many. The rest stay uninitialised (zeroing both arrays
    /// for each command was ~80 instructions).
    k: usize,
    bits: [MaybeUninit<u64>; PROBE_CACHE],
    /// When `direct`: the byte of each of `bits`, in pages the newest link alone held when they
    /// were prefetched ([`Pages::prefetch_locate`]), so the write skips the page lookup, bounds
    /// and sharing checks it would repeat per bit (issue 15: ~half of BF.MADD's per-bit cost).
    /// Such a page stays allocated, in place and unshared until the write: nothing can clone it
    /// while the adding command holds the chain mutably, and [`Pages::page_mut`] replaces only
    /// zero or shared pages.
    direct: bool,
    /// Only the first `k`, all written when `direct` is set, are ever read.
    bytes: [MaybeUninit<*mut u8>; PROBE_CACHE],
}

/// The first `k` of `bits`, which the caller knows are written ([`NewestProbes::k`]).
#[inline]
fn written(bits: &[MaybeUninit<u64>; PROBE_CACHE], k: usize) -> &[u64] {
    let k = k.min(PROBE_CACHE);
    // SAFETY: the first `k` slots are initialised (the invariant of `NewestProbes::k`, the only
    // caller's argument), `k` is within the array, and `MaybeUninit<u64>` has `u64`'s layout.
    unsafe { std::slice::from_raw_parts(bits.as_ptr().cast::<u64>(), k) }
}

impl NewestProbes {
    fn new() -> NewestProbes {
        NewestProbes {
            links: 0,
            k: 0,
            bits: [MaybeUninit::uninit(); PROBE_CACHE],
            direct: false,
            bytes: [MaybeUninit::uninit(); PROBE_CACHE],
        }
    }
}

/// The five BF.INFO figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BloomInfo {
    pub capacity: u64,
    pub size: u64,
    pub filters: u64,
    pub items: u64,
    /// `None` for a non-scaling chain (BF.INFO shows null).
    pub expansion: Option<u32>,
}

impl ScalingBloom {
    /// A new chain as BF.RESERVE / BF.ADD / BF.INSERT create it: options `FORCE64 | NOROUND`
    /// (plus `NO_SCALING`), growth `expansion` (kept even when non-scaling), and one link of
    /// `capacity` entries at `error` (halved for a scaling chain).
    pub fn create(
        capacity: u64,
        error: f64,
        expansion: u32,
        nonscaling: bool,
    ) -> Result<ScalingBloom, CreateError> {
        let mut options = OPT_FORCE64 | OPT_NOROUND;
        let mut link_error = error;
        if nonscaling {
            options |= OPT_NO_SCALING;
        } else {
            link_error *= TIGHTENING_RATIO;
        }
        let link = Link::new(capacity, link_error, options)?;
        let links = smallvec::smallvec![link];
        Ok(ScalingBloom {
            size: 0,
            options,
            growth: expansion,
            links,
        })
    }

    /// The hash pair of `item` for this chain's hash width.
    #[inline]
    fn hash(&self, item: &[u8]) -> (u64, u64) {
        bloom_hash(item, self.hashes_wide())
    }

    /// Whether any of `links` holds the item hashed to `(a, b)`, newest link first.
    ///
    /// Each link is asked with [`Link::holds`], which for a link up to [`CHECK_HEAD_MAX_BYTES`]
    /// reads its first three bits before it tests any. About half the bits of a link built to
    /// its rate are set, so "is this bit set" is a coin toss the branch predictor loses half the
    /// time, and a stranger, turned away at the first or second probe of each link, paid a
    /// misprediction or more per link. Three bits tested at once say "no" 7 times in 8, which
    /// the predictor gets right. Issue 15, `taskset -c 1 cargo bench --bench bloom -- links_x`,
    /// absent items, early exit → head first: 1 link 23.9 → 17.7 ns, 13 links grown ×2 from 100
    /// (2 MB) 432 → 308, 12 links of 1 000 (the load benchmark's "12 links") 243 → 126; adds to
    /// those chains ask the older links first and went 549 → 432 and 473 → 297. A head of four
    /// was as fast (three alternating runs: 1 link 20.5 against 18.0 ns, 12 links 115 against
    /// 117) for ~200 more instructions a 12-link lookup; a head of two left half the gain
    /// (pinned load benchmark, server CPU per request: early exit 0.80, two 0.73, three 0.70,
    /// four 0.67 µs, the 10 ms ticks ±0.03).
    ///
    /// A larger link is checked bit by bit: its probes are cache misses, and waiting for more of
    /// them costs more than the misprediction. The limit comes from a sweep of one-link filters
    /// half full (3 M distinct absent items, pinned, head of four; early exit against head
    /// first): equal from 0.4 to 3.6 MB (61 against 61–63 ns), worse at 6 MB (66 against 76) and
    /// 8.4 MB (100 against 169).
    ///
    /// The gain needs distinct items: a benchmark that cycles through a few thousand lets the
    /// predictor learn each item's answers, and early exit then looks cheaper than it is.
    #[inline]
    fn any_link_holds(links: &[Link], a: u64, b: u64) -> bool {
        links.iter().rev().any(|l| l.holds(a, b))
    }

    /// Whether `item` may have been added (no false negatives).
    #[inline]
    pub fn exists(&self, item: &[u8]) -> bool {
        let (a, b) = self.hash(item);
        self.prefetch(a, b);
        Self::any_link_holds(&self.links, a, b)
    }

    /// [`ScalingBloom::exists`] of an item that [`ScalingBloom::prefetch_item`] hashed to
    /// `(a, b)` with this chain's hash ([`ScalingBloom::hashes_wide`]): neither prefetched again,
    /// which would compute every probe a second time only to start misses already under way
    /// (issue 15: ~250 of a pipelined BF.EXISTS's ~2,500 instructions on a 12 MB filter), nor
    /// hashed again (~100 more).
    #[inline]
    pub fn exists_prefetched(&self, a: u64, b: u64) -> bool {
        Self::any_link_holds(&self.links, a, b)
    }

    /// Whether the chain hashes items with 64 bits (`FORCE64`, every chain made since
    /// RedisBloom 2.0) or 32 (a legacy chain loaded from an old RDB).
    #[inline]
    pub fn hashes_wide(&self) -> bool {
        self.options & OPT_FORCE64 != 0
    }

    /// Starts the cache misses of `item`'s probes (as [`ScalingBloom::exists`] does first), for
    /// a pipelined batch that prefetches all its BF.EXISTS items before running them
    /// (`commands::prefetch_keys`): one command's probes overlap already, a batch's overlap
    /// across commands too. A hint: nothing is read into the program.
    /// The item's hash pair if it started any (the chain is large enough to be worth it), for
    /// [`ScalingBloom::exists_prefetched`].
    pub fn prefetch_item(&self, item: &[u8]) -> Option<(u64, u64)> {
        if self.worth_prefetching() {
            let (a, b) = self.hash(item);
            self.prefetch(a, b);
            Some((a, b))
        } else {
            None
        }
    }

    /// Starts the cache misses of a lookup in parallel: the first two probes of every link (a
    /// stranger is usually turned away by the first or second probe of each link) and every probe
    /// of the newest link (an item that is there reads them all: prefetching only two of them
    /// made a pipelined BF.EXISTS of present items on a 12 MB link 0.79 -> 0.96 µs, issue 15,
    /// pinned A/B). Adds prefetch their own probes ([`ScalingBloom::prefetch_for_add`]) and come
    /// here only for a link of more hashes than it keeps. It costs instructions, but the misses
    /// it overlaps cost more (skipping it on one-link chains once made BF.MADD's server CPU per
    /// request 1.5-2x worse). A chain that stays in the core's L2 skips it:
    /// there the prefetches are only instructions (issue 15: a 12-link chain of ~30 KB spent a
    /// fifth of BF.EXISTS in them). The newest link is the largest, so `links × newest` bounds the
    /// chain without walking it.
    #[inline]
    fn prefetch(&self, a: u64, b: u64) {
        let Some((newest, older)) = self.links.split_last() else {
            return;
        };
        if !self.worth_prefetching() {
            return;
        }
        newest.prefetch(a, b, u32::MAX);
        for l in older.iter().rev() {
            l.prefetch(a, b, 2);
        }
    }

    /// Whether the chain is too large for the core's L2 (see [`ScalingBloom::prefetch`]).
    #[inline]
    fn worth_prefetching(&self) -> bool {
        self.links.last().is_some_and(|newest| {
            newest.bytes().saturating_mul(self.links.len() as u64) > PREFETCH_MIN_BYTES
        })
    }

    /// The add path's [`ScalingBloom::prefetch`]: the newest link's probe bits are computed into
    /// `out` (when they fit) and prefetched from there, so the write reuses them.
    #[inline]
    fn prefetch_for_add(&self, a: u64, b: u64, out: &mut NewestProbes) {
        let Some((newest, older)) = self.links.split_last() else {
            return;
        };
        if !newest.probe_bits(a, b, &mut out.bits) {
            out.links = 0;
            out.direct = false;
            self.prefetch(a, b);
            return;
        }
        out.links = self.links.len();
        out.k = newest.hashes as usize;
        out.direct = false;
        if !self.worth_prefetching() {
            return;
        }
        match &newest.data {
            PagedBits::Paged(pg) => {
                out.direct = pg.prefetch_locate(written(&out.bits, out.k), &mut out.bytes);
            }
            flat => flat.prefetch_all(written(&out.bits, out.k)),
        }
        for l in older.iter().rev() {
            l.prefetch(a, b, 2);
        }
    }

    /// Adds `item` (bloom.md §6.2): `Ok(true)` if it was new, `Ok(false)` if it was (or looked)
    /// present already.
    pub fn add(&mut self, item: &[u8]) -> Result<bool, AddError> {
        let (a, b) = self.hash(item);
        let mut probes = NewestProbes::new();
        self.prefetch_for_add(a, b, &mut probes);
        self.add_hashed(a, b, &probes)
    }

    /// Adds `items` in order, as BF.MADD does, stopping at the first error: the answers so far and
    /// the error, if any. Each item's probes are prefetched while the previous one is added.
    pub fn add_all<I: AsRef<[u8]>>(&mut self, items: &[I]) -> (Vec<bool>, Option<AddError>) {
        let mut out = Vec::with_capacity(items.len());
        let err = self.add_each(items, |new| out.push(new));
        (out, err)
    }

    /// [`ScalingBloom::add_all`] handing each answer to `answer` as it comes (BF.MADD builds its
    /// reply so, without an intermediate vector): the error that stopped it, if any.
    pub fn add_each<I: AsRef<[u8]>>(
        &mut self,
        items: &[I],
        mut answer: impl FnMut(bool),
    ) -> Option<AddError> {
        // Two probe buffers, used in turn: item `idx` has `probes[idx % 2]`, filled (and
        // prefetched) while item `idx - 1` is written.
        let mut probes = [NewestProbes::new(), NewestProbes::new()];
        let mut next = items.first().map(|i| self.hash(i.as_ref()));
        if let Some((a, b)) = next {
            self.prefetch_for_add(a, b, &mut probes[0]);
        }
        for idx in 0..items.len() {
            let Some((a, b)) = next else { break };
            next = items.get(idx + 1).map(|i| self.hash(i.as_ref()));
            if let Some((na, nb)) = next {
                self.prefetch_for_add(na, nb, &mut probes[(idx + 1) % 2]);
            }
            match self.add_hashed(a, b, &probes[idx % 2]) {
                Ok(new) => answer(new),
                Err(e) => return Some(e),
            }
        }
        None
    }

    /// Whether each of `items` may have been added, prefetching one item ahead (BF.MEXISTS).
    pub fn exists_all<I: AsRef<[u8]>>(&self, items: &[I]) -> Vec<bool> {
        let hashes: Vec<(u64, u64)> = items.iter().map(|i| self.hash(i.as_ref())).collect();
        if let Some(&(a, b)) = hashes.first() {
            self.prefetch(a, b);
        }
        hashes
            .iter()
            .enumerate()
            .map(|(idx, &(a, b))| {
                if let Some(&(na, nb)) = hashes.get(idx + 1) {
                    self.prefetch(na, nb);
                }
                Self::any_link_holds(&self.links, a, b)
            })
            .collect()
    }

    /// [`ScalingBloom::add`] for a hash pair already computed (and prefetched); `probes` holds
    /// its probe bits in the newest link if [`ScalingBloom::prefetch_for_add`] computed them for
    /// the chain as it is now.
    ///
    /// The newest link is not checked before it is written: setting its `k` bits answers the same
    /// question (the item is new to it iff one of them was clear), so a chain whose newest link
    /// has room walks the probes once, not twice. Only a full newest link is checked first, since
    /// an item it already holds must not open a new link.
    fn add_hashed(&mut self, a: u64, b: u64, probes: &NewestProbes) -> Result<bool, AddError> {
        let Some((cur, older)) = self.links.split_last() else {
            return Err(AddError::Failed);
        };
        let cached = (probes.links == self.links.len() && probes.k == cur.hashes as usize)
            .then(|| written(&probes.bits, probes.k));
        if Self::any_link_holds(older, a, b) {
            return Ok(false);
        }
        let options = self.options;
        let growth = self.growth;
        if cur.size >= cur.entries {
            let present = match cached {
                Some(bits) => cur.check_bits(bits),
                None => cur.check(a, b),
            };
            if present {
                return Ok(false);
            }
            if options & OPT_NO_SCALING != 0 {
                return Err(AddError::Full);
            }
            let entries = cur.entries.checked_mul(growth as u64).unwrap_or(0);
            let error = cur.error * TIGHTENING_RATIO;
            let total = self.total_bytes();
            let link = Link::new(entries, error, options).map_err(|_| AddError::Failed)?;
            if total.saturating_add(link.bytes()) > alloc_ceiling() {
                return Err(AddError::Failed);
            }
            self.links.try_reserve(1).map_err(|_| AddError::Failed)?;
            self.links.push(link);
        }
        // A link just opened makes `cached` (the old newest link's bits) stale.
        let cached = cached.filter(|_| probes.links == self.links.len());
        let Some(cur) = self.links.last_mut() else {
            return Err(AddError::Failed);
        };
        let new = match cached {
            Some(bits) if probes.direct => {
                // Pairs with the Release decrement of a snapshot's clone of a page dropped since
                // its count was read as 1, so the snapshot's reads happen before our writes.
                fence(Ordering::Acquire);
                let mut any_clear = false;
                for (&x, at) in bits.iter().zip(&probes.bytes[..probes.k]) {
                    let mask = 1u8 << (x & 7);
                    // SAFETY: `direct` is set only when `prefetch_locate` wrote all `k` slots.
                    let at = unsafe { at.assume_init() };
                    // SAFETY: `direct` says `at` points into a page of this link, in bounds, and
                    // that the page's `Arc` had a strong count of 1 when it was located, in this
                    // command, read from the page or implied by the array's lineage token
                    // ([`Pages::lineage`]); `links` is unchanged, so no link opened since. The
                    // fence above orders a dropped clone's reads before our writes either way (its
                    // token is dropped after its pages). The page is still
                    // that link's, unmoved and allocated: only `page_mut` replaces a page, and
                    // only a zero or shared one. No other `Arc` to it can have appeared: `&mut
                    // self` is the only access to its one `Arc` (a clone needs one to clone
                    // from; page `Arc`s are never downgraded). So the byte is ours to write.
                    unsafe {
                        any_clear |= *at & mask != mask;
                        *at |= mask;
                    }
                }
                any_clear
            }
            Some(bits) => cur.set_bits(bits)?,
            None => cur.set(a, b)?,
        };
        if new {
            cur.size += 1;
            self.size += 1;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// Items added (BF.CARD, BF.INFO `Number of items inserted`).
    pub fn size(&self) -> u64 {
        self.size
    }
    /// Number of links (≥ 1).
    pub fn nfilters(&self) -> usize {
        self.links.len()
    }
    /// The `OPT_*` bit set.
    pub fn options(&self) -> u32 {
        self.options
    }
    /// The stored expansion factor.
    pub fn growth(&self) -> u32 {
        self.growth
    }
    /// Whether the chain never scales.
    pub fn is_nonscaling(&self) -> bool {
        self.options & OPT_NO_SCALING != 0
    }
    /// How many more items the newest link takes before the chain must open a link (or, if
    /// non-scaling, is full). While `n` items fit, adding them cannot fail: an add fails only when
    /// the newest link is at capacity (`add_hashed`).
    pub fn room_in_newest(&self) -> u64 {
        self.links
            .last()
            .map_or(0, |l| l.entries.saturating_sub(l.size))
    }

    /// The links, oldest first.
    pub fn links(&self) -> &[Link] {
        &self.links
    }

    /// Σ bytes of all links.
    pub fn total_bytes(&self) -> u64 {
        self.links
            .iter()
            .fold(0u64, |acc, l| acc.saturating_add(l.bytes()))
    }

    /// Σ capacity of all links.
    pub fn capacity(&self) -> u64 {
        self.links
            .iter()
            .fold(0u64, |acc, l| acc.wrapping_add(l.entries))
    }

    /// BF.INFO `Size` and the type's memory-usage figure: `32 + 64·nfilters + Σ bytes`, the sizes
    /// of RedisBloom's structs (bloom.md §8). MEMORY USAGE adds the server's key overhead to it.
    pub fn memory_usage(&self) -> u64 {
        32u64
            .saturating_add(64u64.saturating_mul(self.links.len() as u64))
            .saturating_add(self.total_bytes())
    }

    /// What the chain really occupies in this process: structs, page tables and allocated pages.
    pub fn resident_bytes(&self) -> u64 {
        let spilled = if self.links.spilled() {
            self.links.capacity() * std::mem::size_of::<Link>()
        } else {
            0
        };
        let structs = std::mem::size_of::<ScalingBloom>() + spilled;
        structs as u64
            + self
                .links
                .iter()
                .map(|l| l.data.resident_bytes())
                .sum::<u64>()
    }

    /// Stops counting the never-written bytes as reserved (see `store::pages::Reservation`).
    pub fn uncount_reservations(&self) {
        for l in &self.links {
            l.data.uncount_reservation();
        }
    }

    /// The BF.INFO figures.
    pub fn info(&self) -> BloomInfo {
        BloomInfo {
            capacity: self.capacity(),
            size: self.memory_usage(),
            filters: self.links.len() as u64,
            items: self.size,
            expansion: if self.is_nonscaling() {
                None
            } else {
                Some(self.growth)
            },
        }
    }

    /// The lines of BF.DEBUG: `size:<n>` then one line per link (bloom.md §4.7).
    pub fn debug_lines(&self) -> Vec<String> {
        let width = if self.options & OPT_FORCE64 != 0 {
            64
        } else {
            32
        };
        let mut out = Vec::with_capacity(1 + self.links.len());
        out.push(format!("size:{}", self.size));
        for l in &self.links {
            out.push(format!(
                "bytes:{} bits:{} hashes:{} hashwidth:{} capacity:{} size:{} ratio:{}",
                l.bytes(),
                l.bits(),
                l.hashes,
                width,
                l.entries,
                l.size,
                crate::numeric::format_g(l.error, 6)
            ));
        }
        out
    }

    // -----------------------------------------------------------------------------------------
    // SCANDUMP / LOADCHUNK
    // -----------------------------------------------------------------------------------------

    /// The SCANDUMP header (iterator 0): packed little-endian, `20 + 53·nfilters` bytes.
    ///
    /// ```text
    ///  0  u64 chain size      8  u32 nfilters     12  u32 options     16  u32 growth
    ///  then per link, at 20 + 53·i:
    ///  +0 u64 bytes  +8 u64 bits  +16 u64 size  +24 f64 error  +32 f64 bpe
    ///  +40 u32 hashes  +44 u64 entries  +52 u8 n2
    /// ```
    pub fn header(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_FIXED_LEN + HEADER_LINK_LEN * self.links.len());
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&(self.links.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.options.to_le_bytes());
        out.extend_from_slice(&self.growth.to_le_bytes());
        for l in &self.links {
            out.extend_from_slice(&l.bytes().to_le_bytes());
            out.extend_from_slice(&l.bits().to_le_bytes());
            out.extend_from_slice(&l.size.to_le_bytes());
            out.extend_from_slice(&l.error.to_le_bytes());
            out.extend_from_slice(&l.bpe.to_le_bytes());
            out.extend_from_slice(&l.hashes.to_le_bytes());
            out.extend_from_slice(&l.entries.to_le_bytes());
            out.push(l.n2);
        }
        out
    }

    /// The link holding byte `pos` of the concatenated bit arrays, and the offset inside it.
    fn locate(&self, pos: u64) -> Option<(usize, u64)> {
        let mut start = 0u64;
        for (i, l) in self.links.iter().enumerate() {
            let end = start.checked_add(l.bytes())?;
            if pos < end {
                return Some((i, pos - start));
            }
            start = end;
        }
        None
    }

    /// SCANDUMP for an iterator `it ≥ 1`: the next iterator and the chunk, or `None` when `it` is
    /// negative or past the end (the reply is then `[0, ""]`). Iterator 0 is the [`header`].
    ///
    /// [`header`]: ScalingBloom::header
    pub fn scandump_chunk(&self, it: i64) -> Option<(i64, Vec<u8>)> {
        if it < 1 {
            return None;
        }
        let (idx, offset) = self.locate(it as u64 - 1)?;
        let link = &self.links[idx];
        let len = (link.bytes() - offset).min(MAX_SCANDUMP_CHUNK);
        let mut chunk = Vec::new();
        chunk.try_reserve_exact(len as usize).ok()?;
        link.data.read_into(offset, len, &mut chunk);
        Some((it.checked_add(len as i64)?, chunk))
    }

    /// Builds an empty (all-zero) chain from a SCANDUMP header, validating every field first
    /// (bloom.md §10.3 step 2). `entries`, `growth` and link sizes against capacity are not checked,
    /// as in RedisBloom.
    pub fn from_header(data: &[u8]) -> Result<ScalingBloom, ChunkError> {
        let bad = ChunkError::BadData;
        let u64_at = |o: usize| -> Result<u64, ChunkError> {
            data.get(o..o + 8)
                .and_then(|s| s.try_into().ok())
                .map(u64::from_le_bytes)
                .ok_or(bad)
        };
        let u32_at = |o: usize| -> Result<u32, ChunkError> {
            data.get(o..o + 4)
                .and_then(|s| s.try_into().ok())
                .map(u32::from_le_bytes)
                .ok_or(bad)
        };
        if data.len() < HEADER_FIXED_LEN {
            return Err(bad);
        }
        let size = u64_at(0)?;
        let nfilters = u32_at(8)? as u64;
        let options = u32_at(12)?;
        let growth = u32_at(16)?;
        if nfilters == 0 {
            return Err(bad);
        }
        // The exact-length rule bounds nfilters by the data we were given before anything is sized.
        let expect = (HEADER_LINK_LEN as u64)
            .checked_mul(nfilters)
            .and_then(|n| n.checked_add(HEADER_FIXED_LEN as u64));
        if expect != Some(data.len() as u64) {
            return Err(bad);
        }
        struct Fields {
            bytes: u64,
            bits: u64,
            size: u64,
            error: f64,
            bpe: f64,
            hashes: u32,
            entries: u64,
            n2: u8,
        }
        let mut fields = Vec::with_capacity(nfilters as usize);
        let mut total_bytes = 0u64;
        let mut total_size = 0u64;
        for i in 0..nfilters as usize {
            let o = HEADER_FIXED_LEN + HEADER_LINK_LEN * i;
            let f = Fields {
                bytes: u64_at(o)?,
                bits: u64_at(o + 8)?,
                size: u64_at(o + 16)?,
                error: f64::from_bits(u64_at(o + 24)?),
                bpe: f64::from_bits(u64_at(o + 32)?),
                hashes: u32_at(o + 40)?,
                entries: u64_at(o + 44)?,
                n2: *data.get(o + 52).ok_or(bad)?,
            };
            if !link_fields_valid(
                f.error,
                f.n2 as u64,
                f.bits,
                f.bytes,
                f.bpe,
                f.hashes as u64,
            ) {
                return Err(bad);
            }
            total_bytes = total_bytes.checked_add(f.bytes).ok_or(bad)?;
            if total_bytes > alloc_ceiling() {
                return Err(bad);
            }
            total_size = total_size.checked_add(f.size).ok_or(bad)?;
            fields.push(f);
        }
        if options & !OPT_ALL != 0 || total_size != size {
            return Err(bad);
        }
        let mut links = SmallVec::new();
        links.try_reserve_exact(fields.len()).map_err(|_| bad)?;
        for f in fields {
            let data = PagedBits::zeroed(f.bytes).map_err(|_| bad)?;
            links.push(Link {
                entries: f.entries,
                error: f.error,
                bpe: f.bpe,
                hashes: f.hashes,
                n2: f.n2,
                size: f.size,
                modulus: Modulus::new(f.bits, f.n2),
                data,
            });
        }
        Ok(ScalingBloom {
            size,
            options,
            growth,
            links,
        })
    }

    /// LOADCHUNK of a data chunk into an existing chain (bloom.md §10.3 step 4). `it` is the
    /// iterator SCANDUMP returned *after* this chunk, so the chunk starts at `it − len(data)`.
    pub fn load_chunk(&mut self, it: i64, data: &[u8]) -> Result<(), ChunkError> {
        let len = data.len() as u64;
        if it <= 0 || (it as u64) < len {
            return Err(ChunkError::BadData);
        }
        let start = it as u64 - len;
        if start < 1 {
            return Err(ChunkError::NoLink);
        }
        let (idx, offset) = self.locate(start - 1).ok_or(ChunkError::NoLink)?;
        let link = &mut self.links[idx];
        if offset + len > link.bytes() {
            return Err(ChunkError::TooBig);
        }
        // A page allocation failing here is memory pressure, not bad data; RedisBloom has no
        // such case. Report it as bad data rather than abort.
        link.data
            .write(offset, data)
            .map_err(|_| ChunkError::BadData)
    }

    /// A chain from fields the RDB reader decoded (`MBbloom--` encoding version 4, rdb.md §4.3).
    ///
    /// Checks what RedisBloom's loader checks (at least one link; per link the error rate, `n2`,
    /// `bits == 8·data.len()` and `hashes == ceil(ln2·bpe)`) plus our safety rules (no NaN error,
    /// `hashes ≤ MAX_HASHES`, `n2 ≤ 63`, total size under the allocation ceiling). Like RedisBloom
    /// it does not check that link sizes add up to `size` nor that `options` are known bits.
    /// The RDB reader must itself refuse a string shorter than `ceil(bits / 8)` and pass the
    /// string as `data` (so `bytes` is its length).
    pub fn from_raw_parts(
        size: u64,
        options: u32,
        growth: u32,
        raw: Vec<RawLink>,
    ) -> Result<ScalingBloom, RawPartsError> {
        if raw.is_empty() {
            return Err(RawPartsError::NoLinks);
        }
        let mut total = 0u64;
        for r in &raw {
            let bytes = r.data.len();
            if !link_fields_valid(r.error, r.n2, r.bits, bytes, r.bpe, r.hashes) {
                return Err(RawPartsError::BadLink);
            }
            total = total.saturating_add(bytes);
        }
        if total > alloc_ceiling() {
            return Err(RawPartsError::OutOfMemory);
        }
        let mut links = SmallVec::new();
        links
            .try_reserve_exact(raw.len())
            .map_err(|_| RawPartsError::OutOfMemory)?;
        for r in raw {
            let n2 = r.n2 as u8; // validated ≤ 63
            let data = r.data.0;
            links.push(Link {
                entries: r.entries,
                error: r.error,
                bpe: r.bpe,
                hashes: r.hashes as u32,
                n2,
                size: r.size,
                modulus: Modulus::new(r.bits, n2),
                data,
            });
        }
        Ok(ScalingBloom {
            size,
            options,
            growth,
            links,
        })
    }
}

#[cfg(test)]
mod tests;
