//! Sparse encoding: the ZERO/XZERO/VAL opcodes, their decoder with the CVE-2025-32023 bound,
//! Redis's exact in-place update (`hllSparseSet`) and promotion to dense.

use super::*;

// ---------------------------------------------------------------------------------------------
// Sparse opcodes
// ---------------------------------------------------------------------------------------------

/// One decoded sparse opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    /// ZERO: 1..=64 zero registers.
    Zero(u64),
    /// XZERO: 1..=16384 zero registers.
    XZero(u64),
    /// VAL: value 1..=32 over 1..=4 registers.
    Val(u8, u64),
}

impl Op {
    #[inline]
    pub(super) fn run(self) -> u64 {
        match self {
            Op::Zero(n) | Op::XZero(n) | Op::Val(_, n) => n,
        }
    }
    #[inline]
    pub(super) fn len(self) -> usize {
        match self {
            Op::XZero(_) => 2,
            _ => 1,
        }
    }
}

/// Decodes the opcode at `p` (which must be `< v.len()`). An XZERO cut short by the end of the
/// string reads its second byte as 0, like Redis reading the terminating NUL.
#[inline]
pub(super) fn read_op(v: &[u8], p: usize) -> Op {
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
pub(super) fn val_byte(value: u8, run: u64) -> u8 {
    0x80 | ((value - 1) << 2) | (run as u8 - 1)
}

/// Appends the shortest zero-run opcode for `n` (1..=16384) registers.
pub(super) fn push_zero_run(out: &mut Vec<u8>, n: u64) {
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
pub(super) fn walk_sparse(v: &[u8], mut f: impl FnMut(usize, usize, u8)) -> Result<(), HllError> {
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
// Promotion and in-place updates
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
pub(super) fn sparse_set(
    v: &mut Vec<u8>,
    index: usize,
    count: u8,
    max_bytes: u64,
) -> Result<bool, HllError> {
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
                // the sequence lands just past the new end. Known limit: Redis keeps that byte in
                // memory where its terminating NUL was, so if the value now ends in a cut-short
                // XZERO, Redis's later decodes read that byte (until the string is reallocated)
                // where we read 0. Only crafted values reach this path.
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
pub(super) fn promote_and_set(v: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, HllError> {
    sparse_to_dense(v)?;
    dense_raise(&mut v[HEADER_LEN..], index, count);
    Ok(true)
}
