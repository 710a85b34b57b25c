//! Connection and server commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT, RESET, DBSIZE, TIME,
//! MODULE, FLUSHDB, FLUSHALL, FUNCTION, SHUTDOWN, MEMORY — and the table entries of the server
//! family, whose larger members live beside this file: CLIENT in `client.rs`, INFO in `info.rs`,
//! CONFIG in `config.rs`, DEBUG in `debug.rs`, COMMAND in `introspection.rs`.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::client::{set_client_name, valid_name};
use super::CmdResult;
use super::{cmd, flags::*, Action, Args, CommandSpec, Ctx};
use crate::error::{self, CmdError};
use crate::protocol::Reply;
use crate::store::db::SharedDb;

const fn container(
    name: &'static str,
    flags: u32,
    summary: &'static str,
    subcommands: &'static [CommandSpec],
) -> CommandSpec {
    CommandSpec {
        name,
        arity: -2,
        flags,
        first_key: 0,
        last_key: 0,
        step: 0,
        group: "server",
        since: "2.0.0",
        summary,
        handler: no_direct_call,
        subcommands,
        shared: None,
        shared_parallel_only: false,
    }
}

pub(super) fn no_direct_call(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Err(CmdError::unknown_command(argv))
}

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("ping", -1, FAST, 0, 0, 0, "connection", "1.0.0", "Returns the server's liveliness response.", ping).shared_read(ping_shared),
    cmd("echo", 2, LOADING | STALE | FAST, 0, 0, 0, "connection", "1.0.0", "Returns the given string.", echo).shared_read(echo_shared),
    cmd("hello", -1, NOSCRIPT | LOADING | STALE | FAST | NOAUTH | ALLOW_BUSY, 0, 0, 0, "connection", "6.0.0", "Handshakes with the Redis server.", hello),
    cmd("auth", -2, NOSCRIPT | LOADING | STALE | FAST | NOAUTH | ALLOW_BUSY, 0, 0, 0, "connection", "1.0.0", "Authenticates the connection.", auth),
    cmd("select", 2, LOADING | STALE | FAST, 0, 0, 0, "connection", "1.0.0", "Changes the selected database.", select),
    cmd("quit", -1, NOSCRIPT | LOADING | STALE | FAST | NOAUTH | ALLOW_BUSY, 0, 0, 0, "connection", "1.0.0", "Closes the connection.", quit),
    cmd("reset", 1, NOSCRIPT | LOADING | STALE | FAST | NOAUTH | ALLOW_BUSY, 0, 0, 0, "connection", "6.2.0", "Resets the connection.", reset),
    cmd("monitor", 1, ADMIN | NOSCRIPT | LOADING | STALE, 0, 0, 0, "server", "1.0.0", "Listens for all requests received by the server in real-time.", monitor),
    container("client", 0, "A container for client connection commands.", super::client::SUBCOMMANDS),
    cmd("info", -1, LOADING | STALE, 0, 0, 0, "server", "1.0.0", "Returns information and statistics about the server.", super::info::info),
    container("config", 0, "A container for server configuration commands.", super::config::SUBCOMMANDS),
    cmd("dbsize", 1, READONLY | FAST, 0, 0, 0, "server", "1.0.0", "Returns the number of keys in the database.", dbsize),
    cmd("time", 1, LOADING | STALE | FAST, 0, 0, 0, "server", "2.6.0", "Returns the server time.", time),
    container("module", 0, "A container for module commands.", MODULE_SUBCOMMANDS),
    cmd("flushdb", -1, WRITE, 0, 0, 0, "server", "1.0.0", "Removes all keys from the current database.", flushdb),
    cmd("flushall", -1, WRITE, 0, 0, 0, "server", "1.0.0", "Removes all keys from all databases.", flushall),
    container("function", 0, "A container for function commands.", FUNCTION_SUBCOMMANDS),
    cmd("shutdown", -1, ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | ALLOW_BUSY, 0, 0, 0, "server", "1.0.0", "Synchronously saves the database(s) to disk and shuts down the Redis server.", shutdown),
    container("memory", 0, "A container for memory diagnostics commands.", MEMORY_SUBCOMMANDS),
    container("slowlog", 0, "A container for slow log commands.", SLOWLOG_SUBCOMMANDS),
    cmd("debug", -2, ADMIN | NOSCRIPT | LOADING | STALE | PROTECTED, 0, 0, 0, "server", "1.0.0", "A container for debugging commands.", super::debug::debug),
    CommandSpec { arity: -1, handler: super::introspection::command_root, ..container("command", LOADING | STALE, "Returns detailed information about all commands.", super::introspection::SUBCOMMANDS) },
];

#[rustfmt::skip]
const SLOWLOG_SUBCOMMANDS: &[CommandSpec] = &[
    cmd("slowlog|get", -2, ADMIN | LOADING | STALE, 0, 0, 0, "server", "2.2.12", "Returns the slow log's entries.", slowlog_get),
    cmd("slowlog|len", 2, ADMIN | LOADING | STALE, 0, 0, 0, "server", "2.2.12", "Returns the number of entries in the slow log.", slowlog_len),
    cmd("slowlog|reset", 2, ADMIN | LOADING | STALE, 0, 0, 0, "server", "2.2.12", "Clears all entries from the slow log.", slowlog_reset),
    cmd("slowlog|help", 2, LOADING | STALE, 0, 0, 0, "server", "6.2.0", "Show helpful text about the different subcommands.", slowlog_help),
];

#[rustfmt::skip]
const MODULE_SUBCOMMANDS: &[CommandSpec] = &[
    cmd("module|list", 2, ADMIN | NOSCRIPT, 0, 0, 0, "server", "4.0.0", "Returns all loaded modules.", module_list),
    cmd("module|load", -3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | PROTECTED, 0, 0, 0, "server", "4.0.0", "Loads a module.", module_load),
    cmd("module|loadex", -3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | PROTECTED, 0, 0, 0, "server", "7.0.0", "Loads a module using extended parameters.", module_load),
    cmd("module|unload", 3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | PROTECTED, 0, 0, 0, "server", "4.0.0", "Unloads a module.", module_unload),
    cmd("module|help", 2, LOADING | STALE, 0, 0, 0, "server", "5.0.0", "Returns helpful text about the different subcommands.", module_help),
];

#[rustfmt::skip]
const FUNCTION_SUBCOMMANDS: &[CommandSpec] = &[
    cmd("function|flush", -2, WRITE | NOSCRIPT, 0, 0, 0, "scripting", "7.0.0", "Deletes all libraries and functions.", function_flush),
    cmd("function|help", 2, LOADING | STALE, 0, 0, 0, "scripting", "7.0.0", "Returns helpful text about the different subcommands.", function_help),
];

#[rustfmt::skip]
const MEMORY_SUBCOMMANDS: &[CommandSpec] = &[
    cmd("memory|usage", -3, READONLY, 2, 2, 1, "server", "4.0.0", "Estimates the memory usage of a key.", memory_usage),
    cmd("memory|help", 2, LOADING | STALE, 0, 0, 0, "server", "4.0.0", "Returns helpful text about the different subcommands.", memory_help),
    cmd("memory|stats", 2, 0, 0, 0, 0, "server", "4.0.0", "Returns details about memory usage.", memory_stats),
    cmd("memory|doctor", 2, 0, 0, 0, 0, "server", "4.0.0", "Outputs a memory problems report.", memory_doctor),
    cmd("memory|malloc-stats", 2, 0, 0, 0, 0, "server", "4.0.0", "Returns the allocator statistics.", memory_malloc_stats),
    cmd("memory|purge", 2, 0, 0, 0, 0, "server", "4.0.0", "Asks the allocator to release memory.", memory_purge),
];

// ---------------------------------------------------------------------------------------------
// Connection
// ---------------------------------------------------------------------------------------------

/// `PING [message]` → `+PONG` or the message; a RESP2 client in the subscriber context gets
/// `[pong, message]` (an empty message when none is given), as Redis answers there.
fn ping(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() <= 2 && ctx.client.proto == 2 && ctx.pubsub.is_subscriber(ctx.client.handle.id) {
        return Ok(Reply::Array(vec![
            Reply::Bulk(Bytes::from_static(b"pong")),
            Reply::Bulk(argv.get(1).cloned().unwrap_or_default()),
        ]));
    }
    ping_reply(argv)
}

/// PING's reply outside the pub/sub form.
fn ping_reply(argv: &[Bytes]) -> CmdResult {
    match argv.len() {
        1 => Ok(Reply::Status("PONG")),
        2 => Ok(Reply::Bulk(argv[1].clone())),
        _ => Err(CmdError::arity("ping")),
    }
}

/// `MONITOR` → OK, then one line per command any client runs (see `PubSub::feed_monitors`).
fn monitor(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let handle = ctx.client.handle.clone();
    ctx.pubsub.add_monitor(&handle);
    ctx.client.monitor = true;
    Ok(Reply::ok())
}

fn echo(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Bulk(argv[1].clone()))
}

/// ECHO under the shared lock.
fn echo_shared(_db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Bulk(argv[1].clone()))
}

/// PING under the shared lock, which `shared_path` takes only for a client with no subscription
/// (a subscriber's RESP2 PING answers in the pub/sub form).
fn ping_shared(_db: &mut SharedDb, argv: &[Bytes]) -> CmdResult {
    ping_reply(argv)
}

/// Checks a password for `user` ("default" is the only user). No password configured means the
/// default user accepts any password, as Redis's `nopass` default user does.
fn check_password(ctx: &Ctx, user: &[u8], pass: &[u8]) -> bool {
    if user != b"default" {
        return false;
    }
    match &ctx.config().requirepass {
        None => true,
        Some(p) => p.as_bytes() == pass,
    }
}

fn hello(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut args = Args::new(argv);
    let mut proto = ctx.client.proto;
    if let Some(v) = args.next() {
        let v = crate::numeric::parse_i64(v).ok_or(CmdError::Static(error::HELLO_PROTO_NOT_INT))?;
        if !(2..=3).contains(&v) {
            return Err(CmdError::Static(error::NOPROTO));
        }
        proto = v as u8;
    }
    let mut auth: Option<(&Bytes, &Bytes)> = None;
    let mut setname: Option<&Bytes> = None;
    while let Some(opt) = args.next() {
        if opt.eq_ignore_ascii_case(b"AUTH") && args.remaining() >= 2 {
            let user = args.next_bytes()?;
            let pass = args.next_bytes()?;
            auth = Some((user, pass));
        } else if opt.eq_ignore_ascii_case(b"SETNAME") && args.remaining() >= 1 {
            setname = Some(args.next_bytes()?);
        } else {
            return Err(CmdError::Owned(format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(opt)
            )));
        }
    }
    if let Some((user, pass)) = auth {
        if !check_password(ctx, user, pass) {
            return Err(CmdError::Static(error::WRONGPASS));
        }
        ctx.client.authenticated = true;
    }
    if !ctx.client.authenticated {
        return Err(CmdError::Static("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"));
    }
    if let Some(name) = setname {
        if !valid_name(name) {
            return Err(CmdError::Static(error::CLIENT_NAME_CHARS));
        }
        set_client_name(ctx, name);
    }
    ctx.client.proto = proto;
    ctx.client
        .handle
        .proto
        .store(proto as usize, Ordering::Relaxed);
    Ok(Reply::Map(vec![
        (Reply::bulk_str("server"), Reply::bulk_str("redis")),
        (
            Reply::bulk_str("version"),
            Reply::bulk_str(crate::REDIS_VERSION),
        ),
        (Reply::bulk_str("proto"), Reply::Int(proto as i64)),
        (
            Reply::bulk_str("id"),
            Reply::Int(ctx.client.handle.id as i64),
        ),
        (Reply::bulk_str("mode"), Reply::bulk_str("standalone")),
        (Reply::bulk_str("role"), Reply::bulk_str("master")),
        (
            Reply::bulk_str("modules"),
            Reply::Array(vec![module_entry()]),
        ),
    ]))
}

fn module_entry() -> Reply {
    Reply::Map(vec![
        (Reply::bulk_str("name"), Reply::bulk_str("bf")),
        (Reply::bulk_str("ver"), Reply::Int(crate::BF_MODULE_VERSION)),
        (
            Reply::bulk_str("path"),
            Reply::bulk_str("hyperbloom (built in)"),
        ),
        (Reply::bulk_str("args"), Reply::Array(vec![])),
    ])
}

fn auth(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (user, pass): (&[u8], &Bytes) = match argv.len() {
        2 => (b"default", &argv[1]),
        3 => (&argv[1], &argv[2]),
        _ => return Err(CmdError::Static(error::SYNTAX)),
    };
    if argv.len() == 2 && ctx.config().requirepass.is_none() {
        return Err(CmdError::Static(error::AUTH_NO_PASSWORD));
    }
    if check_password(ctx, user, pass) {
        ctx.client.authenticated = true;
        Ok(Reply::ok())
    } else {
        Err(CmdError::Static(error::WRONGPASS))
    }
}

fn select(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let n = crate::numeric::parse_i64(&argv[1]).ok_or(CmdError::Static(error::NOT_INTEGER))?;
    if n < i32::MIN as i64 || n > i32::MAX as i64 {
        return Err(CmdError::Static(error::INT_RANGE));
    }
    if n < 0 || n as usize >= ctx.store.dbs.len() {
        return Err(CmdError::Static(error::DB_INDEX_RANGE));
    }
    ctx.client.db = n as usize;
    ctx.client.handle.db.store(n as usize, Ordering::Relaxed);
    Ok(Reply::ok())
}

fn quit(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    ctx.client.action = Some(Action::Close);
    Ok(Reply::ok())
}

fn reset(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    super::transactions::discard_transaction(ctx.client, ctx.store);
    ctx.pubsub.remove_client(ctx.client.handle.id);
    ctx.client.monitor = false;
    ctx.client.db = 0;
    ctx.client.handle.db.store(0, Ordering::Relaxed);
    ctx.client.proto = 2;
    ctx.client.handle.proto.store(2, Ordering::Relaxed);
    let no_password = ctx.config().requirepass.is_none();
    ctx.client.authenticated = no_password;
    set_client_name(ctx, b"");
    Ok(Reply::Status("RESET"))
}

// ---------------------------------------------------------------------------------------------
// Keyspace-wide and server commands
// ---------------------------------------------------------------------------------------------

fn dbsize(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(ctx.db().len() as i64))
}

fn time(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Ok(Reply::Array(vec![
        Reply::Bulk(Bytes::from(now.as_secs().to_string())),
        Reply::Bulk(Bytes::from(now.subsec_micros().to_string())),
    ]))
}

fn module_list(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Array(vec![module_entry()]))
}

/// MODULE LOAD/LOADEX (when `enable-module-command` allows them): hyperbloom's modules are built
/// in and it loads no shared objects, so every load fails the way a failed load does in Redis.
fn module_load(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    tracing::warn!(
        "Module {} failed to load: hyperbloom does not load modules",
        String::from_utf8_lossy(&argv[2])
    );
    Err(CmdError::Static(error::MODULE_LOAD_FAILED))
}

/// MODULE UNLOAD: the built-in `bf` module exports data types, which Redis never unloads.
fn module_unload(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv[2].as_ref() == b"bf" {
        return Err(CmdError::Static("ERR Error unloading module: the module exports one or more module-side data types, can't unload"));
    }
    Err(CmdError::Static(
        "ERR Error unloading module: no such module with that name",
    ))
}

fn flush_mode(argv: &[Bytes], first: usize) -> Result<(), CmdError> {
    match argv.len() - first {
        0 => Ok(()),
        1 if argv[first].eq_ignore_ascii_case(b"ASYNC")
            || argv[first].eq_ignore_ascii_case(b"SYNC") =>
        {
            Ok(())
        }
        _ => Err(CmdError::Static(error::SYNTAX)),
    }
}

fn flushdb(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    flush_mode(argv, 1)?;
    ctx.db().clear();
    let me = ctx.client.handle.id;
    ctx.pubsub.invalidate_all(ctx.shared, Some(me));
    // Redis propagates a flush even of an empty database.
    ctx.force_propagation();
    Ok(Reply::ok())
}

fn flushall(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    flush_mode(argv, 1)?;
    for db in ctx.store.dbs.iter_mut() {
        db.clear();
    }
    let me = ctx.client.handle.id;
    ctx.pubsub.invalidate_all(ctx.shared, Some(me));
    ctx.force_propagation();
    Ok(Reply::ok())
}

fn function_flush(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    flush_mode(argv, 2)?;
    ctx.force_propagation();
    Ok(Reply::ok())
}

fn shutdown(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut save: Option<bool> = None;
    for a in &argv[1..] {
        if a.eq_ignore_ascii_case(b"NOSAVE") {
            save = Some(false);
        } else if a.eq_ignore_ascii_case(b"SAVE") {
            save = Some(true);
        } else if a.eq_ignore_ascii_case(b"NOW")
            || a.eq_ignore_ascii_case(b"FORCE")
            || a.eq_ignore_ascii_case(b"ABORT")
        {
        } else {
            return Err(CmdError::Static(error::SYNTAX));
        }
    }
    let force = argv[1..].iter().any(|a| a.eq_ignore_ascii_case(b"FORCE"));
    tracing::info!("User requested shutdown...");
    let req = crate::persistence::ShutdownRequest { save, force };
    if crate::persistence::shut_down(ctx.shared, ctx.store, ctx.shut_down, &req).is_err() {
        return Err(CmdError::Static(error::SHUTDOWN_FAILED));
    }
    ctx.client.action = Some(Action::Shutdown);
    // Redis closes the connection without a reply on success.
    Ok(Reply::Raw(Bytes::new()))
}

fn memory_usage(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut args = Args::skipping(argv, 3);
    if args.eat("SAMPLES") {
        args.next_i64()?;
    }
    args.finish()?;
    let key = &argv[2];
    // Not a read for INFO's keyspace hits: Redis finds the key in its dict directly.
    match ctx.db().lookup_quiet(key) {
        // Key bytes + the dict entry and object header Redis counts.
        Some(v) => Ok(Reply::Int((v.memory_usage() + key.len() + 40) as i64)),
        None => Ok(Reply::Null),
    }
}

/// MEMORY STATS, as Redis 7.0 lists it: the same keys in the same order (a map in RESP3).
fn memory_stats(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let r = crate::engine::memory::report(ctx.shared, ctx.repl, ctx.store);
    let o = &r.overhead;
    let int = |v: u64| Reply::Int(v as i64);
    let mut fields: Vec<(Reply, Reply)> = vec![
        (Reply::bulk_str("peak.allocated"), int(r.peak)),
        (Reply::bulk_str("total.allocated"), int(r.used)),
        (Reply::bulk_str("startup.allocated"), int(o.startup)),
        (
            Reply::bulk_str("replication.backlog"),
            int(o.replication_backlog),
        ),
        (Reply::bulk_str("clients.slaves"), int(o.clients_replicas)),
        (Reply::bulk_str("clients.normal"), int(o.clients_normal)),
        (Reply::bulk_str("cluster.links"), int(0)),
        (Reply::bulk_str("aof.buffer"), int(o.aof_buffer)),
        (Reply::bulk_str("lua.caches"), int(0)),
        (Reply::bulk_str("functions.caches"), int(0)),
    ];
    for &(db, main, expires) in &r.dbs {
        fields.push((
            Reply::Bulk(Bytes::from(format!("db.{db}"))),
            Reply::Map(vec![
                (Reply::bulk_str("overhead.hashtable.main"), int(main)),
                (Reply::bulk_str("overhead.hashtable.expires"), int(expires)),
                (Reply::bulk_str("overhead.hashtable.slot-to-keys"), int(0)),
            ]),
        ));
    }
    let frag = r.fragmentation();
    let frag_bytes = Reply::Int(r.fragmentation_bytes());
    fields.extend([
        (Reply::bulk_str("overhead.total"), int(r.overhead_total())),
        (Reply::bulk_str("keys.count"), int(r.keys)),
        (
            Reply::bulk_str("keys.bytes-per-key"),
            int(r.bytes_per_key()),
        ),
        (Reply::bulk_str("dataset.bytes"), int(r.dataset())),
        (
            Reply::bulk_str("dataset.percentage"),
            Reply::Double(r.dataset_percentage()),
        ),
        (
            Reply::bulk_str("peak.percentage"),
            Reply::Double(r.peak_percentage()),
        ),
        (Reply::bulk_str("allocator.allocated"), int(r.used)),
        (Reply::bulk_str("allocator.active"), int(r.rss)),
        (Reply::bulk_str("allocator.resident"), int(r.rss)),
        (
            Reply::bulk_str("allocator-fragmentation.ratio"),
            Reply::Double(frag),
        ),
        (
            Reply::bulk_str("allocator-fragmentation.bytes"),
            frag_bytes.clone(),
        ),
        (Reply::bulk_str("allocator-rss.ratio"), Reply::Double(1.0)),
        (Reply::bulk_str("allocator-rss.bytes"), int(0)),
        (Reply::bulk_str("rss-overhead.ratio"), Reply::Double(1.0)),
        (Reply::bulk_str("rss-overhead.bytes"), int(0)),
        (Reply::bulk_str("fragmentation"), Reply::Double(frag)),
        (Reply::bulk_str("fragmentation.bytes"), frag_bytes),
    ]);
    Ok(Reply::Map(fields))
}

/// MEMORY DOCTOR: Redis 7.0's report (`getMemoryDoctorReport`) from the same figures and
/// thresholds. With libc malloc the allocator's fragmentation is the total's, and its RSS
/// ratios are 1, so those two findings never show; there is no script cache.
fn memory_doctor(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let r = crate::engine::memory::report(ctx.shared, ctx.repl, ctx.store);
    let text = doctor_report(&r);
    Ok(Reply::Verbatim(Bytes::from(text)))
}

fn doctor_report(r: &crate::engine::memory::Report) -> String {
    const MB: u64 = 1 << 20;
    if r.used < 5 * MB {
        return "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.\n".to_string();
    }
    let big_peak = (r.peak as f32 / r.used as f32) > 1.5;
    let frag = r.fragmentation();
    let high_frag = frag > 1.4 && r.fragmentation_bytes() > (10 * MB) as i64;
    let high_alloc_frag = frag > 1.1 && r.fragmentation_bytes() > (10 * MB) as i64;
    let big_client_buf = r.overhead.clients_normal / r.clients.max(1) > 200 * 1024;
    let big_replica_buf = r.replicas > 0 && r.overhead.clients_replicas / r.replicas > 10 * MB;
    if !(big_peak || high_frag || high_alloc_frag || big_client_buf || big_replica_buf) {
        return "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.\n".to_string();
    }
    let mut s =
        String::from("Sam, I detected a few issues in this Redis instance memory implants:\n\n");
    if big_peak {
        s.push_str(" * Peak memory: In the past this instance used more than 150% the memory that is currently using. The allocator is normally not able to release memory after a peak, so you can expect to see a big fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the Redis instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as soon as you fill the Redis instance with more data. If the memory peak was only occasional and you want to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to shutdown and restart the instance.\n\n");
    }
    if high_frag {
        s.push_str(" * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this means that the Resident Set Size of the Redis process is much larger than the sum of the logical allocations Redis performed). This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. If the problem is a large peak memory, then there is no issue. Otherwise, make sure you are using the Jemalloc allocator and not the default libc malloc. Note: The currently used allocator is \"libc\".\n\n");
    }
    if high_alloc_frag {
        s.push_str(" * High allocator fragmentation: This instance has an allocator external fragmentation greater than 1.1. This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. You can try enabling 'activedefrag' config option.\n\n");
    }
    if big_replica_buf {
        s.push_str(" * Big replica buffers: The replica output buffers in this instance are greater than 10MB for each replica (on average). This likely means that there is some replica instance that is struggling receiving data, either because it is too slow or because of networking issues. As a result, data piles on the master output buffers. Please try to identify what replica is not receiving data correctly and why. You can use the INFO output in order to check the replicas delays and the CLIENT LIST command to check the output buffers of each replica.\n\n");
    }
    if big_client_buf {
        s.push_str(" * Big client buffers: The clients output buffers in this instance are greater than 200K per client (on average). This may result from different causes, like Pub/Sub clients subscribed to channels bot not receiving data fast enough, so that data piles on the Redis instance output buffer, or clients sending commands with large replies or very large sequences of commands in the same pipeline. Please use the CLIENT LIST command in order to investigate the issue if it causes problems in your instance, or to understand better why certain clients are using a big amount of memory.\n\n");
    }
    s.push_str("I'm here to keep you safe, Sam. I want to help you.\n");
    s
}

/// MEMORY MALLOC-STATS: Redis built with libc malloc has none to give.
fn memory_malloc_stats(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Reply::bulk_str(
        "Stats not supported for the current allocator",
    ))
}

/// MEMORY PURGE: Redis purges jemalloc's dirty pages; glibc's equivalent hands free memory at
/// the top of the heap and in free pages back to the system (`malloc_trim`).
fn memory_purge(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    // SAFETY: malloc_trim only walks glibc's own arenas under their locks; it takes no pointer
    // of ours and is safe to call at any time from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
    Ok(Reply::Status("OK"))
}

/// SLOWLOG GET [count]: the newest `count` entries (10 by default, all with -1), each
/// `[id, unix time, microseconds, [arguments], address, name]`, as Redis answers.
fn slowlog_get(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let count = match argv.len() {
        2 => Some(10),
        3 => match crate::numeric::int::parse_i64(&argv[2]) {
            Some(-1) => None,
            Some(n) if n >= 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            _ => {
                return Err(CmdError::Static(
                    "ERR count should be greater than or equal to -1",
                ))
            }
        },
        _ => return Err(CmdError::subcommand_syntax(argv)),
    };
    let entries = ctx.shared.slowlog.newest(count);
    Ok(Reply::Array(
        entries
            .into_iter()
            .map(|e| {
                Reply::Array(vec![
                    Reply::Int(e.id as i64),
                    Reply::Int(e.time as i64),
                    Reply::Int(e.duration_us as i64),
                    Reply::Array(e.argv.into_iter().map(Reply::Bulk).collect()),
                    Reply::Bulk(Bytes::from(e.peer)),
                    Reply::Bulk(e.name),
                ])
            })
            .collect(),
    ))
}

fn slowlog_len(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(ctx.shared.slowlog.len() as i64))
}

fn slowlog_reset(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    ctx.shared.slowlog.reset();
    Ok(Reply::ok())
}

/// `SLOWLOG HELP`, Redis 7.0.15's text.
const SLOWLOG_HELP: &[&str] = &[
    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
    "HELP",
    "    Prints this help.",
];

fn slowlog_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    super::help_reply(SLOWLOG_HELP)
}

/// `MODULE HELP`, Redis 7.0.15's text.
const MODULE_HELP: &[&str] = &[
    "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LIST",
    "    Return a list of loaded modules.",
    "LOAD <path> [<arg> ...]",
    "    Load a module library from <path>, passing to it any optional arguments.",
    "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
    "    Load a module library from <path>, while passing it module configurations and optional arguments.",
    "UNLOAD <name>",
    "    Unload a module.",
    "HELP",
    "    Prints this help.",
];

fn module_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    super::help_reply(MODULE_HELP)
}

/// `FUNCTION HELP`, Redis 7.0.15's text.
const FUNCTION_HELP: &[&str] = &[
    "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
    "      libraries with the new libraries (notice that even on this option there is a chance of failure",
    "      in case of functions name collision with another library).",
    "HELP",
    "    Prints this help.",
];

fn function_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    super::help_reply(FUNCTION_HELP)
}

/// `MEMORY HELP`, Redis 7.0.15's text.
const MEMORY_HELP: &[&str] = &[
    "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
    "HELP",
    "    Prints this help.",
];

/// MEMORY HELP names Redis's five subcommands; hyperbloom serves USAGE (and HELP).
fn memory_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    super::help_reply(MEMORY_HELP)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::memory::{Overhead, Report};

    fn report(used: u64, peak: u64, rss: u64) -> Report {
        Report {
            used,
            peak,
            rss,
            overhead: Overhead {
                startup: 1 << 20,
                replication_buffers: 0,
                replication_backlog: 0,
                clients_replicas: 0,
                clients_normal: 0,
                aof_buffer: 0,
                not_counted: 0,
            },
            dbs: Vec::new(),
            keys: 0,
            clients: 1,
            replicas: 0,
        }
    }

    /// Each finding of MEMORY DOCTOR at Redis's thresholds, in Redis's order.
    #[test]
    fn the_doctor_reports_what_redis_would() {
        const MB: u64 = 1 << 20;
        assert!(doctor_report(&report(4 * MB, 100 * MB, 4 * MB))
            .starts_with("Hi Sam, this instance is empty"));
        assert!(doctor_report(&report(20 * MB, 30 * MB, 21 * MB))
            .starts_with("Hi Sam, I can't find any memory issue"));
        let peak = doctor_report(&report(20 * MB, 31 * MB, 21 * MB));
        assert!(
            peak.contains(" * Peak memory:") && !peak.contains("High"),
            "{peak}"
        );
        // RSS 1.5 times the use and 10 MB over: both fragmentation findings (libc's allocator
        // fragmentation is the total's).
        let frag = doctor_report(&report(30 * MB, 30 * MB, 45 * MB));
        let total = frag.find(" * High total RSS").expect("total");
        let alloc = frag
            .find(" * High allocator fragmentation")
            .expect("allocator");
        assert!(
            total < alloc && frag.contains("allocator is \"libc\""),
            "{frag}"
        );
        let mut r = report(30 * MB, 30 * MB, 30 * MB);
        r.overhead.clients_normal = 401 * 1024;
        r.clients = 2;
        assert!(doctor_report(&r).contains(" * Big client buffers"));
        r.clients = 3;
        assert!(!doctor_report(&r).contains(" * Big client buffers"));
        r.replicas = 2;
        r.overhead.clients_replicas = 21 * MB;
        let replicas = doctor_report(&r);
        assert!(replicas.contains(" * Big replica buffers"), "{replicas}");
        assert!(replicas.ends_with("I'm here to keep you safe, Sam. I want to help you.\n"));
    }
}
