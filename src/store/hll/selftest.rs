//! PFSELFTEST: the server's own consistency checks of the format code.

use super::*;

// ---------------------------------------------------------------------------------------------
// PFSELFTEST
// ---------------------------------------------------------------------------------------------

/// A small deterministic generator, so the self test needs no dependency and repeats exactly.
pub(super) struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// PFSELFTEST: register packing (single accessors against the bulk paths), the sparse and dense
/// encodings agreeing register for register and count for count, and the estimate staying within
/// a generous error bound. Returns the failure text (after `ERR `) on failure.
pub fn selftest() -> Result<(), String> {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    // 1. Packing.
    let mut body = vec![0u8; DENSE_BODY_LEN];
    let mut model = Box::new([0u8; REGISTERS]);
    for _ in 0..4 {
        for (i, m) in model.iter_mut().enumerate() {
            let r = (rng.next() & 63) as u8;
            *m = r;
            dense_put(&mut body, i, r);
        }
        let mut unpacked = Box::new([0u8; REGISTERS]);
        unpack_dense(&body, &mut unpacked);
        for i in 0..REGISTERS {
            if dense_get(&body, i) != model[i] || unpacked[i] != model[i] {
                return Err(format!("TESTFAILED Register error at {i}"));
            }
        }
        let mut repacked = vec![0u8; DENSE_BODY_LEN];
        pack_dense(&model, &mut repacked);
        if repacked != body {
            return Err("TESTFAILED Register packing error".into());
        }
    }
    // 2. Sparse and dense agree while elements are added.
    let mut sparse = new_sparse();
    let mut dense = new_sparse();
    sparse_to_dense(&mut dense).map_err(|e| e.to_string())?;
    let mut checkpoint = 16;
    for n in 1..=5000u64 {
        let e = rng.next().to_le_bytes();
        let a = add(&mut sparse, &e, u64::MAX).map_err(|e| e.to_string())?;
        let b = add(&mut dense, &e, u64::MAX).map_err(|e| e.to_string())?;
        if a != b {
            return Err(format!("TESTFAILED sparse/dense update mismatch at {n}"));
        }
        if n == checkpoint {
            checkpoint *= 2;
            let cs = count(&sparse).map_err(|e| e.to_string())?;
            let cd = count(&dense).map_err(|e| e.to_string())?;
            if cs != cd || sparse_decode(&sparse).ok() != dense_registers(&dense).ok() {
                return Err(format!("TESTFAILED Sparse and dense differ at {n}"));
            }
        }
    }
    // 3. Accuracy of the estimator on a dense value.
    let mut hll = new_sparse();
    let mut next_check = 1000u64;
    for n in 1..=200_000u64 {
        add(&mut hll, &n.to_le_bytes(), DEFAULT_SPARSE_MAX_BYTES).map_err(|e| e.to_string())?;
        if n == next_check {
            next_check *= 2;
            let c = count(&hll).map_err(|e| e.to_string())? as f64;
            let err = (c - n as f64).abs() / n as f64;
            // Six standard errors of 1.04/sqrt(m): failing this is a bug, not bad luck.
            if err > 6.0 * 1.04 / (REGISTERS as f64).sqrt() {
                return Err(format!("TESTFAILED Too big error. card:{n} abserr:{c}"));
            }
        }
    }
    Ok(())
}
