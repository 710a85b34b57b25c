//! String commands: GET, SET, SETNX, SETEX, PSETEX, GETSET, GETDEL, GETEX, MGET, MSET, MSETNX,
//! APPEND, STRLEN, GETRANGE, SUBSTR, SETRANGE, INCR, DECR, INCRBY, DECRBY, INCRBYFLOAT.
//!
//! Every reply and error follows Redis 7.0's `t_string.c`, including the order in which a command
//! checks its arguments (which decides the error a client sees when several things are wrong): SET
//! parses its options, then its expire time, then looks at the key; GETEX answers a missing key with a
//! null before it validates the expire time; GETRANGE parses both indexes before it looks at the key;
//! INCRBYFLOAT checks the type, then the stored value, then the increment.
//!
//! Option words are compared the way Redis compares them, as C strings: an argument is cut at its first
//! NUL byte before it is matched (`SET k v NX\0junk` is `SET k v NX` to Redis, so it is here too).
//!
//! Writes go through `Db::lookup_mut` / `insert` only when Redis would signal a modification, so a
//! WATCH is not disturbed by a command that fails or changes nothing (e.g. INCR of a non-number,
//! `SET NX` on an existing key, SETRANGE with an empty value).
//!
//! INCRBYFLOAT computes in 80-bit extended precision (see [`crate::numeric::longdouble`]) because Redis uses C
//! `long double` and prints the result with `%.17Lf`: `1000` + `0.1` is `1000.09999999999999998` in
//! Redis, which no `f64` computation reproduces.

use bytes::Bytes;
use smallvec::SmallVec;

use super::CmdResult;
use super::{cmd, flags::*, CommandSpec, Ctx};
use crate::error::{self, CmdError};
use crate::events;
use crate::numeric::int::Decimal;
use crate::numeric::parse_i64;
use crate::protocol::Reply;
use crate::store::db::{Db, ReadView, SharedDb, SharedSlot};
use crate::store::{Str, Value};

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("get", 2, READONLY | FAST, 1, 1, 1, "string", "1.0.0", "Returns the string value of a key.", get).shared_read(get_shared),
    cmd("set", -3, WRITE | DENYOOM, 1, 1, 1, "string", "1.0.0", "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.", set).shared_write(set_shared),
    cmd("setnx", 3, WRITE | DENYOOM | FAST, 1, 1, 1, "string", "1.0.0", "Set the string value of a key only when the key doesn't exist.", setnx),
    cmd("setex", 4, WRITE | DENYOOM, 1, 1, 1, "string", "2.0.0", "Sets the string value and expiration time of a key. Creates the key if it doesn't exist.", setex).shared_write(setex_shared),
    cmd("psetex", 4, WRITE | DENYOOM, 1, 1, 1, "string", "2.6.0", "Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist.", psetex).shared_write(psetex_shared),
    cmd("getset", 3, WRITE | DENYOOM | FAST, 1, 1, 1, "string", "1.0.0", "Returns the previous string value of a key after setting it to a new value.", getset),
    cmd("getdel", 2, WRITE | FAST, 1, 1, 1, "string", "6.2.0", "Returns the string value of a key after deleting the key.", getdel).shared_write(getdel_shared),
    cmd("getex", -2, WRITE | FAST, 1, 1, 1, "string", "6.2.0", "Returns the string value of a key after setting its expiration time.", getex).shared_write(getex_shared),
    cmd("mget", -2, READONLY | FAST, 1, -1, 1, "string", "1.0.0", "Atomically returns the string values of one or more keys.", mget).shared_read(mget_shared),
    cmd("mset", -3, WRITE | DENYOOM, 1, -1, 2, "string", "1.0.1", "Atomically creates or modifies the string values of one or more keys.", mset).shared_write_parallel(mset_shared),
    cmd("msetnx", -3, WRITE | DENYOOM, 1, -1, 2, "string", "1.0.1", "Atomically modifies the string values of one or more keys only when all keys don't exist.", msetnx).shared_write_parallel(msetnx_shared),
    cmd("append", 3, WRITE | DENYOOM | FAST, 1, 1, 1, "string", "2.0.0", "Appends a string to the value of a key. Creates the key if it doesn't exist.", append),
    cmd("strlen", 2, READONLY | FAST, 1, 1, 1, "string", "2.2.0", "Returns the length of a string value.", strlen).shared_read(strlen_shared),
    cmd("getrange", 4, READONLY, 1, 1, 1, "string", "2.4.0", "Returns a substring of the string stored at a key.", getrange),
    cmd("substr", 4, READONLY, 1, 1, 1, "string", "1.0.0", "Returns a substring from a string value.", getrange),
    cmd("setrange", 4, WRITE | DENYOOM, 1, 1, 1, "string", "2.2.0", "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.", setrange),
    cmd("incr", 2, WRITE | DENYOOM | FAST, 1, 1, 1, "string", "1.0.0", "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", incr).shared_write(incr_shared),
    cmd("decr", 2, WRITE | DENYOOM | FAST, 1, 1, 1, "string", "1.0.0", "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", decr).shared_write(decr_shared),
    cmd("incrby", 3, WRITE | DENYOOM | FAST, 1, 1, 1, "string", "1.0.0", "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist.", incrby).shared_write(incrby_shared),
    cmd("decrby", 3, WRITE | DENYOOM | FAST, 1, 1, 1, "string", "1.0.0", "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist.", decrby).shared_write(decrby_shared),
    cmd("incrbyfloat", 3, WRITE | DENYOOM | FAST, 1, 1, 1, "string", "2.6.0", "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist.", incrbyfloat),
];

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

/// An argument as C sees it: cut at the first NUL byte.
pub(crate) fn cstr(a: &[u8]) -> &[u8] {
    match memchr::memchr(0, a) {
        Some(i) => &a[..i],
        None => a,
    }
}

/// True if the option argument `a` (as a C string) equals `word`, ignoring ASCII case.
pub(crate) fn is_opt(a: &[u8], word: &str) -> bool {
    cstr(a).eq_ignore_ascii_case(word.as_bytes())
}

/// The string at `key` for a command about to write it: `Ok(None)` if absent, WRONGTYPE if it
/// holds another type. A miss raises no `keymiss` event (Redis's `lookupKeyWrite`).
fn read_str<'a>(db: &'a mut Db, key: &[u8]) -> Result<Option<&'a Str>, CmdError> {
    as_string(db.lookup_quiet(key))
}

/// The string at `key` for a read command: a miss raises `keymiss` (`lookupKeyRead`).
fn read_str_miss<'a>(db: &'a mut Db, key: &[u8]) -> Result<Option<&'a Str>, CmdError> {
    as_string(db.lookup(key))
}

fn as_string(v: Option<&Value>) -> Result<Option<&Str>, CmdError> {
    match v {
        None => Ok(None),
        Some(Value::Str(s)) => Ok(Some(s)),
        #[allow(unreachable_patterns)]
        Some(_) => Err(CmdError::Static(error::WRONGTYPE)),
    }
}

/// GET's reply for `key` (null when absent), or WRONGTYPE.
fn get_reply(db: &mut impl ReadView, key: &[u8]) -> CmdResult {
    Ok(match as_string(db.read(key))? {
        None => Reply::Null,
        // A long string's buffer is shared, not copied: O(1) under the lock (store::string).
        Some(s) => Reply::Bulk(s.to_bytes()),
    })
}

/// `ERR invalid expire time in '<cmd>' command`.
pub(crate) fn invalid_expire(cmd: &str) -> CmdError {
    CmdError::Owned(error::EXPIRE_INVALID.replace("{}", cmd))
}

/// Which expire option SET / GETEX got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExpireKind {
    Ex,
    Px,
    ExAt,
    PxAt,
}

/// The options of SET (`for_set`) or GETEX, as Redis's `parseExtendedStringArgumentsOrReply` accepts
/// them: NX/XX exclude each other, KEEPTTL/PERSIST exclude every expire option, the four expire
/// options exclude each other (but one may repeat, the last value winning), and anything else —
/// including an expire option without a value — is a syntax error.
#[derive(Debug, Default)]
struct StringOpts<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    persist: bool,
    expire: Option<(ExpireKind, &'a Bytes)>,
}

fn parse_string_opts(
    argv: &[Bytes],
    start: usize,
    for_set: bool,
) -> Result<StringOpts<'_>, CmdError> {
    let mut o = StringOpts::default();
    let mut j = start;
    while j < argv.len() {
        let opt = &argv[j];
        let next = argv.get(j + 1);
        let kind = o.expire.map(|(k, _)| k);
        let other_expire = |mine: ExpireKind| kind.is_some_and(|k| k != mine);
        if for_set && is_opt(opt, "nx") && !o.xx {
            o.nx = true;
        } else if for_set && is_opt(opt, "xx") && !o.nx {
            o.xx = true;
        } else if for_set && is_opt(opt, "get") {
            o.get = true;
        } else if for_set && is_opt(opt, "keepttl") && !o.persist && kind.is_none() {
            o.keepttl = true;
        } else if !for_set && is_opt(opt, "persist") && kind.is_none() && !o.keepttl {
            o.persist = true;
        } else if let Some(next) = next.filter(|_| !o.keepttl && !o.persist) {
            let mine = if is_opt(opt, "ex") {
                ExpireKind::Ex
            } else if is_opt(opt, "px") {
                ExpireKind::Px
            } else if is_opt(opt, "exat") {
                ExpireKind::ExAt
            } else if is_opt(opt, "pxat") {
                ExpireKind::PxAt
            } else {
                return Err(CmdError::Static(error::SYNTAX));
            };
            if other_expire(mine) {
                return Err(CmdError::Static(error::SYNTAX));
            }
            o.expire = Some((mine, next));
            j += 1;
        } else {
            return Err(CmdError::Static(error::SYNTAX));
        }
        j += 1;
    }
    Ok(o)
}

/// Redis's `getExpireMillisecondsOrReply`: the absolute expiry in unix ms, refusing non-positive
/// values and overflows with `ERR invalid expire time in '<cmd>' command`.
fn expire_ms(kind: ExpireKind, arg: &[u8], now_ms: u64, cmd: &str) -> Result<u64, CmdError> {
    let v = parse_i64(arg).ok_or(CmdError::Static(error::NOT_INTEGER))?;
    let seconds = matches!(kind, ExpireKind::Ex | ExpireKind::ExAt);
    if v <= 0 || (seconds && v > i64::MAX / 1000) {
        return Err(invalid_expire(cmd));
    }
    let mut ms = if seconds { v * 1000 } else { v };
    if matches!(kind, ExpireKind::Ex | ExpireKind::Px) {
        ms = ms
            .checked_add(now_ms as i64)
            .ok_or_else(|| invalid_expire(cmd))?;
    }
    if ms <= 0 {
        return Err(invalid_expire(cmd));
    }
    Ok(ms as u64)
}

/// Redis's `setGenericCommand`. `when` is the absolute expiry already validated; `ok` and `abort`
/// are the replies for a done and a refused (NX/XX) set.
#[allow(clippy::too_many_arguments)]
fn set_generic(
    db: &mut Db,
    key: &Bytes,
    value: &Bytes,
    opts: &StringOpts,
    when: Option<u64>,
    ok: Reply,
    abort: Reply,
) -> CmdResult {
    let old = if opts.get {
        Some(get_reply(db, key)?)
    } else {
        None
    };
    if opts.nx || opts.xx {
        let found = db.lookup_quiet(key).is_some();
        if (opts.nx && found) || (opts.xx && !found) {
            return Ok(old.unwrap_or(abort));
        }
    }
    let v = Value::str(value);
    if opts.keepttl {
        db.insert_keep_ttl(key, v);
    } else if when.is_some() {
        db.insert_expiring(key, v);
    } else {
        db.insert(key, v);
    }
    db.notify(events::STRING, "set", key);
    if let Some(when) = when {
        db.set_expire_of_written(key, when);
        db.notify(events::GENERIC, "expire", key);
    }
    Ok(old.unwrap_or(ok))
}

// ---------------------------------------------------------------------------------------------
// GET / SET and friends
// ---------------------------------------------------------------------------------------------

/// `GET key` → bulk string or null.
fn get(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    get_reply(ctx.db(), &argv[1])
}

/// GET under the shared lock (`shared_path`).
fn get_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    get_reply(db, &argv[1])
}

/// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT ts|PXAT ts-ms|KEEPTTL]` → OK, null when NX/XX
/// refuses, or the old value with GET.
fn set(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let opts = parse_string_opts(argv, 3, true)?;
    let when = match opts.expire {
        Some((kind, arg)) => Some(expire_ms(kind, arg, ctx.now_ms, "set")?),
        None => None,
    };
    let reply = set_generic(
        ctx.db(),
        &argv[1],
        &argv[2],
        &opts,
        when,
        Reply::ok(),
        Reply::Null,
    )?;
    if ctx.propagating() {
        match set_propagation(&opts, when) {
            SetPropagation::Pxat(when) => ctx.propagate_as(set_pxat(&argv[1], &argv[2], when)),
            SetPropagation::WithoutGet => ctx.propagate_as(without_get(argv).cloned().collect()),
            SetPropagation::Verbatim => {}
        }
    }
    Ok(reply)
}

/// How a SET that wrote enters the write stream.
enum SetPropagation {
    /// `SET key value PXAT ms`.
    Pxat(u64),
    /// Its arguments but every GET ([`without_get`]).
    WithoutGet,
    Verbatim,
}

/// Redis 7.0 writes a SET with a relative (or seconds) expiry as `SET key value PXAT ms`, and
/// otherwise drops every GET argument: the rule both paths follow.
fn set_propagation(opts: &StringOpts, when: Option<u64>) -> SetPropagation {
    match (opts.expire, when) {
        (Some((kind, _)), Some(when)) if kind != ExpireKind::PxAt => SetPropagation::Pxat(when),
        _ if opts.get => SetPropagation::WithoutGet,
        _ => SetPropagation::Verbatim,
    }
}

/// SET's arguments without its GET options.
fn without_get(argv: &[Bytes]) -> impl Iterator<Item = &Bytes> {
    argv.iter()
        .enumerate()
        .filter(|(i, a)| *i < 3 || !is_opt(a, "get"))
        .map(|(_, a)| a)
}

/// SET under the shared lock (`shared_path`), every option: over a live key (replaced in place
/// as [`Db::insert`] replaces it: value, no encoding override) or as a new key where one can be
/// added there (`SharedDb::write_or_vacant`), its TTL set, cleared or kept where the key's
/// segment allows (`SharedDb::can_change_ttl`). An expiry already past (the key would be born
/// due): the exclusive path.
fn set_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    if argv.len() == 3 {
        // `SET key value`, the common case, without the option parsing.
        match db.write_or_vacant(&argv[1]) {
            None => return Ok(Reply::Null),
            Some(SharedSlot::Live(mut e)) if e.ttl.is_none() => {
                *e.value = Value::str(&argv[2]);
                e.clear_encoding();
            }
            Some(SharedSlot::Live(_)) => {
                return set_shared_generic(db, &argv[1], &argv[2], &StringOpts::default(), None)
            }
            Some(SharedSlot::Vacant(v)) => v.insert(Value::str(&argv[2])),
        }
        db.wrote();
        return Ok(Reply::ok());
    }
    let opts = parse_string_opts(argv, 3, true)?;
    let when = match opts.expire {
        Some((kind, arg)) => Some(expire_ms(kind, arg, db.now_ms(), "set")?),
        None => None,
    };
    let reply = set_shared_generic(db, &argv[1], &argv[2], &opts, when)?;
    if db.writes() != 0 && db.propagating() {
        match set_propagation(&opts, when) {
            SetPropagation::Pxat(when) => {
                db.propagate_as(|out| encode_set_pxat(out, &argv[1], &argv[2], when))
            }
            SetPropagation::WithoutGet => db.propagate_as(|out| {
                let kept: SmallVec<[&Bytes; 8]> = without_get(argv).collect();
                crate::engine::propagate::encode_command(out, &kept)
            }),
            SetPropagation::Verbatim => {}
        }
    }
    Ok(reply)
}

/// [`set_generic`] under the shared lock (the options parsed, the expiry validated): the reply,
/// with the command deferred (and nothing changed) where the shared lock cannot do it.
fn set_shared_generic(
    db: &mut SharedDb,
    key: &Bytes,
    value: &Bytes,
    opts: &StringOpts,
    when: Option<u64>,
) -> CmdResult {
    if when.is_some_and(|w| w <= db.now_ms()) {
        return super::shared_path::defer(db);
    }
    let old = if opts.get {
        Some(get_reply(db, key)?)
    } else {
        None
    };
    if db.deferred() {
        return Ok(Reply::Null);
    }
    let ttl_ok = db.can_change_ttl(key);
    let had_ttl = match db.write_or_vacant(key) {
        None => return Ok(Reply::Null),
        Some(SharedSlot::Live(mut e)) => {
            if opts.nx {
                return Ok(old.unwrap_or(Reply::Null));
            }
            let had_ttl = e.ttl.is_some();
            if !ttl_ok && (when.is_some() || (had_ttl && !opts.keepttl)) {
                return super::shared_path::defer(db);
            }
            *e.value = Value::str(value);
            e.clear_encoding();
            had_ttl
        }
        Some(SharedSlot::Vacant(v)) => {
            if opts.xx {
                return Ok(old.unwrap_or(Reply::Null));
            }
            match when {
                // The vacancy left unfilled leaves the table as it was.
                Some(_) if !ttl_ok => return super::shared_path::defer(db),
                Some(_) => v.insert_expiring(Value::str(value)),
                None => v.insert(Value::str(value)),
            }
            false
        }
    };
    match when {
        Some(when) => db.set_ttl(key, when),
        None if had_ttl && !opts.keepttl => db.clear_ttl(key),
        None => {}
    }
    db.wrote();
    Ok(old.unwrap_or_else(Reply::ok))
}

/// SETEX and PSETEX under the shared lock ([`set_shared_generic`]), propagated as the
/// exclusive path does: `SET key value PXAT ms`.
fn setex_shared_generic(
    db: &mut SharedDb,
    argv: &[Bytes],
    kind: ExpireKind,
    name: &str,
) -> CmdResult {
    let when = expire_ms(kind, &argv[2], db.now_ms(), name)?;
    let reply = set_shared_generic(db, &argv[1], &argv[3], &StringOpts::default(), Some(when))?;
    if db.writes() != 0 && db.propagating() {
        db.propagate_as(|out| encode_set_pxat(out, &argv[1], &argv[3], when));
    }
    Ok(reply)
}

fn setex_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    setex_shared_generic(db, argv, ExpireKind::Ex, "setex")
}

fn psetex_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    setex_shared_generic(db, argv, ExpireKind::Px, "psetex")
}

/// [`set_pxat`], encoded for the write stream without building its arguments.
fn encode_set_pxat(out: &mut Vec<u8>, key: &[u8], value: &[u8], when: u64) {
    let when = Decimal::of_u64(when);
    crate::engine::propagate::encode_command(
        out,
        &[&b"SET"[..], key, value, b"PXAT", when.as_bytes()],
    );
}

/// `SET key value PXAT ms`, as Redis propagates a SET or SETEX with a relative expiry.
fn set_pxat(key: &Bytes, value: &Bytes, when: u64) -> Vec<Bytes> {
    vec![
        Bytes::from_static(b"SET"),
        key.clone(),
        value.clone(),
        Bytes::from_static(b"PXAT"),
        Bytes::from(when.to_string()),
    ]
}

/// `SETNX key value` → 1 if set, 0 if the key existed.
fn setnx(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let opts = StringOpts {
        nx: true,
        ..Default::default()
    };
    set_generic(
        ctx.db(),
        &argv[1],
        &argv[2],
        &opts,
        None,
        Reply::Int(1),
        Reply::Int(0),
    )
}

fn setex_generic(ctx: &mut Ctx, argv: &[Bytes], kind: ExpireKind, name: &str) -> CmdResult {
    let when = expire_ms(kind, &argv[2], ctx.now_ms, name)?;
    let opts = StringOpts::default();
    let reply = set_generic(
        ctx.db(),
        &argv[1],
        &argv[3],
        &opts,
        Some(when),
        Reply::ok(),
        Reply::Null,
    )?;
    if ctx.propagating() {
        ctx.propagate_as(set_pxat(&argv[1], &argv[3], when));
    }
    Ok(reply)
}

/// `SETEX key seconds value` → OK.
fn setex(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    setex_generic(ctx, argv, ExpireKind::Ex, "setex")
}

/// `PSETEX key milliseconds value` → OK.
fn psetex(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    setex_generic(ctx, argv, ExpireKind::Px, "psetex")
}

/// `GETSET key value` → the old value (or null); the key loses its TTL.
fn getset(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let db = ctx.db();
    let old = get_reply(db, &argv[1])?;
    db.insert(argv[1].clone(), Value::str(&argv[2]));
    db.notify(events::STRING, "set", &argv[1]);
    if ctx.propagating() {
        let mut rewritten = argv.to_vec();
        rewritten[0] = Bytes::from_static(b"SET");
        ctx.propagate_as(rewritten);
    }
    Ok(old)
}

/// `GETDEL key` → the value (or null), and the key is deleted.
fn getdel(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let db = ctx.db();
    let reply = get_reply(db, &argv[1])?;
    if !matches!(reply, Reply::Null) {
        db.remove(&argv[1]);
        db.notify(events::GENERIC, "del", &argv[1]);
        ctx.propagate_as(vec![Bytes::from_static(b"DEL"), argv[1].clone()]);
    }
    Ok(reply)
}

/// `GETEX key [EX s|PX ms|EXAT ts|PXAT ts-ms|PERSIST]` → the value (or null), after changing the TTL.
fn getex(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let opts = parse_string_opts(argv, 2, false)?;
    let now = ctx.now_ms;
    let key = &argv[1];
    let db = ctx.db();
    let value = match read_str_miss(db, key)? {
        None => return Ok(Reply::Null),
        Some(s) => s.to_bytes(),
    };
    // Redis propagates the change as DEL, PEXPIREAT or PERSIST.
    let rewritten: &[u8] = match opts.expire {
        Some((kind, arg)) => {
            let when = expire_ms(kind, arg, now, "getex")?;
            if matches!(kind, ExpireKind::ExAt | ExpireKind::PxAt) && when <= now {
                db.remove(key);
                db.notify(events::GENERIC, "del", key);
                b"DEL"
            } else {
                db.set_expire(key, when);
                db.notify(events::GENERIC, "expire", key);
                ctx.propagate_as(vec![
                    Bytes::from_static(b"PEXPIREAT"),
                    key.clone(),
                    Bytes::from(when.to_string()),
                ]);
                return Ok(Reply::Bulk(value));
            }
        }
        None if opts.persist => {
            if db.persist(key) {
                db.notify(events::GENERIC, "persist", key);
            }
            b"PERSIST"
        }
        None => return Ok(Reply::Bulk(value)),
    };
    ctx.propagate_as(vec![Bytes::from_static(rewritten), key.clone()]);
    Ok(Reply::Bulk(value))
}

/// GETEX under the shared lock (`shared_path`): the value, its TTL set (propagated as
/// `PEXPIREAT key ms`) or cleared (`PERSIST key`) where the key's segment allows
/// (`SharedDb::can_change_ttl`). An absolute time already past (GETEX then deletes the key,
/// propagated as `DEL`) defers.
fn getex_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    let opts = parse_string_opts(argv, 2, false)?;
    let now = db.now_ms();
    let key = &argv[1];
    let value = match as_string(db.read(key))? {
        None => return Ok(Reply::Null),
        Some(s) => s.to_bytes(),
    };
    match opts.expire {
        Some((kind, arg)) => {
            let when = expire_ms(kind, arg, now, "getex")?;
            if when <= now || !db.can_change_ttl(key) {
                return super::shared_path::defer(db);
            }
            db.set_ttl(key, when);
            db.wrote();
            if db.propagating() {
                let when = Decimal::of_u64(when);
                db.propagate_as(|out| {
                    crate::engine::propagate::encode_command(
                        out,
                        &[&b"PEXPIREAT"[..], key, when.as_bytes()],
                    )
                });
            }
        }
        None if opts.persist && db.expiry(key).is_some() => {
            if !db.can_change_ttl(key) {
                return super::shared_path::defer(db);
            }
            db.clear_ttl(key);
            db.wrote();
            db.propagate_as(|out| {
                crate::engine::propagate::encode_command(out, &[&b"PERSIST"[..], key])
            });
        }
        None => {}
    }
    Ok(Reply::Bulk(value))
}

/// GETDEL under the shared lock: the value, and the key deleted as DEL deletes it
/// (`SharedDb::delete_keys`), propagated as `DEL key`.
fn getdel_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    let key = &argv[1];
    let reply = get_reply(db, key)?;
    if matches!(reply, Reply::Null) {
        return Ok(reply);
    }
    if db.delete_keys(std::slice::from_ref(key)).is_none() {
        return Ok(Reply::Null);
    }
    db.propagate_as(|out| crate::engine::propagate::encode_command(out, &[&b"DEL"[..], key]));
    Ok(reply)
}

/// `MGET key [key ...]` → one bulk per key; null for a missing key or one of another type.
fn mget(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    mget_on(ctx.db(), argv)
}

fn mget_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    mget_on(db, argv)
}

fn mget_on(db: &mut impl ReadView, argv: &[Bytes]) -> CmdResult {
    let out = argv[1..]
        .iter()
        .map(|k| match db.read(k) {
            Some(Value::Str(s)) => Reply::Bulk(s.to_bytes()),
            _ => Reply::Null,
        })
        .collect();
    Ok(Reply::Array(out))
}

/// `MSET key value [key value ...]` → OK.
fn mset(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len().is_multiple_of(2) {
        return Err(CmdError::arity("mset"));
    }
    let db = ctx.db();
    for pair in argv[1..].chunks_exact(2) {
        db.insert(&pair[0], Value::str(&pair[1]));
        db.notify(events::STRING, "set", &pair[0]);
    }
    Ok(Reply::ok())
}

/// MSET and MSETNX under the shared lock (`shared_path`), their keys' stripes all held for
/// writing: every key checked first ([`SharedDb::plain_set_check`]), so that the command defers
/// before it writes anything or writes every pair; then each pair set as [`set_shared`] sets a
/// plain `SET`, in order (a repeated key takes its last value). MSETNX answers 0, writing
/// nothing, when a key is live. Propagated verbatim, as the exclusive path does; a write counted
/// per pair, as Redis adds `(argc - 1) / 2` to `dirty`.
fn mset_shared_generic(db: &mut SharedDb, argv: &[Bytes], nx: bool) -> CmdResult {
    if argv.len().is_multiple_of(2) {
        // The error reply is the exclusive path's (errors are counted there).
        return super::shared_path::defer(db);
    }
    // Each key hashed once: by `hold`, which took the stripes (several keys), or here (one).
    let hashes = match db.take_key_hashes() {
        Some(hashes) => hashes,
        None => argv[1..]
            .iter()
            .step_by(2)
            .map(|k| db.key_hash(k))
            .collect(),
    };
    debug_assert_eq!(hashes.len(), argv.len() / 2, "a hash per key");
    let mut adding = 0;
    let mut live = false;
    for (key, &h) in argv[1..].iter().step_by(2).zip(&hashes) {
        match db.plain_set_check(key, h, adding) {
            None => return super::shared_path::defer(db),
            Some(true) => live = true,
            Some(false) => adding += 1,
        }
    }
    if nx && live {
        return Ok(Reply::Int(0));
    }
    for (pair, &h) in argv[1..].chunks_exact(2).zip(&hashes) {
        let had_ttl = match db.write_or_vacant_checked(&pair[0], h) {
            Some(SharedSlot::Live(mut e)) => {
                *e.value = Value::str(&pair[1]);
                e.clear_encoding();
                e.ttl.is_some()
            }
            Some(SharedSlot::Vacant(v)) => {
                v.insert(Value::str(&pair[1]));
                false
            }
            // `plain_set_check` answered for every key under the stripes this command still
            // holds, allowing for the keys it adds: only a broken invariant lands here, after
            // earlier pairs were written. The panic is the shared path's failed write (counted,
            // answered with an error, not rerun), never a half-written MSET left deferred.
            None => panic!("MSET: a key checked writable could not be written"),
        };
        if had_ttl {
            db.clear_ttl(&pair[0]);
        }
        db.wrote();
    }
    Ok(if nx { Reply::Int(1) } else { Reply::ok() })
}

fn mset_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    mset_shared_generic(db, argv, false)
}

fn msetnx_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    mset_shared_generic(db, argv, true)
}

/// `MSETNX key value [key value ...]` → 1 if every key was set, 0 (and nothing set) if any existed.
fn msetnx(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len().is_multiple_of(2) {
        return Err(CmdError::arity("msetnx"));
    }
    let db = ctx.db();
    if argv[1..]
        .iter()
        .step_by(2)
        .any(|k| db.lookup_quiet(k).is_some())
    {
        return Ok(Reply::Int(0));
    }
    for pair in argv[1..].chunks_exact(2) {
        db.insert(&pair[0], Value::str(&pair[1]));
        db.notify(events::STRING, "set", &pair[0]);
    }
    Ok(Reply::Int(1))
}

// ---------------------------------------------------------------------------------------------
// Lengths and ranges
// ---------------------------------------------------------------------------------------------

/// Redis's `checkStringLength`: a string may not grow past `proto-max-bulk-len`.
fn check_string_length(ctx: &Ctx, size: u64) -> Result<(), CmdError> {
    if size > ctx.config().proto_max_bulk_len as u64 {
        Err(CmdError::Static(error::STRING_TOO_LONG))
    } else {
        Ok(())
    }
}

/// `APPEND key value` → the new length.
fn append(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let key = &argv[1];
    let extra = &argv[2];
    let old_len = match read_str(ctx.db(), key)? {
        None => {
            ctx.db().insert(key.clone(), Value::str(extra));
            ctx.notify(events::STRING, "append", key);
            return Ok(Reply::Int(extra.len() as i64));
        }
        Some(s) => s.len(),
    };
    let total = old_len as u64 + extra.len() as u64;
    check_string_length(ctx, total)?;
    let db = ctx.db();
    if let Some(mut s) = db.lookup_mut(key).and_then(Value::as_str_mut) {
        s.extend_from_slice(extra);
    }
    // Redis unshares the string before appending: `raw` however short.
    db.set_encoding_override(key, Some("raw"));
    db.notify(events::STRING, "append", key);
    Ok(Reply::Int(total as i64))
}

/// `STRLEN key` → the length, 0 for a missing key.
fn strlen(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    strlen_on(ctx.db(), argv)
}

fn strlen_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    strlen_on(db, argv)
}

fn strlen_on(db: &mut impl ReadView, argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(
        as_string(db.read(&argv[1]))?.map_or(0, |s| s.len()) as i64,
    ))
}

/// The byte range GETRANGE returns for `start..=end` over a string of `len` bytes, if any
/// (Redis's index rules: negative indexes count from the end, then both are clamped).
pub fn getrange_bounds(len: usize, start: i64, end: i64) -> Option<(usize, usize)> {
    if start < 0 && end < 0 && start > end {
        return None;
    }
    let len_i = len as i64;
    let mut start = if start < 0 {
        len_i.wrapping_add(start)
    } else {
        start
    };
    let mut end = if end < 0 {
        len_i.wrapping_add(end)
    } else {
        end
    };
    if start < 0 {
        start = 0;
    }
    if end < 0 {
        end = 0;
    }
    if end >= len_i {
        end = len_i - 1;
    }
    if start > end || len == 0 {
        return None;
    }
    Some((start as usize, end as usize))
}

/// `GETRANGE key start end` (and `SUBSTR`) → the substring; empty for a missing key.
fn getrange(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let start = parse_i64(&argv[2]).ok_or(CmdError::Static(error::NOT_INTEGER))?;
    let end = parse_i64(&argv[3]).ok_or(CmdError::Static(error::NOT_INTEGER))?;
    let Some(s) = read_str_miss(ctx.db(), &argv[1])? else {
        return Ok(Reply::Bulk(Bytes::new()));
    };
    Ok(Reply::Bulk(match getrange_bounds(s.len(), start, end) {
        // A slice of a shared buffer is a handle too.
        Some((a, b)) if s.is_shared() && b - a >= crate::store::string::SHARE_MIN => {
            s.to_bytes().slice(a..=b)
        }
        Some((a, b)) => Bytes::copy_from_slice(&s[a..=b]),
        None => Bytes::new(),
    }))
}

/// `SETRANGE key offset value` → the new length. Zero-pads a gap; creates the key unless the value
/// is empty.
fn setrange(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let key = &argv[1];
    let value = &argv[3];
    let offset = parse_i64(&argv[2]).ok_or(CmdError::Static(error::NOT_INTEGER))?;
    if offset < 0 {
        return Err(CmdError::Static(error::OFFSET_RANGE));
    }
    let offset = offset as u64;
    let new_end = offset.saturating_add(value.len() as u64);
    match read_str(ctx.db(), key)? {
        None => {
            if value.is_empty() {
                return Ok(Reply::Int(0));
            }
            check_string_length(ctx, new_end)?;
            let mut s = vec![0u8; new_end as usize];
            s[offset as usize..].copy_from_slice(value);
            let db = ctx.db();
            db.insert(key.clone(), Value::Str(s.into()));
            // Redis builds the new string with `createObject`: `raw` however short.
            db.set_encoding_override(key, Some("raw"));
            db.notify(events::STRING, "setrange", key);
            Ok(Reply::Int(new_end as i64))
        }
        Some(s) => {
            if value.is_empty() {
                return Ok(Reply::Int(s.len() as i64));
            }
            check_string_length(ctx, new_end)?;
            let mut len = 0;
            let db = ctx.db();
            // Redis unshares the string before writing into it: `raw` however short.
            db.set_encoding_override(key, Some("raw"));
            if let Some(mut s) = db.lookup_mut(key).and_then(Value::as_str_mut) {
                let (offset, new_end) = (offset as usize, new_end as usize);
                if s.len() < new_end {
                    s.resize(new_end, 0);
                }
                s[offset..new_end].copy_from_slice(value);
                len = s.len();
            }
            db.notify(events::STRING, "setrange", key);
            Ok(Reply::Int(len as i64))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Counters
// ---------------------------------------------------------------------------------------------

/// Redis's `incrDecrCommand`: adds `by` to the integer at `key` (0 if absent), keeping its TTL.
/// One probe of the key table, and the digits written on the stack (issue 15).
fn incr_by(ctx: &mut Ctx, key: &Bytes, by: i64) -> CmdResult {
    let db = ctx.db();
    // Redis stores a fresh integer object: `int`, whatever the string was before
    // (`replace_with` drops the encoding override).
    let new = db.replace_with(key, |v| {
        // `let else`, not `ok_or`: an eager error value is dropped on success, out of line
        // (~14 instructions an INCR, callgrind).
        let old = match as_string(v)? {
            None => 0,
            Some(s) => {
                let Some(n) = parse_i64(s) else {
                    return Err(CmdError::Static(error::NOT_INTEGER));
                };
                n
            }
        };
        let Some(new) = old.checked_add(by) else {
            return Err(CmdError::Static(error::INCR_OVERFLOW));
        };
        let text = Str::copy_from_slice(Decimal::of_i64(new).as_bytes());
        Ok::<_, CmdError>((Value::Str(text), new))
    })?;
    db.notify(events::STRING, "incrby", key);
    Ok(Reply::Int(new))
}

/// [`incr_by`] under the shared lock: an integer string, in place, keeping its TTL, as
/// `replace_with` stores it, or a new key holding `by` where one can be added there
/// (`SharedDb::write_or_vacant`). Another type, a string that is not an integer or an overflow:
/// the exclusive path (which answers the error and counts it).
fn incr_by_shared(db: &mut SharedDb, key: &[u8], by: i64) -> CmdResult {
    let new = match db.write_or_vacant(key) {
        None => return Ok(Reply::Null),
        Some(SharedSlot::Live(mut e)) => {
            let new = match &*e.value {
                Value::Str(s) => parse_i64(s).and_then(|old| old.checked_add(by)),
                #[allow(unreachable_patterns)]
                _ => None,
            };
            let Some(new) = new else {
                return super::shared_path::defer(db);
            };
            *e.value = Value::Str(Str::copy_from_slice(Decimal::of_i64(new).as_bytes()));
            e.clear_encoding();
            new
        }
        Some(SharedSlot::Vacant(v)) => {
            v.insert(Value::Str(Str::copy_from_slice(
                Decimal::of_i64(by).as_bytes(),
            )));
            by
        }
    };
    db.wrote();
    Ok(Reply::Int(new))
}

fn incr_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    incr_by_shared(db, &argv[1], 1)
}

fn decr_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    incr_by_shared(db, &argv[1], -1)
}

fn incrby_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    match parse_i64(&argv[2]) {
        Some(by) => incr_by_shared(db, &argv[1], by),
        None => super::shared_path::defer(db),
    }
}

fn decrby_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    match parse_i64(&argv[2]) {
        Some(by) if by != i64::MIN => incr_by_shared(db, &argv[1], -by),
        _ => super::shared_path::defer(db),
    }
}

/// `INCR key` → the new value.
fn incr(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    incr_by(ctx, &argv[1], 1)
}

/// `DECR key` → the new value.
fn decr(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    incr_by(ctx, &argv[1], -1)
}

/// `INCRBY key increment` → the new value.
fn incrby(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let by = parse_i64(&argv[2]).ok_or(CmdError::Static(error::NOT_INTEGER))?;
    incr_by(ctx, &argv[1], by)
}

/// `DECRBY key decrement` → the new value.
fn decrby(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let by = parse_i64(&argv[2]).ok_or(CmdError::Static(error::NOT_INTEGER))?;
    if by == i64::MIN {
        return Err(CmdError::Static(error::DECR_OVERFLOW));
    }
    incr_by(ctx, &argv[1], -by)
}

/// `INCRBYFLOAT key increment` → the new value as a bulk string, formatted as Redis formats a
/// `long double` (`%.17Lf`, trailing zeros removed).
fn incrbyfloat(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    use crate::numeric::longdouble::LongDouble;
    let key = &argv[1];
    let db = ctx.db();
    let current = match read_str(db, key)? {
        None => None,
        Some(s) => Some(LongDouble::parse(s).ok_or(CmdError::Static(error::NOT_FLOAT))?),
    };
    let by = LongDouble::parse(&argv[2]).ok_or(CmdError::Static(error::NOT_FLOAT))?;
    let sum = current.unwrap_or(LongDouble::ZERO).plus(by);
    if !sum.is_finite() {
        return Err(CmdError::Static(error::INCR_NAN));
    }
    let text = sum.to_human_string().into_bytes();
    let new_value = Bytes::copy_from_slice(&text);
    let reply = Reply::Bulk(new_value.clone());
    // Redis stores the result with `createStringObject`: embstr up to 44 bytes, never `int`.
    let encoding = if text.len() <= 44 { "embstr" } else { "raw" };
    match current {
        None => db.insert(key.clone(), Value::Str(text.into())),
        Some(_) => {
            if let Some(v) = db.lookup_mut(key) {
                *v = Value::Str(text.into());
            }
        }
    }
    db.set_encoding_override(key, Some(encoding));
    db.notify(events::STRING, "incrbyfloat", key);
    // Redis writes `SET key new KEEPTTL`, so a replay cannot round differently.
    if ctx.propagating() {
        ctx.propagate_as(vec![
            Bytes::from_static(b"SET"),
            key.clone(),
            new_value,
            Bytes::from_static(b"KEEPTTL"),
        ]);
    }
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn getrange_index_rules() {
        assert_eq!(getrange_bounds(5, 0, -1), Some((0, 4)));
        assert_eq!(getrange_bounds(5, -3, -1), Some((2, 4)));
        assert_eq!(getrange_bounds(5, -1, -3), None);
        assert_eq!(getrange_bounds(5, 3, 100), Some((3, 4)));
        assert_eq!(getrange_bounds(5, i64::MIN, i64::MAX), Some((0, 4)));
        assert_eq!(getrange_bounds(0, 0, -1), None);
        assert_eq!(getrange_bounds(5, 10, 20), None);
        assert_eq!(getrange_bounds(5, -100, 0), Some((0, 0)));
    }

    #[test]
    fn set_option_rules() {
        let argv = |v: &[&str]| v.iter().map(|s| b(s)).collect::<Vec<_>>();
        let ok = |v: &[&str]| parse_string_opts(&argv(v), 3, true).is_ok();
        assert!(ok(&["set", "k", "v", "nx", "get", "ex", "10"]));
        assert!(ok(&["set", "k", "v", "ex", "10", "ex", "20"]));
        assert!(ok(&["set", "k", "v", "NX\0junk"]));
        assert!(!ok(&["set", "k", "v", "nx", "xx"]));
        assert!(!ok(&["set", "k", "v", "ex", "10", "px", "10"]));
        assert!(!ok(&["set", "k", "v", "keepttl", "ex", "10"]));
        assert!(!ok(&["set", "k", "v", "ex"]));
        assert!(!ok(&["set", "k", "v", "persist"]));
        let g = |v: &[&str]| parse_string_opts(&argv(v), 2, false).is_ok();
        assert!(g(&["getex", "k", "persist"]));
        assert!(!g(&["getex", "k", "nx"]));
        assert!(!g(&["getex", "k", "persist", "ex", "1"]));
    }

    #[test]
    fn expire_ms_rules() {
        assert_eq!(expire_ms(ExpireKind::Ex, b"10", 1000, "set"), Ok(11_000));
        assert_eq!(expire_ms(ExpireKind::PxAt, b"5", 1000, "set"), Ok(5));
        assert_eq!(
            expire_ms(ExpireKind::Ex, b"0", 1000, "set")
                .unwrap_err()
                .to_string(),
            "ERR invalid expire time in 'set' command"
        );
        assert!(expire_ms(ExpireKind::Ex, b"9223372036854776", 0, "set").is_err());
        assert!(expire_ms(ExpireKind::Px, b"9223372036854775807", 10, "set").is_err());
        assert_eq!(
            expire_ms(ExpireKind::Px, b"x", 0, "set"),
            Err(CmdError::Static(error::NOT_INTEGER))
        );
    }
}
