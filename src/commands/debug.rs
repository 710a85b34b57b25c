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
        b"jmap" | b"quicklist-packed-threshold" => Ok(Reply::ok()),
        _ => Err(CmdError::Owned(format!(
            "ERR unknown subcommand '{}'. Try DEBUG HELP.",
            String::from_utf8_lossy(&argv[1])
        ))),
    }
}
