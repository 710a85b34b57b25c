//! Where a modified key's news goes: keyspace notifications (pub/sub messages on
//! `__keyspace@<db>__` / `__keyevent@<db>__`) and CLIENT TRACKING invalidations.
//!
//! Both start from the keyspace events the store records while a command runs (`Db::notify`),
//! drained after the command by [`publish_events`] in the order Redis signals them. The
//! invalidations are built from the registry in [`super::tracking`] and delivered through the
//! pub/sub registry ([`super::pubsub`]): a RESP2 redirect target receives them as a message on
//! `__redis__:invalidate`, and a subscriber's `client-output-buffer-limit` counts them. This
//! module sits above both, so that neither of them imports the other's delivery code.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};

use indexmap::IndexMap;

use super::pubsub::PubSub;
use super::tracking::Readers;
use super::{ClientHandle, Shared};
use crate::events;
use crate::protocol::reply::{put_bulk, put_header};
use crate::store::db::Store;

// ---------------------------------------------------------------------------------------------
// Keyspace notifications
// ---------------------------------------------------------------------------------------------

/// Publishes the keyspace events the store recorded (see `Db::notify`) and clears them:
/// `__keyspace@<db>__:<key>` with the event name when `K` is on, `__keyevent@<db>__:<event>` with
/// the key when `E` is on — in that order, as Redis's `notifyKeyspaceEvent` does. Modified keys
/// recorded for CLIENT TRACKING (class [`events::TRACKED`]) become invalidations, in the same
/// order Redis interleaves them with the events; `current` is the client whose command ran (None
/// for the cron).
///
/// Inlined up to its early exit, as are the other per-command hooks here (`limit_tracked_keys`,
/// `flush_pending_invalidations`, `broadcast_invalidations`): called out of line, each cost
/// ~17-20 instructions of a `PING` just to return (callgrind, issue 15).
#[inline]
pub fn publish_events(
    store: &mut Store,
    pubsub: &mut PubSub,
    shared: &Shared,
    current: Option<u64>,
    now_s: u64,
) {
    if store.notify_flags != 0 {
        publish_recorded_events(store, pubsub, shared, current, now_s);
    }
}

#[inline(never)]
fn publish_recorded_events(
    store: &mut Store,
    pubsub: &mut PubSub,
    shared: &Shared,
    current: Option<u64>,
    now_s: u64,
) {
    for (index, db) in store.dbs.iter_mut().enumerate() {
        if db.events.is_empty() {
            continue;
        }
        let flags = db.notify_flags;
        for (class, event, key) in db.events.drain(..) {
            if class & events::TRACKED != 0 {
                let by_command = class & events::EXPIRED == 0;
                pubsub.invalidate_key(shared, &key, current, by_command);
                continue;
            }
            if !pubsub.has_listeners() {
                continue;
            }
            if flags & events::KEYSPACE != 0 {
                let mut ch = format!("__keyspace@{index}__:").into_bytes();
                ch.extend_from_slice(&key);
                pubsub.publish(&ch, event.as_bytes(), now_s);
            }
            if flags & events::KEYEVENT != 0 {
                let ch = format!("__keyevent@{index}__:{event}");
                pubsub.publish(ch.as_bytes(), &key, now_s);
            }
        }
    }
}

/// `*1 $key`: the value part of an invalidation of one key.
fn one_key(key: &[u8]) -> BytesMut {
    let mut v = BytesMut::with_capacity(key.len() + 16);
    put_header(&mut v, b'*', 1);
    put_bulk(&mut v, key);
    v
}

/// The null a flush invalidation carries, in the protocol of the *tracking* client (Redis uses
/// `shared.null[c->resp]` of that client even when the message goes to a redirect target).
fn null_for(proto: usize) -> &'static [u8] {
    if proto >= 3 {
        b"_\r\n"
    } else {
        b"$-1\r\n"
    }
}

impl PubSub {
    /// A key was modified (`by_command`: by the command `current` runs; otherwise by expiry).
    pub fn invalidate_key(
        &mut self,
        shared: &Shared,
        key: &Bytes,
        current: Option<u64>,
        by_command: bool,
    ) {
        let t = &mut self.tracking;
        if !t.prefixes.is_empty() {
            for (p, bs) in t.prefixes.iter_mut() {
                if key.starts_with(p) {
                    // The last modifier wins, as Redis's raxInsert overwrites.
                    bs.keys
                        .insert(key.clone(), if by_command { current } else { None });
                }
            }
        }
        let Some(ids) = t.table.swap_remove(key.as_ref() as &[u8]) else {
            return;
        };
        t.items -= ids.len();
        self.send_key_invalidation(shared, key, ids, current, true);
    }

    /// Redis's `trackingInvalidateKey` for the clients `ids` that read `key`: each gets the
    /// invalidation unless it is gone, off or in BCAST mode, or in NOLOOP mode and `current`;
    /// `current`'s own is deferred past its reply when `defer_own` (its command is running).
    fn send_key_invalidation(
        &mut self,
        shared: &Shared,
        key: &Bytes,
        ids: Readers,
        current: Option<u64>,
        defer_own: bool,
    ) {
        let value = one_key(key);
        for id in ids.into_ids() {
            let Some(st) = self.tracking.clients.get(&id) else {
                continue;
            };
            if st.bcast || (st.noloop && current == Some(id)) {
                continue;
            }
            if defer_own && current == Some(id) {
                self.tracking.pending.push(Some(key.clone()));
            } else {
                self.send_invalidation(shared, id, &value, None);
            }
        }
    }

    /// FLUSHDB / FLUSHALL: the null invalidation to every tracking client, and the table is
    /// forgotten.
    pub fn invalidate_all(&mut self, shared: &Shared, current: Option<u64>) {
        let ids: Vec<(u64, usize)> = self
            .tracking
            .clients
            .iter()
            .map(|(&id, st)| (id, st.handle.proto.load(Ordering::Relaxed)))
            .collect();
        for (id, proto) in ids {
            if current == Some(id) {
                self.tracking.pending.push(None);
            } else {
                self.send_invalidation(shared, id, null_for(proto), None);
            }
        }
        // Given back, not cleared (a cleared map keeps its buckets), as Redis frees its table.
        self.tracking.table = IndexMap::default();
        self.tracking.items = 0;
    }

    /// `tracking-table-max-keys` (see the module essay): drops random keys from the table, with
    /// their invalidations, until it is within the limit or this pass's effort is spent.
    /// `current` is the client whose command is about to run (None from the cron).
    #[inline]
    pub fn limit_tracked_keys(&mut self, shared: &Shared, current: Option<u64>) {
        let t = &self.tracking;
        if !t.clients.is_empty() && t.max_keys != 0 {
            self.evict_tracked_keys(shared, current);
        }
    }

    #[inline(never)]
    fn evict_tracked_keys(&mut self, shared: &Shared, current: Option<u64>) {
        let t = &mut self.tracking;
        if t.table.len() as u64 <= t.max_keys {
            t.over_limit_passes = 0;
            return;
        }
        let mut effort = 100u64.saturating_mul(t.over_limit_passes.saturating_add(1));
        while effort > 0 && !self.tracking.table.is_empty() {
            effort -= 1;
            let t = &mut self.tracking;
            let i = (t.next_random() % t.table.len() as u64) as usize;
            let Some((key, ids)) = t.table.swap_remove_index(i) else {
                break;
            };
            t.items -= ids.len();
            let key = Bytes::from(key.into_vec());
            // Not deferred: the command has not started (Redis: not CLIENT_EXECUTING_COMMAND).
            self.send_key_invalidation(shared, &key, ids, current, false);
            if self.tracking.table.len() as u64 <= self.tracking.max_keys {
                self.tracking.over_limit_passes = 0;
                return;
            }
        }
        self.tracking.over_limit_passes += 1;
    }

    /// Sends the invalidations client `current` caused for itself, after its reply: messages for
    /// its own connection are appended to `after_reply`. Runs whether or not `current` still
    /// tracks: as Redis's `trackingHandlePendingKeyInvalidations`, what was owed is sent even if
    /// the transaction that caused it also turned tracking off, and it never waits for a later
    /// command (of another client).
    #[inline]
    pub fn flush_pending_invalidations(
        &mut self,
        shared: &Shared,
        current: &Arc<ClientHandle>,
        after_reply: &mut BytesMut,
    ) {
        if !self.tracking.pending.is_empty() {
            self.send_pending_invalidations(shared, current, after_reply);
        }
    }

    #[inline(never)]
    fn send_pending_invalidations(
        &mut self,
        shared: &Shared,
        current: &Arc<ClientHandle>,
        after_reply: &mut BytesMut,
    ) {
        let proto = current.proto.load(Ordering::Relaxed);
        let redirect = std::mem::take(&mut self.tracking.pending_redirect);
        let mut own = Some((current.id, after_reply));
        for item in std::mem::take(&mut self.tracking.pending) {
            let value = match &item {
                Some(key) => one_key(key),
                None => BytesMut::from(null_for(proto)),
            };
            let own = own.as_mut().map(|(id, buf)| (*id, &mut **buf));
            if self.tracking.clients.contains_key(&current.id) {
                self.send_invalidation(shared, current.id, &value, own);
            } else {
                let mut broken = false;
                self.deliver_tracking(shared, current, redirect, &mut broken, &value, own);
            }
        }
    }

    /// BCAST: sends each prefix's collected keys to the clients registered for it.
    #[inline]
    pub fn broadcast_invalidations(&mut self, shared: &Shared) {
        if !self.tracking.prefixes.is_empty() {
            self.send_broadcasts(shared);
        }
    }

    #[inline(never)]
    fn send_broadcasts(&mut self, shared: &Shared) {
        let mut work: Vec<(u64, BytesMut)> = Vec::new();
        for bs in self.tracking.prefixes.values_mut() {
            if bs.keys.is_empty() {
                continue;
            }
            let keys = std::mem::take(&mut bs.keys);
            let build = |skip: Option<u64>| {
                let n = keys
                    .values()
                    .filter(|&&by| skip.is_none() || by != skip)
                    .count();
                if n == 0 {
                    return None;
                }
                let mut v = BytesMut::new();
                put_header(&mut v, b'*', n);
                for (k, &by) in &keys {
                    if skip.is_none() || by != skip {
                        put_bulk(&mut v, k);
                    }
                }
                Some(v)
            };
            let common = build(None);
            for &id in &bs.clients {
                let noloop = self.tracking.clients.get(&id).is_some_and(|st| st.noloop);
                let msg = if noloop {
                    build(Some(id))
                } else {
                    common.clone()
                };
                if let Some(m) = msg {
                    work.push((id, m));
                }
            }
        }
        for (id, value) in work {
            self.send_invalidation(shared, id, &value, None);
        }
    }

    /// Sends tracking client `id` an invalidation whose value part is `value`, where Redis's
    /// `sendTrackingMessage` would: see the module essay. `own` = (current client, its
    /// after-reply buffer) for messages deferred past the current reply.
    fn send_invalidation(
        &mut self,
        shared: &Shared,
        id: u64,
        value: &[u8],
        own: Option<(u64, &mut BytesMut)>,
    ) {
        let Some(st) = self.tracking.clients.get(&id) else {
            return;
        };
        let (handle, redirect) = (st.handle.clone(), st.redirect);
        let mut broken = false;
        self.deliver_tracking(shared, &handle, redirect, &mut broken, value, own);
        if broken {
            if let Some(st) = self.tracking.clients.get_mut(&id) {
                st.broken_redirect = true;
            }
        }
    }

    /// Redis's `sendTrackingMessage` for the client `handle` with redirect `redirect` (0 =
    /// none); sets `broken` if the redirect target is gone.
    fn deliver_tracking(
        &self,
        shared: &Shared,
        handle: &Arc<ClientHandle>,
        redirect: u64,
        broken: &mut bool,
        value: &[u8],
        own: Option<(u64, &mut BytesMut)>,
    ) {
        let (dest, redirected) = if redirect != 0 {
            match shared.clients().get(&redirect).cloned() {
                Some(h) => (h, true),
                None => {
                    *broken = true;
                    if handle.proto.load(Ordering::Relaxed) >= 3 {
                        let mut m = BytesMut::new();
                        put_header(&mut m, b'>', 2);
                        put_bulk(&mut m, b"tracking-redir-broken");
                        m.put_slice(format!(":{redirect}\r\n").as_bytes());
                        self.emit(handle, &m, own);
                    }
                    return;
                }
            }
        } else {
            (handle.clone(), false)
        };
        let mut m = BytesMut::with_capacity(40 + value.len());
        if dest.proto.load(Ordering::Relaxed) >= 3 {
            put_header(&mut m, b'>', 2);
            put_bulk(&mut m, b"invalidate");
        } else if redirected && self.is_subscriber(dest.id) {
            put_header(&mut m, b'*', 3);
            put_bulk(&mut m, b"message");
            put_bulk(&mut m, b"__redis__:invalidate");
        } else {
            // RESP2 without a redirect to a subscriber: nowhere to send it (as in Redis).
            return;
        }
        m.put_slice(value);
        self.emit(&dest, &m, own);
    }

    /// Queues a tracking message for `dest` (after the current reply if `dest` is the client
    /// `own` names). A subscriber is in the pubsub class of `client-output-buffer-limit`, which
    /// Redis applies to whatever it is sent, invalidations included: checked here as
    /// [`PubSub`]'s deliveries are (other clients' limits are the connection's to check).
    fn emit(&self, dest: &ClientHandle, bytes: &[u8], own: Option<(u64, &mut BytesMut)>) {
        match own {
            Some((id, buf)) if id == dest.id => buf.extend_from_slice(bytes),
            _ => {
                if dest.killed.load(Ordering::Relaxed) {
                    return;
                }
                dest.outbox.push_raw(bytes);
                if let Some(limit) = &self.limit {
                    if self.is_subscriber(dest.id) {
                        let now_s = super::now_ms() / 1000;
                        if dest.output_limit_reached(limit, dest.output_pending(), now_s) {
                            dest.close_for_output_limit();
                        }
                    }
                }
            }
        }
    }
}
