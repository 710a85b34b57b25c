//! Dense encoding: 16384 six-bit registers packed least-significant bit first, and the bulk
//! paths over them (unpack, pack, register-wise maximum) that unions and histograms use.

use super::*;

// ---------------------------------------------------------------------------------------------
// Dense registers
// ---------------------------------------------------------------------------------------------

/// Register `i` of a dense body. Reads past the end (only the last register's "next byte") as 0.
#[inline]
pub(super) fn dense_get(body: &[u8], i: usize) -> u8 {
    let b = i * 6 / 8;
    let s = (i * 6) & 7;
    let b0 = body.get(b).copied().unwrap_or(0) as u32;
    let b1 = body.get(b + 1).copied().unwrap_or(0) as u32;
    (((b0 >> s) | (b1 << (8 - s))) & REGISTER_MAX as u32) as u8
}

/// Sets register `i` of a dense body to `val` (≤ 63). Never writes past the body.
#[inline]
pub(super) fn dense_put(body: &mut [u8], i: usize, val: u8) {
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
pub(super) fn dense_raise(body: &mut [u8], i: usize, count: u8) -> bool {
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
pub(super) fn spread8(x: u64) -> u64 {
    let x = (x & 0x0000_0000_00FF_FFFF) | ((x << 8) & 0x00FF_FFFF_0000_0000);
    let x = (x & 0x0000_0FFF_0000_0FFF) | ((x << 4) & 0x0FFF_0000_0FFF_0000);
    (x & 0x003F_003F_003F_003F) | ((x << 2) & 0x3F00_3F00_3F00_3F00)
}

/// The inverse of [`spread8`]: 8 register bytes (each masked to 6 bits) into 48 packed bits.
#[inline(always)]
pub(super) fn gather8(x: u64) -> u64 {
    let x = x & 0x3F3F_3F3F_3F3F_3F3F;
    let x = (x & 0x003F_003F_003F_003F) | ((x >> 2) & 0x0FC0_0FC0_0FC0_0FC0);
    let x = (x & 0x0000_0FFF_0000_0FFF) | ((x >> 4) & 0x00FF_F000_00FF_F000);
    (x & 0x0000_0000_00FF_FFFF) | ((x >> 8) & 0x0000_FFFF_FF00_0000)
}

/// Little-endian u64 at `at` (the caller guarantees 8 bytes are there).
#[inline(always)]
pub(super) fn load_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// Unpacks one 12-byte group (16 registers) with two overlapping 8-byte loads: bytes 0..6 hold
/// registers 0..8, bytes 6..12 registers 8..16.
#[inline(always)]
pub(super) fn unpack16(group: &[u8]) -> [u8; 16] {
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
pub(super) fn dense_max_into(body: &[u8], max: &mut Registers) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("ssse3") {
        // SAFETY: the CPU supports SSSE3, the only requirement of the function.
        unsafe { simd::dense_max_into(body, max) };
        return;
    }
    dense_max_into_scalar(body, max)
}

pub(super) fn dense_max_into_scalar(body: &[u8], max: &mut Registers) {
    for (src, dst) in body.chunks_exact(12).zip(max.chunks_exact_mut(16)) {
        let regs = unpack16(src);
        for (d, r) in dst.iter_mut().zip(regs) {
            *d = (*d).max(r);
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) mod simd {
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
pub(super) fn dense_max_into_scalar_group(src: &[u8], dst: &mut [u8]) {
    let regs = unpack16(src);
    for (d, r) in dst.iter_mut().zip(regs) {
        *d = (*d).max(r);
    }
}
