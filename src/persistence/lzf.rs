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

/// Input bytes the fast loop of [`decode`] needs left after a token's start: a literal run is
/// copied as 32 bytes whatever its length, and a control byte with its operands is at most 3.
const FAST_IN: usize = 1 + MAX_LIT;
/// Output room the fast loop needs after the current position: the longest back-reference
/// (264 bytes) rounded up to whole 16-byte chunks, or a 32-byte literal copy.
const FAST_OUT: usize = MAX_REF + 16;

/// Decodes tokens of `input` from `*ip` into `out` from `*op`, while input is left and
/// `*op < stop`. `out[base..*op]` is the output so far (references may reach back that far) and
/// `end` is where the output must end: a token that would reach past it is
/// [`LzfError::WrongLength`]. `out` must hold `stop + MAX_REF` bytes or `end` bytes, whichever is
/// less (the caller's window or whole destination). On error, `out[*op..]` may hold garbage.
///
/// This is liblzf's `lzf_decompress` (which Redis uses) with its checks kept and made cheap.
/// Where at least [`FAST_IN`] input bytes and [`FAST_OUT`] output bytes are left, which is every
/// token but the last few, a token is copied in fixed-size chunks that may overshoot its length
/// (into output not produced yet, which the next tokens overwrite): a literal run as one 32-byte
/// copy, a back-reference as 16-byte (distance >= 16) or 8-byte (distance >= 8) chunks, each
/// reading only bytes already final, or as a fill of one byte (distance 1: a run of zeros, most of
/// a sparse Bloom filter); only distances 2-7 go byte by byte, as the format defines the copy.
/// Fixed sizes compile to a few vector moves; a `memcpy` call per token (the `Vec` appends this
/// replaces) cost more than the copy. The last tokens are decoded exactly, with no overshoot.
fn decode(
    input: &[u8],
    ip: &mut usize,
    out: &mut [u8],
    op: &mut usize,
    base: usize,
    end: usize,
    stop: usize,
) -> Result<(), LzfError> {
    let (mut i, mut o) = (*ip, *op);
    let r = loop {
        while o < stop && i + FAST_IN <= input.len() && o + FAST_OUT <= out.len() {
            let ctrl = input[i] as usize;
            i += 1;
            if ctrl < 32 {
                let n = ctrl + 1;
                if o + n > end {
                    // Not consumed: the exact path below reports it.
                    i -= 1;
                    break;
                }
                out[o..o + MAX_LIT].copy_from_slice(&input[i..i + MAX_LIT]);
                i += n;
                o += n;
                continue;
            }
            let mut len = ctrl >> 5;
            if len == 7 {
                len += input[i] as usize;
                i += 1;
            }
            let len = len + 2;
            let dist = ((ctrl & 31) << 8) + input[i] as usize + 1;
            if dist > o - base || o + len > end {
                // Not consumed: the exact path below reports it.
                i -= 1 + usize::from(ctrl >> 5 == 7);
                break;
            }
            i += 1;
            let from = o - dist;
            if dist >= 16 {
                let mut k = 0;
                while k < len {
                    out.copy_within(from + k..from + k + 16, o + k);
                    k += 16;
                }
            } else if dist >= 8 {
                let mut k = 0;
                while k < len {
                    out.copy_within(from + k..from + k + 8, o + k);
                    k += 8;
                }
            } else if dist == 1 {
                let b = [out[o - 1]; 16];
                let mut k = 0;
                while k < len {
                    out[o + k..o + k + 16].copy_from_slice(&b);
                    k += 16;
                }
            } else {
                for k in o..o + len {
                    out[k] = out[k - dist];
                }
            }
            o += len;
        }
        if i >= input.len() || o >= stop {
            break Ok(());
        }
        // One token exactly, with every check in the format's order: truncation, then the
        // reference, then the length.
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            let Some(lits) = input.get(i..i + n) else {
                break Err(LzfError::Truncated);
            };
            if o + n > end {
                break Err(LzfError::WrongLength);
            }
            out[o..o + n].copy_from_slice(lits);
            i += n;
            o += n;
            continue;
        }
        let mut len = ctrl >> 5;
        if len == 7 {
            let Some(&b) = input.get(i) else {
                break Err(LzfError::Truncated);
            };
            len += b as usize;
            i += 1;
        }
        let len = len + 2;
        let Some(&low) = input.get(i) else {
            break Err(LzfError::Truncated);
        };
        i += 1;
        let dist = ((ctrl & 31) << 8) + low as usize + 1;
        if dist > o - base {
            break Err(LzfError::BadReference);
        }
        if o + len > end {
            break Err(LzfError::WrongLength);
        }
        let from = o - dist;
        if dist >= len {
            out.copy_within(from..from + len, o);
        } else {
            for k in o..o + len {
                out[k] = out[k - dist];
            }
        }
        o += len;
    };
    *ip = i;
    *op = o;
    r
}

/// Decompresses `input`, which must produce exactly `out_len` bytes, handing the output to `sink`
/// in order and in pieces, while holding only a window of recent output: a back-reference reaches
/// at most 8192 bytes back, so a gigabyte-sized string (a sparse Bloom bit array) needs no
/// gigabyte-sized buffer. `sink` returning false stops the decompression with [`LzfError::Sink`].
/// Checks and errors are those of [`decompress_into`].
///
/// The window is one fixed buffer: tokens are decoded into it up to `FLUSH_AT`, then all but the
/// last `KEEP` bytes go to `sink` and those move to its start.
pub fn decompress_streamed(
    input: &[u8],
    out_len: usize,
    mut sink: impl FnMut(&[u8]) -> bool,
) -> Result<(), LzfError> {
    const KEEP: usize = MAX_OFF;
    const FLUSH_AT: usize = 64 * 1024 + KEEP;
    let mut win = vec![0u8; (FLUSH_AT + FAST_OUT).min(out_len)];
    let mut flushed = 0usize;
    let (mut ip, mut op) = (0usize, 0usize);
    while ip < input.len() {
        if op >= FLUSH_AT {
            let n = op - KEEP;
            if !sink(&win[..n]) {
                return Err(LzfError::Sink);
            }
            win.copy_within(n..op, 0);
            op = KEEP;
            flushed += n;
        }
        // After a flush the window holds KEEP >= any distance, so a reference inside the output
        // produced so far is inside the window: the check against the window's start suffices.
        decode(
            input,
            &mut ip,
            &mut win,
            &mut op,
            0,
            out_len - flushed,
            FLUSH_AT,
        )?;
    }
    if flushed + op != out_len {
        return Err(LzfError::WrongLength);
    }
    if op > 0 && !sink(&win[..op]) {
        return Err(LzfError::Sink);
    }
    Ok(())
}

/// Decompresses `input`, which must produce exactly `out_len` bytes, appending to `out`
/// (whose capacity the caller has already reserved). On error `out` is left as it was.
pub fn decompress_into(input: &[u8], out_len: usize, out: &mut Vec<u8>) -> Result<(), LzfError> {
    let base = out.len();
    let end = base + out_len;
    // Zeroing first costs a `memset` of the output, cheap beside the decoding, and keeps the
    // decoder on plain slices.
    out.resize(end, 0);
    let (mut ip, mut op) = (0usize, base);
    let r = decode(input, &mut ip, out, &mut op, base, end, usize::MAX);
    if r.is_err() || op != end {
        out.truncate(base);
        return Err(r.err().unwrap_or(LzfError::WrongLength));
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

    /// The format's definition, one byte at a time, with its checks in the format's order: the
    /// decoders must agree with it on every input, output and error alike.
    fn reference(input: &[u8], out_len: usize) -> Result<Vec<u8>, LzfError> {
        let mut out = Vec::new();
        let mut ip = 0;
        while ip < input.len() {
            let ctrl = input[ip] as usize;
            ip += 1;
            if ctrl < 32 {
                let n = ctrl + 1;
                if ip + n > input.len() {
                    return Err(LzfError::Truncated);
                }
                if out.len() + n > out_len {
                    return Err(LzfError::WrongLength);
                }
                for _ in 0..n {
                    out.push(input[ip]);
                    ip += 1;
                }
                continue;
            }
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *input.get(ip).ok_or(LzfError::Truncated)? as usize;
                ip += 1;
            }
            let dist = ((ctrl & 31) << 8) + *input.get(ip).ok_or(LzfError::Truncated)? as usize + 1;
            ip += 1;
            if dist > out.len() {
                return Err(LzfError::BadReference);
            }
            if out.len() + len + 2 > out_len {
                return Err(LzfError::WrongLength);
            }
            for _ in 0..len + 2 {
                out.push(out[out.len() - dist]);
            }
        }
        if out.len() != out_len {
            return Err(LzfError::WrongLength);
        }
        Ok(out)
    }

    /// Both decoders, checked against [`reference`] (the streamed one's pieces concatenated).
    fn check_against_reference(input: &[u8], out_len: usize) {
        let want = reference(input, out_len);
        assert_eq!(decompress(input, out_len), want, "whole, {out_len} bytes");
        let mut out = Vec::new();
        let streamed = decompress_streamed(input, out_len, |p| {
            out.extend_from_slice(p);
            true
        });
        assert_eq!(streamed.map(|()| out), want, "streamed, {out_len} bytes");
        // Appending after existing bytes: they are kept, and left alone on error.
        let mut v = b"prefix".to_vec();
        let r = decompress_into(input, out_len, &mut v);
        assert_eq!(r.is_ok(), want.is_ok());
        let mut expect = b"prefix".to_vec();
        if let Ok(w) = &want {
            expect.extend_from_slice(w);
        }
        assert_eq!(v, expect);
    }

    /// A literal run of `n` bytes (1..=32).
    fn lit(s: &mut Vec<u8>, bytes: &[u8]) {
        s.push((bytes.len() - 1) as u8);
        s.extend_from_slice(bytes);
    }

    /// A back-reference token of `len` (2..=264) bytes from `dist` (1..=8192) back.
    fn backref(s: &mut Vec<u8>, dist: usize, len: usize) {
        let (o, l) = (dist - 1, len - 2);
        if l < 7 {
            s.extend_from_slice(&[((l << 5) | (o >> 8)) as u8, o as u8]);
        } else {
            s.extend_from_slice(&[((7 << 5) | (o >> 8)) as u8, (l - 7) as u8, o as u8]);
        }
    }

    /// Every distance that selects a different copy (1, 2-7, 8-15, 16+, overlapping or not) with
    /// every length, both where the fast loop decodes it (much input and output left) and where
    /// the exact path does (the last token), against the byte-by-byte definition.
    #[test]
    fn back_references_copy_as_the_format_defines_in_both_paths() {
        let pattern: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37) ^ 5).collect();
        for dist in (1..40usize).chain([63, 64, 100, 264, 265]) {
            for len in 2..=MAX_REF {
                let mut s = Vec::new();
                let mut produced = 0;
                while produced < dist.max(64) {
                    lit(&mut s, &pattern[..32]);
                    produced += 32;
                }
                backref(&mut s, dist, len);
                produced += len;
                // As the last token: the exact path.
                check_against_reference(&s, produced);
                // Followed by enough to keep the fast loop going, and a second reference
                // that reads what the first wrote.
                backref(&mut s, dist.min(produced), 200);
                for _ in 0..20 {
                    lit(&mut s, &pattern[3..35]);
                }
                produced += 200 + 20 * 32;
                check_against_reference(&s, produced);
                // Wrong stated lengths, on either side.
                check_against_reference(&s, produced - 1);
                check_against_reference(&s, produced + 1);
                check_against_reference(&s, produced - len);
            }
        }
    }

    /// Errors in mid-stream, where the fast loop meets them, are the exact path's errors.
    #[test]
    fn errors_in_the_fast_loop_are_the_exact_paths() {
        let pattern: Vec<u8> = (0..32u8).collect();
        let mut s = Vec::new();
        for _ in 0..20 {
            lit(&mut s, &pattern);
        }
        let good = s.len();
        // A reference one byte too far back, then more input.
        backref(&mut s, 641, 10);
        for _ in 0..20 {
            lit(&mut s, &pattern);
        }
        assert_eq!(decompress(&s, 100_000), Err(LzfError::BadReference));
        check_against_reference(&s, 100_000);
        // Output past the stated length, by a literal run and by a reference.
        s.truncate(good);
        for _ in 0..20 {
            lit(&mut s, &pattern);
        }
        assert_eq!(decompress(&s, 40 * 32 - 1), Err(LzfError::WrongLength));
        check_against_reference(&s, 40 * 32 - 1);
        s.truncate(good);
        backref(&mut s, 640, 264);
        for _ in 0..20 {
            lit(&mut s, &pattern);
        }
        assert_eq!(decompress(&s, 640 + 100), Err(LzfError::WrongLength));
        check_against_reference(&s, 640 + 100);
    }

    /// A streamed decode spans many window flushes; references across a flush boundary see
    /// the bytes kept from before it.
    #[test]
    fn streamed_references_reach_across_window_flushes() {
        let mut s = Vec::new();
        let mut produced = 0usize;
        let mut x = 7u32;
        while produced < 400_000 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let bytes: Vec<u8> = (0..(x >> 16) % 32 + 1)
                .map(|i| (x >> (i % 24)) as u8)
                .collect();
            lit(&mut s, &bytes);
            produced += bytes.len();
            let dist =
                ((x >> 3) as usize % MAX_OFF).min(produced) + usize::from(produced < MAX_OFF);
            let dist = dist.clamp(1, produced);
            let len = 2 + (x as usize >> 7) % (MAX_REF - 1);
            backref(&mut s, dist, len);
            produced += len;
        }
        check_against_reference(&s, produced);
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
        fn garbage_decodes_as_the_reference_does(data in prop::collection::vec(any::<u8>(), 0..400), n in 0usize..3000) {
            check_against_reference(&data, n);
        }

        #[test]
        fn token_streams_decode_as_the_reference_does(tokens in prop::collection::vec((any::<bool>(), 1usize..=MAX_OFF, 2usize..=MAX_REF, any::<u8>()), 0..400), slack in -3i64..3) {
            let mut s = Vec::new();
            let mut produced = 0usize;
            for (is_lit, d, len, b) in tokens {
                if is_lit || produced == 0 {
                    let n = len % MAX_LIT + 1;
                    let bytes: Vec<u8> = (0..n).map(|i| b.wrapping_add(i as u8 % 3)).collect();
                    lit(&mut s, &bytes);
                    produced += n;
                } else {
                    // Mostly short distances, the ones with special copies.
                    let dist = if b < 128 { d % 20 + 1 } else { d };
                    backref(&mut s, dist.min(produced + usize::from(b == 255)), len);
                    produced += len;
                }
            }
            check_against_reference(&s, (produced as i64 + slack).max(0) as usize);
        }

        #[test]
        fn decompress_never_panics(data in prop::collection::vec(any::<u8>(), 0..200), n in 0usize..2000) {
            let _ = decompress(&data, n);
        }
    }
}
