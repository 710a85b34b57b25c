//! CLIENT: the connection's own settings (ID, SETNAME, SETINFO, …) and the registry of all
//! connections as commands see it (LIST, INFO, KILL).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use super::CmdResult;
use super::{cmd, flags::*, Action, Args, CommandSpec, Ctx};
use crate::engine::pubsub::{Kind, PubSub};
use crate::engine::tracking::Options as TrackingOptions;
use crate::engine::ClientHandle;
use crate::error::{self, CmdError};
use crate::protocol::Reply;

#[rustfmt::skip]
pub const SUBCOMMANDS: &[CommandSpec] = &[
    cmd("client|id", 2, NOSCRIPT | LOADING | STALE, 0, 0, 0, "connection", "5.0.0", "Returns the unique client ID of the connection.", client_id),
    cmd("client|setname", 3, NOSCRIPT | LOADING | STALE, 0, 0, 0, "connection", "2.6.9", "Sets the connection name.", client_setname),
    cmd("client|getname", 2, NOSCRIPT | LOADING | STALE, 0, 0, 0, "connection", "2.6.9", "Returns the name of the connection.", client_getname),
    cmd("client|setinfo", 4, NOSCRIPT | LOADING | STALE, 0, 0, 0, "connection", "7.2.0", "Sets information specific to the client or connection.", client_setinfo),
    cmd("client|info", 2, NOSCRIPT | LOADING | STALE, 0, 0, 0, "connection", "6.2.0", "Returns information about the connection.", client_info),
    cmd("client|list", -2, ADMIN | NOSCRIPT | LOADING | STALE, 0, 0, 0, "connection", "2.4.0", "Lists open connections.", client_list),
    cmd("client|kill", -3, ADMIN | NOSCRIPT | LOADING | STALE, 0, 0, 0, "connection", "2.4.0", "Terminates open connections.", client_kill),
    cmd("client|no-evict", 3, ADMIN | NOSCRIPT | LOADING | STALE, 0, 0, 0, "connection", "7.0.0", "Sets the client eviction mode of the connection.", client_no_evict),
    cmd("client|no-touch", 3, NOSCRIPT | LOADING | STALE, 0, 0, 0, "connection", "7.2.0", "Controls whether commands sent by the client affect the LRU/LFU of accessed keys.", client_onoff),
    cmd("client|tracking", -3, NOSCRIPT | LOADING | STALE, 0, 0, 0, "connection", "6.0.0", "Controls server-assisted client-side caching for the connection.", client_tracking),
    cmd("client|caching", 3, NOSCRIPT | LOADING | STALE, 0, 0, 0, "connection", "6.0.0", "Instructs the server whether to track the keys in the next request.", client_caching),
    cmd("client|getredir", 2, NOSCRIPT | LOADING | STALE, 0, 0, 0, "connection", "6.0.0", "Returns the client ID to which the connection's tracking notifications are redirected.", client_getredir),
    cmd("client|trackinginfo", 2, NOSCRIPT | LOADING | STALE, 0, 0, 0, "connection", "6.2.0", "Returns information about server-assisted client-side caching for the connection.", client_trackinginfo),
    cmd("client|pause", -3, ADMIN | NOSCRIPT | LOADING | STALE, 0, 0, 0, "connection", "3.0.0", "Suspends commands processing.", client_pause),
    cmd("client|unpause", 2, ADMIN | NOSCRIPT | LOADING | STALE, 0, 0, 0, "connection", "6.2.0", "Resumes processing commands from paused clients.", client_unpause),
    cmd("client|reply", 3, NOSCRIPT | LOADING | STALE, 0, 0, 0, "connection", "3.2.0", "Instructs the server whether to reply to commands.", client_reply),
    cmd("client|help", 2, LOADING | STALE, 0, 0, 0, "connection", "5.0.0", "Returns helpful text about the different subcommands.", client_help),
];

// ---------------------------------------------------------------------------------------------
// CLIENT
// ---------------------------------------------------------------------------------------------

pub(super) fn set_client_name(ctx: &mut Ctx, name: &[u8]) {
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

fn client_line(ctx: &Ctx, h: &crate::engine::ClientHandle) -> String {
    info_string(ctx.pubsub, h)
}

/// One client's CLIENT LIST line (Redis's catClientInfoString), also the text of the
/// output-buffer-limit log line.
pub fn info_string(
    pubsub: &crate::engine::pubsub::PubSub,
    h: &crate::engine::ClientHandle,
) -> String {
    let lock = |m: &std::sync::Mutex<Option<Bytes>>| {
        m.lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    };
    let now = super::now_ms();
    let idle = now.saturating_sub(h.last_active_ms.load(Ordering::Relaxed)) / 1000;
    let cmd_name = super::last_command_name(h.last_cmd.load(Ordering::Relaxed));
    let (obl, omem) = crate::engine::ClientHandle::output_split(h.output_pending());
    // Redis's order (catClientInfoString): S or O, M, P, x, b, t, R, B, U, e; N when none
    // applies. Its d, c, u, A and r have no state here that lasts long enough to be seen.
    let mut flags = String::new();
    if pubsub.is_monitor(h.id) {
        // A monitor is a replica inside Redis, shown as O.
        flags.push('O');
    } else if h.is_replica.load(Ordering::Relaxed) {
        flags.push('S');
    }
    if h.is_master.load(Ordering::Relaxed) {
        flags.push('M');
    }
    if pubsub.is_subscriber(h.id) {
        flags.push('P');
    }
    let in_multi = h.multi.load(Ordering::Relaxed);
    if in_multi {
        flags.push('x');
    }
    if h.blocked.load(Ordering::Relaxed) {
        flags.push('b');
    }
    let tracking = pubsub.tracking.state(h.id);
    if let Some(st) = tracking {
        flags.push('t');
        if st.broken_redirect {
            flags.push('R');
        }
        if st.bcast {
            flags.push('B');
        }
    }
    if h.addr.is_unix() {
        flags.push('U');
    }
    if h.no_evict.load(Ordering::Relaxed) {
        flags.push('e');
    }
    let redir = tracking.map_or(-1, |st| st.redirect as i64);
    if flags.is_empty() {
        flags.push('N');
    }
    format!(
        "id={} addr={} laddr={} fd=8 name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} argv-mem={} multi-mem={} rbs=1024 rbp=0 obl={} oll={} omem={} tot-mem={} events=r cmd={} user={} redir={} resp={} lib-name={} lib-ver={}",
        h.id,
        h.addr,
        h.laddr,
        lock(&h.name),
        h.created.elapsed().as_secs(),
        idle,
        flags,
        h.db.load(Ordering::Relaxed),
        pubsub.count(Kind::Channel, h.id),
        pubsub.count(Kind::Pattern, h.id),
        pubsub.count(Kind::Shard, h.id),
        if in_multi {
            h.multi_queued.load(Ordering::Relaxed) as i64
        } else {
            -1
        },
        h.mem.qbuf.load(Ordering::Relaxed),
        h.mem.qbuf_free.load(Ordering::Relaxed),
        h.mem.argv_mem.load(Ordering::Relaxed),
        h.multi_mem.load(Ordering::Relaxed),
        obl,
        omem.div_ceil(crate::engine::shared::REPLY_BUFFER_BYTES),
        omem,
        h.total_memory(),
        cmd_name,
        user_name(h).unwrap_or("(superuser)"),
        redir,
        h.proto.load(Ordering::Relaxed),
        lock(&h.lib_name),
        lock(&h.lib_ver),
    )
}

/// The user a client is authenticated as: `default`, the only user, except for the link to our
/// primary, which Redis runs as no user at all (`c->user == NULL`), shown as `(superuser)`.
fn user_name(h: &ClientHandle) -> Option<&'static str> {
    (!h.is_master.load(Ordering::Relaxed)).then_some("default")
}

fn client_info(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let line = client_line(ctx, &ctx.client.handle.clone());
    Ok(Reply::Verbatim(Bytes::from(line + "\n")))
}

/// `CLIENT LIST [TYPE type | ID id ...]`, parsed as Redis 7.0 does: TYPE only as the sole option,
/// IDs listed in the order given (repeats included, unknown ones skipped).
fn client_list(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let listed: Vec<Arc<ClientHandle>> = if argv.len() == 4 && argv[2].eq_ignore_ascii_case(b"TYPE")
    {
        let wanted = ClientType::from_name(&argv[3])?;
        all_clients(ctx)
            .into_iter()
            .filter(|h| ClientType::of(ctx.pubsub, h) == wanted)
            .collect()
    } else if argv.len() > 3 && argv[2].eq_ignore_ascii_case(b"ID") {
        let mut ids = Vec::with_capacity(argv.len() - 3);
        for a in &argv[3..] {
            ids.push(
                crate::numeric::parse_i64(a).ok_or(CmdError::Static("ERR Invalid client ID"))?,
            );
        }
        let clients = ctx.shared.clients();
        ids.into_iter()
            .filter_map(|id| clients.get(&u64::try_from(id).ok()?).cloned())
            .collect()
    } else if argv.len() != 2 {
        return Err(CmdError::Static(error::SYNTAX));
    } else {
        all_clients(ctx)
    };
    let mut out = String::new();
    for h in listed {
        out.push_str(&client_line(ctx, &h));
        out.push('\n');
    }
    Ok(Reply::Verbatim(Bytes::from(out)))
}

/// Every connected client, oldest first (Redis's `server.clients` order).
fn all_clients(ctx: &Ctx) -> Vec<Arc<ClientHandle>> {
    let mut handles: Vec<_> = ctx.shared.clients().values().cloned().collect();
    handles.sort_by_key(|h| h.id);
    handles
}

/// The client classes of CLIENT LIST / CLIENT KILL `TYPE` (Redis's getClientType).
#[derive(Clone, Copy, PartialEq, Eq)]
enum ClientType {
    Normal,
    Replica,
    Master,
    PubSub,
}

impl ClientType {
    /// Redis's getClientTypeByName (`slave` is `replica`), with its error for other names.
    fn from_name(name: &[u8]) -> Result<ClientType, CmdError> {
        let known = [
            (&b"normal"[..], ClientType::Normal),
            (b"slave", ClientType::Replica),
            (b"replica", ClientType::Replica),
            (b"pubsub", ClientType::PubSub),
            (b"master", ClientType::Master),
        ];
        known
            .iter()
            .find(|(n, _)| name.eq_ignore_ascii_case(n))
            .map(|&(_, t)| t)
            .ok_or_else(|| {
                CmdError::Owned(format!(
                    "ERR Unknown client type '{}'",
                    String::from_utf8_lossy(name)
                ))
            })
    }

    /// The class of client `h`. A monitor is not a replica here (Redis marks monitors as
    /// replicas but exposes them as normal clients); a client with a subscription is pubsub.
    fn of(pubsub: &PubSub, h: &ClientHandle) -> ClientType {
        if h.is_master.load(Ordering::Relaxed) {
            ClientType::Master
        } else if h.is_replica.load(Ordering::Relaxed) {
            ClientType::Replica
        } else if pubsub.is_subscriber(h.id) {
            ClientType::PubSub
        } else {
            ClientType::Normal
        }
    }
}

/// Ends client `h` for CLIENT KILL. The caller itself is not cut off at once: as Redis
/// (CLIENT_CLOSE_AFTER_REPLY), it gets the reply and its connection closes after it.
fn kill_client(ctx: &mut Ctx, h: &ClientHandle) {
    if h.id == ctx.client.handle.id {
        ctx.client.action = Some(Action::Close);
    } else {
        h.kill();
    }
}

fn client_kill(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let handles: Vec<_> = ctx.shared.clients().values().cloned().collect();
    if argv.len() == 3 {
        // Old form: CLIENT KILL addr:port, which may name the caller itself.
        let target = String::from_utf8_lossy(&argv[2]).into_owned();
        for h in &handles {
            if h.addr.to_string() == target {
                kill_client(ctx, h);
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
                if crate::numeric::parse_i64(v).is_none_or(|n| n <= 0) {
                    return Err(CmdError::Static("ERR client-id should be greater than 0"));
                }
            }
            b"type" => {
                ClientType::from_name(v)?;
            }
            b"user" => {
                // Looked up as it is parsed, by exact name (Redis's ACLGetUserByName), so an
                // unknown user is reported before any later option is looked at; `default` is
                // the only user. Redis prints the name with `%s`, which stops at a NUL.
                if &v[..] != b"default" {
                    let shown = &v[..v.iter().position(|&c| c == 0).unwrap_or(v.len())];
                    return Err(CmdError::Owned(format!(
                        "ERR No such user '{}'",
                        String::from_utf8_lossy(shown)
                    )));
                }
            }
            b"addr" | b"laddr" => {}
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
        // A repeated option replaces the earlier one, as in Redis.
        filters.retain(|(k, _)| *k != key);
        filters.push((key, v.clone()));
    }
    let me = ctx.client.handle.id;
    let mut killed = 0;
    for h in &handles {
        if skipme && h.id == me {
            continue;
        }
        let ok = filters.iter().all(|(k, v)| match k.as_slice() {
            b"id" => crate::numeric::parse_i64(v) == Some(h.id as i64),
            b"addr" => h.addr.to_string().as_bytes() == &v[..],
            b"laddr" => h.laddr.to_string().as_bytes() == &v[..],
            // The link to our primary runs as no user, so USER default spares it.
            b"user" => user_name(h).is_some_and(|u| u.as_bytes() == &v[..]),
            b"type" => ClientType::from_name(v).ok() == Some(ClientType::of(ctx.pubsub, h)),
            _ => false,
        });
        if ok {
            kill_client(ctx, h);
            killed += 1;
        }
    }
    Ok(Reply::Int(killed))
}

/// A CLIENT subcommand's `ON|OFF` argument; anything else is Redis's syntax error.
fn parse_on_off(arg: &[u8]) -> Result<bool, CmdError> {
    if arg.eq_ignore_ascii_case(b"on") {
        Ok(true)
    } else if arg.eq_ignore_ascii_case(b"off") {
        Ok(false)
    } else {
        Err(CmdError::Static(error::SYNTAX))
    }
}

/// `CLIENT NO-EVICT ON|OFF` → OK. Only shown (flag e): hyperbloom never evicts clients.
fn client_no_evict(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let on = parse_on_off(&argv[2])?;
    ctx.client.handle.no_evict.store(on, Ordering::Relaxed);
    Ok(Reply::ok())
}

/// CLIENT PAUSE timeout [WRITE|ALL] (Redis's clientCommand): clients' commands wait until
/// `timeout` milliseconds from now (`engine::pause`), all of them or those that may write.
fn client_pause(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() > 4 {
        return Err(CmdError::subcommand_syntax(argv));
    }
    // The mode is checked first, as Redis does.
    let all = match argv.get(3) {
        None => true,
        Some(m) if m.eq_ignore_ascii_case(b"all") => true,
        Some(m) if m.eq_ignore_ascii_case(b"write") => false,
        Some(_) => {
            return Err(CmdError::Static(
                "ERR CLIENT PAUSE mode must be WRITE or ALL",
            ))
        }
    };
    let timeout = crate::numeric::int::parse_i64(&argv[2])
        .ok_or(CmdError::Static(error::TIMEOUT_NOT_INTEGER))?;
    if timeout < 0 {
        return Err(CmdError::Static(error::TIMEOUT_NEGATIVE));
    }
    let until = if timeout == 0 {
        0
    } else {
        (ctx.now_ms as i64)
            .checked_add(timeout)
            .ok_or(CmdError::Static("ERR timeout is out of range"))? as u64
    };
    ctx.shared.client_pause.pause(until, all);
    Ok(Reply::ok())
}

fn client_unpause(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    ctx.shared.client_pause.unpause();
    Ok(Reply::ok())
}

/// CLIENT REPLY ON|OFF|SKIP (Redis's clientReplyCommand): ON answers OK; OFF and SKIP answer
/// nothing, OFF silencing every reply until ON, SKIP the next command's only (not while OFF).
/// The connection drops the silenced replies (`server::connection`); pushes still go out.
fn client_reply(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    use super::ReplyMode;
    let mode = &mut ctx.client.reply_mode;
    let arg = &argv[2];
    if arg.eq_ignore_ascii_case(b"on") {
        *mode = ReplyMode::On;
        Ok(Reply::ok())
    } else if arg.eq_ignore_ascii_case(b"off") {
        *mode = ReplyMode::Off;
        Ok(Reply::Seq(Vec::new()))
    } else if arg.eq_ignore_ascii_case(b"skip") {
        if *mode != ReplyMode::Off {
            *mode = ReplyMode::SkipNext;
        }
        Ok(Reply::Seq(Vec::new()))
    } else {
        Err(CmdError::Static(error::SYNTAX))
    }
}

fn client_onoff(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    parse_on_off(&argv[2]).map(|_| Reply::ok())
}

/// `CLIENT HELP`, Redis 7.0.15's text.
const CLIENT_HELP: &[&str] = &[
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CACHING (YES|NO)",
    "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
    "GETREDIR",
    "    Return the client ID we are redirecting to when tracking is enabled.",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "UNPAUSE",
    "    Stop the current client pause, resuming traffic.",
    "PAUSE <timeout> [WRITE|ALL]",
    "    Suspend all, or just write, clients for <timeout> milliseconds.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
    "         [OPTIN] [OPTOUT] [NOLOOP]",
    "    Control server assisted client side caching.",
    "TRACKINGINFO",
    "    Report tracking status for the current connection.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
    "HELP",
    "    Prints this help.",
];

fn client_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    super::help_reply(CLIENT_HELP)
}

pub(super) fn valid_name(name: &[u8]) -> bool {
    name.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

// ---------------------------------------------------------------------------------------------
// CLIENT TRACKING (client-side caching; the registry is engine::tracking)
// ---------------------------------------------------------------------------------------------

/// `CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN] [OPTOUT] [NOLOOP]` → OK.
/// The checks and their order are Redis 7.0's.
fn client_tracking(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut o = TrackingOptions::default();
    let mut j = 3;
    while j < argv.len() {
        let a = &argv[j];
        let more = j + 1 < argv.len();
        if a.eq_ignore_ascii_case(b"redirect") && more {
            j += 1;
            if o.redirect != 0 {
                return Err(CmdError::Static(error::TRACKING_ONE_REDIRECT));
            }
            let id = crate::numeric::int::parse_i64(&argv[j])
                .ok_or(CmdError::Static(error::NOT_INTEGER))?;
            let exists = id > 0 && ctx.shared.clients().contains_key(&(id as u64));
            if !exists {
                return Err(CmdError::Static(error::TRACKING_NO_REDIRECT_TARGET));
            }
            o.redirect = id as u64;
        } else if a.eq_ignore_ascii_case(b"bcast") {
            o.bcast = true;
        } else if a.eq_ignore_ascii_case(b"optin") {
            o.optin = true;
        } else if a.eq_ignore_ascii_case(b"optout") {
            o.optout = true;
        } else if a.eq_ignore_ascii_case(b"noloop") {
            o.noloop = true;
        } else if a.eq_ignore_ascii_case(b"prefix") && more {
            j += 1;
            o.prefixes.push(argv[j].clone());
        } else {
            return Err(CmdError::Static(error::SYNTAX));
        }
        j += 1;
    }
    let me = ctx.client.handle.id;
    if argv[2].eq_ignore_ascii_case(b"on") {
        if !o.bcast && !o.prefixes.is_empty() {
            return Err(CmdError::Static(error::TRACKING_PREFIX_NEEDS_BCAST));
        }
        let current = ctx.pubsub.tracking.state(me);
        if current.is_some_and(|st| st.bcast != o.bcast) {
            return Err(CmdError::Static(error::TRACKING_BCAST_SWITCH));
        }
        if o.bcast && (o.optin || o.optout) {
            return Err(CmdError::Static(error::TRACKING_BCAST_OPTS));
        }
        if o.optin && o.optout {
            return Err(CmdError::Static(error::TRACKING_OPTIN_AND_OPTOUT));
        }
        if current.is_some_and(|st| (o.optin && st.optout) || (o.optout && st.optin)) {
            return Err(CmdError::Static(error::TRACKING_OPT_SWITCH));
        }
        if o.bcast {
            check_prefix_collisions(current.map(|st| &st.prefixes), &o.prefixes)?;
        }
        let handle = ctx.client.handle.clone();
        ctx.pubsub.tracking.enable(&handle, &o);
    } else if argv[2].eq_ignore_ascii_case(b"off") {
        ctx.pubsub.tracking.disable(me);
    } else {
        return Err(CmdError::Static(error::SYNTAX));
    }
    Ok(Reply::ok())
}

/// Redis's `checkPrefixCollisionsOrReply`: no new prefix may be a prefix of (or have as prefix)
/// one the client has, or another new one.
fn check_prefix_collisions(
    existing: Option<&std::collections::BTreeSet<Bytes>>,
    new: &[Bytes],
) -> Result<(), CmdError> {
    let overlap = |a: &[u8], b: &[u8]| {
        let n = a.len().min(b.len());
        a[..n] == b[..n]
    };
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    for (i, p) in new.iter().enumerate() {
        if let Some(old) = existing.and_then(|e| e.iter().find(|o| overlap(o, p))) {
            return Err(CmdError::Owned(format!(
                "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                text(p),
                text(old)
            )));
        }
        if let Some(other) = new[i + 1..].iter().find(|o| overlap(o, p)) {
            return Err(CmdError::Owned(format!(
                "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                text(p),
                text(other)
            )));
        }
    }
    Ok(())
}

/// `CLIENT CACHING YES|NO` → OK: track (OPTIN) or do not track (OPTOUT) the next command.
fn client_caching(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let me = ctx.client.handle.id;
    let Some(st) = ctx.pubsub.tracking.state_mut(me) else {
        return Err(CmdError::Static(error::CACHING_NOT_TRACKING));
    };
    if argv[2].eq_ignore_ascii_case(b"yes") {
        if !st.optin {
            return Err(CmdError::Static(error::CACHING_YES_NEEDS_OPTIN));
        }
    } else if argv[2].eq_ignore_ascii_case(b"no") {
        if !st.optout {
            return Err(CmdError::Static(error::CACHING_NO_NEEDS_OPTOUT));
        }
    } else {
        return Err(CmdError::Static(error::SYNTAX));
    }
    st.caching = true;
    Ok(Reply::ok())
}

/// `CLIENT GETREDIR` → the redirect id, 0 without one, -1 when tracking is off.
fn client_getredir(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let me = ctx.client.handle.id;
    Ok(Reply::Int(
        ctx.pubsub
            .tracking
            .state(me)
            .map_or(-1, |st| st.redirect as i64),
    ))
}

/// `CLIENT TRACKINGINFO` → map of `flags` (a set), `redirect`, `prefixes`.
fn client_trackinginfo(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let me = ctx.client.handle.id;
    let st = ctx.pubsub.tracking.state(me);
    let mut flags = vec![if st.is_some() { "on" } else { "off" }];
    let mut prefixes = Vec::new();
    if let Some(st) = st {
        if st.bcast {
            flags.push("bcast");
        }
        if st.optin {
            flags.push("optin");
            if st.caching {
                flags.push("caching-yes");
            }
        }
        if st.optout {
            flags.push("optout");
            if st.caching {
                flags.push("caching-no");
            }
        }
        if st.noloop {
            flags.push("noloop");
        }
        if st.broken_redirect {
            flags.push("broken_redirect");
        }
        prefixes = st.prefixes.iter().cloned().map(Reply::Bulk).collect();
    }
    Ok(Reply::Map(vec![
        (
            Reply::bulk_str("flags"),
            Reply::Set(flags.into_iter().map(Reply::bulk_str).collect()),
        ),
        (
            Reply::bulk_str("redirect"),
            Reply::Int(st.map_or(-1, |st| st.redirect as i64)),
        ),
        (Reply::bulk_str("prefixes"), Reply::Array(prefixes)),
    ]))
}
