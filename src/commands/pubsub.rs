//! Pub/sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, SSUBSCRIBE, SUNSUBSCRIBE,
//! PUBLISH, SPUBLISH and the PUBSUB container, as Redis 7.0 has them.
//!
//! The registry and delivery live on the engine floor ([`crate::engine::pubsub`]); these handlers
//! only shape the replies. Each (un)subscription is confirmed by its own frame —
//! `[subscribe, channel, count]`, a push frame in RESP3, an array in RESP2 — where `count` is the
//! client's channels plus patterns (shard channels count apart). A RESP2 client with any
//! subscription is in the subscriber context: the dispatcher lets only the commands of
//! [`allowed_in_subscriber_context`] through, and PING answers `[pong, message]`.

use bytes::Bytes;

use super::CmdResult;
use super::{cmd, flags::*, CommandSpec, Ctx};
use crate::engine::pubsub::Kind;
use crate::error::CmdError;
use crate::protocol::Reply;

/// SSUBSCRIBE inside MULTI (`ssubscribeCommand`: a MULTI client may not block).
pub const SSUBSCRIBE_DENY_BLOCKING: &str =
    "ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client";

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("subscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE, 0, 0, 0, "pubsub", "2.0.0", "Listens for messages published to channels.", subscribe),
    cmd("unsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE, 0, 0, 0, "pubsub", "2.0.0", "Stops listening to messages posted to channels.", unsubscribe),
    cmd("psubscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE, 0, 0, 0, "pubsub", "2.0.0", "Listens for messages published to channels that match one or more patterns.", psubscribe),
    cmd("punsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE, 0, 0, 0, "pubsub", "2.0.0", "Stops listening to messages published to channels that match one or more patterns.", punsubscribe),
    cmd("ssubscribe", -2, PUBSUB | NOSCRIPT | LOADING | STALE, 1, -1, 1, "pubsub", "7.0.0", "Listens for messages published to shard channels.", ssubscribe),
    cmd("sunsubscribe", -1, PUBSUB | NOSCRIPT | LOADING | STALE, 1, -1, 1, "pubsub", "7.0.0", "Stops listening to messages posted to shard channels.", sunsubscribe),
    cmd("publish", 3, PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE, 0, 0, 0, "pubsub", "2.0.0", "Posts a message to a channel.", publish),
    cmd("spublish", 3, PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE, 1, 1, 1, "pubsub", "7.0.0", "Post a message to a shard channel", spublish),
    CommandSpec {
        name: "pubsub",
        arity: -2,
        flags: 0,
        first_key: 0,
        last_key: 0,
        step: 0,
        group: "pubsub",
        since: "2.8.0",
        summary: "A container for Pub/Sub commands.",
        handler: super::server::no_direct_call,
        subcommands: PUBSUB_SUBCOMMANDS,
        shared: None,
        shared_parallel_only: false,
    },
];

#[rustfmt::skip]
const PUBSUB_SUBCOMMANDS: &[CommandSpec] = &[
    cmd("pubsub|channels", -2, PUBSUB | LOADING | STALE, 0, 0, 0, "pubsub", "2.8.0", "Returns the active channels.", pubsub_channels),
    cmd("pubsub|numsub", -2, PUBSUB | LOADING | STALE, 0, 0, 0, "pubsub", "2.8.0", "Returns a count of subscribers to channels.", pubsub_numsub),
    cmd("pubsub|numpat", 2, PUBSUB | LOADING | STALE, 0, 0, 0, "pubsub", "2.8.0", "Returns a count of unique pattern subscriptions.", pubsub_numpat),
    cmd("pubsub|shardchannels", -2, PUBSUB | LOADING | STALE, 0, 0, 0, "pubsub", "7.0.0", "Returns the active shard channels.", pubsub_shardchannels),
    cmd("pubsub|shardnumsub", -2, PUBSUB | LOADING | STALE, 0, 0, 0, "pubsub", "7.0.0", "Returns the count of subscribers of shard channels.", pubsub_shardnumsub),
    cmd("pubsub|help", 2, LOADING | STALE, 0, 0, 0, "pubsub", "6.2.0", "Returns helpful text about the different subcommands.", pubsub_help),
];

/// What a RESP2 client in the subscriber context may run.
pub fn allowed_in_subscriber_context(name: &str) -> bool {
    matches!(
        name,
        "ping"
            | "subscribe"
            | "ssubscribe"
            | "unsubscribe"
            | "sunsubscribe"
            | "psubscribe"
            | "punsubscribe"
            | "quit"
            | "reset"
    )
}

/// The confirmation frame of one (un)subscription.
fn frame(kind: &'static str, name: Reply, count: usize) -> Reply {
    Reply::Push(vec![
        Reply::Bulk(Bytes::from_static(kind.as_bytes())),
        name,
        Reply::Int(count as i64),
    ])
}

/// The count a confirmation of `kind` carries.
fn count(ctx: &Ctx, kind: Kind) -> usize {
    let id = ctx.client.handle.id;
    match kind {
        Kind::Shard => ctx.pubsub.count(Kind::Shard, id),
        _ => ctx.pubsub.classic_count(id),
    }
}

fn subscribe_any(ctx: &mut Ctx, argv: &[Bytes], kind: Kind, word: &'static str) -> CmdResult {
    let handle = ctx.client.handle.clone();
    let mut frames = Vec::with_capacity(argv.len() - 1);
    for name in &argv[1..] {
        ctx.pubsub.subscribe(kind, &handle, name);
        frames.push(frame(word, Reply::Bulk(name.clone()), count(ctx, kind)));
    }
    Ok(Reply::Seq(frames))
}

fn unsubscribe_any(ctx: &mut Ctx, argv: &[Bytes], kind: Kind, word: &'static str) -> CmdResult {
    let id = ctx.client.handle.id;
    let names = if argv.len() > 1 {
        argv[1..].to_vec()
    } else {
        ctx.pubsub.names(kind, id)
    };
    if names.is_empty() {
        return Ok(frame(word, Reply::Null, count(ctx, kind)));
    }
    let mut frames = Vec::with_capacity(names.len());
    for name in names {
        ctx.pubsub.unsubscribe(kind, id, &name);
        frames.push(frame(word, Reply::Bulk(name), count(ctx, kind)));
    }
    Ok(Reply::Seq(frames))
}

/// `SUBSCRIBE channel [channel ...]` → one `[subscribe, channel, count]` frame per channel.
fn subscribe(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    subscribe_any(ctx, argv, Kind::Channel, "subscribe")
}

/// `UNSUBSCRIBE [channel ...]` → one `[unsubscribe, channel, count]` frame per channel (all of
/// the client's when none is named; `[unsubscribe, nil, 0]` when it has none).
fn unsubscribe(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    unsubscribe_any(ctx, argv, Kind::Channel, "unsubscribe")
}

/// `PSUBSCRIBE pattern [pattern ...]` → one `[psubscribe, pattern, count]` frame per pattern.
fn psubscribe(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    subscribe_any(ctx, argv, Kind::Pattern, "psubscribe")
}

/// `PUNSUBSCRIBE [pattern ...]`, as UNSUBSCRIBE.
fn punsubscribe(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    unsubscribe_any(ctx, argv, Kind::Pattern, "punsubscribe")
}

/// `SSUBSCRIBE shardchannel [shardchannel ...]`; the count is of shard channels only. Refused
/// inside a transaction, as Redis refuses it for a client that may not block.
fn ssubscribe(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if ctx.client.in_exec {
        return Err(CmdError::Static(SSUBSCRIBE_DENY_BLOCKING));
    }
    subscribe_any(ctx, argv, Kind::Shard, "ssubscribe")
}

/// `SUNSUBSCRIBE [shardchannel ...]`, as UNSUBSCRIBE for shard channels.
fn sunsubscribe(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    unsubscribe_any(ctx, argv, Kind::Shard, "sunsubscribe")
}

/// `PUBLISH channel message` → the number of deliveries (channel plus pattern subscribers).
fn publish(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let n = ctx.pubsub.publish(&argv[1], &argv[2], ctx.now_ms / 1000);
    Ok(Reply::Int(n as i64))
}

/// `SPUBLISH shardchannel message` → the number of shard subscribers reached.
fn spublish(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let n = ctx.pubsub.spublish(&argv[1], &argv[2], ctx.now_ms / 1000);
    Ok(Reply::Int(n as i64))
}

fn channels(ctx: &mut Ctx, argv: &[Bytes], kind: Kind) -> CmdResult {
    if argv.len() > 3 {
        return Err(CmdError::subcommand_syntax(argv));
    }
    let list = ctx.pubsub.active(kind, argv.get(2).map(|p| &p[..]));
    Ok(Reply::Array(list.into_iter().map(Reply::Bulk).collect()))
}

fn numsub(ctx: &mut Ctx, argv: &[Bytes], kind: Kind) -> CmdResult {
    let mut out = Vec::with_capacity((argv.len() - 2) * 2);
    for ch in &argv[2..] {
        out.push(Reply::Bulk(ch.clone()));
        out.push(Reply::Int(ctx.pubsub.numsub(kind, ch) as i64));
    }
    Ok(Reply::Array(out))
}

/// `PUBSUB CHANNELS [pattern]` → the channels with at least one subscriber.
fn pubsub_channels(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    channels(ctx, argv, Kind::Channel)
}

/// `PUBSUB NUMSUB [channel ...]` → a flat array of channel, count (patterns not counted).
fn pubsub_numsub(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    numsub(ctx, argv, Kind::Channel)
}

/// `PUBSUB NUMPAT` → the number of patterns with a subscriber.
fn pubsub_numpat(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Reply::Int(ctx.pubsub.numpat() as i64))
}

/// `PUBSUB SHARDCHANNELS [pattern]`.
fn pubsub_shardchannels(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    channels(ctx, argv, Kind::Shard)
}

/// `PUBSUB SHARDNUMSUB [shardchannel ...]`.
fn pubsub_shardnumsub(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    numsub(ctx, argv, Kind::Shard)
}

const PUBSUB_HELP: &[&str] = &[
    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
    "HELP",
    "    Prints this help.",
];

/// `PUBSUB HELP` → the help lines as status replies.
fn pubsub_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    super::help_reply(PUBSUB_HELP)
}
