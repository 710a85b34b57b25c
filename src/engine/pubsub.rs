//! Pub/sub: who listens to what, and delivery into the listeners' outboxes.
//!
//! The registry ([`PubSub`]) lives in the [`Engine`](super::Engine), under the keyspace lock, so a
//! keyspace notification raised by a command and a `PUBLISH` are ordered with every other command,
//! and the handlers need no second lock. Three namespaces, as in Redis 7.0: channels (SUBSCRIBE),
//! patterns (PSUBSCRIBE, matched with [`crate::glob`]) and shard channels (SSUBSCRIBE; a single
//! shard here, so they behave like a namespace of their own).
//!
//! Delivery is cheap for the publisher: a message is encoded once per (kind, channel, pattern) and
//! appended to each subscriber's [`Outbox`] — a byte buffer beside its connection — and the
//! connection's task is woken to write it. RESP2 and RESP3 frames differ only in the first byte
//! (`*3` against `>3`), so one encoded body serves both protocols. The publisher never touches a
//! socket; a slow subscriber's outbox grows until `client-output-buffer-limit pubsub` closes it.
//!
//! The current client's own deliveries (a RESP3 client publishing to a channel it listens to, or a
//! keyspace event for its own write) land in its outbox too; its connection drains the outbox
//! before writing each reply, which reproduces Redis's order (the push before the reply).
//!
//! Subscribers are kept in subscription order per channel (Redis keeps a list per channel); the
//! pattern table iterates in hash order, as Redis's dict does.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{BufMut, Bytes, BytesMut};

use super::ClientHandle;
use crate::protocol::reply::{put_bulk, put_header};

type Map<V> = HashMap<Bytes, V, ahash::RandomState>;
type Set = HashSet<Bytes, ahash::RandomState>;

// ---------------------------------------------------------------------------------------------
// The outbox
// ---------------------------------------------------------------------------------------------

/// Bytes waiting to be written to one client that did not come from its own command replies:
/// pub/sub messages, keyspace events, invalidations, MONITOR lines.
#[derive(Default)]
pub struct Outbox {
    buf: Mutex<BytesMut>,
    /// `buf.len()`, readable without the lock (the connection checks it after every command).
    len: AtomicUsize,
    /// Wakes the connection's task: for a push, and (through [`super::ClientHandle::kill`] and
    /// [`super::Shared::request_shutdown`]) for a CLIENT KILL or the server's shutdown.
    pub ready: super::signal::Signal,
}

/// `client-output-buffer-limit` for one class (the pubsub class applies at each delivery).
pub use crate::config::OutputLimit;

impl Outbox {
    /// Bytes waiting.
    pub fn pending(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Appends one frame: an aggregate header of `items` elements (`>` in RESP3, `*` in RESP2)
    /// followed by the pre-encoded `body`, and wakes the connection.
    pub fn push_frame(&self, proto: u8, items: usize, body: &[u8]) {
        let mut buf = self.buf.lock().unwrap_or_else(|p| p.into_inner());
        put_header(&mut *buf, if proto >= 3 { b'>' } else { b'*' }, items);
        buf.put_slice(body);
        self.len.store(buf.len(), Ordering::Release);
        drop(buf);
        self.ready.notify();
    }

    /// Appends bytes as they are (MONITOR lines) and wakes the connection.
    pub fn push_raw(&self, bytes: &[u8]) {
        let mut buf = self.buf.lock().unwrap_or_else(|p| p.into_inner());
        buf.put_slice(bytes);
        self.len.store(buf.len(), Ordering::Release);
        drop(buf);
        self.ready.notify();
    }

    /// Moves everything pending to the end of `out`. Returns how many bytes moved.
    pub fn drain_into(&self, out: &mut BytesMut) -> usize {
        if self.pending() == 0 {
            return 0;
        }
        let mut buf = self.buf.lock().unwrap_or_else(|p| p.into_inner());
        let n = buf.len();
        if out.is_empty() {
            // Swap instead of copying when nothing else is waiting to be written.
            std::mem::swap(&mut *buf, out);
        } else {
            out.extend_from_slice(&buf);
            buf.clear();
        }
        self.len.store(0, Ordering::Release);
        n
    }
}

// ---------------------------------------------------------------------------------------------
// The registry
// ---------------------------------------------------------------------------------------------

/// The three subscription namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// SUBSCRIBE / UNSUBSCRIBE / PUBLISH.
    Channel,
    /// PSUBSCRIBE / PUNSUBSCRIBE.
    Pattern,
    /// SSUBSCRIBE / SUNSUBSCRIBE / SPUBLISH.
    Shard,
}

/// One client's subscriptions.
#[derive(Default)]
pub struct ClientSubs {
    pub channels: Set,
    pub patterns: Set,
    pub shard: Set,
}

impl ClientSubs {
    fn set(&self, kind: Kind) -> &Set {
        match kind {
            Kind::Channel => &self.channels,
            Kind::Pattern => &self.patterns,
            Kind::Shard => &self.shard,
        }
    }

    fn set_mut(&mut self, kind: Kind) -> &mut Set {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    fn is_empty(&self) -> bool {
        self.channels.is_empty() && self.patterns.is_empty() && self.shard.is_empty()
    }
}

/// Every subscription of every client.
#[derive(Default)]
pub struct PubSub {
    channels: Map<Vec<Arc<ClientHandle>>>,
    patterns: Map<Vec<Arc<ClientHandle>>>,
    shard: Map<Vec<Arc<ClientHandle>>>,
    clients: HashMap<u64, ClientSubs, ahash::RandomState>,
    /// The pubsub class of `client-output-buffer-limit`, applied at each delivery.
    pub limit: Option<OutputLimit>,
    /// MONITOR clients, fed one line per executed command ([`PubSub::feed_monitors`]).
    pub monitors: Vec<Arc<ClientHandle>>,
    /// CLIENT TRACKING ([`super::tracking`]): invalidations reach clients the same way.
    pub tracking: super::tracking::Tracking,
    /// Monitors' output limit (`ObufLimits::monitor`: the normal class, or a fallback hard limit).
    pub monitor_limit: Option<OutputLimit>,
}

/// The encoded body of a message frame: `$<kind>`, then the optional pattern, channel, payload.
fn message_body(kind: &[u8], pattern: Option<&[u8]>, channel: &[u8], payload: &[u8]) -> BytesMut {
    let mut body = BytesMut::with_capacity(
        32 + kind.len() + pattern.map_or(0, |p| p.len() + 16) + channel.len() + payload.len(),
    );
    put_bulk(&mut body, kind);
    if let Some(p) = pattern {
        put_bulk(&mut body, p);
    }
    put_bulk(&mut body, channel);
    put_bulk(&mut body, payload);
    body
}

impl PubSub {
    pub fn new() -> PubSub {
        PubSub {
            limit: Some(crate::config::ObufLimits::default().pubsub),
            monitor_limit: Some(crate::config::ObufLimits::default().monitor()),
            ..PubSub::default()
        }
    }

    fn table(&self, kind: Kind) -> &Map<Vec<Arc<ClientHandle>>> {
        match kind {
            Kind::Channel => &self.channels,
            Kind::Pattern => &self.patterns,
            Kind::Shard => &self.shard,
        }
    }

    fn table_mut(&mut self, kind: Kind) -> &mut Map<Vec<Arc<ClientHandle>>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    /// Subscribes `client` to `name`; false if it already was.
    pub fn subscribe(&mut self, kind: Kind, client: &Arc<ClientHandle>, name: &Bytes) -> bool {
        // Own allocation: the argument is a slice of the connection's read buffer.
        let name = Bytes::copy_from_slice(name);
        let subs = self.clients.entry(client.id).or_default();
        if !subs.set_mut(kind).insert(name.clone()) {
            return false;
        }
        self.table_mut(kind)
            .entry(name)
            .or_default()
            .push(client.clone());
        true
    }

    /// Unsubscribes client `id` from `name`; false if it was not subscribed.
    pub fn unsubscribe(&mut self, kind: Kind, id: u64, name: &[u8]) -> bool {
        let Some(subs) = self.clients.get_mut(&id) else {
            return false;
        };
        if !subs.set_mut(kind).remove(name) {
            return false;
        }
        if subs.is_empty() {
            self.clients.remove(&id);
        }
        let table = self.table_mut(kind);
        if let Some(list) = table.get_mut(name) {
            list.retain(|c| c.id != id);
            if list.is_empty() {
                table.remove(name);
            }
        }
        true
    }

    /// The names client `id` is subscribed to in one namespace (unordered, as Redis's dict).
    pub fn names(&self, kind: Kind, id: u64) -> Vec<Bytes> {
        self.clients
            .get(&id)
            .map(|s| s.set(kind).iter().cloned().collect())
            .unwrap_or_default()
    }

    /// How many subscriptions client `id` has in `kind`.
    pub fn count(&self, kind: Kind, id: u64) -> usize {
        self.clients.get(&id).map_or(0, |s| s.set(kind).len())
    }

    /// The count SUBSCRIBE/PSUBSCRIBE replies carry: channels plus patterns.
    pub fn classic_count(&self, id: u64) -> usize {
        self.clients
            .get(&id)
            .map_or(0, |s| s.channels.len() + s.patterns.len())
    }

    /// True if client `id` has any subscription (the RESP2 subscriber context).
    pub fn is_subscriber(&self, id: u64) -> bool {
        self.clients.contains_key(&id)
    }

    /// Drops every subscription of a client (disconnect, RESET).
    pub fn remove_client(&mut self, id: u64) {
        if !self.monitors.is_empty() {
            self.remove_monitor(id);
        }
        self.tracking.disable(id);
        let Some(subs) = self.clients.remove(&id) else {
            return;
        };
        for (kind, set) in [
            (Kind::Channel, subs.channels),
            (Kind::Pattern, subs.patterns),
            (Kind::Shard, subs.shard),
        ] {
            let table = self.table_mut(kind);
            for name in set {
                if let Some(list) = table.get_mut(&name) {
                    list.retain(|c| c.id != id);
                    if list.is_empty() {
                        table.remove(&name);
                    }
                }
            }
        }
    }

    /// Delivers `payload` to the listeners of `channel` and of the matching patterns; returns how
    /// many deliveries were made (PUBLISH's reply: a client matching twice counts twice).
    pub fn publish(&self, channel: &[u8], payload: &[u8], now_s: u64) -> usize {
        let mut receivers = 0;
        if let Some(list) = self.channels.get(channel) {
            let body = message_body(b"message", None, channel, payload);
            for c in list {
                self.deliver(c, 3, &body, now_s);
            }
            receivers += list.len();
        }
        for (pattern, list) in &self.patterns {
            if crate::glob::matches(pattern, channel, false) {
                let body = message_body(b"pmessage", Some(pattern), channel, payload);
                for c in list {
                    self.deliver(c, 4, &body, now_s);
                }
                receivers += list.len();
            }
        }
        receivers
    }

    /// SPUBLISH: delivers to the shard channel's listeners only.
    pub fn spublish(&self, channel: &[u8], payload: &[u8], now_s: u64) -> usize {
        let Some(list) = self.shard.get(channel) else {
            return 0;
        };
        let body = message_body(b"smessage", None, channel, payload);
        for c in list {
            self.deliver(c, 3, &body, now_s);
        }
        list.len()
    }

    /// True if someone listens to `channel` directly or through a pattern (so a keyspace event
    /// nobody hears costs no encoding).
    pub fn has_listeners(&self) -> bool {
        !self.channels.is_empty() || !self.patterns.is_empty()
    }

    fn deliver(&self, c: &ClientHandle, items: usize, body: &[u8], now_s: u64) {
        if c.killed.load(Ordering::Relaxed) {
            return;
        }
        let proto = c.proto.load(Ordering::Relaxed) as u8;
        c.outbox.push_frame(proto, items, body);
        if let Some(limit) = &self.limit {
            // What is pending for it in all: the outbox and the replies its task has not written.
            if c.output_limit_reached(limit, c.output_pending(), now_s) {
                c.close_for_output_limit();
            }
        }
    }

    /// Active channels (or shard channels) matching `pattern` (all when None): PUBSUB CHANNELS.
    pub fn active(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Bytes> {
        self.table(kind)
            .keys()
            .filter(|name| pattern.is_none_or(|p| crate::glob::matches(p, name, false)))
            .cloned()
            .collect()
    }

    /// Subscribers of one channel, not counting patterns: PUBSUB NUMSUB / SHARDNUMSUB.
    pub fn numsub(&self, kind: Kind, channel: &[u8]) -> usize {
        self.table(kind).get(channel).map_or(0, |l| l.len())
    }

    /// Distinct patterns with a subscriber: PUBSUB NUMPAT.
    pub fn numpat(&self) -> usize {
        self.patterns.len()
    }

    /// Number of channels (INFO pubsub_channels, pubsubshard_channels) for `kind`.
    pub fn len(&self, kind: Kind) -> usize {
        self.table(kind).len()
    }

    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }
}

// ---------------------------------------------------------------------------------------------
// MONITOR
// ---------------------------------------------------------------------------------------------

/// Appends `bytes` quoted as Redis's `sdscatrepr` does: `"..."` with `\\`, `\"`, `\n`, `\r`,
/// `\t`, `\a`, `\b` escaped and other unprintable bytes as `\xhh`.
pub fn put_repr(out: &mut BytesMut, bytes: &[u8]) {
    out.put_u8(b'"');
    for &c in bytes {
        match c {
            b'\\' => out.put_slice(b"\\\\"),
            b'"' => out.put_slice(b"\\\""),
            b'\n' => out.put_slice(b"\\n"),
            b'\r' => out.put_slice(b"\\r"),
            b'\t' => out.put_slice(b"\\t"),
            0x07 => out.put_slice(b"\\a"),
            0x08 => out.put_slice(b"\\b"),
            0x20..=0x7e => out.put_u8(c),
            _ => out.put_slice(format!("\\x{c:02x}").as_bytes()),
        }
    }
    out.put_u8(b'"');
}

impl PubSub {
    /// Starts feeding client `c` (MONITOR).
    pub fn add_monitor(&mut self, c: &Arc<ClientHandle>) {
        if !self.monitors.iter().any(|m| m.id == c.id) {
            self.monitors.push(c.clone());
        }
    }

    /// True if client `id` ran MONITOR (CLIENT LIST flag O).
    pub fn is_monitor(&self, id: u64) -> bool {
        self.monitors.iter().any(|m| m.id == id)
    }

    pub fn remove_monitor(&mut self, id: u64) {
        self.monitors.retain(|m| m.id != id);
    }

    /// Sends every monitor the line `+<unix s.us> [<db> <addr>] "arg" ...` for a command that
    /// ran; `redacted` marks the arguments shown as `(redacted)` (passwords). The line for the
    /// client that ran the command (`self_id`, if it monitors) is returned instead: Redis writes
    /// it after that command's reply.
    pub fn feed_monitors(
        &self,
        self_id: u64,
        db: usize,
        addr: &super::PeerAddr,
        argv: &[Bytes],
        redacted: &dyn Fn(usize) -> bool,
    ) -> Option<Bytes> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let mut line =
            BytesMut::with_capacity(64 + argv.iter().map(|a| a.len() + 3).sum::<usize>());
        line.put_slice(
            format!(
                "+{}.{:06} [{db} {}]",
                now.as_secs(),
                now.subsec_micros(),
                addr.monitor_name()
            )
            .as_bytes(),
        );
        for (i, a) in argv.iter().enumerate() {
            line.put_u8(b' ');
            if redacted(i) {
                line.put_slice(b"\"(redacted)\"");
            } else {
                put_repr(&mut line, a);
            }
        }
        line.put_slice(b"\r\n");
        let mut own = None;
        for m in &self.monitors {
            if m.id == self_id {
                own = Some(Bytes::copy_from_slice(&line));
            } else {
                m.outbox.push_raw(&line);
                if let Some(limit) = &self.monitor_limit {
                    if m.output_limit_reached(limit, m.output_pending(), now.as_secs()) {
                        m.close_for_output_limit();
                    }
                }
            }
        }
        own
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(id: u64) -> Arc<ClientHandle> {
        let a: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
        Arc::new(ClientHandle::new(id, a, a))
    }

    fn take(c: &ClientHandle) -> Vec<u8> {
        let mut out = BytesMut::new();
        c.outbox.drain_into(&mut out);
        out.to_vec()
    }

    #[test]
    fn publish_counts_channel_and_pattern_deliveries() {
        let mut ps = PubSub::new();
        let (a, b) = (client(1), client(2));
        b.proto.store(3, Ordering::Relaxed);
        assert!(ps.subscribe(Kind::Channel, &a, &Bytes::from("news")));
        assert!(!ps.subscribe(Kind::Channel, &a, &Bytes::from("news")));
        assert!(ps.subscribe(Kind::Pattern, &a, &Bytes::from("n*")));
        assert!(ps.subscribe(Kind::Channel, &b, &Bytes::from("news")));
        assert_eq!(ps.publish(b"news", b"hi", 0), 3);
        assert_eq!(
            take(&a),
            b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$2\r\nhi\r\n"
        );
        assert_eq!(
            take(&b),
            b">3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n"
        );
        assert_eq!(ps.publish(b"other", b"x", 0), 0);
        assert_eq!(ps.classic_count(1), 2);
        ps.remove_client(1);
        assert_eq!(ps.numpat(), 0);
        assert_eq!(ps.numsub(Kind::Channel, b"news"), 1);
        assert!(ps.unsubscribe(Kind::Channel, 2, b"news"));
        assert!(ps.is_empty() && ps.len(Kind::Channel) == 0);
    }

    #[test]
    fn shard_channels_are_their_own_namespace() {
        let mut ps = PubSub::new();
        let a = client(1);
        ps.subscribe(Kind::Shard, &a, &Bytes::from("s"));
        assert_eq!(ps.publish(b"s", b"x", 0), 0);
        assert_eq!(ps.spublish(b"s", b"x", 0), 1);
        assert_eq!(ps.classic_count(1), 0);
        assert!(ps.is_subscriber(1));
        assert_eq!(take(&a), b"*3\r\n$8\r\nsmessage\r\n$1\r\ns\r\n$1\r\nx\r\n");
    }

    #[test]
    fn hard_limit_kills_a_slow_subscriber() {
        let mut ps = PubSub::new();
        ps.limit = Some(OutputLimit {
            hard: 1000,
            soft: 0,
            soft_seconds: 0,
        });
        let a = client(1);
        ps.subscribe(Kind::Channel, &a, &Bytes::from("c"));
        // The first 16 KB are Redis's fixed reply buffer: they do not count.
        ps.publish(b"c", &[b'x'; 16 * 1024], 0);
        assert!(!a.killed.load(Ordering::Relaxed));
        ps.publish(b"c", &[b'x'; 1000], 0);
        assert!(a.killed.load(Ordering::Relaxed));
    }

    #[test]
    fn soft_limit_needs_its_duration() {
        let mut ps = PubSub::new();
        ps.limit = Some(OutputLimit {
            hard: 0,
            soft: 10,
            soft_seconds: 5,
        });
        let a = client(1);
        ps.subscribe(Kind::Channel, &a, &Bytes::from("c"));
        ps.publish(b"c", &[b'x'; 17 * 1024], 100);
        ps.publish(b"c", &[b'x'; 20], 105);
        assert!(!a.killed.load(Ordering::Relaxed));
        ps.publish(b"c", &[b'x'; 20], 106);
        assert!(a.killed.load(Ordering::Relaxed));
        assert!(a.obuf_closed.load(Ordering::Relaxed));
    }
}
