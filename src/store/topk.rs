//! Top-K sketches (HeavyKeeper), bucket for bucket and slot for slot the same as RedisBloom's
//! `TopK-TYPE`.
//!
//! # The idea
//!
//! HeavyKeeper (Gong et al., "HeavyKeeper: An Accurate Algorithm for Finding Top-k Elephant Flows",
//! USENIX ATC 2018) keeps the `k` most frequent items of a stream in a min-heap, fed by a
//! `width × depth` grid of buckets that each hold a fingerprint and a count. An item's buckets (one
//! per row) count it while they hold its fingerprint; a bucket held by another item is **decayed**
//! instead: each unit of the increment decrements it with probability `decay^count`, and once it
//! reaches 0 the new item takes it over with what is left of the increment. Big counts are thus
//! almost never stolen, while small ones churn. The largest bucket count of the item decides
//! whether it enters (or stays in) the heap.
//!
//! ```text
//!   item x ── fp = MurmurHash2(x, 1919)
//!          └─ row r: column MurmurHash2(x, r) mod width
//!
//!   buckets  row 0  [ fp:cnt | fp:cnt | ... ]         heap (k slots, a min-heap on count,
//!            row 1  [ fp:cnt | fp:cnt | ... ]          slot 0 = the smallest)
//!            ...                                     [ item:cnt | item:cnt | ... ]
//! ```
//!
//! # Insert (topk.md §6)
//!
//! With `f = fp(x)`, `heapMin` = slot 0's count before anything changes, `maxCount = 0`, for each
//! row's bucket `b`: an empty bucket (`count == 0`) takes `(f, n)`; a bucket with fingerprint `f`
//! adds `n` (wrapping modulo 2³²); any other bucket is decayed one unit at a time for
//! `remaining = n … 1`, and if it reaches 0 it takes `(f, remaining)`. `maxCount` is the largest
//! count the item's buckets reached this way. Then, if `maxCount ≥ heapMin`: an item already in the
//! heap gets `maxCount` (even a lower one) and is sifted down; otherwise slot 0 is overwritten by
//! `(f, x, maxCount)` and sifted down, and its former item is the **expelled** one.
//!
//! The heap operations are RedisBloom's exactly (§7): sift-down moves an entry past an **equal**
//! child at the first level only, entries are never sifted up (so the array is not always a valid
//! heap), and the search scans the slots from `k − 1` down to 0.
//!
//! # Decay and what is random (topk.md §6.3, §9)
//!
//! `P(decrement at count c) = table[c]` for `c < 256`, else `table[255]^⌊c/255⌋ · table[c mod 255]`,
//! with `table[i] = pow(decay, i)` at RESERVE and repeated products after a load. RedisBloom draws
//! `rand() / 2147483647.0` from the C library's process-wide generator, whose state no client can
//! know; its replies are reproducible only when no draw can go either way. hyperbloom keeps its own
//! 31-bit generator per sketch (SplitMix64, fixed seed) and compares the same way, but decides
//! `p ≥ 1` (decrement) and `p ≤ 0` or NaN (keep) **without drawing**, so every deterministic case of
//! RedisBloom is deterministic here too and the generator only serves the genuinely random ones.
//!
//! # Storage
//!
//! Buckets are a flat `Vec` of `(fp, count)`; heap slots hold `fp`, `count` and the item bytes (or
//! none for an empty slot). Every size is checked (`8·width·depth` bucket bytes and `24·k` heap
//! bytes, in checked arithmetic, against the allocation ceiling) and reserved fallibly before
//! anything is built, so `TOPK.RESERVE t 4294967295` is an error, not an abort.
//!
//! # RDB (`TopK-TYPE`, encoding version 0; topk.md §12)
//!
//! ```text
//! UINT k  UINT width  UINT depth  DOUBLE decay
//! STRING buckets: width·depth × (u32 fp, u32 count), LE, row-major
//! STRING heap:    k × (u32 fp, u32 itemlen, u64 item pointer, u32 count, u32 padding)
//! k × STRING:     each slot's item up to its first NUL, plus a NUL (a lone NUL for an empty slot)
//! ```
//!
//! The pointer is the saving process's address of the item: hyperbloom writes 0 there and in the
//! padding, and never reads either. [`TopK::from_raw_parts`] rejects dimensions of 0 or above
//! 2³²−1, a bucket or heap string of the wrong length, and an item string without its final NUL; the
//! item is the bytes before the first NUL (so, as in RedisBloom's current line, an item that held a
//! NUL keeps its old fingerprint and no longer matches, and the empty item `""` comes back as an
//! empty slot that keeps its fingerprint and count).

use super::bloom::alloc_ceiling;
use super::murmur::murmur2_32;

/// The fingerprint seed.
pub const FP_SEED: u32 = 1919;
/// Width, depth and decay when RESERVE gives only `k`.
pub const DEFAULT_WIDTH: u32 = 8;
pub const DEFAULT_DEPTH: u32 = 7;
pub const DEFAULT_DECAY: f64 = 0.9;
/// Largest increment TOPK.INCRBY accepts.
pub const MAX_INCREMENT: u32 = 100_000;
const TABLE_LEN: usize = 256;
/// `RAND_MAX` of glibc, the divisor of a draw.
const RAND_MAX: f64 = 2147483647.0;
/// Bytes per heap slot in RedisBloom's layout (and in the RDB heap string).
pub const HEAP_SLOT_BYTES: u64 = 24;
/// Bytes per bucket.
pub const BUCKET_BYTES: u64 = 8;

/// The sketch could not be allocated: `ERR Insufficient memory to create topk data structure`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfMemory;

/// Why an RDB value was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawPartsError {
    /// k, width or depth is 0 or above 2³²−1.
    Dimension,
    /// The sizes need more memory than the ceiling allows.
    TooLarge,
    BucketsLength {
        got: u64,
        want: u64,
    },
    HeapLength {
        got: u64,
        want: u64,
    },
    ItemCount {
        got: u64,
        want: u64,
    },
    /// An item string that does not end with NUL.
    ItemNotTerminated(usize),
}

impl std::fmt::Display for RawPartsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RawPartsError::Dimension => f.write_str("k, width or depth out of range"),
            RawPartsError::TooLarge => f.write_str("sketch too large"),
            RawPartsError::BucketsLength { got, want } => {
                write!(f, "buckets string is {got} bytes, expected {want}")
            }
            RawPartsError::HeapLength { got, want } => {
                write!(f, "heap string is {got} bytes, expected {want}")
            }
            RawPartsError::ItemCount { got, want } => {
                write!(f, "{got} item strings, expected {want}")
            }
            RawPartsError::ItemNotTerminated(i) => write!(f, "item string {i} lacks its NUL"),
        }
    }
}

/// One bucket: a fingerprint and its count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bucket {
    pub fp: u32,
    pub count: u32,
}

/// One heap slot. `item` is `None` for an empty slot (and for `""` after a reload, §12.3).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Slot {
    pub fp: u32,
    pub count: u32,
    pub item: Option<Box<[u8]>>,
}

impl Slot {
    fn item_bytes(&self) -> &[u8] {
        self.item.as_deref().unwrap_or(&[])
    }
}

/// The sketch's own uniform 31-bit generator (SplitMix64), standing in for glibc's `rand()`.
/// Compares equal to any other: it is not part of the sketch's value.
#[derive(Debug, Clone)]
struct Rng(u64);

impl PartialEq for Rng {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Rng {
    fn new() -> Rng {
        Rng(0x853c49e6748fea9b)
    }

    /// A value in `0 ..= 2³¹−1`, like `rand()`.
    fn next_31(&mut self) -> u32 {
        (super::splitmix64(&mut self.0) >> 33) as u32
    }
}

/// A Top-K sketch (see the module essay).
#[derive(Clone, PartialEq)]
pub struct TopK {
    k: u32,
    width: u32,
    depth: u32,
    decay: f64,
    buckets: Vec<Bucket>,
    heap: Vec<Slot>,
    table: Box<[f64; TABLE_LEN]>,
    rng: Rng,
}

/// Everything but the decay table (256 numbers derived from `decay`).
impl std::fmt::Debug for TopK {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopK")
            .field("k", &self.k)
            .field("width", &self.width)
            .field("depth", &self.depth)
            .field("decay", &self.decay)
            .field("buckets", &self.buckets)
            .field("heap", &self.heap)
            .finish()
    }
}

/// Item bytes as RedisBloom sends them: a C string, cut at the first NUL.
pub fn c_string(item: &[u8]) -> &[u8] {
    match item.iter().position(|&b| b == 0) {
        Some(n) => &item[..n],
        None => item,
    }
}

/// Allocates `n` default values, or fails without aborting.
fn try_vec<T: Clone + Default>(n: u64) -> Result<Vec<T>, OutOfMemory> {
    let n = usize::try_from(n).map_err(|_| OutOfMemory)?;
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| OutOfMemory)?;
    v.resize(n, T::default());
    Ok(v)
}

/// Bucket count and heap bytes if the sketch fits under the ceiling.
fn sizes(k: u32, width: u32, depth: u32) -> Option<u64> {
    let cells = (width as u64).checked_mul(depth as u64)?;
    let bytes = cells
        .checked_mul(BUCKET_BYTES)?
        .checked_add((k as u64).checked_mul(HEAP_SLOT_BYTES)?)?;
    (bytes <= alloc_ceiling()).then_some(cells)
}

impl TopK {
    /// A fresh sketch (all buckets and slots empty), as TOPK.RESERVE makes it. Parameters are
    /// validated by the caller (`k, width, depth ≥ 1`, `0 < decay ≤ 1`).
    pub fn new(k: u32, width: u32, depth: u32, decay: f64) -> Result<TopK, OutOfMemory> {
        let cells = sizes(k, width, depth).ok_or(OutOfMemory)?;
        let mut table = Box::new([0.0; TABLE_LEN]);
        for (i, t) in table.iter_mut().enumerate() {
            *t = decay.powf(i as f64);
        }
        Ok(TopK {
            k,
            width,
            depth,
            decay,
            buckets: try_vec(cells)?,
            heap: try_vec(k as u64)?,
            table,
            rng: Rng::new(),
        })
    }

    /// Rebuilds a sketch from its RDB fields, validating every field against the others before
    /// anything is allocated or interpreted (see the essay).
    pub fn from_raw_parts(
        k: u64,
        width: u64,
        depth: u64,
        decay: f64,
        buckets: &[u8],
        heap: &[u8],
        items: &[Vec<u8>],
    ) -> Result<TopK, RawPartsError> {
        let dim = |v: u64| u32::try_from(v).ok().filter(|&v| v >= 1);
        let (Some(k), Some(width), Some(depth)) = (dim(k), dim(width), dim(depth)) else {
            return Err(RawPartsError::Dimension);
        };
        let cells = sizes(k, width, depth).ok_or(RawPartsError::TooLarge)?;
        let want = cells * BUCKET_BYTES;
        if buckets.len() as u64 != want {
            return Err(RawPartsError::BucketsLength {
                got: buckets.len() as u64,
                want,
            });
        }
        let want = k as u64 * HEAP_SLOT_BYTES;
        if heap.len() as u64 != want {
            return Err(RawPartsError::HeapLength {
                got: heap.len() as u64,
                want,
            });
        }
        if items.len() as u64 != k as u64 {
            return Err(RawPartsError::ItemCount {
                got: items.len() as u64,
                want: k as u64,
            });
        }
        let mut s = TopK::new(k, width, depth, decay).map_err(|_| RawPartsError::TooLarge)?;
        let u32_at =
            |b: &[u8], at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        for (b, raw) in s.buckets.iter_mut().zip(buckets.chunks_exact(8)) {
            *b = Bucket {
                fp: u32_at(raw, 0),
                count: u32_at(raw, 4),
            };
        }
        for (i, ((slot, raw), item)) in s
            .heap
            .iter_mut()
            .zip(heap.chunks_exact(HEAP_SLOT_BYTES as usize))
            .zip(items)
            .enumerate()
        {
            if item.last() != Some(&0) {
                return Err(RawPartsError::ItemNotTerminated(i));
            }
            let bytes = c_string(item);
            *slot = Slot {
                fp: u32_at(raw, 0),
                count: u32_at(raw, 16),
                item: (!bytes.is_empty()).then(|| bytes.into()),
            };
        }
        // A loaded sketch's table is built by repeated products (§6.3).
        s.table[0] = 1.0;
        for i in 1..TABLE_LEN {
            s.table[i] = s.table[i - 1] * decay;
        }
        Ok(s)
    }

    pub fn k(&self) -> u32 {
        self.k
    }

    pub fn width(&self) -> u32 {
        self.width
    }

    pub fn depth(&self) -> u32 {
        self.depth
    }

    pub fn decay(&self) -> f64 {
        self.decay
    }

    pub fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }

    pub fn heap(&self) -> &[Slot] {
        &self.heap
    }

    #[inline]
    fn bucket_index(&self, item: &[u8], r: u32) -> usize {
        r as usize * self.width as usize + (murmur2_32(item, r) % self.width) as usize
    }

    fn decay_probability(&self, c: u32) -> f64 {
        if (c as usize) < TABLE_LEN {
            self.table[c as usize]
        } else {
            self.table[255].powf((c / 255) as f64) * self.table[(c % 255) as usize]
        }
    }

    /// Whether a bucket at count `c` loses a unit: `rand()/RAND_MAX < p`, decided without a draw
    /// where no draw could change the outcome of RedisBloom's comparison except with
    /// probability 2⁻³¹ (`p ≥ 1`), or at all (`p ≤ 0`, NaN).
    fn decays(&mut self, c: u32) -> bool {
        let p = self.decay_probability(c);
        if p >= 1.0 {
            true
        } else if p > 0.0 {
            (self.rng.next_31() as f64 / RAND_MAX) < p
        } else {
            false
        }
    }

    /// The slot holding `item`, scanning from the last slot down (§7.2).
    fn find(&self, fp: u32, item: &[u8]) -> Option<usize> {
        (0..self.heap.len())
            .rev()
            .find(|&i| self.heap[i].fp == fp && self.heap[i].item_bytes() == item)
    }

    /// RedisBloom's sift-down from slot `s` (§7.1), ties included.
    fn sift_down(&mut self, mut s: usize) {
        let n = self.heap.len();
        if n < 2 || s > (n - 2) / 2 {
            return;
        }
        let last_parent = (n - 2) / 2;
        let smaller_child = |heap: &[Slot], c: usize| {
            if c + 1 < n && heap[c].count > heap[c + 1].count {
                c + 1
            } else {
                c
            }
        };
        let mut c = smaller_child(&self.heap, 2 * s + 1);
        if self.heap[c].count > self.heap[s].count {
            return;
        }
        let moving = std::mem::take(&mut self.heap[s]);
        loop {
            self.heap[s] = std::mem::take(&mut self.heap[c]);
            s = c;
            if c > last_parent {
                break;
            }
            c = smaller_child(&self.heap, 2 * c + 1);
            if self.heap[c].count >= moving.count {
                break;
            }
        }
        self.heap[s] = moving;
    }

    /// Inserts `item` with increment `n` (ADD: 1; INCRBY: 0 ..= 100000). Returns the expelled
    /// slot's item: `Some(None)` for an expelled empty slot, `None` when nothing was replaced.
    pub fn insert(&mut self, item: &[u8], n: u32) -> Option<Option<Box<[u8]>>> {
        let fp = murmur2_32(item, FP_SEED);
        let heap_min = self.heap[0].count;
        let mut max_count = 0u32;
        for r in 0..self.depth {
            let i = self.bucket_index(item, r);
            let b = self.buckets[i];
            if b.count == 0 {
                self.buckets[i] = Bucket { fp, count: n };
                max_count = max_count.max(n);
            } else if b.fp == fp {
                let count = b.count.wrapping_add(n);
                self.buckets[i].count = count;
                max_count = max_count.max(count);
            } else {
                let mut count = b.count;
                for remaining in (1..=n).rev() {
                    if self.decays(count) {
                        count -= 1;
                    }
                    if count == 0 {
                        self.buckets[i] = Bucket {
                            fp,
                            count: remaining,
                        };
                        max_count = max_count.max(remaining);
                        break;
                    }
                }
                if count != 0 {
                    self.buckets[i].count = count;
                }
            }
        }
        if max_count < heap_min {
            return None;
        }
        if let Some(at) = self.find(fp, item) {
            self.heap[at].count = max_count;
            self.sift_down(at);
            return None;
        }
        let expelled = std::mem::replace(
            &mut self.heap[0],
            Slot {
                fp,
                count: max_count,
                item: Some(item.into()),
            },
        );
        self.sift_down(0);
        Some(expelled.item)
    }

    /// Whether `item` is in the heap (TOPK.QUERY).
    pub fn contains(&self, item: &[u8]) -> bool {
        self.find(murmur2_32(item, FP_SEED), item).is_some()
    }

    /// TOPK.COUNT (§8.2): the largest count among the item's buckets holding its fingerprint;
    /// when the item is in the heap, only buckets at or above slot 0's count qualify.
    pub fn count(&self, item: &[u8]) -> u32 {
        let fp = murmur2_32(item, FP_SEED);
        let floor = if self.find(fp, item).is_some() {
            self.heap[0].count
        } else {
            0
        };
        (0..self.depth)
            .map(|r| self.buckets[self.bucket_index(item, r)])
            .filter(|b| b.fp == fp && b.count >= floor)
            .map(|b| b.count)
            .max()
            .unwrap_or(0)
    }

    /// TOPK.LIST (§8.1): the slots by count, descending, ties in slot order, up to the first
    /// count of 0.
    pub fn list(&self) -> Vec<&Slot> {
        let mut slots: Vec<&Slot> = self.heap.iter().collect();
        slots.sort_by_key(|s| std::cmp::Reverse(s.count));
        let end = slots
            .iter()
            .position(|s| s.count == 0)
            .unwrap_or(slots.len());
        slots.truncate(end);
        slots
    }

    /// The RDB buckets string.
    pub fn buckets_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.buckets.len() * 8);
        for b in &self.buckets {
            out.extend_from_slice(&b.fp.to_le_bytes());
            out.extend_from_slice(&b.count.to_le_bytes());
        }
        out
    }

    /// The RDB heap string, with zero pointers and padding.
    pub fn heap_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.heap.len() * HEAP_SLOT_BYTES as usize);
        for s in &self.heap {
            out.extend_from_slice(&s.fp.to_le_bytes());
            out.extend_from_slice(&(s.item_bytes().len() as u32).to_le_bytes());
            out.extend_from_slice(&[0; 8]);
            out.extend_from_slice(&s.count.to_le_bytes());
            out.extend_from_slice(&[0; 4]);
        }
        out
    }

    /// Slot `i`'s RDB item string: the item up to its first NUL, plus a NUL.
    pub fn item_string(&self, i: usize) -> Vec<u8> {
        let mut v = c_string(self.heap[i].item_bytes()).to_vec();
        v.push(0);
        v
    }

    /// `MEMORY USAGE`'s type figure (both lines): the C struct with its decay table, the buckets
    /// and the heap slots; item bytes are not counted.
    pub fn memory_usage(&self) -> u64 {
        2088 + BUCKET_BYTES * self.width as u64 * self.depth as u64
            + HEAP_SLOT_BYTES * self.k as u64
    }
}

#[cfg(test)]
mod tests;
