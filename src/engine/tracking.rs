//! Client-side caching: CLIENT TRACKING's registry (the invalidation messages are built and sent by
//! [`super::notify`], which sits above this module and [`super::pubsub`]).
//!
//! A tracking client may cache what it reads; the server promises to tell it when a key it may
//! have cached changes. Redis 7.0 has two modes, and so do we:
//! - **Default mode** remembers, after every read-only command of a tracking client, the keys the
//!   command named (per the command table's key positions). The table maps a key *name* to the ids
//!   of the clients that read it, across all databases, as Redis's `TrackingTable` does (a write to
//!   `k` in db 1 invalidates a client that read `k` in db 0). An invalidation removes the key's
//!   entry: the client must read it again to be told again. Entries of clients that turned tracking
//!   off stay until the key changes, and are skipped then, as in Redis. OPTIN/OPTOUT narrow what is
//!   remembered to the commands after `CLIENT CACHING yes` / outside `CLIENT CACHING no`.
//! - **Broadcast mode** (BCAST) remembers nothing per client: every modified key is filed under each
//!   registered prefix it starts with, and the keys collected per prefix are sent, as one message,
//!   to every client registered for that prefix at the end of each connection's batch and after
//!   each active-expiry pass (Redis sends them in `beforeSleep`, i.e. after the event-loop round).
//!
//! The store records every modification (command writes, lazy and active expiry) among its
//! keyspace events while this registry is active ([`crate::events::TRACKED`]), in the order Redis
//! signals them; [`super::notify::publish_events`] routes them here after each command. FLUSHDB
//! and FLUSHALL send every tracking client the "null" invalidation and forget the whole table.
//!
//! Messages: a RESP3 client gets `>2 invalidate [keys]` on its own connection; with REDIRECT the
//! message goes to the other client, as that push when it speaks RESP3, or as a pub/sub message
//! on `__redis__:invalidate` when it speaks RESP2 and is in the subscriber context (otherwise it
//! is dropped, as Redis does). Invalidations a client causes for itself are sent after the reply
//! of the command (after EXEC's reply inside a transaction), as Redis 7.0 does
//! (`tracking_pending_keys`); NOLOOP suppresses them. A redirect target that went away turns
//! into a `tracking-redir-broken` push to the tracking client (RESP3 only) and the
//! `broken_redirect` flag.
//!
//! `tracking-table-max-keys` bounds the default-mode table, as Redis 7.0's
//! `trackingLimitUsedSlots`: before each command (and at each cron tick, so an idle server
//! applies a lowered limit too), while the table holds more keys than the limit, random keys are
//! dropped and their invalidations sent as if they had changed (at once, before the command's
//! reply, and not to a NOLOOP client whose own command triggered it, as Redis 7.0.15 does). One
//! pass tries at most 100 × (1 + the number of consecutive passes that ended still over the
//! limit) keys, so a huge excess is worked off over several commands instead of in one pause.
//! The table is an `IndexMap` so that a random key is O(1) to pick and to remove; a key read by
//! one client costs 16 + 16 bytes in it plus the key's own allocation (74 B per tracked 16-byte key
//! in INFO used_memory, redis-server 7.0.15: 99; `scripts/bench_tracking_memory.py`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use indexmap::IndexMap;
use std::sync::Arc;

use bytes::Bytes;

use super::ClientHandle;

/// The options of one `CLIENT TRACKING ON`, already validated by the command.
#[derive(Debug, Default, Clone)]
pub struct Options {
    /// Client id to send invalidations to (0 = this connection).
    pub redirect: u64,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    pub prefixes: Vec<Bytes>,
}

/// One tracking client.
pub struct TrackState {
    pub(super) handle: Arc<ClientHandle>,
    pub redirect: u64,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// `CLIENT CACHING yes|no` given for the next command (or transaction).
    pub caching: bool,
    /// The redirect target was gone when a message was due.
    pub broken_redirect: bool,
    /// BCAST prefixes, sorted (CLIENT TRACKINGINFO lists them so).
    pub prefixes: BTreeSet<Bytes>,
}

#[derive(Default)]
pub(super) struct Bcast {
    pub(super) clients: BTreeSet<u64>,
    /// Keys modified since the last broadcast, each with the client that modified it last (None:
    /// expiry, or several clients), so NOLOOP can leave out a client's own changes.
    pub(super) keys: BTreeMap<Bytes, Option<u64>>,
}

/// The clients that read one key of the default-mode table. Most keys have one reader, kept
/// without an allocation: a table entry is then a 16-byte key handle and these 16 bytes (a
/// `BTreeSet` per key cost ~200 bytes per tracked key, twice Redis's ~100).
#[derive(Debug)]
pub(super) enum Readers {
    One(u64),
    // Boxed on purpose: an inline BTreeSet would make every entry 32 bytes, One included.
    #[allow(clippy::box_collection)]
    Many(Box<BTreeSet<u64>>),
}

impl Readers {
    /// Adds `id`; true if it was not there.
    pub(super) fn insert(&mut self, id: u64) -> bool {
        match self {
            Readers::One(x) if *x == id => false,
            Readers::One(x) => {
                let set: BTreeSet<u64> = [*x, id].into_iter().collect();
                *self = Readers::Many(Box::new(set));
                true
            }
            Readers::Many(set) => set.insert(id),
        }
    }

    pub(super) fn len(&self) -> usize {
        match self {
            Readers::One(_) => 1,
            Readers::Many(set) => set.len(),
        }
    }

    /// The ids, ascending.
    pub(super) fn into_ids(self) -> Vec<u64> {
        match self {
            Readers::One(x) => vec![x],
            Readers::Many(set) => set.into_iter().collect(),
        }
    }
}

/// Every tracking client, the default-mode table and the broadcast prefixes.
#[derive(Default)]
pub struct Tracking {
    pub(super) clients: HashMap<u64, TrackState, ahash::RandomState>,
    pub(super) table: IndexMap<Box<[u8]>, Readers, ahash::RandomState>,
    pub(super) items: usize,
    /// `tracking-table-max-keys` (0 = no limit).
    pub max_keys: u64,
    /// Consecutive limit passes that ended still over the limit (Redis's `timeout_counter`).
    pub(super) over_limit_passes: u64,
    /// xorshift state for picking the keys to drop.
    pub(super) rng: u64,
    pub(super) prefixes: BTreeMap<Bytes, Bcast>,
    /// Invalidations owed to the client running the current command, sent after its reply:
    /// Some(key), or None for a flush.
    pub(super) pending: Vec<Option<Bytes>>,
    /// The redirect of the current client if it turned tracking off while invalidations were
    /// pending (MULTI … CLIENT TRACKING off … EXEC): Redis still sends them, through the
    /// redirect it keeps after `disableTracking`.
    pub(super) pending_redirect: u64,
}

impl Tracking {
    /// True while anything could owe an invalidation (the store records modifications then).
    pub fn active(&self) -> bool {
        !self.clients.is_empty() || !self.table.is_empty() || !self.prefixes.is_empty()
    }

    /// True if a command may skip tracking altogether: nothing is tracked and no invalidation is
    /// owed (the shared-lock path, `commands::shared_path`, cannot send one).
    pub fn quiet(&self) -> bool {
        !self.active() && self.pending.is_empty()
    }

    pub fn state(&self, id: u64) -> Option<&TrackState> {
        self.clients.get(&id)
    }

    pub fn state_mut(&mut self, id: u64) -> Option<&mut TrackState> {
        self.clients.get_mut(&id)
    }

    /// Clients with tracking on (INFO `tracking_clients`).
    pub fn clients(&self) -> usize {
        self.clients.len()
    }

    /// Keys in the default-mode table, client entries in it, and broadcast prefixes (INFO stats
    /// `tracking_total_keys`, `tracking_total_items`, `tracking_total_prefixes`).
    pub fn totals(&self) -> (usize, usize, usize) {
        (self.table.len(), self.items, self.prefixes.len())
    }

    pub(super) fn next_random(&mut self) -> u64 {
        if self.rng == 0 {
            self.rng = ahash::RandomState::new().hash_one(0u64) | 1;
        }
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }

    /// `CLIENT TRACKING ON`: turns tracking on (or changes its options) for `handle`. BCAST
    /// prefixes add to the ones already registered, as in Redis.
    pub fn enable(&mut self, handle: &Arc<ClientHandle>, o: &Options) {
        let id = handle.id;
        let st = self.clients.entry(id).or_insert_with(|| TrackState {
            handle: handle.clone(),
            redirect: 0,
            bcast: false,
            optin: false,
            optout: false,
            noloop: false,
            caching: false,
            broken_redirect: false,
            prefixes: BTreeSet::new(),
        });
        st.broken_redirect = false;
        st.redirect = o.redirect;
        st.bcast = o.bcast;
        st.optin = o.optin;
        st.optout = o.optout;
        st.noloop = o.noloop;
        if o.bcast {
            let empty = [Bytes::new()];
            let list = if o.prefixes.is_empty() {
                &empty[..]
            } else {
                &o.prefixes[..]
            };
            for p in list {
                let p = Bytes::copy_from_slice(p);
                if st.prefixes.insert(p.clone()) {
                    self.prefixes.entry(p).or_default().clients.insert(id);
                }
            }
        }
    }

    /// `CLIENT TRACKING OFF`, RESET and disconnection.
    pub fn disable(&mut self, id: u64) {
        let Some(st) = self.clients.remove(&id) else {
            return;
        };
        if !self.pending.is_empty() {
            self.pending_redirect = st.redirect;
        }
        for p in st.prefixes {
            if let Some(bs) = self.prefixes.get_mut(&p) {
                bs.clients.remove(&id);
                if bs.clients.is_empty() {
                    self.prefixes.remove(&p);
                }
            }
        }
    }

    /// After a read-only command of client `id`: remembers the keys it read, if its mode says so.
    pub fn remember(&mut self, id: u64, keys: &[&Bytes]) {
        let Some(st) = self.clients.get(&id) else {
            return;
        };
        if st.bcast || (st.optin && !st.caching) || (st.optout && st.caching) {
            return;
        }
        for k in keys {
            let k: &[u8] = k.as_ref();
            match self.table.get_mut(k) {
                Some(ids) => {
                    if ids.insert(id) {
                        self.items += 1;
                    }
                }
                None => {
                    self.table.insert(k.into(), Readers::One(id));
                    self.items += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(id: u64) -> Arc<ClientHandle> {
        let a: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
        Arc::new(ClientHandle::new(id, a, a))
    }

    #[test]
    fn modes_decide_what_is_remembered() {
        let mut t = Tracking::default();
        let (a, b) = (client(1), client(2));
        t.enable(&a, &Options::default());
        t.enable(
            &b,
            &Options {
                optin: true,
                ..Options::default()
            },
        );
        let k = Bytes::from("k");
        t.remember(1, &[&k]);
        t.remember(2, &[&k]);
        assert_eq!(t.totals(), (1, 1, 0));
        t.state_mut(2).unwrap().caching = true;
        t.remember(2, &[&k]);
        assert_eq!(t.totals(), (1, 2, 0));
        t.disable(2);
        assert_eq!(t.clients(), 1);
        // The entry stays until the key changes.
        assert_eq!(t.totals(), (1, 2, 0));
    }

    #[test]
    fn a_key_with_one_reader_costs_no_set() {
        assert_eq!(std::mem::size_of::<Readers>(), 16);
        let mut t = Tracking::default();
        let (a, b) = (client(1), client(2));
        t.enable(&a, &Options::default());
        t.enable(&b, &Options::default());
        let k = Bytes::from("k");
        t.remember(1, &[&k]);
        t.remember(1, &[&k]);
        assert!(matches!(t.table.get(&b"k"[..]), Some(Readers::One(1))));
        assert_eq!(t.totals(), (1, 1, 0));
        t.remember(2, &[&k]);
        t.remember(2, &[&k]);
        assert_eq!(t.totals(), (1, 2, 0));
        let ids = t.table.swap_remove(&b"k"[..]).map(Readers::into_ids);
        assert_eq!(ids, Some(vec![1, 2]));
    }

    #[test]
    fn bcast_prefixes_are_shared_and_released() {
        let mut t = Tracking::default();
        let (a, b) = (client(1), client(2));
        let o = Options {
            bcast: true,
            prefixes: vec![Bytes::from("a"), Bytes::from("b")],
            ..Options::default()
        };
        t.enable(&a, &o);
        t.enable(&b, &o);
        assert_eq!(t.totals().2, 2);
        t.disable(1);
        assert_eq!(t.totals().2, 2);
        t.disable(2);
        assert_eq!(t.totals().2, 0);
        assert!(!t.active());
    }
}
