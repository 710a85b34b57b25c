//! Count-min sketch commands: `CMS.*`, with RedisBloom's grammar, validation order, reply shapes and
//! error texts (cms.md §4–§5).
//!
//! The sketch itself lives in [`crate::store::cms`]; this file parses arguments, finds keys and
//! shapes replies. RedisBloom's quirks reproduced here, each noted where it happens: INITBY* refusing
//! any existing key before looking at its arguments, INCRBY parsing every increment before applying
//! any and reporting an estimate of 2³²−1 as an element error, MERGE's whole-argument `WEIGHTS` scan
//! and its per-source check order, and WATCH seeing a write from every command that opened its key
//! for writing, even when it then fails (cms.md §12).

use bytes::Bytes;

use super::CmdResult;
use super::{cmd, flags::*, CommandSpec, Ctx};
use crate::error::{self, CmdError};
use crate::numeric::{parse_f64, parse_i64};
use crate::protocol::Reply;
use crate::store::cms::{self, CountMinSketch, CreateError, MergeError, CELL_MAX};
use crate::store::{Db, Value};

// ---------------------------------------------------------------------------------------------
// Error texts (cms.md §5), all without ERR: their first word `CMS:` is the error code.
// ---------------------------------------------------------------------------------------------

/// CMS.INITBYDIM / CMS.INITBYPROB on any existing key.
pub const KEY_EXISTS: &str = "CMS: key already exists";
/// CMS.INITBYDIM: width not an integer or < 1.
pub const INVALID_WIDTH: &str = "CMS: invalid width";
/// CMS.INITBYDIM: depth not an integer or < 1.
pub const INVALID_DEPTH: &str = "CMS: invalid depth";
/// CMS.INITBYPROB: error not a double in (0, 1).
pub const INVALID_ERROR: &str = "CMS: invalid overestimation value";
/// CMS.INITBYPROB: probability not a double in (0, 1).
pub const INVALID_PROB: &str = "CMS: invalid prob value";
/// CMS.INITBYDIM / CMS.INITBYPROB: dimensions < 1 or width × depth > 2⁶³ − 1.
pub const INVALID_INIT: &str = "CMS: invalid init arguments";
/// CMS.INITBYDIM / CMS.INITBYPROB: the counters cannot be held (current line).
pub const INSUFFICIENT_MEMORY: &str = "CMS: Insufficient memory to create the key";
/// CMS.INCRBY / QUERY / INFO / MERGE on a missing key.
pub const KEY_MISSING: &str = "CMS: key does not exist";
/// CMS.INCRBY: an increment that is not an integer.
pub const CANNOT_PARSE: &str = "CMS: Cannot parse number";
/// CMS.INCRBY: a negative increment.
pub const NEGATIVE: &str = "CMS: Number cannot be negative";
/// CMS.INCRBY: an array element, when the item's estimate is exactly 4294967295.
pub const INCRBY_OVERFLOW: &str = "CMS: INCRBY overflow";
/// CMS.MERGE: numKeys not an integer.
pub const INVALID_NUMKEYS: &str = "CMS: invalid numkeys";
/// CMS.MERGE: numKeys ≤ 0.
pub const NUMKEYS_POSITIVE: &str = "CMS: Number of keys must be positive";
/// CMS.MERGE: key count differs from numKeys (no WEIGHTS).
pub const WRONG_KEYS: &str = "CMS: wrong number of keys";
/// CMS.MERGE: WEIGHTS misplaced or the weight count wrong.
pub const WRONG_KEYS_WEIGHTS: &str = "CMS: wrong number of keys/weights";
/// CMS.MERGE: a weight that is not an integer.
pub const INVALID_WEIGHT: &str = "CMS: invalid weight value";
/// CMS.MERGE: a source whose dimensions differ from the destination's.
pub const DIMENSIONS_DIFFER: &str = "CMS: width/depth is not equal";
/// CMS.MERGE: a product, partial sum or result out of range.
pub const MERGE_OVERFLOW: &str = "CMS: MERGE overflow";

// ---------------------------------------------------------------------------------------------
// The table (current line: declared arities, key positions 1 1 1; MERGE sources undeclared)
// ---------------------------------------------------------------------------------------------

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("cms.initbydim", 4, WRITE | DENYOOM | MODULE, 1, 1, 1, "module", "2.0.0", "Initializes a Count-Min Sketch to dimensions specified by user", initbydim),
    cmd("cms.initbyprob", 4, WRITE | DENYOOM | MODULE, 1, 1, 1, "module", "2.0.0", "Initializes a Count-Min Sketch to accommodate requested tolerances.", initbyprob),
    cmd("cms.incrby", -4, WRITE | DENYOOM | MODULE, 1, 1, 1, "module", "2.0.0", "Increases the count of one or more items by increment", incrby),
    cmd("cms.query", -3, READONLY | MODULE, 1, 1, 1, "module", "2.0.0", "Returns the count for one or more items in a sketch", query),
    cmd("cms.merge", -4, WRITE | DENYOOM | MODULE, 1, 1, 1, "module", "2.0.0", "Merges several sketches into one sketch", merge),
    cmd("cms.info", 2, READONLY | MODULE, 1, 1, 1, "module", "2.0.0", "Returns information about a sketch", info),
];

// ---------------------------------------------------------------------------------------------
// Key access
// ---------------------------------------------------------------------------------------------

/// The sketch under `key` for reading: `CMS: key does not exist` or WRONGTYPE otherwise.
fn existing<'a>(db: &'a mut Db, key: &[u8]) -> Result<&'a CountMinSketch, CmdError> {
    match db.lookup(key) {
        None => Err(CmdError::Static(KEY_MISSING)),
        Some(Value::Cms(s)) => Ok(s),
        Some(_) => Err(CmdError::Static(error::WRONGTYPE)),
    }
}

/// The sketch under `key` for writing (marks it modified), after the read checks.
fn existing_mut<'a>(db: &'a mut Db, key: &[u8]) -> Result<&'a mut CountMinSketch, CmdError> {
    existing(db, key)?;
    match db.lookup_mut(key) {
        Some(Value::Cms(s)) => Ok(s),
        _ => Err(CmdError::Static(KEY_MISSING)),
    }
}

/// Runs a write command body; when it fails, the key it opened for writing is still signalled to
/// WATCH, as RedisBloom's `RedisModule_OpenKey(.., WRITE)` and its close do (cms.md §12,
/// topk.md §13; the TOPK write commands use it too).
pub(super) fn writing(
    ctx: &mut Ctx,
    key: &[u8],
    body: impl FnOnce(&mut Db) -> CmdResult,
) -> CmdResult {
    let db = ctx.db();
    let result = body(db);
    if result.is_err() {
        db.signal_watchers(key);
    }
    result
}

// ---------------------------------------------------------------------------------------------
// CMS.INITBYDIM, CMS.INITBYPROB
// ---------------------------------------------------------------------------------------------

/// Creates the sketch under a key known to be free. `max` is `maxmemory`: a sketch whose counters
/// do not fit is refused with the OOM error, as a Bloom or cuckoo reservation is.
fn create(db: &mut Db, key: &Bytes, width: u64, depth: u64, max: u64) -> CmdResult {
    if !cms::dims_valid(width, depth) {
        return Err(CmdError::Static(INVALID_INIT));
    }
    let s = CountMinSketch::new(width, depth).map_err(|e| match e {
        CreateError::Invalid => CmdError::Static(INVALID_INIT),
        CreateError::OutOfMemory => CmdError::Static(INSUFFICIENT_MEMORY),
    })?;
    super::reservation_fits(max)?;
    db.insert(key.clone(), Value::Cms(Box::new(s)));
    Ok(Reply::ok())
}

/// `CMS.INITBYDIM key width depth` → `+OK`.
fn initbydim(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let max = ctx.maxmemory();
    writing(ctx, &argv[1], |db| {
        // Any existing key, before the arguments are looked at.
        if db.lookup(&argv[1]).is_some() {
            return Err(CmdError::Static(KEY_EXISTS));
        }
        let width = parse_i64(&argv[2])
            .filter(|&w| w >= 1)
            .ok_or(CmdError::Static(INVALID_WIDTH))?;
        let depth = parse_i64(&argv[3])
            .filter(|&d| d >= 1)
            .ok_or(CmdError::Static(INVALID_DEPTH))?;
        create(db, &argv[1], width as u64, depth as u64, max)
    })
}

/// A double in the open interval (0, 1).
fn unit_interval(arg: &[u8]) -> Option<f64> {
    parse_f64(arg).filter(|&v| v > 0.0 && v < 1.0)
}

/// `CMS.INITBYPROB key error probability` → `+OK`; width `⌈2/error⌉`, depth from the probability
/// in single precision (cms.md §7).
fn initbyprob(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let max = ctx.maxmemory();
    writing(ctx, &argv[1], |db| {
        if db.lookup(&argv[1]).is_some() {
            return Err(CmdError::Static(KEY_EXISTS));
        }
        let error = unit_interval(&argv[2]).ok_or(CmdError::Static(INVALID_ERROR))?;
        let prob = unit_interval(&argv[3]).ok_or(CmdError::Static(INVALID_PROB))?;
        let (width, depth) = cms::dims_for_error(error, prob);
        create(db, &argv[1], width, depth, max)
    })
}

// ---------------------------------------------------------------------------------------------
// CMS.INCRBY, CMS.QUERY
// ---------------------------------------------------------------------------------------------

/// `CMS.INCRBY key item increment [item increment ...]` → one element per pair: the item's
/// estimate after its update, or `CMS: INCRBY overflow` when that estimate is 4294967295.
fn incrby(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() % 2 == 1 {
        return Err(CmdError::arity("cms.incrby"));
    }
    writing(ctx, &argv[1], |db| {
        existing(db, &argv[1])?;
        // Every increment is parsed before any is applied: a bad one changes nothing.
        let pairs = argv[2..]
            .chunks_exact(2)
            .map(|p| match parse_i64(&p[1]) {
                None => Err(CmdError::Static(CANNOT_PARSE)),
                Some(v) if v < 0 => Err(CmdError::Static(NEGATIVE)),
                Some(v) => Ok((&p[0], v as u64)),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let s = existing_mut(db, &argv[1])?;
        Ok(Reply::Array(
            pairs
                .into_iter()
                .map(|(item, v)| match s.incr_by(item, v) {
                    CELL_MAX => Reply::Error(CmdError::Static(INCRBY_OVERFLOW)),
                    est => Reply::Int(est as i64),
                })
                .collect(),
        ))
    })
}

/// `CMS.QUERY key item [item ...]` → one integer per item (saturated counters answer 4294967295).
fn query(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let s = existing(ctx.db(), &argv[1])?;
    Ok(Reply::Array(
        argv[2..]
            .iter()
            .map(|item| Reply::Int(s.query(item) as i64))
            .collect(),
    ))
}

// ---------------------------------------------------------------------------------------------
// CMS.MERGE
// ---------------------------------------------------------------------------------------------

/// `CMS.MERGE destination numKeys source [source ...] [WEIGHTS weight [weight ...]]` → `+OK`.
fn merge(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    writing(ctx, &argv[1], |db| {
        let (width, depth) = {
            let d = existing(db, &argv[1])?;
            (d.width(), d.depth())
        };
        let numkeys = parse_i64(&argv[2]).ok_or(CmdError::Static(INVALID_NUMKEYS))?;
        if numkeys <= 0 {
            return Err(CmdError::Static(NUMKEYS_POSITIVE));
        }
        let rest = &argv[3..];
        let n = usize::try_from(numkeys).unwrap_or(usize::MAX);
        // The first argument equal to WEIGHTS is the keyword, even in a source's place.
        let weights = match rest.iter().position(|a| a.eq_ignore_ascii_case(b"WEIGHTS")) {
            None if rest.len() == n => None,
            None => return Err(CmdError::Static(WRONG_KEYS)),
            Some(pos) if pos == n && n.checked_mul(2).map(|m| m + 1) == Some(rest.len()) => {
                Some(&rest[n + 1..])
            }
            Some(_) => return Err(CmdError::Static(WRONG_KEYS_WEIGHTS)),
        };
        let sources = &rest[..n];
        // Per source, in order: its weight, its key, its dimensions.
        let mut parsed = Vec::with_capacity(n);
        for (i, key) in sources.iter().enumerate() {
            let w = match weights {
                Some(ws) => parse_i64(&ws[i]).ok_or(CmdError::Static(INVALID_WEIGHT))?,
                None => 1,
            };
            let s = existing(db, key)?;
            if s.width() != width || s.depth() != depth {
                return Err(CmdError::Static(DIMENSIONS_DIFFER));
            }
            parsed.push(w);
        }
        // Every source was just looked up (expired ones reclaimed), so `peek` sees the same.
        let refs: Vec<(&CountMinSketch, i64)> = sources
            .iter()
            .zip(&parsed)
            .filter_map(|(key, &w)| match db.peek(key) {
                Some(Value::Cms(s)) => Some((&**s, w)),
                _ => None,
            })
            .collect();
        let result = CountMinSketch::merge(width, depth, &refs).map_err(|e| match e {
            MergeError::Dimensions => CmdError::Static(DIMENSIONS_DIFFER),
            MergeError::Overflow => CmdError::Static(MERGE_OVERFLOW),
            MergeError::OutOfMemory => CmdError::Static(error::OOM),
        })?;
        // In place: the destination keeps its TTL, as RedisBloom writes into the existing value.
        *existing_mut(db, &argv[1])? = result;
        Ok(Reply::ok())
    })
}

// ---------------------------------------------------------------------------------------------
// CMS.INFO
// ---------------------------------------------------------------------------------------------

/// `CMS.INFO key` → `width`, `depth`, `count` (simple-string names; a map in RESP3). The total is
/// printed as a signed 64-bit integer, as RedisBloom sends it.
fn info(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let s = existing(ctx.db(), &argv[1])?;
    Ok(Reply::Map(vec![
        (Reply::Status("width"), Reply::Int(s.width() as i64)),
        (Reply::Status("depth"), Reply::Int(s.depth() as i64)),
        (Reply::Status("count"), Reply::Int(s.count() as i64)),
    ]))
}
