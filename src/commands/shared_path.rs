//! The shared keyspace lock (issue 15, target 4: a design that goes past one core).
//!
//! The keyspace is one `RwLock<Engine>` (`Shared::engine`). Every command runs under the
//! exclusive (write) lock — except those that carry a [`SharedHandler`](super::SharedHandler) in
//! the command table:
//! - reads: `PING`, `ECHO`, `GET`, `MGET`, `STRLEN`, `EXISTS`, `PFCOUNT`, `BF.EXISTS`,
//!   `BF.MEXISTS`, `CF.EXISTS`, `CF.MEXISTS` and `CF.COUNT`;
//! - writes in place: `SET` (options that change no TTL: NX, XX, GET, KEEPTTL), `INCR`, `DECR`,
//!   `INCRBY`, `DECRBY`, `BF.ADD`, `BF.MADD` (items that fit in the newest link), `CF.ADD` and
//!   `PFADD` (a dense HLL, or a sparse one as it grows), on a key that exists;
//! - and on a multi-thread runtime, new keys, deletions and TTLs: `SET` (every option),
//!   `SETEX`, `PSETEX`, `INCR`, `DECR`, `INCRBY`, `DECRBY`, `BF.ADD`, `BF.MADD`, `CF.ADD` and
//!   `PFADD` of a key that does not exist, `DEL`, `UNLINK` and `GETDEL`, and the TTL changes of SET, the
//!   EXPIRE family, `PERSIST` and `GETEX` (below, "Keys added under the shared lock" and "TTLs
//!   under the shared lock"); `TTL`, `PTTL`, `EXPIRETIME` and `PEXPIRETIME` read there;
//! - `MULTI`, the commands it queues, `DISCARD` and `EXEC` of a transaction of those reads
//!   (below, "Transactions");
//! - and with batches on more than one thread, `MSET` and `MSETNX`: every key checked before any
//!   is written (`SharedDb::plain_set_check`), so the command writes all its pairs or defers
//!   with none written. On one thread their stripe locks and checks cost more than the
//!   exclusive path (`CommandSpec::shared_parallel_only`).
//!
//! A batch that starts with one of those takes the lock shared ([`EngineLock::for_batch`]), so
//! any number of connections on any number of cores run them side by side. That is where a
//! Bloom-filter front of a database spends its time (most lookups ask for keys that do not
//! exist), and where counters, filters and HLLs that already exist are fed.
//!
//! # What the shared lock lets change: values, under stripes
//! Under the shared lock the table's *structure* is frozen: no segment is copied or split, so
//! every entry another command may be looking at stays where it is (a key may be added to or
//! removed from a segment, and a TTL set or cleared there, under its stripe, below). A value may change in place,
//! and only under its key's stripe lock (`store::db::Stripes`: 256 `RwLock<()>`s, a key's stripe
//! chosen by its hash). A command on the shared path first takes the stripes of its keys (by the
//! command table's key positions), ascending, for writing if it is a write and for reading
//! otherwise; [`SharedDb`](crate::store::db::SharedDb) hands out a key's value only while its
//! stripe is held, and for writing only when held for writing. So two writes to one key, or a
//! write and a read of it, take turns, and a multi-key read (MGET, EXISTS, PFCOUNT of several)
//! holds every stripe it reads at once: it sees each key before or after any concurrent write,
//! never a mix, exactly as under one lock. Writes to different stripes run on different cores.
//! The exclusive path takes no stripe: holding the keyspace lock exclusively, it excludes
//! everyone who could hold one. `commands::prefetch_keys`, which looks at filters under the
//! shared lock, holds their stripe for reading too.
//!
//! # Keys added under the shared lock
//! A key's stripe is the low bits of its key-table segment index (`store::keytable::stripe_of`),
//! so once the table has 256 segments (about 32k keys) every key of a segment is in one stripe,
//! and holding that stripe for writing excludes everyone who could look into the segment on the
//! shared path. There, and only there, a write may add a key
//! ([`SharedDb::write_or_vacant`](crate::store::db::SharedDb::write_or_vacant)): the segment's
//! hash table may grow, but the segment list, the other segments and every `Arc` stay as they
//! are. It defers instead when no snapshot may see the change (a save holds the segment), when
//! the table is due for more segments than a slack of 1/16 allows (splits are the exclusive
//! path's), or below 32k keys. The key count is added once per batch, before the lock is let go,
//! so the exclusive lock always sees it exact. With more than one thread running batches, one
//! more reader has to hold stripes: the batch prefetch, which walks the segments of the batch's
//! keys before the commands run (`Db::prefetch`); with one thread nothing runs beside it, and it
//! takes no lock (`engine::Shared::parallel_batches`, set by `server` from the runtime).
//! Inserts are on with either runtime (`Store::shared_inserts`): on one thread, a new key that
//! deferred sent its client's next batches to the exclusive path, which cost a pipelined SET of
//! fresh keys ~10 % more instructions. `DEL` and `UNLINK` remove keys the same way
//! (`SharedDb::delete_keys`: every key checked before any is removed, none due).
//!
//! # TTLs under the shared lock
//! A key's TTL lives in two places: its entry in the segment, which the stripe guards as it
//! guards the segment's keys, and the database's expiry queue, which is one ordered set per
//! stripe (`store::db::ExpiryQueues`): so the stripe held for writing guards both, and cores
//! changing TTLs under different stripes share nothing. SET with an expiry (EX, PX, EXAT, PXAT;
//! SETEX, PSETEX), SET without KEEPTTL over a key that had one, and DEL of such a key change both
//! at once (`KeyTable::set_expiry_shared`, counted in an atomic that readers trust when it is
//! zero; the stripe's set behind a mutex that nobody else can want while the stripe is held).
//! Active expiry, on the exclusive path, walks the sets from a cursor. Where keys can be added
//! (the conditions above) TTLs can change; elsewhere a TTL change defers. An expiry already
//! past (the key would be born due) and a key that is due defer too: reclaiming one is the
//! exclusive path's, which propagates it. A SET with a relative expiry enters the write stream
//! as the exclusive path writes it, `SET key value PXAT ms` (and with GET left out), through
//! `SharedDb::propagate_as`.
//!
//! # maxmemory
//! A `maxmemory` limit leaves writes on the shared path. Under the limit the exclusive path does
//! nothing for a write but run it (there is nothing to evict); over it, it first evicts by
//! `maxmemory-policy` (`engine::evict`), and refuses a deny-oom write with the OOM error when
//! nothing could be evicted (or under `noeviction`). The shared path runs a write under the
//! limit, and sends a deny-oom write over it back before it runs, by the same check
//! (`super::refuses`, `used_memory` against the limit): the exclusive path evicts or answers.
//! A write that creates a filter checks its reservation after making it, on both paths
//! (`reservation_fits`), and on this one defers when it does not fit, before the key is added.
//! Writes on other cores
//! may allocate between a command's check and its write: the limit can be passed by what the
//! commands running at that moment add, as Redis passes it by what one command adds (it checks
//! only before each command); a reservation never passes it (each is checked after it is
//! counted). Before 2026-12-07 any `maxmemory` kept every write exclusive: a production
//! `redis.conf` with a limit lost the shared path's writes entirely (`BENCH_MAXMEMORY` in
//! `examples/bench_scaling.rs` measures both).
//!
//! # When a command may take the shared path
//! Only when it would do nothing on the exclusive path that the shared one cannot
//! ([`try_shared`] checks, in this order):
//! - the command has a shared handler and the right arity;
//! - the engine has no MONITOR client (feeding it is a write), no CLIENT TRACKING state (a read
//!   remembers its keys), and `notify-keyspace-events` has no `m` (a miss raises an event);
//! - the client is authenticated, not in MULTI (for a command of its own; in one, see
//!   "Transactions"), not a MONITOR, not our primary's link, not the AOF loader, and has no
//!   subscription (a RESP2 subscriber's PING answers in the pub/sub form);
//! - neither the dispatcher's server-state refusals (loading, a disk error, MISCONF) nor
//!   replication's (a stale or read-only replica, min-replicas-to-write) apply;
//! - for a write, nothing else a write touches is in use ([`open_for_writes`]): no keyspace
//!   events at all, no WATCHed key in the database. `maxmemory` may be set (below, "maxmemory");
//!   the AOF and replicas may be
//!   attached (below);
//! - the handler answered without an error (errors are counted in INFO errorstats, a write) and
//!   did not defer. A read defers when it meets a key that is due (reclaiming it is a write,
//!   propagated as `DEL`) or would have to write (PFCOUNT refreshing a stale cache). A write
//!   defers when its key is missing (unless it can be added, above), due, in a block a snapshot
//!   can still reach (unsharing it changes the table), of another type, or when its change
//!   cannot be made in place (a TTL change where keys cannot be added, an INCR that overflows, a
//!   filter that is full); it decides that before it changes anything. One exception: PFADD
//!   meets a corrupt sparse HLL only as it walks it, after raising the registers of the
//!   elements before; it defers then, and the exclusive rerun over those raised registers ends
//!   where the exclusive path alone would (`commands::hll`'s `pfadd_shared`).
//!
//! Otherwise the command runs again from the start on the exclusive path: [`EngineLock::dispatch`]
//! releases the shared lock, takes the exclusive one and calls [`super::dispatch`], and the rest
//! of the batch stays there. The rerun is safe because the shared attempt changed nothing; other
//! clients may run between the two locks, exactly as they may between two batches. Every reply
//! byte is the exclusive path's: the reads share one implementation with it (over
//! [`ReadView`](crate::store::db::ReadView)); the writes are a second implementation of the one
//! case they take, tested against the first (same replies, same `DUMP`, encoding, TTL and
//! `dirty`). A write whose handler panics partway is not rerun (it may have changed its value):
//! it answers the exclusive path's internal-error reply and is counted as failed there.
//!
//! # Transactions
//! MULTI, the commands it queues and EXEC take the shared path too, so a transaction of reads
//! (redis-py's pipelines are transactions unless told otherwise) runs beside other connections
//! instead of stopping them:
//! - MULTI, queuing and DISCARD (without WATCH) change only the client's own state, exactly as
//!   the dispatcher changes it ([`in_transaction`]). Any command is queued there, with or without
//!   a shared handler; the ones whose queuing the dispatcher refuses with an error (a wrong
//!   arity, an unknown subcommand, DEBUG or MODULE refused) mark the transaction, which counts,
//!   so they go to the exclusive path, as do WATCH, MULTI, QUIT and RESET inside one.
//! - EXEC runs there when every queued command is a read with a shared handler and nothing
//!   would make the exclusive path answer otherwise: no WATCH (the versions are checked there),
//!   no mark, no refusal, no push waiting for the client ([`exec_reads`]). It takes the stripes
//!   of all the transaction's keys for reading at once, ascending, before the first command runs,
//!   so the transaction sees every key before or after any concurrent write, never a mix: the
//!   atomicity EXEC has under the exclusive lock, for a transaction that writes nothing.
//! - A read in it that fails (WRONGTYPE, counted as an error) or defers (a due key) sends the
//!   whole EXEC to the exclusive path, which runs the queue from the start: reads changed
//!   nothing, and the queue is still the client's. A transaction with a write runs there too:
//!   a write that deferred after an earlier one wrote could not be run again from the start, and
//!   finishing it on the exclusive path would let other clients in between (it is not taken
//!   while stripes are held).
//!
//! INFO commandstats counts MULTI, EXEC and each command it ran once, as the exclusive path does;
//! EXEC's time is the whole transaction's, and each command's an equal share of it (one clock
//! read per EXEC).
//!
//! # The write stream
//! With the AOF on, a shared write enters the write stream itself (`engine::propagate`,
//! "Writers under the shared lock"): encoded first, then appended under the stream's mutex as a
//! unit of its own while the key's stripe is still held, so one key's writes are in the stream in
//! the order they were applied, and a command that saw a write (holding the stripe after it)
//! follows it there. Writes to different keys commute, so the stream's order between them, which
//! is the mutex's, replays to the same keyspace. Every shared write propagates verbatim, and only
//! when it counted a write, which is when the exclusive path propagates it (a PFADD that changed
//! no register is not written). The batch's group commit (`appendfsync always`) then waits for
//! the stream offset read after the batch, which covers every write the batch made or saw.
//!
//! Replicas read the same stream: the backlog is fed from it by whoever next takes the exclusive
//! lock (`Shared::engine` moves what the stream holds into the backlog first, so INFO, WAIT, a
//! full sync's snapshot and a replica's feed never see data without its offset), and a batch
//! whose shared writes entered the stream wakes the replica tasks when it is done
//! (`ClientState::fed_replicas`), which take that lock to read the backlog. The order replicas
//! see is the stream's, as for the AOF.
//!
//! INFO commandstats counts shared-path commands in `Engine::shared_stats` (atomics). A run of the
//! same command in one batch is counted once, when it ends, so many cores running `BF.EXISTS` do not
//! all hit the same counter per command; `Ctx::command_stats` folds the counts in before INFO
//! reads them. The run is timed once too, from its start to its end ([`StatRun`]): a batch's
//! commands run back to back, so the sum of its calls' times is the run's, and one clock read per
//! run instead of one per command is 15 fewer reads in a 16-request batch (a `clock_gettime` costs
//! ~23 ns on this VM's kvm-clock/TSC, 5–7 % of a pipelined `BF.EXISTS`'s server CPU). A batch's writes reach its database's `dirty` the same way, once per batch
//! (`Db::shared_dirty`, folded in by `Store::db`).
//!
//! Readers cannot starve a writer: std's `RwLock` on Linux makes new readers wait once a writer
//! waits, so a stream of read batches from many connections lets the next exclusive command in
//! after the batches already running. The stripes are `RwLock`s for the same reason, and so that
//! many cores reading one hot filter do not take turns.
//!
//! The essay in `server/mod.rs` gives the measured scaling.

use std::sync::atomic::Ordering;
use std::sync::RwLockWriteGuard;

use bytes::Bytes;

use super::{table, ClientState, Lookup};
use crate::engine::{mono_ns, Engine, Shared};
use crate::events;
use crate::protocol::Reply;
use crate::store::db::Db;

/// The keyspace lock a batch holds: shared while every command so far ran on the shared path,
/// exclusive from the first one that could not.
pub enum EngineLock<'a> {
    Shared {
        guard: crate::engine::shared::SharedEngine<'a>,
        /// The commands of the current run of one command, not yet counted.
        run: Option<StatRun>,
        /// Writes made on the shared path, not yet added to their database's `dirty` (and keys
        /// added, not yet to its key count): added when the database changes or the lock is let
        /// go.
        writes: BatchWrites,
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

/// Consecutive shared-path calls of one command (by table index), and when the first began.
/// The clock is read when the run ends ([`StatRun::end`]), not after each call: the calls run
/// back to back, so their times add up to the run's (as the exclusive path chains them through
/// `ClientState::cmd_clock`). A call that deferred stays in the run's time (it is the same
/// command, rerun on the exclusive path) but not in its calls.
pub struct StatRun {
    index: usize,
    calls: u64,
    since: u64,
    /// When the run's current call began (its previous call's end): the slow log's start.
    call_began: u64,
}

impl StatRun {
    /// Counts the run into `engine`'s statistics, ending now; the time it ended, for the next
    /// command's start. A run with no call (its only attempt deferred) reads no clock and ends
    /// when it began: the exclusive path times that command from there.
    fn end(self, engine: &Engine) -> u64 {
        if self.calls == 0 {
            return self.since;
        }
        let ended = mono_ns();
        engine.shared_stats[self.index].add(self.calls, ended.saturating_sub(self.since));
        ended
    }
}

impl<'a> EngineLock<'a> {
    /// The lock for `client`'s batch whose first request is `first`: shared if that command has
    /// a shared handler (a write: unless the client's recent shared writes deferred, see
    /// [`WRITE_BACKOFF`]), exclusive otherwise.
    pub fn for_batch(
        shared: &'a Shared,
        first: &[Bytes],
        client: &mut ClientState,
    ) -> EngineLock<'a> {
        let Some(name) = first.first() else {
            return EngineLock::Exclusive(shared.engine(), None);
        };
        let found = table().get(name);
        let first = Some(FirstLookup {
            name: name.as_ptr(),
            found,
        });
        let parallel = shared.parallel_batches.load(Ordering::Relaxed);
        let try_shared = found.is_some_and(|(_, spec)| {
            if spec.shared_handler(parallel).is_none() {
                // A transaction's requests: MULTI, and in one, any (queued, or EXEC).
                return client.multi.is_some() || spec.name == "multi";
            }
            !spec.has(super::flags::WRITE) || {
                let skip = client.shared_write_backoff > 0;
                client.shared_write_backoff = client.shared_write_backoff.saturating_sub(1);
                !skip
            }
        });
        if try_shared {
            let guard = shared.engine_shared();
            // Checked once for the batch, not per command: nothing it reads can change while
            // the shared lock is held (the engine's fields change under the exclusive lock, the
            // client's only through commands that run there, after which the batch keeps the
            // exclusive lock). ~20 instructions a pipelined command.
            if open_for(&guard, client) {
                return EngineLock::Shared {
                    guard,
                    run: None,
                    writes: BatchWrites::default(),
                    first,
                };
            }
            // Let go before the exclusive lock is asked for, or this thread would wait for itself.
            drop(guard);
        }
        EngineLock::Exclusive(shared.engine(), first)
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

    /// Whether the lock is held shared.
    pub fn is_shared(&self) -> bool {
        matches!(self, EngineLock::Shared { .. })
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
        if let EngineLock::Shared {
            guard, run, writes, ..
        } = self
        {
            let attempt = try_shared(shared, guard, run, writes, client, argv, now_ms, found);
            if !matches!(attempt, Attempt::Answered(_)) {
                // The exclusive path times its command from `cmd_clock`: from this run's end.
                if let Some(r) = run.take() {
                    let ended = r.end(guard);
                    if client.cmd_clock.is_some() {
                        client.cmd_clock = Some(ended);
                    }
                }
            }
            match attempt {
                Attempt::Answered(reply) => return Some(reply),
                Attempt::Rerun => {
                    if found.is_some_and(|(_, spec)| spec.has(super::flags::WRITE)) {
                        client.shared_write_backoff = WRITE_BACKOFF;
                    }
                }
                Attempt::Failed(index, reply) => {
                    // The exclusive path's bookkeeping of a failed command, without running it
                    // again: a write that panicked partway may have changed its value.
                    let engine = self.exclusive(shared);
                    if engine.shut_down {
                        return None;
                    }
                    engine.stats[index].calls += 1;
                    engine.stats[index].failed += 1;
                    if let Reply::Error(e) = &reply {
                        *engine.error_stats.entry(e.code()).or_insert(0) += 1;
                    }
                    return Some(reply);
                }
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
        if let EngineLock::Shared {
            guard, run, writes, ..
        } = self
        {
            if let Some(r) = run.take() {
                r.end(guard);
            }
            add_writes(guard, writes);
        }
    }
}

/// A batch's shared-path writes to one database, not yet counted there.
#[derive(Default)]
pub struct BatchWrites {
    db: usize,
    /// Writes, for `dirty`.
    writes: u64,
    /// Keys added and removed, for the key count.
    inserted: usize,
    removed: usize,
}

impl BatchWrites {
    /// A command's writes, and keys added and removed, in database `db`; those of another
    /// database before it are counted first.
    fn add(&mut self, engine: &Engine, db: usize, writes: u64, inserted: usize, removed: usize) {
        if self.db != db {
            add_writes(engine, self);
            self.db = db;
        }
        self.writes += writes;
        self.inserted += inserted;
        self.removed += removed;
    }
}

/// Adds a batch's shared-path writes to their database's `dirty` (`Store::db` folds them in),
/// and the keys it added and removed to the database's key count. Once per batch, not per write: the
/// counters are one cache line each that every core's writes would otherwise pass around. Done
/// before the shared lock is let go, so every holder of the exclusive lock sees exact counts;
/// under the shared lock they may lag by the batches running (`KeyTable::can_insert_shared`
/// allows for that).
fn add_writes(engine: &Engine, writes: &mut BatchWrites) {
    if writes.writes != 0 || writes.inserted != 0 || writes.removed != 0 {
        if let Some(db) = engine.store.dbs.get(writes.db) {
            db.shared_dirty
                .0
                .fetch_add(writes.writes, Ordering::Relaxed);
            db.count_shared(writes.inserted, writes.removed);
        }
        writes.writes = 0;
        writes.inserted = 0;
        writes.removed = 0;
    }
}

/// After a shared-path write deferred, how many of the client's batches that start with a write
/// take the exclusive lock directly. A deferral costs a round trip through the shared lock (take,
/// try, release, then the exclusive one): for a client whose writes create keys (SET or INCR of
/// fresh keys, redis-benchmark's `-r`) or meet the AOF, paying that once every 17 batches
/// instead of every batch keeps the exclusive path's cost within a few instructions per request,
/// and a client writing existing keys loses at most 16 batches of sharing after a rare miss.
pub const WRITE_BACKOFF: u8 = 16;

/// What a shared handler answers when it defers: the reply is dropped
/// ([`SharedDb::defer`](crate::store::db::SharedDb::defer)) and the command runs again on the
/// exclusive path.
pub(super) fn defer(db: &mut crate::store::db::SharedDb) -> super::CmdResult {
    db.defer();
    Ok(Reply::Null)
}

/// What became of a command tried on the shared path.
enum Attempt {
    Answered(Reply),
    /// Nothing changed: run it on the exclusive path.
    Rerun,
    /// A write's handler panicked (command table index, the error reply): it may have changed
    /// its value, so it must not run again.
    Failed(usize, Reply),
}

/// True if nothing engine-wide keeps writes off the shared path: a write there touches its value,
/// `dirty` and the write stream, nothing else, so whatever else the exclusive path does for a
/// write must have nothing to do. No keyspace events (`notify-keyspace-events`, and CLIENT
/// TRACKING's invalidations, which ride on them), no WATCHed key in the database (a write bumps
/// its version). `maxmemory` does not close it: a write under the limit runs as on the
/// exclusive path, and a deny-oom write over it is sent there to evict or be refused
/// (`super::refuses` sends it back before it runs; see "maxmemory" in the module docs). The AOF
/// and replicas may be attached: the write enters the stream under its stripe ([`try_shared`]);
/// the next holder of the exclusive lock moves it into the backlog (`Shared::engine`), and the
/// connection wakes the replica tasks after the batch. Only a backlog whose stream subscription
/// does not exist yet (it is made by the first pump after the backlog) or that a replica keeps
/// for its own sub-replicas (which Redis feeds from its primary's stream, not its clients')
/// keeps writes exclusive.
fn open_for_writes(engine: &Engine, db: &Db) -> bool {
    engine.store.notify_flags == 0
        && !db.has_watches()
        && (engine.repl.backlog.is_none()
            || (engine.repl_sub.is_some() && engine.repl.master.is_none()))
}

/// True if nothing engine-wide keeps `client`'s read-only commands off the shared path.
fn open_for(engine: &Engine, client: &ClientState) -> bool {
    !engine.shut_down
        && client.authenticated
        && !client.monitor
        && !client.is_master
        && !client.replaying
        && engine.pubsub.monitors.is_empty()
        && engine.pubsub.tracking.quiet()
        && engine.store.notify_flags & (events::KEY_MISS | events::TRACKED) == 0
        && (engine.pubsub.is_empty() || !engine.pubsub.is_subscriber(client.handle.id))
}

/// One command on the shared path, or [`Attempt::Rerun`] if it must run on the exclusive one
/// (nothing has changed then: the caller reruns it there).
#[allow(clippy::too_many_arguments)]
fn try_shared(
    shared: &Shared,
    engine: &Engine,
    run: &mut Option<StatRun>,
    writes: &mut BatchWrites,
    client: &mut ClientState,
    argv: &[Bytes],
    now_ms: u64,
    found: Lookup,
) -> Attempt {
    let Some((index, spec)) = found else {
        return Attempt::Rerun;
    };
    let request = TxRequest {
        argv,
        now_ms,
        index,
        spec,
    };
    if client.multi.is_some() {
        return in_transaction(shared, engine, run, client, request);
    }
    let Some(handler) = spec.shared_handler(shared.parallel_batches.load(Ordering::Relaxed)) else {
        if spec.name == "multi" {
            return open_or_discard(shared, engine, run, client, request, true);
        }
        return Attempt::Rerun;
    };
    if !spec.arity_ok(argv.len()) {
        return Attempt::Rerun;
    }
    // Checked when the shared lock was taken (`EngineLock::for_batch`), and unchangeable since.
    debug_assert!(
        open_for(engine, client),
        "a shared batch its client may not run"
    );
    if super::refuses(shared, &engine.repl, spec)
        || super::replication::refuses(shared, &engine.repl, client, spec, now_ms)
    {
        return Attempt::Rerun;
    }
    let Some(db) = engine.store.dbs.get(client.db) else {
        return Attempt::Rerun;
    };
    let write = spec.has(super::flags::WRITE);
    if write && !open_for_writes(engine, db) {
        return Attempt::Rerun;
    }
    join_run(run, engine, client, index);
    // The view lives in this block and is dropped where it lies: `drop(view)` moved its 176
    // bytes first (a memcpy per command).
    let reply = {
        let mut view = db.shared_view(
            &engine.store.stripes,
            now_ms,
            client.prefetched.items(),
            engine.store.shared_inserts,
        );
        // The last key's position, counted from the end when negative (PFCOUNT, MGET, EXISTS).
        let last = match spec.last_key {
            l if l < 0 => argv.len() as i32 + l,
            l => l,
        };
        match spec.first_key {
            // PING, ECHO: no key, no stripe.
            first if first <= 0 => {}
            // One key (most commands, and PFCOUNT or EXISTS of one): its stripe, no list.
            first if first == last => {
                if let Some(key) = argv.get(first as usize) {
                    view.hold_key(key, write);
                }
            }
            _ => view.hold(spec.key_iter(argv).map(|k| &k[..]), write),
        }
        view.write_config = Some(&shared.write_config);
        if write {
            view.maxmemory = shared.maxmemory.load(Ordering::Relaxed);
        }
        if engine.stream.is_active() {
            view.set_stream_buffers(&mut client.prelude_scratch, &mut client.rewrite_scratch);
        }
        let outcome =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(&mut view, argv)));
        let reply = match outcome {
            Ok(Ok(reply)) if !view.deferred() => reply,
            // A read that panicked changed nothing: the exclusive path runs it and turns the panic
            // into its error reply.
            Err(_) if write => {
                // Keys it added or removed before the panic stay so: counted, or the key count would
                // be wrong even under the exclusive lock (its writes are not: it failed).
                writes.add(engine, client.db, 0, view.inserted(), view.removed());
                tracing::error!(
                    command = spec.name,
                    "command handler panicked; replying with an error"
                );
                return Attempt::Failed(
                    index,
                    Reply::Error(crate::error::CmdError::Owned(format!(
                        "ERR internal error while executing '{}'",
                        spec.name
                    ))),
                );
            }
            _ => {
                debug_assert!(
                    view.inserted() == 0 && view.removed() == 0,
                    "a deferred command added or removed a key"
                );
                return Attempt::Rerun;
            }
        };
        // Counted only now: a command that deferred is counted by its rerun.
        let (hits, misses) = view.keyspace_counts();
        client.keyspace_hits += u64::from(hits);
        client.keyspace_misses += u64::from(misses);
        if view.writes() != 0 {
            // Into the write stream while the key's stripe is still held, so that one key's writes
            // enter it in the order they were made (`engine::propagate`). Every shared write
            // propagates verbatim, as the exclusive path does when it changed the keyspace or (BF.ADD,
            // CF.ADD) forced it: each is answered here only when it counted a write. A lone
            // command, or with the RESERVE of a filter it created as one MULTI/EXEC unit, as the
            // exclusive path writes them; encoded before the mutex is taken.
            if engine.stream.is_active() {
                let scratch = &mut client.stream_scratch;
                let command: &[u8] = match view.rewritten() {
                    // SET with a relative expiry: `SET key value PXAT ms`.
                    Some(rewritten) => rewritten,
                    None => {
                        scratch.clear();
                        crate::engine::propagate::encode_command(scratch, argv);
                        scratch
                    }
                };
                match view.prelude() {
                    None => engine.stream.lock().emit_encoded(client.db, command),
                    // A filter it created: its BF.RESERVE first, the two as one unit.
                    Some(reserve) => engine
                        .stream
                        .lock()
                        .emit_encoded_unit(client.db, &[reserve, command]),
                }
                if scratch.capacity() > 1 << 16 {
                    *scratch = Vec::new();
                }
                client.fed_replicas |= engine.repl_sub.is_some();
            }
            writes.add(
                engine,
                client.db,
                view.writes(),
                view.inserted(),
                view.removed(),
            );
        }
        reply
    };
    // A rewritten command holds its value (SET ... PXAT): a large one's buffer is not kept.
    if client.rewrite_scratch.capacity() > 1 << 16 {
        client.rewrite_scratch = Vec::new();
    }
    client
        .handle
        .last_cmd
        .store(super::last_command_code(index, None), Ordering::Relaxed);
    count_call(shared, run, client, spec, argv);
    super::log_command(client, argv);
    Attempt::Answered(reply)
}

/// Counts an answered call into its run, and logs it in the slow log if it was slow. The slow
/// log needs each call's own time, where the statistics need only the run's: with it on
/// (Redis's default), the clock is read after every call.
#[inline]
fn count_call(
    shared: &Shared,
    run: &mut Option<StatRun>,
    client: &ClientState,
    spec: &super::CommandSpec,
    argv: &[Bytes],
) {
    let Some(r) = run else {
        return;
    };
    r.calls += 1;
    if shared.slowlog.enabled() {
        let now = mono_ns();
        let nanos = now.saturating_sub(r.call_began);
        r.call_began = now;
        if shared.slowlog.is_slow(nanos) && !spec.has(super::flags::SKIP_SLOWLOG) {
            super::log_slow(shared, client, argv, nanos);
        }
    }
}

/// Makes `run` the run of command `index`: a new run starts when the previous one ends (as
/// `execute`: a batch's command starts when the previous one ended); the clock is read only where
/// one run gives way to another.
#[inline]
fn join_run(run: &mut Option<StatRun>, engine: &Engine, client: &ClientState, index: usize) {
    match run {
        Some(r) if r.index == index => {}
        _ => {
            let since = match run.take() {
                Some(r) => r.end(engine),
                None => client.cmd_clock.unwrap_or_else(mono_ns),
            };
            *run = Some(StatRun {
                index,
                calls: 0,
                since,
                call_began: since,
            });
        }
    }
}

/// Ends the current run, if any, and returns when the next command starts: the run's end, or the
/// batch's command clock, or now. The command clock follows, as [`EngineLock::dispatch`] keeps
/// it for the exclusive path.
fn end_run(run: &mut Option<StatRun>, engine: &Engine, client: &mut ClientState) -> u64 {
    match run.take() {
        Some(r) => {
            let ended = r.end(engine);
            if client.cmd_clock.is_some() {
                client.cmd_clock = Some(ended);
            }
            ended
        }
        None => client.cmd_clock.unwrap_or_else(mono_ns),
    }
}

/// A request of a transaction (MULTI, a command MULTI queues, DISCARD, EXEC) on the shared path,
/// with its command table entry.
#[derive(Clone, Copy)]
struct TxRequest<'r> {
    argv: &'r [Bytes],
    now_ms: u64,
    index: usize,
    spec: &'static super::CommandSpec,
}

/// MULTI outside a transaction (`open`), or DISCARD inside one that WATCHes nothing, under the
/// shared lock: a change of the client's own state, counted and answered as the exclusive path's
/// `transactions::multi` and `discard` do it (module essay, "Transactions").
fn open_or_discard(
    shared: &Shared,
    engine: &Engine,
    run: &mut Option<StatRun>,
    client: &mut ClientState,
    request: TxRequest,
    open: bool,
) -> Attempt {
    let TxRequest {
        argv,
        now_ms,
        index,
        spec,
    } = request;
    if !spec.arity_ok(argv.len())
        || super::refuses(shared, &engine.repl, spec)
        || super::replication::refuses(shared, &engine.repl, client, spec, now_ms)
    {
        return Attempt::Rerun;
    }
    join_run(run, engine, client, index);
    count_call(shared, run, client, spec, argv);
    client.multi = open.then(super::transactions::new_queue);
    client.multi_error = false;
    if open {
        client.handle.publish_multi_opened();
    } else {
        client.handle.publish_multi_closed();
    }
    answered(client, index, argv, Reply::ok())
}

/// A request of a client in MULTI, under the shared lock: queued (any command the dispatcher
/// would queue without an error), or EXEC of a transaction of reads, or DISCARD. Anything else
/// (WATCH, MULTI, QUIT, RESET, a refusal that marks the transaction) is the exclusive path's.
fn in_transaction(
    shared: &Shared,
    engine: &Engine,
    run: &mut Option<StatRun>,
    client: &mut ClientState,
    request: TxRequest,
) -> Attempt {
    let TxRequest {
        argv, index, spec, ..
    } = request;
    if !spec.arity_ok(argv.len()) {
        return Attempt::Rerun;
    }
    match spec.name {
        "exec" => exec_reads(shared, engine, run, client, request),
        // With no WATCH, discarding the transaction is the client's own state.
        "discard" if client.watches.is_empty() => {
            open_or_discard(shared, engine, run, client, request, false)
        }
        name if super::transactions::runs_inside_multi(name) => Attempt::Rerun,
        // The dispatcher's checks before it queues: a container's subcommand, DEBUG's and
        // MODULE's protection (errors that mark the transaction, and count: the exclusive path's).
        _ if !spec.subcommands.is_empty() || spec.has(super::flags::PROTECTED) => Attempt::Rerun,
        _ => {
            // Not a call: the time it takes goes to the next command the transaction runs (EXEC),
            // as on the exclusive path, where only executed commands move the command clock.
            if run.is_some() {
                end_run(run, engine, client);
            }
            super::transactions::queue(client, index, argv);
            answered(client, index, argv, Reply::Status("QUEUED"))
        }
    }
}

/// The end of a request answered on the shared path: the client's last command, the debug log.
fn answered(client: &mut ClientState, index: usize, argv: &[Bytes], reply: Reply) -> Attempt {
    client
        .handle
        .last_cmd
        .store(super::last_command_code(index, None), Ordering::Relaxed);
    super::log_command(client, argv);
    Attempt::Answered(reply)
}

/// The queued commands of [`exec_reads`] kept inline: redis-py and node-redis pipelines are
/// mostly this short, and longer ones pay one allocation.
type QueuedReads = smallvec::SmallVec<[(usize, super::SharedHandler); 16]>;

/// EXEC of a transaction whose every command is a read with a shared handler, under the shared
/// lock: the stripes of all its keys held for reading at once, so that it sees every key before
/// or after any concurrent write, never a mix, as under the exclusive lock. Anything it cannot
/// answer exactly as the exclusive path would (a write, a WATCH, a refusal, an error, a read that
/// defers) reruns it there: reads changed nothing, and the queue is still the client's.
fn exec_reads(
    shared: &Shared,
    engine: &Engine,
    run: &mut Option<StatRun>,
    client: &mut ClientState,
    request: TxRequest,
) -> Attempt {
    let TxRequest {
        argv,
        now_ms,
        index,
        spec,
    } = request;
    if client.multi_error
        || !client.watches.is_empty()
        // A push for this client would go inside EXEC's array (none can arrive while the shared
        // lock is held: whatever pushes runs under the exclusive one).
        || client.handle.outbox.pending() != 0
        || super::refuses(shared, &engine.repl, spec)
        || super::replication::refuses(shared, &engine.repl, client, spec, now_ms)
    {
        return Attempt::Rerun;
    }
    let Some(db) = engine.store.dbs.get(client.db) else {
        return Attempt::Rerun;
    };
    // Ended first (a rerun ends it anyway), so that the queue can stay borrowed from here on.
    let since = end_run(run, engine, client);
    let Some(queue) = client.multi.as_ref() else {
        return Attempt::Rerun;
    };
    let parallel = shared.parallel_batches.load(Ordering::Relaxed);
    let mut reads = QueuedReads::new();
    // Every key of every command, for their stripes: gathered here, where each command's key
    // positions are read once anyway.
    let mut keys: smallvec::SmallVec<[&[u8]; 16]> = smallvec::SmallVec::new();
    for super::transactions::Queued {
        index: i,
        argv: queued,
    } in queue
    {
        let s = table().all()[*i];
        match s.shared_handler(parallel) {
            Some(handler)
                if !s.has(super::flags::WRITE)
                    && s.arity_ok(queued.len())
                    && !super::refuses(shared, &engine.repl, s)
                    && !super::replication::refuses(shared, &engine.repl, client, s, now_ms) =>
            {
                reads.push((*i, handler));
                keys.extend(s.key_iter(queued).map(|k| &k[..]));
            }
            _ => return Attempt::Rerun,
        }
    }
    let mut replies = Vec::with_capacity(queue.len());
    // Each command's own time for the slow log (EXEC itself is not logged, its commands are),
    // logged once the transaction is sure to be answered here.
    let clocked = shared.slowlog.enabled();
    let mut began = since;
    let mut slow: smallvec::SmallVec<[(usize, u64); 2]> = smallvec::SmallVec::new();
    let counts;
    {
        let mut view = db.shared_view(
            &engine.store.stripes,
            now_ms,
            client.prefetched.items(),
            engine.store.shared_inserts,
        );
        view.hold(keys.iter().copied(), false);
        for (position, (queued, &(_, handler))) in queue.iter().zip(&reads).enumerate() {
            // A read that panicked or failed changed nothing: the exclusive path answers it,
            // counting the failure.
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                handler(&mut view, &queued.argv)
            })) {
                Ok(Ok(reply)) if !view.deferred() && !reply.is_error() => replies.push(reply),
                _ => return Attempt::Rerun,
            }
            if clocked {
                let now = mono_ns();
                let nanos = now.saturating_sub(began);
                began = now;
                if shared.slowlog.is_slow(nanos) {
                    slow.push((position, nanos));
                }
            }
        }
        counts = view.keyspace_counts();
    }
    drop(keys);
    for (position, nanos) in slow {
        super::log_slow(shared, client, &queue[position].argv, nanos);
    }
    let (hits, misses) = counts;
    client.keyspace_hits += u64::from(hits);
    client.keyspace_misses += u64::from(misses);
    // One clock read for the whole transaction: EXEC's time is all of it, as on the exclusive
    // path, and each command's share of it an equal part (those run back to back, as a
    // run's calls do).
    let ended = mono_ns();
    let took = ended.saturating_sub(since);
    let each = took / reads.len().max(1) as u64;
    for &(i, _) in &reads {
        engine.shared_stats[i].add(1, each);
    }
    engine.shared_stats[index].add(1, took);
    if client.cmd_clock.is_some() {
        client.cmd_clock = Some(ended);
    }
    client.multi = None;
    client.multi_error = false;
    client.handle.publish_multi_closed();
    answered(client, index, argv, Reply::Array(replies))
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::sync::Arc;

    use super::*;
    use crate::config::Config;
    use crate::engine::ClientHandle;
    use crate::store::db::ItemHash;

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
    /// Each case is judged on its own: an earlier deferral's backoff is forgotten first.
    fn run(shared: &Shared, c: &mut ClientState, words: &[&str], now: u64) -> (Reply, bool) {
        c.shared_write_backoff = 0;
        let a = argv(words);
        let mut lock = EngineLock::for_batch(shared, &a, c);
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

    /// `name`'s INFO commandstats counts, the shared path's folded in.
    fn command_stat(shared: &Shared, name: &str) -> crate::engine::CommandStat {
        let mut e = shared.engine();
        let e = &mut *e;
        crate::engine::fold_shared_stats(&mut e.stats, &e.shared_stats);
        let (i, _) = table().get(name.as_bytes()).expect("known command");
        e.stats[i]
    }

    fn stat(shared: &Shared, name: &str) -> (u64, u64) {
        let s = command_stat(shared, name);
        (s.calls, s.failed)
    }

    /// A batch's prefetch hashes its BF.EXISTS / CF.* items once: the commands use the hashes
    /// it kept and answer exactly as without them (each request again as a batch of one, which
    /// prefetches nothing), on filters large enough to be prefetched.
    #[test]
    fn a_batch_prefetch_hashes_each_item_once_and_changes_no_answer() {
        let (shared, mut c, now) = setup();
        let mut adds = vec!["BF.MADD".to_string(), "bigbf".to_string()];
        adds.extend((0..400).step_by(2).map(|i| format!("item{i}")));
        let adds: Vec<&str> = adds.iter().map(String::as_str).collect();
        for w in [
            &["BF.RESERVE", "bigbf", "0.01", "2000000"][..],
            &adds,
            &["CF.RESERVE", "bigcf", "2000000"],
            &["CF.ADD", "bigcf", "item0"],
            &["CF.ADD", "bigcf", "item2"],
        ] {
            run(&shared, &mut c, w, now);
        }
        let mut batch: Vec<Vec<Bytes>> = Vec::new();
        for i in 0..6 {
            batch.push(argv(&["BF.EXISTS", "bigbf", &format!("item{i}")]));
            batch.push(argv(&["CF.EXISTS", "bigcf", &format!("item{i}")]));
        }
        batch.push(argv(&["CF.ADD", "bigcf", "item7"]));
        batch.push(argv(&["CF.EXISTS", "bigcf", "item7"]));
        batch.push(argv(&["CF.COUNT", "bigcf", "item7"]));
        batch.push(argv(&["BF.EXISTS", "missing", "item0"]));
        c.shared_write_backoff = 0;
        let mut lock = EngineLock::for_batch(&shared, &batch[0], &mut c);
        assert!(lock.is_shared());
        super::super::prefetch_keys(&shared, &lock, &mut c, batch.iter().map(Vec::as_slice));
        // BF.EXISTS and CF.* of the two large filters; not the missing key.
        assert_eq!(c.prefetched.items().len(), 15);
        for (p, argv) in c.prefetched.items().iter().zip(&batch) {
            assert!(p.is(&argv[2]));
            assert_eq!(p.hash, ItemHash::of(&argv[2], p.hash));
        }
        let replies: Vec<Reply> = batch
            .iter()
            .map(|a| {
                lock.dispatch(&shared, &mut c, a, now)
                    .expect("not shut down")
            })
            .collect();
        assert!(lock.is_shared(), "every request ran on the shared path");
        drop(lock);
        c.prefetched.clear();
        // The same requests again, one batch each (no prefetch), but for the CF.ADD.
        for (i, a) in batch.iter().enumerate() {
            if a[0] == "CF.ADD" {
                assert_eq!(replies[i], Reply::Bool(true));
                continue;
            }
            let words: Vec<&str> = a.iter().map(|w| std::str::from_utf8(w).unwrap()).collect();
            let lone = run(&shared, &mut c, &words, now).0;
            assert_eq!(replies[i], lone, "{:?}", a);
        }
        let yes = Reply::Bool(true);
        assert_eq!(replies[0], yes, "item0 was added");
        assert_eq!(replies[1], yes);
        assert_eq!(replies[13], yes, "item7 was added by this batch");
        assert_eq!(replies[14], Reply::Int(1));
    }

    /// A batch's commands are timed once per run of one command, and the runs' times add up to
    /// no more than the batch took: a run of shared GETs, then a SET of a new key (it defers in
    /// a small table and reruns on the exclusive path, timed from where the GETs ended), then
    /// more GETs under the exclusive lock.
    #[test]
    fn a_batch_is_timed_once_per_run_and_never_twice() {
        let (shared, mut c, now) = setup();
        let nanos = |name: &str| {
            let s = command_stat(&shared, name);
            (s.calls, s.nanos)
        };
        let (get_calls0, get_nanos0) = nanos("GET");
        let (set_calls0, set_nanos0) = nanos("SET");
        let get = argv(&["GET", "s"]);
        let set = argv(&["SET", "new-key", "v"]);
        c.shared_write_backoff = 0;
        let began = mono_ns();
        c.cmd_clock = Some(began);
        let mut lock = EngineLock::for_batch(&shared, &get, &mut c);
        for _ in 0..2000 {
            lock.dispatch(&shared, &mut c, &get, now)
                .expect("not shut down");
        }
        assert!(lock.is_shared());
        let reply = lock
            .dispatch(&shared, &mut c, &set, now)
            .expect("not shut down");
        assert_eq!(reply, Reply::ok());
        assert!(
            !lock.is_shared(),
            "a new key in a small table is the exclusive path's"
        );
        for _ in 0..500 {
            lock.dispatch(&shared, &mut c, &get, now)
                .expect("not shut down");
        }
        drop(lock);
        c.cmd_clock = None;
        let took = mono_ns() - began;
        let (get_calls, get_nanos) = nanos("GET");
        let (set_calls, set_nanos) = nanos("SET");
        assert_eq!(get_calls - get_calls0, 2500);
        assert_eq!(set_calls - set_calls0, 1);
        let counted = (get_nanos - get_nanos0) + (set_nanos - set_nanos0);
        assert!(get_nanos > get_nanos0, "the shared run was timed");
        assert!(
            counted <= took,
            "commands counted {counted} ns of a batch that took {took} ns"
        );
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
            &["TTL", "s"],
            &["PTTL", "missing"],
            &["EXPIRETIME", "bf"],
            &["PEXPIRETIME", "missing"],
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
        // A client inside MULTI queues (on the shared path: its own state), even a command
        // with no shared handler.
        run(&shared, &mut c, &["MULTI"], now);
        let (reply, stayed_shared) = run(&shared, &mut c, &["GET", "s"], now);
        assert!(stayed_shared);
        assert!(matches!(reply, Reply::Status("QUEUED")));
        let (reply, stayed_shared) =
            run(&shared, &mut c, &["BF.RESERVE", "new", "0.01", "100"], now);
        assert!(stayed_shared);
        assert!(matches!(reply, Reply::Status("QUEUED")));
        assert!(run(&shared, &mut c, &["DISCARD"], now).1);
        assert!(c.multi.is_none());
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
        let mut lock = EngineLock::for_batch(&shared, &batch[0], &mut c);
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

    /// Runs `words` as one batch (each request after the first in the lock the batch is in by
    /// then); the replies and whether the lock stayed shared to the end.
    fn run_batch(
        shared: &Shared,
        c: &mut ClientState,
        batch: &[&[&str]],
        now: u64,
    ) -> (Vec<Reply>, bool) {
        c.shared_write_backoff = 0;
        let batch: Vec<Vec<Bytes>> = batch.iter().map(|w| argv(w)).collect();
        let mut lock = EngineLock::for_batch(shared, &batch[0], c);
        let replies = batch
            .iter()
            .map(|a| lock.dispatch(shared, c, a, now).expect("not shut down"))
            .collect();
        (replies, lock.is_shared())
    }

    /// A transaction of reads: MULTI, its queue and EXEC all stay on the shared path (whether
    /// sent in one batch, as redis-py's pipelines send it, or one request at a time), and every
    /// reply, count and CLIENT LIST field is the exclusive path's.
    #[test]
    fn a_transaction_of_reads_runs_on_the_shared_path_and_answers_as_the_exclusive_path() {
        let (shared, mut c, now) = setup();
        let mut d = client(2);
        let queue: &[&[&str]] = &[
            &["GET", "s"],
            &["MGET", "s", "missing", "bf"],
            &["BF.EXISTS", "bf", "item"],
            &["BF.MEXISTS", "bf", "item", "other"],
            &["CF.EXISTS", "cf", "item"],
            &["PFCOUNT", "hll"],
            &["EXISTS", "s", "bf", "missing"],
            &["PING"],
            &["TTL", "s"],
        ];
        let mut batch: Vec<&[&str]> = vec![&["MULTI"]];
        batch.extend_from_slice(queue);
        batch.push(&["EXEC"]);
        let counted_before: Vec<(&str, u64)> = [
            "multi",
            "exec",
            "get",
            "mget",
            "bf.exists",
            "pfcount",
            "ping",
            "ttl",
        ]
        .into_iter()
        .map(|name| (name, stat(&shared, name).0))
        .collect();
        let (got, stayed_shared) = run_batch(&shared, &mut c, &batch, now);
        assert!(stayed_shared, "the transaction left the shared path");
        let want: Vec<Reply> = batch
            .iter()
            .map(|w| run_exclusive(&shared, &mut d, w, now))
            .collect();
        assert_eq!(format!("{got:?}"), format!("{want:?}"));
        assert!(matches!(got.last(), Some(Reply::Array(a)) if a.len() == queue.len()));
        // Counted once per path: MULTI, EXEC and each queued command as a call, nothing failed.
        for (name, before) in counted_before {
            assert_eq!(stat(&shared, name), (before + 2, 0), "{name}");
        }
        // Both clients are out of the transaction, as CLIENT LIST shows them.
        for x in [&c, &d] {
            assert!(x.multi.is_none());
            assert!(!x.handle.multi.load(Ordering::Relaxed));
            assert_eq!(
                super::super::last_command_name(x.handle.last_cmd.load(Ordering::Relaxed)),
                "exec"
            );
        }
        // One request at a time: each a batch of its own, each shared; inside, CLIENT LIST
        // counts the queue as the exclusive path does.
        for (i, w) in batch.iter().enumerate() {
            let (reply, stayed_shared) = run(&shared, &mut c, w, now);
            assert!(stayed_shared, "{w:?}");
            let want = run_exclusive(&shared, &mut d, w, now);
            assert_eq!(format!("{reply:?}"), format!("{want:?}"), "{w:?}");
            if i + 1 < batch.len() {
                assert!(c.handle.multi.load(Ordering::Relaxed));
                assert_eq!(
                    c.handle.multi_queued.load(Ordering::Relaxed),
                    d.handle.multi_queued.load(Ordering::Relaxed)
                );
                assert_eq!(
                    c.handle.multi_mem.load(Ordering::Relaxed),
                    d.handle.multi_mem.load(Ordering::Relaxed)
                );
            }
        }
        // An empty transaction.
        let (got, stayed_shared) = run_batch(&shared, &mut c, &[&["MULTI"], &["EXEC"]], now);
        assert!(stayed_shared);
        assert!(matches!(&got[1], Reply::Array(a) if a.is_empty()));
    }

    /// Whatever a transaction of reads on the shared path could not answer as the exclusive path
    /// does goes there whole, and answers there as it would have: a write in the queue, a WATCH,
    /// a queuing error, a read that fails, a read that meets a due key.
    #[test]
    fn a_transaction_the_shared_path_cannot_answer_runs_on_the_exclusive_path() {
        let (shared, mut c, now) = setup();
        let mut d = client(2);
        let both = |c: &mut ClientState, d: &mut ClientState, batch: &[&[&str]]| {
            let (got, stayed_shared) = run_batch(&shared, c, batch, now);
            let want: Vec<Reply> = batch
                .iter()
                .map(|w| run_exclusive(&shared, d, w, now))
                .collect();
            assert_eq!(format!("{got:?}"), format!("{want:?}"), "{batch:?}");
            assert!(c.multi.is_none() && d.multi.is_none());
            (got, stayed_shared)
        };
        // A write: the queue stays shared, EXEC does not; the write is made once per path.
        let (got, stayed_shared) = both(
            &mut c,
            &mut d,
            &[&["MULTI"], &["GET", "s"], &["SET", "t", "1"], &["EXEC"]],
        );
        assert!(!stayed_shared);
        assert!(matches!(&got[3], Reply::Array(a) if matches!(a[1], Reply::Status("OK"))));
        assert_eq!(
            format!("{:?}", run(&shared, &mut c, &["GET", "t"], now).0),
            format!("{:?}", Reply::Bulk(Bytes::from_static(b"1")))
        );
        // A read that fails (WRONGTYPE) is an error inside EXEC's array, counted once per path.
        let (got, stayed_shared) = both(
            &mut c,
            &mut d,
            &[&["MULTI"], &["GET", "bf"], &["GET", "s"], &["EXEC"]],
        );
        assert!(!stayed_shared);
        assert!(matches!(&got[3], Reply::Array(a) if a[0].is_error()));
        assert_eq!(stat(&shared, "get").1, 2);
        // A queuing error: EXECABORT, from the exclusive path.
        let (got, _) = both(
            &mut c,
            &mut d,
            &[&["MULTI"], &["GET"], &["GET", "s"], &["EXEC"]],
        );
        assert!(got[3].is_error());
        // WATCH: the exclusive path checks the versions.
        let (got, stayed_shared) = both(
            &mut c,
            &mut d,
            &[&["WATCH", "s"], &["MULTI"], &["GET", "s"], &["EXEC"]],
        );
        assert!(!stayed_shared);
        assert!(matches!(&got[3], Reply::Array(a) if a.len() == 1));
        // A DISCARD after WATCH unwatches: the exclusive path's.
        run(&shared, &mut c, &["WATCH", "s"], now);
        run(&shared, &mut c, &["MULTI"], now);
        assert!(!run(&shared, &mut c, &["DISCARD"], now).1);
        assert!(c.watches.is_empty());
        // A due key: reclaimed by the exclusive path's rerun of the whole transaction.
        run(&shared, &mut c, &["SET", "gone", "x"], now);
        shared
            .engine()
            .store
            .db(0, now)
            .set_expire(b"gone", now - 1);
        let (got, stayed_shared) = run_batch(
            &shared,
            &mut c,
            &[&["MULTI"], &["GET", "s"], &["GET", "gone"], &["EXEC"]],
            now,
        );
        assert!(!stayed_shared);
        assert!(matches!(&got[3], Reply::Array(a) if matches!(a[1], Reply::Null)));
        assert!(shared
            .engine()
            .store
            .db(0, now)
            .peek_value(b"gone")
            .is_none());
    }

    /// A transaction of reads holds the stripes of all its keys at once: on many threads, with
    /// writers moving a sum between two keys under the shared lock, every EXEC sees the sum
    /// whole (a reader taking the keys one by one would see it mid-move).
    #[test]
    fn a_transaction_of_reads_never_sees_a_concurrent_write_half_done() {
        let (shared, mut c, now) = setup();
        shared.parallel_batches.store(true, Ordering::Relaxed);
        run(&shared, &mut c, &["SET", "a", "1000"], now);
        run(&shared, &mut c, &["SET", "b", "0"], now);
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            let writer = scope.spawn(|| {
                let mut w = client(3);
                let mut moved = 0;
                while !stop.load(Ordering::Relaxed) && moved < 20_000 {
                    // MSET writes both pairs under both stripes, or defers.
                    let a = 1000 - moved % 1000;
                    let b = moved % 1000;
                    run(
                        &shared,
                        &mut w,
                        &["MSET", "a", &a.to_string(), "b", &b.to_string()],
                        now,
                    );
                    moved += 1;
                }
            });
            let mut r = client(4);
            let mut shared_execs = 0;
            for _ in 0..5_000 {
                let (got, stayed_shared) = run_batch(
                    &shared,
                    &mut r,
                    &[&["MULTI"], &["GET", "a"], &["GET", "b"], &["EXEC"]],
                    now,
                );
                shared_execs += stayed_shared as u32;
                let Reply::Array(a) = &got[3] else {
                    panic!("EXEC answered {:?}", got[3]);
                };
                let value = |r: &Reply| match r {
                    Reply::Bulk(b) => std::str::from_utf8(b).unwrap().parse::<i64>().unwrap(),
                    other => panic!("GET answered {other:?}"),
                };
                assert_eq!(value(&a[0]) + value(&a[1]), 1000, "a torn read: {a:?}");
            }
            stop.store(true, Ordering::Relaxed);
            writer.join().expect("writer");
            assert!(shared_execs > 0, "no EXEC stayed shared");
        });
    }

    #[test]
    fn a_shutdown_between_the_locks_runs_nothing_more() {
        let (shared, mut c, now) = setup();
        let a = argv(&["GET", "s"]);
        let mut lock = EngineLock::for_batch(&shared, &a, &mut c);
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

    /// `setup()` plus the values the shared writes find: an integer, a dense HLL, a string with a
    /// TTL and a sparse HLL.
    fn setup_writes() -> (Arc<Shared>, ClientState, u64) {
        let (shared, mut c, now) = setup();
        for w in [
            &["SET", "n", "10"][..],
            &["SET", "big", "9223372036854775807"],
            &["SET", "ttl", "v", "EX", "1000"],
            &["PFADD", "dense", "a", "b"],
            &["PFDEBUG", "TODENSE", "dense"],
            // Filters with room for two items: BF.MADD of more may open a link, or fail.
            &["BF.RESERVE", "bf-small", "0.01", "2"],
            &["BF.RESERVE", "bf-fixed", "0.01", "2", "NONSCALING"],
            &["PFADD", "sparse", "a"],
        ] {
            run(&shared, &mut c, w, now);
        }
        (shared, c, now)
    }

    /// Runs `words` on the exclusive path alone.
    fn run_exclusive(shared: &Shared, c: &mut ClientState, words: &[&str], now: u64) -> Reply {
        let mut e = shared.engine();
        super::super::dispatch(shared, &mut e, c, &argv(words), now)
    }

    /// What a key holds, as the exclusive path reports it: its serialized value, its encoding
    /// and its TTL.
    fn state(shared: &Shared, c: &mut ClientState, key: &str, now: u64) -> String {
        let dump = run_exclusive(shared, c, &["DUMP", key], now);
        let enc = run_exclusive(shared, c, &["OBJECT", "ENCODING", key], now);
        let ttl = run_exclusive(shared, c, &["PTTL", key], now);
        format!("{dump:?} {enc:?} {ttl:?}")
    }

    /// Runs each case on the shared path of the first engine (it must stay there) and on the
    /// exclusive path of the second: the same reply, the same state of its key (`DUMP`,
    /// encoding, TTL), the same key count.
    fn same_on_both_paths<'w>(
        (on_shared, c1, on_exclusive, c2): (&Shared, &mut ClientState, &Shared, &mut ClientState),
        cases: impl Iterator<Item = &'w (&'w [&'w str], &'w str)>,
        now: u64,
    ) {
        for (words, key) in cases {
            let (got, stayed_shared) = run(on_shared, c1, words, now);
            assert!(stayed_shared, "{words:?} left the shared path");
            let want = run_exclusive(on_exclusive, c2, words, now);
            assert_eq!(format!("{got:?}"), format!("{want:?}"), "{words:?}");
            assert_eq!(
                state(on_shared, c1, key, now),
                state(on_exclusive, c2, key, now),
                "{words:?}"
            );
            let size = |s: &Shared, c: &mut ClientState| run_exclusive(s, c, &["DBSIZE"], now);
            assert_eq!(
                format!("{:?}", size(on_shared, c1)),
                format!("{:?}", size(on_exclusive, c2)),
                "key count after {words:?}"
            );
        }
    }

    #[test]
    fn writes_in_place_stay_shared_and_leave_what_the_exclusive_path_leaves() {
        let (on_shared, mut c1, now) = setup_writes();
        let (on_exclusive, mut c2, _) = setup_writes();
        let cases: &[(&[&str], &str)] = &[
            (&["SET", "s", "other"], "s"),
            // A filter overwritten by a string, in place.
            (&["SET", "bf", "now a string"], "bf"),
            (&["SET", "n", "11"], "n"),
            (&["INCR", "n"], "n"),
            (&["DECR", "n"], "n"),
            (&["INCRBY", "n", "-40"], "n"),
            (&["DECRBY", "n", "5"], "n"),
            (&["PFADD", "dense", "c", "d"], "dense"),
            (&["PFADD", "dense", "c"], "dense"),
            // A sparse HLL, growing in place (it turns dense past hll-sparse-max-bytes).
            (&["PFADD", "sparse", "b", "c"], "sparse"),
            (&["PFADD", "sparse", "b"], "sparse"),
            (&["INCR", "ttl-kept"], "ttl-kept"),
            // Options that change no TTL: refused (no write), the old value (propagated without
            // GET), the TTL kept.
            (&["SET", "s", "v2", "NX"], "s"),
            (&["SET", "s", "v3", "GET"], "s"),
            (&["SET", "s", "v4", "XX", "GET", "get"], "s"),
            (&["SET", "ttl-kept", "7", "KEEPTTL"], "ttl-kept"),
            // TTL commands that change nothing; reads of a TTL.
            (&["PERSIST", "s"], "s"),
            (&["EXPIRE", "s", "10", "XX"], "s"),
            (&["PEXPIRE", "ttl-kept", "10", "NX"], "ttl-kept"),
            (&["PTTL", "ttl-kept"], "ttl-kept"),
            (&["EXPIRETIME", "ttl-kept"], "ttl-kept"),
            // GETEX that changes no TTL; GETDEL of a missing key.
            (&["GETEX", "s"], "s"),
            (&["GETEX", "s", "PERSIST"], "s"),
            (&["GETDEL", "missing"], "missing"),
        ];
        run(
            &on_shared,
            &mut c1,
            &["SET", "ttl-kept", "1", "EX", "1000"],
            now,
        );
        run_exclusive(
            &on_exclusive,
            &mut c2,
            &["SET", "ttl-kept", "1", "EX", "1000"],
            now,
        );
        run(&on_shared, &mut c1, &["BF.ADD", "bf2", "x"], now);
        run_exclusive(&on_exclusive, &mut c2, &["BF.ADD", "bf2", "x"], now);
        run(&on_shared, &mut c1, &["CF.ADD", "cf2", "x"], now);
        run_exclusive(&on_exclusive, &mut c2, &["CF.ADD", "cf2", "x"], now);
        let filter_cases: &[(&[&str], &str)] = &[
            (&["BF.ADD", "bf2", "y"], "bf2"),
            (&["BF.ADD", "bf2", "x"], "bf2"),
            (&["BF.MADD", "bf2", "x", "z", "w", "z"], "bf2"),
            (&["BF.MADD", "bf-small", "a", "b"], "bf-small"),
            (&["BF.MADD", "bf-fixed", "a"], "bf-fixed"),
            (&["CF.ADD", "cf2", "y"], "cf2"),
            (&["CF.ADD", "cf2", "x"], "cf2"),
        ];
        // A consumer of the write stream on each (as the AOF): what the shared writes put there
        // must be byte for byte what the exclusive path writes.
        let sub1 = on_shared.engine().subscribe_stream(0, None);
        let sub2 = on_exclusive.engine().subscribe_stream(0, None);
        let dirty = |s: &Shared| s.engine().store.dirty();
        let before = (dirty(&on_shared), dirty(&on_exclusive));
        let both = (&*on_shared, &mut c1, &*on_exclusive, &mut c2);
        same_on_both_paths(both, cases.iter().chain(filter_cases), now);
        // Every case but the two PFADDs that changed no register, the refused SET NX, the five
        // TTL commands and the three GETEX/GETDEL is a write.
        let n = (cases.len() + filter_cases.len()) as u64 - 11;
        assert_eq!(dirty(&on_exclusive) - before.1, n);
        assert_eq!(
            dirty(&on_shared) - before.0,
            n,
            "every write counted in dirty"
        );
        assert_eq!(
            stat(&on_shared, "incr"),
            (2, 0),
            "counted on the shared path"
        );
        assert_eq!(
            stat(&on_shared, "bf.add"),
            (4, 0),
            "setup's two and the cases' two"
        );
        // Another database: the stream selects it before the write, and back.
        for words in [
            &["SELECT", "1"][..],
            &["SET", "s1", "a"],
            &["SET", "s1", "b"],
            &["SELECT", "0"],
            &["INCR", "n"],
        ] {
            run(&on_shared, &mut c1, words, now);
            run_exclusive(&on_exclusive, &mut c2, words, now);
        }
        let drained = |s: &Shared, sub| {
            let mut out = Vec::new();
            s.engine().stream.get_mut().drain(sub, &mut out);
            String::from_utf8_lossy(&out).replace("\r\n", " ")
        };
        let (got, want) = (drained(&on_shared, sub1), drained(&on_exclusive, sub2));
        assert_eq!(got, want);
        assert!(
            got.starts_with("*2 $6 SELECT $1 0 *3 $3 SET $1 s $5 other "),
            "{got}"
        );
        assert!(
            got.contains(
                "*4 $5 PFADD $5 dense $1 c $1 d *4 $5 PFADD $6 sparse $1 b $1 c \
                 *2 $4 INCR $8 ttl-kept "
            ),
            "no-op PFADDs left out: {got}"
        );
        assert!(
            got.contains("*3 $3 SET $1 s $2 v3 *4 $3 SET $1 s $2 v4 $2 XX "),
            "GET left out: {got}"
        );
        assert!(got.ends_with("*2 $6 SELECT $1 0 *2 $4 INCR $1 n "), "{got}");
    }

    #[test]
    fn writes_that_cannot_be_made_in_place_run_on_the_exclusive_path() {
        let cases: &[&[&str]] = &[
            // New keys, and a deletion (removals are off with inserts, `Store::shared_inserts`).
            &["SET", "new", "v"],
            &["DEL", "s"],
            &["INCR", "new"],
            &["BF.ADD", "new", "x"],
            &["CF.ADD", "new", "x"],
            &["PFADD", "new", "x"],
            // A TTL to set or clear (TTL changes are off with inserts), an option's error.
            &["SET", "s", "v", "EX", "100"],
            &["SETEX", "s", "100", "v"],
            &["SET", "ttl", "v"],
            &["EXPIRE", "s", "100"],
            &["PERSIST", "ttl"],
            &["GETEX", "ttl", "PERSIST"],
            &["GETEX", "s", "EX", "100"],
            &["GETDEL", "s"],
            &["GETDEL", "bf"],
            &["SET", "s", "v", "EX", "0"],
            &["SET", "s", "v", "NX", "XX"],
            &["SET", "bf", "v", "GET"],
            // Errors, answered and counted by the exclusive path.
            &["INCR", "s"],
            &["INCR", "big"],
            &["INCRBY", "n", "x"],
            &["DECRBY", "n", "-9223372036854775808"],
            &["INCR", "bf"],
            &["BF.ADD", "s", "x"],
            &["CF.ADD", "bf", "x"],
            &["PFADD", "s", "x"],
            // BF.MADD: a new key, another type, and more items than the newest link has room
            // for (which may open a link, or fail part way: a non-scaling filter that fills).
            &["BF.MADD", "new", "x", "y"],
            &["BF.MADD", "s", "x"],
            &["BF.MADD", "bf-small", "a", "b", "c"],
            &["BF.MADD", "bf-fixed", "a", "b", "c", "d"],
        ];
        for words in cases {
            let (on_shared, mut c1, now) = setup_writes();
            let (on_exclusive, mut c2, _) = setup_writes();
            let (got, stayed_shared) = run(&on_shared, &mut c1, words, now);
            assert!(!stayed_shared, "{words:?} stayed shared");
            let want = run_exclusive(&on_exclusive, &mut c2, words, now);
            assert_eq!(format!("{got:?}"), format!("{want:?}"), "{words:?}");
            let key = words[1];
            assert_eq!(
                state(&on_shared, &mut c1, key, now),
                state(&on_exclusive, &mut c2, key, now),
                "{words:?}"
            );
            let e1 = on_shared.engine();
            let e2 = on_exclusive.engine();
            assert_eq!(e1.error_stats, e2.error_stats, "{words:?}");
            assert_eq!(e1.store.dirty(), e2.store.dirty(), "{words:?}");
        }
    }

    #[test]
    fn engine_state_that_writes_must_see_closes_the_shared_path_to_them() {
        let (shared, mut c, now) = setup_writes();
        let write = ["SET", "s", "v2"];
        assert!(run(&shared, &mut c, &write, now).1);
        // A WATCHed key anywhere in the database: the write must bump its version.
        let mut watcher = client(7);
        run(&shared, &mut watcher, &["WATCH", "n"], now);
        assert!(!run(&shared, &mut c, &write, now).1);
        run(&shared, &mut watcher, &["MULTI"], now);
        run(&shared, &mut watcher, &["GET", "n"], now);
        run(&shared, &mut c, &["INCR", "n"], now);
        let (reply, _) = run(&shared, &mut watcher, &["EXEC"], now);
        assert!(matches!(reply, Reply::NullArray | Reply::Null), "{reply:?}");
        assert!(run(&shared, &mut c, &write, now).1, "EXEC unwatched");
        // Keyspace events.
        shared
            .engine()
            .store
            .set_notify_flags(events::KEYSPACE | events::STRING);
        assert!(!run(&shared, &mut c, &write, now).1);
        shared.engine().store.set_notify_flags(0);
        // maxmemory: under it, writes stay shared (no policy has anything to
        // do there); over it, a deny-oom write goes back to the exclusive path, which refuses
        // it with Redis's OOM error, and a write that is not deny-oom stays.
        shared.maxmemory.store(1 << 40, Ordering::Relaxed);
        assert!(run(&shared, &mut c, &write, now).1);
        assert!(run(&shared, &mut c, &["INCR", "n"], now).1);
        // Over: a reserved filter counts in `used_memory` (the unit tests have no counting
        // allocator; other tests' reservations only add to it).
        assert!(matches!(
            run(
                &shared,
                &mut c,
                &["BF.RESERVE", "reserved", "0.01", "100000"],
                now
            )
            .0,
            Reply::Status("OK")
        ));
        shared.maxmemory.store(1, Ordering::Relaxed);
        let before = run_exclusive(&shared, &mut c, &["GET", "s"], now);
        let (reply, stayed_shared) = run(&shared, &mut c, &write, now);
        assert!(!stayed_shared);
        assert_eq!(
            format!("{reply:?}"),
            format!(
                "{:?}",
                Reply::Error(crate::error::CmdError::Static(crate::error::OOM))
            )
        );
        assert_eq!(
            format!("{:?}", run_exclusive(&shared, &mut c, &["GET", "s"], now)),
            format!("{before:?}")
        );
        // PERSIST is a write that is not deny-oom: Redis runs it over the limit.
        let (reply, stayed_shared) = run(&shared, &mut c, &["PERSIST", "s"], now);
        assert!(stayed_shared, "{reply:?}");
        shared.maxmemory.store(0, Ordering::Relaxed);
        // A consumer of the write stream (the AOF) leaves the path open: the write enters the
        // stream under its stripe.
        let sub = shared.engine().subscribe_stream(0, None);
        assert!(run(&shared, &mut c, &write, now).1);
        shared.engine().unsubscribe_stream(sub);
        // A replication backlog: the write enters the stream under its stripe, and the next
        // holder of the exclusive lock finds it in the backlog, with the offset moved past it.
        shared.engine().repl.ensure_backlog(1 << 20);
        let offset = shared.engine().repl.offset;
        assert!(
            shared.engine().repl_sub.is_some(),
            "the first pump subscribes"
        );
        c.fed_replicas = false;
        assert!(run(&shared, &mut c, &write, now).1);
        assert!(
            c.fed_replicas,
            "the connection is asked to wake the replicas"
        );
        let engine = shared.engine();
        let backlog = engine.repl.backlog.as_ref().expect("backlog");
        let fed = backlog.read_from(offset + 1, usize::MAX).expect("held");
        // The stream's first command selects the database.
        let want = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\ns\r\n$2\r\nv2\r\n";
        assert_eq!(fed, want, "{:?}", String::from_utf8_lossy(&fed));
        assert_eq!(engine.repl.offset, offset + want.len() as u64);
        drop(engine);
        shared.engine().repl.backlog = None;
        shared.engine().ensure_repl_stream();
        assert!(run(&shared, &mut c, &write, now).1);
        // A snapshot holding the key's segment: a write in place would change what it saves.
        let snap = shared.engine().store.snapshot();
        let (_, stayed_shared) = run(&shared, &mut c, &["SET", "s", "after"], now);
        assert!(!stayed_shared, "a segment a snapshot holds is copied first");
        let saved: Vec<String> = snap
            .iter()
            .flat_map(|(_, d)| d.entries())
            .filter(|(k, _, _)| *k == b"s")
            .map(|(_, v, _)| format!("{v:?}"))
            .collect();
        assert_eq!(saved.len(), 1);
        assert!(
            saved[0].contains("v2") || saved[0].contains("[118, 50]"),
            "{saved:?}"
        );
        drop(snap);
        assert!(run(&shared, &mut c, &["SET", "s", "again"], now).1);
    }

    /// The commands of a drained write stream (RESP arrays of bulk strings without CRLF inside).
    fn parse_stream(bytes: &[u8]) -> Vec<Vec<String>> {
        let text = String::from_utf8_lossy(bytes);
        let mut parts = text.split("\r\n");
        let mut out = Vec::new();
        while let Some(head) = parts.next().filter(|h| !h.is_empty()) {
            let n: usize = head[1..].parse().expect("array header");
            let argv = (0..n)
                .map(|_| {
                    parts.next().expect("bulk header");
                    parts.next().expect("bulk").to_string()
                })
                .collect();
            out.push(argv);
        }
        out
    }

    #[test]
    fn writes_from_many_threads_enter_the_stream_in_an_order_that_replays_to_the_same_keyspace() {
        let (shared, mut c, now) = setup_writes();
        for t in 0..4 {
            run(&shared, &mut c, &["SET", &format!("own{t}"), "0"], now);
        }
        run(&shared, &mut c, &["BF.ADD", "bf", "seed"], now);
        let sub = shared.engine().subscribe_stream(0, None);
        // The replay starts from the same keyspace.
        let (replayed, mut r, _) = setup_writes();
        for t in 0..4 {
            run_exclusive(&replayed, &mut r, &["SET", &format!("own{t}"), "0"], now);
        }
        run_exclusive(&replayed, &mut r, &["BF.ADD", "bf", "seed"], now);
        const PER_THREAD: usize = 5_000;
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let shared = shared.clone();
                std::thread::spawn(move || {
                    let mut c = client(100 + t);
                    let own = format!("own{t}");
                    let reqs: Vec<Vec<Bytes>> = (0..PER_THREAD)
                        .flat_map(|i| {
                            let item = format!("{t}:{i}");
                            [
                                argv(&["INCR", "n"]),
                                // One key all threads overwrite: its last value is whichever
                                // write came last, which the stream must agree with.
                                argv(&["SET", "s", &item]),
                                argv(&["SET", &own, &item]),
                                argv(&["BF.ADD", "bf", &item]),
                                argv(&["PFADD", "dense", &item]),
                            ]
                        })
                        .collect();
                    let mut shared_batches = 0;
                    for batch in reqs.chunks(16) {
                        let mut lock = EngineLock::for_batch(&shared, &batch[0], &mut c);
                        for a in batch {
                            let reply = lock.dispatch(&shared, &mut c, a, now).expect("running");
                            assert!(!reply.is_error(), "{reply:?}");
                        }
                        shared_batches += matches!(lock, EngineLock::Shared { .. }) as usize;
                    }
                    shared_batches
                })
            })
            .collect();
        let shared_batches: usize = threads.into_iter().map(|t| t.join().expect("thread")).sum();
        assert!(shared_batches > 0, "the writes ran on the shared path");
        let mut bytes = Vec::new();
        shared.engine().stream.get_mut().drain(sub, &mut bytes);
        let commands = parse_stream(&bytes);
        // SELECT 0 first, then every write but the PFADDs that changed no register.
        assert_eq!(commands[0], ["SELECT", "0"]);
        let count = |name: &str| commands.iter().filter(|c| c[0] == name).count();
        assert_eq!(count("INCR"), 4 * PER_THREAD);
        assert_eq!(count("SET"), 8 * PER_THREAD);
        assert_eq!(count("BF.ADD"), 4 * PER_THREAD);
        for command in &commands[1..] {
            let words: Vec<&str> = command.iter().map(String::as_str).collect();
            let reply = run_exclusive(&replayed, &mut r, &words, now);
            assert!(!reply.is_error(), "{words:?}: {reply:?}");
        }
        let keys = ["n", "s", "own0", "own1", "own2", "own3", "bf", "dense"];
        for key in keys {
            let live = run_exclusive(&shared, &mut c, &["DUMP", key], now);
            let again = run_exclusive(&replayed, &mut r, &["DUMP", key], now);
            assert_eq!(format!("{live:?}"), format!("{again:?}"), "{key}");
        }
    }

    #[test]
    fn writers_on_many_threads_lose_nothing() {
        let (shared, _, now) = setup_writes();
        const PER_THREAD: usize = 20_000;
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let shared = shared.clone();
                std::thread::spawn(move || {
                    let mut c = client(100 + t);
                    let reqs: Vec<Vec<Bytes>> = (0..PER_THREAD)
                        .flat_map(|i| {
                            [
                                argv(&["INCR", "n"]),
                                argv(&["BF.ADD", "bf", &format!("{t}:{i}")]),
                                argv(&["PFADD", "dense", &format!("{t}:{i}")]),
                                argv(&["GET", "n"]),
                            ]
                        })
                        .collect();
                    let mut shared_batches = 0;
                    for batch in reqs.chunks(16) {
                        let mut lock = EngineLock::for_batch(&shared, &batch[0], &mut c);
                        for a in batch {
                            let reply = lock.dispatch(&shared, &mut c, a, now).expect("running");
                            assert!(!reply.is_error(), "{reply:?}");
                        }
                        shared_batches += matches!(lock, EngineLock::Shared { .. }) as usize;
                    }
                    shared_batches
                })
            })
            .collect();
        let shared_batches: usize = threads.into_iter().map(|t| t.join().expect("thread")).sum();
        assert!(shared_batches > 0, "the writes ran on the shared path");
        let mut c = client(1);
        let got = run_exclusive(&shared, &mut c, &["GET", "n"], now);
        let want = Reply::Bulk(Bytes::from((10 + 4 * PER_THREAD).to_string()));
        assert_eq!(format!("{got:?}"), format!("{want:?}"));
        for t in 0..4 {
            for i in (0..PER_THREAD).step_by(97) {
                let got = run_exclusive(
                    &shared,
                    &mut c,
                    &["BF.EXISTS", "bf", &format!("{t}:{i}")],
                    now,
                );
                assert!(matches!(got, Reply::Bool(true)), "{t}:{i} lost");
            }
        }
        let Reply::Int(card) = run_exclusive(&shared, &mut c, &["PFCOUNT", "dense"], now) else {
            panic!("PFCOUNT answers an integer");
        };
        let n = 4 * PER_THREAD as i64;
        assert!((card - n).abs() < n / 20, "cardinality {card} of {n}");
        // Every write counted once: three a request (a PFADD that changed no register is not
        // a write, so at least two).
        let dirty = shared.engine().store.dirty();
        assert!(dirty >= 2 * n as u64, "dirty {dirty}");
    }

    /// `setup_writes()` with inserts under the shared lock on, as on a multi-thread runtime, and
    /// enough keys (40k) for a segment's keys to share a stripe, where they may be added there.
    fn setup_inserts() -> (Arc<Shared>, ClientState, u64) {
        let (shared, c, now) = setup_writes();
        // Batches as on a multi-thread runtime: MSET's shared handler applies.
        shared.parallel_batches.store(true, Ordering::Relaxed);
        let mut e = shared.engine();
        e.store.shared_inserts = true;
        let db = &mut e.store.dbs[0];
        for i in 0..40_000 {
            db.insert(format!("fill:{i}"), crate::store::Value::str(b"x"));
        }
        drop(e);
        (shared, c, now)
    }

    #[test]
    fn new_keys_are_added_on_the_shared_path_and_leave_what_the_exclusive_path_leaves() {
        let (on_shared, mut c1, now) = setup_inserts();
        let (on_exclusive, mut c2, _) = setup_inserts();
        let exat = (now / 1000 + 1000).to_string();
        let pxat = (now + 200_000).to_string();
        // A PFADD that takes a sparse HLL past `hll-sparse-max-bytes` (3000): dense.
        let many: Vec<String> = (0..3000).map(|i| format!("e{i}")).collect();
        let big: Vec<&str> = ["PFADD", "new-hll"]
            .into_iter()
            .chain(many.iter().map(String::as_str))
            .collect();
        let cases: &[(&[&str], &str)] = &[
            (&["SET", "new-s", "value"], "new-s"),
            (&["SET", "new-int", "12345"], "new-int"),
            (&["SET", "new-long", &"x".repeat(2000)], "new-long"),
            (&["INCR", "new-a"], "new-a"),
            (&["DECR", "new-b"], "new-b"),
            (&["INCRBY", "new-c", "-9223372036854775808"], "new-c"),
            (&["DECRBY", "new-d", "7"], "new-d"),
            // The key added above, now written in place.
            (&["INCR", "new-a"], "new-a"),
            (&["SET", "new-s", "again"], "new-s"),
            // Filters created with the bf-* defaults, their BF.RESERVE propagated first.
            (&["BF.ADD", "new-bf", "x"], "new-bf"),
            (&["BF.ADD", "new-bf", "x"], "new-bf"),
            (&["BF.MADD", "new-bf2", "x", "y", "x"], "new-bf2"),
            (&["CF.ADD", "new-cf", "x"], "new-cf"),
            (&["CF.ADD", "new-cf", "x"], "new-cf"),
            // Deletions: one key, several (a repeated one counted once), a filter.
            (&["DEL", "new-int"], "new-int"),
            (&["UNLINK", "new-b", "new-c", "new-b"], "new-c"),
            (&["DEL", "new-cf"], "new-cf"),
            // TTLs: set on a new key (relative ones propagated as PXAT), replaced, kept,
            // cleared by a SET without one; NX/XX refusals; SETEX and PSETEX.
            (&["SET", "new-ex", "v", "EX", "100"], "new-ex"),
            (&["SET", "new-px", "v", "PX", "100000", "GET"], "new-px"),
            (&["SET", "new-exat", "v", "EXAT", &exat], "new-exat"),
            (&["SET", "new-pxat", "v", "PXAT", &pxat, "NX"], "new-pxat"),
            (&["SET", "new-ex", "v2", "PX", "5000", "XX"], "new-ex"),
            (&["SET", "new-px", "v2", "KEEPTTL", "GET"], "new-px"),
            (&["SET", "new-exat", "v2"], "new-exat"),
            (&["SET", "new-pxat", "v2", "NX", "EX", "9"], "new-pxat"),
            (&["SET", "new-nx", "v", "NX", "EX", "100"], "new-nx"),
            (&["SET", "never", "v", "XX", "EX", "100"], "never"),
            (&["SETEX", "new-sx", "100", "v"], "new-sx"),
            (&["PSETEX", "new-psx", "100000", "v"], "new-psx"),
            (&["SETEX", "new-sx", "300", "w"], "new-sx"),
            // Deleting keys with a TTL, one beside one without.
            (&["DEL", "new-psx"], "new-psx"),
            (&["UNLINK", "new-sx", "new-exat"], "new-sx"),
            // The EXPIRE family (propagated as PEXPIREAT, flags kept), PERSIST, and reads.
            (&["EXPIRE", "new-long", "100"], "new-long"),
            (&["PEXPIRE", "new-long", "200000", "GT"], "new-long"),
            (&["EXPIRE", "new-long", "50", "gt"], "new-long"),
            (&["EXPIREAT", "new-d", &exat, "NX"], "new-d"),
            (&["PEXPIREAT", "new-d", &pxat, "XX", "LT"], "new-d"),
            (&["TTL", "new-d"], "new-d"),
            (&["PEXPIRETIME", "new-d"], "new-d"),
            (&["PERSIST", "new-d"], "new-d"),
            (&["PERSIST", "new-d"], "new-d"),
            (&["EXPIRE", "never", "100"], "never"),
            // GETEX (as PEXPIREAT, PERSIST), GETDEL (as DEL) of a key with a TTL.
            (&["GETEX", "new-d", "PX", "100000"], "new-d"),
            (&["GETEX", "new-d", "PERSIST"], "new-d"),
            (&["GETEX", "new-d", "PERSIST"], "new-d"),
            (&["GETEX", "new-d", "EXAT", &exat], "new-d"),
            (&["GETDEL", "new-d"], "new-d"),
            (&["GETDEL", "never"], "never"),
            // MSET: new keys, a live one, a repeated key (its last value stays), a key with a
            // TTL (cleared). MSETNX: refused by one live key (nothing written), then new keys.
            (&["SET", "m-ttl", "v", "EX", "100"], "m-ttl"),
            (
                &["MSET", "m1", "a", "new-s", "b", "m2", "c", "m1", "d"],
                "m1",
            ),
            (&["MSET", "m2", "e", "m-ttl", "f"], "m-ttl"),
            (&["MSETNX", "m3", "x", "m1", "y"], "m3"),
            (&["MSETNX", "m3", "x", "m4", "y", "m3", "z"], "m3"),
            (&["GET", "m2"], "m2"),
            // PFADD: a new key (a sparse HLL, raw), elements into it (sparse, growing in place),
            // none new, an empty one created, then past hll-sparse-max-bytes (dense), and into
            // the dense one.
            (&["PFADD", "new-hll", "a", "b"], "new-hll"),
            (&["PFADD", "new-hll", "c", "d", "e", "f", "g"], "new-hll"),
            (&["PFADD", "new-hll", "a"], "new-hll"),
            (&["PFADD", "new-hll2"], "new-hll2"),
            (&big[..], "new-hll"),
            (&["PFADD", "new-hll", "after", "dense"], "new-hll"),
        ];
        let sub1 = on_shared.engine().subscribe_stream(0, None);
        let sub2 = on_exclusive.engine().subscribe_stream(0, None);
        let dirty = |s: &Shared| s.engine().store.dirty();
        let before = (dirty(&on_shared), dirty(&on_exclusive));
        let both = (&*on_shared, &mut c1, &*on_exclusive, &mut c2);
        same_on_both_paths(both, cases.iter(), now);
        // A write a case, one more for each filter created (the key added), one more for each
        // UNLINK's second key, none for the two refused SETs (NX of a key there, XX of one not),
        // the refused EXPIRE GT, the two reads, the second PERSIST, the EXPIRE of no key, the
        // second GETEX PERSIST and the GETDEL of no key; a write per MSET or MSETNX pair (3
        // more, 1 more, 1 fewer for the refused MSETNX, 2 more) and none for the GET; none for
        // the PFADD that changed no register.
        let n = cases.len() as u64 + 3 + 1 + 1 - 2 - 5 - 2 + 3 + 1 - 1 + 2 - 1 - 1;
        assert_eq!(dirty(&on_shared) - before.0, n);
        assert_eq!(dirty(&on_exclusive) - before.1, n);
        let drained = |s: &Shared, sub| {
            let mut out = Vec::new();
            s.engine().stream.get_mut().drain(sub, &mut out);
            out
        };
        let stream = drained(&on_shared, sub1);
        assert_eq!(stream, drained(&on_exclusive, sub2));
        let text = String::from_utf8_lossy(&stream).replace("\r\n", " ");
        assert!(
            text.contains(
                "*1 $5 MULTI *6 $10 BF.RESERVE $6 new-bf $4 0.01 $3 100 $9 EXPANSION $1 2 \
                 *3 $6 BF.ADD $6 new-bf $1 x *1 $4 EXEC "
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "*1 $5 MULTI *9 $10 CF.RESERVE $6 new-cf $4 1024 $10 BUCKETSIZE $1 2 \
                 $13 MAXITERATIONS $2 20 $9 EXPANSION $1 1 *3 $6 CF.ADD $6 new-cf $1 x \
                 *1 $4 EXEC "
            ),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "*5 $3 SET $6 new-ex $1 v $4 PXAT $13 {} ",
                now + 100_000
            )),
            "EX as PXAT: {text}"
        );
        assert!(
            text.contains(&format!(
                "*6 $3 SET $8 new-pxat $1 v $4 PXAT $13 {pxat} $2 NX "
            )),
            "PXAT verbatim: {text}"
        );
        assert!(
            text.contains("*4 $3 SET $6 new-px $2 v2 $7 KEEPTTL "),
            "GET left out: {text}"
        );
        assert!(
            text.contains(&format!(
                "*3 $9 PEXPIREAT $8 new-long $13 {} *4 $9 PEXPIREAT $8 new-long $13 {} $2 GT ",
                now + 100_000,
                now + 200_000
            )),
            "EXPIRE as PEXPIREAT: {text}"
        );
        assert!(
            text.contains(&format!(
                "*3 $9 PEXPIREAT $5 new-d $13 {} *2 $7 PERSIST $5 new-d *3 $9 PEXPIREAT $5 new-d ",
                now + 100_000
            )) && text.contains("*2 $3 DEL $5 new-d "),
            "GETEX as PEXPIREAT and PERSIST, GETDEL as DEL: {text}"
        );
        // The expiry queue took every TTL change made under the shared lock: later, active
        // expiry reclaims exactly the keys whose TTL is still there, on both engines alike.
        let later = now + 1_000_000_000;
        for s in [&on_shared, &on_exclusive] {
            let mut e = s.engine();
            let db = e.store.db(0, later);
            assert_eq!(db.queue_len(), db.expires_count(), "queue and table agree");
            // new-ex, new-px, new-pxat, new-nx, new-long and the setup's `ttl`.
            assert_eq!(db.active_expire(1000), 6);
            assert_eq!(db.queue_len(), 0);
        }
        for key in [
            "new-ex", "new-px", "new-nx", "new-pxat", "ttl", "new-s", "new-a", "m-ttl", "m1", "m4",
        ] {
            let got = run_exclusive(&on_shared, &mut c1, &["EXISTS", key], later);
            let want = run_exclusive(&on_exclusive, &mut c2, &["EXISTS", key], later);
            assert_eq!(format!("{got:?}"), format!("{want:?}"), "{key}");
        }
        // What still defers with inserts on: another type's error, a key that is due (the
        // exclusive path reclaims it and propagates that), an expiry already past, a key a
        // snapshot can reach (its segment), and a table too small for a segment's keys to share
        // a stripe.
        run(&on_shared, &mut c1, &["SET", "due", "v", "PX", "10"], now);
        run(&on_shared, &mut c1, &["SET", "due2", "v", "PX", "10"], now);
        run(&on_shared, &mut c1, &["SET", "due3", "v", "PX", "10"], now);
        run(&on_shared, &mut c1, &["SET", "due4", "v", "PX", "10"], now);
        for words in [
            &["INCR", "new-s"][..],
            &["DEL", "new-s", "due"],
            &["SET", "due2", "w"],
            &["SET", "new-s", "v", "PXAT", "1"],
        ] {
            assert!(!run(&on_shared, &mut c1, words, now + 20).1, "{words:?}");
        }
        // On one thread MSET keeps to the exclusive path, where it costs less (no stripe lock
        // and check per key) and nothing runs beside it to gain.
        on_shared.parallel_batches.store(false, Ordering::Relaxed);
        assert!(!run(&on_shared, &mut c1, &["MSET", "m1", "one"], now).1);
        on_shared.parallel_batches.store(true, Ordering::Relaxed);
        // MSET and MSETNX check every key before they write one: a due key among them defers
        // the command with nothing written (the debug build asserts no key was added by a
        // deferral), and the exclusive path then runs it whole.
        for (words, want) in [
            (&["MSET", "m-new", "1", "due3", "w"][..], Reply::ok()),
            (&["MSETNX", "m-new2", "1", "due4", "w"], Reply::Int(1)),
        ] {
            let (got, stayed_shared) = run(&on_shared, &mut c1, words, now + 20);
            assert!(!stayed_shared, "{words:?}");
            assert_eq!(format!("{got:?}"), format!("{want:?}"), "{words:?}");
        }
        assert_eq!(
            format!(
                "{:?}",
                run_exclusive(
                    &on_shared,
                    &mut c1,
                    &["MGET", "m-new", "due3", "m-new2", "due4"],
                    now + 20
                )
            ),
            format!(
                "{:?}",
                Reply::Array(["1", "w", "1", "w"].map(|v| Reply::Bulk(v.into())).to_vec())
            )
        );
        // PFADD of a string that is not an HLL defers (the exclusive path answers the error);
        // so does one that meets a corrupt sparse HLL, after raising the registers before the
        // corrupt run: the exclusive rerun raises nothing new and answers the same error, so
        // the key ends as the exclusive path alone leaves it.
        assert!(!run(&on_shared, &mut c1, &["PFADD", "m2", "x"], now).1);
        // Sparse, runs covering registers 0-99 of 16,384 (one XZERO of 100).
        let corrupt = "HYLL\u{1}\0\0\0\0\0\0\0\0\0\0\0@c";
        let low = (0..)
            .map(|i| format!("low{i}"))
            .find(|e| crate::store::hll::hash_element(e.as_bytes()).0 < 100)
            .unwrap();
        let high = (0..)
            .map(|i| format!("high{i}"))
            .find(|e| crate::store::hll::hash_element(e.as_bytes()).0 >= 100)
            .unwrap();
        for (s, c) in [(&on_shared, &mut c1), (&on_exclusive, &mut c2)] {
            run_exclusive(s, c, &["SET", "bad-hll", corrupt], now);
        }
        let (got, stayed_shared) =
            run(&on_shared, &mut c1, &["PFADD", "bad-hll", &low, &high], now);
        assert!(!stayed_shared);
        let want = run_exclusive(
            &on_exclusive,
            &mut c2,
            &["PFADD", "bad-hll", &low, &high],
            now,
        );
        assert_eq!(format!("{got:?}"), format!("{want:?}"));
        assert!(matches!(want, Reply::Error(_)), "{want:?}");
        assert_eq!(
            state(&on_shared, &mut c1, "bad-hll", now),
            state(&on_exclusive, &mut c2, "bad-hll", now)
        );
        assert_ne!(
            format!(
                "{:?}",
                run_exclusive(&on_shared, &mut c1, &["GET", "bad-hll"], now)
            ),
            format!("{:?}", Reply::Bulk(corrupt.into())),
            "the register before the corrupt run was raised"
        );
        // The deferred DEL deleted nothing before it deferred; the exclusive path deleted both.
        assert_eq!(
            format!(
                "{:?}",
                run_exclusive(&on_shared, &mut c1, &["EXISTS", "new-s", "due"], now + 20)
            ),
            format!("{:?}", Reply::Int(0))
        );
        // A missing key is answered on the shared path, whatever the table.
        assert!(run(&on_shared, &mut c1, &["DEL", "never-was"], now).1);
        let snapshot = on_shared.engine().store.dbs[0].snapshot();
        assert!(!run(&on_shared, &mut c1, &["SET", "new-f", "v"], now).1);
        drop(snapshot);
        assert!(run(&on_shared, &mut c1, &["SET", "new-f", "v"], now).1);
        let (small, mut c3, _) = setup_writes();
        small.engine().store.shared_inserts = true;
        assert!(!run(&small, &mut c3, &["SET", "new-g", "v"], now).1);
        // And with inserts off, whatever the table's size.
        on_shared.engine().store.shared_inserts = false;
        assert!(!run(&on_shared, &mut c1, &["SET", "new-h", "v"], now).1);
    }

    #[test]
    fn keys_added_on_many_threads_are_all_there_and_counted() {
        let (shared, _, now) = setup_inserts();
        let before = shared.engine().store.dbs[0].len() as i64;
        const PER_THREAD: usize = 25_000;
        const THREADS: u64 = 4;
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let shared = shared.clone();
                std::thread::spawn(move || {
                    let mut c = client(100 + t);
                    let reqs: Vec<Vec<Bytes>> = (0..PER_THREAD)
                        .flat_map(|i| {
                            [
                                argv(&["SET", &format!("k:{t}:{i}"), &i.to_string()]),
                                argv(&["INCR", &format!("c:{t}:{i}")]),
                                // A key that comes and goes.
                                argv(&["SET", &format!("d:{t}:{i}"), "v"]),
                                argv(&["DEL", &format!("d:{t}:{i}")]),
                                // Keys other threads are adding, and the fill: reads of segments
                                // being written under other stripes.
                                argv(&["GET", &format!("k:{}:{i}", (t + 1) % THREADS)]),
                                argv(&["EXISTS", &format!("fill:{i}"), &format!("k:{t}:{i}")]),
                                // TTLs: set on a new key, then on every third one cleared by a
                                // SET without one; a key with a TTL that comes and goes.
                                argv(&["SET", &format!("e:{t}:{i}"), "v", "EX", "1000"]),
                                if i % 3 == 0 {
                                    argv(&["SET", &format!("e:{t}:{i}"), "w"])
                                } else {
                                    argv(&["SET", &format!("e:{t}:{i}"), "w", "KEEPTTL"])
                                },
                                argv(&["PSETEX", &format!("x:{t}:{i}"), "100000", "v"]),
                                argv(&["DEL", &format!("x:{t}:{i}")]),
                            ]
                        })
                        .collect();
                    let mut shared_batches = 0;
                    for (b, batch) in reqs.chunks(16).enumerate() {
                        let mut lock = EngineLock::for_batch(&shared, &batch[0], &mut c);
                        // As the connection loop: the batch's lookups prefetched first, under
                        // the stripes of the segments they walk.
                        super::super::prefetch_keys(
                            &shared,
                            &lock,
                            &mut c,
                            batch.iter().map(|a| &a[..]),
                        );
                        for a in batch {
                            let reply = lock.dispatch(&shared, &mut c, a, now).expect("running");
                            assert!(!reply.is_error(), "{reply:?}");
                        }
                        shared_batches += matches!(lock, EngineLock::Shared { .. }) as usize;
                        drop(lock);
                        // Now and then something the exclusive lock runs, which sees exact
                        // counts and splits what the shared inserts left due.
                        if b % 500 == 0 {
                            let mut e = shared.engine();
                            let _ = super::super::dispatch(
                                &shared,
                                &mut e,
                                &mut c,
                                &argv(&["DBSIZE"]),
                                now,
                            );
                        }
                    }
                    shared_batches
                })
            })
            .collect();
        let shared_batches: usize = threads.into_iter().map(|t| t.join().expect("thread")).sum();
        assert!(shared_batches > 0, "the writes ran on the shared path");
        // Most SETs, each of a new key, were answered on the shared path.
        let (set, _) = table().get(b"SET").expect("known command");
        let shared_sets = shared.engine().shared_stats[set]
            .calls
            .load(Ordering::Relaxed);
        let all = THREADS * PER_THREAD as u64;
        assert!(
            shared_sets > 2 * all,
            "{shared_sets} of {} SETs shared",
            4 * all
        );
        let (psetex, _) = table().get(b"PSETEX").expect("known command");
        let shared_psetex = shared.engine().shared_stats[psetex]
            .calls
            .load(Ordering::Relaxed);
        assert!(
            shared_psetex > all / 2,
            "{shared_psetex} of {all} PSETEXs shared"
        );
        let (del, _) = table().get(b"DEL").expect("known command");
        let shared_dels = shared.engine().shared_stats[del]
            .calls
            .load(Ordering::Relaxed);
        assert!(shared_dels > all / 2, "{shared_dels} of {all} DELs shared");
        let mut c = client(1);
        let want = before + 3 * THREADS as i64 * PER_THREAD as i64;
        let got = run_exclusive(&shared, &mut c, &["DBSIZE"], now);
        assert_eq!(format!("{got:?}"), format!("{:?}", Reply::Int(want)));
        let db_len = shared.engine().store.dbs[0].len();
        assert_eq!(db_len as i64, want);
        for t in 0..THREADS {
            for i in (0..PER_THREAD).step_by(37) {
                let got = run_exclusive(&shared, &mut c, &["GET", &format!("k:{t}:{i}")], now);
                let want = Reply::Bulk(Bytes::from(i.to_string()));
                assert_eq!(format!("{got:?}"), format!("{want:?}"), "k:{t}:{i}");
                let got = run_exclusive(&shared, &mut c, &["GET", &format!("c:{t}:{i}")], now);
                assert_eq!(
                    format!("{got:?}"),
                    format!("{:?}", Reply::Bulk(Bytes::from("1")))
                );
            }
        }
        // Every key reachable by a walk too (segments split from the shared inserts' slack).
        let mut e = shared.engine();
        let db = &mut e.store.dbs[0];
        db.shrink_if_sparse();
        assert_eq!(db.keys().count(), want as usize);
        // Two of every three `e:` keys kept their TTL, and the expiry queue agrees with the
        // table; later, active expiry reclaims exactly those.
        let with_ttl = THREADS as usize * (PER_THREAD - PER_THREAD.div_ceil(3));
        let ttl_before = usize::from(db.expire_at(b"ttl").is_some());
        assert_eq!(db.expires_count(), with_ttl + ttl_before);
        assert_eq!(db.queue_len(), with_ttl + ttl_before);
        let db = e.store.db(0, now + 10_000_000);
        assert_eq!(db.active_expire(usize::MAX), with_ttl + ttl_before);
        assert_eq!(db.len() as i64, want - (with_ttl + ttl_before) as i64);
    }

    #[test]
    fn a_client_whose_writes_defer_backs_off_the_shared_path_for_a_while() {
        let (shared, mut c, now) = setup_writes();
        // The setup's new keys deferred.
        assert_eq!(c.shared_write_backoff, WRITE_BACKOFF);
        c.shared_write_backoff = 0;
        let batch = |c: &mut ClientState, words: &[&str]| {
            let a = argv(words);
            let mut lock = EngineLock::for_batch(&shared, &a, c);
            let reply = lock.dispatch(&shared, c, &a, now).expect("running");
            (reply, matches!(lock, EngineLock::Shared { .. }))
        };
        assert!(batch(&mut c, &["SET", "s", "a"]).1);
        // A new key defers: the next WRITE_BACKOFF write batches go straight to the exclusive
        // lock, reads do not.
        assert!(!batch(&mut c, &["SET", "fresh", "a"]).1);
        for _ in 0..WRITE_BACKOFF {
            assert!(batch(&mut c, &["GET", "s"]).1, "reads are not held back");
            let (reply, stayed_shared) = batch(&mut c, &["SET", "s", "b"]);
            assert!(!stayed_shared);
            assert!(matches!(reply, Reply::Status("OK")));
        }
        assert!(batch(&mut c, &["SET", "s", "c"]).1, "tried again");
        // Another client is not held back by this one's deferrals.
        let mut other = client(9);
        assert!(!batch(&mut c, &["INCR", "fresh-counter"]).1);
        assert!(batch(&mut other, &["SET", "s", "d"]).1);
    }
}
