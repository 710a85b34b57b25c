//! RedisBloom's sketch module values: `CMSk-TYPE` (cms.md §11) and `TopK-TYPE` (topk.md §12), field
//! for field as RedisBloom writes them. `module.rs` dispatches here by type name.
//!
//! ```text
//! CMSk-TYPE v0: UINT width  UINT depth  UINT count  STRING counters (4·width·depth bytes)
//! TopK-TYPE v0: UINT k  UINT width  UINT depth  DOUBLE decay
//!               STRING buckets (8·width·depth bytes)  STRING heap (24·k bytes)
//!               then k STRINGs: each slot's item bytes plus a NUL (a lone NUL for an empty slot)
//! ```
//!
//! Every field is validated against the others by the store's `from_raw_parts` before anything is
//! built from it (CVE-2026-62356 and the Top-K heap overflow of RedisBloom 8.10.1): lengths are
//! computed with overflow checks, item strings must end in NUL, and the pointer bytes of the heap
//! string are never interpreted.

use std::io::{Read, Write};

use super::reader::RdbReader;
use super::writer::RdbWriter;
use super::*;
use crate::store::cms::CountMinSketch;
use crate::store::topk::TopK;

pub const CMS_TYPE: &str = "CMSk-TYPE";
pub const TOPK_TYPE: &str = "TopK-TYPE";
/// The encoding version RedisBloom writes (and the newest it reads) for both sketch types.
pub const SKETCH_ENCVER: u16 = 0;

fn check_encver<R: Read>(r: &RdbReader<R>, name: &str, encver: u16) -> Result<(), RdbError> {
    if encver > SKETCH_ENCVER {
        return Err(r.corrupt(format!(
            "{name} encoding version {encver} is newer than supported ({SKETCH_ENCVER})"
        )));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// CMSk-TYPE
// ---------------------------------------------------------------------------------------------

/// The `CMSk-TYPE` fields after the module id (without the EOF opcode).
pub fn read_cms<R: Read>(r: &mut RdbReader<R>, encver: u16) -> Result<CountMinSketch, RdbError> {
    let at = r.offset();
    check_encver(r, CMS_TYPE, encver)?;
    let width = r.module_uint("width")?;
    let depth = r.module_uint("depth")?;
    let count = r.module_uint("count")?;
    let bad = |what: String| RdbError::corrupt(format!("bad {CMS_TYPE} value: {what}"), at);
    // Checked before the string is read, so a crafted length is refused without allocating.
    if width == 0 || depth == 0 {
        return Err(bad(format!("width {width}, depth {depth}")));
    }
    let counters = r.module_string("counters")?;
    CountMinSketch::from_raw_parts(width, depth, count, &counters).map_err(|e| bad(e.to_string()))
}

/// Module id, fields and EOF of a `CMSk-TYPE` value.
pub fn write_cms<W: Write>(w: &mut RdbWriter<W>, s: &CountMinSketch) -> std::io::Result<()> {
    let id = module_id(CMS_TYPE, SKETCH_ENCVER).unwrap_or_default();
    w.len(id)?;
    w.module_uint(s.width())?;
    w.module_uint(s.depth())?;
    w.module_uint(s.count())?;
    w.module_string_paged(s.counters_len(), s.counter_pages())?;
    w.module_eof()
}

// ---------------------------------------------------------------------------------------------
// TopK-TYPE
// ---------------------------------------------------------------------------------------------

/// The `TopK-TYPE` fields after the module id (without the EOF opcode).
pub fn read_topk<R: Read>(r: &mut RdbReader<R>, encver: u16) -> Result<TopK, RdbError> {
    let at = r.offset();
    check_encver(r, TOPK_TYPE, encver)?;
    let k = r.module_uint("k")?;
    let width = r.module_uint("width")?;
    let depth = r.module_uint("depth")?;
    let decay = r.module_double("decay")?;
    let bad = |what: String| RdbError::corrupt(format!("bad {TOPK_TYPE} value: {what}"), at);
    let dim = |v: u64| (1..=u32::MAX as u64).contains(&v);
    if !(dim(k) && dim(width) && dim(depth)) {
        return Err(bad(format!("k {k}, width {width}, depth {depth}")));
    }
    let buckets = r.module_string("buckets")?;
    let heap = r.module_string("heap")?;
    // Each item string takes at least 3 bytes of input: refuse a k the data cannot hold before
    // reserving the table of item strings.
    if k > r.remaining() / 3 {
        return Err(bad(format!("{k} item strings cannot fit in the data left")));
    }
    let mut items: Vec<Vec<u8>> = Vec::new();
    items
        .try_reserve_exact(k as usize)
        .map_err(|_| bad("cannot allocate the item table".into()))?;
    for _ in 0..k {
        items.push(r.module_string("heap item")?);
    }
    TopK::from_raw_parts(k, width, depth, decay, &buckets, &heap, &items)
        .map_err(|e| bad(e.to_string()))
}

/// Module id, fields and EOF of a `TopK-TYPE` value (zero pointers and padding in the heap).
pub fn write_topk<W: Write>(w: &mut RdbWriter<W>, t: &TopK) -> std::io::Result<()> {
    let id = module_id(TOPK_TYPE, SKETCH_ENCVER).unwrap_or_default();
    w.len(id)?;
    w.module_uint(t.k() as u64)?;
    w.module_uint(t.width() as u64)?;
    w.module_uint(t.depth() as u64)?;
    w.module_double(t.decay())?;
    w.module_string(&t.buckets_bytes())?;
    w.module_string(&t.heap_bytes())?;
    for i in 0..t.heap().len() {
        w.module_string(&t.item_string(i))?;
    }
    w.module_eof()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persistence::rdb::SaveOptions;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn read_cms_value(bytes: &[u8]) -> Result<CountMinSketch, RdbError> {
        let mut r = RdbReader::new(bytes, bytes.len() as u64);
        let id = r.len()?;
        assert_eq!(module_name(id), CMS_TYPE);
        let s = read_cms(&mut r, (id & 1023) as u16)?;
        r.module_eof()?;
        Ok(s)
    }

    #[test]
    fn cms_spec_value_round_trips() {
        // cms.md §11: CMS.INITBYDIM c 3 2; CMS.INCRBY c foo 7 bar 2 (after the type byte).
        let bytes = hex("8108c4a4f9360f1000 0203 0202 0209
             0518 00000000 02000000 07000000 09000000 00000000 00000000 00");
        let s = read_cms_value(&bytes).unwrap();
        assert_eq!((s.width(), s.depth(), s.count()), (3, 2, 9));
        assert_eq!(s.query(b"foo"), 7);
        let mut out = Vec::new();
        let mut w = RdbWriter::new(&mut out, SaveOptions::default());
        write_cms(&mut w, &s).unwrap();
        // Redis would LZF this 24-byte string only if it shrank by 4 bytes; it does not.
        assert_eq!(out, bytes);
    }

    #[test]
    fn cms_crafted_values_are_refused() {
        // width 2^62, depth 1, empty counters: RedisBloom's CVE-2026-62356 input.
        let mut fixed = hex("8108c4a4f9360f1000 0281 4000000000000000 0201 0200 0500 00");
        assert!(read_cms_value(&fixed).is_err());
        // Counters one byte short, zero depth, a DOUBLE where the count should be, version 1.
        fixed = hex("8108c4a4f9360f1000 0201 0201 0200 0503 000000 00");
        assert!(read_cms_value(&fixed).is_err());
        fixed = hex("8108c4a4f9360f1000 0201 0200 0200 0500 00");
        assert!(read_cms_value(&fixed).is_err());
        fixed = hex("8108c4a4f9360f1000 0201 0201 040000000000000000 0504 00000000 00");
        assert!(read_cms_value(&fixed).is_err());
        fixed = hex("8108c4a4f9360f1001 0201 0201 0200 0504 00000000 00");
        assert!(read_cms_value(&fixed).is_err());
    }
}
