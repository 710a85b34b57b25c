//! LZF compression, as Redis uses it for RDB strings (rdb.md §2.2).
//!
//! # Format
//!
//! A stream of control bytes, each followed by its payload:
//!
//! ```text
//! 000LLLLL <L+1 literal bytes>                 literal run, 1..32 bytes
//! LLLooooo oooooooo                            back-reference, length L+2 (L = 1..6)
//! 111ooooo LLLLLLLL oooooooo                   back-reference, length L+9
//!                                              distance = o + 1 (1..8192 bytes back)
//! ```
//!
//! # Why the compressor mirrors liblzf's choices
//!
//! Any valid LZF stream loads, but DUMP payloads are compared byte for byte with what Redis emits
//! (dense HyperLogLogs and sparse Bloom bit arrays are compressed), so [`compress`] makes the same
//! decisions as the liblzf 3.6 configuration Redis builds (`HLOG 16`, `VERY_FAST`): a 65536-slot
//! table of the last position of each 3-byte hash, a match is taken when the remembered position is
//! within 8192 bytes, is not the very first input byte, and repeats the next three bytes; after a
//! match only its last two positions are hashed; and the output budget is enforced with the same
//! conservative tests, so a string Redis leaves uncompressed is also left uncompressed here. The
//! table starts zeroed, which is what a fresh slot table holds; liblzf leaves it uninitialised,
//! which can only differ by offering an extra (still valid) match.
//!
//! The decompressor trusts nothing: every back-reference is checked against the output produced
//! so far and the stated length, so corrupt input yields an error, never a panic.

const HLOG: u32 = 16;
const HSIZE: usize = 1 << HLOG;
const MAX_LIT: usize = 1 << 5;
const MAX_OFF: usize = 1 << 13;
const MAX_REF: usize = (1 << 8) + (1 << 3);

/// The slot of a 3-byte window whose bytes are the low 24 bits of `h` (liblzf's VERY_FAST hash).
#[inline]
fn idx(h: u32) -> usize {
    ((h >> (3 * 8 - HLOG)).wrapping_sub(h.wrapping_mul(5)) as usize) & (HSIZE - 1)
}

/// The hash table: the last position of each 3-byte hash, tagged with the generation (call) that
/// stored it so a slot from an earlier call reads as empty without re-zeroing 512 KiB per call —
/// which for a million small strings would cost more than compressing them.
struct Table {
    slots: Box<[u64]>,
    generation: u64,
}

impl Table {
    fn new() -> Table {
        Table {
            slots: vec![0u64; HSIZE].into_boxed_slice(),
            generation: 0,
        }
    }

    #[inline]
    fn get(&self, slot: usize) -> usize {
        let e = self.slots[slot];
        if e >> 32 == self.generation {
            (e & 0xffff_ffff) as usize
        } else {
            0
        }
    }

    #[inline]
    fn set(&mut self, slot: usize, pos: usize) {
        self.slots[slot] = (self.generation << 32) | pos as u64;
    }
}

thread_local! {
    static TABLE: std::cell::RefCell<Table> = std::cell::RefCell::new(Table::new());
}

/// Compresses `input` into at most `out_len` bytes. `None` when the result would not fit (or the
/// input is empty), exactly when liblzf's `lzf_compress` returns 0. Inputs of 4 GiB or more are
/// not compressed (positions are 32-bit, as in liblzf).
pub fn compress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    if input.is_empty() || out_len == 0 || input.len() >= u32::MAX as usize {
        return None;
    }
    TABLE.with(|t| {
        let mut t = t.borrow_mut();
        t.generation += 1;
        if t.generation >= 1 << 31 {
            t.slots.fill(0);
            t.generation = 1;
        }
        compress_with(&mut t, input, out_len)
    })
}

fn compress_with(htab: &mut Table, input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    let in_len = input.len();
    // liblzf may write up to 3 bytes past its conservative checks before the final test; size the
    // buffer so those writes stay in bounds, then enforce `out_len` on the result.
    let mut out = vec![0u8; out_len + 4];
    let mut op: usize = 1; // slot 0 holds the first run's control byte
    let mut lit: usize = 0;
    let mut ip: usize = 0;
    let first = |p: usize| ((input[p] as u32) << 8) | input[p + 1] as u32;
    let mut hval: u32 = if in_len >= 2 { first(0) } else { 0 };

    while in_len > 2 && ip < in_len - 2 {
        hval = (hval << 8) | input[ip + 2] as u32;
        let slot = idx(hval);
        let r = htab.get(slot);
        htab.set(slot, ip);
        let is_match = r < ip
            && ip - r - 1 < MAX_OFF
            && r > 0
            && input[r + 2] == input[ip + 2]
            && input[r] == input[ip]
            && input[r + 1] == input[ip + 1];
        if is_match {
            let off = ip - r - 1;
            let mut len = 2usize;
            let maxlen = (in_len - ip - len).min(MAX_REF);
            // Conservative budget test first, then the exact one (liblzf's order).
            if op + 3 + 1 >= out_len && op - usize::from(lit == 0) + 3 + 1 >= out_len {
                return None;
            }
            out[op - lit - 1] = (lit as u8).wrapping_sub(1);
            op -= usize::from(lit == 0);
            // liblzf first compares up to 16 bytes unchecked when `maxlen > 16` (the input holds
            // at least 19 bytes from `ip` then), which can extend a match by one or two bytes
            // past `maxlen` near the end of the input; reproduce that.
            let mut mismatch = false;
            if maxlen > 16 {
                for _ in 0..16 {
                    len += 1;
                    if input[r + len] != input[ip + len] {
                        mismatch = true;
                        break;
                    }
                }
            }
            if !mismatch {
                loop {
                    len += 1;
                    if len >= maxlen || input[r + len] != input[ip + len] {
                        break;
                    }
                }
            }
            len -= 2;
            ip += 1;
            if len < 7 {
                out[op] = ((off >> 8) + (len << 5)) as u8;
                op += 1;
            } else {
                out[op] = ((off >> 8) + (7 << 5)) as u8;
                out[op + 1] = (len - 7) as u8;
                op += 2;
            }
            out[op] = off as u8;
            op += 1;
            lit = 0;
            op += 1;
            ip += len + 1;
            if ip >= in_len - 2 {
                break;
            }
            // Hash the last two positions of the match (VERY_FAST).
            ip -= 2;
            hval = first(ip);
            hval = (hval << 8) | input[ip + 2] as u32;
            htab.set(idx(hval), ip);
            ip += 1;
            hval = (hval << 8) | input[ip + 2] as u32;
            htab.set(idx(hval), ip);
            ip += 1;
        } else {
            if op >= out_len {
                return None;
            }
            lit += 1;
            out[op] = input[ip];
            op += 1;
            ip += 1;
            if lit == MAX_LIT {
                out[op - lit - 1] = (lit - 1) as u8;
                lit = 0;
                op += 1;
            }
        }
    }
    if op + 3 > out_len {
        return None;
    }
    while ip < in_len {
        lit += 1;
        out[op] = input[ip];
        op += 1;
        ip += 1;
        if lit == MAX_LIT {
            out[op - lit - 1] = (lit - 1) as u8;
            lit = 0;
            op += 1;
        }
    }
    out[op - lit - 1] = (lit as u8).wrapping_sub(1);
    op -= usize::from(lit == 0);
    if op > out_len {
        return None;
    }
    out.truncate(op);
    Some(out)
}

/// Why an LZF stream was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LzfError {
    #[error("LZF data ends inside a literal run or back-reference")]
    Truncated,
    #[error("LZF back-reference points before the start of the output")]
    BadReference,
    #[error("LZF data decompresses to a length other than the stated one")]
    WrongLength,
    #[error("the decompressed data could not be stored")]
    Sink,
}

/// One step of an LZF stream: a run of literal bytes, or a copy of `len` bytes from `dist` bytes
/// back in the output.
enum Op<'a> {
    Literal(&'a [u8]),
    BackRef { dist: usize, len: usize },
}

/// Reads the operation at `input[*ip]` (which must exist) and moves `*ip` past it. Control byte
/// `000LLLLL`: L+1 literals follow. `LLLooooo` (L < 7) or `111ooooo` + one more length byte: a
/// back-reference of L+2 bytes, distance `(ooooo << 8) + next byte + 1`.
fn next_op<'a>(input: &'a [u8], ip: &mut usize) -> Result<Op<'a>, LzfError> {
    let ctrl = input[*ip] as usize;
    *ip += 1;
    if ctrl < 32 {
        let n = ctrl + 1;
        let lits = input.get(*ip..*ip + n).ok_or(LzfError::Truncated)?;
        *ip += n;
        return Ok(Op::Literal(lits));
    }
    let mut len = ctrl >> 5;
    if len == 7 {
        len += *input.get(*ip).ok_or(LzfError::Truncated)? as usize;
        *ip += 1;
    }
    let low = *input.get(*ip).ok_or(LzfError::Truncated)? as usize;
    *ip += 1;
    Ok(Op::BackRef {
        dist: ((ctrl & 31) << 8) + low + 1,
        len: len + 2,
    })
}

/// Appends `len` bytes copied from `dist` bytes before the end of `buf` (the caller checked
/// `dist <= buf.len()`). The ranges may overlap: the format defines the copy byte by byte, so
/// the bytes repeat with period `dist` (a run of one repeated byte is a reference of distance 1).
/// That is copied in whole periods, doubling: `buf[from..]` always holds a whole number of
/// periods, so appending a prefix of it of that length continues the pattern. A sparse Bloom
/// filter is mostly such runs (distance 1, up to 264 bytes), which a byte-at-a-time copy made
/// half of the time to load one (perf, `scripts/bench-rdb-load.sh bigbloom`).
fn copy_back(buf: &mut Vec<u8>, dist: usize, len: usize) {
    let from = buf.len() - dist;
    if dist >= len {
        buf.extend_from_within(from..from + len);
        return;
    }
    let mut left = len;
    while left > 0 {
        let n = left.min(buf.len() - from);
        buf.extend_from_within(from..from + n);
        left -= n;
    }
}

/// Decompresses `input`, which must produce exactly `out_len` bytes, handing the output to `sink`
/// in order and in pieces, while holding only a window of recent output: a back-reference reaches
/// at most 8192 bytes back, so a gigabyte-sized string (a sparse Bloom bit array) needs no
/// gigabyte-sized buffer. `sink` returning false stops the decompression with [`LzfError::Sink`].
/// Checks and errors are those of [`decompress_into`].
pub fn decompress_streamed(
    input: &[u8],
    out_len: usize,
    mut sink: impl FnMut(&[u8]) -> bool,
) -> Result<(), LzfError> {
    const KEEP: usize = MAX_OFF;
    const FLUSH_AT: usize = 64 * 1024 + KEEP;
    let mut win: Vec<u8> = Vec::with_capacity(FLUSH_AT + MAX_REF + MAX_LIT);
    let mut flushed = 0usize;
    let mut ip = 0usize;
    while ip < input.len() {
        if win.len() >= FLUSH_AT {
            let n = win.len() - KEEP;
            if !sink(&win[..n]) {
                return Err(LzfError::Sink);
            }
            win.drain(..n);
            flushed += n;
        }
        let produced = flushed + win.len();
        match next_op(input, &mut ip)? {
            Op::Literal(lits) => {
                if produced + lits.len() > out_len {
                    return Err(LzfError::WrongLength);
                }
                win.extend_from_slice(lits);
            }
            Op::BackRef { dist, len } => {
                // The window keeps KEEP >= any distance once it has been flushed, so a reference
                // inside the output produced so far is inside the window.
                if dist > produced || dist > win.len() {
                    return Err(LzfError::BadReference);
                }
                if produced + len > out_len {
                    return Err(LzfError::WrongLength);
                }
                copy_back(&mut win, dist, len);
            }
        }
    }
    if flushed + win.len() != out_len {
        return Err(LzfError::WrongLength);
    }
    if !win.is_empty() && !sink(&win) {
        return Err(LzfError::Sink);
    }
    Ok(())
}

/// Decompresses `input`, which must produce exactly `out_len` bytes, appending to `out`
/// (whose capacity the caller has already reserved).
pub fn decompress_into(input: &[u8], out_len: usize, out: &mut Vec<u8>) -> Result<(), LzfError> {
    let base = out.len();
    let end = base + out_len;
    let mut ip = 0usize;
    while ip < input.len() {
        match next_op(input, &mut ip)? {
            Op::Literal(lits) => {
                if out.len() + lits.len() > end {
                    return Err(LzfError::WrongLength);
                }
                out.extend_from_slice(lits);
            }
            Op::BackRef { dist, len } => {
                if dist > out.len() - base {
                    return Err(LzfError::BadReference);
                }
                if out.len() + len > end {
                    return Err(LzfError::WrongLength);
                }
                copy_back(out, dist, len);
            }
        }
    }
    if out.len() != end {
        return Err(LzfError::WrongLength);
    }
    Ok(())
}

/// Decompresses into a new vector of exactly `out_len` bytes.
pub fn decompress(input: &[u8], out_len: usize) -> Result<Vec<u8>, LzfError> {
    let mut out = Vec::with_capacity(out_len);
    decompress_into(input, out_len, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn spec_example_forty_as() {
        let input = vec![b'a'; 40];
        let c = compress(&input, 36).unwrap();
        assert_eq!(c, [0x01, 0x61, 0x61, 0xE0, 0x1B, 0x00, 0x01, 0x61, 0x61]);
        assert_eq!(decompress(&c, 40).unwrap(), input);
    }

    #[test]
    fn incompressible_data_is_refused_within_budget() {
        let input: Vec<u8> = (0..100u32).map(|i| (i * 97 % 251) as u8).collect();
        assert!(compress(&input, input.len() - 4).is_none());
    }

    #[test]
    fn streamed_decompression_of_a_large_sparse_array() {
        let mut data = vec![0u8; 1 << 20];
        for i in (0..data.len()).step_by(4099) {
            data[i] = (i % 251) as u8 | 1;
        }
        let c = compress(&data, data.len()).unwrap();
        let mut out = Vec::new();
        let mut pieces = 0;
        decompress_streamed(&c, data.len(), |p| {
            pieces += 1;
            out.extend_from_slice(p);
            true
        })
        .unwrap();
        assert!(pieces > 10, "{pieces} pieces");
        assert_eq!(out, data);
        assert_eq!(
            decompress_streamed(&c, data.len(), |_| false),
            Err(LzfError::Sink)
        );
        assert_eq!(
            decompress_streamed(&c, data.len() - 1, |_| true),
            Err(LzfError::WrongLength)
        );
    }

    #[test]
    fn corrupt_streams_are_errors() {
        assert_eq!(decompress(&[0x05, 1, 2], 6), Err(LzfError::Truncated));
        assert_eq!(decompress(&[0x20, 0x00], 3), Err(LzfError::BadReference));
        assert_eq!(decompress(&[0x00, 1], 2), Err(LzfError::WrongLength));
        assert_eq!(decompress(&[0x01, 1, 2], 1), Err(LzfError::WrongLength));
        assert_eq!(decompress(&[0xE0], 10), Err(LzfError::Truncated));
    }

    /// The period-doubling copy is the format's byte-by-byte copy, for every overlap.
    #[test]
    fn overlapping_back_references_copy_byte_by_byte() {
        for dist in 1..40usize {
            for len in 2..=MAX_REF {
                let start: Vec<u8> = (0..50u8).map(|i| i.wrapping_mul(37) ^ 5).collect();
                let mut slow = start.clone();
                for _ in 0..len {
                    slow.push(slow[slow.len() - dist]);
                }
                let mut fast = start.clone();
                copy_back(&mut fast, dist, len);
                assert_eq!(fast, slow, "dist {dist} len {len}");
            }
        }
    }

    proptest! {
        #[test]
        fn round_trip(data in prop::collection::vec(prop::sample::select(vec![0u8, 1, 2, b'a', 255]), 0..3000)) {
            if let Some(c) = compress(&data, data.len() + 64) {
                prop_assert_eq!(decompress(&c, data.len()).unwrap(), data);
            } else {
                prop_assert!(data.is_empty());
            }
        }

        #[test]
        fn round_trip_random(data in prop::collection::vec(any::<u8>(), 1..2000)) {
            let c = compress(&data, data.len() + 64).unwrap();
            prop_assert_eq!(decompress(&c, data.len()).unwrap(), data);
        }

        #[test]
        fn streamed_decompression_matches(data in prop::collection::vec(prop::sample::select(vec![0u8, 0, 0, 1, b'a', 255]), 0..200_000), garbage in prop::collection::vec(any::<u8>(), 0..300), n in 0usize..5000) {
            if let Some(c) = compress(&data, data.len() + 64) {
                let mut out = Vec::new();
                decompress_streamed(&c, data.len(), |p| { out.extend_from_slice(p); true }).unwrap();
                prop_assert_eq!(out, data);
            }
            let mut out = Vec::new();
            let streamed = decompress_streamed(&garbage, n, |p| { out.extend_from_slice(p); true });
            let whole = decompress(&garbage, n);
            prop_assert_eq!(streamed.is_ok(), whole.is_ok());
            if let Ok(w) = whole {
                prop_assert_eq!(out, w);
            }
        }

        #[test]
        fn decompress_never_panics(data in prop::collection::vec(any::<u8>(), 0..200), n in 0usize..2000) {
            let _ = decompress(&data, n);
        }
    }
}
