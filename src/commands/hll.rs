//! HyperLogLog commands: PFADD, PFCOUNT, PFMERGE, PFDEBUG, PFSELFTEST.
//!
//! HLLs are plain `Value::Str` strings; all format knowledge lives in [`crate::store::hll`]. This
//! file only does what Redis's command functions do around it: key lookups in Redis's order (type
//! check, then HLL validation, then decoding, per key), which lookups count as writes, and the
//! replies. A key is signalled as modified (WATCH, dirty) exactly when Redis signals it: after a
//! PFADD that created the key or changed a register, a PFCOUNT that wrote its cache back, and every
//! PFMERGE. A PFADD that changes nothing, a PFCOUNT served from a valid cache, and a command that
//! stops at a corrupt value leave WATCHed keys alone (the differential test checks this).

use bytes::Bytes;

use super::CmdResult;
use super::{cmd, flags::*, CommandSpec, Ctx};
use crate::error::{self, CmdError};
use crate::events;
use crate::protocol::Reply;
use crate::store::db::{ReadView, SharedDb, SharedEntry, SharedSlot, SharedVacancy, WriteConfig};
use crate::store::hll::{self, Encoding, HllError, Registers, REGISTERS};
use crate::store::string::StrMut;
use crate::store::Value;

pub const COMMANDS: &[CommandSpec] = &[
    cmd(
        "pfadd",
        -2,
        WRITE | DENYOOM | FAST,
        1,
        1,
        1,
        "hyperloglog",
        "2.8.9",
        "Adds elements to a HyperLogLog key. Creates the key if it doesn't exist.",
        pfadd,
    )
    .shared_write(pfadd_shared),
    cmd(
        "pfcount",
        -2,
        READONLY | MAY_REPLICATE,
        1,
        -1,
        1,
        "hyperloglog",
        "2.8.9",
        "Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s).",
        pfcount,
    )
    .shared_read(pfcount_shared),
    cmd(
        "pfmerge",
        -2,
        WRITE | DENYOOM,
        1,
        -1,
        1,
        "hyperloglog",
        "2.8.9",
        "Merges one or more HyperLogLog values into a single key.",
        pfmerge,
    ),
    cmd(
        "pfdebug",
        3,
        WRITE | DENYOOM | ADMIN,
        2,
        2,
        1,
        "hyperloglog",
        "2.8.9",
        "Internal commands for debugging HyperLogLog values.",
        pfdebug,
    ),
    cmd(
        "pfselftest",
        1,
        ADMIN,
        0,
        0,
        0,
        "hyperloglog",
        "2.8.9",
        "An internal command for testing HyperLogLog values.",
        pfselftest,
    ),
];

fn hll_error(e: HllError) -> CmdError {
    CmdError::Static(e.text())
}

/// The string under a key that must be an HLL: WRONGTYPE (generic) for another type, then the HLL
/// header checks.
fn as_hll(v: &Value) -> Result<Encoding, CmdError> {
    let s = v.as_str().ok_or(CmdError::Static(error::WRONGTYPE))?;
    hll::validate(s).map_err(hll_error)
}

/// The bytes of a value [`as_hll`] accepted.
fn hll_bytes(v: &Value) -> Result<&[u8], CmdError> {
    as_hll(v)?;
    v.as_str()
        .map(|s| &s[..])
        .ok_or(CmdError::Static(error::WRONGTYPE))
}

fn sparse_max_bytes(ctx: &Ctx) -> u64 {
    ctx.config().hll_sparse_max_bytes as u64
}

/// The value of a key already validated as an HLL, for writing. Like Redis's
/// `dbUnshareStringValue`, this makes the string `raw` even if nothing is written; the caller
/// signals an actual change.
fn hll_mut<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Result<StrMut<'a>, CmdError> {
    ctx.db()
        .lookup_mut_unsignalled(key)
        .and_then(Value::as_str_mut)
        .ok_or(CmdError::Static(hll::ERR_NOT_HLL))
}

/// `PFADD key [element ...]` → `:1` if the key was created or a register changed, else `:0`.
fn pfadd(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    // `hll-sparse-max-bytes` is read (a lock of the config) only where a sparse HLL may grow:
    // the common write, to a dense HLL, never needs it.
    let key = &argv[1];
    let elements = argv[2..].iter().map(|e| &e[..]);
    let db = ctx.db();
    // One probe: a valid HLL is unshared (marked raw) as Redis's PFADD does, then a dense one is
    // updated where it lies (it never changes length); a sparse one may grow or turn dense.
    match db.lookup_unshared(key, false, |v| as_hll(v).is_ok()) {
        None => {
            let max_bytes = sparse_max_bytes(ctx);
            let db = ctx.db();
            let mut v = hll::new_sparse();
            // A fresh value cannot be corrupt; keep whatever it holds either way.
            let r = hll::pfadd(&mut v, elements, true, max_bytes);
            db.insert(key.clone(), Value::Str(v.into()));
            // Redis creates HLLs as raw strings, whatever their length.
            db.lookup_mut_unsignalled(key);
            r.map_err(hll_error)?;
            db.notify(events::STRING, "pfadd", key);
            return Ok(Reply::Int(1));
        }
        Some(v) => {
            let dense = as_hll(v)? == Encoding::Dense;
            if let (true, Value::Str(s)) = (dense, v) {
                if s.edit_in_place(|b| hll::pfadd_dense(b, elements)) {
                    ctx.db().signal_modified(key);
                    ctx.notify(events::STRING, "pfadd", key);
                    return Ok(Reply::Int(1));
                }
                return Ok(Reply::Int(0));
            }
        }
    }
    let max_bytes = sparse_max_bytes(ctx);
    let mut v = hll_mut(ctx, key)?;
    // A corrupt value found partway keeps the earlier changes but, as in Redis, is not signalled.
    let updated = hll::pfadd(&mut v, elements, false, max_bytes).map_err(hll_error)?;
    drop(v);
    if updated {
        ctx.db().signal_modified(key);
        ctx.notify(events::STRING, "pfadd", key);
    }
    Ok(Reply::Int(updated as i64))
}

/// PFADD under the shared lock (`shared_path`), as [`pfadd`] does it: a valid HLL updated where
/// it lies (marked `raw`, as unsharing makes it; a change counted), a dense one in place, a
/// sparse one as it grows (turning dense past `hll-sparse-max-bytes`, mirrored in
/// `WriteConfig`), and a missing key created as an HLL where keys may be added (the many small
/// per-page HLLs of distinct counting are sparse, and are created by PFADD). Anything that is
/// not an HLL: the exclusive path, which answers the error.
///
/// A sparse HLL found corrupt partway answers an error after the elements before the corrupt
/// run raised their registers; the command is deferred and runs again on the exclusive path.
/// That leaves what the exclusive path alone leaves: raising a register is idempotent, so the
/// rerun raises nothing new before the same corrupt run and answers the same error, and neither
/// path signals, propagates or counts a failed PFADD's changes (which Redis keeps too).
fn pfadd_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    let elements = argv[2..].iter().map(|el| &el[..]);
    // The sparse and new-key paths are out of line: the dense one, issue 15's PFADD, stays as
    // short as it was before they were added.
    let config = db.write_config;
    let done = match db.write_or_vacant(&argv[1]) {
        None => return Ok(Reply::Null),
        Some(SharedSlot::Live(mut e)) => match as_hll(e.value) {
            Ok(Encoding::Dense) => {
                e.mark_raw();
                // `as_hll` accepted it: a string.
                match e.value {
                    Value::Str(s) => Some(s.edit_in_place(|b| hll::pfadd_dense(b, elements))),
                    _ => None,
                }
            }
            Ok(Encoding::Sparse) => pfadd_shared_sparse(e, elements, config),
            Err(_) => None,
        },
        Some(SharedSlot::Vacant(vacancy)) => pfadd_shared_new(vacancy, elements, config),
    };
    match done {
        None => super::shared_path::defer(db),
        Some(false) => Ok(Reply::Int(0)),
        Some(true) => {
            db.wrote();
            Ok(Reply::Int(1))
        }
    }
}

/// [`pfadd_shared`] into a sparse HLL: whether a register changed, `None` to defer (a corrupt
/// run met partway, or no configuration mirror).
#[inline(never)]
fn pfadd_shared_sparse<'a>(
    mut e: SharedEntry<'_>,
    elements: impl Iterator<Item = &'a [u8]>,
    config: Option<&WriteConfig>,
) -> Option<bool> {
    let max_bytes = config?.hll_sparse_max_bytes();
    e.mark_raw();
    let mut v = e.value.as_str_mut()?;
    hll::pfadd(&mut v, elements, false, max_bytes).ok()
}

/// [`pfadd_shared`] of a missing key: the new HLL added (`Some(true)`), or `None` to defer.
#[inline(never)]
fn pfadd_shared_new<'a>(
    vacancy: SharedVacancy<'_, '_>,
    elements: impl Iterator<Item = &'a [u8]>,
    config: Option<&WriteConfig>,
) -> Option<bool> {
    let max_bytes = config?.hll_sparse_max_bytes();
    let mut v = hll::new_sparse();
    // A fresh value cannot be corrupt; were it, the exclusive path would decide (the vacancy
    // left unfilled leaves the table as it was).
    hll::pfadd(&mut v, elements, true, max_bytes).ok()?;
    vacancy.insert_raw(Value::Str(v.into()));
    Some(true)
}

/// `PFCOUNT key [key ...]` → the estimate. One key: served from and written back to its cache.
/// Several keys: the estimate of their union; no cache is read or written.
fn pfcount(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() == 2 {
        let key = &argv[1];
        // One probe; a valid cache is read where it lies, and a stale one is recomputed and
        // written back in place (the length never changes).
        let Some(v) = ctx.db().lookup_unshared(key, true, |v| as_hll(v).is_ok()) else {
            return Ok(Reply::Int(0));
        };
        as_hll(v)?;
        let Value::Str(s) = v else {
            return Err(CmdError::Static(error::WRONGTYPE));
        };
        if hll::cache_is_valid(s) {
            return Ok(Reply::Int(hll::cached_cardinality(s) as i64));
        }
        let (card, written) = s.edit_in_place(hll::count_cached).map_err(hll_error)?;
        if written {
            // Writing the cache back is a modification (WATCH, dirty), as in Redis.
            ctx.db().signal_modified(key);
        }
        return Ok(Reply::Int(card as i64));
    }
    pfcount_union(ctx.db(), &argv[1..])
}

/// PFCOUNT of several keys: the cardinality of their union, which writes no cache.
fn pfcount_union(db: &mut impl ReadView, keys: &[Bytes]) -> CmdResult {
    let mut max: Box<Registers> = Box::new([0u8; REGISTERS]);
    for key in keys {
        if let Some(v) = db.read(key) {
            hll::merge_into(&mut max, hll_bytes(v)?).map_err(hll_error)?;
        }
    }
    Ok(Reply::Int(hll::estimate(&hll::raw_histogram(&max)) as i64))
}

/// PFCOUNT under the shared lock: a single key whose cached cardinality is valid, or a union.
/// A stale cache must be written back, which only the exclusive path may do.
fn pfcount_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    if argv.len() > 2 {
        return pfcount_union(db, &argv[1..]);
    }
    let Some(v) = db.read(&argv[1]) else {
        return Ok(Reply::Int(0));
    };
    as_hll(v)?;
    match v {
        Value::Str(s) if hll::cache_is_valid(s) => {
            Ok(Reply::Int(hll::cached_cardinality(s) as i64))
        }
        _ => {
            db.defer();
            Ok(Reply::Int(0))
        }
    }
}

/// `PFMERGE destkey [sourcekey ...]` → `+OK`. The destination's own registers take part.
fn pfmerge(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let max_bytes = sparse_max_bytes(ctx);
    let mut max: Box<Registers> = Box::new([0u8; REGISTERS]);
    let mut any_dense = false;
    let db = ctx.db();
    for key in &argv[1..] {
        if let Some(v) = db.lookup(key) {
            let enc = hll::merge_into(&mut max, hll_bytes(v)?).map_err(hll_error)?;
            any_dense |= enc == Encoding::Dense;
        }
    }
    let dest = &argv[1];
    if db.lookup_quiet(dest).is_none() {
        db.insert(dest.clone(), Value::Str(hll::new_sparse().into()));
    }
    let mut v = hll_mut(ctx, dest)?;
    hll::merge_apply(&mut v, &max, any_dense, max_bytes).map_err(hll_error)?;
    drop(v);
    ctx.db().signal_modified(dest);
    ctx.notify(events::STRING, "pfadd", dest);
    Ok(Reply::ok())
}

/// `PFDEBUG GETREG|DECODE|ENCODING|TODENSE key`. The key is checked before the subcommand.
fn pfdebug(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let sub = argv[1].to_ascii_lowercase();
    let key = &argv[2];
    // Redis 8's `PFDEBUG SIMD ON|OFF` toggles code paths that give identical results: a no-op here.
    if sub == b"simd"
        && (argv[2].eq_ignore_ascii_case(b"on") || argv[2].eq_ignore_ascii_case(b"off"))
    {
        return Ok(Reply::ok());
    }
    match ctx.db().lookup(key) {
        None => return Err(CmdError::Static(hll::ERR_NO_KEY)),
        Some(v) => {
            as_hll(v)?;
        }
    }
    let mut v = hll_mut(ctx, key)?;
    let enc = hll::validate(&v).map_err(hll_error)?;
    match &sub[..] {
        b"decode" if enc == Encoding::Dense => Err(CmdError::Static(hll::ERR_NOT_SPARSE)),
        b"decode" => Ok(Reply::Bulk(Bytes::from(hll::sparse_debug_string(&v)))),
        b"encoding" => Ok(Reply::Status(enc.name())),
        b"getreg" | b"todense" => {
            // Converting in place counts as a change for persistence; Redis does not signal it
            // to WATCH.
            let converted = hll::sparse_to_dense(&mut v).map_err(hll_error)?;
            let reply = if sub == b"todense" {
                Reply::Int(converted as i64)
            } else {
                registers_reply(&v)
            };
            drop(v);
            if converted {
                ctx.db().dirty += 1;
            }
            Ok(reply)
        }
        _ => {
            // Redis formats the name with `%s`, which stops at a NUL byte.
            let name = argv[1].split(|&b| b == 0).next().unwrap_or_default();
            Err(CmdError::Owned(format!(
                "ERR Unknown PFDEBUG subcommand '{}'",
                String::from_utf8_lossy(name)
            )))
        }
    }
}

fn registers_reply(v: &[u8]) -> Reply {
    match hll::dense_registers(v) {
        Ok(regs) => Reply::Array(regs.iter().map(|&r| Reply::Int(r as i64)).collect()),
        Err(e) => Reply::Error(hll_error(e)),
    }
}

/// `PFSELFTEST` → `+OK`, or `ERR TESTFAILED ...`.
fn pfselftest(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    match hll::selftest() {
        Ok(()) => Ok(Reply::ok()),
        Err(msg) => Err(CmdError::Owned(format!("ERR {msg}"))),
    }
}
