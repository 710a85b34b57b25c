//! Cuckoo filters, bucket for bucket the same as RedisBloom's `MBbloomCF` type.
//!
//! A cuckoo filter answers "have I seen this item?" like a Bloom filter, but it stores a small
//! fingerprint of each item in one of two candidate buckets, so an item can also be *deleted*.
//! hyperbloom must hold exactly the bytes RedisBloom holds after the same operations: `CF.SCANDUMP`
//! output and RDB values are exchanged between the two servers, and a single byte placed differently
//! would make a filter answer differently after the move. Everything below is therefore the
//! reference algorithm (spec `cuckoo.md`), quirks included; only the storage is ours.
//!
//! # Hashing (cuckoo.md §2)
//!
//! ```text
//! h   = MurmurHash64A(item, seed 0)
//! fp  = h mod 255 + 1                       8-bit fingerprint, never 0 (0 marks an empty slot)
//! h1  = h
//! h2  = h1 XOR (fp * 0x5bd1e995)            "alternate" hash; alt(alt(x)) = x
//! ```
//!
//! In a sub-filter of `n` buckets of `B` one-byte slots, hash `x` selects the bucket whose first byte
//! is at `((x mod n) * B) mod 2^32`. The 32-bit truncation is RedisBloom's (it keeps the offset in a
//! 32-bit variable); it only matters for sub-filters above 4 GiB, and reproducing it keeps such filters
//! interchangeable, false negatives included. The eviction walk alone computes full 64-bit offsets.
//! Because `n` is a power of two for every filter a command creates, `x mod n` keeps the low bits, so
//! the bucket pair of an item in a small sub-filter is its pair in a large one reduced modulo the
//! smaller size — which is what lets compaction move fingerprints into older, smaller sub-filters.
//!
//! # Layout
//!
//! ```text
//! CuckooFilter { numBuckets (of sub-filter 0), numItems, numDeletes, bucketSize B,
//!                maxIterations, expansion, filters: [SubFilter; numFilters] }
//! SubFilter i: numBuckets_i = numBuckets * expansion^i buckets
//!              bytes [j*B, (j+1)*B) are bucket j; each byte one fingerprint slot
//! ```
//!
//! # Insertion and eviction (§3.2)
//!
//! An insert first looks, newest sub-filter to oldest, for the lowest free slot of bucket(h1), then of
//! bucket(h2). Failing that it runs the classic cuckoo walk in the newest sub-filter only: swap the
//! carried fingerprint into slot `victim` of the current bucket, move to the evicted fingerprint's
//! alternate bucket, stop if that bucket has room, otherwise advance `victim` round-robin. After
//! `maxIterations` steps without success the walk is undone step by step, restoring every byte, and the
//! filter grows a new sub-filter `expansion` times larger (or answers "full" when `expansion` is 0).
//! Deletes clear the lowest matching slot, newest sub-filter first; when more than 10 % of the items
//! were deleted and there are several sub-filters, compaction (§3.6) moves fingerprints from newer
//! sub-filters into older ones and frees the newest when it empties.
//!
//! # Paging, lazy zeroes and copy-on-write
//!
//! Each sub-filter's bytes live in fixed-size pages of about [`PAGE_TARGET`] bytes (a whole number of
//! buckets, so a bucket never straddles two pages except through the 32-bit quirk above, which has a
//! slow byte-wise path). A page is `Option<Arc<[u8]>>`:
//!
//! * `None` is a page of zeroes that was never written. Creating a filter — from `CF.RESERVE`, a
//!   `CF.LOADCHUNK` header or growth — allocates only the page table, so a 1 GiB reservation or the
//!   4 GiB header of RedisBloom's test suite costs kilobytes until items arrive.
//! * `Some(arc)` pages are shared between the live keyspace and any snapshot being written: cloning a
//!   filter clones the page table (one pointer per 64 KiB) and a later write copies just the touched
//!   page through [`Arc::make_mut`].
//!
//! # Limits
//!
//! Everything a client controls is checked before memory is committed: header fields against the
//! ranges of §5, sub-filter sizes against 2^56 buckets, and the whole filter against
//! [`MAX_FILTER_BYTES`], hyperbloom's ceiling where RedisBloom would abort the process on a failed
//! allocation. Page tables are reserved with `try_reserve`, so even a table that passes the ceiling
//! cannot abort the server.

use thiserror::Error;

use smallvec::SmallVec;

use super::murmur::murmur64a;
use super::pages::{Page, PagedBytes};

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

/// The multiplier of the alternate-bucket hash (MurmurHash2's `m`).
const ALT_MULT: u64 = 0x5bd1e995;

/// Target page size. 64 KiB keeps a snapshot's copy-on-write cost per touched page small while the
/// page table of even a 4 GiB sub-filter stays at 65536 pointers.
pub const PAGE_TARGET: usize = 64 * 1024;

/// hyperbloom's ceiling on the bytes of one filter (all sub-filters together): 64 GiB.
/// RedisBloom asks the allocator and aborts on failure; we refuse instead (cuckoo.md §9, "do not
/// reproduce" 4). RedisBloom's own test suite loads a 4 GiB sub-filter, which must pass.
pub const MAX_FILTER_BYTES: u64 = 1 << 36;

/// A sub-filter's bucket count must stay below 2^56 (cuckoo.md §1).
pub const MAX_BUCKETS: u64 = 1 << 56;

/// Most sub-filters a filter can have (`numFilters` is a u16 in RedisBloom).
pub const MAX_FILTERS: u64 = 65535;

/// Largest chunk `CF.SCANDUMP` returns.
pub const MAX_CHUNK: u64 = 16 * 1024 * 1024;

/// Length of the `CF.SCANDUMP` header chunk.
pub const HEADER_LEN: usize = 38;

/// Compaction runs after a delete when `numDeletes > numItems * DELETE_COMPACT_RATIO`.
const DELETE_COMPACT_RATIO: f64 = 0.10;

// ---------------------------------------------------------------------------------------------
// Hashing
// ---------------------------------------------------------------------------------------------

/// An item's fingerprint and its two bucket hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hashed {
    pub fp: u8,
    pub h1: u64,
    pub h2: u64,
}

impl Hashed {
    /// Hashes an item as RedisBloom does (cuckoo.md §2).
    pub fn new(item: &[u8]) -> Hashed {
        let h = murmur64a(item, 0);
        let fp = (h % 255 + 1) as u8;
        Hashed {
            fp,
            h1: h,
            h2: alt_hash(fp, h),
        }
    }
}

/// The alternate bucket hash of `x` for fingerprint `fp`.
#[inline]
fn alt_hash(fp: u8, x: u64) -> u64 {
    x ^ (fp as u64).wrapping_mul(ALT_MULT)
}

/// Byte offset of the bucket that hash `x` selects in a sub-filter of `n` buckets of `b` slots,
/// truncated to 32 bits as RedisBloom does. `n ≥ 1` and `n < 2^56` hold for every sub-filter, so the
/// 64-bit product cannot overflow.
#[inline]
fn bucket_offset(x: u64, n: u64, b: u64) -> u64 {
    (((x % n) * b) as u32) as u64
}

#[inline]
fn next_pow2(x: u64) -> u64 {
    // Callers bound x far below 2^63; `checked_next_power_of_two` keeps us panic-free anyway.
    x.checked_next_power_of_two().unwrap_or(1 << 63)
}

// ---------------------------------------------------------------------------------------------
// Errors and outcomes
// ---------------------------------------------------------------------------------------------

/// The result of one insert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertOutcome {
    /// The fingerprint was stored.
    Inserted,
    /// Insert-unique only: the item was already present; nothing changed.
    Exists,
    /// No room and the filter does not grow (`expansion` 0).
    NoSpace,
    /// No room and the new sub-filter could not be created.
    AllocFailed,
}

/// Why a filter could not be created from command arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum CreateError {
    /// The filter would exceed hyperbloom's memory ceiling (or the page table cannot be allocated).
    #[error("insufficient memory")]
    Alloc,
    /// Parameters outside the model (bucket size 0, ...).
    #[error("invalid parameters")]
    Invalid,
}

/// Why a header (SCANDUMP chunk 0 or RDB value) was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum HeaderError {
    #[error("numFilters out of range")]
    NumFilters,
    #[error("bucketSize out of range")]
    BucketSize,
    #[error("maxIterations out of range")]
    MaxIterations,
    #[error("expansion out of range")]
    Expansion,
    #[error("numBuckets invalid")]
    NumBuckets,
    #[error("sub-filter size invalid")]
    SubFilterSize,
    #[error("sub-filter count does not match numFilters")]
    SubFilterCount,
    #[error("sub-filter data has the wrong length")]
    DataLength,
    #[error("filter too large")]
    Alloc,
}

/// Why a `CF.LOADCHUNK` data chunk was refused (all map to `Couldn't load chunk!`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("bad chunk")]
pub struct ChunkError;

/// One step of a `CF.SCANDUMP` iteration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DumpChunk {
    /// `[0, null]`: the iteration is over (or the filter is empty).
    End,
    /// `[next, bytes]`.
    Data { next: u64, bytes: Vec<u8> },
}

// ---------------------------------------------------------------------------------------------
// The header: SCANDUMP chunk 0, and the scalar part of the RDB value
// ---------------------------------------------------------------------------------------------

/// The filter's scalar fields, as carried by a `CF.SCANDUMP` header or an RDB value.
///
/// Fields are 64-bit so that crafted inputs (a u64 `numFilters` in a header, any UINT in an RDB value)
/// are validated rather than silently truncated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CuckooHeader {
    pub num_items: u64,
    pub num_buckets: u64,
    pub num_deletes: u64,
    pub num_filters: u64,
    pub bucket_size: u64,
    pub max_iterations: u64,
    pub expansion: u64,
}

impl CuckooHeader {
    /// Parses the 38-byte packed little-endian header (cuckoo.md §5). `None` if the length is wrong.
    pub fn parse(b: &[u8]) -> Option<CuckooHeader> {
        if b.len() != HEADER_LEN {
            return None;
        }
        let u64_at = |o: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[o..o + 8]);
            u64::from_le_bytes(a)
        };
        let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as u64;
        Some(CuckooHeader {
            num_items: u64_at(0),
            num_buckets: u64_at(8),
            num_deletes: u64_at(16),
            num_filters: u64_at(24),
            bucket_size: u16_at(32),
            max_iterations: u16_at(34),
            expansion: u16_at(36),
        })
    }

    /// The 38-byte form. Fields wider than the format are truncated, which only a header that fails
    /// [`CuckooHeader::validate`] could need.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0..8].copy_from_slice(&self.num_items.to_le_bytes());
        out[8..16].copy_from_slice(&self.num_buckets.to_le_bytes());
        out[16..24].copy_from_slice(&self.num_deletes.to_le_bytes());
        out[24..32].copy_from_slice(&self.num_filters.to_le_bytes());
        out[32..34].copy_from_slice(&(self.bucket_size as u16).to_le_bytes());
        out[34..36].copy_from_slice(&(self.max_iterations as u16).to_le_bytes());
        out[36..38].copy_from_slice(&(self.expansion as u16).to_le_bytes());
        out
    }

    /// Checks the scalar rules of cuckoo.md §5 (not the sub-filter sizes).
    pub fn validate(&self) -> Result<(), HeaderError> {
        if !(1..=MAX_FILTERS).contains(&self.num_filters) {
            return Err(HeaderError::NumFilters);
        }
        if !(1..=255).contains(&self.bucket_size) {
            return Err(HeaderError::BucketSize);
        }
        if !(1..=65535).contains(&self.max_iterations) {
            return Err(HeaderError::MaxIterations);
        }
        if self.expansion > 32768 || (self.expansion == 0 && self.num_filters != 1) {
            return Err(HeaderError::Expansion);
        }
        if self.num_buckets == 0
            || self.num_buckets >= MAX_BUCKETS
            || !self.num_buckets.is_power_of_two()
        {
            return Err(HeaderError::NumBuckets);
        }
        Ok(())
    }

    /// Bucket count of sub-filter `i` when derived from the header: `numBuckets × expansion^i`,
    /// `None` if it is 0 or reaches 2^56.
    fn sub_buckets(&self, i: u64) -> Option<u64> {
        let i = u32::try_from(i).ok()?;
        let n = self
            .expansion
            .checked_pow(i)?
            .checked_mul(self.num_buckets)?;
        (n != 0 && n < MAX_BUCKETS).then_some(n)
    }
}

// ---------------------------------------------------------------------------------------------
// Paged byte storage
// ---------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------
// Sub-filters
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
struct SubFilter {
    num_buckets: u64,
    data: PagedBytes,
}

impl SubFilter {
    fn zeroed(num_buckets: u64, bucket_size: u64) -> Option<SubFilter> {
        let len = num_buckets.checked_mul(bucket_size)?;
        Some(SubFilter {
            num_buckets,
            data: PagedBytes::zeroed(len, bucket_size, PAGE_TARGET)?,
        })
    }

    fn len(&self) -> u64 {
        self.data.len()
    }

    /// Runs `f` over the `b` bytes of the bucket at byte offset `off`. The slow path copies a bucket
    /// that straddles pages, which only the 32-bit offset quirk can produce.
    #[inline]
    fn with_bucket<R>(&self, off: u64, b: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        match self.data.slice(off, b) {
            Some(s) => f(s),
            None => {
                let mut buf = [0u8; 255];
                let b = b.min(255);
                for (k, slot) in buf[..b].iter_mut().enumerate() {
                    *slot = self.data.get(off + k as u64);
                }
                f(&buf[..b])
            }
        }
    }

    #[inline]
    fn free_slot(&self, off: u64, b: usize) -> Option<u64> {
        self.with_bucket(off, b, |s| s.iter().position(|&x| x == 0))
            .map(|k| off + k as u64)
    }

    #[inline]
    fn find_fp(&self, off: u64, b: usize, fp: u8) -> Option<u64> {
        self.with_bucket(off, b, |s| s.iter().position(|&x| x == fp))
            .map(|k| off + k as u64)
    }

    #[inline]
    fn count_fp(&self, off: u64, b: usize, fp: u8) -> u64 {
        self.with_bucket(off, b, |s| s.iter().filter(|&&x| x == fp).count() as u64)
    }

    /// The lowest free slot of bucket(h1), else of bucket(h2) (truncated offsets).
    #[inline]
    fn find_available(&self, h1: u64, h2: u64, b: u64) -> Option<u64> {
        let bu = b as usize;
        self.free_slot(bucket_offset(h1, self.num_buckets, b), bu)
            .or_else(|| self.free_slot(bucket_offset(h2, self.num_buckets, b), bu))
    }

    #[inline]
    fn contains(&self, h: &Hashed, b: u64) -> bool {
        let bu = b as usize;
        self.find_fp(bucket_offset(h.h1, self.num_buckets, b), bu, h.fp)
            .is_some()
            || self
                .find_fp(bucket_offset(h.h2, self.num_buckets, b), bu, h.fp)
                .is_some()
    }
}

// ---------------------------------------------------------------------------------------------
// The filter
// ---------------------------------------------------------------------------------------------

/// A scalable cuckoo filter with RedisBloom's exact layout and algorithms. See the module essay.
#[derive(Debug, Clone, PartialEq)]
pub struct CuckooFilter {
    num_buckets: u64,
    num_items: u64,
    num_deletes: u64,
    bucket_size: u16,
    max_iterations: u16,
    expansion: u16,
    /// Sub-filter 0 lives inside the filter's allocation; a grown filter spills to the heap.
    filters: SmallVec<[SubFilter; 1]>,
}

impl CuckooFilter {
    /// Creates a filter as `CF.RESERVE` and auto-creation do (cuckoo.md §3.1):
    /// `numBuckets = nextPow2(capacity / bucketSize)` (at least 1), stored expansion
    /// `nextPow2(expansion)` (0 stays 0), one zeroed sub-filter. Range checks on the arguments are the
    /// command's job; this only refuses what the model cannot hold.
    pub fn new(
        capacity: u64,
        bucket_size: u16,
        max_iterations: u16,
        expansion: u16,
    ) -> Result<CuckooFilter, CreateError> {
        if bucket_size == 0 || max_iterations == 0 {
            return Err(CreateError::Invalid);
        }
        let num_buckets = next_pow2(capacity / bucket_size as u64).max(1);
        if num_buckets >= MAX_BUCKETS {
            return Err(CreateError::Invalid);
        }
        let expansion = if expansion == 0 {
            0
        } else {
            // ≤ 32768 for every accepted argument; a larger u16 saturates rather than overflow.
            (expansion as u32).next_power_of_two().min(32768) as u16
        };
        let bytes = num_buckets * bucket_size as u64;
        if bytes > MAX_FILTER_BYTES {
            return Err(CreateError::Alloc);
        }
        let sub = SubFilter::zeroed(num_buckets, bucket_size as u64).ok_or(CreateError::Alloc)?;
        Ok(CuckooFilter {
            num_buckets,
            num_items: 0,
            num_deletes: 0,
            bucket_size,
            max_iterations,
            expansion,
            filters: smallvec::smallvec![sub],
        })
    }

    /// Creates a zero-filled filter from a `CF.LOADCHUNK` header (cuckoo.md §4.10, §5).
    /// Sub-filter i gets `numBuckets × expansion^i` buckets; the expansion is kept as given.
    pub fn from_header(h: &CuckooHeader) -> Result<CuckooFilter, HeaderError> {
        h.validate()?;
        let mut sizes = Vec::new();
        sizes
            .try_reserve_exact(h.num_filters as usize)
            .map_err(|_| HeaderError::Alloc)?;
        let mut total: u64 = 0;
        for i in 0..h.num_filters {
            let n = h.sub_buckets(i).ok_or(HeaderError::SubFilterSize)?;
            total = n
                .checked_mul(h.bucket_size)
                .and_then(|b| total.checked_add(b))
                .filter(|&t| t <= MAX_FILTER_BYTES)
                .ok_or(HeaderError::Alloc)?;
            sizes.push(n);
        }
        let mut filters = SmallVec::new();
        filters
            .try_reserve_exact(sizes.len())
            .map_err(|_| HeaderError::Alloc)?;
        for n in sizes {
            filters.push(SubFilter::zeroed(n, h.bucket_size).ok_or(HeaderError::Alloc)?);
        }
        Ok(Self::assemble(h, filters))
    }

    /// Rebuilds a filter from its raw parts, as an RDB `MBbloomCF` value carries them (cuckoo.md §8):
    /// the scalar header and, per sub-filter, its bucket count and `buckets × bucketSize` bytes of data.
    ///
    /// Everything is validated (header rules of §5, sub-filter count, sizes below 2^56 buckets, exact
    /// data lengths, [`MAX_FILTER_BYTES`]) before any page is allocated. Loaders should also compare a
    /// data string's announced length with [`sub_filter_len`] before reading it.
    pub fn from_raw_parts<D: AsRef<[u8]>>(
        h: &CuckooHeader,
        sub_filters: &[(u64, D)],
    ) -> Result<CuckooFilter, HeaderError> {
        h.validate()?;
        if sub_filters.len() as u64 != h.num_filters {
            return Err(HeaderError::SubFilterCount);
        }
        let mut total: u64 = 0;
        for (n, data) in sub_filters {
            let len = sub_filter_len(*n, h.bucket_size).ok_or(HeaderError::SubFilterSize)?;
            if data.as_ref().len() as u64 != len {
                return Err(HeaderError::DataLength);
            }
            total = total
                .checked_add(len)
                .filter(|&t| t <= MAX_FILTER_BYTES)
                .ok_or(HeaderError::Alloc)?;
        }
        let mut filters = SmallVec::new();
        filters
            .try_reserve_exact(sub_filters.len())
            .map_err(|_| HeaderError::Alloc)?;
        for (n, data) in sub_filters {
            let mut sub = SubFilter::zeroed(*n, h.bucket_size).ok_or(HeaderError::Alloc)?;
            sub.data.write_from(0, data.as_ref());
            filters.push(sub);
        }
        Ok(Self::assemble(h, filters))
    }

    /// Header fields were validated to fit their narrow types.
    fn assemble(h: &CuckooHeader, filters: SmallVec<[SubFilter; 1]>) -> CuckooFilter {
        CuckooFilter {
            num_buckets: h.num_buckets,
            num_items: h.num_items,
            num_deletes: h.num_deletes,
            bucket_size: h.bucket_size as u16,
            max_iterations: h.max_iterations as u16,
            expansion: h.expansion as u16,
            filters,
        }
    }

    // -- accessors (CF.INFO, CF.DEBUG, RDB writer) -----------------------------------------------

    /// Bucket count of sub-filter 0 (the header's `numBuckets`).
    pub fn num_buckets(&self) -> u64 {
        self.num_buckets
    }
    /// Fingerprints stored: inserts minus deletes (wraps like RedisBloom's u64 on crafted input).
    pub fn num_items(&self) -> u64 {
        self.num_items
    }
    /// Deletes since the last compaction.
    pub fn num_deletes(&self) -> u64 {
        self.num_deletes
    }
    pub fn num_filters(&self) -> usize {
        self.filters.len()
    }
    pub fn bucket_size(&self) -> u16 {
        self.bucket_size
    }
    pub fn max_iterations(&self) -> u16 {
        self.max_iterations
    }
    /// Growth factor as stored (0 = never grows).
    pub fn expansion(&self) -> u16 {
        self.expansion
    }
    /// Bucket count of sub-filter `i` (`None` past the last).
    pub fn sub_filter_buckets(&self, i: usize) -> Option<u64> {
        self.filters.get(i).map(|f| f.num_buckets)
    }
    /// The bytes of sub-filter `i`, page by page (never-written pages as [`Page::Zeros`], nothing
    /// allocated), for writers that stream.
    pub fn sub_filter_pages(&self, i: usize) -> impl Iterator<Item = Page<'_>> + Clone + '_ {
        self.filters
            .get(i)
            .into_iter()
            .flat_map(|f| f.data.pages_ref())
    }
    /// The bytes of sub-filter `i` as one vector.
    pub fn sub_filter_bytes(&self, i: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for page in self.sub_filter_pages(i) {
            out.extend_from_slice(page.bytes());
        }
        out
    }

    /// Stops counting the never-written bytes as reserved (see `store::pages::Reservation`).
    pub fn uncount_reservations(&self) {
        for f in &self.filters {
            f.data.uncount_reservation();
        }
    }

    /// The scalar fields as a header.
    pub fn header(&self) -> CuckooHeader {
        CuckooHeader {
            num_items: self.num_items,
            num_buckets: self.num_buckets,
            num_deletes: self.num_deletes,
            num_filters: self.filters.len() as u64,
            bucket_size: self.bucket_size as u64,
            max_iterations: self.max_iterations as u64,
            expansion: self.expansion as u64,
        }
    }

    /// Total bytes of all sub-filters.
    pub fn data_bytes(&self) -> u64 {
        self.filters.iter().map(|f| f.len()).sum()
    }

    /// `CF.INFO`'s `Size` and the type's memory-usage figure: RedisBloom's 64-bit struct sizes
    /// `40 + 16 × numFilters + Σ bytes`, whatever our own layout costs.
    pub fn info_size(&self) -> u64 {
        40 + 16 * self.filters.len() as u64 + self.data_bytes()
    }

    /// The type's figure for `MEMORY USAGE`: [`CuckooFilter::info_size`] plus 6. The server adds
    /// `key length + 40` for the key and its entry; with these 6 bytes a two-byte key such as the
    /// RedisBloom suite's `bf` totals `Size + 48`, the figure that suite expects on Redis ≥ 7
    /// (`sizeof(robj)` 16 + dict entry 24 + the key's 8-byte sds allocation).
    pub fn memory_usage(&self) -> u64 {
        self.info_size() + 6
    }

    /// Bytes this process really holds for the filter (page contents and tables), for diagnostics.
    pub fn resident_bytes(&self) -> u64 {
        let tables: u64 = self.filters.iter().map(|f| f.data.page_table_bytes()).sum();
        std::mem::size_of::<Self>() as u64
            + tables
            + self.filters.iter().map(|f| f.data.resident()).sum::<u64>()
    }

    /// The `CF.DEBUG` line.
    pub fn debug_string(&self) -> String {
        format!(
            "bktsize:{} buckets:{} items:{} deletes:{} filters:{} max_iterations:{} expansion:{}",
            self.bucket_size,
            self.num_buckets,
            self.num_items,
            self.num_deletes,
            self.filters.len(),
            self.max_iterations,
            self.expansion
        )
    }

    // -- operations ------------------------------------------------------------------------------

    /// `CF.ADD` / `CF.INSERT` (cuckoo.md §3.2).
    pub fn insert(&mut self, item: &[u8]) -> InsertOutcome {
        self.insert_hashed(&Hashed::new(item))
    }

    /// `CF.ADDNX` / `CF.INSERTNX` (§3.3).
    pub fn insert_unique(&mut self, item: &[u8]) -> InsertOutcome {
        let h = Hashed::new(item);
        if self.contains_hashed(&h) {
            return InsertOutcome::Exists;
        }
        self.insert_hashed(&h)
    }

    /// `CF.EXISTS` (§3.4).
    pub fn contains(&self, item: &[u8]) -> bool {
        self.contains_hashed(&Hashed::new(item))
    }

    /// `CF.COUNT` (§3.4): a coinciding bucket pair is counted twice, as in RedisBloom.
    pub fn count(&self, item: &[u8]) -> u64 {
        self.count_hashed(&Hashed::new(item))
    }

    /// [`CuckooFilter::count`] of an item already hashed (by [`CuckooFilter::prefetch_item`]).
    pub fn count_hashed(&self, h: &Hashed) -> u64 {
        let b = self.bucket_size as u64;
        let bu = b as usize;
        self.filters
            .iter()
            .map(|f| {
                f.count_fp(bucket_offset(h.h1, f.num_buckets, b), bu, h.fp)
                    + f.count_fp(bucket_offset(h.h2, f.num_buckets, b), bu, h.fp)
            })
            .sum()
    }

    /// Starts the cache misses of `item`'s two buckets in every sub-filter, for a pipelined
    /// batch that prefetches its CF.ADD / CF.EXISTS items before running them
    /// (`commands::prefetch_keys`), so the commands' misses overlap. Nothing for a filter small
    /// enough to stay in the core's L2. A hint: nothing is read into the program.
    /// The item's hash if it started any misses, for [`CuckooFilter::contains_hashed`] and
    /// [`CuckooFilter::insert_hashed`] (the command then does not hash it again).
    pub fn prefetch_item(&self, item: &[u8]) -> Option<Hashed> {
        // A chain grown here has its largest sub-filter last (expansion ≥ 1), so newest × count
        // bounds the total from above: O(1), where summing every sub-filter's length cost a
        // pipelined CF.ADD on a 20-sub-filter chain ~60 instructions per request. A loaded chain
        // that breaks the order only loses this hint.
        let bound = self.filters.last().map_or(0, |newest| {
            newest.len().saturating_mul(self.filters.len() as u64)
        });
        if bound <= super::bloom::PREFETCH_MIN_BYTES {
            return None;
        }
        let h = Hashed::new(item);
        let b = self.bucket_size as u64;
        for f in &self.filters {
            for off in [
                bucket_offset(h.h1, f.num_buckets, b),
                bucket_offset(h.h2, f.num_buckets, b),
            ] {
                if let Some(bucket) = f.data.slice(off, 1) {
                    super::prefetch(bucket.as_ptr());
                }
            }
        }
        Some(h)
    }

    /// `CF.DEL` (§3.5). Returns whether a fingerprint was removed.
    pub fn delete(&mut self, item: &[u8]) -> bool {
        let h = Hashed::new(item);
        let b = self.bucket_size as u64;
        let bu = b as usize;
        let mut hit = None;
        for (i, f) in self.filters.iter().enumerate().rev() {
            let slot = f
                .find_fp(bucket_offset(h.h1, f.num_buckets, b), bu, h.fp)
                .or_else(|| f.find_fp(bucket_offset(h.h2, f.num_buckets, b), bu, h.fp));
            if let Some(off) = slot {
                hit = Some((i, off));
                break;
            }
        }
        let Some((i, off)) = hit else {
            return false;
        };
        self.filters[i].data.set(off, 0);
        self.num_items = self.num_items.wrapping_sub(1);
        self.num_deletes = self.num_deletes.wrapping_add(1);
        if self.filters.len() > 1
            && (self.num_deletes as f64) > (self.num_items as f64) * DELETE_COMPACT_RATIO
        {
            self.compact(false);
        }
        true
    }

    /// Compaction (§3.6): moves fingerprints from newer sub-filters into older ones, frees the newest
    /// sub-filter when it empties, and resets `numDeletes`. `cont` keeps going past a sub-filter that
    /// could not be emptied (`CF.COMPACT`); DEL's automatic run stops there.
    pub fn compact(&mut self, cont: bool) {
        let start = self.filters.len();
        for f in (1..start).rev() {
            let ok = self.compact_one(f);
            if ok && f == self.filters.len() - 1 {
                self.filters.pop();
            }
            if !ok && !cont {
                break;
            }
        }
        self.num_deletes = 0;
    }

    /// Tries to move every fingerprint of sub-filter `f` into sub-filters `0..f`; true if all moved.
    fn compact_one(&mut self, f: usize) -> bool {
        let b = self.bucket_size as u64;
        let (older, rest) = self.filters.split_at_mut(f);
        let cur = &mut rest[0];
        let mut ok = true;
        for p in 0..cur.data.page_count() {
            if cur.data.allocated_page(p).is_none() {
                continue; // all zeroes: nothing to move
            }
            let base = p as u64 * cur.data.page_len();
            for w in 0..cur.data.page_size(p) {
                let off = base + w as u64;
                let q = cur.data.get(off);
                if q == 0 {
                    continue;
                }
                let h1 = off / b;
                let h2 = alt_hash(q, h1);
                let target = older
                    .iter_mut()
                    .find_map(|g| g.find_available(h1, h2, b).map(|slot| (g, slot)));
                match target {
                    Some((g, slot)) => {
                        g.data.set(slot, q);
                        cur.data.set(off, 0);
                    }
                    None => ok = false,
                }
            }
        }
        ok
    }

    /// [`CuckooFilter::contains`] of an item already hashed (by [`CuckooFilter::prefetch_item`]).
    pub fn contains_hashed(&self, h: &Hashed) -> bool {
        let b = self.bucket_size as u64;
        self.filters.iter().any(|f| f.contains(h, b))
    }

    /// [`CuckooFilter::insert`] of an item already hashed (by [`CuckooFilter::prefetch_item`]).
    pub fn insert_hashed(&mut self, h: &Hashed) -> InsertOutcome {
        let b = self.bucket_size as u64;
        // Step 1 → 2 → grow → step 1 again: the fresh sub-filter always has room, so this loop runs at
        // most twice; the bound documents that and guards against a logic error spinning forever.
        for _ in 0..3 {
            for f in self.filters.iter_mut().rev() {
                if let Some(slot) = f.find_available(h.h1, h.h2, b) {
                    f.data.set(slot, h.fp);
                    self.num_items = self.num_items.wrapping_add(1);
                    return InsertOutcome::Inserted;
                }
            }
            if self.kick_out(h) {
                self.num_items = self.num_items.wrapping_add(1);
                return InsertOutcome::Inserted;
            }
            if self.expansion == 0 {
                return InsertOutcome::NoSpace;
            }
            if !self.grow() {
                return InsertOutcome::AllocFailed;
            }
        }
        InsertOutcome::AllocFailed
    }

    /// The eviction walk of §3.2 step 2 in the newest sub-filter, with 64-bit offsets. Undoes itself
    /// completely when it fails.
    fn kick_out(&mut self, h: &Hashed) -> bool {
        let b = self.bucket_size as u64;
        let bu = b as usize;
        let max_iter = self.max_iterations;
        let Some(f) = self.filters.last_mut() else {
            return false;
        };
        let n = f.num_buckets;
        let mut victim: u64 = 0;
        let mut i = h.h1 % n;
        let mut carried = h.fp;
        for _ in 0..max_iter {
            let off = i * b + victim;
            let evicted = f.data.get(off);
            f.data.set(off, carried);
            carried = evicted;
            i = alt_hash(carried, i) % n;
            if let Some(slot) = f.free_slot(i * b, bu) {
                f.data.set(slot, carried);
                return true;
            }
            victim = (victim + 1) % b;
        }
        for _ in 0..max_iter {
            victim = (victim + b - 1) % b;
            i = alt_hash(carried, i) % n;
            let off = i * b + victim;
            let evicted = f.data.get(off);
            f.data.set(off, carried);
            carried = evicted;
        }
        false
    }

    /// Adds sub-filter `numFilters` with `numBuckets × expansion^numFilters` buckets.
    fn grow(&mut self) -> bool {
        let i = self.filters.len() as u64;
        if i >= MAX_FILTERS {
            return false;
        }
        let Some(n) = u32::try_from(i)
            .ok()
            .and_then(|i| (self.expansion as u64).checked_pow(i))
            .and_then(|p| p.checked_mul(self.num_buckets))
            .filter(|&n| n != 0 && n < MAX_BUCKETS)
        else {
            return false;
        };
        let b = self.bucket_size as u64;
        let fits = n
            .checked_mul(b)
            .and_then(|bytes| bytes.checked_add(self.data_bytes()))
            .is_some_and(|t| t <= MAX_FILTER_BYTES);
        if !fits || self.filters.try_reserve(1).is_err() {
            return false;
        }
        match SubFilter::zeroed(n, b) {
            Some(sub) => {
                self.filters.push(sub);
                true
            }
            None => false,
        }
    }

    // -- SCANDUMP / LOADCHUNK --------------------------------------------------------------------

    /// One `CF.SCANDUMP` step for a non-negative `pos` (cuckoo.md §4.9).
    pub fn scandump(&self, pos: u64) -> DumpChunk {
        if self.num_items == 0 {
            return DumpChunk::End;
        }
        if pos == 0 {
            return DumpChunk::Data {
                next: 1,
                bytes: self.header().to_bytes().to_vec(),
            };
        }
        let mut offset = pos - 1;
        for f in &self.filters {
            let size = f.len();
            if offset < size {
                // A sub-filter up to 16 MiB is sent whole whatever the offset (RedisBloom quirk).
                let (start, len) = if size <= MAX_CHUNK {
                    (0, size)
                } else {
                    (offset, (size - offset).min(MAX_CHUNK))
                };
                let mut bytes = vec![0u8; len as usize];
                f.data.read_into(start, &mut bytes);
                return DumpChunk::Data {
                    next: pos.saturating_add(len),
                    bytes,
                };
            }
            offset -= size;
        }
        DumpChunk::End
    }

    /// Loads one `CF.LOADCHUNK` data chunk (position ≠ 1) (cuckoo.md §4.10): the chunk ends just
    /// before `pos − 1`, and must lie inside a single sub-filter.
    pub fn load_chunk(&mut self, pos: i64, data: &[u8]) -> Result<(), ChunkError> {
        let len = data.len() as u64;
        if len == 0 || pos <= 0 {
            return Err(ChunkError);
        }
        let pos = pos as u64;
        if pos - 1 < len {
            return Err(ChunkError);
        }
        let mut offset = pos - len - 1;
        for f in &mut self.filters {
            let size = f.len();
            if offset < size {
                if offset + len > size {
                    return Err(ChunkError);
                }
                f.data.write_from(offset, data);
                return Ok(());
            }
            offset -= size;
        }
        Err(ChunkError)
    }
}

/// Byte length of a sub-filter of `num_buckets` buckets of `bucket_size` slots, `None` when the bucket
/// count is 0, reaches 2^56, or the length exceeds [`MAX_FILTER_BYTES`]. RDB loaders check a data
/// string's announced length against this before reading it.
pub fn sub_filter_len(num_buckets: u64, bucket_size: u64) -> Option<u64> {
    if num_buckets == 0 || num_buckets >= MAX_BUCKETS {
        return None;
    }
    num_buckets
        .checked_mul(bucket_size)
        .filter(|&l| l <= MAX_FILTER_BYTES)
}

#[cfg(test)]
mod tests;
