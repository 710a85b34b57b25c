//! t-digest commands: `TDIGEST.*`, with RedisBloom's grammar, validation order, reply shapes and
//! error texts (tdigest.md §5–§6).
//!
//! The digest itself lives in [`crate::store::tdigest`]; this file finds keys, parses arguments and
//! shapes replies. Quirks reproduced here: the key check comes before any argument is parsed; CREATE
//! takes its value from `argv[3]` whichever of the two words is `COMPRESSION`; MERGE's keyword
//! search ignores unknown tokens once a keyword is present; ADD parses every value before adding
//! any, and keeps the values added before an overflow; read commands compress the stored digest
//! without counting as a write (no WATCH, no dirty), as RedisBloom's do.

use bytes::Bytes;

use super::CmdResult;
use super::{cmd, flags::*, CommandSpec, Ctx};
use crate::error::{self, CmdError};
use crate::numeric::{parse_f64, parse_i64};
use crate::protocol::Reply;
use crate::store::tdigest::{c_i64, TDigest, TdError, DEFAULT_COMPRESSION};
use crate::store::{Db, Value};

// ---------------------------------------------------------------------------------------------
// Error texts (tdigest.md §6)
// ---------------------------------------------------------------------------------------------

/// Every command but CREATE (and MERGE's destination) on a missing key; MERGE's missing self-source.
pub const KEY_MISSING: &str = "ERR T-Digest: key does not exist";
/// CREATE on an existing t-digest.
pub const KEY_EXISTS: &str = "ERR T-Digest: key already exists";
/// CREATE / MERGE: a fourth argument that is not `COMPRESSION`, or MERGE options with no keyword.
pub const WRONG_KEYWORD: &str = "ERR T-Digest: wrong keyword";
/// CREATE / MERGE: the compression is not an integer.
pub const PARSE_COMPRESSION: &str = "ERR T-Digest: error parsing compression parameter";
/// CREATE / MERGE: the compression is ≤ 0.
pub const COMPRESSION_POSITIVE: &str =
    "ERR T-Digest: compression parameter needs to be a positive integer";
/// CREATE: the digest cannot be allocated.
pub const ALLOC_FAILED: &str = "ERR T-Digest: allocation failed";
/// MERGE: the destination digest cannot be allocated.
pub const DEST_ALLOC_FAILED: &str = "ERR T-Digest: allocation of destination digest failed";
/// ADD: a value that is not a number.
pub const PARSE_VAL: &str = "ERR T-Digest: error parsing val parameter";
/// ADD: an infinite value.
pub const VAL_FINITE: &str = "ERR T-Digest: val parameter needs to be a finite number";
/// ADD / MERGE: a weight would overflow, or a restored digest's buffer is full.
pub const OVERFLOW: &str = "ERR T-Digest: overflow detected";
/// MERGE: numkeys is not an integer.
pub const PARSE_NUMKEYS: &str = "ERR T-Digest: error parsing numkeys";
/// MERGE: numkeys ≤ 0.
pub const NUMKEYS_POSITIVE: &str = "ERR T-Digest: numkeys needs to be a positive integer";
/// QUANTILE: a fraction that is not a number.
pub const PARSE_QUANTILE: &str = "ERR T-Digest: error parsing quantile";
/// QUANTILE: a fraction outside [0, 1].
pub const QUANTILE_RANGE: &str = "ERR T-Digest: quantile should be in [0,1]";
/// CDF: a value that is not a number.
pub const PARSE_CDF: &str = "ERR T-Digest: error parsing cdf";
/// RANK / REVRANK: a value that is not a number.
pub const PARSE_VALUE: &str = "ERR T-Digest: error parsing value";
/// BYRANK / BYREVRANK: a rank that is not an integer.
pub const PARSE_RANK: &str = "ERR T-Digest: error parsing rank";
/// BYRANK / BYREVRANK: a negative rank.
pub const RANK_NEGATIVE: &str = "ERR T-Digest: rank needs to be non negative";
/// TRIMMED_MEAN: low cut not a number.
pub const PARSE_LOW: &str = "ERR T-Digest: error parsing low_cut_percentile";
/// TRIMMED_MEAN: high cut not a number.
pub const PARSE_HIGH: &str = "ERR T-Digest: error parsing high_cut_percentile";
/// TRIMMED_MEAN: a cut outside [0, 1].
pub const CUT_RANGE: &str =
    "ERR T-Digest: low_cut_percentile and high_cut_percentile should be in [0,1]";
/// TRIMMED_MEAN: low cut not below the high cut.
pub const CUT_ORDER: &str =
    "ERR T-Digest: low_cut_percentile should be lower than high_cut_percentile";

// ---------------------------------------------------------------------------------------------
// The table (current line: declared arities, tdigest.md §5)
// ---------------------------------------------------------------------------------------------

const SINCE: &str = "2.4.0";

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("tdigest.create", -2, WRITE | DENYOOM | MODULE, 1, 1, 1, "module", SINCE, "Allocates memory and initializes a new t-digest sketch", create),
    cmd("tdigest.reset", 2, WRITE | DENYOOM | MODULE, 1, 1, 1, "module", SINCE, "Resets a t-digest sketch: empty the sketch and re-initializes it.", reset),
    cmd("tdigest.add", -3, WRITE | DENYOOM | MODULE, 1, 1, 1, "module", SINCE, "Adds one or more observations to a t-digest sketch", add),
    cmd("tdigest.merge", -4, WRITE | DENYOOM | MODULE, 1, 1, 1, "module", SINCE, "Merges multiple t-digest sketches into a single sketch", merge),
    cmd("tdigest.min", 2, READONLY | MODULE, 1, 1, 1, "module", SINCE, "Returns the minimum observation value from a t-digest sketch", min),
    cmd("tdigest.max", 2, READONLY | MODULE, 1, 1, 1, "module", SINCE, "Returns the maximum observation value from a t-digest sketch", max),
    cmd("tdigest.quantile", -3, READONLY | MODULE, 1, 1, 1, "module", SINCE, "Returns, for each input fraction, an estimation of the value (floating point) that is smaller than the given fraction of observations", quantile),
    cmd("tdigest.cdf", -3, READONLY | MODULE, 1, 1, 1, "module", SINCE, "Returns, for each input value, an estimation of the fraction (floating-point) of (observations smaller than the given value + half the observations equal to the given value)", cdf),
    cmd("tdigest.trimmed_mean", 4, READONLY | MODULE, 1, 1, 1, "module", SINCE, "Returns an estimation of the mean value from the sketch, excluding observation values outside the low and high cutoff quantiles", trimmed_mean),
    cmd("tdigest.rank", -3, READONLY | MODULE, 1, 1, 1, "module", SINCE, "Returns, for each input value (floating-point), the estimated rank of the value (the number of observations in the sketch that are smaller than the value + half the number of observations that are equal to the value)", rank),
    cmd("tdigest.revrank", -3, READONLY | MODULE, 1, 1, 1, "module", SINCE, "Returns, for each input value (floating-point), the estimated reverse rank of the value (the number of observations in the sketch that are larger than the value + half the number of observations that are equal to the value)", revrank),
    cmd("tdigest.byrank", -3, READONLY | MODULE, 1, 1, 1, "module", SINCE, "Returns, for each input rank, an estimation of the value (floating-point) with that rank", byrank),
    cmd("tdigest.byrevrank", -3, READONLY | MODULE, 1, 1, 1, "module", SINCE, "Returns, for each input reverse rank, an estimation of the value (floating-point) with that reverse rank", byrevrank),
    cmd("tdigest.info", 2, READONLY | MODULE, 1, 1, 1, "module", SINCE, "Returns information and statistics about a t-digest sketch", info),
];

// ---------------------------------------------------------------------------------------------
// Key access
// ---------------------------------------------------------------------------------------------

/// RedisBloom's key check: a missing key or another type (other module types included) is an
/// error, before any argument is looked at.
fn check(db: &mut Db, key: &[u8]) -> Result<(), CmdError> {
    match db.lookup(key) {
        None => Err(CmdError::Static(KEY_MISSING)),
        Some(Value::TDigest(_)) => Ok(()),
        Some(_) => Err(CmdError::Static(error::WRONGTYPE)),
    }
}

fn read<'a>(db: &'a mut Db, key: &[u8]) -> Result<&'a TDigest, CmdError> {
    check(db, key)?;
    match db.lookup(key) {
        Some(Value::TDigest(td)) => Ok(td),
        _ => Err(CmdError::Static(KEY_MISSING)),
    }
}

/// The digest for a write (`signal`: the key counts as modified) or for a read command's
/// compression (not a write in Redis's eyes).
fn open<'a>(db: &'a mut Db, key: &[u8], signal: bool) -> Result<&'a mut TDigest, CmdError> {
    check(db, key)?;
    let v = if signal {
        db.lookup_mut(key)
    } else {
        db.lookup_mut_unsignalled(key)
    };
    match v {
        Some(Value::TDigest(td)) => Ok(td),
        _ => Err(CmdError::Static(KEY_MISSING)),
    }
}

/// A compression argument as CREATE and MERGE parse it.
fn parse_compression(arg: &[u8]) -> Result<i64, CmdError> {
    let c = parse_i64(arg).ok_or(CmdError::Static(PARSE_COMPRESSION))?;
    if c <= 0 {
        return Err(CmdError::Static(COMPRESSION_POSITIVE));
    }
    Ok(c)
}

fn doubles(values: impl IntoIterator<Item = f64>) -> Reply {
    Reply::Array(values.into_iter().map(Reply::Double).collect())
}

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

/// `TDIGEST.CREATE key [COMPRESSION compression]` → `+OK`.
fn create(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() != 2 && argv.len() != 4 {
        return Err(CmdError::arity("tdigest.create"));
    }
    let key = &argv[1];
    let db = ctx.db();
    match db.lookup(key) {
        None => {}
        Some(Value::TDigest(_)) => return Err(CmdError::Static(KEY_EXISTS)),
        Some(_) => return Err(CmdError::Static(error::WRONGTYPE)),
    }
    let mut compression = DEFAULT_COMPRESSION;
    if argv.len() == 4 {
        if !argv[2].eq_ignore_ascii_case(b"compression")
            && !argv[3].eq_ignore_ascii_case(b"compression")
        {
            return Err(CmdError::Static(WRONG_KEYWORD));
        }
        // The value is always argv[3] (tdigest.md §5.1).
        compression = parse_compression(&argv[3])?;
    }
    let td = TDigest::new(compression as f64).map_err(|_| CmdError::Static(ALLOC_FAILED))?;
    ctx.db().insert(key.clone(), Value::TDigest(Box::new(td)));
    Ok(Reply::ok())
}

/// `TDIGEST.RESET key` → `+OK`.
fn reset(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    open(ctx.db(), &argv[1], true)?.reset();
    Ok(Reply::ok())
}

/// `TDIGEST.ADD key value [value ...]` → `+OK`. Every value is parsed before any is added.
fn add(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    check(ctx.db(), &argv[1])?;
    let mut values = Vec::with_capacity(argv.len() - 2);
    for a in &argv[2..] {
        let v = parse_f64(a).ok_or(CmdError::Static(PARSE_VAL))?;
        if !v.is_finite() {
            return Err(CmdError::Static(VAL_FINITE));
        }
        values.push(v);
    }
    let td = open(ctx.db(), &argv[1], true)?;
    for v in values {
        // Values added before a failure stay (tdigest.md §5.3).
        td.add(v, 1).map_err(|_| CmdError::Static(OVERFLOW))?;
    }
    Ok(Reply::ok())
}

/// `TDIGEST.MERGE destkey numkeys src [src ...] [COMPRESSION c] [OVERRIDE]` → `+OK`.
fn merge(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let dest = &argv[1];
    let db = ctx.db();
    let dest_compression = match db.lookup(dest) {
        None => None,
        Some(Value::TDigest(td)) => Some(c_i64(td.compression())),
        Some(_) => return Err(CmdError::Static(error::WRONGTYPE)),
    };
    let numkeys = parse_i64(&argv[2]).ok_or(CmdError::Static(PARSE_NUMKEYS))?;
    if numkeys <= 0 {
        return Err(CmdError::Static(NUMKEYS_POSITIVE));
    }
    if numkeys as u64 > (argv.len() - 3) as u64 {
        return Err(CmdError::arity("tdigest.merge"));
    }
    let sources = &argv[3..3 + numkeys as usize];
    let options = &argv[3 + numkeys as usize..];
    let mut given = None;
    let mut override_dest = false;
    if !options.is_empty() {
        let at = options
            .iter()
            .position(|a| a.eq_ignore_ascii_case(b"compression"));
        override_dest = options.iter().any(|a| a.eq_ignore_ascii_case(b"override"));
        match at {
            Some(i) => {
                let v = options
                    .get(i + 1)
                    .ok_or_else(|| CmdError::arity("tdigest.merge"))?;
                given = Some(parse_compression(v)?);
            }
            None if !override_dest => return Err(CmdError::Static(WRONG_KEYWORD)),
            None => {}
        }
    }
    // Every source is checked, and its compression read, before anything changes.
    let mut largest = i64::MIN;
    for src in sources {
        let c = if src == dest {
            dest_compression.ok_or(CmdError::Static(KEY_MISSING))?
        } else {
            c_i64(read(db, src)?.compression())
        };
        largest = largest.max(c);
    }
    let compression = match (given, dest_compression, override_dest) {
        (Some(c), _, _) => c,
        (None, Some(d), false) => d,
        (None, _, _) => largest,
    };
    let mut merged =
        TDigest::new(compression as f64).map_err(|_| CmdError::Static(DEST_ALLOC_FAILED))?;
    if dest_compression.is_some() && !override_dest {
        if let Ok(old) = open(db, dest, false) {
            // The reference ignores this merge's result.
            let _ = merged.merge_from(old);
        }
    }
    for src in sources {
        let from = open(db, src, false)?;
        merged
            .merge_from(from)
            .map_err(|_: TdError| CmdError::Static(OVERFLOW))?;
    }
    db.insert(dest.clone(), Value::TDigest(Box::new(merged)));
    Ok(Reply::ok())
}

/// `TDIGEST.MIN key` → the smallest observation, or `nan` when empty.
fn min(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let td = read(ctx.db(), &argv[1])?;
    Ok(Reply::Double(if td.size() == 0 {
        f64::NAN
    } else {
        td.min()
    }))
}

/// `TDIGEST.MAX key` → the largest observation, or `nan` when empty.
fn max(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let td = read(ctx.db(), &argv[1])?;
    Ok(Reply::Double(if td.size() == 0 {
        f64::NAN
    } else {
        td.max()
    }))
}

/// `TDIGEST.QUANTILE key q [q ...]` → one double per fraction.
fn quantile(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    check(ctx.db(), &argv[1])?;
    let mut qs = Vec::with_capacity(argv.len() - 2);
    for a in &argv[2..] {
        let q = parse_f64(a).ok_or(CmdError::Static(PARSE_QUANTILE))?;
        if !(0.0..=1.0).contains(&q) {
            return Err(CmdError::Static(QUANTILE_RANGE));
        }
        qs.push(q);
    }
    let td = open(ctx.db(), &argv[1], false)?;
    Ok(doubles(td.quantiles(&qs)))
}

/// `TDIGEST.CDF key value [value ...]` → one double per value.
fn cdf(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    check(ctx.db(), &argv[1])?;
    let xs = parse_all(&argv[2..], PARSE_CDF)?;
    let td = open(ctx.db(), &argv[1], false)?;
    Ok(doubles(xs.into_iter().map(|x| td.cdf(x))))
}

fn parse_all(args: &[Bytes], err: &'static str) -> Result<Vec<f64>, CmdError> {
    args.iter()
        .map(|a| parse_f64(a).ok_or(CmdError::Static(err)))
        .collect()
}

fn rank_generic(ctx: &mut Ctx, argv: &[Bytes], reverse: bool) -> CmdResult {
    check(ctx.db(), &argv[1])?;
    let vs = parse_all(&argv[2..], PARSE_VALUE)?;
    let td = open(ctx.db(), &argv[1], false)?;
    Ok(Reply::Array(
        vs.into_iter()
            .map(|v| Reply::Int(td.rank(v, reverse)))
            .collect(),
    ))
}

/// `TDIGEST.RANK key value [value ...]` → one integer per value.
fn rank(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    rank_generic(ctx, argv, false)
}

/// `TDIGEST.REVRANK key value [value ...]` → one integer per value.
fn revrank(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    rank_generic(ctx, argv, true)
}

fn byrank_generic(ctx: &mut Ctx, argv: &[Bytes], reverse: bool) -> CmdResult {
    check(ctx.db(), &argv[1])?;
    let mut ranks = Vec::with_capacity(argv.len() - 2);
    for a in &argv[2..] {
        let r = parse_i64(a).ok_or(CmdError::Static(PARSE_RANK))?;
        if r < 0 {
            return Err(CmdError::Static(RANK_NEGATIVE));
        }
        ranks.push(r);
    }
    let td = open(ctx.db(), &argv[1], false)?;
    Ok(doubles(ranks.into_iter().map(|r| td.by_rank(r, reverse))))
}

/// `TDIGEST.BYRANK key rank [rank ...]` → one double per rank.
fn byrank(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    byrank_generic(ctx, argv, false)
}

/// `TDIGEST.BYREVRANK key rank [rank ...]` → one double per reverse rank.
fn byrevrank(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    byrank_generic(ctx, argv, true)
}

/// `TDIGEST.TRIMMED_MEAN key low high` → one double.
fn trimmed_mean(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    check(ctx.db(), &argv[1])?;
    let low = parse_f64(&argv[2]).ok_or(CmdError::Static(PARSE_LOW))?;
    let high = parse_f64(&argv[3]).ok_or(CmdError::Static(PARSE_HIGH))?;
    if !(0.0..=1.0).contains(&low) || !(0.0..=1.0).contains(&high) {
        return Err(CmdError::Static(CUT_RANGE));
    }
    if low >= high {
        return Err(CmdError::Static(CUT_ORDER));
    }
    let td = open(ctx.db(), &argv[1], false)?;
    Ok(Reply::Double(td.trimmed_mean(low, high)))
}

/// `TDIGEST.INFO key` → nine name/integer pairs (a flat array in RESP2, a map in RESP3).
fn info(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let td = read(ctx.db(), &argv[1])?;
    let fields: [(&'static str, i64); 9] = [
        ("Compression", c_i64(td.compression())),
        ("Capacity", td.cap() as i64),
        ("Merged nodes", td.merged_nodes() as i64),
        ("Unmerged nodes", td.unmerged_nodes() as i64),
        ("Merged weight", td.merged_weight()),
        ("Unmerged weight", td.unmerged_weight()),
        ("Observations", td.size()),
        ("Total compressions", td.total_compressions()),
        ("Memory usage", td.memory_usage() as i64),
    ];
    Ok(Reply::Map(
        fields
            .into_iter()
            .map(|(k, v)| (Reply::Status(k), Reply::Int(v)))
            .collect(),
    ))
}
