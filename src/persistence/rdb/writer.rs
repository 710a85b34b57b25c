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
use crate::store::pages::{Page, ZEROS};
use crate::store::Value;

/// What a save needs from the configuration.
#[derive(Debug, Clone, Copy)]
pub struct SaveOptions {
    /// `rdbcompression`: LZF-compress strings longer than 20 bytes.
    pub compression: bool,
    /// `rdbchecksum`: write the CRC-64 (zeroes otherwise).
    pub checksum: bool,
    /// `rdb-key-save-delay`: a pause per key record ([`debug_delay`]); 0 in production.
    pub key_save_delay: i32,
    /// Which access record precedes each key, by `maxmemory-policy` ([`AccessRecords`]).
    pub access_records: AccessRecords,
}

/// The access record a key record starts with, as Redis's `rdbSaveKeyValuePair` writes it: an
/// IDLE record (its idle seconds) under an LRU policy, a FREQ record (its LFU counter, decayed to
/// now) under an LFU one, none under the others. Another Redis loading the file ranks the keys
/// for eviction as they were ranked here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AccessRecords {
    #[default]
    None,
    Idle,
    Freq,
}

impl AccessRecords {
    /// The records for `maxmemory-policy` `policy` (Redis's `MAXMEMORY_FLAG_LRU` and
    /// `MAXMEMORY_FLAG_LFU`).
    pub fn for_policy(policy: &str) -> AccessRecords {
        // As `Shared::apply_memory_config` tells the access clocks the policy's kind.
        if policy.contains("lfu") {
            AccessRecords::Freq
        } else if policy.contains("lru") {
            AccessRecords::Idle
        } else {
            AccessRecords::None
        }
    }
}

impl Default for SaveOptions {
    fn default() -> Self {
        SaveOptions {
            compression: true,
            checksum: true,
            key_save_delay: 0,
            access_records: AccessRecords::None,
        }
    }
}

impl SaveOptions {
    /// The options of a save (BGSAVE, SAVE, AOF rewrite, full sync) as configured when it starts.
    pub fn from_config(c: &crate::config::Config) -> SaveOptions {
        SaveOptions {
            compression: c.rdbcompression,
            checksum: c.rdbchecksum,
            key_save_delay: c.rdb_key_save_delay,
            access_records: AccessRecords::for_policy(&c.maxmemory_policy),
        }
    }
}

/// Redis's `debugDelay`, applied per key by `rdb-key-save-delay` so that tests can hold a save or a
/// rewrite open: `usec > 0` sleeps that many microseconds; `usec < 0` sleeps 1 µs with probability
/// 1/|usec| (shorter sleeps than a syscall allows, on average). Only ever called on a save's own
/// thread (or under SAVE's lock, which blocks the server exactly as Redis's SAVE does).
pub fn debug_delay(usec: i32) {
    let usec = if usec < 0 {
        // A cheap per-thread xorshift is enough for "1 in n".
        thread_local!(static STATE: std::cell::Cell<u64> = const { std::cell::Cell::new(0x9E37_79B9_7F4A_7C15) });
        let r = STATE.with(|s| {
            let mut x = s.get();
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            s.set(x);
            x
        });
        u64::from(r.is_multiple_of(u64::from(usec.unsigned_abs())))
    } else {
        usec as u64
    };
    if usec > 0 {
        std::thread::sleep(std::time::Duration::from_micros(usec));
    }
}

/// Writes RDB items to `W`, keeping the running CRC and the byte count.
pub struct RdbWriter<W: Write> {
    w: W,
    crc: crc64::Crc64Digest,
    checksum: bool,
    compression: bool,
    key_save_delay: i32,
    access_records: AccessRecords,
    written: u64,
}

impl<W: Write> RdbWriter<W> {
    pub fn new(w: W, opts: SaveOptions) -> RdbWriter<W> {
        RdbWriter {
            w,
            crc: crc64::digest(),
            checksum: opts.checksum,
            compression: opts.compression,
            key_save_delay: opts.key_save_delay,
            access_records: opts.access_records,
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
        self.header_for(ctime, used_mem, false)
    }

    /// The header with `aof-base` 1 for an AOF base file (Redis's RDBFLAGS_AOF_PREAMBLE), 0 else.
    pub fn header_for(&mut self, ctime: u64, used_mem: u64, aof_base: bool) -> std::io::Result<()> {
        self.raw(format!("REDIS{RDB_VERSION:04}").as_bytes())?;
        self.aux(b"redis-ver", crate::REDIS_VERSION.as_bytes())?;
        self.aux(b"redis-bits", b"64")?;
        self.aux(b"ctime", ctime.to_string().as_bytes())?;
        self.aux(b"used-mem", used_mem.to_string().as_bytes())?;
        self.aux(b"aof-base", if aof_base { b"1" } else { b"0" })
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

    /// One key record: optional expiry, the access record of the policy ([`AccessRecords`],
    /// from the key's access bits `access`), type, key, value.
    pub fn entry(
        &mut self,
        key: &[u8],
        value: &Value,
        expire_ms: Option<u64>,
        access: u32,
    ) -> std::io::Result<()> {
        if self.key_save_delay != 0 {
            debug_delay(self.key_save_delay);
        }
        if let Some(t) = expire_ms {
            self.byte(OP_EXPIRETIME_MS)?;
            self.raw(&(t as i64).to_le_bytes())?;
        }
        match self.access_records {
            AccessRecords::None => {}
            AccessRecords::Idle => {
                self.byte(OP_IDLE)?;
                self.len(crate::store::access::idle_ms(access) / 1000)?;
            }
            AccessRecords::Freq => {
                self.byte(OP_FREQ)?;
                self.raw(&[crate::store::access::decayed_counter(access) as u8])?;
            }
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

    /// A module STRING whose bytes are held in pages, written with memory bounded by a page
    /// (see "Streaming paged strings" below) whatever the string's length. `pages` is walked twice
    /// when the string is compressed, so it must yield the same pages both times.
    pub fn module_string_paged<'a, I>(&mut self, total: u64, pages: I) -> std::io::Result<()>
    where
        I: Iterator<Item = Page<'a>> + Clone,
    {
        if total <= GATHER_UP_TO as u64 {
            // Small enough to gather (at most 1 MiB): Redis's exact encoding choice and bytes.
            let mut all = Vec::new();
            all.try_reserve_exact(total as usize)
                .map_err(|_| std::io::Error::other("out of memory gathering a module string"))?;
            for p in pages {
                all.extend_from_slice(p.bytes());
            }
            if all.len() as u64 != total {
                return Err(std::io::Error::other("module string pages do not add up"));
            }
            return self.module_string(&all);
        }
        if self.compression && pages_worth_compressing(pages.clone()) {
            if let Some(plan) = plan_chunks(total, pages.clone())? {
                self.len(MOD_STRING)?;
                self.byte(0xC3)?;
                self.len(plan.compressed_len)?;
                self.len(total)?;
                return self.write_chunks(total, pages, plan);
            }
        }
        self.module_string_plain(total, pages)
    }

    /// Second pass of a chunked LZF string: the compressed chunks, from the plan's cache when it
    /// holds them all, else compressed again (LZF is deterministic, so the bytes are the ones
    /// counted in the first pass).
    fn write_chunks<'a, I>(&mut self, total: u64, pages: I, plan: ChunkPlan) -> std::io::Result<()>
    where
        I: Iterator<Item = Page<'a>> + Clone,
    {
        let mut written = 0u64;
        let mut cached = plan
            .cache
            .as_ref()
            .map(|(lens, bytes)| (lens.iter(), &bytes[..]));
        let mut scratch = Vec::new();
        let mut chunks = Chunks::new(pages, &mut scratch);
        while let Some(chunk) = chunks.next_chunk() {
            match chunk {
                Chunk::Zeros(n) => written += self.zero_chunk(n)?,
                Chunk::Data(data) => {
                    let c = match &mut cached {
                        Some((lens, bytes)) => {
                            let n = lens.next().copied().unwrap_or(0) as usize;
                            let (head, rest) = bytes.split_at(n.min(bytes.len()));
                            *bytes = rest;
                            std::borrow::Cow::Borrowed(head)
                        }
                        None => std::borrow::Cow::Owned(compress_chunk(data)),
                    };
                    written += c.len() as u64;
                    self.raw(&c)?;
                }
            }
        }
        if written != plan.compressed_len {
            return Err(std::io::Error::other(format!(
                "paged string of {total} bytes changed while it was written"
            )));
        }
        Ok(())
    }

    /// Writes the compressed form of `n` zero bytes; returns its length.
    fn zero_chunk(&mut self, n: usize) -> std::io::Result<u64> {
        if n == CHUNK {
            let c = zero_chunk_compressed();
            self.raw(c)?;
            Ok(c.len() as u64)
        } else {
            let c = compress_chunk(&ZEROS[..n]);
            self.raw(&c)?;
            Ok(c.len() as u64)
        }
    }

    /// A module STRING in the plain form, streamed page by page.
    fn module_string_plain<'a>(
        &mut self,
        total: u64,
        pages: impl Iterator<Item = Page<'a>>,
    ) -> std::io::Result<()> {
        self.len(MOD_STRING)?;
        self.len(total)?;
        let mut n = 0u64;
        for p in pages {
            n += p.len() as u64;
            self.raw(p.bytes())?;
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

/// [`worth_compressing`] for a string held in pages: samples the first, middle and last pages
/// (a never-written page compresses, so it says yes at once).
fn pages_worth_compressing<'a>(pages: impl Iterator<Item = Page<'a>> + Clone) -> bool {
    let count = pages.clone().count();
    if count == 0 {
        return true;
    }
    let picks = [0, count / 2, count - 1];
    pages
        .enumerate()
        .filter(|(i, _)| picks.contains(i))
        .any(|(_, p)| {
            let sample = &p.bytes()[..p.len().min(SAMPLE_LEN)];
            p.is_zeros()
                || sample.len() < 4096
                || lzf::compress(sample, sample.len() - sample.len() / 64).is_some()
        })
}

// ---------------------------------------------------------------------------------------------
// Streaming paged strings
// ---------------------------------------------------------------------------------------------
//
// A module STRING of a large filter (a 1.38 GB Bloom link, a 1 GB cuckoo sub-filter) must not be
// gathered: a never-written filter holds no pages at all, and SAVE, BGSAVE, DUMP, the AOF rewrite
// and the replication full sync would otherwise each allocate the whole array. The plain form
// streams trivially. The LZF form (`C3 <clen> <len> <data>`, the only compressed string encoding
// a module string may use: rdb.md §2.2) needs `clen` before the data, and LZF's output cannot be
// known without compressing. So a string above [`GATHER_UP_TO`] is compressed in independent
// chunks of [`CHUNK`] bytes of the logical string, each chunk with a fresh LZF history:
//
// * The concatenation of LZF streams is one LZF stream: a decoder (liblzf's, ours) just runs
//   instruction after instruction, and a chunk's back-references never reach before its start,
//   so Redis and RedisBloom load it as any other `C3` string of that `len`.
// * Pass 1 compresses every chunk to learn `clen` and keeps the compressed chunks while they total
//   at most [`CACHE_LIMIT`]; pass 2 writes them from that cache, or compresses again when the cache
//   overflowed (LZF is deterministic). A chunk of never-written pages is never materialised: its
//   compressed form is computed once per process from the shared zero page.
// * Memory is one chunk of scratch, the LZF table, and at most [`CACHE_LIMIT`] of cache, whatever
//   the string's length. A dense compressible filter costs two compression passes; a sparse one
//   (the usual large filter) fits the cache and costs one.
// * The output differs from Redis's whole-string compression only for strings above 1 MiB, where
//   the sampling rule above already makes our choice ours; both load identically. With a 64 KiB
//   chunk the loss is negligible: a never-written 1.38 GB link compresses to 15.7 MB either way.

/// Strings up to this length are gathered and encoded exactly as Redis would.
const GATHER_UP_TO: usize = SAMPLE_ABOVE;
/// Length of an independently compressed chunk of a streamed string.
pub const CHUNK: usize = 64 * 1024;
/// Compressed chunks kept between the two passes.
const CACHE_LIMIT: usize = 8 << 20;

/// LZF of one chunk, with room for incompressible input (LZF grows it by at most 1/32).
fn compress_chunk(data: &[u8]) -> Vec<u8> {
    // Cannot fail with this budget on a non-empty chunk; an empty one never reaches here.
    lzf::compress(data, data.len() + data.len() / 16 + 16).unwrap_or_default()
}

/// The compressed form of one full chunk of zeros.
fn zero_chunk_compressed() -> &'static [u8] {
    static Z: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    Z.get_or_init(|| compress_chunk(&ZEROS[..CHUNK]))
}

/// What pass 1 learnt: the compressed length, and the compressed data chunks when they fitted.
struct ChunkPlan {
    compressed_len: u64,
    /// Length of each data chunk's compressed form, and their concatenation.
    cache: Option<(Vec<u32>, Vec<u8>)>,
}

/// Pass 1: the chunked compressed length of the string, or `None` when it would not be at least
/// 4 bytes shorter than the original (Redis's rule; the plain form is written then).
fn plan_chunks<'a>(
    total: u64,
    pages: impl Iterator<Item = Page<'a>>,
) -> std::io::Result<Option<ChunkPlan>> {
    let mut compressed_len = 0u64;
    let mut lens = Vec::new();
    let mut bytes = Vec::new();
    let mut caching = true;
    let mut scratch = Vec::new();
    let mut seen = 0u64;
    let mut chunks = Chunks::new(pages, &mut scratch);
    while let Some(chunk) = chunks.next_chunk() {
        match chunk {
            Chunk::Zeros(n) => {
                seen += n as u64;
                compressed_len += if n == CHUNK {
                    zero_chunk_compressed().len()
                } else {
                    compress_chunk(&ZEROS[..n]).len()
                } as u64;
            }
            Chunk::Data(data) => {
                seen += data.len() as u64;
                let c = compress_chunk(data);
                compressed_len += c.len() as u64;
                if caching && bytes.len() + c.len() <= CACHE_LIMIT {
                    lens.push(c.len() as u32);
                    bytes.extend_from_slice(&c);
                } else if caching {
                    caching = false;
                    lens = Vec::new();
                    bytes = Vec::new();
                }
            }
        }
    }
    if seen != total {
        return Err(std::io::Error::other("module string pages do not add up"));
    }
    if compressed_len + 4 > total {
        return Ok(None);
    }
    Ok(Some(ChunkPlan {
        compressed_len,
        cache: caching.then_some((lens, bytes)),
    }))
}

/// One [`CHUNK`] of a paged string: all of it never written, or its bytes.
enum Chunk<'s> {
    Zeros(usize),
    Data(&'s [u8]),
}

/// Cuts a page stream into [`CHUNK`]-byte chunks of the logical string (the last one shorter),
/// whatever the page sizes. A chunk covered by zero pages only is reported as [`Chunk::Zeros`];
/// a chunk inside one allocated page is borrowed; any other chunk is copied into `scratch`.
struct Chunks<'a, 's, I: Iterator<Item = Page<'a>>> {
    pages: I,
    /// The unread rest of the current page.
    cur: Option<Page<'a>>,
    scratch: &'s mut Vec<u8>,
}

impl<'a, 's, I: Iterator<Item = Page<'a>>> Chunks<'a, 's, I> {
    fn new(pages: I, scratch: &'s mut Vec<u8>) -> Self {
        Chunks {
            pages,
            cur: None,
            scratch,
        }
    }

    /// The next page with bytes left, or `None` at the end.
    fn current(&mut self) -> Option<Page<'a>> {
        while self.cur.is_none_or(|p| p.len() == 0) {
            self.cur = Some(self.pages.next()?);
        }
        self.cur
    }

    /// The next chunk; a lending iterator, since a copied chunk borrows the scratch buffer.
    fn next_chunk(&mut self) -> Option<Chunk<'_>> {
        let first = self.current()?;
        if first.len() >= CHUNK {
            // The chunk lies inside the current page.
            self.cur = Some(advance(first, CHUNK));
            return Some(match first {
                Page::Zeros(_) => Chunk::Zeros(CHUNK),
                Page::Bytes(b) => Chunk::Data(&b[..CHUNK]),
            });
        }
        // The chunk spans pages (or is the short last one). Zeros are only counted until a page
        // with bytes appears, so a run of small zero pages is never copied.
        let mut got = 0usize;
        let mut gathering = false;
        self.scratch.clear();
        while got < CHUNK {
            let Some(p) = self.current() else { break };
            let n = p.len().min(CHUNK - got);
            if !gathering && !p.is_zeros() {
                gathering = true;
                self.scratch.resize(got, 0);
            }
            if gathering {
                self.scratch.extend_from_slice(&p.bytes()[..n]);
            }
            self.cur = Some(advance(p, n));
            got += n;
        }
        Some(if gathering {
            Chunk::Data(&self.scratch[..])
        } else {
            Chunk::Zeros(got)
        })
    }
}

/// `page` without its first `n` bytes.
fn advance(page: Page<'_>, n: usize) -> Page<'_> {
    match page {
        Page::Zeros(len) => Page::Zeros(len - n),
        Page::Bytes(b) => Page::Bytes(&b[n..]),
    }
}

/// The type byte a value is stored under.
pub fn value_type(value: &Value) -> u8 {
    match value {
        Value::Str(_) => TYPE_STRING,
        Value::Bloom(_) | Value::Cuckoo(_) | Value::TDigest(_) => TYPE_MODULE_2,
        Value::Cms(_) => TYPE_MODULE_2,
        Value::TopK(_) => TYPE_MODULE_2,
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
    fn key_records_start_with_the_policys_access_record_and_read_back() {
        use crate::persistence::rdb::{AccessRecord, LoadOptions, RdbReader};
        use crate::store::access;
        let record = |records: AccessRecords, bits: u32| {
            let mut out = Vec::new();
            let opts = SaveOptions {
                access_records: records,
                ..SaveOptions::default()
            };
            let mut w = RdbWriter::new(&mut out, opts);
            w.entry(b"k", &Value::str(b"v"), Some(7), bits).unwrap();
            out
        };
        // Redis's order: expiry, then IDLE (a length) or FREQ (a byte), then type, key, value.
        let expiry = [OP_EXPIRETIME_MS, 7, 0, 0, 0, 0, 0, 0, 0];
        let tail = [TYPE_STRING, 1, b'k', 1, b'v'];
        assert_eq!(
            record(AccessRecords::None, 0),
            [&expiry[..], &tail[..]].concat()
        );
        // LFU bits: a counter of 42 stamped with the minute now (no decay to read).
        let lfu_bits = 42;
        let freq = record(AccessRecords::Freq, lfu_bits);
        assert_eq!(&freq[..9], &expiry[..]);
        assert_eq!(freq[9], OP_FREQ);
        assert_eq!(&freq[11..], &tail[..]);
        let idle = record(AccessRecords::Idle, access::lru_clock());
        assert_eq!(&idle[..11], &[&expiry[..], &[OP_IDLE, 0][..]].concat()[..]);
        assert_eq!(&idle[11..], &tail[..]);
        // Read back: the records reach the sink with their key, and only that key's.
        let mut file = Vec::new();
        let mut w = RdbWriter::new(
            &mut file,
            SaveOptions {
                access_records: AccessRecords::Idle,
                ..SaveOptions::default()
            },
        );
        w.header(0, 0).unwrap();
        w.select_db(0, 2, 0).unwrap();
        w.entry(b"a", &Value::str(b"v"), None, access::lru_clock())
            .unwrap();
        w.access_records = AccessRecords::None;
        w.entry(b"b", &Value::str(b"v"), None, 0).unwrap();
        w.finish().unwrap();
        let mut seen = Vec::new();
        RdbReader::new(&file[..], file.len() as u64)
            .load_file(LoadOptions::default(), 0, |_, k, _, _, a| {
                seen.push((k.to_vec(), a));
                Ok(())
            })
            .unwrap();
        assert_eq!(
            seen,
            [
                (
                    b"a".to_vec(),
                    AccessRecord {
                        idle_seconds: Some(0),
                        freq: None
                    }
                ),
                (b"b".to_vec(), AccessRecord::default()),
            ]
        );
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

    fn xorshift_bytes(n: usize) -> Vec<u8> {
        let mut seed = 0x2545F4914F6CDD1Du64;
        (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect()
    }

    /// `data` cut into pages of `page` bytes; all-zero pages become `Page::Zeros`.
    fn paged(data: &[u8], page: usize) -> Vec<Page<'_>> {
        data.chunks(page)
            .map(|c| {
                if c.iter().all(|&b| b == 0) {
                    Page::Zeros(c.len())
                } else {
                    Page::Bytes(c)
                }
            })
            .collect()
    }

    fn read_back(encoded: &[u8]) -> Vec<u8> {
        let mut r = super::super::RdbReader::new(encoded, encoded.len() as u64);
        r.module_string("x").unwrap()
    }

    #[test]
    fn small_paged_strings_encode_exactly_like_contiguous_ones() {
        let mut sparse = vec![0u8; 16 * 65536];
        for i in (0..sparse.len()).step_by(977) {
            sparse[i] = 0x10;
        }
        for data in [
            xorshift_bytes(16 * 65536),
            sparse,
            vec![0; 5000],
            b"12".to_vec(),
        ] {
            for page in [4096, 65536, 1000] {
                let pages = paged(&data, page);
                let p = enc(|w| {
                    w.module_string_paged(data.len() as u64, pages.iter().copied())
                        .unwrap()
                });
                assert_eq!(p, enc(|w| w.module_string(&data).unwrap()));
            }
        }
    }

    #[test]
    fn large_paged_strings_stream_and_load_back() {
        let n = 3 * (1 << 20) + 12345;
        let mut sparse = vec![0u8; n];
        for i in (0..n).step_by(40_000) {
            sparse[i] = 0x81;
        }
        let random = xorshift_bytes(n);
        let zeros = vec![0u8; n];
        for (name, data) in [("sparse", &sparse), ("random", &random), ("zeros", &zeros)] {
            for page in [4096, 65536, 7 * 1000, 200_000] {
                let pages = paged(data, page);
                let out = enc(|w| {
                    w.module_string_paged(n as u64, pages.iter().copied())
                        .unwrap()
                });
                assert_eq!(&read_back(&out), data, "{name} in pages of {page}");
                let compressed = out[1] == 0xC3;
                assert_eq!(compressed, name != "random", "{name}: encoding");
                if name == "zeros" {
                    // 64 KiB of zeros compresses to ~750 bytes.
                    assert!(out.len() < n / 64, "{name}: {} bytes", out.len());
                }
            }
        }
    }

    #[test]
    fn the_cache_limit_changes_nothing_but_the_passes() {
        // Compressible, but more than CACHE_LIMIT of compressed output: pass 2 compresses again.
        let n = 3 * CACHE_LIMIT;
        let random = xorshift_bytes(n / 8 + 1);
        let data: Vec<u8> = (0..n).map(|i| random[i / 8]).collect();
        let pages = paged(&data, 65536);
        let out = enc(|w| {
            w.module_string_paged(n as u64, pages.iter().copied())
                .unwrap()
        });
        assert_eq!(out[1], 0xC3);
        assert!(out.len() > CACHE_LIMIT, "test needs an overflowing cache");
        assert_eq!(read_back(&out), data);
    }

    #[test]
    fn a_string_whose_pages_do_not_add_up_is_an_error() {
        let data = vec![1u8; 2 << 20];
        let pages = paged(&data, 65536);
        let mut out = Vec::new();
        let mut w = RdbWriter::new(&mut out, SaveOptions::default());
        assert!(w
            .module_string_paged(data.len() as u64 + 1, pages.iter().copied())
            .is_err());
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
