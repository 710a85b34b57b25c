//! RedisBloom's module values (type 7): `MBbloomCF` (cuckoo.md §8) and `MBbloom--` (rdb.md §4.3),
//! field for field as RedisBloom writes them, so files and DUMP payloads move between the servers.
//!
//! ```text
//! 07 <key> <module id, 0x81 form> { <opcode> <field> }* 00
//! MBbloomCF v4: UINT numFilters numBuckets numItems numDeletes bucketSize maxIterations expansion
//!               then per sub-filter: UINT numBuckets_i, STRING data (numBuckets_i × bucketSize)
//! MBbloom-- v4: UINT size nfilters options growth
//!               then per link: UINT entries, DOUBLE error, UINT hashes, DOUBLE bpe, UINT bits,
//!               UINT n2, STRING bit array, UINT items in the link
//! TDIS-TYPE v0: DOUBLE compression min max, UINT cap merged_nodes unmerged_nodes
//!               total_compressions, DOUBLE merged_weight unmerged_weight,
//!               then merged_nodes × DOUBLE mean, merged_nodes × DOUBLE weight (tdigest.md §7)
//! ```
//!
//! Older encodings are read too: bloom v0 lacks `bits`/`n2` (bits = entries × bpe, n2 = 0), v<2
//! lacks `options` (0), v<4 lacks `growth` (2); cuckoo v<4 carries only numFilters, numBuckets and
//! numItems, with one data string per equally sized sub-filter.
//!
//! Loading validates everything RedisBloom validates and more (hyperbloom rejects where RedisBloom
//! would abort): headers through the store's own rules, every data string's announced length
//! against the size the header implies before it is read. Values of other modules are walked to
//! their EOF opcode and reported as skipped.

use std::io::{Read, Write};

use super::reader::RdbReader;
use super::writer::RdbWriter;
use super::*;
use crate::store::bloom::{BitArray, RawLink, ScalingBloom};
use crate::store::cuckoo::{self, CuckooFilter, CuckooHeader};
use crate::store::tdigest::{c_i64, Node, RawDigest, TDigest};
use crate::store::Value;

pub const CUCKOO_TYPE: &str = "MBbloomCF";
pub const BLOOM_TYPE: &str = "MBbloom--";
pub const TDIGEST_TYPE: &str = "TDIS-TYPE";
/// The encoding version RedisBloom writes for t-digests (it ignores the version when loading).
pub const TDIGEST_ENCVER: u16 = 0;
/// The encoding version hyperbloom writes for both types.
pub const ENCVER: u16 = 4;

/// Reads a type-7 value after its key: the module id, then the type's fields and the EOF opcode.
pub fn read_value<R: Read>(
    r: &mut RdbReader<R>,
    key: &[u8],
    skipped: &mut Vec<String>,
) -> Result<Option<Value>, RdbError> {
    let id = r.len()?;
    let name = module_name(id);
    let encver = (id & 1023) as u16;
    match name.as_str() {
        CUCKOO_TYPE => {
            let f = read_cuckoo(r, encver)?;
            r.module_eof()?;
            Ok(Some(Value::Cuckoo(Box::new(f))))
        }
        BLOOM_TYPE => {
            let b = read_bloom(r, encver)?;
            r.module_eof()?;
            Ok(Some(Value::Bloom(Box::new(b))))
        }
        TDIGEST_TYPE => {
            let td = read_tdigest(r)?;
            r.module_eof()?;
            Ok(Some(Value::TDigest(Box::new(td))))
        }
        sketches::CMS_TYPE => {
            let s = sketches::read_cms(r, encver)?;
            r.module_eof()?;
            Ok(Some(Value::Cms(Box::new(s))))
        }
        sketches::TOPK_TYPE => {
            let t = sketches::read_topk(r, encver)?;
            r.module_eof()?;
            Ok(Some(Value::TopK(Box::new(t))))
        }
        _ => {
            r.skip_module_stream()?;
            skipped.push(format!(
                "key '{}' of module type {name} (not served by hyperbloom)",
                printable_key(key)
            ));
            Ok(None)
        }
    }
}

/// Writes a module value's payload (module id, fields, EOF) for the module variants of `Value`.
pub fn write_value<W: Write>(w: &mut RdbWriter<W>, value: &Value) -> std::io::Result<()> {
    match value {
        Value::Str(_) => Err(std::io::Error::other("not a module value")),
        Value::Bloom(b) => write_bloom(w, b),
        Value::Cuckoo(f) => write_cuckoo(w, f),
        Value::TDigest(td) => write_tdigest(w, td),
        Value::Cms(s) => sketches::write_cms(w, s),
        Value::TopK(t) => sketches::write_topk(w, t),
    }
}

// ---------------------------------------------------------------------------------------------
// TDIS-TYPE
// ---------------------------------------------------------------------------------------------

/// The `TDIS-TYPE` fields after the module id (without the EOF opcode). Any encoding version loads
/// the same, as in RedisBloom. Every count is checked against the others and against the bytes
/// left before anything is allocated for it.
pub fn read_tdigest<R: Read>(r: &mut RdbReader<R>) -> Result<TDigest, RdbError> {
    let at = r.offset();
    let compression = r.module_double("compression")?;
    let min = r.module_double("min")?;
    let max = r.module_double("max")?;
    // Signed values saved through the UINT opcode, kept as int32 as the reference does.
    let cap = r.module_uint("cap")? as i64 as i32;
    let merged_nodes = r.module_uint("merged nodes")? as i64 as i32;
    let unmerged_nodes = r.module_uint("unmerged nodes")? as i64 as i32;
    let total_compressions = r.module_uint("total compressions")? as i64;
    let merged_weight = c_i64(r.module_double("merged weight")?);
    let unmerged_weight = c_i64(r.module_double("unmerged weight")?);
    let bad = |what: String| RdbError::corrupt(format!("bad {TDIGEST_TYPE} value: {what}"), at);
    if merged_nodes < 0 || merged_nodes > cap {
        return Err(bad(format!("{merged_nodes} merged nodes, cap {cap}")));
    }
    // Each node takes two 9-byte DOUBLE fields.
    if merged_nodes as u64 * 18 > r.remaining() {
        return Err(bad(format!(
            "{merged_nodes} nodes cannot fit in the data left"
        )));
    }
    let mut centroids: Vec<Node> = Vec::new();
    centroids
        .try_reserve_exact(merged_nodes as usize)
        .map_err(|_| bad("cannot allocate the nodes".into()))?;
    for _ in 0..merged_nodes {
        let mean = r.module_double("mean")?;
        centroids.push(Node { mean, weight: 0 });
    }
    for node in centroids.iter_mut() {
        node.weight = c_i64(r.module_double("weight")?);
    }
    TDigest::from_raw_parts(RawDigest {
        compression,
        min,
        max,
        cap,
        merged_nodes,
        unmerged_nodes,
        total_compressions,
        merged_weight,
        unmerged_weight,
        centroids,
    })
    .map_err(bad)
}

/// Module id, fields and EOF of a `TDIS-TYPE` value. RedisBloom compresses before saving; a digest
/// with a buffer is compressed in a copy here (the live value is compressed by the callers that
/// must show it: DUMP and SAVE), so snapshots of live keyspaces write the same bytes.
pub fn write_tdigest<W: Write>(w: &mut RdbWriter<W>, td: &TDigest) -> std::io::Result<()> {
    let compressed;
    let td = if td.unmerged_nodes() > 0 {
        let mut copy = td.clone();
        let _ = copy.compress();
        compressed = copy;
        &compressed
    } else {
        td
    };
    let id = module_id(TDIGEST_TYPE, TDIGEST_ENCVER).unwrap_or_default();
    w.len(id)?;
    w.module_double(td.compression())?;
    w.module_double(td.min())?;
    w.module_double(td.max())?;
    // RedisModule_SaveSigned through the UINT opcode: negative values as their u64 pattern.
    w.module_uint(td.cap() as i64 as u64)?;
    w.module_uint(td.merged_nodes() as i64 as u64)?;
    w.module_uint(td.unmerged_nodes() as i64 as u64)?;
    w.module_uint(td.total_compressions() as u64)?;
    w.module_double(td.merged_weight() as f64)?;
    w.module_double(td.unmerged_weight() as f64)?;
    for n in td.centroids() {
        w.module_double(n.mean)?;
    }
    for n in td.centroids() {
        w.module_double(n.weight as f64)?;
    }
    w.module_eof()
}

// ---------------------------------------------------------------------------------------------
// MBbloom--
// ---------------------------------------------------------------------------------------------

/// The `MBbloom--` fields after the module id (without the EOF opcode).
pub fn read_bloom<R: Read>(r: &mut RdbReader<R>, encver: u16) -> Result<ScalingBloom, RdbError> {
    let at = r.offset();
    if encver > ENCVER {
        return Err(r.corrupt(format!(
            "{BLOOM_TYPE} encoding version {encver} is newer than supported ({ENCVER})"
        )));
    }
    let size = r.module_uint("size")?;
    let nfilters = r.module_uint("nfilters")?;
    let options = if encver >= 2 {
        r.module_uint("options")?
    } else {
        0
    };
    let growth = if encver >= 4 {
        r.module_uint("growth")?
    } else {
        2
    };
    let bad = |what: String| RdbError::corrupt(format!("bad {BLOOM_TYPE} value: {what}"), at);
    let options = u32::try_from(options).map_err(|_| bad(format!("options {options}")))?;
    let growth = u32::try_from(growth).map_err(|_| bad(format!("growth {growth}")))?;
    if nfilters == 0 {
        return Err(bad("no filters".into()));
    }
    // Each link takes well over 8 bytes of input: a count beyond that is a lie, refused before
    // the link table is allocated.
    if nfilters > r.remaining() / 8 {
        return Err(bad(format!(
            "{nfilters} filters cannot fit in the data left"
        )));
    }
    let mut links: Vec<RawLink> = Vec::new();
    links
        .try_reserve_exact(nfilters as usize)
        .map_err(|_| bad("cannot allocate the link table".into()))?;
    for _ in 0..nfilters {
        let entries = r.module_uint("entries")?;
        let error = r.module_double("error")?;
        let hashes = r.module_uint("hashes")?;
        let bpe = r.module_double("bpe")?;
        let (bits, n2) = if encver >= 1 {
            (r.module_uint("bits")?, r.module_uint("n2")?)
        } else {
            ((entries as f64 * bpe) as u64, 0)
        };
        let data_at = r.offset();
        r.expect_module_string("bit array")?;
        // Streamed into the filter's pages: a gigabyte-sized link is never held twice.
        let mut written = 0u64;
        let data = r.string_streamed(
            |len| {
                BitArray::zeroed(len).map_err(|e| {
                    RdbError::corrupt(
                        format!("{BLOOM_TYPE} bit array of {len} bytes: {e:?}"),
                        data_at,
                    )
                })
            },
            |a, piece| {
                a.write(written, piece).map_err(|e| {
                    RdbError::corrupt(format!("{BLOOM_TYPE} bit array: {e:?}"), data_at)
                })?;
                written += piece.len() as u64;
                Ok(())
            },
        )?;
        if data.len() < bits.div_ceil(8) {
            return Err(RdbError::corrupt(
                format!(
                    "{BLOOM_TYPE} bit array is {} bytes, {bits} bits need {}",
                    data.len(),
                    bits.div_ceil(8)
                ),
                data_at,
            ));
        }
        let items = r.module_uint("items in link")?;
        links.push(RawLink {
            entries,
            error,
            bpe,
            hashes,
            bits,
            n2,
            size: items,
            data,
        });
    }
    ScalingBloom::from_raw_parts(size, options, growth, links).map_err(|e| bad(format!("{e:?}")))
}

/// Module id, fields and EOF of an `MBbloom--` value (encoding version 4).
pub fn write_bloom<W: Write>(w: &mut RdbWriter<W>, b: &ScalingBloom) -> std::io::Result<()> {
    let id = module_id(BLOOM_TYPE, ENCVER).unwrap_or_default();
    w.len(id)?;
    w.module_uint(b.size())?;
    w.module_uint(b.nfilters() as u64)?;
    w.module_uint(b.options() as u64)?;
    w.module_uint(b.growth() as u64)?;
    for l in b.links() {
        w.module_uint(l.entries())?;
        w.module_double(l.error())?;
        w.module_uint(l.hashes() as u64)?;
        w.module_double(l.bpe())?;
        w.module_uint(l.bits())?;
        w.module_uint(l.n2() as u64)?;
        w.module_string_paged(l.bytes(), l.bit_pages())?;
        w.module_uint(l.size())?;
    }
    w.module_eof()
}

// ---------------------------------------------------------------------------------------------
// MBbloomCF
// ---------------------------------------------------------------------------------------------

/// The `MBbloomCF` fields after the module id (without the EOF opcode).
pub fn read_cuckoo<R: Read>(r: &mut RdbReader<R>, encver: u16) -> Result<CuckooFilter, RdbError> {
    let at = r.offset();
    if encver > ENCVER {
        return Err(r.corrupt(format!(
            "{CUCKOO_TYPE} encoding version {encver} is newer than supported ({ENCVER})"
        )));
    }
    let num_filters = r.module_uint("numFilters")?;
    let num_buckets = r.module_uint("numBuckets")?;
    let num_items = r.module_uint("numItems")?;
    let (num_deletes, bucket_size, max_iterations, expansion) = if encver >= 4 {
        (
            r.module_uint("numDeletes")?,
            r.module_uint("bucketSize")?,
            r.module_uint("maxIterations")?,
            r.module_uint("expansion")?,
        )
    } else {
        // Older encodings carry only three fields; the rest are RedisBloom's defaults.
        (0, 2, 20, 1)
    };
    let header = CuckooHeader {
        num_items,
        num_buckets,
        num_deletes,
        num_filters,
        bucket_size,
        max_iterations,
        expansion,
    };
    header
        .validate()
        .map_err(|e| RdbError::corrupt(format!("bad {CUCKOO_TYPE} header: {e}"), at))?;
    let mut subs: Vec<(u64, Vec<u8>)> = Vec::new();
    subs.try_reserve_exact(num_filters as usize)
        .map_err(|_| r.corrupt("cannot allocate the sub-filter table"))?;
    for _ in 0..num_filters {
        let n = if encver >= 4 {
            r.module_uint("sub-filter numBuckets")?
        } else {
            num_buckets
        };
        let want = cuckoo::sub_filter_len(n, bucket_size)
            .ok_or_else(|| r.corrupt(format!("bad {CUCKOO_TYPE} sub-filter size {n}")))?;
        let data_at = r.offset();
        let data = r.module_string("sub-filter data")?;
        if data.len() as u64 != want {
            return Err(RdbError::corrupt(
                format!(
                    "{CUCKOO_TYPE} sub-filter data is {} bytes, expected {want}",
                    data.len()
                ),
                data_at,
            ));
        }
        subs.push((n, data));
    }
    CuckooFilter::from_raw_parts(&header, &subs)
        .map_err(|e| RdbError::corrupt(format!("bad {CUCKOO_TYPE} value: {e}"), at))
}

/// Module id, fields and EOF of an `MBbloomCF` value.
pub fn write_cuckoo<W: Write>(w: &mut RdbWriter<W>, f: &CuckooFilter) -> std::io::Result<()> {
    let id = module_id(CUCKOO_TYPE, ENCVER).unwrap_or_default();
    w.len(id)?;
    w.module_uint(f.num_filters() as u64)?;
    w.module_uint(f.num_buckets())?;
    w.module_uint(f.num_items())?;
    w.module_uint(f.num_deletes())?;
    w.module_uint(f.bucket_size() as u64)?;
    w.module_uint(f.max_iterations() as u64)?;
    w.module_uint(f.expansion() as u64)?;
    for i in 0..f.num_filters() {
        let n = f.sub_filter_buckets(i).unwrap_or(0);
        w.module_uint(n)?;
        w.module_string_paged(n * f.bucket_size() as u64, f.sub_filter_pages(i))?;
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

    #[test]
    fn cuckoo_spec_value_round_trips() {
        // cuckoo.md §8: CF.RESERVE c 4; CF.ADD c x (value part, after the type byte).
        let bytes =
            hex("813016e5a289821404 0201 0202 0201 0200 0202 0214 0201 0202 05 04 00000f00 00");
        let mut r = RdbReader::new(&bytes[..], bytes.len() as u64);
        let id = r.len().unwrap();
        assert_eq!(module_name(id), CUCKOO_TYPE);
        let f = read_cuckoo(&mut r, (id & 1023) as u16).unwrap();
        r.module_eof().unwrap();
        assert_eq!(f.num_items(), 1);
        assert!(f.contains(b"x"));
        let mut out = Vec::new();
        let mut w = RdbWriter::new(&mut out, SaveOptions::default());
        write_cuckoo(&mut w, &f).unwrap();
        assert_eq!(out, bytes);
    }

    #[test]
    fn bloom_spec_value_round_trips() {
        // rdb.md §4.3: BF.RESERVE b 0.1 2 NONSCALING; BF.ADD b x (value part, after the type byte).
        let bytes = hex(
            "813016e5a289bef804 0201 0201 020d 0202 0202 049a9999999999b93f 0204
             0488168ac58c2b1340 024040 0200 0508 0040400040000040 0201 00",
        );
        let mut r = RdbReader::new(&bytes[..], bytes.len() as u64);
        let id = r.len().unwrap();
        assert_eq!(module_name(id), BLOOM_TYPE);
        let b = read_bloom(&mut r, (id & 1023) as u16).unwrap();
        r.module_eof().unwrap();
        assert!(b.exists(b"x"));
        assert_eq!(b.size(), 1);
        let mut out = Vec::new();
        let mut w = RdbWriter::new(&mut out, SaveOptions::default());
        write_bloom(&mut w, &b).unwrap();
        assert_eq!(out, bytes);
    }

    #[test]
    fn bloom_crafted_headers_are_refused() {
        // nfilters = 2^40 in a tiny value: refused before allocating a link table.
        let bytes = hex("813016e5a289bef804 0201 02810000010000000000 020d 0202 00");
        let mut r = RdbReader::new(&bytes[..], bytes.len() as u64);
        let id = r.len().unwrap();
        assert!(read_bloom(&mut r, (id & 1023) as u16).is_err());
        // Bit array shorter than bits/8.
        let bytes = hex(
            "813016e5a289bef804 0201 0201 020d 0202 0202 049a9999999999b93f 0204
             0488168ac58c2b1340 024040 0200 0507 00404000400000 0201 00",
        );
        let mut r = RdbReader::new(&bytes[..], bytes.len() as u64);
        let id = r.len().unwrap();
        assert!(read_bloom(&mut r, (id & 1023) as u16).is_err());
    }

    #[test]
    fn cuckoo_bad_lengths_are_refused() {
        // Sub-filter data one byte short.
        let bytes =
            hex("813016e5a289821404 0201 0202 0201 0200 0202 0214 0201 0202 05 03 00000f 00");
        let mut r = RdbReader::new(&bytes[..], bytes.len() as u64);
        let id = r.len().unwrap();
        assert!(read_cuckoo(&mut r, (id & 1023) as u16).is_err());
        // numFilters 0.
        let bytes = hex("813016e5a289821404 0200 0202 0201 0200 0202 0214 0201 00");
        let mut r = RdbReader::new(&bytes[..], bytes.len() as u64);
        let id = r.len().unwrap();
        assert!(read_cuckoo(&mut r, (id & 1023) as u16).is_err());
    }

    /// A TDIS-TYPE value (after the type byte) from its fields.
    fn tdigest_value(
        compression: f64,
        cap: u64,
        merged: u64,
        unmerged: u64,
        nodes: &[(f64, f64)],
    ) -> Vec<u8> {
        let mut out = Vec::new();
        let mut w = RdbWriter::new(&mut out, SaveOptions::default());
        w.len(module_id(TDIGEST_TYPE, 0).unwrap()).unwrap();
        for d in [compression, 1.0, 2.0] {
            w.module_double(d).unwrap();
        }
        for u in [cap, merged, unmerged, 1] {
            w.module_uint(u).unwrap();
        }
        w.module_double(nodes.iter().map(|n| n.1).sum()).unwrap();
        w.module_double(unmerged as f64).unwrap();
        for n in nodes {
            w.module_double(n.0).unwrap();
        }
        for n in nodes {
            w.module_double(n.1).unwrap();
        }
        w.module_eof().unwrap();
        out
    }

    fn load_tdigest(bytes: &[u8]) -> Result<TDigest, RdbError> {
        let mut r = RdbReader::new(bytes, bytes.len() as u64);
        let id = r.len()?;
        assert_eq!(module_name(id), TDIGEST_TYPE);
        let td = read_tdigest(&mut r)?;
        r.module_eof()?;
        Ok(td)
    }

    #[test]
    fn tdigest_spec_value_round_trips() {
        // tdigest.md §7.2: CREATE t COMPRESSION 5 (value part, after the type byte).
        let bytes = hex(
            "814c3212f9360f1000 040000000000001440 04ffffffffffffef7f 04ffffffffffffefff
                         0228 0200 0200 0200 040000000000000000 040000000000000000 00",
        );
        let td = load_tdigest(&bytes).unwrap();
        assert_eq!((td.cap(), td.size()), (40, 0));
        let mut out = Vec::new();
        let mut w = RdbWriter::new(&mut out, SaveOptions::default());
        write_tdigest(&mut w, &td).unwrap();
        assert_eq!(out, bytes);
        let ok = tdigest_value(5.0, 40, 2, 0, &[(1.0, 1.0), (2.0, 1.0)]);
        assert_eq!(load_tdigest(&ok).unwrap().merged_nodes(), 2);
    }

    #[test]
    fn tdigest_crafted_values_are_refused() {
        let two = [(1.0, 1.0), (2.0, 1.0)];
        for bad in [
            tdigest_value(f64::NAN, 40, 2, 0, &two),
            tdigest_value(f64::INFINITY, 40, 2, 0, &two),
            tdigest_value(-1.0, 40, 2, 0, &two),
            // Capacity 6 × 1e9 + 10 does not fit an int32.
            tdigest_value(1e9, 40, 2, 0, &two),
            // cap above the capacity the compression allocates.
            tdigest_value(5.0, 41, 2, 0, &two),
            // merged nodes above cap, negative, and a buffer past cap.
            tdigest_value(5.0, 1, 2, 0, &two),
            tdigest_value(5.0, 40, u64::MAX, 0, &two),
            tdigest_value(5.0, 40, 2, 39, &two),
            tdigest_value(5.0, 40, 2, u64::MAX, &two),
        ] {
            assert!(load_tdigest(&bad).is_err());
        }
        // A node count far beyond the bytes left is refused before allocating.
        let huge = tdigest_value(MAX_COMPRESSION_F, 2147483644, 2147483000, 0, &two);
        assert!(load_tdigest(&huge).is_err());
    }

    const MAX_COMPRESSION_F: f64 = crate::store::tdigest::MAX_COMPRESSION as f64;
}
