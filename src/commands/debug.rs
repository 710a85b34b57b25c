//! DEBUG: the test hooks Redis ships in the server (OBJECT, RELOAD, SLEEP, …).

use bytes::Bytes;

use super::{CmdResult, Ctx};
use crate::error::{self, CmdError};
use crate::protocol::Reply;

// ---------------------------------------------------------------------------------------------
// DEBUG
// ---------------------------------------------------------------------------------------------

pub(super) fn debug(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    // `enable-debug-command` is checked by the dispatcher, before authentication, as in Redis.
    let sub = argv[1].to_ascii_lowercase();
    match sub.as_slice() {
        b"sleep" => {
            let secs = argv
                .get(2)
                .and_then(|a| crate::numeric::parse_f64(a))
                .ok_or(CmdError::Static(error::SYNTAX))?;
            if secs > 0.0 {
                // Like Redis, DEBUG SLEEP blocks the server: it sleeps holding the keyspace lock.
                std::thread::sleep(std::time::Duration::from_secs_f64(secs.min(3600.0)));
            }
            Ok(Reply::ok())
        }
        b"set-active-expire" => Ok(Reply::ok()),
        b"reload" => match crate::persistence::debug_reload(ctx.shared, ctx.store) {
            Ok(()) => Ok(Reply::ok()),
            Err(crate::persistence::ReloadError::Save(_)) => {
                Err(CmdError::Static("ERR Error trying to save the DB"))
            }
            Err(crate::persistence::ReloadError::Load(_)) => Err(CmdError::Static(
                "ERR Error trying to load the RDB dump, check server logs.",
            )),
        },
        // DEBUG AOF-FLUSH-SLEEP <microsec>: the AOF writer sleeps that long before each write
        // (Redis's aof_flush_sleep; tests use it to hold writes back from the file).
        b"aof-flush-sleep" => {
            let us = argv
                .get(2)
                .and_then(|a| crate::numeric::parse_i64(a))
                .filter(|&v| v >= 0)
                .ok_or(CmdError::Static(error::SYNTAX))?;
            ctx.shared
                .aof_commit
                .flush_sleep_us
                .store(us as u64, std::sync::atomic::Ordering::Relaxed);
            Ok(Reply::ok())
        }
        b"jmap" | b"quicklist-packed-threshold" => Ok(Reply::ok()),
        b"object" if argv.len() == 3 => debug_object(ctx, &argv[2]),
        _ => Err(CmdError::Owned(format!(
            "ERR unknown subcommand '{}'. Try DEBUG HELP.",
            String::from_utf8_lossy(&argv[1])
        ))),
    }
}

/// `DEBUG OBJECT key`: Redis's status line, `Value at:<address> refcount:<n> encoding:<name>
/// serializedlength:<bytes> lru:<bits> lru_seconds_idle:<s>`. The address is the value's in this
/// process; `serializedlength` is the length of the value's RDB encoding, compressed as
/// `rdbcompression` says (`persistence::dump::serialized_len`); `lru` the key's raw access bits
/// (`store::access`: under an LFU policy a counter, which `lru_seconds_idle` reads as a clock,
/// as Redis's does). Neither a lookup nor an access.
fn debug_object(ctx: &mut Ctx, key: &[u8]) -> CmdResult {
    let compression = ctx.config().rdbcompression;
    let db = ctx.db();
    let Some(bits) = db.access_of(key) else {
        return Err(CmdError::Static(error::NO_SUCH_KEY));
    };
    let refcount = super::keyspace::refcount_of(db, key).unwrap_or(1);
    let encoding = db.encoding_override(key);
    let Some(value) = db.lookup_notouch(key) else {
        return Err(CmdError::Static(error::NO_SUCH_KEY));
    };
    let encoding = encoding.unwrap_or(value.encoding_name());
    let serialized = crate::persistence::dump::serialized_len(value, compression);
    let line = format!(
        "Value at:{:p} refcount:{refcount} encoding:{encoding} serializedlength:{serialized} lru:{bits} lru_seconds_idle:{}",
        value as *const _,
        crate::store::access::idle_ms(bits) / 1000
    );
    Ok(Reply::StatusOwned(Bytes::from(line)))
}
