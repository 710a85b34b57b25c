//! The RDB reader: files written by Redis 7.x / 8.x (versions 1–12) and by hyperbloom, and DUMP
//! payloads.
//!
//! # Trust nothing
//!
//! The input may be truncated, corrupt or crafted. The reader knows how many bytes remain (the file
//! size, or the payload length), so every length is checked against what is left *before* anything
//! is allocated for it; an LZF string's stated original length is also checked against the most the
//! compressed bytes could expand to (a 3-byte back-reference yields at most 264 bytes), and large
//! buffers are reserved with `try_reserve_exact`. Every error carries the byte offset where it was
//! detected, and type errors name the key. Nothing here panics on bad input.
//!
//! # What is accepted
//!
//! String values (type 0, all three string encodings), RedisBloom module values (type 7:
//! `MBbloom--` and `MBbloomCF`, `module.rs`), expiries in seconds or milliseconds, AUX fields
//! (ignored, `%`-prefixed ones logged by the caller), RESIZEDB and SLOT_INFO hints, IDLE/FREQ
//! (ignored: hyperbloom keeps no LRU/LFU data), MODULE_AUX and FUNCTION2 records and type-7 values of
//! other modules (skipped and reported). Any other value type stops the load with
//! [`RdbError::Unsupported`]: the format has no per-record length, so it cannot be skipped.
//!
//! # Speed (issue 11: load at least as fast as Redis)
//!
//! Most of an RDB file is tiny items: an opcode, a length byte, a 10-byte key, a 16-byte value.
//! What each costs is what counts, so:
//! - The reader buffers the input itself ([`READ_AHEAD`], 1 MiB; a smaller input gets a buffer of
//!   its own size): a byte is a bounds check and a load. Through a `BufReader` each was a
//!   `read_exact` and a CRC update of one byte (`fill` and `crc64::update_table` were ~20 % of the
//!   perf samples of a 1M-string load). The CRC now runs over the buffer in large pieces, and a
//!   string bigger than the buffer is read straight into its destination and summed there.
//! - Keys and string values of up to [`SCRATCH_MAX`] bytes are read into two reused buffers
//!   ([`RdbReader::string_into`]); the key is copied into its entry's block and a short value into
//!   the value (`Str` inlines up to 30 bytes). Before, each key was a `Vec` that became `Bytes`
//!   and was freed once copied, and each short value a `Vec` freed once inlined: two allocations
//!   and two frees per key, a quarter of the instructions.
//! - The file load itself runs on two threads (`persistence::load_into`): this reader on one,
//!   the key-table inserts on the other. The reader is unchanged by it: the sink runs on the
//!   decoding thread.
//!
//! Instructions for a whole server run loading each file (callgrind, all threads; files of
//! `scripts/bench-rdb-load.sh`, made and saved by Redis 7.0.15), main 28d729e -> this design:
//! 1M small strings, 10 % with TTL (29.8 MB): 2.227 G -> 1.385 G (0.62x); 300k strings + 100k
//! HLLs + 20k small Bloom filters (16.7 MB): 1.067 G -> 0.671 G (0.63x); four 36 MB Bloom
//! filters (42.8 MB): 2.575 G -> 2.136 G (0.83x, mostly `lzf::copy_back`'s run copies), then
//! 1.605 G with `lzf`'s fixed-buffer decoder (Redis 7.0.15 on the same file: 1.304 G).

use std::io::Read;

use super::*;
use crate::persistence::{crc64, lzf};
use crate::store::{Str, Value};

/// How a load treats the data.
#[derive(Debug, Clone, Copy)]
pub struct LoadOptions {
    /// Verify the CRC-64 (`rdbchecksum`).
    pub verify_checksum: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            verify_checksum: true,
        }
    }
}

/// What a load found besides the keys.
#[derive(Debug, Default, Clone)]
pub struct LoadStats {
    pub version: u32,
    pub keys_loaded: u64,
    pub keys_expired: u64,
    /// Human-readable notes about records that were ignored (other modules' values, functions...).
    pub skipped: Vec<String>,
    /// AUX fields, in file order.
    pub aux: Vec<(Vec<u8>, Vec<u8>)>,
    /// The stored checksum was zero (not computed by the writer).
    pub checksum_absent: bool,
    /// Bytes read, checksum included: where an RDB-preamble AOF's commands start.
    pub consumed: u64,
}

/// A length or a special string encoding (§2.1).
enum Len {
    Len(u64),
    Enc(u8),
}

/// The most the reader buffers ahead of what it has parsed (a smaller input gets a buffer of its
/// own size, so a DUMP payload costs no megabyte).
const READ_AHEAD: usize = 1 << 20;

/// The longest string [`RdbReader::string_into`] reads into the caller's reused buffer.
pub const SCRATCH_MAX: usize = 4096;

/// Reads RDB items from `R`, tracking the offset, the bytes left and the running CRC.
///
/// The reader keeps its own buffer: a length byte or an opcode is one bounds check and one load
/// from it, not a `read_exact` through a `BufReader` with a CRC update of one byte (which were 20 %
/// of the time to load a million small strings, `fill` and `crc64::update_table` in `perf`). The
/// CRC runs over the buffer in big pieces instead: `buf[crc_from..head]` are the bytes parsed but
/// not yet summed, summed before they leave the buffer and when the checksum is read.
pub struct RdbReader<R: Read> {
    r: R,
    buf: Vec<u8>,
    /// The next byte to parse.
    head: usize,
    /// The end of the bytes read into `buf`.
    tail: usize,
    /// The first parsed byte not yet in `crc`.
    crc_from: usize,
    pos: u64,
    limit: u64,
    crc: crc64::Crc64Digest,
}

/// The access records before a key (`OP_IDLE`, `OP_FREQ`), as the file holds them: what they
/// mean depends on the loading server's policy (`store::access::loaded`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AccessRecord {
    /// Seconds since the key's last access (an LRU policy's save).
    pub idle_seconds: Option<u64>,
    /// The key's LFU counter (an LFU policy's save).
    pub freq: Option<u8>,
}

impl<R: Read> RdbReader<R> {
    /// `size` is the total number of bytes `r` will yield (the file size or payload length).
    pub fn new(r: R, size: u64) -> RdbReader<R> {
        let cap = usize::try_from(size).unwrap_or(READ_AHEAD).min(READ_AHEAD);
        RdbReader {
            r,
            buf: vec![0; cap],
            head: 0,
            tail: 0,
            crc_from: 0,
            pos: 0,
            limit: size,
            crc: crc64::digest(),
        }
    }

    /// Current byte offset.
    pub fn offset(&self) -> u64 {
        self.pos
    }

    pub fn remaining(&self) -> u64 {
        self.limit - self.pos
    }

    pub fn corrupt(&self, what: impl Into<String>) -> RdbError {
        RdbError::corrupt(what, self.pos)
    }

    /// Sums the parsed bytes still in the buffer into the CRC.
    fn sum_parsed(&mut self) {
        self.crc.update(&self.buf[self.crc_from..self.head]);
        self.crc_from = self.head;
    }

    /// The CRC of every byte parsed so far.
    fn crc_so_far(&mut self) -> u64 {
        self.sum_parsed();
        self.crc.clone().finalize()
    }

    /// Refills the (fully parsed) buffer from `r`, reading no further than `limit`: false at the
    /// end of the input.
    fn refill(&mut self) -> Result<bool, RdbError> {
        debug_assert_eq!(self.head, self.tail);
        self.sum_parsed();
        self.head = 0;
        self.tail = 0;
        self.crc_from = 0;
        let want = usize::try_from(self.remaining())
            .unwrap_or(usize::MAX)
            .min(self.buf.len());
        while self.tail < want {
            match self.r.read(&mut self.buf[self.tail..want]) {
                Ok(0) => break,
                Ok(n) => self.tail += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(RdbError::Io(e)),
            }
        }
        Ok(self.tail > 0)
    }

    /// Copies the next `out.len()` bytes into `out`.
    fn fill(&mut self, out: &mut [u8]) -> Result<(), RdbError> {
        let n = out.len();
        if n <= self.tail - self.head {
            out.copy_from_slice(&self.buf[self.head..self.head + n]);
            self.head += n;
            self.pos += n as u64;
            return Ok(());
        }
        self.fill_slow(out)
    }

    #[cold]
    fn fill_slow(&mut self, out: &mut [u8]) -> Result<(), RdbError> {
        let at = self.pos;
        if (out.len() as u64) > self.remaining() {
            return Err(RdbError::Truncated { offset: at });
        }
        let mut done = 0;
        while done < out.len() {
            if self.head == self.tail {
                let left = out.len() - done;
                if left >= self.buf.len() {
                    // A big string: straight from `r` into its destination, summed there.
                    self.sum_parsed();
                    self.r.read_exact(&mut out[done..]).map_err(|e| {
                        if e.kind() == std::io::ErrorKind::UnexpectedEof {
                            RdbError::Truncated { offset: at }
                        } else {
                            RdbError::Io(e)
                        }
                    })?;
                    self.crc.update(&out[done..]);
                    self.pos += left as u64;
                    return Ok(());
                }
                if !self.refill()? {
                    return Err(RdbError::Truncated { offset: at });
                }
            }
            let k = (self.tail - self.head).min(out.len() - done);
            out[done..done + k].copy_from_slice(&self.buf[self.head..self.head + k]);
            self.head += k;
            self.pos += k as u64;
            done += k;
        }
        Ok(())
    }

    #[inline]
    pub fn byte(&mut self) -> Result<u8, RdbError> {
        if self.head < self.tail {
            let b = self.buf[self.head];
            self.head += 1;
            self.pos += 1;
            return Ok(b);
        }
        let mut b = [0u8; 1];
        self.fill(&mut b)?;
        Ok(b[0])
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], RdbError> {
        let mut b = [0u8; N];
        self.fill(&mut b)?;
        Ok(b)
    }

    /// `n` bytes into a new vector; `n` is checked against the bytes left first.
    pub fn bytes(&mut self, n: u64) -> Result<Vec<u8>, RdbError> {
        if n > self.remaining() {
            return Err(RdbError::Truncated { offset: self.pos });
        }
        let mut v = Vec::new();
        v.try_reserve_exact(n as usize)
            .map_err(|_| self.corrupt(format!("cannot allocate {n} bytes")))?;
        v.resize(n as usize, 0);
        self.fill(&mut v)?;
        Ok(v)
    }

    fn len_or_enc(&mut self) -> Result<Len, RdbError> {
        let b = self.byte()?;
        Ok(match b >> 6 {
            0 => Len::Len((b & 0x3f) as u64),
            1 => Len::Len((((b & 0x3f) as u64) << 8) | self.byte()? as u64),
            2 => match b {
                0x80 => Len::Len(u32::from_be_bytes(self.array()?) as u64),
                0x81 => Len::Len(u64::from_be_bytes(self.array()?)),
                _ => {
                    return Err(RdbError::corrupt(
                        format!("unknown length encoding 0x{b:02x}"),
                        self.pos - 1,
                    ))
                }
            },
            _ => Len::Enc(b & 0x3f),
        })
    }

    /// A length (§2.1); a special encoding here is corruption.
    #[allow(clippy::len_without_is_empty)] // reads a length field; not a container size
    pub fn len(&mut self) -> Result<u64, RdbError> {
        match self.len_or_enc()? {
            Len::Len(n) => Ok(n),
            Len::Enc(_) => Err(self.corrupt("string encoding where a length was expected")),
        }
    }

    /// A length as rdbLoadLen(rdb, NULL) reads it: an encoding marker is taken as a 6-bit length.
    fn lenient_len(&mut self) -> Result<u64, RdbError> {
        Ok(match self.len_or_enc()? {
            Len::Len(n) => n,
            Len::Enc(e) => e as u64,
        })
    }

    /// The body of an LZF string (encoding 3) after its marker: the compressed bytes and the stated
    /// uncompressed length. Redis reads both lengths with rdbLoadLen(rdb, NULL), which drops the
    /// "encoded" flag: a 0b11xxxxxx byte counts as the 6-bit length xxxxxx. LZF expands at most
    /// about 88-fold, so a larger claim is corrupt before anything is allocated for it.
    fn lzf_body(&mut self, at: u64) -> Result<(Vec<u8>, u64), RdbError> {
        let clen = self.lenient_len()?;
        let olen = self.lenient_len()?;
        if clen > self.remaining() {
            return Err(RdbError::Truncated { offset: self.pos });
        }
        if olen > clen.saturating_mul(88) {
            return Err(RdbError::corrupt(
                format!("LZF string claims {olen} bytes from {clen} compressed bytes"),
                at,
            ));
        }
        Ok((self.bytes(clen)?, olen))
    }

    /// A string delivered in pieces instead of one buffer: `start` gets its length once known
    /// and makes the destination, `piece` then gets consecutive runs of its bytes. Only a 64 KiB
    /// buffer (uncompressed) or the compressed bytes plus an 8 KiB window (LZF) are held, so a
    /// gigabyte-sized module string loads without a gigabyte-sized copy.
    pub fn string_streamed<T>(
        &mut self,
        start: impl FnOnce(u64) -> Result<T, RdbError>,
        mut piece: impl FnMut(&mut T, &[u8]) -> Result<(), RdbError>,
    ) -> Result<T, RdbError> {
        let at = self.pos;
        match self.len_or_enc()? {
            Len::Len(n) => {
                if n > self.remaining() {
                    return Err(RdbError::Truncated { offset: self.pos });
                }
                let mut dest = start(n)?;
                let mut buf = vec![0u8; (n as usize).min(64 * 1024)];
                let mut left = n;
                while left > 0 {
                    let k = (left as usize).min(buf.len());
                    self.fill(&mut buf[..k])?;
                    piece(&mut dest, &buf[..k])?;
                    left -= k as u64;
                }
                Ok(dest)
            }
            Len::Enc(3) => {
                let (c, olen) = self.lzf_body(at)?;
                let mut dest = start(olen)?;
                if olen == 0 {
                    return Ok(dest);
                }
                let mut failed = None;
                let r =
                    lzf::decompress_streamed(&c, olen as usize, |p| match piece(&mut dest, p) {
                        Ok(()) => true,
                        Err(e) => {
                            failed = Some(e);
                            false
                        }
                    });
                match (r, failed) {
                    (Ok(()), _) => Ok(dest),
                    (Err(_), Some(e)) => Err(e),
                    (Err(e), None) => Err(RdbError::corrupt(e.to_string(), at)),
                }
            }
            Len::Enc(e) => {
                // An integer encoding (a short string that reads as a number) is a few bytes.
                let s = match e {
                    0 => (self.byte()? as i8).to_string(),
                    1 => i16::from_le_bytes(self.array()?).to_string(),
                    2 => i32::from_le_bytes(self.array()?).to_string(),
                    _ => {
                        return Err(RdbError::corrupt(
                            format!("unknown string encoding {e}"),
                            self.pos - 1,
                        ))
                    }
                };
                let mut dest = start(s.len() as u64)?;
                piece(&mut dest, s.as_bytes())?;
                Ok(dest)
            }
        }
    }

    /// A string in any of its encodings (§2.2).
    pub fn string(&mut self) -> Result<Vec<u8>, RdbError> {
        match self.len_or_enc()? {
            Len::Len(n) => self.bytes(n),
            Len::Enc(0) => Ok((self.byte()? as i8).to_string().into_bytes()),
            Len::Enc(1) => Ok(i16::from_le_bytes(self.array()?).to_string().into_bytes()),
            Len::Enc(2) => Ok(i32::from_le_bytes(self.array()?).to_string().into_bytes()),
            Len::Enc(3) => {
                let at = self.pos;
                self.lzf_string(at)
            }
            Len::Enc(e) => Err(RdbError::corrupt(
                format!("unknown string encoding {e}"),
                self.pos - 1,
            )),
        }
    }

    /// An LZF string after its marker; `at` is where errors are reported.
    fn lzf_string(&mut self, at: u64) -> Result<Vec<u8>, RdbError> {
        let (c, olen) = self.lzf_body(at)?;
        // Redis's lzf_decompress answers 0 on any error, which its loader takes as success
        // when the stated length is 0: an empty string, whatever the compressed bytes
        // (found by tests/diff_core.rs restore_payload_edges_match_redis).
        if olen == 0 {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        out.try_reserve_exact(olen as usize)
            .map_err(|_| self.corrupt(format!("cannot allocate {olen} bytes")))?;
        lzf::decompress_into(&c, olen as usize, &mut out)
            .map_err(|e| RdbError::corrupt(e.to_string(), at))?;
        Ok(out)
    }

    /// [`RdbReader::string`] into `out` (its old contents dropped), reusing `out`'s buffer for a
    /// string of up to [`SCRATCH_MAX`] bytes: the keys and small values of a load then cost no
    /// allocation of their own (a `Vec` per key, freed once the entry copied it, was a quarter
    /// of the instructions of a load of small strings). A longer string gets a vector of its
    /// own, which replaces `out`'s.
    pub fn string_into(&mut self, out: &mut Vec<u8>) -> Result<(), RdbError> {
        let at = self.pos;
        match self.len_or_enc()? {
            Len::Len(n) if n <= SCRATCH_MAX as u64 => {
                if n > self.remaining() {
                    return Err(RdbError::Truncated { offset: self.pos });
                }
                if out.capacity() > SCRATCH_MAX {
                    *out = Vec::new();
                }
                out.clear();
                out.resize(n as usize, 0);
                self.fill(out)
            }
            Len::Len(n) => {
                *out = self.bytes(n)?;
                Ok(())
            }
            Len::Enc(e @ 0..=2) => {
                let v = match e {
                    0 => self.byte()? as i8 as i64,
                    1 => i16::from_le_bytes(self.array()?) as i64,
                    _ => i32::from_le_bytes(self.array()?) as i64,
                };
                if out.capacity() > SCRATCH_MAX {
                    *out = Vec::new();
                }
                out.clear();
                out.extend_from_slice(v.to_string().as_bytes());
                Ok(())
            }
            Len::Enc(3) => {
                *out = self.lzf_string(at)?;
                Ok(())
            }
            Len::Enc(e) => Err(RdbError::corrupt(
                format!("unknown string encoding {e}"),
                self.pos - 1,
            )),
        }
    }

    /// Skips a string without keeping it (AUX values we ignore, FUNCTION2 bodies).
    pub fn skip_string(&mut self) -> Result<(), RdbError> {
        self.string().map(|_| ())
    }

    // -- module opcode stream ---------------------------------------------------------------------

    fn expect_opcode(&mut self, want: u64, what: &str) -> Result<(), RdbError> {
        let at = self.pos;
        let op = self.len()?;
        if op != want {
            return Err(RdbError::corrupt(
                format!("module field {what}: expected opcode {want}, found {op}"),
                at,
            ));
        }
        Ok(())
    }

    pub fn module_uint(&mut self, what: &str) -> Result<u64, RdbError> {
        self.expect_opcode(MOD_UINT, what)?;
        self.len()
    }

    pub fn module_double(&mut self, what: &str) -> Result<f64, RdbError> {
        self.expect_opcode(MOD_DOUBLE, what)?;
        Ok(f64::from_le_bytes(self.array()?))
    }

    /// The opcode of a module string, before [`RdbReader::string_streamed`] reads it.
    pub fn expect_module_string(&mut self, what: &str) -> Result<(), RdbError> {
        self.expect_opcode(MOD_STRING, what)
    }

    pub fn module_string(&mut self, what: &str) -> Result<Vec<u8>, RdbError> {
        self.expect_opcode(MOD_STRING, what)?;
        self.string()
    }

    pub fn module_eof(&mut self) -> Result<(), RdbError> {
        let at = self.pos;
        if self.len()? != MOD_EOF {
            return Err(RdbError::corrupt(
                "module value not terminated by the proper module value EOF marker",
                at,
            ));
        }
        Ok(())
    }

    /// Walks an opcode stream to its EOF without interpreting it (other modules' values, MODULE_AUX).
    pub fn skip_module_stream(&mut self) -> Result<(), RdbError> {
        loop {
            let at = self.pos;
            match self.len()? {
                MOD_EOF => return Ok(()),
                MOD_SINT | MOD_UINT => {
                    self.len()?;
                }
                MOD_FLOAT => {
                    self.array::<4>()?;
                }
                MOD_DOUBLE => {
                    self.array::<8>()?;
                }
                MOD_STRING => self.skip_string()?,
                op => {
                    return Err(RdbError::corrupt(format!("unknown module opcode {op}"), at));
                }
            }
        }
    }

    // -- values and files -------------------------------------------------------------------------

    /// A value of type `ty` for `key` (which is only used in messages). `Ok(None)` for a module
    /// value of a type hyperbloom does not serve, which has been skipped (`skipped` says which).
    pub fn value(
        &mut self,
        ty: u8,
        key: &[u8],
        type_at: u64,
        skipped: &mut Vec<String>,
    ) -> Result<Option<Value>, RdbError> {
        match ty {
            TYPE_STRING => Ok(Some(Value::Str(self.string()?.into()))),
            TYPE_MODULE_2 => module::read_value(self, key, skipped),
            _ => Err(RdbError::Unsupported {
                ty,
                key: printable_key(key),
                offset: type_at,
            }),
        }
    }

    /// Reads the magic and version.
    pub fn header(&mut self) -> Result<u32, RdbError> {
        let magic: [u8; 9] = self.array().map_err(|e| match e {
            RdbError::Truncated { .. } => RdbError::BadMagic,
            e => e,
        })?;
        if &magic[..5] != b"REDIS" || !magic[5..].iter().all(u8::is_ascii_digit) {
            return Err(RdbError::BadMagic);
        }
        let version: u32 = std::str::from_utf8(&magic[5..])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or(RdbError::BadMagic)?;
        if version < 1 || version > RDB_MAX_READ_VERSION as u32 {
            return Err(RdbError::Version(version));
        }
        Ok(version)
    }

    /// Reads a whole file, handing each live key to `sink(db, key, value, expire_ms, access)`
    /// (`access`: the IDLE and FREQ records before the key, if any).
    /// Keys whose expiry is at or before `now_ms` are dropped (counted in `keys_expired`), as a
    /// Redis primary does.
    pub fn load_file(
        self,
        opts: LoadOptions,
        now_ms: u64,
        sink: impl FnMut(usize, &[u8], Value, Option<u64>, AccessRecord) -> Result<(), RdbError>,
    ) -> Result<LoadStats, RdbError> {
        self.load_file_sized(opts, now_ms, |_, _| {}, sink)
    }

    /// [`RdbReader::load_file`], also handing each RESIZEDB hint to `resize(db, keys)` before the
    /// database's keys. The count is capped at the file's remaining bytes / 8 (a key record is
    /// longer), so a crafted hint cannot make the caller reserve more than the file could fill.
    pub fn load_file_sized(
        mut self,
        opts: LoadOptions,
        now_ms: u64,
        mut resize: impl FnMut(usize, u64),
        mut sink: impl FnMut(usize, &[u8], Value, Option<u64>, AccessRecord) -> Result<(), RdbError>,
    ) -> Result<LoadStats, RdbError> {
        // The key, and a string value, are read into these (reused) buffers; the sink copies the
        // key into its entry, a short string value is copied into the value itself.
        let mut key = Vec::new();
        let mut small = Vec::new();
        let mut stats = LoadStats {
            version: self.header()?,
            ..Default::default()
        };
        let mut db: usize = 0;
        let mut expire: Option<i64> = None;
        // The records before a key that apply to it alone (Redis resets them after each key).
        let mut access = AccessRecord::default();
        loop {
            let type_at = self.pos;
            let op = self.byte()?;
            match op {
                OP_EOF => break,
                OP_SELECTDB => {
                    let n = self.len()?;
                    db = usize::try_from(n).map_err(|_| {
                        RdbError::corrupt(format!("database {n} out of range"), type_at)
                    })?;
                }
                OP_RESIZEDB => {
                    let keys = self.len()?;
                    self.len()?;
                    resize(db, keys.min(self.remaining() / 8));
                }
                OP_SLOT_INFO => {
                    self.len()?;
                    self.len()?;
                    self.len()?;
                }
                OP_EXPIRETIME_MS => expire = Some(i64::from_le_bytes(self.array()?)),
                OP_EXPIRETIME => {
                    expire = Some(i32::from_le_bytes(self.array()?) as i64 * 1000);
                }
                OP_IDLE => access.idle_seconds = Some(self.len()?),
                OP_FREQ => access.freq = Some(self.byte()?),
                OP_AUX => {
                    let k = self.string()?;
                    let v = self.string()?;
                    stats.aux.push((k, v));
                }
                OP_MODULE_AUX => {
                    let id = self.len()?;
                    let at = self.pos;
                    if self.len()? != MOD_UINT {
                        return Err(RdbError::corrupt("MODULE_AUX without its when field", at));
                    }
                    self.len()?;
                    self.skip_module_stream()?;
                    stats.skipped.push(format!(
                        "module aux data of module type {}",
                        module_name(id)
                    ));
                }
                OP_FUNCTION2 => {
                    self.skip_string()?;
                    stats.skipped.push("a function library".to_string());
                }
                OP_FUNCTION_PRE_GA => {
                    return Err(RdbError::corrupt(
                        "pre-release FUNCTION record is not supported",
                        type_at,
                    ));
                }
                ty => {
                    self.string_into(&mut key)?;
                    let value = if ty == TYPE_STRING {
                        self.string_into(&mut small)?;
                        Some(Value::Str(if small.len() <= SCRATCH_MAX {
                            Str::copy_from_slice(&small)
                        } else {
                            Str::from_vec(std::mem::take(&mut small))
                        }))
                    } else {
                        self.value(ty, &key, type_at, &mut stats.skipped)?
                    };
                    let exp = expire.take();
                    let key_access = std::mem::take(&mut access);
                    let Some(value) = value else { continue };
                    match exp {
                        Some(t) if t <= now_ms as i64 => stats.keys_expired += 1,
                        _ => {
                            sink(db, &key, value, exp.map(|t| t as u64), key_access)?;
                            stats.keys_loaded += 1;
                        }
                    }
                }
            }
        }
        let computed = self.crc_so_far();
        if stats.version >= 5 {
            let stored = u64::from_le_bytes(self.array()?);
            if stored == 0 {
                stats.checksum_absent = true;
            } else if opts.verify_checksum && stored != computed {
                return Err(RdbError::Checksum {
                    expected: computed,
                    stored,
                });
            }
        }
        stats.consumed = self.pos;
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(b: &[u8]) -> RdbReader<&[u8]> {
        RdbReader::new(b, b.len() as u64)
    }

    #[test]
    fn lengths_in_all_forms() {
        assert_eq!(reader(&[0x3f]).len().unwrap(), 63);
        assert_eq!(reader(&[0x40, 0x40]).len().unwrap(), 64);
        assert_eq!(reader(&[0x80, 0, 0, 0x40, 0]).len().unwrap(), 16384);
        assert_eq!(
            reader(&[0x81, 0, 0, 0, 1, 0, 0, 0, 0]).len().unwrap(),
            1 << 32
        );
        assert!(reader(&[0x82]).len().is_err());
        assert!(reader(&[0x80, 0]).len().is_err());
    }

    #[test]
    fn strings_in_all_encodings() {
        assert_eq!(reader(&[0xC0, 0xff]).string().unwrap(), b"-1");
        assert_eq!(reader(&[0xC1, 0x39, 0x30]).string().unwrap(), b"12345");
        assert_eq!(
            reader(&[0xC2, 0x06, 0x12, 0x0f, 0x00]).string().unwrap(),
            b"987654"
        );
        assert_eq!(
            reader(&[0xC3, 0x09, 0x28, 0x01, 0x61, 0x61, 0xE0, 0x1B, 0x00, 0x01, 0x61, 0x61])
                .string()
                .unwrap(),
            vec![b'a'; 40]
        );
    }

    #[test]
    fn impossible_lengths_are_refused_before_allocating() {
        // A 4 GiB plain string in a 10-byte input.
        let e = reader(&[0x80, 0xff, 0xff, 0xff, 0xff, 1, 2, 3])
            .string()
            .unwrap_err();
        assert!(matches!(e, RdbError::Truncated { .. }), "{e}");
        // An LZF string claiming 2^40 bytes from 3.
        let e = reader(&[0xC3, 0x03, 0x81, 0, 0, 1, 0, 0, 0, 0, 0, 0x00, 0x61, 0x61])
            .string()
            .unwrap_err();
        assert!(e.to_string().contains("LZF"), "{e}");
    }
}
