//! The server (floor 2): listeners, the accept loop, the connection loop, the background cron, and
//! shutdown. The only code that touches sockets (`persistence` does the file I/O). Uses every floor
//! below: `commands` to execute requests, `persistence` at startup and in the cron, `engine` for
//! the shared state.
//!
//! Concurrency design: one tokio task per connection, on a multi-threaded runtime on machines with
//! more than two CPUs and on a current-thread runtime (one thread, as Redis) up to two, where a
//! second worker only adds futex wake-ups while the client takes the other core (`main.rs`,
//! `default_runtime`, chosen by measurement; `HYPERBLOOM_WORKERS` overrides). That runtime has no
//! time driver, which would run on every park, i.e. once per request at `-P 1`: the few timers live
//! on a timer thread (`timer`), and the `timeout` directive is the cron's. The keyspace is one
//! `RwLock<Engine>`. A connection decodes every complete request in its buffer, takes the lock
//! once, executes the whole batch and releases it before writing. So multi-key commands and EXEC
//! are atomic for free, no lock is held across an `.await`, and pipelined clients pay for one lock
//! per batch rather than per command. Parsing and socket I/O — most of the CPU for small commands
//! — run outside the lock on all cores.
//!
//! The lock is exclusive for most commands (writes to existing keys: see below and
//! `commands::shared_path`). A batch that starts with one of
//! the read-only commands that have a shared-lock handler (`PING`, `ECHO`, `GET`, `MGET`,
//! `STRLEN`, `EXISTS`, `PFCOUNT`, `BF.EXISTS`, `BF.MEXISTS`, `CF.EXISTS`, `CF.MEXISTS`, `CF.COUNT`)
//! takes it shared, so such reads from any number of connections run side by side on every core;
//! the first command that cannot run there moves the batch to the exclusive lock
//! (`commands::shared_path`, whose essay lists when that happens: errors, due keys, MONITOR,
//! tracking, keymiss events, a transaction that writes, ...).
//!
//! Across cores, measured (issue 15, target 4): `examples/bench_scaling.rs` runs N threads, each a
//! client with its own keys, executing pre-parsed batches of 16 against the engine exactly as the
//! connection loop does (`EngineLock`: lock, dispatch + encode the batch, unlock), no sockets, each
//! command once with the exclusive lock forced and once as the server runs it. Two runs of 5 rounds
//! each on a quiet box (load 0.4–1.3, 2026-12-02 08:00 and 08:10 UTC, the second at aa5d35c with
//! the server's allocator installed; `for r in 1 2 3 4 5; do for c in PING GET BF.EXISTS CF.EXISTS
//! PFCOUNT SET; do target/release/examples/bench_scaling 400000 1,2 16 $c; done; done`), medians of
//! the second, ops/s, and the median of each round's shared 2/1 ratio in both:
//!
//! | command | exclusive, 1 thread | exclusive, 2 | shared, 1 | shared, 2 | shared/exclusive at 2 | shared 2/1, run 1 | run 2 |
//! |---|---:|---:|---:|---:|---:|---:|---:|
//! | PING | 7.58M | 7.24M | 9.55M | 14.16M | 1.96 | 1.67 | 1.36 |
//! | GET | 2.32M | 1.28M | 2.87M | 4.54M | 3.54 | 1.56 | 1.55 |
//! | BF.EXISTS | 5.47M | 4.03M | 4.76M | 8.62M | 2.14 | 2.04 | 1.74 |
//! | CF.EXISTS | 6.78M | 4.23M | 5.41M | 10.47M | 2.48 | 2.00 | 1.93 |
//! | PFCOUNT | 6.04M | 5.42M | 6.54M | 11.34M | 2.09 | 1.83 | 1.48 |
//! | SET | 1.37M | 0.87M | — | — | — | — | — |
//!
//! Under the exclusive lock two threads are slower than one (0.55–0.96: the lock's line and the
//! data bounce between the cores, and each thread waits for the other's whole batch). Under the
//! shared lock no thread waits: two threads run reads 1.4–2.0× as fast as one (single rounds up to
//! 2.3×; this VM's two vCPUs are noisy neighbours) and 2–3.5× as fast as the exclusive lock. GET,
//! 100k keys per thread, is bound by memory latency and gains least. The earlier figure of
//! 1.14–1.29× was the bench's own fault: each thread freed its 200k pre-parsed requests (allocated
//! by the main thread, so every free went to one malloc arena under its lock) before the clock
//! stopped, which took as long as running them and did not scale. The server had a shortfall of
//! its own on the same theme: `used_memory`'s counter was one atomic that every allocation and free
//! on every core wrote; it is striped per thread now (`engine::alloc`; 2 threads allocating went
//! from 0.4–0.7× one thread to 1.6×).
//!
//! Projection. With c_in = CPU per command under an exclusive lock and c_out = CPU outside it
//! (parse, syscalls, TCP: PING's server CPU per request pinned, ≈ 0.5–0.8 µs at -P 16), one
//! exclusive lock gives throughput(N) = min(N / (c_in + c_out), 1 / c_in): at the c_in above (SET
//! ≈ 0.8 µs in-process, GET ≈ 0.4, BF.EXISTS ≈ 0.25), 1.3–4M commands/s however many cores — 8, 16
//! and 64 cores sit at that ceiling, reached by 2–4 cores. Shared-path reads have no such term: the
//! only serial work per batch is the lock word's two atomic updates and one commandstats update (a
//! cache-line transfer each, ~0.1 µs under contention), so about 16 / 0.3 µs ≈ 50M reads/s in
//! aggregate before those lines saturate. Reads follow N / (c_in + c_out) up to ~25–40 cores for
//! GET or BF.EXISTS: at the measured 1.74–2.04× per doubling (BF.EXISTS, CF.EXISTS; PFCOUNT
//! 1.5–1.8, GET 1.55), 8 cores give ~5–8× one core and 16 cores ~9–16×, and 64 cores meet that
//! ~50M/s line ceiling (GET, memory-bound, ~3.7× at 8 cores). Memory bandwidth is the other
//! limit this box cannot show. Writes still serialize: a read-heavy mix (the Bloom front of a database) scales, a
//! write-heavy one stays at the exclusive ceiling. The next step for writes is a keyspace sharded
//! by key hash (S shards, one lock each; multi-key commands and EXEC lock their shards in index
//! order; a global sequence number taken while the shards are held keeps one total order for the
//! AOF/replication stream), giving min(N / (c_in + c_out), S / c_in). Thread-per-core
//! (shared-nothing, Dragonfly) removes the lock too but makes MULTI/EXEC and multi-key commands
//! message passing. Not built: it touches every command's access to the store (`ctx.db()`, about a
//! hundred call sites) and every keyspace-wide command (KEYS, SCAN, DBSIZE, FLUSHALL, SWAPDB,
//! snapshots, expiry).
//!
//! What is built (2026-12-04, `commands::shared_path`): not shards but stripes. Under the shared
//! keyspace lock the table's structure is frozen (no key added or removed, no TTL changed, no
//! segment copied), and a value may change in place under its key's stripe lock
//! (`store::db::Stripes`, 256 `RwLock<()>`s chosen by key hash; the exclusive path takes none).
//! Every shared-path command holds its keys' stripes — a read for reading, a multi-key read all
//! of them at once in ascending order, a write for writing — so a key's reads and writes take
//! turns and multi-key reads stay linearizable. SET (no option), INCR/DECR/INCRBY/DECRBY, BF.ADD,
//! BF.MADD (items that fit in the newest link), CF.ADD and PFADD (dense) have such write handlers
//! for keys that exist and no snapshot can reach; anything else (a new key, a due one, a TTL to
//! clear, an error, keyspace events, WATCH, a deny-oom write over `maxmemory`) defers to the
//! exclusive path before changing anything; a `maxmemory` limit alone does not (until 2026-12-07
//! it kept every write exclusive). No handler of the exclusive path changed, and no `Db` method.
//!
//! The AOF does not close the path: the write stream sits behind a mutex
//! (`engine::propagate::StreamCell`) that only shared writers take, each appending its encoded
//! command while it still holds its stripe, so two writes to one key reach the stream in the
//! order they were applied and writes to different keys, which commute, in the mutex's order.
//! The exclusive path reaches the stream without the mutex (`get_mut`); the AOF writer drains it
//! under the shared lock and the mutex; `appendfsync always` waits for the offset read after the
//! batch, as before. The mutex is a serial part of its own: one encoded command copied into the
//! AOF's buffer per write, ~0.1–0.3 µs (`BENCH_STREAM=1` below).
//!
//! Nor do replicas (2026-12-06): shared writes leave their bytes in the stream, and
//! `Shared::engine`, the only way to the exclusive lock, moves what the stream holds into the
//! backlog before handing the lock out (`Engine::pump_repl`, one inlined test without replicas).
//! So every holder of the exclusive lock — a replica task reading the backlog, WAIT, INFO, a full
//! sync taking its snapshot and offset in one critical section — sees the backlog and
//! `master_repl_offset` agree with the data: no write is in a snapshot without its offset (it
//! would be applied twice) or in the offset without the backlog. A batch whose shared writes
//! entered the stream wakes the replica tasks when it ends (`replica::wake_replicas`). Tested
//! by `tests/replication.rs`'s full sync under pipelined INCRs from two clients, which fails
//! without the pump. A replica's own backlog (kept for its sub-replicas, fed by its primary)
//! still closes the path to its clients' writes.
//!
//! New keys and deletions (2026-12-06, evening): a key's stripe is the low 8 bits of its
//! key-table segment index, so in a table of 256 segments or more (about 32k keys) a stripe
//! guards whole segments, and a write holding it may add a key there (`store::keytable::KeyTable::insert_shared`): SET
//! (no option), INCR/DECR/INCRBY/DECRBY, BF.ADD, BF.MADD and CF.ADD of a missing key, a created
//! filter's `BF.RESERVE`/`CF.RESERVE` entering the stream with its command as one MULTI/EXEC
//! unit, as on the exclusive path. Segment splits stay exclusive: shared inserts may run 1/16
//! past the split mark, and the exclusive path catches up (up to 4 splits per key it adds, and
//! in the cron). On with either runtime since 2026-12-06 late night (on one thread the batch
//! prefetch still takes no stripe: nothing runs beside it; `Shared::parallel_batches`).
//! `bench_scaling`, a new key per request, 2 threads, medians of 3 rounds (2026-12-06
//! 17:34–17:48 UTC, load 1.2–1.7; `for r in 1 2 3; do target/release/examples/bench_scaling N
//! 1,2 16 C; done` with N = 400k for SET-new/INCR-new, 200k BF.ADD-new, 100k CF.ADD-new), M
//! ops/s:
//!
//! | command, new keys | exclusive, 2 threads | shared, 2 | partitioned, 2 | shared/exclusive | shared/partitioned |
//! |---|---:|---:|---:|---:|---:|
//! | SET | 1.00 | 2.59 | 3.48 | 2.6 | 0.74 |
//! | INCR | 1.31 | 3.09 | 4.19 | 2.4 | 0.74 |
//! | BF.ADD (a default filter each) | 0.93 | 2.48 | 3.04 | 2.7 | 0.82 |
//! | CF.ADD (a default filter each) | 0.47 | 1.55 | 1.93 | 3.3 | 0.80 |
//! | SET of a new key, then its DEL | 2.04 | 5.09 | 5.69 | 2.5 | 0.89 |
//!
//! DEL and UNLINK of keys without a TTL remove them the same way (the last row: `DEL-new`, 400k
//! per thread, 17:58 UTC).
//! What separates shared inserts from the partitioned bound is true sharing: two cores add to
//! the same segments' tables and take the same stripe lines, where partitioned threads have a
//! table each. Projection as for in-place writes, min(N / (c_in + c_out), S / c_in), plus a
//! serial part this box cannot size: the segment splits, one per 128 keys added, all on the
//! exclusive path, where every other core waits for them.
//!
//! TTLs (2026-12-06, night). A key's TTL is in its entry (until 2026-12-08, in its segment's
//! TTL table), which the same stripe guards, and in the database's expiry queue, now one ordered set per stripe
//! (`store::db::ExpiryQueues`; active expiry walks the 256 from a cursor). So where keys can be
//! added, a write holding the stripe may set or clear a TTL too: SET with every option
//! (EX/PX/EXAT/PXAT, KEEPTTL, NX/XX, GET), SETEX, PSETEX, SET over a key that had a TTL, DEL of
//! such a key, EXPIRE/PEXPIRE/EXPIREAT/PEXPIREAT, PERSIST, GETEX and GETDEL; TTL, PTTL,
//! EXPIRETIME and PEXPIRETIME read under the shared lock. A relative expiry enters the stream as the exclusive
//! path writes it (`SET key value PXAT ms`, `PEXPIREAT key ms`). A first version kept one
//! ordered set per database and logged the shared path's changes for the exclusive lock to
//! apply: that moved ~0.3 µs per change into the serial part, all at once when the cron came
//! (and on a replica, whose cron does not expire, never); per-stripe sets have no serial part.
//! `bench_scaling`, 2 threads, medians of 3 rounds (20:29 and 20:45 UTC, load 1.5, `for r in 1
//! 2 3; do target/release/examples/bench_scaling 300000 1,2 16 C; done`), M ops/s:
//!
//! | command | exclusive, 2 threads | shared, 2 | partitioned, 2 | shared/exclusive | shared/partitioned |
//! |---|---:|---:|---:|---:|---:|
//! | SET key value EX 1000, a new key each (`SET-EX-new`) | 0.49 | 1.24 | 1.58 | 2.5 | 0.79 |
//! | SET key value EX 1000 over keys that exist (`SET-EX`) | 0.60 | 1.87 | 2.18 | 3.1 | 0.86 |
//! | SETEX of a new key, then its DEL (`DEL-EX-new`) | 2.09 | 4.64 | 6.48 | 2.2 | 0.72 |
//! | EXPIRE of keys that exist (`EXPIRE`) | 0.40 | 1.26 | 1.25 | 3.2 | 1.00 |
//!
//! MSET and MSETNX take the shared lock with batches on more than one thread (all their
//! stripes, every key checked before any is written): 2 threads 1.66× the exclusive lock, 0.52
//! of the partitioned bound (`bench_scaling ... MSET`, docs/benchmarks.md).
//!
//! Transactions of reads (MULTI, shared-path reads, EXEC: redis-py's default pipeline) take the
//! shared lock too, EXEC holding the stripes of all the transaction's keys at once
//! (`commands::shared_path`, "Transactions"); `bench_scaling ... MULTI-BF.EXISTS` and
//! `MULTI-GET` measure them (docs/benchmarks.md, "Across cores").
//!
//! Still exclusive: other multi-key writes, MULTI/EXEC of a transaction that writes or WATCHes,
//! segment splits and merges, lazy and active expiry (reclaiming a due key), an EXPIRE to a
//! time already past, and new keys, deletions and TTL changes in tables under 32k keys.
//!
//! That gives in-place writes the read path's curve, min(N / (c_in + c_out), S / c_in) with
//! S = 256 stripes; measured on 2 threads they reach the partitioned upper bound below (docs/benchmarks.md,
//! "Across cores": SET 2.5–3.7×, INCR 1.5–1.8×, BF.ADD 2.3–2.5×, CF.ADD 2.4–2.5×, PFADD 2.1× the
//! exclusive lock at two threads).
//!
//! What it can gain, measured: `examples/bench_scaling.rs` also runs each command with an engine
//! per thread (`partitioned`: the keyspace split by client, nothing shared — the upper bound of
//! the plan above, without its shard locks and stream mutex). Three rounds, 2026-12-04 02:20 UTC,
//! load 0.6–1.3 (`for r in 1 2 3; do for c in SET INCR BF.ADD CF.ADD PFADD GET; do
//! target/release/examples/bench_scaling 400000 1,2 16 $c; done; done`), medians, M ops/s:
//!
//! | command | exclusive, 2 threads | partitioned, 1 | partitioned, 2 | partitioned/exclusive at 2 | partitioned 2/1 |
//! |---|---:|---:|---:|---:|---:|
//! | SET | 1.13 | 2.02 | 4.25 | 3.8 | 2.1 |
//! | INCR | 4.19 | 6.72 | 10.20 | 2.4 | 1.5 |
//! | BF.ADD | 1.96 | 2.72 | 4.24 | 2.2 | 1.6 |
//! | CF.ADD | 2.77 | 3.07 | 5.58 | 2.0 | 1.8 |
//! | PFADD | 6.09 | 5.74 | 10.48 | 1.7 | 1.8 |
//! | GET (a read, for scale; shared lock at 2: 5.90) | 2.60 | 3.26 | 7.51 | 2.9 | 2.3 |
//!
//! Split keyspaces scale writes by 1.5–2.1× per doubling on this box, as the shared lock scales
//! reads, where one exclusive lock loses ground at two threads. That is the measurement behind
//! choosing key-hash shards for the writes; thread-per-core would reach the same curve but makes
//! every multi-key command and EXEC message passing.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpSocket, UnixListener};

pub mod busy_poll;
pub mod clock;
pub mod connection;
pub mod link;
pub mod replica;
pub mod socket;
pub mod timer;

use crate::config::Config;
pub use crate::engine::Shared;
use crate::engine::{ClientHandle, PeerAddr};
use socket::ClientStream;

/// A running server: its address and shared state, for tests and `main`.
pub struct ServerHandle {
    pub addr: SocketAddr,
    pub shared: Arc<Shared>,
    pub join: tokio::task::JoinHandle<()>,
}

impl ServerHandle {
    /// Stops the server as SIGTERM would (the shutdown sequence, including the save when save
    /// points are set) and waits for it. If the final save fails, it stops anyway.
    pub async fn stop(self) {
        terminate(&self.shared, true);
        let _ = self.join.await;
    }
}

/// What the server listens on: `bind` × `port` over TCP, and the `unixsocket`.
pub struct Listeners {
    pub tcp: Vec<TcpListener>,
    /// The socket and the file it is bound at, removed at shutdown.
    pub unix: Option<(UnixListener, std::path::PathBuf)>,
}

impl Listeners {
    /// Opens both kinds; the error says which failed, in Redis's words.
    pub async fn open(config: &Config) -> Result<Listeners, String> {
        let tcp = if config.port == 0 && !config.unixsocket.is_empty() {
            Vec::new()
        } else {
            bind(config)
                .await
                .map_err(|e| format!("Failed listening on port {} (tcp): {e}", config.port))?
        };
        let unix =
            bind_unix(config).map_err(|e| format!("Failed opening Unix socket: bind: {e}"))?;
        Ok(Listeners { tcp, unix })
    }
}

/// Binds every `bind` address on `port`. An address prefixed with `-` is skipped when unavailable.
///
/// `port 0` is Redis's "no TCP": [`Listeners::open`] binds nothing when a `unixsocket` is set.
/// Without one Redis would have nothing to listen on and exits; we bind a free port instead,
/// which the in-process tests start with.
pub async fn bind(config: &Config) -> std::io::Result<Vec<TcpListener>> {
    let mut listeners = Vec::new();
    let mut port = config.port;
    let mut last_err = None;
    for addr in &config.bind {
        let (optional, host) = match addr.strip_prefix('-') {
            Some(h) => (true, h),
            None => (false, addr.as_str()),
        };
        let host = if host == "*" { "0.0.0.0" } else { host };
        let sock_addr: SocketAddr = match format!("{host}:{port}")
            .parse()
            .or_else(|_| format!("[{host}]:{port}").parse())
        {
            Ok(a) => a,
            Err(_) => {
                last_err = Some(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("bad bind address {addr}"),
                ));
                if optional {
                    continue;
                } else {
                    break;
                }
            }
        };
        let result = (|| {
            let socket = if sock_addr.is_ipv4() {
                TcpSocket::new_v4()?
            } else {
                TcpSocket::new_v6()?
            };
            socket.set_reuseaddr(true)?;
            socket.bind(sock_addr)?;
            socket.listen(config.tcp_backlog.max(1))
        })();
        match result {
            Ok(l) => {
                // With port 0, later addresses reuse the port the first one got.
                if port == 0 {
                    port = l.local_addr()?.port();
                }
                listeners.push(l);
            }
            Err(e) if optional => tracing::debug!("skipping bind address {addr}: {e}"),
            Err(e) => return Err(e),
        }
    }
    if listeners.is_empty() {
        return Err(last_err.unwrap_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::AddrNotAvailable,
                "no bind address could be used",
            )
        }));
    }
    Ok(listeners)
}

/// Listens on `unixsocket`, if set, with `unixsocketperm`'s mode. Whatever is at the path goes
/// first: Redis unlinks it too (a socket file left by a server that was killed would otherwise
/// make the bind fail). A relative path is under `dir`, where Redis has changed directory by
/// the time it binds; we never change directory, so `dir` is joined here.
fn bind_unix(config: &Config) -> std::io::Result<Option<(UnixListener, std::path::PathBuf)>> {
    if config.unixsocket.is_empty() {
        return Ok(None);
    }
    let path = std::path::Path::new(&config.dir).join(&config.unixsocket);
    let _ = std::fs::remove_file(&path);
    // Listened on with `tcp-backlog`, as Redis does for its socket (std's bind would say 128).
    let socket = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)?;
    socket.bind(&socket2::SockAddr::unix(&path)?)?;
    let backlog = i32::try_from(config.tcp_backlog.max(1)).unwrap_or(i32::MAX);
    socket.listen(backlog)?;
    socket.set_nonblocking(true)?;
    let listener = UnixListener::from_std(std::os::unix::net::UnixListener::from(
        std::os::fd::OwnedFd::from(socket),
    ))?;
    if config.unixsocketperm != 0 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            &path,
            std::fs::Permissions::from_mode(config.unixsocketperm),
        )?;
    }
    Ok(Some((listener, path)))
}

/// Removes the socket file at shutdown, as Redis does ("Removing the unix socket file.").
fn remove_unix_socket(path: &std::path::Path) {
    tracing::info!("Removing the unix socket file.");
    if let Err(e) = std::fs::remove_file(path) {
        tracing::warn!("Error removing the unix socket file: {e}");
    }
}

/// One warning line per directive of the configuration that is accepted but not implemented.
fn warn_not_implemented(config: &Config) {
    for name in &config.not_implemented {
        tracing::warn!(
            "Directive '{name}' is accepted for compatibility with redis.conf, but hyperbloom does not implement it: it has no effect"
        );
    }
}

/// Loads the snapshot, binds and starts serving in the background.
pub async fn start(config: Config) -> std::io::Result<ServerHandle> {
    warn_not_implemented(&config);
    // The command table is the process's: renames installed here would reach every other
    // server of the process. Only the binary (`serve_main`) applies them.
    if !config.renames.is_empty() {
        return Err(std::io::Error::other(
            "rename-command needs a process of its own: run the hyperbloom binary",
        ));
    }
    let listeners = Listeners::open(&config)
        .await
        .map_err(std::io::Error::other)?;
    let shared = Shared::new(config, crate::commands::table().len());
    allow_shared_inserts(&shared);
    crate::engine::memory::note_startup();
    crate::persistence::load_at_startup(&shared, crate::commands::aof_replayer())
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    // Only a server on the Unix socket alone (`port 0`) has no TCP address: 0.0.0.0:0 then.
    let addr = match listeners.tcp.first() {
        Some(l) => l.local_addr()?,
        None => SocketAddr::from(([0, 0, 0, 0], 0)),
    };
    shared.port.store(addr.port() as usize, Ordering::Relaxed);
    let s = shared.clone();
    let join = tokio::spawn(async move { run(listeners, s, std::future::pending::<()>).await });
    Ok(ServerHandle { addr, shared, join })
}

/// Writes under the shared lock may add keys (`store::db::Store::shared_inserts`) on any
/// runtime; with more than one thread running batches (a multi-thread runtime) the batch
/// prefetch must then hold stripes (`Shared::parallel_batches`).
fn allow_shared_inserts(shared: &Shared) {
    let mut engine = shared.engine();
    engine.store.shared_inserts = true;
    let parallel = tokio::runtime::Handle::current().runtime_flavor()
        != tokio::runtime::RuntimeFlavor::CurrentThread;
    shared.parallel_batches.store(parallel, Ordering::Relaxed);
}

/// The SIGTERM shutdown: the shutdown sequence with the save points deciding, under the keyspace
/// lock. `force` exits even when the final save fails (Redis keeps serving instead).
fn terminate(shared: &Shared, force: bool) -> bool {
    let req = crate::persistence::ShutdownRequest { save: None, force };
    let mut engine = shared.engine();
    crate::persistence::shut_down_engine(shared, &mut engine, &req).is_ok()
}

/// Serves until a future made by `external` completes (SIGTERM, SIGINT) or a client runs
/// SHUTDOWN. On an external stop the save points decide whether to save, as Redis does on
/// SIGTERM; if that save fails the server keeps serving and `external` is asked for the next
/// stop signal.
///
/// Either way the stop goes through `persistence::shut_down` with the keyspace lock held, which
/// marks the engine shut down before the lock is released: from then on the connections execute
/// nothing, so no acknowledged write can be missing from the final snapshot.
pub async fn run<F, Fut>(listeners: Listeners, shared: Arc<Shared>, mut external: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut accept_tasks = Vec::new();
    for listener in listeners.tcp {
        let shared = shared.clone();
        accept_tasks.push(tokio::spawn(accept_loop(listener, shared)));
    }
    let mut unix_path = None;
    if let Some((listener, path)) = listeners.unix {
        let shared = shared.clone();
        accept_tasks.push(tokio::spawn(accept_unix_loop(listener, shared)));
        unix_path = Some(path);
    }
    let cron = tokio::spawn(cron(shared.clone()));
    // `replicaof` in the configuration: start as a replica.
    let replicaof = shared.config().replicaof.clone();
    if let Some((host, port)) = replicaof {
        let mut engine = shared.engine();
        crate::commands::replication::set_master(
            &shared,
            &mut engine.repl,
            host,
            port,
            crate::commands::now_ms(),
        );
    }
    let link = tokio::spawn(link::supervisor(shared.clone()));
    let mut stop = shared.shutdown.subscribe();
    loop {
        let signalled = external();
        let is_external = tokio::select! {
            _ = signalled => true,
            _ = stop.wait_for(|v| *v) => false,
        };
        if !is_external {
            break;
        }
        tracing::info!("Received shutdown request, preparing to shut down");
        if terminate(&shared, false) {
            break;
        }
        tracing::warn!(
            "SIGTERM received but errors trying to shut down the server, check the logs for more information"
        );
    }
    for t in accept_tasks {
        t.abort();
    }
    if let Some(path) = unix_path {
        remove_unix_socket(&path);
    }
    cron.abort();
    // Whatever the AOF holds reaches the disk before the process ends.
    crate::persistence::flush_aof(&shared);
    link.abort();
    // Give connections a moment to flush their last replies.
    for _ in 0..50 {
        if shared.clients().is_empty() {
            break;
        }
        timer::sleep(Duration::from_millis(10)).await;
    }
    tracing::info!("hyperbloom is now ready to exit, bye bye...");
}

const DENIED: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Set up an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    clock::calibrate();
    loop {
        let (stream, addr) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                timer::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let keepalive = shared.config().tcp_keepalive;
        if keepalive > 0 {
            set_keepalive(&stream, keepalive);
        }
        let laddr = stream.local_addr().unwrap_or(addr);
        admit(&shared, stream.into(), addr.into(), laddr.into()).await;
    }
}

/// The `unixsocket` listener's loop. Every client of it is named by the socket's path, as in
/// Redis's CLIENT LIST (`addr=/run/redis.sock:0`).
async fn accept_unix_loop(listener: UnixListener, shared: Arc<Shared>) {
    clock::calibrate();
    let path: Arc<str> = Arc::from(shared.config().unixsocket.as_str());
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                timer::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let addr = PeerAddr::Unix(path.clone());
        admit(&shared, stream.into(), addr.clone(), addr).await;
    }
}

/// Counts a new connection and serves it, or refuses it as Redis does: protected mode (a TCP
/// peer off the loopback; the Unix socket is local) or `maxclients`.
async fn admit(shared: &Arc<Shared>, mut stream: ClientStream, addr: PeerAddr, laddr: PeerAddr) {
    shared
        .stats
        .connections_received
        .fetch_add(1, Ordering::Relaxed);
    let (maxclients, protected) = {
        let c = shared.config();
        (c.maxclients, c.protected_mode && c.requirepass.is_none())
    };
    let refusal = if protected && !addr.is_local() {
        Some(DENIED)
    } else if shared.clients().len() >= maxclients {
        Some("-ERR max number of clients reached\r\n")
    } else {
        None
    };
    if let Some(reply) = refusal {
        shared
            .stats
            .rejected_connections
            .fetch_add(1, Ordering::Relaxed);
        let _ = stream.write_all(reply.as_bytes()).await;
        return;
    }
    let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
    let handle = Arc::new(ClientHandle::new(id, addr, laddr));
    shared.clients().insert(id, handle.clone());
    let rx = shared.shutdown.subscribe();
    tokio::spawn(connection::serve(shared.clone(), stream, handle, rx));
}

/// Applies `tcp-keepalive`: SO_KEEPALIVE with the interval as idle time and probe interval, as
/// Redis's `anetKeepAlive` does.
fn set_keepalive(stream: &tokio::net::TcpStream, secs: u64) {
    let interval = Duration::from_secs(secs);
    let params = socket2::TcpKeepalive::new().with_time(interval);
    #[cfg(any(target_os = "linux", target_os = "macos", target_os = "freebsd"))]
    let params = params.with_interval(Duration::from_secs((secs / 3).max(1)));
    if let Err(e) = socket2::SockRef::from(stream).set_tcp_keepalive(&params) {
        tracing::debug!("cannot set TCP keepalive: {e}");
    }
}

/// Runs blocking file work (an fsync) from a connection task without stalling the other tasks of
/// a multi-threaded runtime; on a current-thread runtime (some tests) it simply runs.
pub fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// The background cron: active expiry and save points, `hz` times a second.
async fn cron(shared: Arc<Shared>) {
    let mut last_second = 0u64;
    loop {
        let hz = shared.config().hz.max(1);
        timer::sleep(Duration::from_millis(1000 / hz as u64)).await;
        clock::calibrate();
        let now = crate::commands::now_ms();
        // The keys' access clocks (LRU seconds, LFU minutes), as Redis's serverCron updates
        // `server.lruclock`: every access reads them, none reads the time.
        crate::store::access::tick(now);
        if now / 1000 != last_second {
            last_second = now / 1000;
            replica::cron(&shared, last_second);
        }
        let idle_timeout = shared.config().timeout;
        if idle_timeout > 0 {
            close_idle_clients(&shared, idle_timeout, now);
        }
        {
            let mut engine = shared.engine();
            if engine.shut_down {
                return;
            }
            // A replica never expires keys itself: its primary sends the DELs (as in Redis).
            let is_replica = engine.repl.master.is_some();
            // Nor while CLIENT PAUSE holds clients back: the dataset stays as it is.
            let paused = shared.client_pause.at(now).is_some();
            let mut expired = 0;
            for db in engine
                .store
                .dbs
                .iter_mut()
                .filter(|_| !is_replica && !paused)
            {
                db.now_ms = now;
                expired += db.active_expire(2000);
            }
            for db in engine.store.dbs.iter_mut() {
                db.shrink_if_sparse();
            }
            // `used_memory_peak` is sampled here as well as wherever `used_memory` is read.
            crate::engine::memory::used_memory();
            sample_instantaneous(&shared, &engine, now);
            // Over `maxmemory`, eviction goes on between commands too (Redis's eviction timer).
            let evicted_before = shared.stats.evicted_keys.load(Ordering::Relaxed);
            crate::engine::evict::perform(&shared, &mut engine);
            let evicted = shared.stats.evicted_keys.load(Ordering::Relaxed) != evicted_before;
            engine.emit_expired();
            engine.pump_repl();
            if expired > 0 || evicted {
                let engine = &mut *engine;
                crate::engine::notify::publish_events(
                    &mut engine.store,
                    &mut engine.pubsub,
                    &shared,
                    None,
                    now / 1000,
                );
                shared
                    .stats
                    .expired_keys
                    .fetch_add(expired as u64, Ordering::Relaxed);
            }
            // Also done before every command; here so that an idle server applies a lowered
            // tracking-table-max-keys (as Redis's serverCron).
            engine.pubsub.limit_tracked_keys(&shared, None);
            // BCAST keys collected outside a connection's round (active expiry above, anything
            // else that wrote without a client) go out here at the latest.
            engine.pubsub.broadcast_invalidations(&shared);
        }
        crate::persistence::cron(&shared);
        crate::persistence::aof::cron(&shared);
    }
}
/// INFO's instantaneous rates (`engine::metrics`): a sample every 100 ms, or every cron tick
/// when `hz` is below 10, as Redis's `run_with_period(100)` takes them.
fn sample_instantaneous(shared: &Shared, engine: &crate::engine::Engine, now_ms: u64) {
    let mut m = shared
        .instantaneous
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    // A tick a little early still samples: the rate divides by the real time elapsed.
    if now_ms.saturating_sub(m.last_ms()) + 10 < crate::engine::metrics::PERIOD_MS {
        return;
    }
    let commands = engine.stats.iter().map(|c| c.calls).sum::<u64>()
        + engine
            .shared_stats
            .iter()
            .map(|c| c.calls.load(Ordering::Relaxed))
            .sum::<u64>();
    m.sample(
        now_ms,
        commands,
        shared.stats.net_input_bytes.load(Ordering::Relaxed),
        shared.stats.net_output_bytes.load(Ordering::Relaxed),
    );
}

/// The `timeout` directive, as Redis's `clientsCronHandleTimeout`: a client that neither sent nor
/// received a byte for more than `timeout` whole seconds is closed, except replicas, the link to
/// our primary, MONITOR clients, pub/sub subscribers and clients blocked in WAIT. Checked by the
/// cron (`hz` times a second) rather than by a timer on every read, which would put the time
/// driver back on the per-request path (`server::timer`); like Redis, a client is closed between
/// `timeout` and `timeout` + 1 seconds after its last interaction.
fn close_idle_clients(shared: &Shared, timeout: u64, now_ms: u64) {
    let now = now_ms / 1000;
    let idle: Vec<Arc<ClientHandle>> = shared
        .clients()
        .values()
        .filter(|h| {
            now.saturating_sub(h.last_active_ms.load(Ordering::Relaxed) / 1000) > timeout
                && !h.is_replica.load(Ordering::Relaxed)
                && !h.is_master.load(Ordering::Relaxed)
                && !h.blocked.load(Ordering::Relaxed)
        })
        .cloned()
        .collect();
    if idle.is_empty() {
        return;
    }
    let engine = shared.engine();
    for h in idle {
        if engine.pubsub.is_subscriber(h.id) || engine.pubsub.monitors.iter().any(|m| m.id == h.id)
        {
            continue;
        }
        tracing::debug!(id = h.id, "closing idle client");
        h.kill();
    }
}

/// What `main` runs: bind, load, serve until SIGTERM/SIGINT or SHUTDOWN. Returns the exit code.
pub async fn serve_main(config: Config) -> i32 {
    warn_not_implemented(&config);
    // Before anything looks a command up: the table is built once, with the renames.
    if let Err(e) = crate::commands::install_renames(&config.renames) {
        eprintln!("\n{e}");
        return 1;
    }
    let listeners = match Listeners::open(&config).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("{e}");
            return 1;
        }
    };
    let shared = Shared::new(config, crate::commands::table().len());
    allow_shared_inserts(&shared);
    // INFO `used_memory_startup`: configured and listening, no data yet.
    crate::engine::memory::note_startup();
    // The snapshot loads in the background; clients meanwhile get -LOADING (persistence docs).
    let load = crate::persistence::spawn_startup_load(&shared, crate::commands::aof_replayer());
    let load_failed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (failed_tx, failed_rx) = tokio::sync::watch::channel(false);
    {
        let failed = load_failed.clone();
        tokio::spawn(async move {
            if let Ok(Err(e)) = load.await {
                tracing::error!("{e}");
                failed.store(true, Ordering::SeqCst);
                failed_tx.send_replace(true);
            }
        });
    }
    let stop = move || {
        let mut failed = failed_rx.clone();
        async move {
            tokio::select! {
                _ = signal() => {}
                _ = load_failure(&mut failed) => {}
            }
        }
    };
    if let Some(Ok(addr)) = listeners.tcp.first().map(TcpListener::local_addr) {
        shared.port.store(addr.port() as usize, Ordering::Relaxed);
    }
    tracing::info!(
        "hyperbloom {} (Redis {} compatible) started, pid={}, port={}",
        crate::VERSION,
        crate::REDIS_VERSION,
        std::process::id(),
        shared.port.load(Ordering::Relaxed)
    );
    if !listeners.tcp.is_empty() {
        tracing::info!("Ready to accept connections tcp");
    }
    if listeners.unix.is_some() {
        tracing::info!("Ready to accept connections unix");
    }
    busy_poll::start(&shared);
    run(listeners, shared, stop).await;
    if load_failed.load(Ordering::SeqCst) {
        1
    } else {
        0
    }
}

/// Completes when the startup load has failed. The sender goes away once the load succeeded:
/// that is no reason to stop, so then this never completes.
async fn load_failure(failed: &mut tokio::sync::watch::Receiver<bool>) {
    if failed.wait_for(|f| *f).await.is_err() {
        std::future::pending::<()>().await
    }
}

/// Completes on SIGTERM or SIGINT.
async fn signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            std::future::pending::<()>().await;
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
