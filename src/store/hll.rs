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
//! The histogram C[k] of register values feeds Ertl's estimator, computed in f64 in exactly Redis's
//! order (see [`estimate`]), so the integer counts, and the cache bytes written back by PFCOUNT, are
//! identical. Register values 52..63 can only come from crafted dense strings; they are counted in
//! the histogram but the formula ignores them, as Redis's does.

use std::fmt;

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
    let mut v = Vec::with_capacity(64);
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
// Dense registers
// ---------------------------------------------------------------------------------------------

/// Register `i` of a dense body. Reads past the end (only the last register's "next byte") as 0.
#[inline]
fn dense_get(body: &[u8], i: usize) -> u8 {
    let b = i * 6 / 8;
    let s = (i * 6) & 7;
    let b0 = body.get(b).copied().unwrap_or(0) as u32;
    let b1 = body.get(b + 1).copied().unwrap_or(0) as u32;
    (((b0 >> s) | (b1 << (8 - s))) & REGISTER_MAX as u32) as u8
}

/// Sets register `i` of a dense body to `val` (≤ 63). Never writes past the body.
#[inline]
fn dense_put(body: &mut [u8], i: usize, val: u8) {
    let b = i * 6 / 8;
    let s = (i * 6) & 7;
    let v = (val & REGISTER_MAX) as u32;
    if let Some(x) = body.get_mut(b) {
        *x = (*x & !((REGISTER_MAX as u32) << s) as u8) | (v << s) as u8;
    }
    if let Some(x) = body.get_mut(b + 1) {
        *x = (*x & !((REGISTER_MAX as u32) >> (8 - s)) as u8) | (v >> (8 - s)) as u8;
    }
}

/// Raises register `i` to `count` if that is larger. Returns whether it changed.
#[inline]
fn dense_raise(body: &mut [u8], i: usize, count: u8) -> bool {
    if count > dense_get(body, i) {
        dense_put(body, i, count);
        true
    } else {
        false
    }
}

/// Spreads 8 packed 6-bit registers (the low 48 bits of `x`) into the 8 bytes of a u64.
/// Three halving steps: 24-bit halves into 32-bit lanes, 12-bit halves into 16-bit lanes, 6-bit
/// halves into bytes. Twelve ALU operations for eight registers.
#[inline(always)]
fn spread8(x: u64) -> u64 {
    let x = (x & 0x0000_0000_00FF_FFFF) | ((x << 8) & 0x00FF_FFFF_0000_0000);
    let x = (x & 0x0000_0FFF_0000_0FFF) | ((x << 4) & 0x0FFF_0000_0FFF_0000);
    (x & 0x003F_003F_003F_003F) | ((x << 2) & 0x3F00_3F00_3F00_3F00)
}

/// The inverse of [`spread8`]: 8 register bytes (each masked to 6 bits) into 48 packed bits.
#[inline(always)]
fn gather8(x: u64) -> u64 {
    let x = x & 0x3F3F_3F3F_3F3F_3F3F;
    let x = (x & 0x003F_003F_003F_003F) | ((x >> 2) & 0x0FC0_0FC0_0FC0_0FC0);
    let x = (x & 0x0000_0FFF_0000_0FFF) | ((x >> 4) & 0x00FF_F000_00FF_F000);
    (x & 0x0000_0000_00FF_FFFF) | ((x >> 8) & 0x0000_FFFF_FF00_0000)
}

/// Little-endian u64 at `at` (the caller guarantees 8 bytes are there).
#[inline(always)]
fn load_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// Unpacks one 12-byte group (16 registers) with two overlapping 8-byte loads: bytes 0..6 hold
/// registers 0..8, bytes 6..12 registers 8..16.
#[inline(always)]
fn unpack16(group: &[u8]) -> [u8; 16] {
    let lo = spread8(load_u64(group, 0) & 0xFFFF_FFFF_FFFF);
    let hi = spread8(load_u64(group, 4) >> 16);
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&lo.to_le_bytes());
    out[8..].copy_from_slice(&hi.to_le_bytes());
    out
}

/// Unpacks a dense body (12288 bytes) into one byte per register.
pub fn unpack_dense(body: &[u8], out: &mut Registers) {
    for (src, dst) in body.chunks_exact(12).zip(out.chunks_exact_mut(16)) {
        dst.copy_from_slice(&unpack16(src));
    }
}

/// Packs one byte per register (values masked to 6 bits) into a dense body, 16 registers into
/// 12 bytes per step.
pub fn pack_dense(regs: &Registers, body: &mut [u8]) {
    for (src, dst) in regs.chunks_exact(16).zip(body.chunks_exact_mut(12)) {
        let lo = gather8(load_u64(src, 0));
        let hi = gather8(load_u64(src, 8));
        dst[..8].copy_from_slice(&(lo | hi << 48).to_le_bytes());
        dst[8..].copy_from_slice(&((hi >> 16) as u32).to_le_bytes());
    }
}

/// Register-wise maximum of a dense body into `max`: unpack 16 registers, then one 16-byte
/// maximum, which the compiler emits as a single vector `pmaxub`. On x86-64 with SSSE3 the unpack
/// itself is vectorised too ([`simd::dense_max_into`]).
fn dense_max_into(body: &[u8], max: &mut Registers) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("ssse3") {
        // SAFETY: the CPU supports SSSE3, the only requirement of the function.
        unsafe { simd::dense_max_into(body, max) };
        return;
    }
    dense_max_into_scalar(body, max)
}

fn dense_max_into_scalar(body: &[u8], max: &mut Registers) {
    for (src, dst) in body.chunks_exact(12).zip(max.chunks_exact_mut(16)) {
        let regs = unpack16(src);
        for (d, r) in dst.iter_mut().zip(regs) {
            *d = (*d).max(r);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod simd {
    //! SSSE3 unpacking of 6-bit registers: `pshufb` spreads each 3-byte group into a 32-bit lane,
    //! then three shifts and masks put each register in its own byte (Redis 8 and Valkey use the
    //! same shape with AVX2). 16 registers per step instead of one.
    use std::arch::x86_64::*;

    use super::Registers;

    /// # Safety
    /// The CPU must support SSSE3. All memory accesses go through bounds-checked slices of exactly
    /// 16 bytes, so any `body` length is memory-safe (groups past the shorter input are skipped).
    #[target_feature(enable = "ssse3")]
    pub(super) unsafe fn dense_max_into(body: &[u8], max: &mut Registers) {
        let shuf = _mm_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1);
        let m0 = _mm_set1_epi32(0x0000_003F);
        let m1 = _mm_set1_epi32(0x0000_3F00);
        let m2 = _mm_set1_epi32(0x003F_0000);
        let m3 = _mm_set1_epi32(0x3F00_0000);
        let groups = (body.len() / 12).min(max.len() / 16);
        for g in 0..groups {
            // A 16-byte load for a 12-byte group: the last group would read past the body, so it
            // takes the scalar path below.
            let Some(src) = body.get(12 * g..12 * g + 16) else {
                super::dense_max_into_scalar_group(
                    &body[12 * g..12 * g + 12],
                    &mut max[16 * g..16 * g + 16],
                );
                continue;
            };
            let dst = &mut max[16 * g..16 * g + 16];
            // SAFETY: `src` and `dst` are in-bounds slices of exactly 16 bytes; unaligned
            // loads/stores are allowed by `loadu`/`storeu`.
            let v = _mm_loadu_si128(src.as_ptr().cast());
            let w = _mm_shuffle_epi8(v, shuf);
            let r = _mm_or_si128(
                _mm_or_si128(
                    _mm_and_si128(w, m0),
                    _mm_and_si128(_mm_slli_epi32(w, 2), m1),
                ),
                _mm_or_si128(
                    _mm_and_si128(_mm_slli_epi32(w, 4), m2),
                    _mm_and_si128(_mm_slli_epi32(w, 6), m3),
                ),
            );
            let cur = _mm_loadu_si128(dst.as_ptr().cast());
            _mm_storeu_si128(dst.as_mut_ptr().cast(), _mm_max_epu8(cur, r));
        }
    }
}

/// One 12-byte group of [`dense_max_into_scalar`].
#[cfg(target_arch = "x86_64")]
fn dense_max_into_scalar_group(src: &[u8], dst: &mut [u8]) {
    let regs = unpack16(src);
    for (d, r) in dst.iter_mut().zip(regs) {
        *d = (*d).max(r);
    }
}

// ---------------------------------------------------------------------------------------------
// Sparse opcodes
// ---------------------------------------------------------------------------------------------

/// One decoded sparse opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// ZERO: 1..=64 zero registers.
    Zero(u64),
    /// XZERO: 1..=16384 zero registers.
    XZero(u64),
    /// VAL: value 1..=32 over 1..=4 registers.
    Val(u8, u64),
}

impl Op {
    #[inline]
    fn run(self) -> u64 {
        match self {
            Op::Zero(n) | Op::XZero(n) | Op::Val(_, n) => n,
        }
    }
    #[inline]
    fn len(self) -> usize {
        match self {
            Op::XZero(_) => 2,
            _ => 1,
        }
    }
}

/// Decodes the opcode at `p` (which must be `< v.len()`). An XZERO cut short by the end of the
/// string reads its second byte as 0, like Redis reading the terminating NUL.
#[inline]
fn read_op(v: &[u8], p: usize) -> Op {
    let b = v[p];
    if b & 0x80 != 0 {
        Op::Val(((b >> 2) & 0x1f) + 1, (b & 0x03) as u64 + 1)
    } else if b & 0x40 != 0 {
        let lo = v.get(p + 1).copied().unwrap_or(0) as u64;
        Op::XZero((((b & 0x3f) as u64) << 8 | lo) + 1)
    } else {
        Op::Zero((b & 0x3f) as u64 + 1)
    }
}

#[inline]
fn val_byte(value: u8, run: u64) -> u8 {
    0x80 | ((value - 1) << 2) | (run as u8 - 1)
}

/// Appends the shortest zero-run opcode for `n` (1..=16384) registers.
fn push_zero_run(out: &mut Vec<u8>, n: u64) {
    let n1 = n - 1;
    if n > SPARSE_ZERO_MAX_LEN {
        out.push(0x40 | (n1 >> 8) as u8 & 0x3f);
        out.push(n1 as u8);
    } else {
        out.push(n1 as u8);
    }
}

/// Walks a sparse body, calling `f(first_register, run, value)` for every VAL run (zero runs only
/// advance). Enforces the CVE-2025-32023 bound: an opcode that would carry the index past 16384 is
/// corruption, checked before it is applied, and the runs must end exactly at 16384.
#[inline]
fn walk_sparse(v: &[u8], mut f: impl FnMut(usize, usize, u8)) -> Result<(), HllError> {
    let mut idx: u64 = 0;
    let mut p = HEADER_LEN;
    while p < v.len() {
        let op = read_op(v, p);
        let run = op.run();
        if idx + run > REGISTERS as u64 {
            return Err(HllError::Corrupt);
        }
        if let Op::Val(val, _) = op {
            f(idx as usize, run as usize, val);
        }
        idx += run;
        p += op.len();
    }
    if idx == REGISTERS as u64 {
        Ok(())
    } else {
        Err(HllError::Corrupt)
    }
}

/// Decodes a sparse value into one byte per register (the property-test inverse of
/// [`sparse_encode`]). Corrupt bodies are rejected.
pub fn sparse_decode(v: &[u8]) -> Result<Box<Registers>, HllError> {
    if validate(v)? != Encoding::Sparse {
        return Err(HllError::NotHll);
    }
    let mut regs = Box::new([0u8; REGISTERS]);
    walk_sparse(v, |start, run, val| regs[start..start + run].fill(val))?;
    Ok(regs)
}

/// Canonical sparse encoding of registers holding values ≤ 32 (header with a valid zero cache):
/// maximal zero runs, VAL runs of at most 4. Redis never builds a value this way (it only applies
/// [`set_register`] updates), so this exists for tests and PFSELFTEST. `None` if a value exceeds 32.
pub fn sparse_encode(regs: &Registers) -> Option<Vec<u8>> {
    let mut v = new_sparse();
    v.truncate(HEADER_LEN);
    let mut i = 0;
    while i < REGISTERS {
        let val = regs[i];
        if val > SPARSE_VAL_MAX_VALUE {
            return None;
        }
        let mut j = i + 1;
        while j < REGISTERS && regs[j] == val {
            j += 1;
        }
        let mut n = (j - i) as u64;
        while n > 0 {
            let take = if val == 0 {
                n.min(REGISTERS as u64)
            } else {
                n.min(SPARSE_VAL_MAX_LEN)
            };
            if val == 0 {
                push_zero_run(&mut v, take);
            } else {
                v.push(val_byte(val, take));
            }
            n -= take;
        }
        i = j;
    }
    Some(v)
}

/// PFDEBUG DECODE: the opcodes as `z:<run>`, `Z:<run>`, `v:<value>,<run>` joined by spaces. Decodes
/// whatever is there, without validation.
pub fn sparse_debug_string(v: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let mut p = HEADER_LEN;
    while p < v.len() {
        let op = read_op(v, p);
        if !s.is_empty() {
            s.push(' ');
        }
        let _ = match op {
            Op::Zero(n) => write!(s, "z:{n}"),
            Op::XZero(n) => write!(s, "Z:{n}"),
            Op::Val(val, n) => write!(s, "v:{val},{n}"),
        };
        p += op.len();
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Updates
// ---------------------------------------------------------------------------------------------

/// Converts a sparse value to dense in place, keeping the whole header (cache bytes included) and
/// only flipping the encoding byte. Returns `Ok(true)` if it converted, `Ok(false)` if the value was
/// already dense. A corrupt body leaves the value untouched.
pub fn sparse_to_dense(v: &mut Vec<u8>) -> Result<bool, HllError> {
    if validate(v)? == Encoding::Dense {
        return Ok(false);
    }
    let mut regs = Box::new([0u8; REGISTERS]);
    walk_sparse(v, |start, run, val| regs[start..start + run].fill(val))?;
    let mut dense = vec![0u8; DENSE_LEN];
    dense[..HEADER_LEN].copy_from_slice(&v[..HEADER_LEN]);
    dense[4] = ENC_DENSE;
    pack_dense(&regs, &mut dense[HEADER_LEN..]);
    *v = dense;
    Ok(true)
}

/// Redis's `hllSparseSet`: raise register `index` to `count` in a sparse value, splitting the
/// opcode that covers it, promoting to dense when the value would outgrow `max_bytes` or `count`
/// exceeds 32. Returns whether a register changed. A sparse change sets the invalid bit; a
/// promotion does not (the command does).
fn sparse_set(v: &mut Vec<u8>, index: usize, count: u8, max_bytes: u64) -> Result<bool, HllError> {
    if count > SPARSE_VAL_MAX_VALUE {
        return promote_and_set(v, index, count);
    }

    // Locate the opcode covering `index`, remembering the one before it for the merge scan.
    let idx = index as u64;
    let mut p = HEADER_LEN;
    let mut first: u64 = 0;
    let mut prev: Option<usize> = None;
    let mut found = None;
    while p < v.len() {
        let op = read_op(v, p);
        if idx < first + op.run() {
            found = Some(op);
            break;
        }
        prev = Some(p);
        p += op.len();
        first += op.run();
    }
    // Reaching the end means the runs stop short of `index`; nothing after the hit is examined.
    let op = found.ok_or(HllError::Corrupt)?;
    let last = first + op.run() - 1;

    match op {
        Op::Val(cur, _) if cur >= count => return Ok(false),
        // A single register: rewrite the byte in place, no change of length.
        Op::Val(_, 1) | Op::Zero(1) => v[p] = val_byte(count, 1),
        _ => {
            // Split the run into (before, the new VAL, after): at most 2+1+2 bytes.
            let mut seq: Vec<u8> = Vec::with_capacity(5);
            match op {
                Op::Val(cur, _) => {
                    if idx > first {
                        seq.push(val_byte(cur, idx - first));
                    }
                    seq.push(val_byte(count, 1));
                    if idx < last {
                        seq.push(val_byte(cur, last - idx));
                    }
                }
                Op::Zero(_) | Op::XZero(_) => {
                    if idx > first {
                        push_zero_run(&mut seq, idx - first);
                    }
                    seq.push(val_byte(count, 1));
                    if idx < last {
                        push_zero_run(&mut seq, last - idx);
                    }
                }
            }
            let oplen = op.len();
            let delta = seq.len() as i64 - oplen as i64;
            if delta > 0 && v.len() as u64 + delta as u64 > max_bytes {
                return promote_and_set(v, index, count);
            }
            if p + oplen <= v.len() {
                v.splice(p..p + oplen, seq);
            } else {
                // An XZERO cut short at the end (its second byte was the implied NUL). Redis grows
                // the length by `delta` and copies the whole sequence from `p`, so the last byte of
                // the sequence lands just past the new end.
                v.truncate(p);
                v.extend_from_slice(&seq[..seq.len() - 1]);
            }
        }
    }

    // Merge adjacent VALs of equal value, scanning at most five opcodes from the previous one.
    let mut q = prev.unwrap_or(HEADER_LEN);
    let mut scans = 5;
    while q < v.len() && scans > 0 {
        scans -= 1;
        let b = v[q];
        if b & 0xc0 == 0x40 {
            q += 2;
            continue;
        }
        if b & 0xc0 == 0 {
            q += 1;
            continue;
        }
        if let Some(&nb) = v.get(q + 1) {
            if nb & 0x80 != 0 {
                let (v1, l1) = (((b >> 2) & 0x1f) + 1, (b & 3) as u64 + 1);
                let (v2, l2) = (((nb >> 2) & 0x1f) + 1, (nb & 3) as u64 + 1);
                if v1 == v2 && l1 + l2 <= SPARSE_VAL_MAX_LEN {
                    v[q + 1] = val_byte(v1, l1 + l2);
                    v.remove(q);
                    // Look at the merged byte again: it may merge with the next one too.
                    continue;
                }
            }
        }
        q += 1;
    }
    invalidate_cache(v);
    Ok(true)
}

/// Promotion: convert to dense, then set the register (whose old value is always below `count`).
fn promote_and_set(v: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, HllError> {
    sparse_to_dense(v)?;
    dense_raise(&mut v[HEADER_LEN..], index, count);
    Ok(true)
}

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

/// The value register `index` holds in a sparse value, found the way [`sparse_set`] finds it:
/// the first opcode whose range covers `index`, nothing after it examined.
fn sparse_get(v: &[u8], index: usize) -> Result<u8, HllError> {
    let idx = index as u64;
    let mut p = HEADER_LEN;
    let mut first: u64 = 0;
    while p < v.len() {
        let op = read_op(v, p);
        if idx < first + op.run() {
            return Ok(match op {
                Op::Val(val, _) => val,
                _ => 0,
            });
        }
        p += op.len();
        first += op.run();
    }
    Err(HllError::Corrupt)
}

/// A read-only look ahead for PFADD: the position of the first element that would change a
/// register, `None` if none would. Errors exactly where [`pfadd`] would, before any change: a
/// sparse value whose runs stop short of an element's register is corrupt. Lets the command
/// leave a key untouched (no WATCH trigger, no dirty count) when PFADD replies 0.
pub fn first_change<'a>(
    v: &[u8],
    elements: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Option<usize>, HllError> {
    let enc = validate(v)?;
    for (i, e) in elements.into_iter().enumerate() {
        let (index, count) = hash_element(e);
        let cur = match enc {
            Encoding::Dense => dense_get(&v[HEADER_LEN..], index),
            Encoding::Sparse => sparse_get(v, index)?,
        };
        if count > cur {
            return Ok(Some(i));
        }
    }
    Ok(None)
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

// ---------------------------------------------------------------------------------------------
// Histogram and estimator
// ---------------------------------------------------------------------------------------------

// The histograms count *pairs* of adjacent registers: a pair (lo, hi) is the 12-bit index
// `lo | hi << 6` into a 4096-entry table. In the dense format every 12 bits of the packed stream
// are exactly such a pair, so the dense histogram takes 8192 increments straight from the packed
// bytes instead of extracting and counting 16384 registers, and the increments spread over more
// counters (fewer store-to-load stalls on one hot bucket). Folding the table back is row and
// column sums that the compiler vectorises.

/// Pair counts: `t[hi << 6 | lo]`.
type PairTable = [u32; 4096];

/// Folds a pair table into the histogram of single register values.
fn fold_pairs(t: &PairTable) -> [u32; 64] {
    let mut h = [0u32; 64];
    for (hi, row) in t.chunks_exact(64).enumerate() {
        let mut row_sum = 0u32;
        for (c, &n) in h.iter_mut().zip(row) {
            *c += n;
            row_sum += n;
        }
        h[hi] += row_sum;
    }
    h
}

/// Histogram of register values from a one-byte-per-register array (values are taken mod 64).
pub fn raw_histogram(regs: &Registers) -> [u32; 64] {
    let mut t = Box::new([0u32; 4096]);
    for group in regs.chunks_exact(8) {
        let x = load_u64(group, 0) & 0x3F3F_3F3F_3F3F_3F3F;
        // Bytes (lo, hi) of each 16-bit lane become the 12-bit index lo | hi << 6.
        let p = (x & 0x003F_003F_003F_003F) | ((x >> 2) & 0x0FC0_0FC0_0FC0_0FC0);
        t[(p & 0xFFF) as usize] += 1;
        t[(p >> 16 & 0xFFF) as usize] += 1;
        t[(p >> 32 & 0xFFF) as usize] += 1;
        t[(p >> 48 & 0xFFF) as usize] += 1;
    }
    fold_pairs(&t)
}

/// Histogram of a dense body, straight from the packed bytes: each 12 bits are one pair.
fn dense_histogram(body: &[u8]) -> [u32; 64] {
    let mut t = Box::new([0u32; 4096]);
    for group in body.chunks_exact(12) {
        for w in [load_u64(group, 0), load_u64(group, 4) >> 16] {
            t[(w & 0xFFF) as usize] += 1;
            t[(w >> 12 & 0xFFF) as usize] += 1;
            t[(w >> 24 & 0xFFF) as usize] += 1;
            t[(w >> 36 & 0xFFF) as usize] += 1;
        }
    }
    fold_pairs(&t)
}

/// Histogram of a sparse body; corruption per [`walk_sparse`].
fn sparse_histogram(v: &[u8]) -> Result<[u32; 64], HllError> {
    let mut h = [0u32; 64];
    let mut vals: u32 = 0;
    walk_sparse(v, |_, run, val| {
        h[val as usize] += run as u32;
        vals += run as u32;
    })?;
    h[0] = REGISTERS as u32 - vals;
    Ok(h)
}

/// The register histogram of a value in either encoding.
pub fn histogram(v: &[u8]) -> Result<[u32; 64], HllError> {
    match validate(v)? {
        Encoding::Dense => Ok(dense_histogram(&v[HEADER_LEN..])),
        Encoding::Sparse => sparse_histogram(v),
    }
}

/// Ertl's sigma function. `x` in [0, 1].
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let z_old = z;
        z += x * y;
        y += y;
        if z == z_old {
            return z;
        }
    }
}

/// Ertl's tau function. `x` in [0, 1].
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let z_old = z;
        y *= 0.5;
        // Redis writes pow(1 - x, 2); its compiler emits a multiplication, and so must we.
        let d = 1.0 - x;
        z -= d * d * y;
        if z == z_old {
            return z / 3.0;
        }
    }
}

/// The cardinality estimate from a register histogram, in f64 in exactly Redis's order of
/// operations. The result is the u64 Redis computes, including its x86-64 overflow pattern
/// (`0x8000000000000000`) for crafted histograms whose estimate leaves the i64 range.
pub fn estimate(hist: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - hist[HLL_Q + 1] as f64) / m);
    for k in (1..=HLL_Q).rev() {
        z += hist[k] as f64;
        z *= 0.5;
    }
    z += m * sigma(hist[0] as f64 / m);
    // 0.5 / ln 2, written as Redis writes it (0.721347520444481703680); the same f64.
    const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
    let e = (ALPHA_INF * m * m / z).round();
    // llround overflows to LLONG_MIN on x86-64; `as i64` would saturate instead.
    const I64_RANGE: std::ops::Range<f64> =
        -9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0;
    if !I64_RANGE.contains(&e) {
        0x8000_0000_0000_0000
    } else {
        e as i64 as u64
    }
}

/// The estimate of one value, ignoring its cache.
pub fn count(v: &[u8]) -> Result<u64, HllError> {
    Ok(estimate(&histogram(v)?))
}

/// Single-key PFCOUNT: the cached cardinality when valid (without looking at the registers),
/// otherwise the estimate, written back into the cache. Returns the count and whether the value
/// was written (which makes it a modified key).
pub fn count_cached(v: &mut [u8]) -> Result<(u64, bool), HllError> {
    validate(v)?;
    if cache_is_valid(v) {
        return Ok((cached_cardinality(v), false));
    }
    let card = count(v)?;
    write_cache(v, card);
    Ok((card, true))
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
        for (j, &m) in max.iter().enumerate() {
            if m == 0 {
                continue;
            }
            if dest.get(4) == Some(&ENC_DENSE) {
                dense_raise(&mut dest[HEADER_LEN..], j, m & REGISTER_MAX);
            } else {
                sparse_set(dest, j, m & REGISTER_MAX, max_bytes)?;
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

// ---------------------------------------------------------------------------------------------
// PFSELFTEST
// ---------------------------------------------------------------------------------------------

/// A small deterministic generator, so the self test needs no dependency and repeats exactly.
struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// PFSELFTEST: register packing (single accessors against the bulk paths), the sparse and dense
/// encodings agreeing register for register and count for count, and the estimate staying within
/// a generous error bound. Returns the failure text (after `ERR `) on failure.
pub fn selftest() -> Result<(), String> {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    // 1. Packing.
    let mut body = vec![0u8; DENSE_BODY_LEN];
    let mut model = Box::new([0u8; REGISTERS]);
    for _ in 0..4 {
        for (i, m) in model.iter_mut().enumerate() {
            let r = (rng.next() & 63) as u8;
            *m = r;
            dense_put(&mut body, i, r);
        }
        let mut unpacked = Box::new([0u8; REGISTERS]);
        unpack_dense(&body, &mut unpacked);
        for i in 0..REGISTERS {
            if dense_get(&body, i) != model[i] || unpacked[i] != model[i] {
                return Err(format!("TESTFAILED Register error at {i}"));
            }
        }
        let mut repacked = vec![0u8; DENSE_BODY_LEN];
        pack_dense(&model, &mut repacked);
        if repacked != body {
            return Err("TESTFAILED Register packing error".into());
        }
    }
    // 2. Sparse and dense agree while elements are added.
    let mut sparse = new_sparse();
    let mut dense = new_sparse();
    sparse_to_dense(&mut dense).map_err(|e| e.to_string())?;
    let mut checkpoint = 16;
    for n in 1..=5000u64 {
        let e = rng.next().to_le_bytes();
        let a = add(&mut sparse, &e, u64::MAX).map_err(|e| e.to_string())?;
        let b = add(&mut dense, &e, u64::MAX).map_err(|e| e.to_string())?;
        if a != b {
            return Err(format!("TESTFAILED sparse/dense update mismatch at {n}"));
        }
        if n == checkpoint {
            checkpoint *= 2;
            let cs = count(&sparse).map_err(|e| e.to_string())?;
            let cd = count(&dense).map_err(|e| e.to_string())?;
            if cs != cd || sparse_decode(&sparse).ok() != dense_registers(&dense).ok() {
                return Err(format!("TESTFAILED Sparse and dense differ at {n}"));
            }
        }
    }
    // 3. Accuracy of the estimator on a dense value.
    let mut hll = new_sparse();
    let mut next_check = 1000u64;
    for n in 1..=200_000u64 {
        add(&mut hll, &n.to_le_bytes(), DEFAULT_SPARSE_MAX_BYTES).map_err(|e| e.to_string())?;
        if n == next_check {
            next_check *= 2;
            let c = count(&hll).map_err(|e| e.to_string())? as f64;
            let err = (c - n as f64).abs() / n as f64;
            // Six standard errors of 1.04/sqrt(m): failing this is a bug, not bad luck.
            if err > 6.0 * 1.04 / (REGISTERS as f64).sqrt() {
                return Err(format!("TESTFAILED Too big error. card:{n} abserr:{c}"));
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn pfadd_new(elems: &[&[u8]]) -> Vec<u8> {
        let mut v = new_sparse();
        pfadd(
            &mut v,
            elems.iter().copied(),
            true,
            DEFAULT_SPARSE_MAX_BYTES,
        )
        .unwrap();
        v
    }

    fn header(invalid: bool) -> Vec<u8> {
        let mut h = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0".to_vec();
        if invalid {
            h[15] = 0x80;
        }
        h
    }

    #[test]
    fn hash_vectors() {
        assert_eq!(murmurhash64a(b"", HASH_SEED), 0xd8dfea6585bc9732);
        assert_eq!(murmurhash64a(b"a", HASH_SEED), 0x53d2470a9b43b1a7);
        assert_eq!(murmurhash64a(b"hello", HASH_SEED), 0x0f656f01eecfe400);
        assert_eq!(murmurhash64a(b"123456789", HASH_SEED), 0x217532cb09f2a44d);
        assert_eq!(hash_element(b""), (5938, 2));
        assert_eq!(hash_element(b"a"), (12711, 2));
        assert_eq!(hash_element(b"b"), (15780, 1));
        assert_eq!(hash_element(b"12345678"), (10579, 3));
        assert_eq!(hash_element(b"0"), (13225, 4));
        assert_eq!(hash_element(b"11332"), (0, 1));
        assert_eq!(hash_element(b"15508"), (1, 1));
    }

    #[test]
    fn spec_strings() {
        assert_eq!(pfadd_new(&[]), hex("48594c4c0100000000000000000000807fff"));
        let mut v = pfadd_new(&[b"a", b"b", b"c"]);
        assert_eq!(
            v,
            hex("48594c4c01000000000000000000008060f38050b1844bfb80425a")
        );
        assert_eq!(
            sparse_debug_string(&v),
            "Z:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603"
        );
        assert_eq!(count_cached(&mut v).unwrap(), (3, true));
        assert_eq!(
            v,
            hex("48594c4c01000000030000000000000060f38050b1844bfb80425a")
        );
        assert_eq!(count_cached(&mut v).unwrap(), (3, false));
        assert_eq!(
            pfadd_new(&[b"11332", b"15508"]),
            hex("48594c4c010000000000000000000080817ffd")
        );
        let digits: Vec<Vec<u8>> = (0..10).map(|i| i.to_string().into_bytes()).collect();
        let refs: Vec<&[u8]> = digits.iter().map(|d| d.as_slice()).collect();
        let mut n = pfadd_new(&refs);
        assert_eq!(n, hex("48594c4c01000000000000000000008041ee844823805351804ce08040928048ca8c43738042d78042128c40cf844322"));
        assert_eq!(count_cached(&mut n).unwrap().0, 10);
    }

    #[test]
    fn spec_merge() {
        let mut x = pfadd_new(&[b"foo", b"bar", b"zap", b"a"]);
        assert_eq!(count_cached(&mut x).unwrap().0, 4);
        let x2 = pfadd_new(&[b"a", b"b", b"c", b"foo"]);
        let mut max = Box::new([0u8; REGISTERS]);
        merge_into(&mut max, &x).unwrap();
        merge_into(&mut max, &x2).unwrap();
        let mut m = new_sparse();
        merge_apply(&mut m, &max, false, DEFAULT_SPARSE_MAX_BYTES).unwrap();
        assert_eq!(
            m,
            hex("48594c4c0100000000000000000000805cb3904207844235804621804a8e844bfb80425a")
        );
        assert_eq!(count(&m).unwrap(), 6);
        assert_eq!(estimate(&raw_histogram(&max)), 6);
    }

    #[test]
    fn spec_sizes() {
        for (n, enc, len, card) in [
            (200u32, Encoding::Sparse, 507usize, 201u64),
            (1000, Encoding::Sparse, 1923, 1001),
            (10000, Encoding::Dense, 12304, 9987),
            (100000, Encoding::Dense, 12304, 99565),
        ] {
            let elems: Vec<Vec<u8>> = (0..n).map(|i| i.to_string().into_bytes()).collect();
            let mut v = pfadd_new(&elems.iter().map(|e| e.as_slice()).collect::<Vec<_>>());
            assert_eq!(validate(&v).unwrap(), enc, "n={n}");
            assert_eq!(v.len(), len, "n={n}");
            assert_eq!(count_cached(&mut v).unwrap().0, card, "n={n}");
        }
    }

    #[test]
    fn validation() {
        assert_eq!(validate(b"hello"), Err(HllError::NotHll));
        assert_eq!(
            validate(b"HYLL\x02\0\0\0\0\0\0\0\0\0\0\0"),
            Err(HllError::NotHll)
        );
        assert_eq!(validate(&header(false)), Ok(Encoding::Sparse));
        let mut d = vec![0u8; DENSE_LEN];
        d[..4].copy_from_slice(MAGIC);
        assert_eq!(validate(&d), Ok(Encoding::Dense));
        d.push(0);
        assert_eq!(validate(&d), Err(HllError::NotHll));
    }

    #[test]
    fn corruption_cases() {
        let with = |tail: &[u8]| {
            let mut v = header(true);
            v.extend_from_slice(tail);
            v
        };
        // 16385 registers.
        let mut v = with(&[0x7f, 0xff, 0x00]);
        assert_eq!(count_cached(&mut v), Err(HllError::Corrupt));
        assert_eq!(add(&mut v, b"a", 3000), Ok(true));
        // 16383 registers.
        let mut v = with(&[0x7f, 0xfe]);
        assert_eq!(count(&v), Err(HllError::Corrupt));
        assert_eq!(add(&mut v, b"hello", 3000), Ok(true));
        // VAL past the end.
        let v = with(&[0x7f, 0xfe, 0x83]);
        assert_eq!(count(&v), Err(HllError::Corrupt));
        let mut max = Box::new([0u8; REGISTERS]);
        assert_eq!(merge_into(&mut max, &v), Err(HllError::Corrupt));
        // Header only.
        let mut v = with(&[]);
        assert_eq!(count(&v), Err(HllError::Corrupt));
        assert_eq!(add(&mut v, b"a", 3000), Err(HllError::Corrupt));
        // Truncated XZERO reads 0: a valid empty HLL.
        let v = with(&[0x7f, 0xfe, 0x40]);
        assert_eq!(sparse_debug_string(&v), "Z:16383 Z:1");
        assert_eq!(count(&v), Ok(0));
        // The CVE shape: many XZERO(16384) then a VAL.
        let mut tail = Vec::new();
        for _ in 0..1000 {
            tail.extend_from_slice(&[0x7f, 0xff]);
        }
        tail.push(0x80);
        let mut v = with(&tail);
        assert_eq!(count(&v), Err(HllError::Corrupt));
        assert_eq!(sparse_to_dense(&mut v), Err(HllError::Corrupt));
        // Appended garbage after a valid body.
        let mut v = pfadd_new(&[b"a"]);
        v.extend_from_slice(b"hello");
        assert_eq!(count(&v), Err(HllError::Corrupt));
        assert_eq!(add(&mut v, b"zz", 3000), Ok(true));
    }

    #[test]
    fn estimator_edges() {
        assert_eq!(estimate(&raw_histogram(&[0u8; REGISTERS])), 0);
        let mut h = [0u32; 64];
        h[51] = REGISTERS as u32;
        assert_eq!(estimate(&h), 0x8000_0000_0000_0000);
    }

    #[test]
    fn promotion_by_size_and_value() {
        let mut v = new_sparse();
        let mut n = 0u32;
        while validate(&v).unwrap() == Encoding::Sparse {
            add(&mut v, &n.to_le_bytes(), 300).unwrap();
            assert!(v.len() <= 300 || validate(&v).unwrap() == Encoding::Dense);
            n += 1;
        }
        let mut v = new_sparse();
        set_register(&mut v, 7, 40, 3000).unwrap();
        assert_eq!(validate(&v).unwrap(), Encoding::Dense);
        assert_eq!(dense_registers(&v).unwrap()[7], 40);
    }

    #[test]
    fn pack_roundtrip_and_selftest() {
        let mut regs = Box::new([0u8; REGISTERS]);
        for (i, r) in regs.iter_mut().enumerate() {
            *r = (i * 7 % 64) as u8;
        }
        let mut body = vec![0u8; DENSE_BODY_LEN];
        pack_dense(&regs, &mut body);
        for i in 0..REGISTERS {
            assert_eq!(dense_get(&body, i), regs[i]);
        }
        let mut back = Box::new([0u8; REGISTERS]);
        unpack_dense(&body, &mut back);
        assert_eq!(back, regs);
        // Both pair-table histograms against a plain count.
        let mut naive = [0u32; 64];
        for &r in regs.iter() {
            naive[r as usize] += 1;
        }
        assert_eq!(raw_histogram(&regs), naive);
        assert_eq!(dense_histogram(&body), naive);
        let mut max = Box::new([0u8; REGISTERS]);
        max[5] = 60;
        max[REGISTERS - 1] = 63;
        dense_max_into(&body, &mut max);
        for i in 0..REGISTERS {
            let expect = regs[i].max(if i == 5 {
                60
            } else if i == REGISTERS - 1 {
                63
            } else {
                0
            });
            assert_eq!(max[i], expect, "register {i}");
        }
        let mut scalar = Box::new([7u8; REGISTERS]);
        let mut fast = Box::new([7u8; REGISTERS]);
        dense_max_into_scalar(&body, &mut scalar);
        dense_max_into(&body, &mut fast);
        assert_eq!(scalar, fast);
        assert_eq!(selftest(), Ok(()));
    }

    fn sparse_regs() -> impl Strategy<Value = Vec<u8>> {
        // Mostly zeros with clusters of small values, so runs of every opcode kind appear.
        prop::collection::vec((0usize..REGISTERS, 1u8..=32, 1usize..300), 0..60).prop_map(|spots| {
            let mut r = vec![0u8; REGISTERS];
            for (at, val, len) in spots {
                let end = (at + len).min(REGISTERS);
                for x in &mut r[at..end] {
                    *x = val;
                }
            }
            r
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

        #[test]
        fn sparse_decode_encode_identity(r in sparse_regs()) {
            let regs: Box<Registers> = r.into_boxed_slice().try_into().unwrap();
            let enc = sparse_encode(&regs).unwrap();
            prop_assert_eq!(sparse_decode(&enc).unwrap(), regs.clone());
            // Promotion agrees with the decoder.
            let mut d = enc.clone();
            sparse_to_dense(&mut d).unwrap();
            prop_assert_eq!(dense_registers(&d).unwrap(), regs.clone());
            prop_assert_eq!(count(&d).unwrap(), count(&enc).unwrap());
        }

        #[test]
        fn sparse_updates_match_a_register_model(
            ops in prop::collection::vec((0usize..REGISTERS, 1u8..=40), 0..400),
            max_bytes in prop::sample::select(vec![0u64, 30, 100, 500, 3000, 1 << 20]),
        ) {
            let mut v = new_sparse();
            let mut model = vec![0u8; REGISTERS];
            for (i, c) in ops {
                let changed = set_register(&mut v, i, c, max_bytes).unwrap();
                prop_assert_eq!(changed, c > model[i]);
                model[i] = model[i].max(c);
                if validate(&v).unwrap() == Encoding::Sparse {
                    prop_assert!(v.len() as u64 <= max_bytes.max(18));
                }
            }
            prop_assert_eq!(&dense_registers(&v).unwrap()[..], &model[..]);
        }

        #[test]
        fn first_change_agrees_with_pfadd(
            seed in prop::collection::vec(any::<u32>(), 0..300),
            probe in prop::collection::vec(any::<u32>(), 0..30),
        ) {
            let mut v = new_sparse();
            let seed: Vec<[u8; 4]> = seed.iter().map(|x| x.to_le_bytes()).collect();
            pfadd(&mut v, seed.iter().map(|e| &e[..]), false, 3000).unwrap();
            for dense in [false, true] {
                if dense { sparse_to_dense(&mut v).unwrap(); }
                let probe: Vec<[u8; 4]> = probe.iter().map(|x| x.to_le_bytes()).collect();
                let fc = first_change(&v, probe.iter().map(|e| &e[..])).unwrap();
                let mut w = v.clone();
                let changed = pfadd(&mut w, probe.iter().map(|e| &e[..]), false, 3000).unwrap();
                prop_assert_eq!(fc.is_some(), changed);
                if let Some(i) = fc {
                    let mut x = v.clone();
                    pfadd(&mut x, probe[i..].iter().map(|e| &e[..]), false, 3000).unwrap();
                    prop_assert_eq!(x, w);
                }
            }
        }

        #[test]
        fn invalid_streams_rejected(r in sparse_regs(), cut in 1usize..8, extra in prop::collection::vec(any::<u8>(), 1..4)) {
            let regs: Box<Registers> = r.into_boxed_slice().try_into().unwrap();
            let enc = sparse_encode(&regs).unwrap();
            // Dropping a whole trailing opcode leaves fewer than 16384 registers.
            let mut short = enc.clone();
            let keep = short.len().saturating_sub(cut).max(HEADER_LEN);
            short.truncate(keep);
            let mut p = HEADER_LEN; let mut total = 0u64;
            while p < short.len() { let op = read_op(&short, p); total += op.run(); p += op.len(); }
            if total != REGISTERS as u64 {
                prop_assert_eq!(sparse_decode(&short).err(), Some(HllError::Corrupt));
            }
            // Anything appended that covers registers overflows the count.
            let mut long = enc.clone();
            long.extend_from_slice(&extra);
            prop_assert_eq!(sparse_decode(&long).err(), Some(HllError::Corrupt));
            prop_assert_eq!(count(&long).err(), Some(HllError::Corrupt));
        }

        #[test]
        fn arbitrary_bytes_never_panic(
            body in prop::collection::vec(any::<u8>(), 0..200),
            dense in any::<bool>(),
            elems in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..8), 0..20),
        ) {
            let mut v = if dense { vec![0u8; DENSE_LEN] } else { header(true) };
            v[..4].copy_from_slice(MAGIC);
            if dense {
                for (i, b) in body.iter().enumerate() { v[HEADER_LEN + i * 61 % DENSE_BODY_LEN] = *b; }
            } else {
                v.extend_from_slice(&body);
            }
            let _ = sparse_debug_string(&v);
            let _ = count(&v);
            let mut w = v.clone();
            let _ = count_cached(&mut w);
            let mut max = Box::new([0u8; REGISTERS]);
            let _ = merge_into(&mut max, &v);
            let mut w = v.clone();
            let _ = pfadd(&mut w, elems.iter().map(|e| e.as_slice()), false, 40);
            let mut w = v.clone();
            let _ = merge_apply(&mut w, &max, false, 40);
            let mut w = v.clone();
            let _ = sparse_to_dense(&mut w);
            let _ = dense_registers(&v);
            // Raw header bytes too.
            let _ = validate(&body);
        }
    }
}
