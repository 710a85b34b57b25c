//! SAVE, BGSAVE, LASTSAVE, DUMP, RESTORE: the client side of `persistence`.

use bytes::Bytes;

use super::flags::*;
use super::CmdResult;
use super::{cmd, CommandSpec, Ctx};
use crate::error::{self, CmdError};
use crate::persistence::dump::{self, PayloadError};
use crate::persistence::snapshot::{self, BgsaveRefused};
use crate::protocol::Reply;
use crate::store::Value;

/// RESTORE onto an existing key without REPLACE.
pub const BUSYKEY: &str = "BUSYKEY Target key name already exists.";
/// RESTORE with a negative ttl.
pub const INVALID_TTL: &str = "ERR Invalid TTL value, must be >= 0";
/// RESTORE IDLETIME below 0.
pub const INVALID_IDLETIME: &str = "ERR Invalid IDLETIME value, must be >= 0";
/// RESTORE FREQ outside 0..=255.
pub const INVALID_FREQ: &str = "ERR Invalid FREQ value, must be >= 0 and <= 255";
/// RESTORE payload too short, newer than supported, or with a wrong CRC.
pub const BAD_PAYLOAD: &str = "ERR DUMP payload version or checksum are wrong";
/// RESTORE payload whose value does not parse (or a module loader rejects).
pub const BAD_DATA: &str = "ERR Bad data format";
/// SAVE failed (Redis replies with its bare shared `-ERR`).
pub const SAVE_FAILED: &str = "ERR";

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("save", 1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI, 0, 0, 0, "server", "1.0.0", "Synchronously saves the database(s) to disk.", save),
    cmd("bgsave", -1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING, 0, 0, 0, "server", "1.0.0", "Asynchronously saves the database(s) to disk.", bgsave),
    cmd("bgrewriteaof", 1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING, 0, 0, 0, "server", "1.0.0", "Asynchronously rewrites the append-only file to disk.", bgrewriteaof),
    cmd("lastsave", 1, LOADING | STALE | FAST, 0, 0, 0, "server", "1.0.0", "Returns the Unix timestamp of the last successful save to disk.", lastsave),
    cmd("dump", 2, READONLY, 1, 1, 1, "generic", "2.6.0", "Returns a serialized representation of the value stored at a key.", dump_cmd),
    cmd("restore", -4, WRITE | DENYOOM, 1, 1, 1, "generic", "2.6.0", "Creates a key from the serialized representation of a value.", restore_cmd),
];

/// `SAVE` → `+OK`, or `-ERR` when the save failed (the reason goes to the log and INFO).
fn save(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    snapshot::poll_bgsave(ctx.shared, ctx.store);
    if ctx.shared.persistence().job.is_some() {
        return Err(CmdError::Static(error::BGSAVE_IN_PROGRESS));
    }
    match snapshot::save_sync(ctx.shared, ctx.store) {
        Ok(_) => Ok(Reply::ok()),
        Err(_) => Err(CmdError::Static(SAVE_FAILED)),
    }
}

/// `BGSAVE [SCHEDULE]` → `+Background saving started`. As in Redis, SCHEDULE only defers when
/// another kind of background job runs (hyperbloom has none), so a BGSAVE in flight is an error
/// either way.
fn bgsave(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() > 1 && !(argv.len() == 2 && argv[1].eq_ignore_ascii_case(b"schedule")) {
        return Err(CmdError::Static(error::SYNTAX));
    }
    snapshot::poll_bgsave(ctx.shared, ctx.store);
    match snapshot::start_bgsave(ctx.shared, ctx.store) {
        Ok(()) => Ok(Reply::Status("Background saving started")),
        Err(BgsaveRefused::InProgress) => Err(CmdError::Static(error::BGSAVE_IN_PROGRESS)),
        Err(BgsaveRefused::Loading) => Err(CmdError::Static(error::LOADING)),
    }
}

/// `BGREWRITEAOF` → `+Background append only file rewriting started`. The rewrite starts at the
/// server's next cron tick (within 1/hz s): it needs the AOF lock, which is taken before the
/// keyspace lock this handler runs under (`persistence::aof`).
fn bgrewriteaof(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let mut p = ctx.shared.persistence();
    if p.aof_rewrite.is_some() {
        return Err(CmdError::Static(error::AOF_REWRITE_IN_PROGRESS));
    }
    p.aof_rewrite_scheduled = true;
    if p.bgsave_in_progress {
        return Ok(Reply::Status(
            "Background append only file rewriting scheduled",
        ));
    }
    Ok(Reply::Status(
        "Background append only file rewriting started",
    ))
}

/// `LASTSAVE` → unix seconds of the last successful save.
fn lastsave(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    snapshot::poll_bgsave(ctx.shared, ctx.store);
    Ok(Reply::Int(ctx.shared.persistence().last_save_unix as i64))
}

/// `DUMP key` → the serialized value, or null.
fn dump_cmd(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let compression = ctx.config().rdbcompression;
    let db = ctx.db();
    // RedisBloom compresses a t-digest when saving it, visibly (TDIGEST.INFO), but as no write.
    // A look that counts no keyspace hit: the one below is DUMP's read.
    if let Some(Value::TDigest(_)) = db.lookup_quiet(&argv[1]) {
        if let Some(v) = db.lookup_mut_unsignalled(&argv[1]) {
            v.prepare_for_save();
        }
    }
    match db.lookup(&argv[1]) {
        Some(v) => Ok(Reply::bulk(dump::dump(v, compression))),
        None => Ok(Reply::Null),
    }
}

/// `RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]` → `+OK`. Checks run in
/// Redis 7.0's order: options, existing key, ttl, payload footer, value.
fn restore_cmd(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut replace = false;
    let mut absttl = false;
    let mut idle: Option<u64> = None;
    let mut freq: Option<u8> = None;
    let mut j = 4;
    while j < argv.len() {
        let a = &argv[j];
        let more = argv.len() - j - 1;
        if a.eq_ignore_ascii_case(b"replace") {
            replace = true;
        } else if a.eq_ignore_ascii_case(b"absttl") {
            absttl = true;
        } else if a.eq_ignore_ascii_case(b"idletime") && more >= 1 && freq.is_none() {
            let v = crate::numeric::parse_i64(&argv[j + 1])
                .ok_or(CmdError::Static(error::NOT_INTEGER))?;
            if v < 0 {
                return Err(CmdError::Static(INVALID_IDLETIME));
            }
            idle = Some(v as u64);
            j += 1;
        } else if a.eq_ignore_ascii_case(b"freq") && more >= 1 && idle.is_none() {
            let v = crate::numeric::parse_i64(&argv[j + 1])
                .ok_or(CmdError::Static(error::NOT_INTEGER))?;
            if !(0..=255).contains(&v) {
                return Err(CmdError::Static(INVALID_FREQ));
            }
            freq = Some(v as u8);
            j += 1;
        } else {
            return Err(CmdError::Static(error::SYNTAX));
        }
        j += 1;
    }
    let key = argv[1].clone();
    if !replace && ctx.db().contains(&key) {
        return Err(CmdError::Static(BUSYKEY));
    }
    let ttl = crate::numeric::parse_i64(&argv[2]).ok_or(CmdError::Static(error::NOT_INTEGER))?;
    if ttl < 0 {
        return Err(CmdError::Static(INVALID_TTL));
    }
    let value = dump::restore(&argv[3]).map_err(|e| match e {
        PayloadError::Footer => CmdError::Static(BAD_PAYLOAD),
        PayloadError::BadData => CmdError::Static(BAD_DATA),
    })?;
    let now = ctx.now_ms as i64;
    let db = ctx.db();
    let before = db.dirty;
    let deleted = replace && db.delete(&key);
    let when = if ttl == 0 {
        None
    } else if absttl {
        Some(ttl)
    } else {
        Some(ttl.saturating_add(now))
    };
    if let Some(t) = when {
        if t <= now {
            // Already expired: nothing is stored (an existing key was replaced by nothing), and
            // Redis propagates the deletion, if any, as `DEL key`.
            if deleted {
                ctx.propagate_as(vec![Bytes::from_static(b"DEL"), key]);
            }
            return Ok(Reply::ok());
        }
    }
    db.insert(key.clone(), value);
    // One change, as Redis counts it (the replaced key's deletion included).
    db.count_changes_since(before, 1);
    if let Some(t) = when {
        db.set_expire_of_written(&key, t as u64);
        // A relative TTL is written absolute, with ABSTTL appended (Redis 7.0).
        if !absttl && ctx.propagating() {
            let mut rewritten = argv.to_vec();
            rewritten[2] = Bytes::from(t.to_string());
            rewritten.push(Bytes::from_static(b"ABSTTL"));
            ctx.propagate_as(rewritten);
        }
    }
    // IDLETIME under a non-LFU policy, FREQ under an LFU one, as Redis's `objectSetLRUOrLFU`
    // (the other is accepted and has no effect).
    if let Some(bits) = crate::store::access::loaded(idle, freq) {
        ctx.db().set_access_of(&key, bits);
    }
    Ok(Reply::ok())
}
