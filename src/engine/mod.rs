//! The shared-state floor (floor 5): what every connection and every command shares.
//!
//! It holds the locked keyspace ([`Engine`]: the store plus the statistics updated with it), the
//! client registry as commands see it ([`ClientHandle`]), the pub/sub registry ([`pubsub`]),
//! server statistics, persistence status,
//! the configuration in force, the clock ([`now_ms`]) and the memory accounting ([`alloc`]).
//! `server/` (the connections) and `commands/` (the handlers) both stand on it, as does
//! `persistence/`; it imports only from the floors below: `store/`, `config/`, `protocol/`,
//! `numeric/`, `error.rs`. So "where does the server's state live?" has one answer: here.

use std::collections::HashMap;

use crate::store::db::Store;

pub mod alloc;
pub mod propagate;
pub mod pubsub;
pub mod repl;
pub mod shared;

pub use propagate::{SubscriberId, WriteStream};
pub use shared::{AofRewriteJob, AofSink, BgJob, ClientHandle, PersistenceStatus, Shared, Stats};

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

/// What the keyspace lock guards: the data, and the statistics updated with it.
pub struct Engine {
    pub store: Store,
    pub stats: Vec<CommandStat>,
    /// Error replies by code (INFO errorstats).
    pub error_stats: HashMap<String, u64>,
    /// Every client's channel, pattern and shard-channel subscriptions.
    pub pubsub: pubsub::PubSub,
    /// Replication: ids, offset, backlog, replicas, the link to our primary.
    pub repl: repl::ReplState,
    /// The AOF's subscription to the write stream, while the AOF is open.
    pub aof_sub: Option<SubscriberId>,
    /// Every executed write as the commands to propagate (AOF, replicas); see [`propagate`].
    pub stream: WriteStream,
    /// Set, under this lock, by the shutdown sequence once the final persistence steps are done.
    /// From then on no command may run: whoever takes the lock and finds it set must drop its
    /// requests unanswered, so every reply ever sent describes state that is in the saved file.
    pub shut_down: bool,
}

impl Engine {
    /// An empty keyspace of `databases` databases, with a statistics slot for each of the
    /// `commands` entries of the command table (which lives on the floor above).
    pub fn new(databases: usize, commands: usize) -> Engine {
        Engine {
            store: Store::new(databases),
            stats: vec![CommandStat::default(); commands],
            error_stats: HashMap::new(),
            pubsub: pubsub::PubSub::new(),
            repl: repl::ReplState::new(shared::new_run_id()),
            aof_sub: None,
            stream: WriteStream::new(),
            shut_down: false,
        }
    }

    /// Subscribes a consumer to the write stream (see [`WriteStream::subscribe`]) and makes the
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

    /// Moves the `DEL`s of keys expired so far into the current unit of the write stream.
    pub fn push_expired(&mut self) {
        push_expired(&mut self.store, &mut self.stream);
    }

    /// Emits the `DEL` of each key active expiry reclaimed, each its own unit (as Redis's
    /// `activeExpireCycle` does). Called after the cron's expiry pass.
    pub fn emit_expired(&mut self) {
        if !self.stream.is_active() {
            return;
        }
        self.stream.end_unit();
        for (i, db) in self.store.dbs.iter_mut().enumerate() {
            for key in db.expired_log.drain(..) {
                self.stream.emit(i, &[b"DEL" as &[u8], &key]);
            }
        }
    }
}

/// Moves the `DEL`s of expired keys recorded in `store` into the current unit of `stream`, in the
/// order the keys expired within each database.
pub fn push_expired(store: &mut Store, stream: &mut WriteStream) {
    for (i, db) in store.dbs.iter_mut().enumerate() {
        if !db.expired_log.is_empty() {
            for key in db.expired_log.drain(..) {
                stream.push(i, &[b"DEL" as &[u8], &key]);
            }
        }
    }
}

/// Wall-clock unix time in milliseconds. Connections read it once per batch and pass it down.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
