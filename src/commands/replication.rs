//! REPLCONF, PSYNC, SYNC, WAIT, ROLE, REPLICAOF/SLAVEOF, SCRIPT KILL, INFO replication: the
//! command side of replication. The handlers only change state and ask the connection to switch
//! modes (`Action::Replicate`, `Action::Wait`); the sockets are `server/`'s (replica links in
//! `server::replica`, the link to our primary in `server::link`), the protocol decisions are in
//! `crate::replication`.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::flags::*;
use super::{cmd, Action, ClientState, CmdResult, CommandSpec, Ctx};
use crate::engine::repl::{MasterLink, ReplState, ReplicaState};
use crate::engine::Shared;
use crate::error::{self, CmdError};
use crate::protocol::Reply;

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("replconf", -1, ADMIN | NOSCRIPT | LOADING | STALE | ALLOW_BUSY, 0, 0, 0, "server", "3.0.0", "An internal command for configuring the replication stream.", replconf),
    cmd("psync", -3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI, 0, 0, 0, "server", "2.8.0", "An internal command used in replication.", psync),
    cmd("sync", 1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI, 0, 0, 0, "server", "1.0.0", "An internal command used in replication.", sync),
    cmd("wait", 3, NOSCRIPT, 0, 0, 0, "generic", "3.0.0", "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.", wait),
    cmd("role", 1, NOSCRIPT | LOADING | STALE | FAST, 0, 0, 0, "server", "2.8.12", "Returns the replication role.", role),
    cmd("replicaof", 3, ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING, 0, 0, 0, "server", "5.0.0", "Configures a server as replica of another, or promotes it to a master.", replicaof),
    cmd("slaveof", 3, ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING, 0, 0, 0, "server", "1.0.0", "Sets a Redis server as a replica of another, or promotes it to being a master.", replicaof),
    CommandSpec { subcommands: SCRIPT_SUBCOMMANDS, ..cmd("script", -2, 0, 0, 0, 0, "scripting", "2.6.0", "A container for Lua scripts management commands.", script_help) },
];

#[rustfmt::skip]
const SCRIPT_SUBCOMMANDS: &[CommandSpec] = &[
    cmd("script|kill", 2, NOSCRIPT | ALLOW_BUSY, 0, 0, 0, "scripting", "2.6.0", "Terminates a server-side Lua script during execution.", script_kill),
    cmd("script|help", 2, LOADING | STALE, 0, 0, 0, "scripting", "5.0.0", "Returns helpful text about the different subcommands.", script_help_lines),
];

/// Refusals that depend on the replication role, checked by the dispatcher before the others:
/// writes on a read-only replica, every non-`stale` command while the link is down with
/// `replica-serve-stale-data no`, and writes below `min-replicas-to-write`.
#[inline]
pub fn refuse(
    shared: &Shared,
    repl: &ReplState,
    client: &ClientState,
    spec: &CommandSpec,
    now_ms: u64,
) -> Option<CmdError> {
    // Inlined up to here: on a primary, only a write can be refused (~16 instructions a command
    // saved on the rest, callgrind, issue 15).
    if !role_may_refuse(repl, client, spec) {
        return None;
    }
    refuse_by_role(shared, repl, spec, now_ms)
}

/// False when the server's role cannot refuse `spec`: the primary's own link, or a primary
/// serving anything but a write.
#[inline]
fn role_may_refuse(repl: &ReplState, client: &ClientState, spec: &CommandSpec) -> bool {
    !(client.is_master || (repl.master.is_none() && !spec.has(WRITE)))
}

/// Whether [`refuse`] refuses, for a caller that only falls back (the shared path): no
/// `Option<CmdError>` to drop on the common path.
#[inline]
pub fn refuses(
    shared: &Shared,
    repl: &ReplState,
    client: &ClientState,
    spec: &CommandSpec,
    now_ms: u64,
) -> bool {
    role_may_refuse(repl, client, spec) && refuse_by_role(shared, repl, spec, now_ms).is_some()
}

#[inline(never)]
fn refuse_by_role(
    shared: &Shared,
    repl: &ReplState,
    spec: &CommandSpec,
    now_ms: u64,
) -> Option<CmdError> {
    let knobs = &shared.repl_knobs;
    if let Some(m) = &repl.master {
        if spec.has(WRITE) && knobs.read_only.load(Ordering::Relaxed) {
            return Some(CmdError::Static(error::READONLY));
        }
        if m.state != "connected" && !spec.has(STALE) && !knobs.serve_stale.load(Ordering::Relaxed)
        {
            return Some(CmdError::Static(error::MASTERDOWN));
        }
        return None;
    }
    if spec.has(WRITE) {
        let min = knobs.min_replicas_to_write.load(Ordering::Relaxed);
        if min > 0 {
            let lag = knobs.min_replicas_max_lag.load(Ordering::Relaxed);
            if (repl.good_replicas(now_ms, lag) as u64) < min {
                return Some(CmdError::Static(error::NOREPLICAS));
            }
        }
    }
    None
}

/// `REPLCONF <option> <value> ...` → `+OK`. Remembers what a replica says before its PSYNC;
/// `ACK`/`GETACK` reach a plain connection only by mistake and get no reply, as in Redis.
fn replconf(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len().is_multiple_of(2) {
        return Err(CmdError::Static(error::SYNTAX));
    }
    for pair in argv[1..].chunks(2) {
        let (opt, val) = (&pair[0], &pair[1]);
        let opt = String::from_utf8_lossy(opt).to_ascii_lowercase();
        match opt.as_str() {
            "listening-port" => {
                let port = std::str::from_utf8(val)
                    .ok()
                    .and_then(|s| s.parse::<u16>().ok())
                    .ok_or(CmdError::Static(error::NOT_INTEGER))?;
                ctx.client.replconf.listening_port = Some(port);
            }
            "ip-address" => {
                ctx.client.replconf.ip_address = Some(String::from_utf8_lossy(val).into_owned());
            }
            "capa" => {
                if val.eq_ignore_ascii_case(b"eof") {
                    ctx.client.replconf.capa_eof = true;
                } else if val.eq_ignore_ascii_case(b"psync2") {
                    ctx.client.replconf.capa_psync2 = true;
                }
            }
            "ack" | "getack" | "fack" => return Ok(Reply::Raw(Bytes::new())),
            "rdb-only" | "rdb-filter-only" => {}
            _ => {
                return Err(CmdError::Owned(format!(
                    "ERR Unrecognized REPLCONF option: {}",
                    String::from_utf8_lossy(&pair[0])
                )))
            }
        }
    }
    Ok(Reply::ok())
}

/// `PSYNC <replid> <offset>`: the connection turns into a replica link; the `+FULLRESYNC` or
/// `+CONTINUE` line is written by `server::replica`.
fn psync(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    start_sync(ctx, argv[1].clone(), argv[2].clone())
}

/// `SYNC`: the pre-PSYNC protocol; always a full resync.
fn sync(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    start_sync(ctx, Bytes::from_static(b"?"), Bytes::from_static(b"-1"))
}

fn start_sync(ctx: &mut Ctx, replid: Bytes, offset: Bytes) -> CmdResult {
    if ctx.client.multi.is_some() {
        return Err(CmdError::Static(error::REPLICA_IN_MULTI));
    }
    if let Some(m) = &ctx.repl.master {
        if m.state != "connected" {
            return Err(CmdError::Static(error::NOMASTERLINK));
        }
    }
    ctx.client.action = Some(Action::Replicate { replid, offset });
    Ok(Reply::Raw(Bytes::new()))
}

/// `WAIT numreplicas timeout` → the number of replicas that acknowledged every write made before
/// it (the connection blocks until enough did or the timeout passed).
fn wait(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if ctx.repl.master.is_some() {
        return Err(CmdError::Static(error::WAIT_ON_REPLICA));
    }
    let n = crate::numeric::parse_i64(&argv[1]).ok_or(CmdError::Static(error::NOT_INTEGER))?;
    let t =
        crate::numeric::parse_i64(&argv[2]).ok_or(CmdError::Static(error::TIMEOUT_NOT_INTEGER))?;
    if t < 0 {
        return Err(CmdError::Static(error::TIMEOUT_NEGATIVE));
    }
    let offset = ctx.repl.offset;
    let acked = ctx.repl.acked(offset);
    if n <= 0 || acked as i64 >= n || ctx.client.multi.is_some() {
        return Ok(Reply::Int(acked as i64));
    }
    ctx.client.action = Some(Action::Wait {
        numreplicas: n as usize,
        timeout_ms: t as u64,
        offset,
    });
    Ok(Reply::Raw(Bytes::new()))
}

/// `ROLE` → `[master, offset, [[ip, port, offset]...]]` or
/// `[slave, host, port, state, offset]`.
fn role(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let r = &ctx.repl;
    if let Some(m) = &r.master {
        let offset = if m.state == "connected" {
            r.offset as i64
        } else {
            -1
        };
        return Ok(Reply::Array(vec![
            Reply::bulk_str("slave"),
            Reply::bulk(Bytes::from(m.host.clone())),
            Reply::Int(m.port as i64),
            Reply::bulk_str(m.state),
            Reply::Int(offset),
        ]));
    }
    let replicas = r
        .replicas
        .values()
        .filter(|x| x.state == ReplicaState::Online)
        .map(|x| {
            Reply::Array(vec![
                Reply::bulk(Bytes::from(x.ip.clone())),
                Reply::bulk(Bytes::from(x.port.to_string())),
                Reply::bulk(Bytes::from(x.ack_offset.to_string())),
            ])
        })
        .collect();
    Ok(Reply::Array(vec![
        Reply::bulk_str("master"),
        Reply::Int(r.offset as i64),
        Reply::Array(replicas),
    ]))
}

/// `REPLICAOF host port` / `REPLICAOF NO ONE` (and SLAVEOF).
fn replicaof(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv[1].eq_ignore_ascii_case(b"no") && argv[2].eq_ignore_ascii_case(b"one") {
        if ctx.repl.master.is_some() {
            promote(ctx.shared, ctx.repl);
            tracing::info!(
                "MASTER MODE enabled (user request from client {})",
                ctx.client.handle.id
            );
        }
        return Ok(Reply::ok());
    }
    let port = std::str::from_utf8(&argv[2])
        .ok()
        .and_then(|s| s.parse::<u16>().ok())
        .filter(|p| *p > 0)
        .ok_or(CmdError::Static(error::INVALID_MASTER_PORT))?;
    let host = String::from_utf8_lossy(&argv[1]).into_owned();
    if let Some(m) = &ctx.repl.master {
        if m.host.eq_ignore_ascii_case(&host) && m.port == port {
            return Ok(Reply::Status("OK Already connected to specified master"));
        }
    }
    set_master(ctx.shared, ctx.repl, host.clone(), port, ctx.now_ms);
    tracing::info!(
        "REPLICAOF {host}:{port} enabled (user request from client {})",
        ctx.client.handle.id
    );
    Ok(Reply::ok())
}

/// Makes this server a replica of `host:port` (REPLICAOF, or `replicaof` in the config): our
/// replicas are disconnected so they resync with the new history, and the link supervisor
/// (`server::link`) is told to connect.
pub fn set_master(shared: &Shared, repl: &mut ReplState, host: String, port: u16, now_ms: u64) {
    repl.generation += 1;
    repl.master = Some(MasterLink {
        host: host.clone(),
        port,
        state: "connect",
        last_io_ms: now_ms,
        down_since_ms: now_ms,
        sync_left: -1,
        sync_read: 0,
        generation: repl.generation,
    });
    // Keep our own history as the "cached master": PSYNC <our id> <our offset + 1> lets a
    // promoted former replica continue us from its replid2.
    let size = shared.config().repl_backlog_size as usize;
    repl.ensure_backlog(size);
    disconnect_replicas(shared, repl);
    let mut c = shared.config().clone();
    c.replicaof = Some((host, port));
    shared.replace_config(c);
    shared.repl_target.send_replace(repl.generation);
}

/// REPLICAOF NO ONE: a new history starts here; the old id stays valid up to this offset.
pub fn promote(shared: &Shared, repl: &mut ReplState) {
    repl.generation += 1;
    repl.master = None;
    repl.shift_replid(crate::engine::shared::new_run_id());
    let size = shared.config().repl_backlog_size as usize;
    repl.ensure_backlog(size);
    // Replicas of ours learn the new id through +CONTINUE <id> when they reconnect.
    disconnect_replicas(shared, repl);
    let mut c = shared.config().clone();
    c.replicaof = None;
    shared.replace_config(c);
    shared.repl_target.send_replace(repl.generation);
}

/// Closes every replica link (they reconnect and PSYNC).
pub fn disconnect_replicas(shared: &Shared, repl: &ReplState) {
    let clients = shared.clients();
    for id in repl.replicas.keys() {
        if let Some(h) = clients.get(id) {
            h.kill();
        }
    }
}

fn script_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Err(CmdError::Owned(
        "ERR unknown subcommand or wrong number of arguments for 'script' command".into(),
    ))
}

/// `SCRIPT KILL` → `-NOTBUSY`: hyperbloom runs no scripts (Sentinel sends it before failing
/// over).
fn script_kill(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Err(CmdError::Static(error::NOTBUSY))
}

/// INFO's `# Replication` section with Redis 7.0's fields in Redis's order.
pub fn info_section(shared: &Shared, repl: &ReplState, now_ms: u64) -> String {
    let c = shared.config();
    let mut out = String::from("# Replication\r\n");
    if let Some(m) = &repl.master {
        let up = m.state == "connected";
        let _ = write!(
            out,
            "role:slave\r\nmaster_host:{}\r\nmaster_port:{}\r\nmaster_link_status:{}\r\nmaster_last_io_seconds_ago:{}\r\nmaster_sync_in_progress:{}\r\nslave_read_repl_offset:{}\r\nslave_repl_offset:{}\r\n",
            m.host,
            m.port,
            if up { "up" } else { "down" },
            if up || m.state == "sync" {
                (now_ms.saturating_sub(m.last_io_ms) / 1000) as i64
            } else {
                -1
            },
            (m.state == "sync") as u8,
            repl.offset,
            repl.offset,
        );
        if m.state == "sync" {
            let total = if m.sync_left >= 0 {
                m.sync_left + m.sync_read as i64
            } else {
                -1
            };
            let perc = if total > 0 {
                m.sync_read as f64 * 100.0 / total as f64
            } else {
                0.0
            };
            let _ = write!(
                out,
                "master_sync_total_bytes:{total}\r\nmaster_sync_read_bytes:{}\r\nmaster_sync_left_bytes:{}\r\nmaster_sync_perc:{perc:.2}\r\nmaster_sync_last_io_seconds_ago:{}\r\n",
                m.sync_read,
                m.sync_left,
                now_ms.saturating_sub(m.last_io_ms) / 1000
            );
        }
        if !up {
            let _ = write!(
                out,
                "master_link_down_since_seconds:{}\r\n",
                now_ms.saturating_sub(m.down_since_ms) / 1000
            );
        }
        let _ = write!(
            out,
            "slave_priority:{}\r\nslave_read_only:{}\r\nreplica_announced:{}\r\n",
            c.replica_priority, c.replica_read_only as u8, c.replica_announced as u8
        );
    } else {
        out.push_str("role:master\r\n");
    }
    let online: Vec<_> = repl.replicas.values().collect();
    let _ = write!(out, "connected_slaves:{}\r\n", online.len());
    if c.min_replicas_to_write > 0 && c.min_replicas_max_lag > 0 {
        let _ = write!(
            out,
            "min_slaves_good_slaves:{}\r\n",
            repl.good_replicas(now_ms, c.min_replicas_max_lag)
        );
    }
    for (i, r) in online.iter().enumerate() {
        let _ = write!(
            out,
            "slave{i}:ip={},port={},state={},offset={},lag={}\r\n",
            r.ip,
            r.port,
            r.state.name(),
            r.ack_offset,
            now_ms.saturating_sub(r.ack_ms) / 1000
        );
    }
    let (active, first, histlen) = match &repl.backlog {
        Some(b) => (1, b.first_byte_offset(), b.histlen()),
        None => (0, 0, 0),
    };
    let _ = write!(
        out,
        "master_failover_state:no-failover\r\nmaster_replid:{}\r\nmaster_replid2:{}\r\nmaster_repl_offset:{}\r\nsecond_repl_offset:{}\r\nrepl_backlog_active:{active}\r\nrepl_backlog_size:{}\r\nrepl_backlog_first_byte_offset:{first}\r\nrepl_backlog_histlen:{histlen}\r\n",
        repl.replid,
        repl.replid2,
        repl.offset,
        repl.second_offset,
        c.repl_backlog_size,
    );
    out
}

/// `SCRIPT HELP`, Redis 7.0.15's text.
const SCRIPT_HELP: &[&str] = &[
    "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
    "HELP",
    "    Prints this help.",
];

/// SCRIPT HELP names Redis's subcommands; hyperbloom runs no scripts and serves KILL (for
/// Sentinel) and HELP.
fn script_help_lines(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    super::help_reply(SCRIPT_HELP)
}
