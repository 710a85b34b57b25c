//! Cuckoo filter commands: `CF.*`, with RedisBloom's grammar, reply shapes and error texts.
//!
//! The filter itself lives in [`crate::store::cuckoo`]; this file only parses arguments, finds keys
//! and shapes replies (cuckoo.md §4). RedisBloom's quirks reproduced here, each noted where it happens:
//! RESERVE's whole-argument keyword scan and odd-argc rule, INSERT's first-letter options, EXISTS /
//! COUNT answering 0 on a wrong-type key, DEL and COMPACT answering their own "not found" texts, the
//! once-per-command max-expansions check, and the RESP3 typing (booleans for ADD, EXISTS, DEL and
//! INSERT; integers for INSERTNX and COUNT).

use bytes::Bytes;

use super::CmdResult;
use super::{cmd, flags::*, CommandSpec, Ctx};
use crate::error::{self, CmdError};
use crate::numeric::int::Decimal;
use crate::numeric::parse_i64;
use crate::protocol::Reply;
use crate::store::cuckoo::{
    CreateError, CuckooFilter, CuckooHeader, DumpChunk, Hashed, InsertOutcome, HEADER_LEN,
};
use crate::store::db::{ItemHash, ReadView, SharedDb, SharedSlot, TypedLookup};
use crate::store::{Db, Value};

// ---------------------------------------------------------------------------------------------
// Error texts (cuckoo.md §6). "no ERR" = sent without the ERR prefix, as RedisBloom does.
// ---------------------------------------------------------------------------------------------

/// CF.RESERVE / CF.INSERT: capacity not an integer (no ERR).
pub const BAD_CAPACITY: &str = "Bad capacity";
/// CF.RESERVE: MAXITERATIONS value missing or not an integer (no ERR).
pub const PARSE_MAXITERATIONS: &str = "Couldn't parse MAXITERATIONS";
/// CF.RESERVE: MAXITERATIONS out of range (no ERR).
pub const RANGE_MAXITERATIONS: &str = "MAXITERATIONS: value must be in the range [1, 65535]";
/// CF.RESERVE: BUCKETSIZE value missing or not an integer (no ERR).
pub const PARSE_BUCKETSIZE: &str = "Couldn't parse BUCKETSIZE";
/// CF.RESERVE: BUCKETSIZE out of range (no ERR).
pub const RANGE_BUCKETSIZE: &str = "BUCKETSIZE: value must be in the range [1, 255]";
/// CF.RESERVE: EXPANSION value missing or not an integer (no ERR).
pub const PARSE_EXPANSION: &str = "Couldn't parse EXPANSION";
/// CF.RESERVE: EXPANSION out of range (no ERR).
pub const RANGE_EXPANSION: &str = "EXPANSION: value must be in the range [0, 32768]";
/// CF.RESERVE: capacity out of range (no ERR).
pub const RESERVE_CAPACITY_RANGE: &str =
    "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]";
/// CF.INSERT / CF.INSERTNX: CAPACITY out of range (no ERR). The config name is literal text.
pub const INSERT_CAPACITY_RANGE: &str =
    "Capacity must be in the range [cf-bucket-size * 2, 1073741824]";
/// CF.RESERVE and CF.LOADCHUNK (header) on an existing cuckoo key.
pub const ITEM_EXISTS: &str = "ERR item exists";
/// CF.RESERVE and auto-creation: the filter cannot be allocated.
pub const CREATE_NOMEM: &str = "ERR Insufficient memory to create filter";
/// CF.RESERVE and auto-creation: any other creation failure.
pub const CREATE_FAILED: &str = "ERR Could not create filter";
/// CF.INSERT / CF.INSERTNX: an option whose first letter is not c, i or n (no ERR).
pub const UNKNOWN_ARGUMENT: &str = "Unknown argument received";
/// CF.INSERT NOCREATE, CF.INFO, CF.DEBUG, CF.SCANDUMP, CF.LOADCHUNK (data) on a missing key.
pub const NOT_FOUND: &str = "ERR not found";
/// CF.DEL on a missing or wrong-type key (no ERR).
pub const DEL_NOT_FOUND: &str = "Not found";
/// CF.COMPACT on a missing or wrong-type key (no ERR).
pub const COMPACT_NOT_FOUND: &str = "Cuckoo filter was not found";
/// CF.ADD / ADDNX / INSERT / INSERTNX on a filter with `cf-max-expansions` sub-filters (no ERR).
pub const MAX_EXPANSIONS: &str = "Maximum expansions reached";
/// CF.ADD / CF.ADDNX: no room and the filter does not grow (no ERR).
pub const FILTER_FULL: &str = "Filter is full";
/// CF.ADD / CF.ADDNX: the filter had to grow and could not.
pub const INSERT_NOMEM: &str = "ERR Insufficient memory";
/// CF.SCANDUMP / CF.LOADCHUNK: bad position (no ERR).
pub const INVALID_POSITION: &str = "Invalid position";
/// CF.LOADCHUNK: a header chunk that is not 38 bytes (no ERR).
pub const INVALID_HEADER: &str = "Invalid header";
/// CF.LOADCHUNK: a header that fails validation (no ERR).
pub const HEADER_REJECTED: &str = "Couldn't create filter!";
/// CF.LOADCHUNK: a data chunk that does not fit (no ERR).
pub const CHUNK_REJECTED: &str = "Couldn't load chunk!";

/// Largest capacity RESERVE and INSERT accept.
const MAX_CAPACITY: i64 = 1 << 30;

// ---------------------------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------------------------

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("cf.reserve", -3, WRITE | DENYOOM | MODULE, 1, 1, 1, "module", "1.0.0", "Creates a new Cuckoo Filter.", reserve),
    cmd("cf.add", 3, WRITE | DENYOOM | MODULE, 1, 1, 1, "module", "1.0.0", "Adds an item to a Cuckoo Filter.", add).shared_write(add_shared),
    cmd("cf.addnx", 3, WRITE | DENYOOM | MODULE, 1, 1, 1, "module", "1.0.0", "Adds an item to a Cuckoo Filter if the item did not exist previously.", addnx),
    cmd("cf.insert", -4, WRITE | DENYOOM | MODULE, 1, 1, 1, "module", "1.0.0", "Adds one or more items to a Cuckoo Filter. A filter will be created if it does not exist.", insert),
    cmd("cf.insertnx", -4, WRITE | DENYOOM | MODULE, 1, 1, 1, "module", "1.0.0", "Adds one or more items to a Cuckoo Filter if the items did not exist previously. A filter will be created if it does not exist.", insertnx),
    cmd("cf.exists", 3, READONLY | FAST | MODULE, 1, 1, 1, "module", "1.0.0", "Checks whether one or more items exist in a Cuckoo Filter.", exists).shared_read(exists_shared),
    cmd("cf.mexists", -3, READONLY | FAST | MODULE, 1, 1, 1, "module", "1.0.0", "Checks whether one or more items exist in a Cuckoo Filter.", mexists).shared_read(mexists_shared),
    cmd("cf.count", 3, READONLY | FAST | MODULE, 1, 1, 1, "module", "1.0.0", "Return the number of times an item might be in a Cuckoo Filter.", count).shared_read(count_shared),
    cmd("cf.del", 3, WRITE | FAST | MODULE, 1, 1, 1, "module", "1.0.0", "Deletes an item from a Cuckoo Filter.", del),
    // RedisBloom declares no arity and registers COMPACT read-only although it rewrites the filter;
    // the handler checks argc, and the key is opened for writing so persistence counts the change.
    cmd("cf.compact", -1, READONLY | FAST | MODULE, 1, 1, 1, "module", "1.0.0", "Compacts a Cuckoo Filter.", compact),
    cmd("cf.scandump", 3, READONLY | FAST | MODULE, 1, 1, 1, "module", "1.0.0", "Begins an incremental save of the bloom filter.", scandump),
    cmd("cf.loadchunk", 4, WRITE | DENYOOM | MODULE, 1, 1, 1, "module", "1.0.0", "Restores a filter previously saved using SCANDUMP.", loadchunk),
    cmd("cf.info", 2, READONLY | FAST | MODULE, 1, 1, 1, "module", "1.0.0", "Returns information about a Cuckoo Filter.", info),
    cmd("cf.debug", 2, READONLY | FAST | MODULE, 1, 1, 1, "module", "1.0.0", "Returns the internal state of a Cuckoo Filter (RedisBloom debug aid).", debug),
];

// ---------------------------------------------------------------------------------------------
// Key access
// ---------------------------------------------------------------------------------------------

/// What a key holds, as the CF commands sort it.
enum Lookup {
    Missing,
    WrongType,
    Cuckoo,
}

/// For commands that open the key READ|WRITE: a miss raises no `keymiss` (see bloom.rs).
fn classify(db: &mut Db, key: &[u8]) -> Lookup {
    match db.lookup_quiet(key) {
        None => Lookup::Missing,
        Some(Value::Cuckoo(_)) => Lookup::Cuckoo,
        Some(_) => Lookup::WrongType,
    }
}

/// The filter for reading, if the key holds one.
fn read<'a>(db: &'a mut impl ReadView, key: &[u8]) -> Option<&'a CuckooFilter> {
    match db.read(key) {
        Some(Value::Cuckoo(cf)) => Some(cf),
        _ => None,
    }
}

/// The filter for writing, in one probe of the table: a wrong-type key is not marked modified
/// ([`Db::lookup_mut_typed`]; the read lookup, then the write lookup's two probes, were three).
fn write<'a>(db: &'a mut Db, key: &[u8]) -> Option<&'a mut CuckooFilter> {
    match db.lookup_mut_typed(key, |v| matches!(v, Value::Cuckoo(_))) {
        TypedLookup::Hit(Value::Cuckoo(cf)) => Some(cf),
        _ => None,
    }
}

/// The defaults auto-created filters take from the configuration.
struct Defaults {
    bucket_size: u16,
    initial_size: u64,
    max_iterations: u16,
    expansion: u16,
    max_expansions: u32,
    /// `maxmemory`, for the reservation check.
    maxmemory: u64,
}

fn defaults(ctx: &Ctx) -> Defaults {
    let c = ctx.config();
    Defaults {
        bucket_size: c.cf_bucket_size,
        initial_size: c.cf_initial_size,
        max_iterations: c.cf_max_iterations,
        expansion: c.cf_expansion_factor,
        max_expansions: c.cf_max_expansions,
        maxmemory: ctx.maxmemory(),
    }
}

/// `max` is `maxmemory`: a filter whose reservation does not fit is refused with the OOM error.
fn create(
    max: u64,
    capacity: u64,
    bucket_size: u16,
    max_iter: u16,
    exp: u16,
) -> Result<Value, CmdError> {
    let v = match CuckooFilter::new(capacity, bucket_size, max_iter, exp) {
        Ok(cf) => Value::Cuckoo(Box::new(cf)),
        Err(CreateError::Alloc) => return Err(CmdError::Static(CREATE_NOMEM)),
        Err(CreateError::Invalid) => return Err(CmdError::Static(CREATE_FAILED)),
    };
    super::reservation_fits(max)?;
    Ok(v)
}

/// `f` on the arguments of the `CF.RESERVE` that recreates a filter made with these parameters
/// ([`filter_for_insert`]; the shared path encodes it, [`add_shared`]).
fn with_reserve_argv<R>(
    key: &[u8],
    capacity: u64,
    bucket_size: u16,
    max_iterations: u16,
    expansion: u16,
    f: impl FnOnce(&[&[u8]]) -> R,
) -> R {
    let (cap, bucket, iters, expansion) = (
        Decimal::of_u64(capacity),
        Decimal::of_u64(u64::from(bucket_size)),
        Decimal::of_u64(u64::from(max_iterations)),
        Decimal::of_u64(u64::from(expansion)),
    );
    f(&[
        b"CF.RESERVE" as &[u8],
        key,
        cap.as_bytes(),
        b"BUCKETSIZE",
        bucket.as_bytes(),
        b"MAXITERATIONS",
        iters.as_bytes(),
        b"EXPANSION",
        expansion.as_bytes(),
    ])
}

/// The filter under `key` for an insert command, created from `capacity` and the configured defaults
/// when missing (unless `nocreate`), and refused once it has `cf-max-expansions` sub-filters.
/// A filter it creates is propagated as an explicit `CF.RESERVE` with the parameters used, so a
/// replay builds the same filter whatever the loader's defaults (see `engine::propagate`).
fn filter_for_insert<'a>(
    ctx: &'a mut Ctx,
    key: &Bytes,
    d: &Defaults,
    capacity: u64,
    nocreate: bool,
) -> Result<&'a mut CuckooFilter, CmdError> {
    match classify(ctx.db(), key) {
        Lookup::WrongType => return Err(CmdError::Static(error::WRONGTYPE)),
        Lookup::Missing if nocreate => return Err(CmdError::Static(NOT_FOUND)),
        Lookup::Missing => {
            let v = create(
                d.maxmemory,
                capacity,
                d.bucket_size,
                d.max_iterations,
                d.expansion,
            )?;
            ctx.db().insert(key.clone(), v);
            if ctx.propagating() {
                let dbi = ctx.client.db;
                let (bucket, iters, exp) = (d.bucket_size, d.max_iterations, d.expansion);
                with_reserve_argv(key, capacity, bucket, iters, exp, |argv| {
                    ctx.also_propagate(dbi, argv)
                });
            }
        }
        Lookup::Cuckoo => {}
    }
    let cf = write(ctx.db(), key).ok_or(CmdError::Static(error::WRONGTYPE))?;
    // Checked once, before any item: one INSERT can grow past the limit (cuckoo.md §4.3).
    if cf.num_filters() as u64 >= d.max_expansions as u64 {
        return Err(CmdError::Static(MAX_EXPANSIONS));
    }
    Ok(cf)
}

// ---------------------------------------------------------------------------------------------
// CF.RESERVE
// ---------------------------------------------------------------------------------------------

/// Value of the first argument (command name and key included) equal to `keyword`, ignoring case.
/// `Some(None)`: the keyword is the last argument. `None`: not present.
fn keyword_value<'a>(argv: &'a [Bytes], keyword: &str) -> Option<Option<&'a Bytes>> {
    let at = argv
        .iter()
        .position(|a| a.eq_ignore_ascii_case(keyword.as_bytes()))?;
    Some(argv.get(at + 1))
}

/// One RESERVE option: `default` when absent, else an integer within `[min, max]`.
fn reserve_option(
    argv: &[Bytes],
    keyword: &str,
    default: i64,
    (min, max): (i64, i64),
    parse_err: &'static str,
    range_err: &'static str,
) -> Result<i64, CmdError> {
    match keyword_value(argv, keyword) {
        None => Ok(default),
        Some(v) => {
            let n = v
                .and_then(|v| parse_i64(v))
                .ok_or(CmdError::Static(parse_err))?;
            if n < min || n > max {
                return Err(CmdError::Static(range_err));
            }
            Ok(n)
        }
    }
}

/// `CF.RESERVE key capacity [BUCKETSIZE b] [MAXITERATIONS m] [EXPANSION e]` → `+OK`.
fn reserve(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() < 3 || argv.len().is_multiple_of(2) {
        return Err(CmdError::arity("cf.reserve"));
    }
    let capacity = parse_i64(&argv[2]).ok_or(CmdError::Static(BAD_CAPACITY))?;
    let d = defaults(ctx);
    // Located anywhere in argv, first match wins, unknown tokens ignored (cuckoo.md §4.1).
    let max_iter = reserve_option(
        argv,
        "MAXITERATIONS",
        d.max_iterations as i64,
        (1, 65535),
        PARSE_MAXITERATIONS,
        RANGE_MAXITERATIONS,
    )?;
    let bucket_size = reserve_option(
        argv,
        "BUCKETSIZE",
        d.bucket_size as i64,
        (1, 255),
        PARSE_BUCKETSIZE,
        RANGE_BUCKETSIZE,
    )?;
    let expansion = reserve_option(
        argv,
        "EXPANSION",
        d.expansion as i64,
        (0, 32768),
        PARSE_EXPANSION,
        RANGE_EXPANSION,
    )?;
    if capacity < 2 * bucket_size || capacity > MAX_CAPACITY {
        return Err(CmdError::Static(RESERVE_CAPACITY_RANGE));
    }
    let db = ctx.db();
    match classify(db, &argv[1]) {
        Lookup::Cuckoo => return Err(CmdError::Static(ITEM_EXISTS)),
        Lookup::WrongType => return Err(CmdError::Static(error::WRONGTYPE)),
        Lookup::Missing => {}
    }
    let v = create(
        d.maxmemory,
        capacity as u64,
        bucket_size as u16,
        max_iter as u16,
        expansion as u16,
    )?;
    db.insert(argv[1].clone(), v);
    ctx.force_propagation();
    Ok(Reply::ok())
}

// ---------------------------------------------------------------------------------------------
// CF.ADD, CF.ADDNX, CF.INSERT, CF.INSERTNX
// ---------------------------------------------------------------------------------------------

/// `CF.ADD key item` → `:1` / `#t`.
fn add(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    add_one(ctx, argv, false)
}

/// CF.ADD under the shared lock (`shared_path`): an existing filter below `cf-max-expansions`,
/// in place, growth included, or a new one from the `cf-*` defaults where a key can be added
/// there (`SharedDb::write_or_vacant`; its `CF.RESERVE` enters the write stream before the
/// command, as the exclusive path propagates it). Another type, the expansion limit, or an
/// insert that finds no room (the eviction walk undoes itself) or cannot grow (which changes
/// nothing): the exclusive path.
fn add_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    let Some(defaults) = db.write_config else {
        return super::shared_path::defer(db);
    };
    let (max_expansions, max) = (defaults.cf_max_expansions(), db.maxmemory);
    // A CF.ADD hashes its item whatever it finds (a missing key gets a filter).
    let h = item_hash(db.batch_hash(&argv[2]), &argv[2]);
    // Checked once, before the item, as `filter_for_insert` does.
    let insert = |cf: &mut CuckooFilter| {
        if cf.num_filters() as u64 >= u64::from(max_expansions) {
            return None;
        }
        match cf.insert_hashed(&h) {
            InsertOutcome::Inserted => Some(true),
            InsertOutcome::Exists => Some(false),
            InsertOutcome::NoSpace | InsertOutcome::AllocFailed => None,
        }
    };
    let added = match db.write_or_vacant(&argv[1]) {
        None => return Ok(Reply::Null),
        Some(SharedSlot::Live(e)) => {
            let Value::Cuckoo(cf) = e.value else {
                return super::shared_path::defer(db);
            };
            match insert(cf) {
                Some(added) => added,
                None => return super::shared_path::defer(db),
            }
        }
        Some(SharedSlot::Vacant(v)) => {
            let d = defaults.cuckoo();
            // A reservation over `maxmemory` defers: the exclusive path answers the OOM error.
            let made = create(
                max,
                d.initial_size,
                d.bucket_size,
                d.max_iterations,
                d.expansion,
            );
            let Ok(mut value) = made else {
                return super::shared_path::defer(db);
            };
            let Value::Cuckoo(cf) = &mut value else {
                return super::shared_path::defer(db);
            };
            let Some(added) = insert(cf) else {
                return super::shared_path::defer(db);
            };
            v.insert(value);
            let (cap, bucket, iters, exp) =
                (d.initial_size, d.bucket_size, d.max_iterations, d.expansion);
            db.propagate_before(|out| {
                with_reserve_argv(&argv[1], cap, bucket, iters, exp, |argv| {
                    crate::engine::propagate::encode_command(out, argv)
                })
            });
            // The key added is a write of its own, as on the exclusive path (`Db::insert`).
            db.wrote();
            added
        }
    };
    db.wrote();
    Ok(Reply::Bool(added))
}

/// `CF.ADDNX key item` → `:1` / `#t` if added, `:0` / `#f` if present.
fn addnx(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    add_one(ctx, argv, true)
}

fn add_one(ctx: &mut Ctx, argv: &[Bytes], unique: bool) -> CmdResult {
    let d = defaults(ctx);
    let cf = filter_for_insert(ctx, &argv[1], &d, d.initial_size, false)?;
    let outcome = if unique {
        cf.insert_unique(&argv[2])
    } else {
        cf.insert(&argv[2])
    };
    // RedisBloom replicates CF.ADD unless the filter was full.
    if outcome != InsertOutcome::NoSpace {
        ctx.force_propagation();
    }
    match outcome {
        InsertOutcome::Inserted => Ok(Reply::Bool(true)),
        InsertOutcome::Exists => Ok(Reply::Bool(false)),
        InsertOutcome::NoSpace => Err(CmdError::Static(FILTER_FULL)),
        InsertOutcome::AllocFailed => Err(CmdError::Static(INSERT_NOMEM)),
    }
}

/// `CF.INSERT key [CAPACITY cap] [NOCREATE] ITEMS item [item ...]` → array: `:1`/`#t` inserted,
/// `:-1`/`#f` no room.
fn insert(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    insert_many(ctx, argv, false)
}

/// `CF.INSERTNX key [CAPACITY cap] [NOCREATE] ITEMS item [item ...]` → array of `:1` inserted,
/// `:0` present, `:-1` no room (integers in both protocols).
fn insertnx(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    insert_many(ctx, argv, true)
}

fn insert_many(ctx: &mut Ctx, argv: &[Bytes], unique: bool) -> CmdResult {
    let name = if unique { "cf.insertnx" } else { "cf.insert" };
    let d = defaults(ctx);
    let mut capacity = d.initial_size;
    let mut nocreate = false;
    let mut items: &[Bytes] = &[];
    // Options are told apart by their first letter only (cuckoo.md §4.3).
    let mut i = 2;
    while i < argv.len() {
        match argv[i].first().map(u8::to_ascii_lowercase) {
            Some(b'c') => {
                let v = argv.get(i + 1).ok_or_else(|| CmdError::arity(name))?;
                let cap = parse_i64(v).ok_or(CmdError::Static(BAD_CAPACITY))?;
                if cap < 2 * d.bucket_size as i64 || cap > MAX_CAPACITY {
                    return Err(CmdError::Static(INSERT_CAPACITY_RANGE));
                }
                capacity = cap as u64;
                i += 2;
            }
            Some(b'i') => {
                items = &argv[i + 1..];
                break;
            }
            Some(b'n') => {
                nocreate = true;
                i += 1;
            }
            _ => return Err(CmdError::Static(UNKNOWN_ARGUMENT)),
        }
    }
    if items.is_empty() {
        return Err(CmdError::arity(name));
    }
    let resp3 = ctx.proto() >= 3;
    let cf = filter_for_insert(ctx, &argv[1], &d, capacity, nocreate)?;
    // Every item is tried: a full filter does not stop the command.
    let replies = items
        .iter()
        .map(|item| {
            let outcome = if unique {
                cf.insert_unique(item)
            } else {
                cf.insert(item)
            };
            match (outcome, unique, resp3) {
                (InsertOutcome::Inserted, false, true) => Reply::Bool(true),
                (_, false, true) => Reply::Bool(false),
                (InsertOutcome::Inserted, _, _) => Reply::Int(1),
                (InsertOutcome::Exists, _, _) => Reply::Int(0),
                _ => Reply::Int(-1),
            }
        })
        .collect();
    ctx.force_propagation();
    Ok(Reply::Array(replies))
}

// ---------------------------------------------------------------------------------------------
// CF.EXISTS, CF.MEXISTS, CF.COUNT, CF.DEL, CF.COMPACT
// ---------------------------------------------------------------------------------------------

/// `CF.EXISTS key item` → `:1`/`:0` (`#t`/`#f`); a missing or wrong-type key answers false.
fn exists(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    exists_on(ctx.db(), argv)
}

fn exists_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    exists_on(db, argv)
}

fn exists_on(db: &mut impl ReadView, argv: &[Bytes]) -> CmdResult {
    let hint = db.batch_hash(&argv[2]);
    let found = read(db, &argv[1]).is_some_and(|cf| cf.contains_hashed(&item_hash(hint, &argv[2])));
    Ok(Reply::Bool(found))
}

/// `item`'s hash: `hint`, the one the batch's prefetch computed, if it did
/// (`ReadView::batch_hash`; every cuckoo filter hashes alike, so it holds whatever filter the key
/// holds now). Computed only once a filter is found: a missing key costs no hash.
fn item_hash(hint: Option<ItemHash>, item: &[u8]) -> Hashed {
    match hint {
        Some(ItemHash::Cuckoo(h)) => h,
        _ => Hashed::new(item),
    }
}

/// `CF.MEXISTS key item [item ...]` → one boolean per item.
fn mexists(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    mexists_on(ctx.db(), argv)
}

fn mexists_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    mexists_on(db, argv)
}

fn mexists_on(db: &mut impl ReadView, argv: &[Bytes]) -> CmdResult {
    let cf = read(db, &argv[1]);
    Ok(Reply::Array(
        argv[2..]
            .iter()
            .map(|item| Reply::Bool(cf.is_some_and(|cf| cf.contains(item))))
            .collect(),
    ))
}

/// `CF.COUNT key item` → integer; 0 on a missing or wrong-type key.
fn count(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    count_on(ctx.db(), argv)
}

fn count_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    count_on(db, argv)
}

fn count_on(db: &mut impl ReadView, argv: &[Bytes]) -> CmdResult {
    let hint = db.batch_hash(&argv[2]);
    let n = read(db, &argv[1]).map_or(0, |cf| cf.count_hashed(&item_hash(hint, &argv[2])));
    Ok(Reply::Int(n as i64))
}

/// `CF.DEL key item` → `:1`/`:0` (`#t`/`#f`); `Not found` on a missing or wrong-type key.
fn del(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let cf = write(ctx.db(), &argv[1]).ok_or(CmdError::Static(DEL_NOT_FOUND))?;
    let deleted = cf.delete(&argv[2]);
    // Replicated whether or not the item was found, as RedisBloom does.
    ctx.force_propagation();
    Ok(Reply::Bool(deleted))
}

/// `CF.COMPACT key` → `+OK`; `Cuckoo filter was not found` on a missing or wrong-type key.
fn compact(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() != 2 {
        return Err(CmdError::arity("cf.compact"));
    }
    let cf = write(ctx.db(), &argv[1]).ok_or(CmdError::Static(COMPACT_NOT_FOUND))?;
    cf.compact(true);
    ctx.force_propagation();
    Ok(Reply::ok())
}

// ---------------------------------------------------------------------------------------------
// CF.INFO, CF.DEBUG
// ---------------------------------------------------------------------------------------------

/// The filter for INFO / DEBUG / SCANDUMP: `ERR not found` or WRONGTYPE otherwise.
fn existing<'a>(db: &'a mut Db, key: &[u8]) -> Result<&'a CuckooFilter, CmdError> {
    match db.lookup(key) {
        None => Err(CmdError::Static(NOT_FOUND)),
        Some(Value::Cuckoo(cf)) => Ok(cf),
        Some(_) => Err(CmdError::Static(error::WRONGTYPE)),
    }
}

/// `CF.INFO key` → 8 fields with simple-string names: a flat array in RESP2, a map in RESP3.
fn info(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let cf = existing(ctx.db(), &argv[1])?;
    // Counters are u64 in RedisBloom and sent as C `long long`: the same wrapping cast.
    let fields: [(&'static str, i64); 8] = [
        ("Size", cf.info_size() as i64),
        ("Number of buckets", cf.num_buckets() as i64),
        ("Number of filters", cf.num_filters() as i64),
        ("Number of items inserted", cf.num_items() as i64),
        ("Number of items deleted", cf.num_deletes() as i64),
        ("Bucket size", cf.bucket_size() as i64),
        ("Expansion rate", cf.expansion() as i64),
        ("Max iterations", cf.max_iterations() as i64),
    ];
    Ok(Reply::Map(
        fields
            .into_iter()
            .map(|(k, v)| (Reply::Status(k), Reply::Int(v)))
            .collect(),
    ))
}

/// `CF.DEBUG key` → one bulk string `bktsize:.. buckets:.. items:.. deletes:.. filters:..
/// max_iterations:.. expansion:..`.
fn debug(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let cf = existing(ctx.db(), &argv[1])?;
    Ok(Reply::Bulk(Bytes::from(cf.debug_string())))
}

// ---------------------------------------------------------------------------------------------
// CF.SCANDUMP, CF.LOADCHUNK
// ---------------------------------------------------------------------------------------------

/// `CF.SCANDUMP key position` → `[next, chunk]`, `[0, null]` at the end or for an empty filter.
fn scandump(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    // The position is checked before the key (cuckoo.md §4.9).
    let pos = parse_i64(&argv[2])
        .filter(|&p| p >= 0)
        .ok_or(CmdError::Static(INVALID_POSITION))?;
    let cf = existing(ctx.db(), &argv[1])?;
    Ok(match cf.scandump(pos as u64) {
        DumpChunk::End => Reply::Array(vec![Reply::Int(0), Reply::Null]),
        DumpChunk::Data { next, bytes } => Reply::Array(vec![
            Reply::Int(next as i64),
            Reply::Bulk(Bytes::from(bytes)),
        ]),
    })
}

/// `CF.LOADCHUNK key position data` → `+OK`. Position 1 carries the 38-byte header and creates the
/// key; any other position carries sub-filter bytes ending just before `position − 1`.
fn loadchunk(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let pos = parse_i64(&argv[2])
        .filter(|&p| p != 0)
        .ok_or(CmdError::Static(INVALID_POSITION))?;
    let data = &argv[3];
    let max = ctx.maxmemory();
    let db = ctx.db();
    if pos == 1 {
        match classify(db, &argv[1]) {
            Lookup::Cuckoo => return Err(CmdError::Static(ITEM_EXISTS)),
            Lookup::WrongType => return Err(CmdError::Static(error::WRONGTYPE)),
            Lookup::Missing => {}
        }
        if data.len() != HEADER_LEN {
            return Err(CmdError::Static(INVALID_HEADER));
        }
        let header = CuckooHeader::parse(data).ok_or(CmdError::Static(INVALID_HEADER))?;
        // Validated in full before anything is allocated.
        let cf =
            CuckooFilter::from_header(&header).map_err(|_| CmdError::Static(HEADER_REJECTED))?;
        super::reservation_fits(max)?;
        db.insert(argv[1].clone(), Value::Cuckoo(Box::new(cf)));
        ctx.force_propagation();
        return Ok(Reply::ok());
    }
    match classify(db, &argv[1]) {
        Lookup::Missing => return Err(CmdError::Static(NOT_FOUND)),
        Lookup::WrongType => return Err(CmdError::Static(error::WRONGTYPE)),
        Lookup::Cuckoo => {}
    }
    let cf = write(db, &argv[1]).ok_or(CmdError::Static(NOT_FOUND))?;
    cf.load_chunk(pos, data)
        .map_err(|_| CmdError::Static(CHUNK_REJECTED))?;
    // Every chunk, not only the header as RedisBloom does (which loses the data on a replica).
    ctx.force_propagation();
    Ok(Reply::ok())
}
