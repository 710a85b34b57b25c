//! Keyspace commands: DEL, UNLINK, EXISTS, TYPE, KEYS, SCAN, RANDOMKEY, RENAME, RENAMENX, COPY,
//! MOVE, EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, TTL, PTTL, EXPIRETIME, PEXPIRETIME, PERSIST, TOUCH and
//! the OBJECT container (ENCODING, FREQ, IDLETIME, REFCOUNT, HELP).
//!
//! Semantics and error texts are Redis 7.0's (`db.c`, `expire.c`, `object.c`), including the order of
//! checks: the EXPIRE family parses its NX/XX/GT/LT flags before the time, then refuses a time whose
//! conversion to absolute milliseconds overflows, and only then looks at the key; a time at or before
//! now deletes the key and still replies 1. TTL and EXPIRETIME round milliseconds to the nearest second
//! as Redis does (`(ms + 500) / 1000`).
//!
//! SCAN uses `Db::scan`: the cursor is a position in the key table's scan order (its segment bits
//! reversed, `store::keytable::scan_position`), so a key present for the whole iteration is
//! returned exactly once whatever happens to the keyspace meanwhile, a load into new tables
//! included (DEBUG RELOAD, a replica's full sync: one hash seed per process, as Redis). The
//! cursor values differ from Redis's (which walks its hash table buckets), as any client must
//! allow. A call looks at one
//! segment's keys (~128-256), or a few when they run out, not at the whole keyspace; COUNT is the
//! number of keys taken before MATCH / TYPE filter them, so a page may come back empty with a
//! nonzero cursor, as in Redis.
//!
//! OBJECT ENCODING derives the encoding from the value (`int`, `embstr`, `raw` for strings, as
//! `tryObjectEncoding` would choose for the bytes), unless the database recorded an override: Redis
//! also remembers how a string was produced — a string modified in place (APPEND, SETRANGE, PFADD) or
//! created by SETRANGE is `raw` however short, an INCRBYFLOAT result is `embstr` even when it looks
//! like an integer — and RENAME, MOVE and COPY keep the encoding. OBJECT REFCOUNT reports Redis's
//! shared-integer refcount for small integers stored by SET; an approximation elsewhere (a COPY of a
//! shared integer has refcount 1 in Redis).

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use smallvec::SmallVec;

use super::strings::{cstr, invalid_expire, is_opt};
use super::CmdResult;
use super::{cmd, flags::*, CommandSpec, Ctx};
use crate::error::{self, CmdError};
use crate::events;
use crate::numeric::int::Decimal;
use crate::numeric::parse_i64;
use crate::protocol::Reply;
use crate::store::db::{ReadView, SharedDb};
use crate::store::Value;

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("del", -2, WRITE, 1, -1, 1, "generic", "1.0.0", "Deletes one or more keys.", del).shared_write(del_shared),
    cmd("unlink", -2, WRITE | FAST, 1, -1, 1, "generic", "4.0.0", "Asynchronously deletes one or more keys.", del).shared_write(del_shared),
    cmd("exists", -2, READONLY | FAST, 1, -1, 1, "generic", "1.0.0", "Determines whether one or more keys exist.", exists).shared_read(exists_shared),
    cmd("touch", -2, READONLY | FAST, 1, -1, 1, "generic", "3.2.1", "Returns the number of existing keys out of those specified after updating the time they were last accessed.", touch),
    cmd("type", 2, READONLY | FAST, 1, 1, 1, "generic", "1.0.0", "Determines the type of value stored at a key.", type_cmd),
    cmd("keys", 2, READONLY, 0, 0, 0, "generic", "1.0.0", "Returns all key names that match a pattern.", keys),
    cmd("scan", -2, READONLY, 0, 0, 0, "generic", "2.8.0", "Iterates over the key names in the database.", scan),
    cmd("randomkey", 1, READONLY, 0, 0, 0, "generic", "1.0.0", "Returns a random key name from the database.", randomkey),
    cmd("rename", 3, WRITE, 1, 2, 1, "generic", "1.0.0", "Renames a key and overwrites the destination.", rename),
    cmd("renamenx", 3, WRITE | FAST, 1, 2, 1, "generic", "1.0.0", "Renames a key only when the target key name doesn't exist.", renamenx),
    cmd("copy", -3, WRITE | DENYOOM, 1, 2, 1, "generic", "6.2.0", "Copies the value of a key to a new key.", copy),
    cmd("move", 3, WRITE | FAST, 1, 1, 1, "generic", "1.0.0", "Moves a key to another database.", move_cmd),
    cmd("swapdb", 3, WRITE | FAST, 0, 0, 0, "server", "4.0.0", "Swaps two Redis databases.", swapdb),
    cmd("expire", -3, WRITE | FAST, 1, 1, 1, "generic", "1.0.0", "Sets the expiration time of a key in seconds.", expire).shared_write(expire_shared),
    cmd("pexpire", -3, WRITE | FAST, 1, 1, 1, "generic", "2.6.0", "Sets the expiration time of a key in milliseconds.", expire).shared_write(expire_shared),
    cmd("expireat", -3, WRITE | FAST, 1, 1, 1, "generic", "1.2.0", "Sets the expiration time of a key to a Unix timestamp.", expire).shared_write(expire_shared),
    cmd("pexpireat", -3, WRITE | FAST, 1, 1, 1, "generic", "2.6.0", "Sets the expiration time of a key to a Unix milliseconds timestamp.", expire).shared_write(expire_shared),
    cmd("ttl", 2, READONLY | FAST, 1, 1, 1, "generic", "1.0.0", "Returns the expiration time in seconds of a key.", ttl).shared_read(ttl_shared),
    cmd("pttl", 2, READONLY | FAST, 1, 1, 1, "generic", "2.6.0", "Returns the expiration time in milliseconds of a key.", pttl).shared_read(pttl_shared),
    cmd("expiretime", 2, READONLY | FAST, 1, 1, 1, "generic", "7.0.0", "Returns the expiration time of a key as a Unix timestamp.", expiretime).shared_read(expiretime_shared),
    cmd("pexpiretime", 2, READONLY | FAST, 1, 1, 1, "generic", "7.0.0", "Returns the expiration time of a key as a Unix milliseconds timestamp.", pexpiretime).shared_read(pexpiretime_shared),
    cmd("persist", 2, WRITE | FAST, 1, 1, 1, "generic", "2.2.0", "Removes the expiration time of a key.", persist).shared_write(persist_shared),
    CommandSpec {
        name: "object",
        arity: -2,
        flags: 0,
        first_key: 0,
        last_key: 0,
        step: 0,
        group: "generic",
        since: "2.2.3",
        summary: "A container for object introspection commands.",
        handler: object_container,
        subcommands: OBJECT_SUBCOMMANDS,
        shared: None,
        shared_parallel_only: false,
    },
];

#[rustfmt::skip]
const OBJECT_SUBCOMMANDS: &[CommandSpec] = &[
    cmd("object|encoding", 3, READONLY, 2, 2, 1, "generic", "2.2.3", "Returns the internal encoding of a Redis object.", object_encoding),
    cmd("object|freq", 3, READONLY, 2, 2, 1, "generic", "4.0.0", "Returns the logarithmic access frequency counter of a Redis object.", object_freq),
    cmd("object|idletime", 3, READONLY, 2, 2, 1, "generic", "2.2.3", "Returns the time since the last access to a Redis object.", object_idletime),
    cmd("object|refcount", 3, READONLY, 2, 2, 1, "generic", "2.2.3", "Returns the reference count of a value of a key.", object_refcount),
    cmd("object|help", 2, LOADING | STALE, 0, 0, 0, "generic", "6.2.0", "Returns helpful text about the different subcommands.", object_help),
];

// ---------------------------------------------------------------------------------------------
// Existence, type, deletion
// ---------------------------------------------------------------------------------------------

/// `DEL key [key ...]` / `UNLINK` → the number of keys removed.
fn del(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let db = ctx.db();
    let mut n = 0;
    for k in &argv[1..] {
        if db.delete(k) {
            db.notify(events::GENERIC, "del", k);
            n += 1;
        }
    }
    Ok(Reply::Int(n))
}

/// DEL / UNLINK under the shared lock (`shared_path`): keys without a TTL, removed from their
/// segments under their stripes (`SharedDb::delete_keys`), on a multi-thread runtime in a table
/// big enough for that. Every key is checked before any is removed, so a deferral (a TTL, a
/// snapshot, a small table) changes nothing. The reply counts the keys removed, a repeated key
/// once, as [`del`].
fn del_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    Ok(db
        .delete_keys(&argv[1..])
        .map_or(Reply::Null, |n| Reply::Int(n as i64)))
}

/// `EXISTS key [key ...]` → how many of the arguments exist (a repeated key counts again); the
/// keys' idle times stay as they were (Redis's `LOOKUP_NOTOUCH`).
fn exists(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    exists_on(ctx.db(), argv)
}

/// `TOUCH key [key ...]` → how many of the arguments exist, each access recorded (idle time 0,
/// the LFU counter fed).
fn touch(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let db = ctx.db();
    Ok(Reply::Int(
        argv[1..].iter().filter(|k| db.lookup(k).is_some()).count() as i64,
    ))
}

fn exists_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    exists_on(db, argv)
}

fn exists_on(db: &mut impl ReadView, argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(
        argv[1..]
            .iter()
            .filter(|k| db.read_notouch(k).is_some())
            .count() as i64,
    ))
}

/// `TYPE key` → status `string`, a module type name, or `none`.
fn type_cmd(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Status(match ctx.db().lookup_notouch(&argv[1]) {
        Some(v) => v.type_name(),
        None => "none",
    }))
}

/// `KEYS pattern` → every live key matching the glob pattern, in no particular order.
fn keys(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let pattern = &argv[1];
    let all = pattern.as_ref() == b"*";
    let db = ctx.db();
    let out = db
        .keys()
        .filter(|k| all || crate::glob::matches(pattern, k, false))
        .map(|k| Reply::Bulk(Bytes::copy_from_slice(k)))
        .collect();
    Ok(Reply::Array(out))
}

/// Redis 7.0's `parseScanCursorOrReply`: C `strtoul` over the whole (NUL-terminated) argument, no
/// leading blank, no overflow. As in C, a sign is accepted (`-1` is the largest cursor) and an empty
/// argument is cursor 0.
fn parse_cursor(arg: &[u8]) -> Option<u64> {
    let s = cstr(arg);
    if s.is_empty() {
        return Some(0);
    }
    if matches!(s[0], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        return None;
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        v = v.checked_mul(10)?.checked_add((d - b'0') as u64)?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]` → `[next-cursor, [key ...]]`.
fn scan(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let cursor = parse_cursor(&argv[1]).ok_or(CmdError::Static(error::INVALID_CURSOR))?;
    let mut count: i64 = 10;
    let mut pattern: Option<&Bytes> = None;
    let mut type_name: Option<&[u8]> = None;
    let mut i = 2;
    while i < argv.len() {
        let more = argv.len() - i >= 2;
        if is_opt(&argv[i], "count") && more {
            count = parse_i64(&argv[i + 1]).ok_or(CmdError::Static(error::NOT_INTEGER))?;
            if count < 1 {
                return Err(CmdError::Static(error::SYNTAX));
            }
        } else if is_opt(&argv[i], "match") && more {
            pattern = Some(&argv[i + 1]).filter(|p| p.as_ref() != b"*");
        } else if is_opt(&argv[i], "type") && more {
            type_name = Some(cstr(&argv[i + 1]));
        } else {
            return Err(CmdError::Static(error::SYNTAX));
        }
        i += 2;
    }
    let db = ctx.db();
    let (next, found) = db.scan(cursor, count.min(1 << 20) as usize);
    let keys = found
        .into_iter()
        .filter(|k| pattern.is_none_or(|p| crate::glob::matches(p, k, false)))
        .filter(|k| match type_name {
            None => true,
            Some(t) => db
                .peek(k)
                .is_some_and(|v| v.type_name().as_bytes().eq_ignore_ascii_case(t)),
        })
        .map(Reply::Bulk)
        .collect();
    Ok(Reply::Array(vec![
        Reply::Bulk(Bytes::from(next.to_string())),
        Reply::Array(keys),
    ]))
}

/// `RANDOMKEY` → a random live key, or null when the database is empty.
fn randomkey(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    // A different seed per call; the table's draw mixes it (`KeyTable::random_entry`).
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let seed = CALLS
        .fetch_add(1, Ordering::Relaxed)
        .wrapping_add(ctx.now_ms << 20);
    Ok(Reply::opt_bulk(ctx.db().random_key(seed)))
}

// ---------------------------------------------------------------------------------------------
// Renaming and copying
// ---------------------------------------------------------------------------------------------

fn rename_generic(ctx: &mut Ctx, argv: &[Bytes], nx: bool) -> CmdResult {
    let (src, dst) = (&argv[1], &argv[2]);
    let db = ctx.db();
    if db.lookup_quiet(src).is_none() {
        return Err(CmdError::Static(error::NO_SUCH_KEY));
    }
    if src == dst {
        return Ok(if nx { Reply::Int(0) } else { Reply::ok() });
    }
    let expire = db.expire_at(src);
    let encoding = db.encoding_override(src);
    let before = db.dirty;
    if db.lookup_quiet(dst).is_some() {
        if nx {
            return Ok(Reply::Int(0));
        }
        db.remove(dst);
    }
    let Some(value) = db.remove(src) else {
        return Err(CmdError::Static(error::NO_SUCH_KEY));
    };
    db.insert(dst.clone(), value);
    db.set_encoding_override(dst, encoding);
    if let Some(when) = expire {
        db.set_expire(dst, when);
    }
    // One change, as Redis counts it (the removal of an existing `dst` included).
    db.count_changes_since(before, 1);
    db.notify(events::GENERIC, "rename_from", src);
    db.notify(events::GENERIC, "rename_to", dst);
    Ok(if nx { Reply::Int(1) } else { Reply::ok() })
}

/// `RENAME key newkey` → OK, or `ERR no such key`.
fn rename(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    rename_generic(ctx, argv, false)
}

/// `RENAMENX key newkey` → 1 if renamed, 0 if `newkey` exists.
fn renamenx(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    rename_generic(ctx, argv, true)
}

/// A database index argument as MOVE and COPY take it (`getIntFromObjectOrReply`, then `selectDb`).
fn db_index(ctx: &Ctx, arg: &[u8]) -> Result<usize, CmdError> {
    let v = parse_i64(arg).ok_or(CmdError::Static(error::NOT_INTEGER))?;
    if i32::try_from(v).is_err() {
        return Err(CmdError::Static(error::NOT_INT32));
    }
    if v < 0 || v as usize >= ctx.store.dbs.len() {
        return Err(CmdError::Static(error::DB_INDEX_RANGE));
    }
    Ok(v as usize)
}

/// COPY of a module value whose type has no copy callback (RedisBloom's t-digest).
pub const MODULE_NO_COPY: &str = "ERR not supported for this module key";

/// `COPY source destination [DB destination-db] [REPLACE]` → 1 if copied, 0 if the source is
/// missing or the destination exists (without REPLACE).
fn copy(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let src_db = ctx.client.db;
    let mut dst_db = src_db;
    let mut replace = false;
    let mut j = 3;
    while j < argv.len() {
        if is_opt(&argv[j], "replace") {
            replace = true;
        } else if is_opt(&argv[j], "db") && j + 1 < argv.len() {
            dst_db = db_index(ctx, &argv[j + 1])?;
            j += 1;
        } else {
            return Err(CmdError::Static(error::SYNTAX));
        }
        j += 1;
    }
    let (key, newkey) = (&argv[1], &argv[2]);
    if src_db == dst_db && key == newkey {
        return Err(CmdError::Static(error::SAME_OBJECT));
    }
    let db = ctx.db();
    let Some(value) = db.lookup(key).cloned() else {
        return Ok(Reply::Int(0));
    };
    let expire = db.expire_at(key);
    // `dupStringObject` keeps the encoding.
    let encoding = db.encoding_override(key);
    let dst = ctx.db_at(dst_db);
    if !replace && dst.lookup_quiet(newkey).is_some() {
        return Ok(Reply::Int(0));
    }
    // RedisBloom registers no copy callback for t-digests.
    if matches!(value, Value::TDigest(_)) {
        return Err(CmdError::Static(MODULE_NO_COPY));
    }
    let before = dst.dirty;
    dst.remove(newkey);
    dst.insert(newkey.clone(), value);
    dst.set_encoding_override(newkey, encoding);
    if let Some(when) = expire {
        dst.set_expire(newkey, when);
    }
    // One change, as Redis counts it.
    dst.count_changes_since(before, 1);
    dst.notify(events::GENERIC, "copy_to", newkey);
    Ok(Reply::Int(1))
}

/// `MOVE key db` → 1 if moved, 0 if the key is missing or exists in the target database.
/// SWAPDB index1 index2 (Redis's swapdbCommand): the two databases exchange their keys;
/// connections stay on the index they selected, and WATCHes of keys in either fail their EXEC
/// (`Store::swap_dbs`). Replicated as it is. Client-side caches are not invalidated, as in
/// Redis 7.0.
fn swapdb(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let index = |arg: &Bytes, what: &'static str| {
        crate::numeric::int::parse_i64(arg)
            .filter(|n| i32::try_from(*n).is_ok())
            .ok_or(CmdError::Static(what))
    };
    let a = index(&argv[1], "ERR invalid first DB index")?;
    let b = index(&argv[2], "ERR invalid second DB index")?;
    let (Ok(a), Ok(b)) = (usize::try_from(a), usize::try_from(b)) else {
        return Err(CmdError::Static(error::DB_INDEX_RANGE));
    };
    if !ctx.store.swap_dbs(a, b) {
        return Err(CmdError::Static(error::DB_INDEX_RANGE));
    }
    ctx.force_propagation();
    Ok(Reply::ok())
}

fn move_cmd(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let key = &argv[1];
    let target = db_index(ctx, &argv[2])?;
    let source = ctx.client.db;
    if target == source {
        return Err(CmdError::Static(error::SAME_OBJECT));
    }
    let db = ctx.db();
    if db.lookup_quiet(key).is_none() {
        return Ok(Reply::Int(0));
    }
    let expire = db.expire_at(key);
    let encoding = db.encoding_override(key);
    if ctx.db_at(target).lookup_quiet(key).is_some() {
        return Ok(Reply::Int(0));
    }
    let Some(value) = ctx.db().remove(key) else {
        return Ok(Reply::Int(0));
    };
    let dst = ctx.db_at(target);
    let before = dst.dirty;
    dst.insert(key.clone(), value);
    dst.set_encoding_override(key, encoding);
    if let Some(when) = expire {
        dst.set_expire(key, when);
    }
    // One change in all, as Redis counts it: the source's removal.
    dst.count_changes_since(before, 0);
    ctx.db_at(source).notify(events::GENERIC, "move_from", key);
    ctx.db_at(target).notify(events::GENERIC, "move_to", key);
    Ok(Reply::Int(1))
}

// ---------------------------------------------------------------------------------------------
// Expiry
// ---------------------------------------------------------------------------------------------

/// The NX / XX / GT / LT flags of the EXPIRE family.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ExpireFlags {
    pub nx: bool,
    pub xx: bool,
    pub gt: bool,
    pub lt: bool,
}

/// Redis's `parseExtendedExpireArgumentsOrReply`: any number of NX/XX/GT/LT words (repeats allowed),
/// then the compatibility checks.
pub fn parse_expire_flags(opts: &[Bytes]) -> Result<ExpireFlags, CmdError> {
    let mut f = ExpireFlags::default();
    for opt in opts {
        if is_opt(opt, "nx") {
            f.nx = true;
        } else if is_opt(opt, "xx") {
            f.xx = true;
        } else if is_opt(opt, "gt") {
            f.gt = true;
        } else if is_opt(opt, "lt") {
            f.lt = true;
        } else {
            return Err(CmdError::Owned(format!(
                "ERR Unsupported option {}",
                String::from_utf8_lossy(cstr(opt))
            )));
        }
    }
    if f.nx && (f.xx || f.gt || f.lt) {
        return Err(CmdError::Static(error::EXPIRE_NX_AND_OTHERS));
    }
    if f.gt && f.lt {
        return Err(CmdError::Static(error::EXPIRE_GT_AND_LT));
    }
    Ok(f)
}

/// The absolute expiry (unix ms) an EXPIRE-family command asks for, at `now`: `relative`, the
/// time counts from now (EXPIRE, PEXPIRE); `seconds`, it is in seconds (EXPIRE, EXPIREAT).
fn expire_when(
    arg: &[u8],
    now: i64,
    relative: bool,
    seconds: bool,
    name: &str,
) -> Result<i64, CmdError> {
    let mut when = parse_i64(arg).ok_or(CmdError::Static(error::NOT_INTEGER))?;
    if seconds {
        if !(i64::MIN / 1000..=i64::MAX / 1000).contains(&when) {
            return Err(invalid_expire(name));
        }
        when *= 1000;
    }
    let base = if relative { now } else { 0 };
    if when > i64::MAX - base {
        return Err(invalid_expire(name));
    }
    Ok(when + base)
}

/// Whether NX / XX / GT / LT refuse to replace the TTL `current` (-1: none) by `when`.
fn expire_refused(flags: ExpireFlags, current: i64, when: i64) -> bool {
    (flags.nx && current != -1)
        || (flags.xx && current == -1)
        || (flags.gt && (when <= current || current == -1))
        || (flags.lt && current != -1 && when >= current)
}

/// An EXPIRE-family request at `now`: its flags, the absolute expiry it asks for (unix ms) and
/// the command's name ([`expire_variant`]), or the error Redis answers.
fn expire_request(argv: &[Bytes], now: i64) -> Result<(ExpireFlags, i64, &'static str), CmdError> {
    let (relative, seconds, name) = expire_variant(&argv[0]);
    let flags = parse_expire_flags(&argv[3..])?;
    let when = expire_when(&argv[2], now, relative, seconds, name)?;
    Ok((flags, when, name))
}

/// Redis's `expireGenericCommand`: `EXPIRE key seconds [NX|XX|GT|LT]`, `PEXPIRE key
/// milliseconds [...]`, `EXPIREAT key unix-time-seconds [...]`, `PEXPIREAT key
/// unix-time-milliseconds [...]` → 1 if the timeout was set (or the key deleted), else 0.
fn expire(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now_ms as i64;
    let (flags, when, name) = expire_request(argv, now)?;
    let key = &argv[1];
    let db = ctx.db();
    if db.lookup_quiet(key).is_none() {
        return Ok(Reply::Int(0));
    }
    let current = db.expire_at(key).map_or(-1, |w| w as i64);
    if expire_refused(flags, current, when) {
        return Ok(Reply::Int(0));
    }
    if when <= now {
        db.remove(key);
        db.notify(events::GENERIC, "del", key);
        ctx.propagate_as(vec![Bytes::from_static(b"DEL"), key.clone()]);
    } else {
        db.set_expire(key, when as u64);
        db.notify(events::GENERIC, "expire", key);
        // Redis 7.0 writes `PEXPIREAT key ms [flags]`: the name and the time rewritten, the flags
        // kept; PEXPIREAT itself verbatim.
        if ctx.propagating() && name != "pexpireat" {
            let mut rewritten = argv.to_vec();
            rewritten[0] = Bytes::from_static(b"PEXPIREAT");
            rewritten[2] = Bytes::from(when.to_string());
            ctx.propagate_as(rewritten);
        }
    }
    Ok(Reply::Int(1))
}

/// [`expire`] under the shared lock (`commands::shared_path`): a TTL set on a live key where its
/// segment allows (`SharedDb::can_change_ttl`), propagated as the exclusive path writes it
/// (`PEXPIREAT key ms [flags]`). A time already past (EXPIRE then deletes the key, propagated as
/// `DEL`) defers, as does a key that is due.
fn expire_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    let now = db.now_ms() as i64;
    let (flags, when, name) = expire_request(argv, now)?;
    let key = &argv[1];
    if db.read(key).is_none() {
        return Ok(Reply::Int(0));
    }
    let current = db.expiry(key).map_or(-1, |w| w as i64);
    if expire_refused(flags, current, when) {
        return Ok(Reply::Int(0));
    }
    if when <= now || !db.can_change_ttl(key) {
        return super::shared_path::defer(db);
    }
    db.set_ttl(key, when as u64);
    db.wrote();
    if db.propagating() && name != "pexpireat" {
        let when = Decimal::of_i64(when);
        let mut rewritten: SmallVec<[&[u8]; 8]> =
            SmallVec::from_slice(&[&b"PEXPIREAT"[..], key, when.as_bytes()]);
        rewritten.extend(argv[3..].iter().map(|a| &a[..]));
        db.propagate_as(|out| crate::engine::propagate::encode_command(out, &rewritten));
    }
    Ok(Reply::Int(1))
}

/// Which of the EXPIRE family `name` (the command's name as sent) is: whether its time counts
/// from now (EXPIRE, PEXPIRE), whether it is in seconds (EXPIRE, EXPIREAT), and its name for
/// errors. One handler per path serves the four.
fn expire_variant(name: &[u8]) -> (bool, bool, &'static str) {
    if name.eq_ignore_ascii_case(b"expire") {
        (true, true, "expire")
    } else if name.eq_ignore_ascii_case(b"pexpire") {
        (true, false, "pexpire")
    } else if name.eq_ignore_ascii_case(b"expireat") {
        (false, true, "expireat")
    } else {
        (false, false, "pexpireat")
    }
}

/// Redis's `ttlGenericCommand`: -2 for a missing key, -1 without a TTL, else the remaining time
/// (`absolute`: the expiry instant) in ms or rounded seconds. On both paths
/// (`commands::shared_path`).
fn ttl_generic(db: &mut impl ReadView, key: &[u8], ms: bool, absolute: bool) -> CmdResult {
    let now = db.clock() as i64;
    if db.read_notouch(key).is_none() {
        return Ok(Reply::Int(-2));
    }
    let Some(when) = db.expiry(key) else {
        return Ok(Reply::Int(-1));
    };
    let when = when as i64;
    let t = if absolute { when } else { when - now }.max(0);
    Ok(Reply::Int(if ms {
        t
    } else {
        // Redis's `(ttl + 500) / 1000` does not wrap near i64::MAX in practice.
        ((t as i128 + 500) / 1000) as i64
    }))
}

/// `TTL key` → seconds left, -1 without TTL, -2 if missing.
fn ttl(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    ttl_generic(ctx.db(), &argv[1], false, false)
}

fn ttl_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    ttl_generic(db, &argv[1], false, false)
}

/// `PTTL key` → milliseconds left.
fn pttl(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    ttl_generic(ctx.db(), &argv[1], true, false)
}

fn pttl_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    ttl_generic(db, &argv[1], true, false)
}

/// `EXPIRETIME key` → the expiry as a unix time in seconds.
fn expiretime(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    ttl_generic(ctx.db(), &argv[1], false, true)
}

fn expiretime_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    ttl_generic(db, &argv[1], false, true)
}

/// `PEXPIRETIME key` → the expiry as a unix time in milliseconds.
fn pexpiretime(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    ttl_generic(ctx.db(), &argv[1], true, true)
}

fn pexpiretime_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    ttl_generic(db, &argv[1], true, true)
}

/// `PERSIST key` → 1 if a TTL was removed, else 0.
fn persist(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let db = ctx.db();
    let done = db.persist(&argv[1]);
    if done {
        db.notify(events::GENERIC, "persist", &argv[1]);
    }
    Ok(Reply::Int(done as i64))
}

/// PERSIST under the shared lock: the TTL of a live key cleared where its segment allows
/// (`SharedDb::can_change_ttl`), propagated verbatim as on the exclusive path.
fn persist_shared(db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    let key = &argv[1];
    if db.read(key).is_none() || db.expiry(key).is_none() {
        return Ok(Reply::Int(0));
    }
    if !db.can_change_ttl(key) {
        return super::shared_path::defer(db);
    }
    db.clear_ttl(key);
    db.wrote();
    Ok(Reply::Int(1))
}

// ---------------------------------------------------------------------------------------------
// OBJECT
// ---------------------------------------------------------------------------------------------

fn object_container(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Err(CmdError::arity(&String::from_utf8_lossy(&argv[0])))
}

/// `OBJECT ENCODING key` → the encoding name, or null for a missing key.
fn object_encoding(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let db = ctx.db();
    let Some(v) = db.lookup_notouch(&argv[2]) else {
        return Ok(Reply::Null);
    };
    let derived = v.encoding_name();
    Ok(Reply::bulk_str(
        db.encoding_override(&argv[2]).unwrap_or(derived),
    ))
}

fn lfu_policy(ctx: &Ctx) -> bool {
    ctx.config().maxmemory_policy.contains("lfu")
}

/// `OBJECT FREQ key` → the key's LFU counter, decayed to now (`store::access`); an error unless
/// an LFU policy is selected. The look itself is not an access.
fn object_freq(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let Some(bits) = ctx.db().access_of(&argv[2]) else {
        return Ok(Reply::Null);
    };
    if !lfu_policy(ctx) {
        return Err(CmdError::Static(error::OBJECT_FREQ_NO_LFU));
    }
    Ok(Reply::Int(
        crate::store::access::decayed_counter(bits) as i64
    ))
}

/// `OBJECT IDLETIME key` → whole seconds since the key's last access (`store::access`, 1 s
/// resolution as Redis's LRU clock); an error under an LFU policy. The look itself is not an
/// access.
fn object_idletime(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let Some(bits) = ctx.db().access_of(&argv[2]) else {
        return Ok(Reply::Null);
    };
    if lfu_policy(ctx) {
        return Err(CmdError::Static(error::OBJECT_IDLETIME_LFU));
    }
    Ok(Reply::Int(
        (crate::store::access::idle_ms(bits) / 1000) as i64,
    ))
}

/// `OBJECT REFCOUNT key` → 1, or `INT_MAX` for the small integers Redis shares (0..9999).
fn object_refcount(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(match refcount_of(ctx.db(), &argv[2]) {
        None => Reply::Null,
        Some(n) => Reply::Int(n),
    })
}

/// The reference count Redis would show for `key` (OBJECT REFCOUNT, DEBUG OBJECT): `INT_MAX`
/// for the small integers it shares (0..9999), 1 otherwise; `None` for a missing key.
pub(super) fn refcount_of(db: &mut crate::store::Db, key: &[u8]) -> Option<i64> {
    let overridden = db.encoding_override(key).is_some();
    Some(match db.lookup_notouch(key)? {
        Value::Str(s)
            if !overridden
                && s.len() <= 4
                && parse_i64(s).is_some_and(|v| (0..10000).contains(&v)) =>
        {
            i32::MAX as i64
        }
        _ => 1,
    })
}

const OBJECT_HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
];

/// `OBJECT HELP` → the help lines as status replies.
fn object_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    super::help_reply(OBJECT_HELP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_rules() {
        assert_eq!(parse_cursor(b"0"), Some(0));
        assert_eq!(parse_cursor(b"007"), Some(7));
        assert_eq!(parse_cursor(b"+5"), Some(5));
        assert_eq!(parse_cursor(b" 5"), None);
        assert_eq!(parse_cursor(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551616"), None);
        assert_eq!(parse_cursor(b"abc"), None);
        assert_eq!(parse_cursor(b""), Some(0));
        assert_eq!(parse_cursor(b"5 "), None);
    }

    #[test]
    fn expire_flag_rules() {
        let v = |s: &[&str]| {
            s.iter()
                .map(|x| Bytes::copy_from_slice(x.as_bytes()))
                .collect::<Vec<_>>()
        };
        assert!(parse_expire_flags(&v(&["nx", "NX"])).is_ok());
        assert!(parse_expire_flags(&v(&["xx", "gt"])).is_ok());
        assert_eq!(
            parse_expire_flags(&v(&["nx", "gt"])),
            Err(CmdError::Static(error::EXPIRE_NX_AND_OTHERS))
        );
        assert_eq!(
            parse_expire_flags(&v(&["gt", "lt"])),
            Err(CmdError::Static(error::EXPIRE_GT_AND_LT))
        );
        assert_eq!(
            parse_expire_flags(&v(&["foo"])).unwrap_err().to_string(),
            "ERR Unsupported option foo"
        );
    }
}
