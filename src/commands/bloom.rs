//! The `BF.*` commands, answering exactly as RedisBloom's current line does (bloom.md §2–§5, §10).
//!
//! The filter itself lives in [`crate::store::bloom`]; this file is argument grammar, key lookup
//! rules and reply shapes. Two parsing quirks are reproduced on purpose because client code may
//! depend on them: BF.RESERVE finds `NONSCALING`/`EXPANSION` by scanning *every* argument (the key
//! and the numbers included), and BF.INSERT recognises its options by their first letter or two.
//! Another: BF.EXISTS / BF.MEXISTS answer false on a key of another type instead of WRONGTYPE (redis-rs
//! tells RedisBloom from valkey-bloom by it).

use std::cell::Cell;
use std::io::Write;

use bytes::Bytes;

use super::CmdResult;
use super::{cmd, flags::*, CommandSpec, Ctx};
use crate::error::{self, CmdError};
use crate::numeric::int::Decimal;
use crate::numeric::{parse_f64, parse_i64};
use crate::protocol::Reply;
use crate::store::bloom::{AddError, ChunkError, CreateError, ScalingBloom};
use crate::store::db::{
    ItemHash, ReadView, SharedDb, SharedSlot, SharedVacancy, TypedLookup, WriteConfig,
};
use crate::store::{Db, Value};

// ---------------------------------------------------------------------------------------------
// Error texts (bloom.md §5). "no ERR" ones are sent exactly so, RedisBloom's own spelling.
// ---------------------------------------------------------------------------------------------

/// BF.RESERVE: the error rate is not a number.
pub const BAD_ERROR_RATE: &str = "ERR bad error rate";
/// BF.RESERVE: the error rate is outside (0, 1).
pub const ERROR_RATE_RANGE: &str = "ERR error rate must be in the range (0.000000, 1.000000)";
/// BF.RESERVE: the capacity is not an integer.
pub const BAD_CAPACITY: &str = "ERR bad capacity";
/// BF.RESERVE: the capacity is outside [1, 2^30].
pub const CAPACITY_RANGE: &str = "ERR capacity must be in the range [1, 1073741824]";
/// BF.RESERVE: `EXPANSION` is the last argument.
pub const NO_EXPANSION: &str = "ERR no expansion";
/// BF.RESERVE: the expansion is not an integer.
pub const BAD_EXPANSION: &str = "ERR bad expansion";
/// BF.RESERVE: a non-zero `EXPANSION` together with `NONSCALING` (no ERR).
pub const NONSCALING_CANNOT_EXPAND: &str = "Nonscaling filters cannot expand";
/// BF.RESERVE: the expansion is outside [0, 32768].
pub const EXPANSION_RANGE: &str = "ERR expansion must be in the range [0, 32768]";
/// BF.RESERVE on a key that already holds a filter.
pub const ITEM_EXISTS: &str = "ERR item exists";
/// BF.INFO, BF.DEBUG, BF.SCANDUMP, BF.INSERT NOCREATE, BF.LOADCHUNK (iterator ≠ 1) on a missing key.
pub const NOT_FOUND: &str = "ERR not found";
/// BF.ADD / BF.MADD / BF.INSERT: the non-scaling filter's only link is at capacity.
pub const FILTER_FULL: &str = "ERR non scaling filter is full";
/// BF.ADD / BF.MADD / BF.INSERT: a new link could not be built.
pub const INSERT_PROBLEM: &str = "ERR problem inserting into filter";
/// Creation: the bit array cannot be allocated (current line; 2.6 said "could not create filter").
pub const INSUFFICIENT_MEMORY: &str = "ERR Insufficient memory to create filter";
/// Creation: any other failure.
pub const COULD_NOT_CREATE: &str = "ERR could not create filter";
/// BF.INSERT: a token that is no option (no ERR).
pub const UNKNOWN_ARGUMENT: &str = "Unknown argument received";
/// BF.INSERT: a bad `ERROR` value, unparsable or out of range (no ERR).
pub const INSERT_BAD_ERROR_RATE: &str = "Bad error rate";
/// BF.INSERT: a bad `CAPACITY` value (no ERR).
pub const INSERT_BAD_CAPACITY: &str = "Bad capacity";
/// BF.INSERT: a bad `EXPANSION` value (no ERR).
pub const INSERT_BAD_EXPANSION: &str = "Bad expansion";
/// BF.INFO: an unknown field name (no ERR).
pub const INVALID_INFO: &str = "Invalid information value";
/// BF.SCANDUMP: the iterator is not an integer (no ERR).
pub const SCANDUMP_NOT_NUMERIC: &str = "Second argument must be numeric";
/// BF.LOADCHUNK: the iterator is not an integer (with ERR, unlike SCANDUMP).
pub const LOADCHUNK_NOT_NUMERIC: &str = "ERR Second argument must be numeric";
/// BF.LOADCHUNK: an invalid header, or an iterator inconsistent with the data length.
pub const BAD_DATA: &str = "ERR received bad data";
/// BF.LOADCHUNK: the chunk's start is not inside any link.
pub const NO_LINK: &str = "ERR invalid offset - no link found";
/// BF.LOADCHUNK: the chunk runs past the end of its link.
pub const CHUNK_TOO_BIG: &str = "ERR invalid chunk - Too big for current filter";

// Limits (current line) live in `crate::limits`: the bf-* config settings apply the same bounds.
pub use crate::limits::BF_MAX_EXPANSION as MAX_EXPANSION;
pub use crate::limits::{BF_MAX_CAPACITY as MAX_CAPACITY, BF_MAX_ERROR_RATE as MAX_ERROR_RATE};

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("bf.reserve", -4, WRITE | DENYOOM | MODULE, 1, 1, 1, "module", "1.0.0", "Creates a new Bloom Filter.", reserve),
    cmd("bf.add", 3, WRITE | DENYOOM | MODULE, 1, 1, 1, "module", "1.0.0", "Adds an item to a Bloom Filter.", add).shared_write(add_shared),
    cmd("bf.madd", -3, WRITE | DENYOOM | MODULE, 1, 1, 1, "module", "1.0.0", "Adds one or more items to a Bloom Filter. A filter will be created if it does not exist.", madd).shared_write(madd_shared),
    cmd("bf.insert", -4, WRITE | DENYOOM | MODULE, 1, 1, 1, "module", "1.0.0", "Adds one or more items to a Bloom Filter. A filter will be created if it does not exist.", insert),
    cmd("bf.exists", 3, READONLY | FAST | MODULE, 1, 1, 1, "module", "1.0.0", "Checks whether an item exists in a Bloom Filter.", exists).shared_read(exists_shared),
    cmd("bf.mexists", -3, READONLY | FAST | MODULE, 1, 1, 1, "module", "1.0.0", "Checks whether one or more items exist in a Bloom Filter.", mexists).shared_read(mexists_shared),
    cmd("bf.info", -2, READONLY | FAST | MODULE, 1, 1, 1, "module", "1.0.0", "Returns information about a Bloom Filter.", info),
    cmd("bf.card", 2, READONLY | FAST | MODULE, 1, 1, 1, "module", "2.4.4", "Returns the cardinality of a Bloom filter.", card),
    cmd("bf.debug", 2, READONLY | FAST | MODULE, 1, 1, 1, "module", "1.0.0", "Shows the layout of a Bloom filter's sub-filters.", debug),
    cmd("bf.scandump", 3, READONLY | FAST | MODULE, 1, 1, 1, "module", "1.0.0", "Begins an incremental save of the bloom filter.", scandump),
    cmd("bf.loadchunk", 4, WRITE | DENYOOM | MODULE, 1, 1, 1, "module", "1.0.0", "Restores a filter previously saved using SCANDUMP.", loadchunk),
];

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// What a key holds, from a Bloom command's point of view (bloom.md §2).
enum KeyState {
    Bloom,
    Missing,
    WrongType,
}

/// The key's state for a command that writes it: a miss raises no `keymiss` event, as RedisBloom
/// opens such keys READ|WRITE (`lookupKeyWrite`); read-only opens (BF.EXISTS, BF.INFO...) use
/// `Db::lookup`, which does.
fn key_state(db: &mut Db, key: &[u8]) -> KeyState {
    match db.lookup_quiet(key) {
        None => KeyState::Missing,
        Some(Value::Bloom(_)) => KeyState::Bloom,
        Some(_) => KeyState::WrongType,
    }
}

fn wrongtype() -> CmdError {
    CmdError::Static(error::WRONGTYPE)
}

/// The filter under `key` for reading; `Ok(None)` when the key is missing.
fn read_bloom<'a>(db: &'a mut Db, key: &[u8]) -> Result<Option<&'a ScalingBloom>, CmdError> {
    match db.lookup(key) {
        None => Ok(None),
        Some(Value::Bloom(b)) => Ok(Some(b)),
        Some(_) => Err(wrongtype()),
    }
}

/// The filter under `key` for writing (the key must hold one).
fn bloom_mut<'a>(db: &'a mut Db, key: &[u8]) -> Result<&'a mut ScalingBloom, CmdError> {
    match db.lookup_mut(key) {
        Some(Value::Bloom(b)) => Ok(b),
        _ => Err(wrongtype()),
    }
}

fn create_error(e: CreateError) -> CmdError {
    match e {
        CreateError::OutOfMemory => CmdError::Static(INSUFFICIENT_MEMORY),
        CreateError::Invalid => CmdError::Static(COULD_NOT_CREATE),
    }
}

fn add_error(e: AddError) -> CmdError {
    match e {
        AddError::Full => CmdError::Static(FILTER_FULL),
        AddError::Failed => CmdError::Static(INSERT_PROBLEM),
    }
}

/// The defaults for auto-created filters: (error rate, capacity, expansion).
fn defaults(ctx: &Ctx) -> (f64, u64, u32) {
    let c = ctx.config();
    (
        c.bf_error_rate,
        c.bf_initial_size as u64,
        c.bf_expansion_factor as u32,
    )
}

/// Creates a filter with the given options (non-scaling when asked or when the expansion is 0).
/// `max` is `maxmemory`: a filter whose reservation does not fit is refused with the OOM error.
fn new_filter(
    max: u64,
    capacity: u64,
    rate: f64,
    expansion: u32,
    nonscaling: bool,
) -> Result<Value, CmdError> {
    let v = ScalingBloom::create(capacity, rate, expansion, nonscaling || expansion == 0)
        .map(|b| Value::Bloom(Box::new(b)))
        .map_err(create_error)?;
    super::reservation_fits(max)?;
    Ok(v)
}

/// Adds `items` in order, as BF.MADD / BF.INSERT do: an error becomes the last element.
fn add_all(bf: &mut ScalingBloom, items: &[Bytes]) -> Reply {
    if items.len() <= 64 {
        // The common case, answered as a bit set (`Reply::Bools`); an error, rare, takes the array.
        let (mut bits, mut len) = (0u64, 0u8);
        let err = bf.add_each(items, |new| {
            bits |= (new as u64) << len;
            len += 1;
        });
        return match err {
            None => Reply::Bools { bits, len },
            Some(e) => {
                let mut out: Vec<Reply> =
                    (0..len).map(|i| Reply::Bool(bits >> i & 1 != 0)).collect();
                out.push(Reply::Error(add_error(e)));
                Reply::Array(out)
            }
        };
    }
    let mut out: Vec<Reply> = Vec::with_capacity(items.len());
    if let Some(e) = bf.add_each(items, |new| out.push(Reply::Bool(new))) {
        out.push(Reply::Error(add_error(e)));
    }
    Reply::Array(out)
}

/// Runs `f` on the filter under `key`, created with the configured defaults when missing: the
/// BF.ADD / BF.MADD path, one probe of the key table when the filter exists (issue 15).
fn with_default_filter<R>(
    ctx: &mut Ctx,
    key: &Bytes,
    f: impl FnOnce(&mut ScalingBloom) -> R,
) -> Result<R, CmdError> {
    match ctx
        .db()
        .lookup_mut_typed(key, |v| matches!(v, Value::Bloom(_)))
    {
        TypedLookup::Hit(Value::Bloom(bf)) => return Ok(f(bf)),
        TypedLookup::Hit(_) | TypedLookup::OtherType => return Err(wrongtype()),
        TypedLookup::Missing => {}
    }
    let (rate, capacity, expansion) = defaults(ctx);
    let v = new_filter(ctx.maxmemory(), capacity, rate, expansion, false)?;
    ctx.db().insert(key.clone(), v);
    propagate_created(ctx, key, rate, capacity, expansion, false);
    Ok(f(bloom_mut(ctx.db(), key)?))
}

/// A filter an add command created is propagated as an explicit `BF.RESERVE` with the parameters
/// used (before the command itself), so a replay builds the same filter whatever the loader's
/// `bf-*` defaults (see `engine::propagate`).
fn propagate_created(
    ctx: &mut Ctx,
    key: &Bytes,
    rate: f64,
    capacity: u64,
    expansion: u32,
    nonscaling: bool,
) {
    if !ctx.propagating() {
        return;
    }
    let db = ctx.client.db;
    with_reserve_argv(key, rate, capacity, expansion, nonscaling, |argv| {
        ctx.also_propagate(db, argv)
    });
}

/// `f` on the arguments of the `BF.RESERVE` that recreates a filter made with these parameters
/// ([`propagate_created`]; the shared path encodes it, [`create_shared`]).
fn with_reserve_argv<R>(
    key: &[u8],
    rate: f64,
    capacity: u64,
    expansion: u32,
    nonscaling: bool,
    f: impl FnOnce(&[&[u8]]) -> R,
) -> R {
    // On the stack: an auto-creating add on a new key per request spent ~1,000 instructions
    // here on five allocations and the float formatting.
    let mut rate_buf = [0u8; 32];
    let rate_len = shortest_f64(rate, &mut rate_buf);
    let capacity = Decimal::of_u64(capacity);
    let expansion_text = Decimal::of_u64(u64::from(expansion));
    let scaling = !(nonscaling || expansion == 0);
    let argv: [&[u8]; 6] = [
        b"BF.RESERVE",
        key,
        &rate_buf[..rate_len],
        capacity.as_bytes(),
        if scaling { b"EXPANSION" } else { b"NONSCALING" },
        expansion_text.as_bytes(),
    ];
    f(&argv[..if scaling { 6 } else { 5 }])
}

/// On the shared path, a filter for a missing key, made from the configured defaults, with `f`
/// run on it before it is added (`SharedDb::write_or_vacant`); answers `f`'s result and the
/// parameters, for the `BF.RESERVE` that precedes the command in the write stream, as the
/// exclusive path propagates it ([`with_default_filter`]). `None` (nothing changed) when the
/// defaults cannot make a filter, its reservation does not fit under `max` (`maxmemory`: the
/// exclusive path then answers the OOM error) or `f` answers `None`.
fn create_shared<R>(
    vacancy: SharedVacancy,
    defaults: Option<&WriteConfig>,
    max: u64,
    f: impl FnOnce(&mut ScalingBloom) -> Option<R>,
) -> Option<(R, (f64, u64, u32))> {
    let (rate, capacity, expansion) = defaults?.bloom();
    let mut value = new_filter(max, capacity, rate, expansion, false).ok()?;
    let Value::Bloom(bf) = &mut value else {
        return None;
    };
    let r = f(bf)?;
    vacancy.insert(value);
    Some((r, (rate, capacity, expansion)))
}

/// Writes `rate` into `buf` in Rust's shortest round-trip form (strtod reads back the very same
/// double) and returns its length. The last rate is remembered per thread: auto-created filters
/// all take the configured default, and the float formatting costs ~700 instructions.
fn shortest_f64(rate: f64, buf: &mut [u8; 32]) -> usize {
    type Last = Option<(u64, [u8; 32], usize)>;
    thread_local!(static LAST: Cell<Last> = const { Cell::new(None) });
    if let Some((bits, text, len)) = LAST.get() {
        if bits == rate.to_bits() {
            *buf = text;
            return len;
        }
    }
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    // 32 bytes hold any f64's shortest form (at most 24 characters, as in -2.2250738585072014e-308).
    let written = write!(cursor, "{rate:?}");
    debug_assert!(written.is_ok(), "{rate:?} does not fit 32 bytes");
    let len = cursor.position() as usize;
    LAST.set(Some((rate.to_bits(), *buf, len)));
    len
}

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

/// `BF.RESERVE key error_rate capacity [EXPANSION expansion] [NONSCALING]` → `+OK`.
fn reserve(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() > 7 {
        return Err(CmdError::arity("bf.reserve"));
    }
    let mut rate = parse_f64(&argv[2]).ok_or(CmdError::Static(BAD_ERROR_RATE))?;
    if !(rate > 0.0 && rate < 1.0) {
        return Err(CmdError::Static(ERROR_RATE_RANGE));
    }
    rate = rate.min(MAX_ERROR_RATE);
    let capacity = parse_i64(&argv[3]).ok_or(CmdError::Static(BAD_CAPACITY))?;
    if !(1..=MAX_CAPACITY).contains(&capacity) {
        return Err(CmdError::Static(CAPACITY_RANGE));
    }
    // Quirk: the keywords are looked for among *all* arguments, the first match counting.
    let find = |word: &str| {
        argv.iter()
            .position(|a| a.eq_ignore_ascii_case(word.as_bytes()))
    };
    let mut nonscaling = find("NONSCALING").is_some();
    let mut expansion = ctx.config().bf_expansion_factor;
    if let Some(at) = find("EXPANSION") {
        let value = argv.get(at + 1).ok_or(CmdError::Static(NO_EXPANSION))?;
        let v = parse_i64(value).ok_or(CmdError::Static(BAD_EXPANSION))?;
        if v == 0 {
            nonscaling = true;
        } else if nonscaling {
            return Err(CmdError::Static(NONSCALING_CANNOT_EXPAND));
        }
        if !(0..=MAX_EXPANSION).contains(&v) {
            return Err(CmdError::Static(EXPANSION_RANGE));
        }
        expansion = v;
    }
    let key = &argv[1];
    match key_state(ctx.db(), key) {
        KeyState::Bloom => return Err(CmdError::Static(ITEM_EXISTS)),
        KeyState::WrongType => return Err(wrongtype()),
        KeyState::Missing => {}
    }
    let v = new_filter(
        ctx.maxmemory(),
        capacity as u64,
        rate,
        expansion as u32,
        nonscaling,
    )?;
    ctx.db().insert(key.clone(), v);
    ctx.force_propagation();
    Ok(Reply::ok())
}

/// `BF.ADD key item` → 1 if the item was new, 0 if it (or a false positive) was there.
fn add(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let added = with_default_filter(ctx, &argv[1], |bf| bf.add(&argv[2]))?;
    // RedisBloom replicates once it reached the items, even when the add failed.
    ctx.force_propagation();
    added.map(Reply::Bool).map_err(add_error)
}

/// BF.ADD under the shared lock (`shared_path`): an existing filter, in place, a new link
/// included, or a new filter where a key can be added there ([`on_shared_filter`]). Another
/// type, or an add that fails (a full non-scaling filter; a link that cannot be had), which
/// changes nothing: the exclusive path.
fn add_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    let added = on_shared_filter(db, &argv[1], |bf| bf.add(&argv[2]).ok());
    Ok(added.map_or(Reply::Null, Reply::Bool))
}

/// On the shared path, `f` on the filter under `key`, in place, or on a new one made from the
/// defaults where a key can be added there ([`create_shared`], whose `BF.RESERVE` is recorded to
/// precede the command), counting the writes as the exclusive path does (the key added is one
/// of its own, as in `Db::insert`). `f` answers `None` to leave the filter unchanged; then, as
/// for another type, the command is deferred and `None` answered.
fn on_shared_filter<R>(
    db: &mut SharedDb,
    key: &[u8],
    f: impl FnOnce(&mut ScalingBloom) -> Option<R>,
) -> Option<R> {
    let (defaults, max) = (db.write_config, db.maxmemory);
    let done = match db.write_or_vacant(key) {
        None => None,
        Some(SharedSlot::Live(e)) => match e.value {
            Value::Bloom(bf) => f(bf),
            _ => None,
        },
        Some(SharedSlot::Vacant(v)) => {
            create_shared(v, defaults, max, f).map(|(r, (rate, capacity, expansion))| {
                db.propagate_before(|out| {
                    with_reserve_argv(key, rate, capacity, expansion, false, |argv| {
                        crate::engine::propagate::encode_command(out, argv)
                    })
                });
                db.wrote();
                r
            })
        }
    };
    match done {
        Some(r) => {
            db.wrote();
            Some(r)
        }
        None => {
            db.defer();
            None
        }
    }
}

/// `BF.MADD key item [item ...]` → an array of 1/0, cut short by an error element.
fn madd(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let reply = with_default_filter(ctx, &argv[1], |bf| add_all(bf, &argv[2..]))?;
    ctx.force_propagation();
    Ok(reply)
}

/// BF.MADD under the shared lock (`shared_path`): an existing filter whose newest link has room
/// for every item, in place, or a new one with room for them where a key can be added there
/// ([`on_shared_filter`]). Then no add can fail, so the reply is the exclusive path's and holds
/// no error element (those are counted in the error statistics, which only the exclusive path
/// writes). Another type, or items that may open a link: the exclusive path, before anything
/// changed.
fn madd_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    let items = &argv[2..];
    let reply = on_shared_filter(db, &argv[1], |bf| {
        // Room for every item: no add can fail, no link opens.
        (bf.room_in_newest() >= items.len() as u64).then(|| add_all(bf, items))
    });
    Ok(reply.unwrap_or(Reply::Null))
}

/// `BF.EXISTS key item` → 1 or 0; a missing or wrong-type key answers 0.
fn exists(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    exists_on(ctx.db(), argv)
}

fn exists_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    exists_on(db, argv)
}

fn exists_on(db: &mut impl ReadView, argv: &[Bytes]) -> CmdResult {
    let hashed = db.batch_hash(&argv[2]);
    let found = match db.read(&argv[1]) {
        Some(Value::Bloom(bf)) => match hashed {
            Some(ItemHash::Bloom { wide, a, b }) if wide == bf.hashes_wide() => {
                bf.exists_prefetched(a, b)
            }
            _ => bf.exists(&argv[2]),
        },
        _ => false,
    };
    Ok(Reply::Bool(found))
}

/// `BF.MEXISTS key item [item ...]` → an array of 1/0.
fn mexists(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    mexists_on(ctx.db(), argv)
}

fn mexists_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    mexists_on(db, argv)
}

fn mexists_on(db: &mut impl ReadView, argv: &[Bytes]) -> CmdResult {
    let items = &argv[2..];
    let out = match db.read(&argv[1]) {
        Some(Value::Bloom(bf)) => Reply::bools(bf.exists_all(items).into_iter()),
        _ => Reply::bools((0..items.len()).map(|_| false)),
    };
    Ok(out)
}

/// `BF.INSERT key [CAPACITY cap] [ERROR rate] [EXPANSION exp] [NOCREATE] [NONSCALING] ITEMS item ...`
/// → an array like BF.MADD's.
fn insert(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let arity = || CmdError::arity("bf.insert");
    let (mut rate, mut capacity, mut expansion) = defaults(ctx);
    let mut nocreate = false;
    let mut nonscaling = false;
    let mut items_at = None;
    // Quirk: options are told apart by their first letter (and a second or third one).
    let letter = |tok: &[u8], i: usize| tok.get(i).map(|c| c.to_ascii_lowercase());
    let mut i = 2;
    while i < argv.len() {
        let tok = &argv[i][..];
        match letter(tok, 0) {
            Some(b'i') => {
                items_at = Some(i + 1);
                break;
            }
            Some(b'e') => {
                let value = argv.get(i + 1).ok_or_else(arity)?;
                if letter(tok, 1) == Some(b'r') {
                    let r = parse_f64(value)
                        .filter(|r| *r > 0.0 && *r < 1.0)
                        .ok_or(CmdError::Static(INSERT_BAD_ERROR_RATE))?;
                    rate = r.min(MAX_ERROR_RATE);
                } else {
                    let e = parse_i64(value)
                        .filter(|e| (0..=MAX_EXPANSION).contains(e))
                        .ok_or(CmdError::Static(INSERT_BAD_EXPANSION))?;
                    expansion = e as u32;
                }
                i += 2;
            }
            Some(b'c') => {
                let value = argv.get(i + 1).ok_or_else(arity)?;
                let c = parse_i64(value)
                    .filter(|c| (1..=MAX_CAPACITY).contains(c))
                    .ok_or(CmdError::Static(INSERT_BAD_CAPACITY))?;
                capacity = c as u64;
                i += 2;
            }
            Some(b'n') => {
                if letter(tok, 2) == Some(b'c') {
                    nocreate = true;
                } else {
                    nonscaling = true;
                }
                i += 1;
            }
            _ => return Err(CmdError::Static(UNKNOWN_ARGUMENT)),
        }
    }
    let items = match items_at {
        Some(at) if at < argv.len() => &argv[at..],
        _ => return Err(arity()),
    };
    let key = &argv[1];
    match key_state(ctx.db(), key) {
        KeyState::Bloom => {}
        KeyState::WrongType => return Err(wrongtype()),
        KeyState::Missing if nocreate => return Err(CmdError::Static(NOT_FOUND)),
        KeyState::Missing => {
            let v = new_filter(ctx.maxmemory(), capacity, rate, expansion, nonscaling)?;
            ctx.db().insert(key.clone(), v);
            propagate_created(ctx, key, rate, capacity, expansion, nonscaling);
        }
    }
    let bf = bloom_mut(ctx.db(), key)?;
    let reply = add_all(bf, items);
    ctx.force_propagation();
    Ok(reply)
}

/// `BF.INFO key [CAPACITY | SIZE | FILTERS | ITEMS | EXPANSION]` → the five figures as a map
/// (a flat array under RESP2), or one of them as a 1-entry map (a 1-element array under RESP2).
fn info(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() > 3 {
        return Err(CmdError::arity("bf.info"));
    }
    let proto = ctx.proto();
    let bf = read_bloom(ctx.db(), &argv[1])?.ok_or(CmdError::Static(NOT_FOUND))?;
    let i = bf.info();
    let expansion = match i.expansion {
        Some(g) => Reply::Int(g as i64),
        None => Reply::Null,
    };
    let fields = [
        ("CAPACITY", "Capacity", Reply::Int(i.capacity as i64)),
        ("SIZE", "Size", Reply::Int(i.size as i64)),
        ("FILTERS", "Number of filters", Reply::Int(i.filters as i64)),
        (
            "ITEMS",
            "Number of items inserted",
            Reply::Int(i.items as i64),
        ),
        ("EXPANSION", "Expansion rate", expansion),
    ];
    let Some(wanted) = argv.get(2) else {
        return Ok(Reply::Map(
            fields
                .into_iter()
                .map(|(_, name, v)| (Reply::Status(name), v))
                .collect(),
        ));
    };
    let (_, name, v) = fields
        .into_iter()
        .find(|(kw, _, _)| wanted.eq_ignore_ascii_case(kw.as_bytes()))
        .ok_or(CmdError::Static(INVALID_INFO))?;
    Ok(if proto >= 3 {
        Reply::Map(vec![(Reply::Status(name), v)])
    } else {
        Reply::Array(vec![v])
    })
}

/// `BF.CARD key` → items added; 0 for a missing key.
fn card(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let n = read_bloom(ctx.db(), &argv[1])?.map_or(0, |b| b.size());
    Ok(Reply::Int(n as i64))
}

/// `BF.DEBUG key` → `size:<n>` then one line per link, as bulk strings.
fn debug(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let bf = read_bloom(ctx.db(), &argv[1])?.ok_or(CmdError::Static(NOT_FOUND))?;
    Ok(Reply::Array(
        bf.debug_lines()
            .into_iter()
            .map(|l| Reply::Bulk(Bytes::from(l)))
            .collect(),
    ))
}

/// `BF.SCANDUMP key iterator` → `[next iterator, data]`; `[0, ""]` at the end.
fn scandump(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let bf = read_bloom(ctx.db(), &argv[1])?.ok_or(CmdError::Static(NOT_FOUND))?;
    let it = parse_i64(&argv[2]).ok_or(CmdError::Static(SCANDUMP_NOT_NUMERIC))?;
    let (next, data) = if it == 0 {
        (1, bf.header())
    } else {
        bf.scandump_chunk(it).unwrap_or((0, Vec::new()))
    };
    Ok(Reply::Array(vec![
        Reply::Int(next),
        Reply::Bulk(Bytes::from(data)),
    ]))
}

/// `BF.LOADCHUNK key iterator data` → `+OK`. Iterator 1 on a missing key is the header.
fn loadchunk(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let it = parse_i64(&argv[2]).ok_or(CmdError::Static(LOADCHUNK_NOT_NUMERIC))?;
    let key = &argv[1];
    let data = &argv[3];
    let chunk_error = |e: ChunkError| {
        CmdError::Static(match e {
            ChunkError::BadData => BAD_DATA,
            ChunkError::NoLink => NO_LINK,
            ChunkError::TooBig => CHUNK_TOO_BIG,
        })
    };
    match key_state(ctx.db(), key) {
        KeyState::WrongType => Err(wrongtype()),
        KeyState::Missing if it == 1 => {
            let bf = ScalingBloom::from_header(data).map_err(chunk_error)?;
            super::reservation_fits(ctx.maxmemory())?;
            ctx.db().insert(key.clone(), Value::Bloom(Box::new(bf)));
            ctx.force_propagation();
            Ok(Reply::ok())
        }
        KeyState::Missing => Err(CmdError::Static(NOT_FOUND)),
        KeyState::Bloom => {
            bloom_mut(ctx.db(), key)?
                .load_chunk(it, data)
                .map_err(chunk_error)?;
            ctx.force_propagation();
            Ok(Reply::ok())
        }
    }
}

// ---------------------------------------------------------------------------------------------
// INFO figures
// ---------------------------------------------------------------------------------------------

/// Totals over every Bloom key of every database, for an INFO section.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct BloomTotals {
    /// Number of Bloom keys.
    pub filters: u64,
    /// Σ items inserted (BF.CARD).
    pub items: u64,
    /// Σ BF.INFO `Size` (RedisBloom's accounting).
    pub bytes: u64,
    /// Σ bytes actually resident in this process (structs, page tables, written pages).
    pub resident_bytes: u64,
}

/// Walks the keyspace once (INFO is not a hot path; Redis's own INFO keyspace is also a walk).
pub fn totals(store: &crate::store::Store) -> BloomTotals {
    let mut t = BloomTotals::default();
    for db in &store.dbs {
        for (_, v) in db.iter() {
            if let Value::Bloom(bf) = v {
                t.filters += 1;
                t.items = t.items.saturating_add(bf.size());
                t.bytes = t.bytes.saturating_add(bf.memory_usage());
                t.resident_bytes = t.resident_bytes.saturating_add(bf.resident_bytes());
            }
        }
    }
    t
}

/// The INFO section with those totals, in INFO's `name:value\r\n` form.
pub fn info_section(store: &crate::store::Store) -> String {
    let t = totals(store);
    format!(
        "# Bloom\r\nbf_filters:{}\r\nbf_items_inserted:{}\r\nbf_memory_bytes:{}\r\nbf_resident_bytes:{}\r\n",
        t.filters, t.items, t.bytes, t.resident_bytes
    )
}
