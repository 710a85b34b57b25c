//! The RDB writer: turns keys and values into the bytes Redis 7.0 writes (rdb.md §1–§4).
//!
//! Strings go through [`RdbWriter::string`], which makes Redis's choices so that files and DUMP
//! payloads are byte-identical to Redis's for the same data:
//!
//! 1. a string of at most 11 bytes that is a canonical decimal integer fitting in 32 bits is written
//!    as `C0 i8`, `C1 i16` or `C2 i32`;
//! 2. otherwise, with `rdbcompression yes`, a string longer than 20 bytes is LZF-compressed when the
//!    result fits in `len - 4` bytes (`C3 <clen> <len> <data>`);
//! 3. otherwise it is written plain, `<len> <bytes>`.
//!
//! The same rules apply to keys, AUX values and module STRING fields, as in Redis. The CRC-64 is
//! computed on the fly over everything written, so a snapshot is produced in one sequential pass.

use std::io::Write;

use super::*;
use crate::persistence::{crc64, lzf};
use crate::store::Value;

/// What a save needs from the configuration.
#[derive(Debug, Clone, Copy)]
pub struct SaveOptions {
    /// `rdbcompression`: LZF-compress strings longer than 20 bytes.
    pub compression: bool,
    /// `rdbchecksum`: write the CRC-64 (zeroes otherwise).
    pub checksum: bool,
}

impl Default for SaveOptions {
    fn default() -> Self {
        SaveOptions {
            compression: true,
            checksum: true,
        }
    }
}

/// Writes RDB items to `W`, keeping the running CRC and the byte count.
pub struct RdbWriter<W: Write> {
    w: W,
    crc: crc64::Crc64Digest,
    checksum: bool,
    compression: bool,
    written: u64,
}

impl<W: Write> RdbWriter<W> {
    pub fn new(w: W, opts: SaveOptions) -> RdbWriter<W> {
        RdbWriter {
            w,
            crc: crc64::digest(),
            checksum: opts.checksum,
            compression: opts.compression,
            written: 0,
        }
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Raw bytes, checksummed.
    pub fn raw(&mut self, b: &[u8]) -> std::io::Result<()> {
        if self.checksum {
            self.crc.update(b);
        }
        self.written += b.len() as u64;
        self.w.write_all(b)
    }

    pub fn byte(&mut self, b: u8) -> std::io::Result<()> {
        self.raw(&[b])
    }

    /// A length in the shortest form (§2.1).
    #[allow(clippy::len_without_is_empty)] // writes a length field; not a container size
    pub fn len(&mut self, n: u64) -> std::io::Result<()> {
        if n < 1 << 6 {
            self.byte(n as u8)
        } else if n < 1 << 14 {
            self.raw(&[0x40 | (n >> 8) as u8, n as u8])
        } else if n <= u32::MAX as u64 {
            let mut b = [0x80, 0, 0, 0, 0];
            b[1..].copy_from_slice(&(n as u32).to_be_bytes());
            self.raw(&b)
        } else {
            let mut b = [0x81, 0, 0, 0, 0, 0, 0, 0, 0];
            b[1..].copy_from_slice(&n.to_be_bytes());
            self.raw(&b)
        }
    }

    /// A string with Redis's choice of encoding (module docs).
    pub fn string(&mut self, s: &[u8]) -> std::io::Result<()> {
        if s.len() <= 11 {
            if let Some(v) = canonical_int(s) {
                if let Ok(v) = i8::try_from(v) {
                    return self.raw(&[0xC0, v as u8]);
                }
                if let Ok(v) = i16::try_from(v) {
                    let b = v.to_le_bytes();
                    return self.raw(&[0xC1, b[0], b[1]]);
                }
                if let Ok(v) = i32::try_from(v) {
                    let b = v.to_le_bytes();
                    return self.raw(&[0xC2, b[0], b[1], b[2], b[3]]);
                }
            }
        }
        if self.compression && s.len() > 20 && worth_compressing(s) {
            if let Some(c) = lzf::compress(s, s.len() - 4) {
                self.byte(0xC3)?;
                self.len(c.len() as u64)?;
                self.len(s.len() as u64)?;
                return self.raw(&c);
            }
        }
        self.len(s.len() as u64)?;
        self.raw(s)
    }

    /// The file header: magic, version, and the AUX fields Redis 7.0 writes.
    pub fn header(&mut self, ctime: u64, used_mem: u64) -> std::io::Result<()> {
        self.raw(format!("REDIS{RDB_VERSION:04}").as_bytes())?;
        self.aux(b"redis-ver", crate::REDIS_VERSION.as_bytes())?;
        self.aux(b"redis-bits", b"64")?;
        self.aux(b"ctime", ctime.to_string().as_bytes())?;
        self.aux(b"used-mem", used_mem.to_string().as_bytes())?;
        self.aux(b"aof-base", b"0")
    }

    pub fn aux(&mut self, name: &[u8], value: &[u8]) -> std::io::Result<()> {
        self.byte(OP_AUX)?;
        self.string(name)?;
        self.string(value)
    }

    /// SELECTDB and the RESIZEDB sizing hint.
    pub fn select_db(&mut self, db: usize, keys: u64, expires: u64) -> std::io::Result<()> {
        self.byte(OP_SELECTDB)?;
        self.len(db as u64)?;
        self.byte(OP_RESIZEDB)?;
        self.len(keys)?;
        self.len(expires)
    }

    /// One key record: optional expiry, type, key, value.
    pub fn entry(
        &mut self,
        key: &[u8],
        value: &Value,
        expire_ms: Option<u64>,
    ) -> std::io::Result<()> {
        if let Some(t) = expire_ms {
            self.byte(OP_EXPIRETIME_MS)?;
            self.raw(&(t as i64).to_le_bytes())?;
        }
        self.byte(value_type(value))?;
        self.string(key)?;
        self.value(value)
    }

    /// A value's payload (without its type byte).
    pub fn value(&mut self, value: &Value) -> std::io::Result<()> {
        match value {
            Value::Str(s) => self.string(s),
            other => module::write_value(self, other),
        }
    }

    // -- module opcode stream (§4.2) --------------------------------------------------------------

    pub fn module_uint(&mut self, v: u64) -> std::io::Result<()> {
        self.len(MOD_UINT)?;
        self.len(v)
    }

    pub fn module_double(&mut self, v: f64) -> std::io::Result<()> {
        self.len(MOD_DOUBLE)?;
        self.raw(&v.to_le_bytes())
    }

    pub fn module_string(&mut self, s: &[u8]) -> std::io::Result<()> {
        self.len(MOD_STRING)?;
        self.string(s)
    }

    /// A module STRING whose bytes are held in pages. Compression needs the whole string, so it is
    /// gathered first when compression is on; otherwise the pages are streamed as they are.
    pub fn module_string_pages<'a>(
        &mut self,
        total: u64,
        pages: impl Iterator<Item = &'a [u8]>,
    ) -> std::io::Result<()> {
        let pages: Vec<&[u8]> = pages.collect();
        if self.compression && total as usize > SAMPLE_ABOVE && !pages_worth_compressing(&pages) {
            // Evidently incompressible (a filter near capacity): stream the pages as they are,
            // without gathering a copy of the whole array.
            return self.module_string_plain(total, pages.into_iter());
        }
        if (self.compression && total > 20) || total <= 11 {
            let mut all = Vec::new();
            all.try_reserve_exact(total as usize)
                .map_err(|_| std::io::Error::other("out of memory gathering a module string"))?;
            for p in pages {
                all.extend_from_slice(p);
            }
            return self.module_string(&all);
        }
        self.module_string_plain(total, pages.into_iter())
    }

    fn module_string_plain<'a>(
        &mut self,
        total: u64,
        pages: impl Iterator<Item = &'a [u8]>,
    ) -> std::io::Result<()> {
        self.len(MOD_STRING)?;
        self.len(total)?;
        let mut n = 0u64;
        for p in pages {
            n += p.len() as u64;
            self.raw(p)?;
        }
        if n != total {
            return Err(std::io::Error::other("module string pages do not add up"));
        }
        Ok(())
    }

    pub fn module_eof(&mut self) -> std::io::Result<()> {
        self.len(MOD_EOF)
    }

    /// EOF opcode and checksum; returns the sink and the byte count.
    pub fn finish(mut self) -> std::io::Result<(W, u64)> {
        self.byte(OP_EOF)?;
        let crc = if self.checksum {
            self.crc.clone().finalize()
        } else {
            0
        };
        self.w.write_all(&crc.to_le_bytes())?;
        self.written += 8;
        Ok((self.w, self.written))
    }

    /// The DUMP footer: 2-byte version and the CRC of everything before it (checksummed always).
    pub fn finish_dump(mut self) -> std::io::Result<W> {
        self.raw(&RDB_VERSION.to_le_bytes())?;
        let crc = self.crc.clone().finalize();
        self.w.write_all(&crc.to_le_bytes())?;
        Ok(self.w)
    }
}

/// Strings above this size are sampled before a full compression attempt.
const SAMPLE_ABOVE: usize = 1 << 20;
const SAMPLE_LEN: usize = 64 << 10;

/// False when a large string is evidently incompressible: none of three 64 KiB samples (start,
/// middle, end) shrinks by even 1/64. A Bloom filter filled near capacity is random bits; trying
/// LZF on every byte of it costs more than writing it. For such strings Redis would attempt the
/// compression and (almost always) fall back to the plain form, which is what we write; in the
/// rare case of a string compressible only outside the samples we write the plain form where
/// Redis would compress — both forms load identically. Strings up to 1 MiB (every DUMP payload
/// the golden vectors hold) always get Redis's exact choice.
fn worth_compressing(s: &[u8]) -> bool {
    if s.len() <= SAMPLE_ABOVE {
        return true;
    }
    let mid = s.len() / 2 - SAMPLE_LEN / 2;
    [0, mid, s.len() - SAMPLE_LEN]
        .iter()
        .any(|&at| lzf::compress(&s[at..at + SAMPLE_LEN], SAMPLE_LEN - SAMPLE_LEN / 64).is_some())
}

/// [`worth_compressing`] for a string held in pages: samples the first, middle and last pages.
fn pages_worth_compressing(pages: &[&[u8]]) -> bool {
    if pages.is_empty() {
        return true;
    }
    [0, pages.len() / 2, pages.len() - 1].iter().any(|&i| {
        let p = pages[i];
        let sample = &p[..p.len().min(SAMPLE_LEN)];
        sample.len() < 4096 || lzf::compress(sample, sample.len() - sample.len() / 64).is_some()
    })
}

/// The type byte a value is stored under.
pub fn value_type(value: &Value) -> u8 {
    match value {
        Value::Str(_) => TYPE_STRING,
        Value::Bloom(_) | Value::Cuckoo(_) | Value::TDigest(_) => TYPE_MODULE_2,
    }
}

/// The value of `s` if it is a canonical decimal integer (optional `-`, no leading zeros, no `+`,
/// not `-0`), as Redis's `string2ll` + `ll2string` round trip demands.
pub fn canonical_int(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.first()? {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    let first = *digits.first()?;
    if first == b'0' {
        return (digits.len() == 1 && !neg).then_some(0);
    }
    if digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: i128 = 0;
    for &d in digits {
        v = v * 10 + (d - b'0') as i128;
    }
    let v = if neg { -v } else { v };
    i64::try_from(v).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(f: impl FnOnce(&mut RdbWriter<&mut Vec<u8>>)) -> Vec<u8> {
        let mut out = Vec::new();
        let mut w = RdbWriter::new(&mut out, SaveOptions::default());
        f(&mut w);
        out
    }

    #[test]
    fn lengths_use_the_shortest_form() {
        assert_eq!(enc(|w| w.len(0).unwrap()), [0x00]);
        assert_eq!(enc(|w| w.len(63).unwrap()), [0x3f]);
        assert_eq!(enc(|w| w.len(64).unwrap()), [0x40, 0x40]);
        assert_eq!(enc(|w| w.len(16383).unwrap()), [0x7f, 0xff]);
        assert_eq!(enc(|w| w.len(16384).unwrap()), [0x80, 0, 0, 0x40, 0]);
        assert_eq!(
            enc(|w| w.len(1 << 32).unwrap()),
            [0x81, 0, 0, 0, 1, 0, 0, 0, 0]
        );
    }

    #[test]
    fn strings_pick_redis_encodings() {
        assert_eq!(enc(|w| w.string(b"64").unwrap()), [0xC0, 0x40]);
        assert_eq!(enc(|w| w.string(b"12345").unwrap()), [0xC1, 0x39, 0x30]);
        assert_eq!(
            enc(|w| w.string(b"987654").unwrap()),
            [0xC2, 0x06, 0x12, 0x0f, 0x00]
        );
        assert_eq!(enc(|w| w.string(b"-0").unwrap()), [0x02, b'-', b'0']);
        assert_eq!(enc(|w| w.string(b"007").unwrap()), [0x03, b'0', b'0', b'7']);
        assert_eq!(
            enc(|w| w.string(b"4294967296").unwrap())[0],
            10,
            "beyond 32 bits: plain"
        );
        assert_eq!(
            enc(|w| w.string(&[b'a'; 40]).unwrap()),
            [0xC3, 0x09, 0x28, 0x01, 0x61, 0x61, 0xE0, 0x1B, 0x00, 0x01, 0x61, 0x61]
        );
    }

    #[test]
    fn paged_module_strings_encode_like_contiguous_ones() {
        let mut seed = 0x2545F4914F6CDD1Du64;
        let random: Vec<u8> = (0..20 * 65536)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect();
        let mut sparse = vec![0u8; 20 * 65536];
        for i in (0..sparse.len()).step_by(977) {
            sparse[i] = 0x10;
        }
        for data in [random, sparse] {
            let paged = enc(|w| {
                w.module_string_pages(data.len() as u64, data.chunks(65536))
                    .unwrap()
            });
            let whole = enc(|w| w.module_string(&data).unwrap());
            assert_eq!(paged, whole);
            let mut r = super::super::RdbReader::new(&paged[..], paged.len() as u64);
            assert_eq!(r.module_string("x").unwrap(), data);
        }
    }

    #[test]
    fn canonical_ints() {
        assert_eq!(canonical_int(b"0"), Some(0));
        assert_eq!(canonical_int(b"-1"), Some(-1));
        assert_eq!(canonical_int(b"+1"), None);
        assert_eq!(canonical_int(b"01"), None);
        assert_eq!(canonical_int(b"-"), None);
        assert_eq!(canonical_int(b""), None);
        assert_eq!(canonical_int(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(canonical_int(b"9223372036854775808"), None);
    }
}
