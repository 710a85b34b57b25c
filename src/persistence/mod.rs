//! Persistence hooks the server calls: load at startup, save points in the cron, save at shutdown.
//!
//! The RDB reader and writer live in this module's children (the persistence issue); these hooks are
//! the only entry points the server uses.

use crate::server::Shared;

/// Why loading the snapshot at startup failed. Startup stops with this message.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}")]
    Invalid(String),
}

/// Loads `dir/dbfilename` if it exists.
pub fn load_at_startup(_shared: &Shared) -> Result<(), LoadError> {
    Ok(())
}

/// Called on SIGTERM/SIGINT: saves when save points are configured.
pub fn save_on_shutdown(_shared: &Shared) {}

/// Called by the server cron: starts a background save when a save point is reached.
pub fn cron(_shared: &std::sync::Arc<Shared>) {}

/// SHUTDOWN's save (inside the keyspace lock, as Redis's SHUTDOWN blocks).
pub fn save_for_shutdown(_ctx: &mut crate::commands::Ctx) -> Result<(), String> {
    Err("persistence is not implemented yet".into())
}

/// DEBUG RELOAD: save, empty the keyspace, load the file back.
pub fn debug_reload(_ctx: &mut crate::commands::Ctx) -> crate::error::CmdResult {
    Err(crate::error::CmdError::Static(
        "ERR DEBUG RELOAD needs persistence, not implemented yet",
    ))
}
