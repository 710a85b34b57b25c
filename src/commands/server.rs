//! Connection and server commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT, RESET, CLIENT, INFO,
//! CONFIG, DBSIZE, TIME, MODULE, FLUSHDB, FLUSHALL, FUNCTION, SHUTDOWN, MEMORY, DEBUG, COMMAND.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::{cmd, flags::*, table, Action, Args, CommandSpec, Ctx};
use crate::error::{self, CmdError, CmdResult};
use crate::protocol::Reply;

/// The RedisBloom version hyperbloom advertises as module `bf`: a current-line number (8.4.0), above
/// 80000 so redis-rs's harness treats the server as RedisBloom (clients.md §4).
pub const BF_MODULE_VERSION: i64 = 80400;

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
    }
}

fn no_direct_call(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Err(CmdError::unknown_command(argv))
}

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("ping", -1, FAST, 0, 0, 0, "connection", "1.0.0", "Returns the server's liveliness response.", ping),
    cmd("echo", 2, FAST, 0, 0, 0, "connection", "1.0.0", "Returns the given string.", echo),
    cmd("hello", -1, NOSCRIPT | LOADING | STALE | FAST | NOAUTH | ALLOW_BUSY, 0, 0, 0, "connection", "6.0.0", "Handshakes with the Redis server.", hello),
    cmd("auth", -2, NOSCRIPT | LOADING | STALE | FAST | NOAUTH | ALLOW_BUSY, 0, 0, 0, "connection", "1.0.0", "Authenticates the connection.", auth),
    cmd("select", 2, LOADING | STALE | FAST, 0, 0, 0, "connection", "1.0.0", "Changes the selected database.", select),
    cmd("quit", -1, NOSCRIPT | LOADING | STALE | FAST | NOAUTH | ALLOW_BUSY, 0, 0, 0, "connection", "1.0.0", "Closes the connection.", quit),
    cmd("reset", 1, NOSCRIPT | LOADING | STALE | FAST | NOAUTH | ALLOW_BUSY, 0, 0, 0, "connection", "6.2.0", "Resets the connection.", reset),
    container("client", 0, "A container for client connection commands.", CLIENT_SUBCOMMANDS),
    cmd("info", -1, LOADING | STALE, 0, 0, 0, "server", "1.0.0", "Returns information and statistics about the server.", info),
    container("config", 0, "A container for server configuration commands.", CONFIG_SUBCOMMANDS),
    cmd("dbsize", 1, READONLY | FAST, 0, 0, 0, "server", "1.0.0", "Returns the number of keys in the database.", dbsize),
    cmd("time", 1, LOADING | STALE | FAST, 0, 0, 0, "server", "2.6.0", "Returns the server time.", time),
    container("module", 0, "A container for module commands.", MODULE_SUBCOMMANDS),
    cmd("flushdb", -1, WRITE, 0, 0, 0, "server", "1.0.0", "Removes all keys from the current database.", flushdb),
    cmd("flushall", -1, WRITE, 0, 0, 0, "server", "1.0.0", "Removes all keys from all databases.", flushall),
    container("function", 0, "A container for function commands.", FUNCTION_SUBCOMMANDS),
    cmd("shutdown", -1, ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | ALLOW_BUSY, 0, 0, 0, "server", "1.0.0", "Synchronously saves the database(s) to disk and shuts down the Redis server.", shutdown),
    container("memory", 0, "A container for memory diagnostics commands.", MEMORY_SUBCOMMANDS),
    cmd("debug", -2, ADMIN | NOSCRIPT | LOADING | STALE, 0, 0, 0, "server", "1.0.0", "A container for debugging commands.", debug),
    CommandSpec { arity: -1, handler: command_root, ..container("command", LOADING | STALE, "Returns detailed information about all commands.", COMMAND_SUBCOMMANDS) },
];

#[rustfmt::skip]
const CLIENT_SUBCOMMANDS: &[CommandSpec] = &[
    cmd("client|id", 2, NOSCRIPT | LOADING | STALE, 0, 0, 0, "connection", "5.0.0", "Returns the unique client ID of the connection.", client_id),
    cmd("client|setname", 3, NOSCRIPT | LOADING | STALE, 0, 0, 0, "connection", "2.6.9", "Sets the connection name.", client_setname),
    cmd("client|getname", 2, NOSCRIPT | LOADING | STALE, 0, 0, 0, "connection", "2.6.9", "Returns the name of the connection.", client_getname),
    cmd("client|setinfo", 4, NOSCRIPT | LOADING | STALE, 0, 0, 0, "connection", "7.2.0", "Sets information specific to the client or connection.", client_setinfo),
    cmd("client|info", 2, NOSCRIPT | LOADING | STALE, 0, 0, 0, "connection", "6.2.0", "Returns information about the connection.", client_info),
    cmd("client|list", -2, ADMIN | NOSCRIPT | LOADING | STALE, 0, 0, 0, "connection", "2.4.0", "Lists open connections.", client_list),
    cmd("client|kill", -3, ADMIN | NOSCRIPT | LOADING | STALE, 0, 0, 0, "connection", "2.4.0", "Terminates open connections.", client_kill),
    cmd("client|no-evict", 3, ADMIN | NOSCRIPT | LOADING | STALE, 0, 0, 0, "connection", "7.0.0", "Sets the client eviction mode of the connection.", client_onoff),
    cmd("client|no-touch", 3, NOSCRIPT | LOADING | STALE, 0, 0, 0, "connection", "7.2.0", "Controls whether commands sent by the client affect the LRU/LFU of accessed keys.", client_onoff),
    cmd("client|help", 2, LOADING | STALE, 0, 0, 0, "connection", "5.0.0", "Returns helpful text about the different subcommands.", client_help),
];

#[rustfmt::skip]
const CONFIG_SUBCOMMANDS: &[CommandSpec] = &[
    cmd("config|get", -3, ADMIN | NOSCRIPT | LOADING | STALE, 0, 0, 0, "server", "2.0.0", "Returns the effective values of configuration parameters.", config_get),
    cmd("config|set", -4, ADMIN | NOSCRIPT | LOADING | STALE, 0, 0, 0, "server", "2.0.0", "Sets configuration parameters in-flight.", config_set),
    cmd("config|resetstat", 2, ADMIN | NOSCRIPT | LOADING | STALE, 0, 0, 0, "server", "2.0.0", "Resets the server's statistics.", config_resetstat),
    cmd("config|rewrite", 2, ADMIN | NOSCRIPT | LOADING | STALE, 0, 0, 0, "server", "2.8.0", "Persists the effective configuration to file.", config_rewrite),
];

#[rustfmt::skip]
const MODULE_SUBCOMMANDS: &[CommandSpec] = &[
    cmd("module|list", 2, ADMIN | NOSCRIPT, 0, 0, 0, "server", "4.0.0", "Returns all loaded modules.", module_list),
];

#[rustfmt::skip]
const FUNCTION_SUBCOMMANDS: &[CommandSpec] = &[
    cmd("function|flush", -2, WRITE | NOSCRIPT, 0, 0, 0, "scripting", "7.0.0", "Deletes all libraries and functions.", function_flush),
];

#[rustfmt::skip]
const MEMORY_SUBCOMMANDS: &[CommandSpec] = &[
    cmd("memory|usage", -3, READONLY, 2, 2, 1, "server", "4.0.0", "Estimates the memory usage of a key.", memory_usage),
];

#[rustfmt::skip]
const COMMAND_SUBCOMMANDS: &[CommandSpec] = &[
    cmd("command|count", 2, LOADING | STALE, 0, 0, 0, "server", "2.8.13", "Returns a count of commands.", command_count),
    cmd("command|info", -2, LOADING | STALE, 0, 0, 0, "server", "2.8.13", "Returns information about one, multiple or all commands.", command_info),
    cmd("command|docs", -2, LOADING | STALE, 0, 0, 0, "server", "7.0.0", "Returns documentary information about one, multiple or all commands.", command_docs),
    cmd("command|list", -2, LOADING | STALE, 0, 0, 0, "server", "7.0.0", "Returns a list of command names.", command_list),
];

// ---------------------------------------------------------------------------------------------
// Connection
// ---------------------------------------------------------------------------------------------

fn ping(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    match argv.len() {
        1 => Ok(Reply::Status("PONG")),
        2 => Ok(Reply::Bulk(argv[1].clone())),
        _ => Err(CmdError::arity("ping")),
    }
}

fn echo(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Bulk(argv[1].clone()))
}

fn valid_name(name: &[u8]) -> bool {
    name.iter().all(|&c| (b'!'..=b'~').contains(&c))
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
        let v = super::parse::parse_i64(v).ok_or(CmdError::Static(error::HELLO_PROTO_NOT_INT))?;
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
        (Reply::bulk_str("ver"), Reply::Int(BF_MODULE_VERSION)),
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
    let n = super::parse::parse_i64(&argv[1]).ok_or(CmdError::Static(error::NOT_INTEGER))?;
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
    ctx.client.multi = None;
    ctx.client.multi_error = false;
    ctx.client.unwatch_all(ctx.store);
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
// CLIENT
// ---------------------------------------------------------------------------------------------

fn set_client_name(ctx: &mut Ctx, name: &[u8]) {
    let mut slot = ctx
        .client
        .handle
        .name
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    *slot = if name.is_empty() {
        None
    } else {
        Some(Bytes::copy_from_slice(name))
    };
}

fn client_id(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(ctx.client.handle.id as i64))
}

fn client_setname(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if !valid_name(&argv[2]) {
        return Err(CmdError::Static(error::CLIENT_NAME_CHARS));
    }
    set_client_name(ctx, &argv[2]);
    Ok(Reply::ok())
}

fn client_getname(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let name = ctx
        .client
        .handle
        .name
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    Ok(Reply::opt_bulk(name))
}

fn client_setinfo(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let attr = &argv[2];
    let value = &argv[3];
    let slot = if attr.eq_ignore_ascii_case(b"lib-name") {
        &ctx.client.handle.lib_name
    } else if attr.eq_ignore_ascii_case(b"lib-ver") {
        &ctx.client.handle.lib_ver
    } else {
        return Err(CmdError::Owned(format!(
            "ERR Unrecognized option '{}'",
            String::from_utf8_lossy(attr)
        )));
    };
    if !valid_name(value) {
        return Err(CmdError::Owned(format!(
            "ERR {} cannot contain spaces, newlines or special characters.",
            String::from_utf8_lossy(attr)
        )));
    }
    *slot.lock().unwrap_or_else(|p| p.into_inner()) = if value.is_empty() {
        None
    } else {
        Some(value.clone())
    };
    Ok(Reply::ok())
}

fn client_line(ctx: &Ctx, h: &crate::server::shared::ClientHandle) -> String {
    let lock = |m: &std::sync::Mutex<Option<Bytes>>| {
        m.lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    };
    let now = super::now_ms();
    let idle = now.saturating_sub(h.last_active_ms.load(Ordering::Relaxed)) / 1000;
    let last = h.last_cmd.load(Ordering::Relaxed);
    let cmd_name = if last == 0 {
        "NULL".to_string()
    } else {
        table()
            .all()
            .get(last - 1)
            .map(|s| s.name.to_string())
            .unwrap_or_default()
    };
    let _ = ctx;
    format!(
        "id={} addr={} laddr={} fd=8 name={} age={} idle={} flags={} db={} sub=0 psub=0 ssub=0 multi={} qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=1024 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd={} user=default redir=-1 resp={} lib-name={} lib-ver={}",
        h.id,
        h.addr,
        h.laddr,
        lock(&h.name),
        h.created.elapsed().as_secs(),
        idle,
        if h.multi.load(Ordering::Relaxed) { "x" } else { "N" },
        h.db.load(Ordering::Relaxed),
        if h.multi.load(Ordering::Relaxed) { 0 } else { -1 },
        cmd_name,
        h.proto.load(Ordering::Relaxed),
        lock(&h.lib_name),
        lock(&h.lib_ver),
    )
}

fn client_info(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let line = client_line(ctx, &ctx.client.handle.clone());
    Ok(Reply::Verbatim(Bytes::from(line + "\n")))
}

fn client_list(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut ids: Option<Vec<u64>> = None;
    let mut args = Args::skipping(argv, 2);
    while let Some(opt) = args.next() {
        if opt.eq_ignore_ascii_case(b"TYPE") {
            let t = args.next_bytes()?;
            if !t.eq_ignore_ascii_case(b"normal")
                && !t.eq_ignore_ascii_case(b"master")
                && !t.eq_ignore_ascii_case(b"replica")
                && !t.eq_ignore_ascii_case(b"pubsub")
            {
                return Err(CmdError::Owned(format!(
                    "ERR Unknown client type '{}'",
                    String::from_utf8_lossy(t)
                )));
            }
        } else if opt.eq_ignore_ascii_case(b"ID") {
            let mut list = Vec::new();
            for a in args.rest() {
                match super::parse::parse_i64(a) {
                    Some(n) if n > 0 => list.push(n as u64),
                    _ => return Err(CmdError::Static("ERR Invalid client ID")),
                }
            }
            if list.is_empty() {
                return Err(CmdError::Static(error::SYNTAX));
            }
            ids = Some(list);
        } else {
            return Err(CmdError::Static(error::SYNTAX));
        }
    }
    let mut handles: Vec<_> = ctx.shared.clients().values().cloned().collect();
    handles.sort_by_key(|h| h.id);
    let mut out = String::new();
    for h in handles {
        if let Some(ids) = &ids {
            if !ids.contains(&h.id) {
                continue;
            }
        }
        out.push_str(&client_line(ctx, &h));
        out.push('\n');
    }
    Ok(Reply::Verbatim(Bytes::from(out)))
}

fn client_kill(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let handles: Vec<_> = ctx.shared.clients().values().cloned().collect();
    if argv.len() == 3 {
        // Old form: CLIENT KILL addr:port.
        let target = String::from_utf8_lossy(&argv[2]).into_owned();
        for h in &handles {
            if h.addr.to_string() == target {
                h.kill();
                return Ok(Reply::ok());
            }
        }
        return Err(CmdError::Static("ERR No such client"));
    }
    let mut args = Args::skipping(argv, 2);
    let mut filters: Vec<(Vec<u8>, Bytes)> = Vec::new();
    let mut skipme = true;
    while let Some(k) = args.next() {
        let v = args.next_bytes()?;
        let key = k.to_ascii_lowercase();
        match key.as_slice() {
            b"id" => {
                if super::parse::parse_i64(v).is_none_or(|n| n <= 0) {
                    return Err(CmdError::Static("ERR client-id should be greater than 0"));
                }
            }
            b"addr" | b"laddr" | b"user" | b"type" => {}
            b"skipme" => {
                skipme = if v.eq_ignore_ascii_case(b"yes") {
                    true
                } else if v.eq_ignore_ascii_case(b"no") {
                    false
                } else {
                    return Err(CmdError::Static(error::SYNTAX));
                };
                continue;
            }
            _ => return Err(CmdError::Static(error::SYNTAX)),
        }
        filters.push((key, v.clone()));
    }
    let me = ctx.client.handle.id;
    let mut killed = 0;
    for h in &handles {
        if skipme && h.id == me {
            continue;
        }
        let ok = filters.iter().all(|(k, v)| match k.as_slice() {
            b"id" => super::parse::parse_i64(v) == Some(h.id as i64),
            b"addr" => h.addr.to_string().as_bytes() == &v[..],
            b"laddr" => h.laddr.to_string().as_bytes() == &v[..],
            b"user" => &v[..] == b"default",
            b"type" => v.eq_ignore_ascii_case(b"normal"),
            _ => false,
        });
        if ok {
            h.kill();
            killed += 1;
        }
    }
    if !skipme
        && filters
            .iter()
            .any(|(k, v)| k == b"id" && super::parse::parse_i64(v) == Some(me as i64))
    {
        ctx.client.action = Some(Action::Close);
    }
    Ok(Reply::Int(killed))
}

fn client_onoff(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv[2].eq_ignore_ascii_case(b"on") || argv[2].eq_ignore_ascii_case(b"off") {
        Ok(Reply::ok())
    } else {
        Err(CmdError::Static(error::SYNTAX))
    }
}

fn client_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let lines = [
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ID",
        "    Return the ID of the current connection.",
        "GETNAME",
        "    Return the name of the current connection.",
        "SETNAME <name>",
        "    Assign the name <name> to the current connection.",
        "SETINFO <option> <value>",
        "    Set client meta attr: LIB-NAME or LIB-VER.",
        "INFO",
        "    Return information about the current client connection.",
        "LIST [TYPE <type>] [ID <id> [<id> ...]]",
        "    Return information about client connections.",
        "KILL <option> <value> [<option> <value> [...]]",
        "    Kill connections (ID, ADDR, LADDR, USER, TYPE, SKIPME).",
        "NO-EVICT (ON|OFF)",
        "    Accepted; hyperbloom never evicts.",
        "NO-TOUCH (ON|OFF)",
        "    Accepted; hyperbloom keeps no LRU/LFU.",
        "HELP",
        "    Print this help.",
    ];
    Ok(Reply::Array(
        lines
            .iter()
            .map(|l| Reply::StatusOwned(Bytes::from_static(l.as_bytes())))
            .collect(),
    ))
}

// ---------------------------------------------------------------------------------------------
// INFO
// ---------------------------------------------------------------------------------------------

/// Every section, in Redis's order. The default set is all of them but `commandstats` (Redis 7.0
/// also leaves out `latencystats`, which hyperbloom does not have).
const ALL_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "bloom",
    "commandstats",
    "errorstats",
    "cluster",
    "keyspace",
];

fn default_sections() -> impl Iterator<Item = &'static str> {
    ALL_SECTIONS
        .iter()
        .copied()
        .filter(|s| *s != "commandstats")
}

fn info(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut wanted: Vec<&str> = Vec::new();
    if argv.len() == 1 {
        wanted.extend(default_sections());
    }
    for a in &argv[1..] {
        let name = String::from_utf8_lossy(a).to_ascii_lowercase();
        match name.as_str() {
            "default" => wanted.extend(default_sections()),
            "all" | "everything" => wanted.extend(ALL_SECTIONS),
            other => {
                if let Some(s) = ALL_SECTIONS.iter().find(|s| **s == other) {
                    wanted.push(s);
                }
            }
        }
    }
    let mut out = String::new();
    let mut done: Vec<&str> = Vec::new();
    for section in ALL_SECTIONS {
        if !wanted.contains(section) || done.contains(section) {
            continue;
        }
        done.push(section);
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        info_section(ctx, section, &mut out);
    }
    Ok(Reply::Verbatim(Bytes::from(out)))
}

fn info_section(ctx: &mut Ctx, section: &str, out: &mut String) {
    use std::fmt::Write;
    let shared = ctx.shared;
    match section {
        "server" => {
            let uptime = shared.started.elapsed().as_secs();
            let port = shared.port.load(Ordering::Relaxed);
            let hz = ctx.config().hz;
            let config_file = ctx.config().config_file.clone().unwrap_or_default();
            let _ = write!(
                out,
                "# Server\r\nredis_version:{}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_build_id:0\r\nredis_mode:standalone\r\nos:{} {}\r\narch_bits:64\r\nmonotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:epoll\r\natomicvar_api:c11-builtin\r\ngcc_version:0.0.0\r\nprocess_id:{}\r\nprocess_supervised:no\r\nrun_id:{}\r\ntcp_port:{}\r\nserver_time_usec:{}\r\nuptime_in_seconds:{}\r\nuptime_in_days:{}\r\nhz:{}\r\nconfigured_hz:{}\r\nlru_clock:0\r\nexecutable:hyperbloom\r\nconfig_file:{}\r\nio_threads_active:0\r\nhyperbloom_version:{}\r\n",
                crate::REDIS_VERSION,
                std::env::consts::OS,
                std::env::consts::ARCH,
                std::process::id(),
                shared.run_id,
                port,
                ctx.now_ms * 1000,
                uptime,
                uptime / 86400,
                hz,
                hz,
                config_file,
                crate::VERSION,
            );
        }
        "clients" => {
            let n = shared.clients().len();
            let maxclients = ctx.config().maxclients;
            let _ = write!(
                out,
                "# Clients\r\nconnected_clients:{n}\r\ncluster_connections:0\r\nmaxclients:{maxclients}\r\nclient_recent_max_input_buffer:0\r\nclient_recent_max_output_buffer:0\r\nblocked_clients:0\r\ntracking_clients:0\r\nclients_in_timeout_table:0\r\n"
            );
        }
        "memory" => {
            let used = crate::server::alloc::used_memory();
            let maxmemory = ctx.config().maxmemory;
            let policy = ctx.config().maxmemory_policy.clone();
            let _ = write!(
                out,
                "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{used}\r\nused_memory_peak:{used}\r\nused_memory_dataset:{used}\r\nmaxmemory:{maxmemory}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:{policy}\r\nmem_fragmentation_ratio:1.00\r\nmem_allocator:libc\r\n",
                human(used as u64),
                human(maxmemory),
            );
        }
        "persistence" => {
            crate::persistence::refresh(ctx);
            let p = shared.persistence().clone();
            let dirty = ctx.store.dirty();
            let loading = shared.loading.load(Ordering::Relaxed) as u8;
            let current = p
                .bgsave_started
                .map(|s| s.elapsed().as_secs() as i64)
                .unwrap_or(-1);
            let _ = write!(
                out,
                "# Persistence\r\nloading:{loading}\r\nasync_loading:0\r\ncurrent_cow_peak:0\r\ncurrent_cow_size:0\r\ncurrent_cow_size_age:0\r\ncurrent_fork_perc:0.00\r\ncurrent_save_keys_processed:0\r\ncurrent_save_keys_total:0\r\nrdb_changes_since_last_save:{dirty}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\nrdb_last_bgsave_time_sec:{}\r\nrdb_current_bgsave_time_sec:{current}\r\nrdb_saves:{}\r\nrdb_last_cow_size:0\r\nrdb_last_load_keys_expired:{}\r\nrdb_last_load_keys_loaded:{}\r\naof_enabled:0\r\naof_rewrite_in_progress:0\r\naof_rewrite_scheduled:0\r\naof_last_rewrite_time_sec:-1\r\naof_current_rewrite_time_sec:-1\r\naof_last_bgrewrite_status:ok\r\naof_rewrites:0\r\naof_rewrites_consecutive_failures:0\r\naof_last_write_status:ok\r\naof_last_cow_size:0\r\nmodule_fork_in_progress:0\r\nmodule_fork_last_cow_size:0\r\n",
                p.bgsave_in_progress as u8,
                p.last_save_unix,
                if p.last_bgsave_ok { "ok" } else { "err" },
                p.last_bgsave_duration_sec,
                p.saves,
                p.last_load_keys_expired,
                p.last_load_keys_loaded,
            );
            // hyperbloom's own field: why the last save failed (Redis only logs it).
            if let Some(e) = &p.last_error {
                let _ = write!(
                    out,
                    "rdb_last_save_error:{}\r\n",
                    e.replace(['\r', '\n'], " ")
                );
            }
        }
        "stats" => {
            let s = &shared.stats;
            let _ = write!(
                out,
                "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\ninstantaneous_ops_per_sec:0\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\nrejected_connections:{}\r\nsync_full:0\r\nsync_partial_ok:0\r\nsync_partial_err:0\r\nexpired_keys:{}\r\nevicted_keys:0\r\nkeyspace_hits:0\r\nkeyspace_misses:0\r\npubsub_channels:0\r\npubsub_patterns:0\r\nlatest_fork_usec:0\r\ntotal_forks:0\r\ntotal_error_replies:{}\r\n",
                s.connections_received.load(Ordering::Relaxed),
                ctx.stats.iter().map(|c| c.calls).sum::<u64>(),
                s.net_input_bytes.load(Ordering::Relaxed),
                s.net_output_bytes.load(Ordering::Relaxed),
                s.rejected_connections.load(Ordering::Relaxed),
                s.expired_keys.load(Ordering::Relaxed)
                    + ctx.store.dbs.iter().map(|d| d.lazy_expired).sum::<u64>(),
                ctx.error_stats.values().sum::<u64>(),
            );
        }
        "replication" => {
            let _ = write!(
                out,
                "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\nmaster_replid:{}\r\nmaster_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:0\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0\r\nrepl_backlog_size:1048576\r\nrepl_backlog_first_byte_offset:0\r\nrepl_backlog_histlen:0\r\n",
                shared.run_id
            );
        }
        "cpu" => {
            let (user, sys) = cpu_times();
            let _ = write!(
                out,
                "# CPU\r\nused_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\nused_cpu_sys_children:0.000000\r\nused_cpu_user_children:0.000000\r\n"
            );
        }
        "bloom" => out.push_str(&super::bloom::info_section(ctx.store)),
        "modules" => {
            let _ = write!(
                out,
                "# Modules\r\nmodule:name=bf,ver={BF_MODULE_VERSION},api=1,filters=0,usedby=[],using=[],options=[handle-io-errors]\r\n"
            );
        }
        "commandstats" => {
            out.push_str("# Commandstats\r\n");
            for (i, spec) in table().all().iter().enumerate() {
                let s = ctx.stats[i];
                if s.calls == 0 && s.rejected == 0 && s.failed == 0 {
                    continue;
                }
                let per = if s.calls > 0 {
                    s.nanos as f64 / 1000.0 / s.calls as f64
                } else {
                    0.0
                };
                let _ = write!(
                    out,
                    "cmdstat_{}:calls={},usec={},usec_per_call={:.2},rejected_calls={},failed_calls={}\r\n",
                    spec.name,
                    s.calls,
                    s.nanos / 1000,
                    per,
                    s.rejected,
                    s.failed
                );
            }
        }
        "errorstats" => {
            out.push_str("# Errorstats\r\n");
            let mut codes: Vec<_> = ctx.error_stats.iter().collect();
            codes.sort();
            for (code, n) in codes {
                let _ = write!(out, "errorstat_{code}:count={n}\r\n");
            }
        }
        "cluster" => out.push_str("# Cluster\r\ncluster_enabled:0\r\n"),
        "keyspace" => {
            out.push_str("# Keyspace\r\n");
            let now = ctx.now_ms;
            for (i, db) in ctx.store.dbs.iter_mut().enumerate() {
                db.now_ms = now;
                if db.is_empty() {
                    continue;
                }
                let _ = write!(
                    out,
                    "db{i}:keys={},expires={},avg_ttl={}\r\n",
                    db.len(),
                    db.expires_count(),
                    db.avg_ttl()
                );
            }
        }
        _ => {}
    }
}

fn human(n: u64) -> String {
    let f = n as f64;
    if f < 1024.0 {
        format!("{n}B")
    } else if f < 1024.0 * 1024.0 {
        format!("{:.2}K", f / 1024.0)
    } else if f < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2}M", f / 1024.0 / 1024.0)
    } else {
        format!("{:.2}G", f / 1024.0 / 1024.0 / 1024.0)
    }
}

/// User and system CPU seconds of this process, from /proc (0 where unavailable).
fn cpu_times() -> (f64, f64) {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return (0.0, 0.0);
    };
    // Fields after the command name (which is in parentheses and may contain spaces).
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return (0.0, 0.0);
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = 100.0;
    let utime = fields
        .get(11)
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
        / ticks;
    let stime = fields
        .get(12)
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
        / ticks;
    (utime, stime)
}

// ---------------------------------------------------------------------------------------------
// CONFIG
// ---------------------------------------------------------------------------------------------

fn config_get(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let config = ctx.config();
    let mut pairs: Vec<(String, String)> = Vec::new();
    for pattern in &argv[2..] {
        for d in crate::config::DIRECTIVES {
            if super::glob::matches(pattern, d.name.as_bytes(), true)
                && !pairs.iter().any(|(n, _)| n == d.name)
            {
                pairs.push((d.name.to_string(), (d.get)(&config)));
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
            return Err(CmdError::Owned(format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
            )));
        };
        if !d.mutable {
            return Err(CmdError::Owned(format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - can't set immutable config"
            )));
        }
        if let Err(why) = (d.set)(&mut updated, &[value]) {
            return Err(CmdError::Owned(format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
            )));
        }
    }
    ctx.shared
        .maxmemory
        .store(updated.maxmemory, Ordering::Relaxed);
    // A new password does not log out connected clients, as in Redis.
    ctx.shared.replace_config(updated);
    Ok(Reply::ok())
}

fn config_resetstat(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    for s in ctx.stats.iter_mut() {
        *s = Default::default();
    }
    ctx.error_stats.clear();
    let s = &ctx.shared.stats;
    for c in [
        &s.connections_received,
        &s.rejected_connections,
        &s.expired_keys,
        &s.net_input_bytes,
        &s.net_output_bytes,
    ] {
        c.store(0, Ordering::Relaxed);
    }
    for db in ctx.store.dbs.iter_mut() {
        db.lazy_expired = 0;
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
    match std::fs::write(&path, config.render()) {
        Ok(()) => Ok(Reply::ok()),
        Err(e) => Err(CmdError::Owned(format!("ERR Rewriting config file: {e}"))),
    }
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
    Ok(Reply::ok())
}

fn flushall(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    flush_mode(argv, 1)?;
    for db in ctx.store.dbs.iter_mut() {
        db.clear();
    }
    Ok(Reply::ok())
}

fn function_flush(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    flush_mode(argv, 2)?;
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
    let must_save = save.unwrap_or_else(|| !ctx.config().save.is_empty());
    if must_save {
        if let Err(e) = crate::persistence::save_for_shutdown(ctx) {
            tracing::warn!("Error trying to save the DB, can't exit: {e}");
            if !force {
                return Err(CmdError::Static(
                    "ERR Errors trying to SHUTDOWN. Check logs.",
                ));
            }
        }
    }
    tracing::info!("User requested shutdown...");
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
    match ctx.db().lookup(key) {
        // Key bytes + the dict entry and object header Redis counts.
        Some(v) => Ok(Reply::Int((v.memory_usage() + key.len() + 40) as i64)),
        None => Ok(Reply::Null),
    }
}

fn debug(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let allowed = ctx.config().enable_debug_command.clone();
    let local = ctx.client.handle.addr.ip().is_loopback();
    if allowed == "no" || (allowed == "local" && !local) {
        return Err(CmdError::Static(error::DEBUG_NOT_ALLOWED));
    }
    let sub = argv[1].to_ascii_lowercase();
    match sub.as_slice() {
        b"sleep" => {
            let secs = argv
                .get(2)
                .and_then(|a| super::parse::parse_f64(a))
                .ok_or(CmdError::Static(error::SYNTAX))?;
            if secs > 0.0 {
                // Like Redis, DEBUG SLEEP blocks the server: it sleeps holding the keyspace lock.
                std::thread::sleep(std::time::Duration::from_secs_f64(secs.min(3600.0)));
            }
            Ok(Reply::ok())
        }
        b"set-active-expire" => Ok(Reply::ok()),
        b"reload" => crate::persistence::debug_reload(ctx),
        b"jmap" | b"quicklist-packed-threshold" => Ok(Reply::ok()),
        _ => Err(CmdError::Owned(format!(
            "ERR unknown subcommand '{}'. Try DEBUG HELP.",
            String::from_utf8_lossy(&argv[1])
        ))),
    }
}

// ---------------------------------------------------------------------------------------------
// COMMAND
// ---------------------------------------------------------------------------------------------

fn flag_replies(spec: &CommandSpec) -> Reply {
    Reply::Set(
        super::flags::NAMES
            .iter()
            .filter(|(f, _)| spec.flags & f != 0)
            .map(|(_, n)| Reply::Status(n))
            .collect(),
    )
}

fn command_entry(spec: &CommandSpec) -> Reply {
    let display = spec.name;
    Reply::Array(vec![
        Reply::bulk_str(display),
        Reply::Int(spec.arity as i64),
        flag_replies(spec),
        Reply::Int(spec.first_key as i64),
        Reply::Int(spec.last_key as i64),
        Reply::Int(spec.step as i64),
        Reply::Set(vec![]),
        Reply::Array(vec![]),
        Reply::Array(vec![]),
        Reply::Array(spec.subcommands.iter().map(command_entry).collect()),
    ])
}

fn command_count(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(table().len() as i64))
}

fn command_root(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(command_all())
}

/// Every command's COMMAND INFO entry.
pub fn command_all() -> Reply {
    Reply::Array(table().all().iter().map(|s| command_entry(s)).collect())
}

/// A command or `container|sub` by name, as COMMAND INFO and COMMAND DOCS accept them.
fn find_command(name: &[u8]) -> Option<&'static CommandSpec> {
    if let Some(bar) = name.iter().position(|&c| c == b'|') {
        let (_, container) = table().get(&name[..bar])?;
        return super::find_subcommand(container, &name[bar + 1..]);
    }
    table().get(name).map(|(_, s)| s)
}

fn command_info(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() == 2 {
        return Ok(command_all());
    }
    Ok(Reply::Array(
        argv[2..]
            .iter()
            .map(|n| match find_command(n) {
                Some(s) => command_entry(s),
                // Redis 7.0 answers a null bulk here (`_` in RESP3), not a null array.
                None => Reply::Null,
            })
            .collect(),
    ))
}

fn doc_entry(spec: &CommandSpec) -> Reply {
    let mut fields = vec![
        (Reply::bulk_str("summary"), Reply::bulk_str(spec.summary)),
        (Reply::bulk_str("since"), Reply::bulk_str(spec.since)),
        (
            Reply::bulk_str("group"),
            Reply::bulk_str(if spec.has(MODULE) {
                "module"
            } else {
                spec.group
            }),
        ),
    ];
    if spec.has(MODULE) {
        fields.push((Reply::bulk_str("module"), Reply::bulk_str("bf")));
    }
    if !spec.subcommands.is_empty() {
        fields.push((
            Reply::bulk_str("subcommands"),
            Reply::Map(
                spec.subcommands
                    .iter()
                    .map(|s| (Reply::bulk_str(s.name), doc_entry(s)))
                    .collect(),
            ),
        ));
    }
    Reply::Map(fields)
}

fn command_docs(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let specs: Vec<&CommandSpec> = if argv.len() == 2 {
        table().all().to_vec()
    } else {
        argv[2..].iter().filter_map(|n| find_command(n)).collect()
    };
    Ok(Reply::Map(
        specs
            .into_iter()
            .map(|s| (Reply::bulk_str(s.name), doc_entry(s)))
            .collect(),
    ))
}

fn command_list(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut args = Args::skipping(argv, 2);
    let mut pattern: Option<&Bytes> = None;
    if args.eat("FILTERBY") {
        if args.eat("PATTERN") {
            pattern = Some(args.next_bytes()?);
        } else {
            return Err(CmdError::Static(error::SYNTAX));
        }
    }
    args.finish()?;
    Ok(Reply::Array(
        table()
            .all()
            .iter()
            .filter(|s| pattern.is_none_or(|p| super::glob::matches(p, s.name.as_bytes(), true)))
            .map(|s| Reply::bulk_str(s.name))
            .collect(),
    ))
}
