//! CRC-64 as Redis computes it (rdb.md §3): the Jones polynomial, reflected, initial value 0, no
//! final XOR — catalogued as `CRC_64_REDIS`. It guards every RDB file (over all bytes from `REDIS`
//! through the EOF opcode) and every DUMP payload (over everything before the CRC itself).
//!
//! The `crc` crate's 16-table slicing form runs at several GB/s, so checksumming never limits save or
//! load speed. The check value test below pins the parameters to the spec's verified value.

use crc::{Crc, Digest, Table, CRC_64_REDIS};

/// The CRC engine; slice-by-16 tables (32 KiB) built at compile time.
pub static CRC64: Crc<u64, Table<16>> = Crc::<u64, Table<16>>::new(&CRC_64_REDIS);

/// A running checksum.
pub type Crc64Digest = Digest<'static, u64, Table<16>>;

/// A fresh running checksum.
pub fn digest() -> Crc64Digest {
    CRC64.digest()
}

/// The CRC-64 of `data` in one call.
pub fn checksum(data: &[u8]) -> u64 {
    CRC64.checksum(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_value_matches_spec() {
        assert_eq!(checksum(b"123456789"), 0xe9c6d914c4b8d9ca);
    }

    #[test]
    fn bitwise_reference_agrees() {
        // The bit-by-bit reflected definition from rdb.md §3.
        fn slow(data: &[u8]) -> u64 {
            let mut crc = 0u64;
            for &b in data {
                crc ^= b as u64;
                for _ in 0..8 {
                    crc = (crc >> 1) ^ if crc & 1 == 1 { 0x95ac9329ac4bc9b5 } else { 0 };
                }
            }
            crc
        }
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + i / 3) as u8).collect();
        assert_eq!(checksum(&data), slow(&data));
        let mut d = digest();
        d.update(&data[..333]);
        d.update(&data[333..]);
        assert_eq!(d.finalize(), slow(&data));
    }
}
