//! MurmurHash2 in its two flavours, as RedisBloom and Redis use them.
//!
//! * [`murmur64a`] is Austin Appleby's 64-bit MurmurHash2, variant A ("MurmurHash64A"). Bloom filters
//!   hash every item twice with it (seed `0xc6a4a7935bd1e995`, then seed = the first result) to get the
//!   pair `(a, b)` behind the probe sequence `a + i·b`; HyperLogLog hashes with seed `0xadc83b19` and
//!   cuckoo filters with seed 0.
//! * [`murmur2_32`] is the original 32-bit MurmurHash2. Only Bloom chains dumped without the
//!   `FORCE64` option (very old RedisBloom versions) use it, seeded `0x9747b28c` and then with the
//!   first result.
//!
//! Both read their input in little-endian blocks regardless of the host, which is what the x86-64
//! builds of the reference do; dumps are therefore portable.

/// The multiplier of MurmurHash64A; also the Bloom filters' first seed.
pub const M64: u64 = 0xc6a4a7935bd1e995;
const R64: u32 = 47;

/// MurmurHash64A of `data` with a full 64-bit `seed`.
#[inline]
pub fn murmur64a(data: &[u8], seed: u64) -> u64 {
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M64);
    let mut blocks = data.chunks_exact(8);
    for block in &mut blocks {
        let mut k = u64::from_le_bytes([
            block[0], block[1], block[2], block[3], block[4], block[5], block[6], block[7],
        ]);
        k = k.wrapping_mul(M64);
        k ^= k >> R64;
        k = k.wrapping_mul(M64);
        h ^= k;
        h = h.wrapping_mul(M64);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        h ^= tail_le(tail);
        h = h.wrapping_mul(M64);
    }
    h ^= h >> R64;
    h = h.wrapping_mul(M64);
    h ^= h >> R64;
    h
}

/// The 1 to 7 bytes of `t` as a little-endian integer (the reference's fall-through switch of
/// `h ^= data[i] << 8i`), in two or three loads instead of a loop per byte (issue 15: every Bloom
/// and cuckoo item is hashed so, the Bloom ones twice).
#[inline]
fn tail_le(t: &[u8]) -> u64 {
    let n = t.len();
    if n >= 4 {
        // Bytes 0..4 and n-4..n; the overlap holds the same bytes at the same places.
        let lo = u32::from_le_bytes([t[0], t[1], t[2], t[3]]) as u64;
        let hi = u32::from_le_bytes([t[n - 4], t[n - 3], t[n - 2], t[n - 1]]) as u64;
        lo | hi << (8 * (n - 4))
    } else {
        // n is 1, 2 or 3: bytes 0, n/2 and n-1 cover them all.
        t[0] as u64 | (t[n / 2] as u64) << (8 * (n / 2)) | (t[n - 1] as u64) << (8 * (n - 1))
    }
}

/// The original 32-bit MurmurHash2 of `data` with `seed`.
#[inline]
pub fn murmur2_32(data: &[u8], seed: u32) -> u32 {
    const M: u32 = 0x5bd1e995;
    const R: u32 = 24;
    let mut h = seed ^ (data.len() as u32);
    let mut blocks = data.chunks_exact(4);
    for block in &mut blocks {
        let mut k = u32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        // The reference's switch falls through from the highest tail byte down to byte 0.
        for (i, &byte) in tail.iter().enumerate() {
            h ^= (byte as u32) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

/// The Bloom filter hash pair of a chain of either width: 64 bits (`wide`, `FORCE64`) or the
/// legacy 32.
#[inline]
pub fn bloom_hash(item: &[u8], wide: bool) -> (u64, u64) {
    if wide {
        bloom_hash64(item)
    } else {
        bloom_hash32(item)
    }
}

/// The Bloom filter hash pair `(a, b)` of a 64-bit (`FORCE64`) chain.
#[inline]
pub fn bloom_hash64(item: &[u8]) -> (u64, u64) {
    let a = murmur64a(item, M64);
    let b = murmur64a(item, a);
    (a, b)
}

/// The Bloom filter hash pair of a legacy chain without `FORCE64`, zero-extended to 64 bits.
#[inline]
pub fn bloom_hash32(item: &[u8]) -> (u64, u64) {
    let a = murmur2_32(item, 0x9747b28c);
    let b = murmur2_32(item, a);
    (a as u64, b as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_loads_match_the_byte_loop() {
        let data: Vec<u8> = (0u8..16).map(|i| i.wrapping_mul(37) ^ 0xa5).collect();
        for n in 1..8 {
            for start in 0..8 {
                let t = &data[start..start + n];
                let mut want = 0u64;
                for (i, &b) in t.iter().enumerate() {
                    want ^= (b as u64) << (8 * i);
                }
                assert_eq!(tail_le(t), want, "n={n} start={start}");
            }
        }
    }

    #[test]
    fn bloom_pairs_match_redisbloom() {
        // bloom.md §7.5, checked against RedisBloom 2.6.28.
        assert_eq!(
            bloom_hash64(b"foo"),
            (0x822b4f99b121f10d, 0x9d63d52a557f61c2)
        );
        assert_eq!(bloom_hash64(b""), (0x1ab11ea5a7b2c56e, 0xbbddcb5ab56dd547));
        assert_eq!(
            bloom_hash64(b"hello"),
            (0x5ba5b8a59803e699, 0xa7d451d588a0c2a4)
        );
    }

    #[test]
    fn murmur64a_hll_seed_values() {
        // Redis's HyperLogLog seed; values as Redis computes them (see store::hll's tests).
        assert_eq!(murmur64a(b"", 0xadc83b19), 0xd8dfea6585bc9732);
        assert_eq!(murmur64a(b"a", 0xadc83b19), 0x53d2470a9b43b1a7);
        assert_eq!(murmur64a(b"hello", 0xadc83b19), 0x0f656f01eecfe400);
        assert_eq!(murmur64a(b"123456789", 0xadc83b19), 0x217532cb09f2a44d);
    }

    #[test]
    fn murmur2_32_reference_values() {
        // Empty input with seed 0 hashes to 0: h = 0, the final mix keeps it 0.
        assert_eq!(murmur2_32(b"", 0), 0);
        // Every tail length and one full block hash to distinct values, and the seed matters.
        let v: Vec<u32> = (0..9)
            .map(|n| murmur2_32(&b"abcdefgh"[..n], 0x9747b28c))
            .collect();
        for i in 0..v.len() {
            for j in i + 1..v.len() {
                assert_ne!(v[i], v[j]);
            }
        }
        assert_ne!(murmur2_32(b"abc", 1), murmur2_32(b"abc", 2));
    }
}
