//! The shared keyspace lock (issue 15, target 4: a design that goes past one core).
//!
//! The keyspace is one `RwLock<Engine>` (`Shared::engine`). Every command runs under the
//! exclusive (write) lock, as before — except a few read-only ones that carry a
//! [`SharedHandler`](super::SharedHandler) in the command table: `PING`, `ECHO`, `GET`, `MGET`,
//! `STRLEN`, `EXISTS`, `PFCOUNT`, `BF.EXISTS`, `BF.MEXISTS`, `CF.EXISTS`, `CF.MEXISTS` and `CF.COUNT`. A batch
//! that starts with one of those takes the lock shared ([`EngineLock::for_batch`]), so any number
//! of connections on any number of cores run them side by side. That is where a Bloom-filter
//! front of a database spends its time: most lookups ask for keys that do not exist, and they are
//! all reads.
//!
//! Under the shared lock nothing in the engine may change but atomics, so a command takes the
//! shared path only when it would change nothing on the exclusive one either
//! ([`try_shared`] checks, in this order):
//! - the command has a shared handler and the right arity;
//! - the engine has no MONITOR client (feeding it is a write), no CLIENT TRACKING state (a read
//!   remembers its keys), and `notify-keyspace-events` has no `m` (a miss raises an event);
//! - the client is authenticated, not in MULTI, not a MONITOR, not our primary's link, not the
//!   AOF loader, and has no subscription (a RESP2 subscriber's PING answers in the pub/sub form);
//! - neither the dispatcher's server-state refusals (loading, a disk error for PING) nor
//!   replication's (a stale replica) apply;
//! - the handler answered without an error (errors are counted in INFO errorstats, a write) and
//!   did not defer (it met a key that is due — reclaiming it is a write, propagated as `DEL` —
//!   or would have to write, as PFCOUNT refreshing a stale cache: see
//!   [`SharedDb`](crate::store::db::SharedDb)).
//!
//! Otherwise the command runs again from the start on the exclusive path: [`EngineLock::dispatch`]
//! releases the shared lock, takes the exclusive one and calls [`super::dispatch`], and the rest
//! of the batch stays there. The rerun is safe because the shared attempt changed nothing; other
//! clients may run between the two locks, exactly as they may between two batches. Every reply
//! byte is the exclusive path's: the two share one implementation of each command (over
//! [`ReadView`](crate::store::db::ReadView)).
//!
//! INFO commandstats counts shared-path commands in `Engine::shared_stats` (atomics). A run of the
//! same command in one batch is counted once, when it ends, so many cores running `BF.EXISTS` do not
//! all hit the same counter per command; `Ctx::command_stats` folds the counts in before INFO
//! reads them.
//!
//! Readers cannot starve a writer: std's `RwLock` on Linux makes new readers wait once a writer
//! waits, so a stream of read batches from many connections lets the next write in after the
//! batches already running.
//!
//! Writes still serialize on the exclusive lock; the essay in `server/mod.rs` gives the measured
//! scaling and what sharding the writes would take.

use std::sync::atomic::Ordering;
use std::sync::{RwLockReadGuard, RwLockWriteGuard};

use bytes::Bytes;

use super::{table, ClientState, Lookup};
use crate::engine::{mono_ns, Engine, Shared};
use crate::events;
use crate::protocol::Reply;

/// The keyspace lock a batch holds: shared while every command so far ran on the shared path,
/// exclusive from the first one that could not.
pub enum EngineLock<'a> {
    Shared {
        guard: RwLockReadGuard<'a, Engine>,
        /// The commands of the current run of one command, not yet counted.
        run: Option<StatRun>,
        /// The table lookup `for_batch` made of the batch's first request, for its dispatch.
        first: Option<FirstLookup>,
    },
    /// The lock, and (at the start of a batch) the lookup of its first request.
    Exclusive(RwLockWriteGuard<'a, Engine>, Option<FirstLookup>),
    /// Between the two locks of an upgrade.
    Released,
}

/// A command name's table entry, remembered by the name's address so that only the very request
/// it was looked up for uses it.
pub struct FirstLookup {
    name: *const u8,
    found: Lookup,
}

/// The table entry of `argv`'s command, from `first` if it was looked up for this very name.
fn lookup(first: &mut Option<FirstLookup>, argv: &[Bytes]) -> Lookup {
    let name = argv.first()?;
    match first.take() {
        Some(f) if f.name == name.as_ptr() => f.found,
        _ => table().get(name),
    }
}

/// Consecutive shared-path calls of one command (by table index) and their time.
pub struct StatRun {
    index: usize,
    calls: u64,
    nanos: u64,
}

impl<'a> EngineLock<'a> {
    /// The lock for a batch whose first request is `first`: shared if that command has a shared
    /// handler, exclusive otherwise (a batch of writes never takes the shared lock first).
    pub fn for_batch(shared: &'a Shared, first: &[Bytes]) -> EngineLock<'a> {
        let Some(name) = first.first() else {
            return EngineLock::Exclusive(shared.engine(), None);
        };
        let found = table().get(name);
        let first = Some(FirstLookup {
            name: name.as_ptr(),
            found,
        });
        if found.is_some_and(|(_, spec)| spec.shared_read.is_some()) {
            EngineLock::Shared {
                guard: shared.engine_shared(),
                run: None,
                first,
            }
        } else {
            EngineLock::Exclusive(shared.engine(), first)
        }
    }

    /// The exclusive lock from the start.
    pub fn exclusive_from_start(shared: &'a Shared) -> EngineLock<'a> {
        EngineLock::Exclusive(shared.engine(), None)
    }

    /// The engine, read-only, under whichever lock is held.
    pub fn engine(&self) -> &Engine {
        match self {
            EngineLock::Shared { guard, .. } => guard,
            EngineLock::Exclusive(guard, _) => guard,
            EngineLock::Released => unreachable!("an upgrade always ends holding the lock"),
        }
    }

    /// The engine for writing, if the exclusive lock is held.
    pub fn exclusive_mut(&mut self) -> Option<&mut Engine> {
        match self {
            EngineLock::Exclusive(guard, _) => Some(guard),
            _ => None,
        }
    }

    /// The engine for writing: upgrades a shared lock first (releases it, then takes the
    /// exclusive one; other clients may run in between).
    pub fn exclusive(&mut self, shared: &'a Shared) -> &mut Engine {
        if !matches!(self, EngineLock::Exclusive(..)) {
            // The shared guard must be gone before the write lock is asked for, or this thread
            // would wait for itself.
            drop(std::mem::replace(self, EngineLock::Released));
            *self = EngineLock::Exclusive(shared.engine(), None);
        }
        match self {
            EngineLock::Exclusive(guard, _) => guard,
            _ => unreachable!("just upgraded"),
        }
    }

    /// Runs one request, on the shared path if it can (see the module essay), otherwise on the
    /// exclusive path. `None` when the server shut down between the shared lock and the
    /// exclusive one: nothing more may run or be answered (see `Engine::shut_down`).
    pub fn dispatch(
        &mut self,
        shared: &'a Shared,
        client: &mut ClientState,
        argv: &[Bytes],
        now_ms: u64,
    ) -> Option<Reply> {
        let found = match self {
            EngineLock::Shared { first, .. } | EngineLock::Exclusive(_, first) => {
                lookup(first, argv)
            }
            EngineLock::Released => lookup(&mut None, argv),
        };
        if let EngineLock::Shared { guard, run, .. } = self {
            if let Some(reply) = try_shared(shared, guard, run, client, argv, now_ms, found) {
                return Some(reply);
            }
        }
        let engine = self.exclusive(shared);
        if engine.shut_down {
            return None;
        }
        Some(super::dispatch_found(
            shared, engine, client, argv, now_ms, found,
        ))
    }
}

impl Drop for EngineLock<'_> {
    fn drop(&mut self) {
        if let EngineLock::Shared { guard, run, .. } = self {
            if let Some(r) = run.take() {
                guard.shared_stats[r.index].add(r.calls, r.nanos);
            }
        }
    }
}

/// True if nothing engine-wide keeps `client`'s read-only commands off the shared path.
fn open_for(engine: &Engine, client: &ClientState) -> bool {
    !engine.shut_down
        && client.authenticated
        && client.multi.is_none()
        && !client.monitor
        && !client.is_master
        && !client.replaying
        && engine.pubsub.monitors.is_empty()
        && engine.pubsub.tracking.quiet()
        && engine.store.notify_flags & (events::KEY_MISS | events::TRACKED) == 0
        && (engine.pubsub.is_empty() || !engine.pubsub.is_subscriber(client.handle.id))
}

/// One command on the shared path, or `None` if it must run on the exclusive one (nothing has
/// changed then: the caller reruns it there).
fn try_shared(
    shared: &Shared,
    engine: &Engine,
    run: &mut Option<StatRun>,
    client: &mut ClientState,
    argv: &[Bytes],
    now_ms: u64,
    found: Lookup,
) -> Option<Reply> {
    let (index, spec) = found?;
    let handler = spec.shared_read?;
    if !spec.arity_ok(argv.len()) || !open_for(engine, client) {
        return None;
    }
    if super::refuses(shared, spec)
        || super::replication::refuses(shared, &engine.repl, client, spec, now_ms)
    {
        return None;
    }
    let db = engine.store.dbs.get(client.db)?;
    // As `execute`: a batch's command starts when the previous one ended.
    let started = client.cmd_clock.unwrap_or_else(mono_ns);
    let mut view = db.shared_view(now_ms, client.prefetched.addresses());
    // A handler that panics is left to the exclusive path, which turns it into an error reply.
    let outcome =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(&mut view, argv)));
    let reply = match outcome {
        Ok(Ok(reply)) if !view.deferred() => reply,
        _ => return None,
    };
    let ended = mono_ns();
    if client.cmd_clock.is_some() {
        client.cmd_clock = Some(ended);
    }
    client.handle.last_cmd.store(index + 1, Ordering::Relaxed);
    let nanos = ended.saturating_sub(started);
    match run {
        Some(r) if r.index == index => {
            r.calls += 1;
            r.nanos += nanos;
        }
        _ => {
            if let Some(r) = run.take() {
                engine.shared_stats[r.index].add(r.calls, r.nanos);
            }
            *run = Some(StatRun {
                index,
                calls: 1,
                nanos,
            });
        }
    }
    super::log_command(client, argv);
    Some(reply)
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::sync::Arc;

    use super::*;
    use crate::config::Config;
    use crate::engine::ClientHandle;

    fn client(id: u64) -> ClientState {
        let addr: SocketAddr = "127.0.0.1:1".parse().expect("literal address");
        ClientState::new(Arc::new(ClientHandle::new(id, addr, addr)), true)
    }

    fn argv(words: &[&str]) -> Vec<Bytes> {
        words
            .iter()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    /// Runs `words` as a batch of one; returns the reply and whether the lock stayed shared.
    fn run(shared: &Shared, c: &mut ClientState, words: &[&str], now: u64) -> (Reply, bool) {
        let a = argv(words);
        let mut lock = EngineLock::for_batch(shared, &a);
        let reply = lock.dispatch(shared, c, &a, now).expect("not shut down");
        (reply, matches!(lock, EngineLock::Shared { .. }))
    }

    fn setup() -> (Arc<Shared>, ClientState, u64) {
        let shared = Shared::new(Config::default(), table().len());
        let mut c = client(1);
        let now = crate::engine::now_ms();
        for w in [
            &["SET", "s", "value"][..],
            &["BF.ADD", "bf", "item"],
            &["CF.ADD", "cf", "item"],
            &["PFADD", "hll", "a", "b", "c"],
            // Computes and caches the cardinality (a write: exclusive path).
            &["PFCOUNT", "hll"],
        ] {
            run(&shared, &mut c, w, now);
        }
        (shared, c, now)
    }

    fn stat(shared: &Shared, name: &str) -> (u64, u64) {
        let mut e = shared.engine();
        let e = &mut *e;
        crate::engine::fold_shared_stats(&mut e.stats, &e.shared_stats);
        let (i, _) = table().get(name.as_bytes()).expect("known command");
        (e.stats[i].calls, e.stats[i].failed)
    }

    #[test]
    fn reads_stay_shared_and_answer_as_the_exclusive_path() {
        let (shared, mut c, now) = setup();
        let cases: &[&[&str]] = &[
            &["GET", "s"],
            &["GET", "missing"],
            &["MGET", "s", "missing", "bf"],
            &["STRLEN", "s"],
            &["EXISTS", "s", "bf", "missing", "s"],
            &["BF.EXISTS", "bf", "item"],
            &["BF.EXISTS", "bf", "other"],
            &["BF.MEXISTS", "bf", "item", "other"],
            &["CF.EXISTS", "cf", "item"],
            &["CF.MEXISTS", "cf", "item", "other"],
            &["CF.COUNT", "cf", "item"],
            &["PING"],
            &["PING", "hello"],
            &["ECHO", "hello"],
            &["PFCOUNT", "hll"],
            &["PFCOUNT", "hll", "missing"],
            &["PFCOUNT", "missing"],
        ];
        for words in cases {
            let (got, stayed_shared) = run(&shared, &mut c, words, now);
            assert!(stayed_shared, "{words:?} left the shared path");
            let a = argv(words);
            let mut e = shared.engine();
            let want = super::super::dispatch(&shared, &mut e, &mut c, &a, now);
            assert_eq!(format!("{got:?}"), format!("{want:?}"), "{words:?}");
        }
        // Counted once per call, from both paths (each case ran once per path).
        assert_eq!(stat(&shared, "get"), (4, 0));
        assert_eq!(stat(&shared, "bf.exists"), (4, 0));
    }

    #[test]
    fn an_error_reply_comes_from_the_exclusive_path_and_is_counted() {
        let (shared, mut c, now) = setup();
        let (reply, stayed_shared) = run(&shared, &mut c, &["GET", "bf"], now);
        assert!(!stayed_shared);
        assert!(reply.is_error());
        assert_eq!(stat(&shared, "get"), (1, 1));
        assert_eq!(shared.engine().error_stats.get("WRONGTYPE"), Some(&1));
    }

    #[test]
    fn pfcount_of_a_stale_cache_writes_it_back_on_the_exclusive_path() {
        let (shared, mut c, now) = setup();
        assert!(
            run(&shared, &mut c, &["PFCOUNT", "hll"], now).1,
            "cache valid"
        );
        run(&shared, &mut c, &["PFADD", "hll", "d"], now);
        let (reply, stayed_shared) = run(&shared, &mut c, &["PFCOUNT", "hll"], now);
        assert!(!stayed_shared, "a stale cache is written back: exclusive");
        assert_eq!(format!("{reply:?}"), format!("{:?}", Reply::Int(4)));
        assert!(
            run(&shared, &mut c, &["PFCOUNT", "hll"], now).1,
            "cache valid again"
        );
    }

    #[test]
    fn a_due_key_is_reclaimed_on_the_exclusive_path() {
        let (shared, mut c, now) = setup();
        shared.engine().store.db(0, now).set_expire(b"s", now - 1);
        let (reply, stayed_shared) = run(&shared, &mut c, &["GET", "s"], now);
        assert!(
            !stayed_shared,
            "a due key must send the read to the exclusive path"
        );
        assert!(matches!(reply, Reply::Null));
        let mut e = shared.engine();
        assert!(e.store.db(0, now).peek_value(b"s").is_none(), "reclaimed");
        assert_eq!(e.store.dbs[0].len(), 3);
    }

    #[test]
    fn engine_state_that_reads_must_see_closes_the_shared_path() {
        let (shared, mut c, now) = setup();
        // keymiss events.
        shared
            .engine()
            .store
            .set_notify_flags(events::KEY_MISS | events::KEYSPACE);
        assert!(!run(&shared, &mut c, &["GET", "missing"], now).1);
        shared.engine().store.set_notify_flags(0);
        assert!(run(&shared, &mut c, &["GET", "missing"], now).1);
        // A client inside MULTI queues.
        run(&shared, &mut c, &["MULTI"], now);
        let (reply, stayed_shared) = run(&shared, &mut c, &["GET", "s"], now);
        assert!(!stayed_shared);
        assert!(matches!(reply, Reply::Status("QUEUED")));
        run(&shared, &mut c, &["DISCARD"], now);
        // An unauthenticated client gets NOAUTH.
        let mut stranger = client(2);
        stranger.authenticated = false;
        let (reply, stayed_shared) = run(&shared, &mut stranger, &["GET", "s"], now);
        assert!(!stayed_shared);
        assert!(reply.is_error());
        // A write in a batch that began shared upgrades the lock, and the rest stays exclusive.
        let batch = [
            argv(&["GET", "s"]),
            argv(&["SET", "t", "1"]),
            argv(&["GET", "t"]),
        ];
        let mut lock = EngineLock::for_batch(&shared, &batch[0]);
        let replies: Vec<Reply> = batch
            .iter()
            .map(|a| lock.dispatch(&shared, &mut c, a, now).expect("running"))
            .collect();
        assert!(matches!(lock, EngineLock::Exclusive(..)));
        drop(lock);
        assert_eq!(
            format!("{:?}", replies[2]),
            format!("{:?}", Reply::Bulk(Bytes::from_static(b"1")))
        );
    }

    #[test]
    fn a_shutdown_between_the_locks_runs_nothing_more() {
        let (shared, mut c, now) = setup();
        let a = argv(&["GET", "s"]);
        let mut lock = EngineLock::for_batch(&shared, &a);
        assert!(lock.dispatch(&shared, &mut c, &a, now).is_some());
        // The shutdown sequence runs while this batch holds no lock (simulated: the mark is set
        // through the shared lock's upgrade path, as `shut_down` is set under the write lock).
        lock.exclusive(&shared).shut_down = true;
        assert!(lock
            .dispatch(&shared, &mut c, &argv(&["SET", "t", "1"]), now)
            .is_none());
        drop(lock);
        assert!(shared.engine().store.dbs[0].peek_value(b"t").is_none());
    }
}
