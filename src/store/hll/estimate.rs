//! Register histograms and Ertl's estimator, in Redis's exact order of floating-point operations.

use super::*;

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
pub(super) type PairTable = [u32; 4096];

/// Folds a pair table into the histogram of single register values.
pub(super) fn fold_pairs(t: &PairTable) -> [u32; 64] {
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
pub(super) fn dense_histogram(body: &[u8]) -> [u32; 64] {
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
pub(super) fn sparse_histogram(v: &[u8]) -> Result<[u32; 64], HllError> {
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
pub(super) fn sigma(mut x: f64) -> f64 {
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
pub(super) fn tau(mut x: f64) -> f64 {
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
