//! State shared by every connection: configuration, the locked keyspace, the client registry,
//! server statistics and persistence status.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::Notify;

use super::{now_ms, Engine};
use crate::config::Config;

/// Redis's fixed per-client reply buffer (PROTO_REPLY_CHUNK_BYTES): output up to this size is
/// CLIENT LIST's `obl` and does not count toward `omem` nor the output buffer limits.
pub const REPLY_BUFFER_BYTES: usize = 16 * 1024;

/// One end of a client's connection: a TCP address, or the server's Unix socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerAddr {
    Tcp(SocketAddr),
    /// The `unixsocket` path. Redis names both ends of every socket client by it, with port 0
    /// (`addr=/run/redis.sock:0`), as the peer of a Unix socket has no name of its own.
    Unix(Arc<str>),
}

impl PeerAddr {
    /// Loopback TCP or the Unix socket: Redis's `islocalClient`, which the `local` setting of
    /// `enable-debug-command` and its kin admits.
    pub fn is_local(&self) -> bool {
        match self {
            PeerAddr::Tcp(a) => a.ip().is_loopback(),
            PeerAddr::Unix(_) => true,
        }
    }

    pub fn is_unix(&self) -> bool {
        matches!(self, PeerAddr::Unix(_))
    }

    /// The host part: the IP address, or the socket's path.
    pub fn host(&self) -> String {
        match self {
            PeerAddr::Tcp(a) => a.ip().to_string(),
            PeerAddr::Unix(path) => path.to_string(),
        }
    }

    /// How MONITOR names the client: `127.0.0.1:50012`, or `unix:/run/redis.sock`.
    pub fn monitor_name(&self) -> String {
        match self {
            PeerAddr::Tcp(a) => a.to_string(),
            PeerAddr::Unix(path) => format!("unix:{path}"),
        }
    }
}

/// CLIENT LIST's `addr=`/`laddr=` and CLIENT KILL's address: `ip:port`, `[ip6]:port`, `path:0`.
impl std::fmt::Display for PeerAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PeerAddr::Tcp(a) => a.fmt(f),
            PeerAddr::Unix(path) => write!(f, "{path}:0"),
        }
    }
}

impl From<SocketAddr> for PeerAddr {
    fn from(a: SocketAddr) -> PeerAddr {
        PeerAddr::Tcp(a)
    }
}

/// One connected client as others see it (CLIENT LIST, CLIENT KILL, INFO clients).
pub struct ClientHandle {
    pub id: u64,
    pub addr: PeerAddr,
    pub laddr: PeerAddr,
    pub created: Instant,
    /// Unix ms of the last read or write on the socket (CLIENT LIST `idle`, the `timeout`
    /// directive): Redis's `lastinteraction`.
    pub last_active_ms: AtomicU64,
    /// In a blocking command (WAIT): exempt from the `timeout` directive, as Redis's blocked
    /// clients.
    pub blocked: AtomicBool,
    pub db: AtomicUsize,
    pub name: Mutex<Option<Bytes>>,
    pub lib_name: Mutex<Option<Bytes>>,
    pub lib_ver: Mutex<Option<Bytes>>,
    /// The last command looked up, for CLIENT LIST `cmd=` (Redis's `c->lastcmd`): 0 for none, an
    /// unknown command or an unknown subcommand; else 1 + the command's index in the command
    /// table, plus for a container's subcommand (1 + its position among the container's
    /// subcommands) << 16. Encoded and decoded by `commands::last_command_code` and
    /// `commands::last_command_name`.
    pub last_cmd: AtomicUsize,
    pub proto: AtomicUsize,
    /// Inside MULTI, until EXEC has run the queue (Redis keeps CLIENT_MULTI set while EXEC runs
    /// it): CLIENT LIST flag x. Set by [`ClientHandle::publish_multi_opened`] and its siblings.
    pub multi: AtomicBool,
    /// Commands queued by MULTI (CLIENT LIST `multi=`, -1 outside a transaction).
    pub multi_queued: AtomicUsize,
    /// Redis's `mstate.argv_len_sums` of the queue: per command, its argument bytes plus one
    /// pointer per argument (CLIENT LIST `multi-mem=`).
    pub multi_mem: AtomicUsize,
    /// CLIENT NO-EVICT on (flag e). Only shown: hyperbloom never evicts clients.
    pub no_evict: AtomicBool,
    /// A replica of ours (after PSYNC): CLIENT LIST flag S, CLIENT KILL TYPE replica.
    pub is_replica: AtomicBool,
    /// The link to our primary: flag M, CLIENT KILL TYPE master.
    pub is_master: AtomicBool,
    /// Set by CLIENT KILL; the connection closes when notified.
    pub killed: AtomicBool,
    pub kill: Notify,
    /// Pub/sub messages, keyspace events, invalidations and MONITOR lines waiting to be written.
    pub outbox: super::pubsub::Outbox,
    /// What the connection holds in its buffers, published for CLIENT LIST and the output limits.
    pub mem: ClientMem,
    /// Unix seconds since the pending output is at or above the class's soft limit (0 = it is not).
    obuf_soft_since: AtomicU64,
    /// Set when an output buffer limit closes the client: the connection logs Redis's line.
    pub obuf_closed: AtomicBool,
}

/// A connection's buffer figures, stored by its task (relaxed: they are statistics and limits,
/// read by other clients' CLIENT LIST and by pub/sub delivery).
#[derive(Default)]
pub struct ClientMem {
    /// Unparsed request bytes (CLIENT LIST `qbuf`) and the room left in that buffer (`qbuf-free`).
    pub qbuf: AtomicUsize,
    pub qbuf_free: AtomicUsize,
    /// Arguments parsed and not yet executed, the running command's included (`argv-mem`).
    pub argv_mem: AtomicUsize,
    /// Reply bytes not yet written to the socket (with the outbox: `omem`). For a replica, how far
    /// its stream lags behind the primary's offset.
    pub out_pending: AtomicUsize,
    /// Allocated capacity of the connection's reply buffer (part of `tot-mem`).
    pub out_capacity: AtomicUsize,
}

impl ClientHandle {
    pub fn new(id: u64, addr: impl Into<PeerAddr>, laddr: impl Into<PeerAddr>) -> ClientHandle {
        ClientHandle {
            id,
            addr: addr.into(),
            laddr: laddr.into(),
            created: Instant::now(),
            last_active_ms: AtomicU64::new(now_ms()),
            blocked: AtomicBool::new(false),
            db: AtomicUsize::new(0),
            name: Mutex::new(None),
            lib_name: Mutex::new(None),
            lib_ver: Mutex::new(None),
            last_cmd: AtomicUsize::new(0),
            proto: AtomicUsize::new(2),
            multi: AtomicBool::new(false),
            multi_queued: AtomicUsize::new(0),
            multi_mem: AtomicUsize::new(0),
            no_evict: AtomicBool::new(false),
            is_replica: AtomicBool::new(false),
            is_master: AtomicBool::new(false),
            killed: AtomicBool::new(false),
            kill: Notify::new(),
            outbox: Default::default(),
            mem: ClientMem::default(),
            obuf_soft_since: AtomicU64::new(0),
            obuf_closed: AtomicBool::new(false),
        }
    }

    /// MULTI opened a transaction: CLIENT LIST shows `x`, `multi=0`, `multi-mem=0`.
    pub fn publish_multi_opened(&self) {
        self.multi_queued.store(0, Ordering::Relaxed);
        self.multi_mem.store(0, Ordering::Relaxed);
        self.multi.store(true, Ordering::Relaxed);
    }

    /// A command joined the transaction's queue. Its `multi-mem` share is Redis's
    /// (queueMultiCommand): the argument bytes plus one `robj*` per argument.
    pub fn publish_queued(&self, argv: &[Bytes]) {
        let bytes: usize =
            argv.iter().map(|a| a.len()).sum::<usize>() + argv.len() * std::mem::size_of::<usize>();
        self.multi_queued.fetch_add(1, Ordering::Relaxed);
        self.multi_mem.fetch_add(bytes, Ordering::Relaxed);
    }

    /// The transaction ended (EXEC has run its queue, DISCARD, RESET, an aborted EXEC).
    pub fn publish_multi_closed(&self) {
        self.multi.store(false, Ordering::Relaxed);
        self.multi_queued.store(0, Ordering::Relaxed);
        self.multi_mem.store(0, Ordering::Relaxed);
    }

    pub fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        self.kill.notify_one();
        self.outbox.ready.notify();
    }

    /// Output waiting for this client: unwritten replies plus the outbox.
    pub fn output_pending(&self) -> usize {
        self.mem.out_pending.load(Ordering::Relaxed) + self.outbox.pending()
    }

    /// CLIENT LIST `obl` and `omem` of `pending` bytes: Redis keeps the first
    /// [`REPLY_BUFFER_BYTES`] of a client's output in its fixed reply buffer (`obl`) and only
    /// what overflows it in the reply list (`omem`), which is what the output limits measure.
    pub fn output_split(pending: usize) -> (usize, usize) {
        let obl = pending.min(REPLY_BUFFER_BYTES);
        (obl, pending - obl)
    }

    /// CLIENT LIST `tot-mem`: the handle, the query and reply buffers' allocations, the outbox,
    /// the parsed arguments and a transaction's queue.
    pub fn total_memory(&self) -> usize {
        std::mem::size_of::<ClientHandle>()
            + self.mem.qbuf.load(Ordering::Relaxed)
            + self.mem.qbuf_free.load(Ordering::Relaxed)
            + self.mem.out_capacity.load(Ordering::Relaxed)
            + self.outbox.pending()
            + self.mem.argv_mem.load(Ordering::Relaxed)
            + self.multi_mem.load(Ordering::Relaxed)
    }

    /// Applies an output buffer limit class to `pending` bytes at unix second `now_s` (Redis's
    /// checkClientOutputBufferLimits, with this client's soft-limit clock). True when the client
    /// must be closed; the caller then calls [`ClientHandle::close_for_output_limit`].
    pub fn output_limit_reached(
        &self,
        limit: &crate::config::OutputLimit,
        pending: usize,
        now_s: u64,
    ) -> bool {
        let (_, omem) = ClientHandle::output_split(pending);
        let mut since = self.obuf_soft_since.load(Ordering::Relaxed);
        let reached = limit.reached(omem as u64, &mut since, now_s);
        self.obuf_soft_since.store(since, Ordering::Relaxed);
        reached
    }

    /// When a client above its class's soft limit becomes closable (unix s), if it is above it.
    pub fn soft_deadline(&self, limit: &crate::config::OutputLimit) -> Option<u64> {
        limit.soft_deadline(self.obuf_soft_since.load(Ordering::Relaxed))
    }

    /// Closes the client asynchronously for overcoming its output buffer limit: its task drops
    /// the pending output, logs Redis's line and closes (Redis's freeClientAsync).
    pub fn close_for_output_limit(&self) {
        if !self.obuf_closed.swap(true, Ordering::SeqCst) {
            self.kill();
        }
    }
}

/// Server-wide counters (INFO stats).
#[derive(Default)]
pub struct Stats {
    pub connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub expired_keys: AtomicU64,
    /// Keys deleted by `maxmemory` eviction (INFO `evicted_keys`).
    pub evicted_keys: AtomicU64,
    /// INFO `keyspace_hits` and `keyspace_misses` of the shared path (the exclusive path's are
    /// each database's).
    pub keyspace_hits: AtomicU64,
    pub keyspace_misses: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    pub net_repl_input_bytes: AtomicU64,
    pub net_repl_output_bytes: AtomicU64,
    /// Microseconds the keyspace lock was held to take the last snapshot (BGSAVE, AOF rewrite,
    /// full sync): INFO `latest_fork_usec`, the analogue of Redis's fork time.
    pub latest_snapshot_usec: AtomicU64,
    /// Snapshots taken (INFO `total_forks`).
    pub snapshots: AtomicU64,
}

/// Persistence status (INFO persistence, LASTSAVE).
#[derive(Debug, Clone)]
pub struct PersistenceStatus {
    pub last_save_unix: u64,
    pub bgsave_in_progress: bool,
    pub last_bgsave_duration_sec: i64,
    pub bgsave_started: Option<Instant>,
    pub saves: u64,
    /// The background save in flight (collected by `persistence::snapshot::poll_bgsave`).
    pub job: Option<Arc<BgJob>>,
    /// BGSAVE SCHEDULE: start one as soon as the running one ends.
    pub bgsave_scheduled: bool,
    /// Unix seconds of the last BGSAVE attempt (save points retry a failure after 5 s).
    pub last_bgsave_try_unix: u64,
    /// Why the last save failed, until one succeeds.
    pub last_error: Option<String>,
    pub last_load_keys_loaded: u64,
    pub last_load_keys_expired: u64,
    /// The AOF rewrite in flight (collected by `persistence::aof::poll_rewrite`).
    pub aof_rewrite: Option<Arc<AofRewriteJob>>,
    /// BGREWRITEAOF while a BGSAVE ran: start when it ends.
    pub aof_rewrite_scheduled: bool,
    pub aof_last_bgrewrite_ok: bool,
    pub aof_last_rewrite_time_sec: i64,
    pub aof_rewrites: u64,
}

/// INFO's AOF figures, mirrored by `persistence::aof`.
#[derive(Debug, Default)]
pub struct AofInfo {
    pub enabled: AtomicBool,
    pub base_size: AtomicU64,
    pub incr_size: AtomicU64,
    pub write_failed: AtomicBool,
    /// The last everysec background fsync failed (Redis's `aof_bio_fsync_status`).
    pub fsync_failed: AtomicBool,
    /// errno of the last failed write or fsync, for the MISCONF text.
    pub last_errno: AtomicI32,
    /// The writer's buffer allocation (Redis's `aof_buf`; `engine::memory`, INFO
    /// `mem_aof_buffer`), published after every pass.
    pub buffer_bytes: AtomicUsize,
}

/// The AOF writer's hand-off with the connections (the logic is `persistence::aof`): a connection
/// raises `pending` and wakes the writer thread; the writer publishes how far the file is written
/// and fsynced, and `appendfsync always` connections wait on that before replying.
pub struct AofCommit {
    pub wake: Arc<AofWake>,
    pub progress: tokio::sync::watch::Sender<AofProgress>,
    pub writer_started: std::sync::Once,
    /// DEBUG AOF-FLUSH-SLEEP: microseconds the writer sleeps before each write (a test hook).
    pub flush_sleep_us: AtomicU64,
}

/// The writer thread's doorbell: `pending` is raised (and the thread woken) when the stream holds
/// bytes for it. Outside `Shared` so the thread can sleep without keeping the server alive.
#[derive(Default)]
pub struct AofWake {
    pub pending: AtomicBool,
    pub lock: Mutex<()>,
    pub cv: Condvar,
}

/// How far the open AOF's subscription (`sub`) is written to the file and fsynced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AofProgress {
    pub sub: Option<super::SubscriberId>,
    pub written: u64,
    pub synced: u64,
    /// How far `appendfsync always` connections may reply: `synced`, or `written` where the
    /// fsync was skipped (no-appendfsync-on-rewrite during a rewrite or BGSAVE, as Redis).
    pub released: u64,
    /// The last write failed (everysec, no): waiters are released, their bytes stay buffered.
    pub write_failed: bool,
}

impl Default for AofCommit {
    fn default() -> Self {
        AofCommit {
            wake: Arc::new(AofWake::default()),
            progress: tokio::sync::watch::channel(AofProgress::default()).0,
            writer_started: std::sync::Once::new(),
            flush_sleep_us: AtomicU64::new(0),
        }
    }
}

/// An AOF rewrite in flight: its start and, once finished, its outcome.
#[derive(Debug)]
pub struct AofRewriteJob {
    pub started: Instant,
    /// `store::keytable::entries_copied` when the snapshot was taken.
    pub copied_at_start: u64,
    /// Ok carries the next switch, prepared by the rewrite thread after its manifest.
    pub outcome: Mutex<Option<Result<Option<PreparedSwitch>, String>>>,
}

/// The next rewrite's switch, made ready off the locks (`persistence::aof`): an empty incr file
/// and a temp manifest naming it, both fsynced and the directory too. The switch only renames
/// the temp manifest into place, if the manifest in force is still `after`.
#[derive(Debug)]
pub struct PreparedSwitch {
    /// The manifest text it extends (the one in force when it was prepared).
    pub after: String,
    /// The AOF directory, and the new incr file's sequence number, name and open handle.
    pub dir: std::path::PathBuf,
    pub seq: u64,
    pub incr_name: String,
    pub file: std::fs::File,
    /// The fsynced temp manifest and its text (`after` plus the new incr).
    pub temp: std::path::PathBuf,
    pub manifest: String,
}

/// The open AOF: the incr file being appended to and the group-commit bookkeeping (the logic is
/// `persistence::aof`). Guarded by `Shared::aof`, which is always taken *before* the keyspace lock.
pub struct AofSink {
    pub file: std::fs::File,
    /// Its subscription to the write stream.
    pub sub: super::SubscriberId,
    /// Drained from the stream, not yet written (kept across a failed write, as Redis's aof_buf).
    pub buf: Vec<u8>,
    /// The stream offset at the end of `buf`.
    pub buffered_to: u64,
    /// Stream offset written to the file / fsynced.
    pub written: u64,
    pub synced: u64,
    /// Written without an fsync under `always` (no-appendfsync-on-rewrite): see `AofProgress::released`.
    pub released: u64,
    /// `aof-timestamp-enabled`, and the unix second of the last `#TS:` annotation written.
    pub timestamps: bool,
    pub last_ts: u64,
    pub fsync: crate::config::AppendFsync,
    pub last_fsync: Instant,
    /// INFO aof_base_size, and the incr files' total (aof_current_size = the sum).
    pub base_size: u64,
    pub incr_size: u64,
    /// aof_current_size after the last rewrite (the automatic rewrite's reference).
    pub rewrite_base_size: u64,
    pub last_write_ok: bool,
    /// The manifest in force, as text (empty while CONFIG SET appendonly yes writes the first base).
    pub manifest: String,
    /// The next rewrite's switch, when prepared and still matching `manifest`.
    pub prepared: Option<PreparedSwitch>,
    /// A switch renamed a manifest into this directory without fsyncing it: the directory is
    /// fsynced before the first fsync of the new incr file (under `always`, before any reply).
    pub dir_sync_owed: Option<std::path::PathBuf>,
}

impl Default for PersistenceStatus {
    fn default() -> Self {
        PersistenceStatus {
            last_save_unix: now_ms() / 1000,
            bgsave_in_progress: false,
            last_bgsave_duration_sec: -1,
            bgsave_started: None,
            saves: 0,
            job: None,
            bgsave_scheduled: false,
            last_bgsave_try_unix: 0,
            last_error: None,
            last_load_keys_loaded: 0,
            last_load_keys_expired: 0,
            aof_rewrite: None,
            aof_rewrite_scheduled: false,
            aof_last_bgrewrite_ok: true,
            aof_last_rewrite_time_sec: -1,
            aof_rewrites: 0,
        }
    }
}

/// A background save in flight.
#[derive(Debug)]
pub struct BgJob {
    /// Set by a synchronous save that supersedes this one.
    pub cancel: AtomicBool,
    /// The outcome once finished: bytes written, or the reason it failed.
    pub outcome: Mutex<Option<Result<u64, String>>>,
    /// The change counter when the snapshot was taken.
    pub dirty_at_start: u64,
    pub started: Instant,
    /// `store::keytable::entries_copied` when the snapshot was taken.
    pub copied_at_start: u64,
}

/// The replication settings read on every write, without the config lock.
#[derive(Default)]
pub struct ReplKnobs {
    pub min_replicas_to_write: AtomicU64,
    pub min_replicas_max_lag: AtomicU64,
    pub read_only: AtomicBool,
    pub serve_stale: AtomicBool,
}

impl ReplKnobs {
    pub fn update(&self, c: &Config) {
        self.min_replicas_to_write
            .store(c.min_replicas_to_write, Ordering::Relaxed);
        self.min_replicas_max_lag
            .store(c.min_replicas_max_lag, Ordering::Relaxed);
        self.read_only.store(c.replica_read_only, Ordering::Relaxed);
        self.serve_stale
            .store(c.replica_serve_stale_data, Ordering::Relaxed);
    }
}

/// The keyspace lock held shared ([`Shared::engine_shared`]), and in debug builds this thread's
/// mark of it, against which the key table checks that the shared path reads and writes only
/// under the stripes it holds (`store::keytable::held`).
pub struct SharedEngine<'a> {
    guard: RwLockReadGuard<'a, Engine>,
    _mark: crate::store::db::held::SharedLockMark,
}

impl std::ops::Deref for SharedEngine<'_> {
    type Target = Engine;

    #[inline]
    fn deref(&self) -> &Engine {
        &self.guard
    }
}

/// Everything connections share. Held in an `Arc`.
pub struct Shared {
    pub config: RwLock<Config>,
    /// The keyspace lock: exclusive for every command but those with a shared-lock path (reads,
    /// and writes in place: `commands::shared_path`), which run side by side on all cores.
    /// Private: the exclusive lock is reached only through [`Shared::engine`], which brings the
    /// replication backlog up to date first.
    engine: RwLock<Engine>,
    pub clients: Mutex<HashMap<u64, Arc<ClientHandle>>>,
    pub next_client_id: AtomicU64,
    pub stats: Stats,
    pub started: Instant,
    pub run_id: String,
    /// The port actually bound (differs from the config when it says 0).
    pub port: AtomicUsize,
    /// Flips to true when the server must stop; connections and the accept loops watch it.
    pub shutdown: tokio::sync::watch::Sender<bool>,
    pub loading: AtomicBool,
    /// The last save (SAVE, BGSAVE, a save point) failed: INFO's `rdb_last_bgsave_status:err`,
    /// and the write refusal ([`Shared::misconf`]). An atomic, not a field of the persistence
    /// status, so that every write reads it without taking that lock.
    pub bgsave_failed: AtomicBool,
    /// Bumped by every configuration change, so connections can cache the values they read on every
    /// request (limits, timeout) and re-read them only when it moves: no shared lock per read.
    pub config_gen: AtomicU64,
    /// Mirrors of config values read on the hot path without the config lock.
    pub maxmemory: AtomicU64,
    /// Whether `maxmemory-policy` evicts (anything but `noeviction`).
    pub maxmemory_evicts: AtomicBool,
    /// Mirrors of the replication settings the dispatcher checks per write.
    pub repl_knobs: ReplKnobs,
    /// The `bf-*` and `cf-*` defaults (and `cf-max-expansions`), for adds on the shared path,
    /// which takes no config lock.
    pub write_config: crate::store::db::WriteConfig,
    /// More than one thread runs batches (a multi-thread runtime; set when the server starts,
    /// before any connection). Then the batch prefetch (`Db::prefetch`) walks the table under
    /// stripes, since another thread's insert may be changing a segment it reads (with one
    /// thread nothing runs beside the batch, and the walk takes no lock: a lock per prefetched
    /// key was +33 instructions a pipelined GET); and commands whose shared handler only pays
    /// off beside other cores take it (`CommandSpec::shared_parallel_only`). Outside the
    /// keyspace lock, since a batch reads it before choosing its lock.
    pub parallel_batches: AtomicBool,
    pub persistence: Mutex<PersistenceStatus>,
    /// The open AOF, when `appendonly yes` (lock order: this, then the keyspace).
    pub aof: Mutex<Option<AofSink>>,
    /// The AOF's figures for INFO, readable without the AOF lock.
    pub aof_info: AofInfo,
    /// `appendfsync always` is in force for the open AOF (commits wait for their fsync).
    pub aof_always: AtomicBool,
    pub aof_commit: AofCommit,
    /// Carries `master_repl_offset` after each batch that fed the replication stream: replica
    /// tasks wait on it for bytes to send.
    pub repl_fed: tokio::sync::watch::Sender<u64>,
    /// Woken when a replica acknowledges an offset (WAIT).
    pub repl_acked: Notify,
    /// SLOWLOG's entries and settings (`slowlog-log-slower-than`, `slowlog-max-len`).
    pub slowlog: super::slowlog::SlowLog,
    /// CLIENT PAUSE in force, if any.
    pub client_pause: super::pause::ClientPause,
    /// INFO's instantaneous rates, sampled by the cron.
    pub instantaneous: Mutex<super::metrics::Instantaneous>,
    /// Bumped by REPLICAOF: the replica-link supervisor (server/) restarts its link.
    pub repl_target: tokio::sync::watch::Sender<u64>,
}

impl Shared {
    /// Mirrors the memory settings read without the config lock: `maxmemory`, whether the
    /// policy evicts, and the policy's kind and LFU parameters for the keys' access clocks
    /// (`store::access`). At startup and after CONFIG SET.
    pub fn apply_memory_config(&self, config: &Config) {
        self.maxmemory.store(config.maxmemory, Ordering::Relaxed);
        self.maxmemory_evicts
            .store(config.maxmemory_policy != "noeviction", Ordering::Relaxed);
        crate::store::access::set_policy(
            config.maxmemory_policy.contains("lfu"),
            config.lfu_log_factor,
            config.lfu_decay_time,
        );
    }

    /// The state of a new server; `commands` is the size of the command table (for its statistics).
    pub fn new(config: Config, commands: usize) -> Arc<Shared> {
        crate::store::access::tick(crate::engine::now_ms());
        let mut engine = Engine::new(config.databases, commands);
        engine.store.set_notify_flags(config.notify_keyspace_events);
        let knobs = ReplKnobs::default();
        knobs.update(&config);
        let obuf_limits = config.client_obuf_limits;
        let tracking_max_keys = config.tracking_table_max_keys;
        let shared = Arc::new(Shared {
            config: RwLock::new(config),
            engine: RwLock::new(engine),
            clients: Mutex::new(HashMap::new()),
            next_client_id: AtomicU64::new(1),
            stats: Stats::default(),
            started: Instant::now(),
            run_id: new_run_id(),
            port: AtomicUsize::new(0),
            shutdown: tokio::sync::watch::channel(false).0,
            loading: AtomicBool::new(false),
            bgsave_failed: AtomicBool::new(false),
            config_gen: AtomicU64::new(0),
            maxmemory: AtomicU64::new(0),
            maxmemory_evicts: AtomicBool::new(false),
            repl_knobs: knobs,
            write_config: crate::store::db::WriteConfig::default(),
            parallel_batches: AtomicBool::new(false),
            persistence: Mutex::new(PersistenceStatus::default()),
            aof: Mutex::new(None),
            aof_info: AofInfo::default(),
            aof_always: AtomicBool::new(false),
            aof_commit: AofCommit::default(),
            repl_fed: tokio::sync::watch::channel(0).0,
            repl_acked: Notify::new(),
            slowlog: Default::default(),
            client_pause: Default::default(),
            instantaneous: Default::default(),
            repl_target: tokio::sync::watch::channel(0).0,
        });
        shared.mirror_write_config(&shared.config());
        shared.apply_memory_config(&shared.config());
        {
            let mut engine = shared.engine();
            engine.pubsub.limit = Some(obuf_limits.pubsub);
            engine.pubsub.monitor_limit = Some(obuf_limits.monitor());
            engine.pubsub.tracking.max_keys = tracking_max_keys;
        }
        shared
    }

    fn mirror_write_config(&self, config: &Config) {
        self.slowlog
            .configure(config.slowlog_log_slower_than, config.slowlog_max_len);
        self.write_config
            .set_hll_sparse_max_bytes(config.hll_sparse_max_bytes as u64);
        self.write_config.set_bloom(
            config.bf_error_rate,
            config.bf_initial_size as u64,
            config.bf_expansion_factor as u32,
        );
        self.write_config
            .set_cuckoo(crate::store::db::CuckooDefaults {
                initial_size: config.cf_initial_size,
                bucket_size: config.cf_bucket_size,
                max_iterations: config.cf_max_iterations,
                expansion: config.cf_expansion_factor,
                max_expansions: config.cf_max_expansions,
            });
    }

    /// The configuration for reading. A poisoned lock still holds a valid config: recover it.
    pub fn config(&self) -> RwLockReadGuard<'_, Config> {
        self.config.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Installs a new configuration; connections pick it up at their next read.
    pub fn replace_config(&self, config: Config) {
        self.repl_knobs.update(&config);
        // CONFIG SET runs under the exclusive keyspace lock, so no shared-path reader sees these
        // half updated.
        self.mirror_write_config(&config);
        *self.config.write().unwrap_or_else(|p| p.into_inner()) = config;
        // After the write, so a connection that sees the new generation reads the new values.
        self.config_gen.fetch_add(1, Ordering::Release);
    }

    /// The keyspace lock. A panic inside a handler is caught before it can poison the lock, but if
    /// one ever does, the data is still the data: recover it rather than refuse service.
    ///
    /// Whoever holds it exclusively finds the replication backlog and `master_repl_offset` up to
    /// date: writes made under the shared lock leave their bytes in the write stream
    /// (`commands::shared_path`), and they are moved into the backlog here, before anyone can
    /// read the offset (INFO, WAIT, a full sync's snapshot, a replica's feed). Without replicas
    /// this is one inlined test ([`Engine::pump_repl`]).
    pub fn engine(&self) -> RwLockWriteGuard<'_, Engine> {
        let mut engine = self.engine.write().unwrap_or_else(|p| p.into_inner());
        engine.pump_repl();
        engine
    }

    /// The keyspace lock, shared: for the read-only commands' shared path only (nothing under it
    /// may change the engine but its atomics).
    pub fn engine_shared(&self) -> SharedEngine<'_> {
        SharedEngine {
            guard: self.engine.read().unwrap_or_else(|p| p.into_inner()),
            _mark: crate::store::db::held::SharedLockMark::new(),
        }
    }

    pub fn clients(&self) -> MutexGuard<'_, HashMap<u64, Arc<ClientHandle>>> {
        self.clients.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn aof(&self) -> MutexGuard<'_, Option<AofSink>> {
        self.aof.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn persistence(&self) -> MutexGuard<'_, PersistenceStatus> {
        self.persistence.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True when writes must be refused because the last background save failed.
    pub fn misconf(&self) -> bool {
        if !self.bgsave_failed.load(Ordering::Relaxed) {
            return false;
        }
        let c = self.config();
        c.stop_writes_on_bgsave_error && !c.save.is_empty()
    }

    /// Asks the server to stop.
    pub fn request_shutdown(&self) {
        self.shutdown.send_replace(true);
        // Connections wait on their outbox's signal, not on the watch (engine::signal).
        let clients: Vec<_> = self.clients().values().cloned().collect();
        for c in clients {
            c.outbox.ready.notify();
        }
    }

    pub fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }
}

/// 40 random hex characters: a run id or a replication id.
pub fn new_run_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::with_capacity(40);
    let state = ahash::RandomState::new();
    let mut i = 0u64;
    while out.len() < 40 {
        let mut h = state.build_hasher();
        h.write_u64(i);
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        out.push_str(&format!("{:016x}", h.finish()));
        i += 1;
    }
    out.truncate(40);
    out
}
