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
        _ => Err(CmdError::Owned(format!(
            "ERR unknown subcommand '{}'. Try DEBUG HELP.",
            String::from_utf8_lossy(&argv[1])
        ))),
    }
}
