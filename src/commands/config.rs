//! CONFIG GET / SET / RESETSTAT / REWRITE over the directive table in `crate::config`.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::CmdResult;
use super::{cmd, flags::*, CommandSpec, Ctx};
use crate::error::CmdError;
use crate::protocol::Reply;

#[rustfmt::skip]
pub const SUBCOMMANDS: &[CommandSpec] = &[
    cmd("config|get", -3, ADMIN | NOSCRIPT | LOADING | STALE, 0, 0, 0, "server", "2.0.0", "Returns the effective values of configuration parameters.", config_get),
    cmd("config|set", -4, ADMIN | NOSCRIPT | LOADING | STALE, 0, 0, 0, "server", "2.0.0", "Sets configuration parameters in-flight.", config_set),
    cmd("config|resetstat", 2, ADMIN | NOSCRIPT | LOADING | STALE, 0, 0, 0, "server", "2.0.0", "Resets the server's statistics.", config_resetstat),
    cmd("config|rewrite", 2, ADMIN | NOSCRIPT | LOADING | STALE, 0, 0, 0, "server", "2.8.0", "Persists the effective configuration to file.", config_rewrite),
    cmd("config|help", 2, LOADING | STALE, 0, 0, 0, "server", "5.0.0", "Returns helpful text about the different subcommands.", config_help),
];

// ---------------------------------------------------------------------------------------------
// CONFIG
// ---------------------------------------------------------------------------------------------

fn config_get(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let config = ctx.config();
    let mut pairs: Vec<(String, String)> = Vec::new();
    for pattern in &argv[2..] {
        // Redis's configGetCommand: a name without glob characters is looked up directly (hidden
        // configs included); a pattern skips the hidden ones.
        let is_glob = pattern.iter().any(|b| matches!(b, b'*' | b'?' | b'['));
        for d in crate::config::DIRECTIVES {
            if is_glob && crate::config::hidden_default(d.name).is_some() {
                continue;
            }
            if crate::glob::matches(pattern, d.name.as_bytes(), true)
                && !pairs.iter().any(|(n, _)| n == d.name)
            {
                pairs.push((d.name.to_string(), (d.get)(&config)));
            }
        }
        for a in crate::config::accepted::ACCEPTED {
            if crate::glob::matches(pattern, a.name.as_bytes(), true)
                && !pairs.iter().any(|(n, _)| n == a.name)
            {
                pairs.push((a.name.to_string(), config.accepted_value(a)));
            }
        }
    }
    Ok(Reply::Map(
        pairs
            .into_iter()
            .map(|(n, v)| (Reply::Bulk(Bytes::from(n)), Reply::Bulk(Bytes::from(v))))
            .collect(),
    ))
}

fn config_set(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if !argv.len().is_multiple_of(2) {
        return Err(CmdError::arity("config|set"));
    }
    let mut updated = ctx.config().clone();
    for pair in argv[2..].chunks(2) {
        let name = String::from_utf8_lossy(&pair[0]).into_owned();
        let value = String::from_utf8_lossy(&pair[1]).into_owned();
        let Some(d) = crate::config::find(&name) else {
            if let Some(a) = crate::config::accepted::find(&name) {
                set_accepted(&mut updated, a, &name, value)?;
                continue;
            }
            return Err(CmdError::Owned(format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
            )));
        };
        if !d.mutable {
            return Err(CmdError::Owned(format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - can't set immutable config"
            )));
        }
        if crate::config::is_protected(d.name)
            && !crate::config::allows_protected(
                &updated.enable_protected_configs,
                ctx.client.handle.addr.is_local(),
            )
        {
            return Err(CmdError::Owned(format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - can't set protected config"
            )));
        }
        let set = if d.name == crate::config::OBUF_DIRECTIVE {
            // Redis splits this multi-argument config's CONFIG SET value on single spaces.
            let words = crate::config::obuf::config_set_words(&value);
            crate::config::obuf::set_words(&mut updated.client_obuf_limits, &words)
        } else {
            (d.set)(&mut updated, &[value])
        };
        if let Err(why) = set {
            return Err(CmdError::Owned(format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
            )));
        }
    }
    ctx.shared.apply_memory_config(&updated);
    ctx.store.set_notify_flags(updated.notify_keyspace_events);
    // Deliveries to subscribers apply the pubsub class under the keyspace lock, which this holds.
    ctx.pubsub.limit = Some(updated.client_obuf_limits.pubsub);
    ctx.pubsub.monitor_limit = Some(updated.client_obuf_limits.monitor());
    ctx.pubsub.tracking.max_keys = updated.tracking_table_max_keys;
    // A new password does not log out connected clients, as in Redis.
    ctx.shared.replace_config(updated);
    Ok(Reply::ok())
}

/// CONFIG SET of an accepted, not implemented directive: stored for CONFIG GET (and REWRITE),
/// refused where Redis makes it immutable, logged because it changes nothing.
fn set_accepted(
    updated: &mut crate::config::Config,
    a: &'static crate::config::accepted::Accepted,
    name: &str,
    value: String,
) -> Result<(), CmdError> {
    if !a.mutable {
        return Err(CmdError::Owned(format!(
            "ERR CONFIG SET failed (possibly related to argument '{name}') - can't set immutable config"
        )));
    }
    let words: Vec<String> = value.split_whitespace().map(String::from).collect();
    let words = if words.is_empty() { vec![value] } else { words };
    if let Err(why) = updated.accept(a, &words) {
        return Err(CmdError::Owned(format!(
            "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
        )));
    }
    tracing::warn!(
        "CONFIG SET {}: accepted, but hyperbloom does not implement this directive",
        a.name
    );
    Ok(())
}

fn config_resetstat(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    for s in ctx.command_stats().iter_mut() {
        *s = Default::default();
    }
    ctx.error_stats.clear();
    let s = &ctx.shared.stats;
    for c in [
        &s.connections_received,
        &s.rejected_connections,
        &s.expired_keys,
        &s.evicted_keys,
        &s.net_input_bytes,
        &s.net_output_bytes,
        &s.keyspace_hits,
        &s.keyspace_misses,
    ] {
        c.store(0, Ordering::Relaxed);
    }
    for db in ctx.store.dbs.iter_mut() {
        db.lazy_expired = 0;
        db.keyspace_hits = 0;
        db.keyspace_misses = 0;
    }
    Ok(Reply::ok())
}

fn config_rewrite(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let config = ctx.config().clone();
    let Some(path) = config.config_file.clone() else {
        return Err(CmdError::Static(
            "ERR The server is running without a config file",
        ));
    };
    match rewrite_file(std::path::Path::new(&path), &config) {
        Ok(()) => Ok(Reply::ok()),
        Err(e) => {
            tracing::warn!("CONFIG REWRITE failed: {e}");
            Err(CmdError::Owned(format!(
                "ERR Rewriting config file: {}",
                crate::error::strerror(&e)
            )))
        }
    }
}

/// Edits the file in place of the old one (`Config::rewrite`: its comments and layout kept) and
/// swaps it in whole: written beside it, flushed to disk, renamed over it, then the directory
/// flushed, so a crash leaves the old file or the new one, never half of each. The old file's permissions are kept. A
/// file that is gone is written from scratch, as Redis does.
fn rewrite_file(path: &std::path::Path, config: &crate::config::Config) -> std::io::Result<()> {
    use std::io::Write;
    let (old, permissions) = match std::fs::read_to_string(path) {
        Ok(text) => (text, std::fs::metadata(path).ok().map(|m| m.permissions())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (String::new(), None),
        Err(e) => return Err(e),
    };
    let text = config.rewrite(&old);
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".tmp-{}", std::process::id()));
    let tmp = std::path::PathBuf::from(name);
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        if let Some(p) = permissions {
            f.set_permissions(p)?;
        }
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return written;
    }
    // The rename itself is durable only once the directory is: without this, a crash soon after
    // a Sentinel failover's rewrite could bring the old file back.
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    std::fs::File::open(dir).and_then(|d| d.sync_all())
}

/// `CONFIG HELP`, Redis 7.0.15's text.
const CONFIG_HELP: &[&str] = &[
    "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
    "HELP",
    "    Prints this help.",
];

fn config_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    super::help_reply(CONFIG_HELP)
}
