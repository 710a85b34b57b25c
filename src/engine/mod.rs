//! The shared-state floor (floor 5): what every connection and every command shares.
//!
//! It holds the locked keyspace ([`Engine`]: the store plus the statistics updated with it), the
//! client registry as commands see it ([`ClientHandle`]), the pub/sub registry ([`pubsub`]), CLIENT
//! TRACKING ([`tracking`]) and the delivery of keyspace notifications and invalidations ([`notify`]),
//! server statistics, persistence status,
//! the configuration in force, the clocks ([`now_ms`], [`mono_ns`]) and the memory accounting ([`alloc`]).
//! `server/` (the connections) and `commands/` (the handlers) both stand on it, as does
//! `persistence/`; it imports only from the floors below: `store/`, `config/`, `protocol/`,
//! `numeric/`, `error.rs`. So "where does the server's state live?" has one answer: here.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::store::db::Store;

pub mod alloc;
pub mod evict;
pub mod memory;
pub mod metrics;
pub mod notify;
pub mod pause;
pub mod propagate;
pub mod pubsub;
pub mod repl;
pub mod shared;
pub mod signal;
pub mod slowlog;
pub mod tracking;

pub use propagate::{StreamCell, SubscriberId, WriteStream};
pub use shared::{
    AofProgress, AofRewriteJob, AofSink, BgJob, ClientHandle, PeerAddr, PersistenceStatus,
    PreparedSwitch, Shared, Stats,
};

/// Per-command statistics (INFO commandstats).
#[derive(Debug, Default, Clone, Copy)]
pub struct CommandStat {
    pub calls: u64,
    /// Time spent in the handler, in nanoseconds (INFO shows microseconds; summing whole
    /// microseconds per call would round sub-microsecond commands down to zero).
    pub nanos: u64,
    pub rejected: u64,
    pub failed: u64,
}

/// The INFO commandstats counts of the commands that ran on the shared-lock path
/// (`commands::shared_path`): under a shared lock `Engine::stats` cannot change, so they count
/// here, atomically, and INFO folds them into `stats` ([`fold_shared_stats`]) before reading.
#[derive(Debug, Default)]
pub struct SharedStat {
    pub calls: AtomicU64,
    pub nanos: AtomicU64,
}

impl SharedStat {
    /// Adds `calls` commands that took `nanos` in all.
    pub fn add(&self, calls: u64, nanos: u64) {
        self.calls.fetch_add(calls, Ordering::Relaxed);
        self.nanos.fetch_add(nanos, Ordering::Relaxed);
    }
}

/// Moves the shared path's counts into `stats` (under the exclusive lock, so nothing is lost
/// between the two reads of a slot: a shared-path command cannot run meanwhile).
pub fn fold_shared_stats(stats: &mut [CommandStat], shared: &[SharedStat]) {
    for (s, c) in stats.iter_mut().zip(shared) {
        if c.calls.load(Ordering::Relaxed) != 0 {
            s.calls += c.calls.swap(0, Ordering::Relaxed);
            s.nanos += c.nanos.swap(0, Ordering::Relaxed);
        }
    }
}

/// What the keyspace lock guards: the data, and the statistics updated with it.
///
/// Aligned to its own cache lines: the `RwLock` word in front of it changes on every shared
/// lock and unlock by every core, and the fields the shared path reads per command (the database
/// list, the MONITOR and tracking state) must not sit on that line, or each read would miss.
#[repr(align(128))]
pub struct Engine {
    pub store: Store,
    pub stats: Vec<CommandStat>,
    /// What the shared-lock path counted, one slot per command like `stats`.
    pub shared_stats: Box<[SharedStat]>,
    /// Error replies by code (INFO errorstats).
    pub error_stats: HashMap<String, u64>,
    /// Every client's channel, pattern and shard-channel subscriptions.
    pub pubsub: pubsub::PubSub,
    /// Replication: ids, offset, backlog, replicas, the link to our primary.
    pub repl: repl::ReplState,
    /// The AOF's subscription to the write stream, while the AOF is open.
    pub aof_sub: Option<SubscriberId>,
    /// Replication's subscription to the write stream: while this server is a primary with a
    /// backlog (see [`Engine::pump_repl`]).
    pub repl_sub: Option<SubscriberId>,
    /// Reused between drains of `repl_sub`.
    repl_scratch: Vec<u8>,
    /// Every executed write as the commands to propagate (AOF, replicas); see [`propagate`].
    pub stream: StreamCell,
    /// Set, under this lock, by the shutdown sequence once the final persistence steps are done.
    /// From then on no command may run: whoever takes the lock and finds it set must drop its
    /// requests unanswered, so every reply ever sent describes state that is in the saved file.
    pub shut_down: bool,
    /// `maxmemory` eviction's pool of candidates and cursor ([`evict`]).
    pub eviction: evict::EvictionState,
}

impl Engine {
    /// An empty keyspace of `databases` databases, with a statistics slot for each of the
    /// `commands` entries of the command table (which lives on the floor above).
    pub fn new(databases: usize, commands: usize) -> Engine {
        Engine {
            store: Store::new(databases),
            stats: vec![CommandStat::default(); commands],
            shared_stats: (0..commands).map(|_| SharedStat::default()).collect(),
            error_stats: HashMap::new(),
            pubsub: pubsub::PubSub::new(),
            repl: repl::ReplState::new(shared::new_run_id()),
            aof_sub: None,
            repl_sub: None,
            repl_scratch: Vec::new(),
            stream: StreamCell::new(),
            shut_down: false,
            eviction: evict::EvictionState::default(),
        }
    }

    /// Subscribes a consumer to the write stream (see [`StreamCell::subscribe`]) and makes the
    /// keyspace record expired keys so they are propagated as `DEL`.
    pub fn subscribe_stream(
        &mut self,
        start_offset: u64,
        notify: Option<std::sync::Arc<tokio::sync::Notify>>,
    ) -> SubscriberId {
        // Keys expired before anyone listened are not owed to anyone.
        self.store.set_log_expired(false);
        self.store.set_log_expired(true);
        self.stream.subscribe(start_offset, notify)
    }

    /// Ends a subscription; with the last one gone, expired keys are no longer recorded.
    pub fn unsubscribe_stream(&mut self, id: SubscriberId) {
        self.stream.unsubscribe(id);
        if !self.stream.is_active() {
            self.store.set_log_expired(false);
        }
    }

    /// Starts replication's subscription to the write stream when this server is a primary with
    /// a backlog, and ends it when it is not (a replica forwards its primary's bytes itself, so
    /// the commands it applies must not reach the backlog twice; a freed backlog needs nothing).
    /// Returns the subscription. Call it in the critical section that creates the backlog or takes
    /// a full-sync snapshot, so the snapshot and the first streamed byte agree exactly.
    pub fn ensure_repl_stream(&mut self) -> Option<SubscriberId> {
        let wanted = self.repl.master.is_none() && self.repl.backlog.is_some();
        match (self.repl_sub, wanted) {
            (None, true) => {
                let id = self.subscribe_stream(self.repl.offset, None);
                self.repl_sub = Some(id);
            }
            (Some(id), false) => {
                self.unsubscribe_stream(id);
                self.repl_sub = None;
            }
            _ => {}
        }
        self.repl_sub
    }

    /// Moves what the write stream holds for replication into the backlog (hence to every
    /// replica), advancing `master_repl_offset`. The dispatcher calls it after every top-level
    /// command, so a `WAIT` later in the same pipeline waits for the write's offset; the cron
    /// calls it after active expiry. Also follows role changes (see
    /// [`Engine::ensure_repl_stream`]): REPLICAOF runs as a command, so the subscription starts
    /// or ends right after it.
    #[inline]
    pub fn pump_repl(&mut self) {
        // Inlined up to here: no backlog and no subscription (no replica ever attached) is the
        // common case, and the out-of-line call cost ~40 instructions a command (issue 15).
        if self.repl_sub.is_none() && self.repl.backlog.is_none() {
            return;
        }
        self.pump_repl_stream();
    }

    #[inline(never)]
    fn pump_repl_stream(&mut self) {
        let Some(id) = self.ensure_repl_stream() else {
            return;
        };
        if self.stream.get_mut().pending(id) == 0 {
            return;
        }
        let mut buf = std::mem::take(&mut self.repl_scratch);
        buf.clear();
        self.stream.get_mut().drain(id, &mut buf);
        self.repl.feed(&buf);
        buf.clear();
        if buf.capacity() <= 1 << 20 {
            self.repl_scratch = buf;
        }
    }

    /// Makes the replication stream's next command start with `SELECT` (a full sync starts: the
    /// replica loading the snapshot has no database selected), as Redis resets `slaveseldb`.
    pub fn repl_force_select(&mut self) {
        self.pump_repl();
        if let Some(id) = self.repl_sub {
            self.stream.get_mut().force_select(id);
        }
    }

    /// Moves the `DEL`s of keys expired so far into the current unit of the write stream.
    pub fn push_expired(&mut self) {
        push_expired(&mut self.store, self.stream.get_mut());
    }

    /// Emits the `DEL` of each key active expiry reclaimed, each its own unit (as Redis's
    /// `activeExpireCycle` does). Called after the cron's expiry pass.
    pub fn emit_expired(&mut self) {
        if !self.stream.is_active() {
            return;
        }
        self.stream.get_mut().end_unit();
        for (i, db) in self.store.dbs.iter_mut().enumerate() {
            for (verb, key) in db.expired_log.drain(..) {
                self.stream.get_mut().emit(i, &[verb, &key]);
            }
        }
    }
}

/// Moves the `DEL`s of expired keys recorded in `store` into the current unit of `stream`, in the
/// order the keys expired within each database.
pub fn push_expired(store: &mut Store, stream: &mut WriteStream) {
    for (i, db) in store.dbs.iter_mut().enumerate() {
        if !db.expired_log.is_empty() {
            for (verb, key) in db.expired_log.drain(..) {
                stream.push(i, &[verb, &key]);
            }
        }
    }
}

/// Monotonic nanoseconds since an arbitrary origin (Linux's `CLOCK_MONOTONIC`, the clock behind
/// `Instant`): the command statistics' clock and the connection round's timestamp. A plain `u64`
/// costs one `clock_gettime` and no `Instant` arithmetic: `Timespec::now`'s checks and the three
/// `sub_timespec` calls a round made with `Instant`s were ~170 of a `PING`'s ~3,600 userspace
/// instructions at `-P 1` (callgrind, issue 15).
#[inline]
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec` that outlives the call, which is all
    // `clock_gettime` requires; it writes nothing else.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        // Never on Linux (CLOCK_MONOTONIC always exists); std's clock then, from its own origin.
        static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        return ORIGIN
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_nanos() as u64;
    }
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Wall-clock unix time in milliseconds. Connections read it once per batch and pass it down.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
