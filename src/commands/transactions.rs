//! MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! Queuing happens in the dispatcher (commands after MULTI are answered `+QUEUED`; a command refused
//! before execution marks the transaction so EXEC answers EXECABORT). EXEC runs the queue while the
//! connection holds the keyspace lock, so the transaction is atomic. WATCH records each key's
//! version; any write to the key — or its expiry — bumps it, and EXEC then answers a null array.

use bytes::Bytes;

use super::CmdResult;
use super::{cmd, flags::*, table, ClientState, CommandSpec, Ctx};
use crate::error::{self, CmdError};
use crate::protocol::Reply;
use crate::store::db::Store;

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("multi", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, 0, 0, 0, "transactions", "1.2.0", "Starts a transaction.", multi),
    cmd("exec", 1, NOSCRIPT | LOADING | STALE | SKIP_SLOWLOG, 0, 0, 0, "transactions", "1.2.0", "Executes all commands in a transaction.", exec),
    cmd("discard", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, 0, 0, 0, "transactions", "2.0.0", "Discards a transaction.", discard),
    cmd("watch", -2, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, 1, -1, 1, "transactions", "2.2.0", "Monitors changes to keys to determine the execution of a transaction.", watch),
    cmd("unwatch", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, 0, 0, 0, "transactions", "2.2.0", "Forgets about watched keys of a transaction.", unwatch),
];

/// Commands that execute immediately even inside MULTI (everything else is queued).
pub fn runs_inside_multi(name: &str) -> bool {
    matches!(
        name,
        "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
    )
}

fn multi(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    if ctx.client.multi.is_some() {
        return Err(CmdError::Static(error::MULTI_NESTED));
    }
    ctx.client.multi = Some(new_queue());
    ctx.client.multi_error = false;
    ctx.client.handle.publish_multi_opened();
    Ok(Reply::ok())
}

/// An empty transaction queue, with room for what a redis-py pipeline sends at once (16
/// commands: 384 bytes while MULTI is open). Grown from empty, the queue reallocated at 4, 8
/// and 16 commands: ~960 instructions a 14-command transaction (callgrind,
/// `scripts/bench_multi.py`).
pub fn new_queue() -> Vec<Queued> {
    Vec::with_capacity(16)
}

/// A command in a transaction's queue: its arguments, and its command table index (the table
/// is fixed once the server runs), so that EXEC need not look it up again.
pub struct Queued {
    pub index: usize,
    pub argv: Vec<Bytes>,
}

/// Adds command `index` to the open transaction's queue (Redis's queueMultiCommand).
pub fn queue(client: &mut ClientState, index: usize, argv: &[Bytes]) {
    if let Some(q) = client.multi.as_mut() {
        q.push(Queued {
            index,
            argv: argv.to_vec(),
        });
        client.handle.publish_queued(argv);
    }
}

/// Ends the transaction without running it (Redis's discardTransaction): DISCARD, RESET, an
/// EXEC that aborts.
pub fn discard_transaction(client: &mut ClientState, store: &mut Store) {
    client.multi = None;
    client.multi_error = false;
    client.handle.publish_multi_closed();
    client.unwatch_all(store);
}

fn exec(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let Some(queue) = ctx.client.multi.take() else {
        return Err(CmdError::Static(error::EXEC_WITHOUT_MULTI));
    };
    if ctx.client.multi_error {
        discard_transaction(ctx.client, ctx.store);
        return Err(CmdError::Static(error::EXECABORT));
    }
    // A watched key that changed, or that expired since WATCH, aborts the transaction.
    let now = ctx.now_ms;
    let aborted = ctx
        .client
        .watches
        .iter()
        .any(|(db, key, version, expired_then)| {
            let d = ctx.store.db(*db, now);
            d.watch_version(key) != *version || (!expired_then && d.is_logically_expired(key))
        });
    if aborted {
        discard_transaction(ctx.client, ctx.store);
        return Ok(Reply::NullArray);
    }
    // The queue is taken, so the commands run outside MULTI; CLIENT LIST still shows the
    // transaction (flag x, `multi=` its size) until they have run, as Redis's execCommand
    // discards it only then. The watches go first, as there (unwatchAllKeys before the calls).
    ctx.client.multi_error = false;
    ctx.client.unwatch_all(ctx.store);
    let mut replies = Vec::with_capacity(queue.len());
    ctx.client.in_exec = true;
    for Queued { index, argv } in &queue {
        let spec = table().all()[*index];
        // A refusal that depends on server state is checked at EXEC time, as Redis does.
        // Neither the AOF's replay nor the primary's stream is refused (the dispatcher's
        // reasons: `commands::dispatch_inner`).
        let refusal = if ctx.client.replaying || ctx.client.is_master {
            None
        } else {
            super::refuse_at_exec(ctx.shared, ctx.repl, spec)
        };
        let reply = match refusal {
            Some(e) => Reply::Error(e),
            None => super::execute(ctx, *index, spec, argv),
        };
        // Pushes the command sent to this very client (a RESP3 PUBLISH to its own channel, a
        // keyspace event for its own write) go before its reply, inside EXEC's array, as in Redis.
        let mut pushed = bytes::BytesMut::new();
        if ctx.client.handle.outbox.drain_into(&mut pushed) > 0 {
            reply.encode(ctx.client.proto, &mut pushed);
            replies.push(Reply::Raw(pushed.freeze()));
        } else {
            replies.push(reply);
        }
        if ctx.client.action.is_some() {
            break;
        }
    }
    ctx.client.in_exec = false;
    ctx.client.handle.publish_multi_closed();
    Ok(Reply::Array(replies))
}

fn discard(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    if ctx.client.multi.is_none() {
        return Err(CmdError::Static(error::DISCARD_WITHOUT_MULTI));
    }
    discard_transaction(ctx.client, ctx.store);
    Ok(Reply::ok())
}

fn watch(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if ctx.client.multi.is_some() {
        return Err(CmdError::Static(error::WATCH_IN_MULTI));
    }
    let dbi = ctx.client.db;
    for key in &argv[1..] {
        if ctx
            .client
            .watches
            .iter()
            .any(|(d, k, _, _)| *d == dbi && k == key)
        {
            continue;
        }
        let db = ctx.db();
        let expired = db.is_logically_expired(key);
        let version = db.watch(key);
        ctx.client
            .watches
            .push((dbi, key.clone(), version, expired));
    }
    Ok(Reply::ok())
}

fn unwatch(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    ctx.client.unwatch_all(ctx.store);
    Ok(Reply::ok())
}
