//! HyperLogLog: Redis's `PF*` string format, byte for byte.
//!
//! # The idea
//!
//! A HyperLogLog estimates how many distinct elements a stream holds using a fixed, small amount of
//! memory. Each element is hashed to 64 bits. The low 14 bits pick one of m = 16384 *registers*; the
//! remaining 50 bits are read as a geometric trial: the number of trailing zero bits plus one (1..51)
//! is the "count", and a register only ever keeps the largest count it has seen. A register holding
//! k says "some element that landed here showed a run of k−1 zeros", which happens about once in 2^k
//! elements; combining all registers gives the estimate, with a standard error of 1.04/√m ≈ 0.81 %.
//!
//! References:
//! - P. Flajolet, É. Fusy, O. Gandouet, F. Meunier, "HyperLogLog: the analysis of a near-optimal
//!   cardinality estimation algorithm", AofA 2007.
//! - S. Heule, M. Nunkesser, A. Hall, "HyperLogLog in Practice", EDBT 2013 (the sparse idea).
//! - O. Ertl, "New cardinality estimation algorithms for HyperLogLog sketches", arXiv:1702.01284
//!   (the estimator below, which Redis uses since 5.0).
//!
//! # Why the bytes matter
//!
//! In Redis an HLL is an ordinary string. Clients `GET` it, copy it to another server, `SET` it back
//! and compare it. hyperbloom therefore does not merely count the same: after any sequence of PFADD,
//! PFCOUNT and PFMERGE it holds the *same bytes* Redis 7 would hold. Every rule below that looks
//! arbitrary (the five-step merge scan, the promotion test, the truncated XZERO) is there because
//! Redis does exactly that, and a different choice would produce a different string.
//!
//! # The header (16 bytes)
//!
//! ```text
//! +------+---+-----+----------+
//! | HYLL | E | N/U | Cardin.  |
//! +------+---+-----+----------+
//!  0..4   4   5..8  8..16
//! ```
//!
//! `E` is the encoding, 0 dense or 1 sparse. The three unused bytes are written as zero and accepted
//! with any value. The cardinality is a little-endian u64 cache of the last estimate; the top bit of
//! its last byte (byte 15) set means "stale, recompute". A cached value can therefore never reach
//! 2^63, which is fine: no real stream has that many distinct elements.
//!
//! # Dense encoding
//!
//! 16384 registers of 6 bits, packed least-significant bit first, 12288 bytes after the header, so a
//! dense value is always exactly 12304 bytes:
//!
//! ```text
//! +--------+--------+--------+------//
//! |11000000|22221111|33333322|55444444 ....
//! +--------+--------+--------+------//
//! ```
//!
//! Register i lives in bits [6i, 6i+6) of the stream. Three bytes hold four registers, six bytes
//! eight: that is what the fast paths here exploit, moving eight registers with a handful of shifts
//! and masks on one u64 instead of eight separate bit extractions.
//!
//! # Sparse encoding
//!
//! Most registers of a small set are zero, so a run-length code is far smaller. Three opcodes:
//!
//! ```text
//! ZERO   00xxxxxx           x+1 zero registers (1..64)
//! XZERO  01xxxxxx yyyyyyyy  (x<<8 | y)+1 zero registers (1..16384)
//! VAL    1vvvvvxx           xx+1 registers (1..4) holding vvvvv+1 (1..32)
//! ```
//!
//! The runs must cover exactly 16384 registers in order. A new key is the header plus one XZERO of
//! 16384 (`7f ff`), 18 bytes. Values above 32 cannot be expressed; setting one converts the value to
//! dense ("promotion"), as does an update that would push the string past `hll-sparse-max-bytes`
//! (3000 by default). Promotion is one way: a dense value never becomes sparse again.
//!
//! An XZERO whose second byte would lie past the end of the string reads that byte as 0, because
//! Redis reads the string's terminating NUL there. `header + 7f fe 40` is a valid empty HLL.
//!
//! # Invariants and corruption
//!
//! - A value is an HLL when it is at least 16 bytes, starts with `HYLL`, has encoding 0 or 1, and,
//!   if dense, is exactly 12304 bytes ([`validate`]). Nothing else is checked up front.
//! - A sparse body is checked whenever it is decoded: every opcode must keep the running register
//!   index at or below 16384 *before* it is applied, and the final index must be exactly 16384. This
//!   is the bound whose absence was CVE-2025-32023 (chains of zero runs overflowing a 32-bit index,
//!   after which a VAL wrote out of bounds). Here the index is 64-bit, every write is bounds-checked
//!   by construction, and the check makes such values [`HllError::Corrupt`].
//! - No input, however crafted, panics or indexes out of bounds: every function re-validates the
//!   header and reads the body through checked accessors.
//!
//! # The estimator
//!
//! The histogram `C[k]` of register values feeds Ertl's estimator, computed in f64 in exactly Redis's
//! order (see [`estimate`]), so the integer counts, and the cache bytes written back by PFCOUNT, are
//! identical. Register values 52..63 can only come from crafted dense strings; they are counted in
//! the histogram but the formula ignores them, as Redis's does.
//!
//! # The sparse size threshold
//!
//! `hll-sparse-max-bytes` (default 3000) trades memory for time: a sparse update walks the opcodes
//! from the start and may shift the tail of the string, so its cost grows with the string, while a
//! dense update is a constant-time bit operation on 12 KiB. Around 3000 bytes (a few thousand
//! distinct elements) the sparse value still saves three quarters of the memory and its updates
//! still cost only microseconds. The threshold is only consulted when an update would *grow*
//! the string: lowering it leaves longer sparse values alone until their next growth.
//!
//! # Speed
//!
//! The single-key PFCOUNT with a valid cache reads 8 bytes and never touches the registers. For
//! everything that reads all registers the hot loops work on whole groups: eight 6-bit registers
//! are 48 bits of one u64, spread into bytes with three shift-and-mask steps; on x86-64 with SSSE3
//! a `pshufb` does the same for sixteen registers at once (with a scalar fallback elsewhere).
//! Histograms count *pairs* of adjacent registers, which in the dense format are simply the
//! consecutive 12-bit fields of the packed stream, halving the increments. Multi-key PFCOUNT and
//! PFMERGE of dense keys are several times faster than Redis 7's one-register-at-a-time loops
//! while producing identical results.
//!
//! # Map
//!
//! - this file: constants, errors, the header, hashing, element updates, unions;
//! - `dense`: register packing and the bulk unpack/pack/maximum paths;
//! - `sparse`: opcodes, the bounded decoder, the in-place update and promotion;
//! - `estimate`: histograms and the estimator;
//! - `selftest`: PFSELFTEST;
//! - `tests`: unit and property tests.

use std::fmt;

mod dense;
mod estimate;
mod selftest;
mod sparse;
#[cfg(test)]
mod tests;

use dense::*;
use sparse::*;

pub use dense::{pack_dense, unpack_dense};
pub use estimate::{count, count_cached, estimate, histogram, raw_histogram};
pub use selftest::selftest;
pub use sparse::{sparse_debug_string, sparse_decode, sparse_encode, sparse_to_dense};

// ---------------------------------------------------------------------------------------------
// Constants of the format
// ---------------------------------------------------------------------------------------------

/// Bits of the hash used to pick a register.
pub const HLL_P: u32 = 14;
/// Number of registers, 2^14.
pub const REGISTERS: usize = 1 << HLL_P;
/// Bits of the hash left for the geometric count (64 − 14).
const HLL_Q: usize = 64 - HLL_P as usize;
/// Largest value a 6-bit register holds.
const REGISTER_MAX: u8 = 63;
/// Header length, in front of both encodings.
pub const HEADER_LEN: usize = 16;
/// Dense register bytes after the header.
pub const DENSE_BODY_LEN: usize = REGISTERS * 6 / 8;
/// Exact length of a dense value.
pub const DENSE_LEN: usize = HEADER_LEN + DENSE_BODY_LEN;
/// Default of `hll-sparse-max-bytes`.
pub const DEFAULT_SPARSE_MAX_BYTES: u64 = 3000;

const MAGIC: &[u8; 4] = b"HYLL";
const ENC_DENSE: u8 = 0;
const ENC_SPARSE: u8 = 1;
/// Byte 15 holds the top byte of the cache; its top bit marks the cache stale.
const CACHE_INVALID_BYTE: usize = 15;
const CACHE_INVALID_BIT: u8 = 0x80;

const SPARSE_VAL_MAX_VALUE: u8 = 32;
const SPARSE_VAL_MAX_LEN: u64 = 4;
const SPARSE_ZERO_MAX_LEN: u64 = 64;

/// Seed of the element hash (a 32-bit seed, zero-extended).
const HASH_SEED: u64 = 0xadc8_3b19;

/// The registers of one HLL, one byte each: the "raw" form used for unions.
pub type Registers = [u8; REGISTERS];

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// PFADD/PFCOUNT/PFMERGE/PFDEBUG: a string that is not an HLL (note the final period).
pub const ERR_NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
/// Any PF command decoding a corrupt body. Sent without an ERR prefix.
pub const ERR_CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";
/// PFDEBUG on a missing key.
pub const ERR_NO_KEY: &str = "ERR The specified key does not exist";
/// PFDEBUG DECODE on a dense value.
pub const ERR_NOT_SPARSE: &str = "ERR HLL encoding is not sparse";

/// Why an HLL operation refused a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HllError {
    /// The string fails the header checks of [`validate`].
    NotHll,
    /// The header is fine but the body does not decode to exactly 16384 registers.
    Corrupt,
}

impl HllError {
    /// The client-visible text.
    pub fn text(self) -> &'static str {
        match self {
            HllError::NotHll => ERR_NOT_HLL,
            HllError::Corrupt => ERR_CORRUPT,
        }
    }
}

impl fmt::Display for HllError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())
    }
}

impl std::error::Error for HllError {}

/// The two encodings of an HLL string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Dense,
    Sparse,
}

impl Encoding {
    /// The word PFDEBUG ENCODING replies.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Dense => "dense",
            Encoding::Sparse => "sparse",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Header: validation, creation, cache
// ---------------------------------------------------------------------------------------------

/// Checks that `v` is an HLL string (Redis's `isHLLObjectOrReply`) and returns its encoding.
/// A sparse body is *not* decoded here; corruption surfaces when something reads it.
pub fn validate(v: &[u8]) -> Result<Encoding, HllError> {
    if v.len() < HEADER_LEN || &v[0..4] != MAGIC {
        return Err(HllError::NotHll);
    }
    match v[4] {
        ENC_DENSE if v.len() == DENSE_LEN => Ok(Encoding::Dense),
        ENC_SPARSE => Ok(Encoding::Sparse),
        _ => Err(HllError::NotHll),
    }
}

/// A new, empty HLL: sparse, one XZERO over all registers, cache valid at 0 (18 bytes).
/// The PFADD or PFMERGE that creates a key sets the invalid bit afterwards.
pub fn new_sparse() -> Vec<u8> {
    // 32 bytes hold the header, the runs and a handful of registers (a 48-byte malloc chunk; 64
    // cost an 80-byte chunk, per key, for the many tiny HLLs of per-page counting). Larger ones
    // grow by doubling as any Vec.
    let mut v = Vec::with_capacity(32);
    v.extend_from_slice(MAGIC);
    v.extend_from_slice(&[ENC_SPARSE, 0, 0, 0]);
    v.extend_from_slice(&[0; 8]);
    push_zero_run(&mut v, REGISTERS as u64);
    v
}

/// Whether the cached cardinality may be returned as is. `v` must have passed [`validate`];
/// a shorter value reads as stale.
pub fn cache_is_valid(v: &[u8]) -> bool {
    v.get(CACHE_INVALID_BYTE)
        .is_some_and(|b| b & CACHE_INVALID_BIT == 0)
}

/// The cached cardinality, bytes 8..16 little-endian (0 for a value shorter than the header).
pub fn cached_cardinality(v: &[u8]) -> u64 {
    match v.get(8..16) {
        Some(b) => u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        None => 0,
    }
}

/// Marks the cache stale. A no-op on a value shorter than the header.
pub fn invalidate_cache(v: &mut [u8]) {
    if let Some(b) = v.get_mut(CACHE_INVALID_BYTE) {
        *b |= CACHE_INVALID_BIT;
    }
}

fn write_cache(v: &mut [u8], card: u64) {
    if let Some(b) = v.get_mut(8..16) {
        b.copy_from_slice(&card.to_le_bytes());
    }
}

// ---------------------------------------------------------------------------------------------
// Hashing
// ---------------------------------------------------------------------------------------------

/// MurmurHash64A as Redis's hyperloglog.c computes it (blocks read little-endian, the tail folded
/// in with one final multiply); shared with the Bloom filters. The full length is hashed: Redis 7.0
/// truncates lengths to a C `int`, which only matters past 2 GiB, beyond `proto-max-bulk-len`.
pub use super::murmur::murmur64a as murmurhash64a;

/// The register an element lands in and the count it offers (1..=51).
#[inline]
pub fn hash_element(element: &[u8]) -> (usize, u8) {
    let h = murmurhash64a(element, HASH_SEED);
    let index = (h & (REGISTERS as u64 - 1)) as usize;
    // The sentinel bit caps the count at Q+1 = 51 when all 50 remaining bits are zero.
    let rest = (h >> HLL_P) | (1u64 << HLL_Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

// ---------------------------------------------------------------------------------------------
// Updates
// ---------------------------------------------------------------------------------------------

/// Raises register `index` to `count` in any encoding (Redis's `hllDenseSet`/`hllSparseSet`).
/// Returns whether a register changed. Does not set the invalid bit on the dense path.
pub fn set_register(
    v: &mut Vec<u8>,
    index: usize,
    count: u8,
    max_bytes: u64,
) -> Result<bool, HllError> {
    let index = index & (REGISTERS - 1);
    match validate(v)? {
        Encoding::Dense => Ok(dense_raise(&mut v[HEADER_LEN..], index, count)),
        Encoding::Sparse => sparse_set(v, index, count, max_bytes),
    }
}

/// Adds one element (Redis's `hllAdd`). Returns whether a register changed.
#[inline]
pub fn add(v: &mut Vec<u8>, element: &[u8], max_bytes: u64) -> Result<bool, HllError> {
    let (index, count) = hash_element(element);
    set_register(v, index, count, max_bytes)
}

/// PFADD's body over an existing value (or a new one, `created`): adds every element in order,
/// stops at the first corruption (earlier changes stay), and sets the invalid bit when something
/// changed. Returns whether anything was updated, creation included.
pub fn pfadd<'a>(
    v: &mut Vec<u8>,
    elements: impl IntoIterator<Item = &'a [u8]>,
    created: bool,
    max_bytes: u64,
) -> Result<bool, HllError> {
    let mut updated = created;
    let mut enc = validate(v)?;
    for e in elements {
        let (index, count) = hash_element(e);
        let changed = match enc {
            Encoding::Dense => dense_raise(&mut v[HEADER_LEN..], index, count),
            Encoding::Sparse => {
                let c = sparse_set(v, index, count, max_bytes)?;
                if v.get(4) == Some(&ENC_DENSE) {
                    enc = Encoding::Dense;
                }
                c
            }
        };
        updated |= changed;
    }
    if updated {
        invalidate_cache(v);
    }
    Ok(updated)
}

/// PFADD's register updates on a value [`validate`] found dense: raises the registers in place
/// (a dense HLL never changes length or encoding) and marks the cache stale if one changed.
/// Returns whether one did.
pub fn pfadd_dense<'a>(v: &mut [u8], elements: impl IntoIterator<Item = &'a [u8]>) -> bool {
    let Some(body) = v.get_mut(HEADER_LEN..) else {
        return false;
    };
    let mut updated = false;
    for e in elements {
        let (index, count) = hash_element(e);
        updated |= dense_raise(body, index, count);
    }
    if updated {
        invalidate_cache(v);
    }
    updated
}

// ---------------------------------------------------------------------------------------------
// Unions (multi-key PFCOUNT, PFMERGE)
// ---------------------------------------------------------------------------------------------

/// Folds the registers of `v` into `max` (register-wise maximum). Returns the encoding of `v`.
pub fn merge_into(max: &mut Registers, v: &[u8]) -> Result<Encoding, HllError> {
    let enc = validate(v)?;
    match enc {
        Encoding::Dense => dense_max_into(&v[HEADER_LEN..], max),
        Encoding::Sparse => {
            // On corruption `max` is left partly updated; callers discard it with the error.
            walk_sparse(v, |start, run, val| {
                for r in &mut max[start..start + run] {
                    *r = (*r).max(val);
                }
            })?;
        }
    }
    Ok(enc)
}

/// PFMERGE's write: applies the union `max` (which the caller built from every input, the
/// destination included) to the destination `dest`. `any_dense` says whether some input was dense;
/// then the destination becomes dense first. Otherwise registers are set in increasing order through
/// the sparse path, which may promote partway, exactly as Redis orders it (the order fixes the
/// sparse bytes). Sets the invalid bit.
pub fn merge_apply(
    dest: &mut Vec<u8>,
    max: &Registers,
    any_dense: bool,
    max_bytes: u64,
) -> Result<(), HllError> {
    let mut enc = validate(dest)?;
    if any_dense && enc == Encoding::Sparse {
        sparse_to_dense(dest)?;
        enc = Encoding::Dense;
    }
    if enc == Encoding::Dense {
        let body = &mut dest[HEADER_LEN..];
        let mut regs = Box::new(*max);
        dense_max_into(body, &mut regs);
        pack_dense(&regs, body);
    } else {
        // Sparse inputs set few registers: skip the zero ones a block at a time (issue 15: the
        // register-by-register scan was ~130,000 of a sparse PFMERGE's ~136,000 instructions,
        // against Redis's ~121,000 for the same loop).
        const BLOCK: usize = 64;
        for (block, chunk) in max.chunks_exact(BLOCK).enumerate() {
            // An OR over the block, without an early exit, so that it vectorises.
            if chunk.iter().fold(0u8, |acc, &m| acc | m) == 0 {
                continue;
            }
            for (i, &m) in chunk.iter().enumerate() {
                if m == 0 {
                    continue;
                }
                let j = block * BLOCK + i;
                if dest.get(4) == Some(&ENC_DENSE) {
                    dense_raise(&mut dest[HEADER_LEN..], j, m & REGISTER_MAX);
                } else {
                    sparse_set(dest, j, m & REGISTER_MAX, max_bytes)?;
                }
            }
        }
    }
    invalidate_cache(dest);
    Ok(())
}

/// All registers of a dense value (PFDEBUG GETREG after conversion).
pub fn dense_registers(v: &[u8]) -> Result<Box<Registers>, HllError> {
    match validate(v)? {
        Encoding::Dense => {
            let mut regs = Box::new([0u8; REGISTERS]);
            unpack_dense(&v[HEADER_LEN..], &mut regs);
            Ok(regs)
        }
        Encoding::Sparse => sparse_decode(v),
    }
}
