//! Configuration (floor 7, the bottom): one redis.conf-style parser for the file and the
//! `--directive value` flags. Uses only `numeric`, `limits` and the protocol's argument splitter.
//!
//! Every directive hyperbloom understands is a row of [`DIRECTIVES`]: its name as in redis.conf, how to
//! render it for `CONFIG GET`, how to set it, and whether `CONFIG SET` may change it at run time. The
//! file, the command line, `CONFIG GET/SET/REWRITE` and the sample `conf/hyperbloom.conf` all follow
//! this one table. Defaults are Redis's defaults.
//!
//! The command line is turned into config text the way `redis-server` does it: each `--name` starts a
//! new line and the words after it are its arguments, so `--save "900 1"` and `--port 7000` mean the
//! same as the lines `save "900 1"` and `port 7000`.

use std::collections::BTreeMap;
use std::fmt;

use crate::protocol::parser::split_args;

pub mod accepted;
pub mod obuf;
pub mod rewrite;

pub use obuf::{ObufLimits, OutputLimit};

/// The whole configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub port: u16,
    pub bind: Vec<String>,
    pub databases: usize,
    pub dir: String,
    pub dbfilename: String,
    /// Save points: (seconds, changes).
    pub save: Vec<(u64, u64)>,
    /// A `save` line has been read from the file or the flags: the lines after it add their
    /// points to its (Redis's `save_loaded`), where CONFIG SET replaces them all.
    pub save_read: bool,
    /// `rename-command OLD NEW` lines of the file and the flags, in order (NEW empty: the
    /// command is removed). Applied once, when the server binary builds its command table.
    pub renames: Vec<Rename>,
    pub requirepass: Option<String>,
    pub maxclients: usize,
    /// Idle client timeout in seconds (0 = never).
    pub timeout: u64,
    pub tcp_keepalive: u64,
    pub tcp_backlog: u32,
    /// `unixsocket`: also listen on a Unix domain socket at this path ("" = none).
    pub unixsocket: String,
    /// `unixsocketperm`: the socket file's permission bits (0 = leave the umask's).
    pub unixsocketperm: u32,
    pub protected_mode: bool,
    pub loglevel: String,
    pub logfile: String,
    pub maxmemory: u64,
    /// `maxmemory-policy`: one of [`MAXMEMORY_POLICIES`], lowercase.
    pub maxmemory_policy: String,
    /// `maxmemory-samples`: keys sampled per eviction pick (`commands::evict`).
    pub maxmemory_samples: u32,
    /// `lfu-log-factor` and `lfu-decay-time` (`store::access`).
    pub lfu_log_factor: u32,
    pub lfu_decay_time: u32,
    /// `lazyfree-lazy-eviction`: evicted keys propagate as UNLINK instead of DEL.
    pub lazyfree_lazy_eviction: bool,
    /// `slowlog-log-slower-than`: microseconds from which a command enters the slow log (-1:
    /// none does, 0: every command does; `engine::slowlog`).
    pub slowlog_log_slower_than: i64,
    /// `slowlog-max-len`: entries the slow log keeps.
    pub slowlog_max_len: u64,
    /// `maxmemory-eviction-tenacity` (0..=100): how long one eviction run may take
    /// (`engine::evict::time_limit`).
    pub maxmemory_eviction_tenacity: u32,
    /// `notify-keyspace-events` as class bits ([`crate::events`]).
    pub notify_keyspace_events: u32,
    pub proto_max_bulk_len: usize,
    pub client_query_buffer_limit: usize,
    pub rdbcompression: bool,
    pub rdbchecksum: bool,
    /// `rdb-key-save-delay` (hidden, for tests): microseconds slept per key written by a save or
    /// an AOF rewrite; negative: 1 µs with probability 1/|n| (Redis's debugDelay).
    pub rdb_key_save_delay: i32,
    pub stop_writes_on_bgsave_error: bool,
    pub enable_debug_command: String,
    /// `enable-protected-configs`: no, yes or local — who may CONFIG SET the [`PROTECTED`] configs.
    pub enable_protected_configs: String,
    /// `enable-module-command`: no, yes or local — who may run MODULE LOAD/LOADEX/UNLOAD.
    pub enable_module_command: String,
    pub appendonly: bool,
    pub appendfilename: String,
    pub appenddirname: String,
    pub appendfsync: AppendFsync,
    pub no_appendfsync_on_rewrite: bool,
    pub auto_aof_rewrite_percentage: u64,
    pub auto_aof_rewrite_min_size: u64,
    pub aof_load_truncated: bool,
    pub aof_use_rdb_preamble: bool,
    pub aof_timestamp_enabled: bool,
    pub aof_rewrite_incremental_fsync: bool,
    pub hz: u32,
    pub daemonize: bool,
    pub hll_sparse_max_bytes: usize,
    /// `tracking-table-max-keys`: keys CLIENT TRACKING's default-mode table may hold (0 = no
    /// limit).
    pub tracking_table_max_keys: u64,
    /// `bf-error-rate`: error rate of auto-created Bloom filters (a value above 0.25 acts as 0.25).
    pub bf_error_rate: f64,
    /// The text `bf-error-rate` was last set with (CONFIG GET shows it).
    pub bf_error_rate_text: String,
    /// `bf-initial-size`: capacity of auto-created Bloom filters.
    pub bf_initial_size: i64,
    /// `bf-expansion-factor`: growth of new Bloom filters; 0 makes them non-scaling.
    pub bf_expansion_factor: i64,
    /// Cuckoo filter defaults and limits (RedisBloom's `cf-*` configs, cuckoo.md §7).
    pub cf_bucket_size: u16,
    pub cf_initial_size: u64,
    pub cf_max_iterations: u16,
    pub cf_expansion_factor: u16,
    pub cf_max_expansions: u32,
    /// Path of the config file, for CONFIG REWRITE.
    pub config_file: Option<String>,
    // ---- replication (issue 12) ----
    /// `replicaof <host> <port>`: start as a replica of that primary.
    pub replicaof: Option<(String, u16)>,
    pub masterauth: Option<String>,
    pub masteruser: Option<String>,
    pub replica_read_only: bool,
    pub replica_serve_stale_data: bool,
    /// Seconds without data from the other side before a link is dropped.
    pub repl_timeout: u64,
    pub replica_priority: u64,
    pub replica_announce_ip: Option<String>,
    /// 0 = announce the listening port.
    pub replica_announce_port: u16,
    pub replica_announced: bool,
    pub repl_backlog_size: u64,
    /// Seconds a primary keeps its backlog with no replica attached (0 = forever).
    pub repl_backlog_ttl: u64,
    pub repl_ping_replica_period: u64,
    pub repl_diskless_sync: bool,
    pub repl_diskless_sync_delay: u64,
    pub min_replicas_to_write: u64,
    pub min_replicas_max_lag: u64,
    /// `client-output-buffer-limit`: the normal, replica and pubsub classes ([`obuf`]).
    pub client_obuf_limits: ObufLimits,
    /// Values given to accepted, not implemented directives ([`accepted::ACCEPTED`]).
    pub accepted: BTreeMap<&'static str, String>,
    /// Accepted, not implemented directives met while reading the configuration, in order, once
    /// each: the server logs one warning line per name at startup.
    pub not_implemented: Vec<&'static str>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            port: 6379,
            bind: vec!["127.0.0.1".into(), "-::1".into()],
            databases: 16,
            dir: "./".into(),
            dbfilename: "dump.rdb".into(),
            save: vec![(3600, 1), (300, 100), (60, 10000)],
            save_read: false,
            renames: Vec::new(),
            requirepass: None,
            maxclients: 10000,
            timeout: 0,
            tcp_keepalive: 300,
            tcp_backlog: 511,
            unixsocket: String::new(),
            unixsocketperm: 0,
            protected_mode: true,
            loglevel: "notice".into(),
            logfile: String::new(),
            maxmemory: 0,
            maxmemory_policy: "noeviction".into(),
            maxmemory_samples: 5,
            lfu_log_factor: 10,
            lfu_decay_time: 1,
            maxmemory_eviction_tenacity: 10,
            slowlog_log_slower_than: 10_000,
            slowlog_max_len: 128,
            lazyfree_lazy_eviction: false,
            notify_keyspace_events: 0,
            proto_max_bulk_len: 512 * 1024 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            rdbcompression: true,
            rdbchecksum: true,
            rdb_key_save_delay: 0,
            stop_writes_on_bgsave_error: true,
            enable_debug_command: "no".into(),
            enable_protected_configs: "no".into(),
            enable_module_command: "no".into(),
            appendonly: false,
            appendfilename: "appendonly.aof".into(),
            appenddirname: "appendonlydir".into(),
            appendfsync: AppendFsync::EverySec,
            no_appendfsync_on_rewrite: false,
            auto_aof_rewrite_percentage: 100,
            auto_aof_rewrite_min_size: 64 * 1024 * 1024,
            aof_load_truncated: true,
            aof_use_rdb_preamble: true,
            aof_timestamp_enabled: false,
            aof_rewrite_incremental_fsync: true,
            hz: 10,
            daemonize: false,
            hll_sparse_max_bytes: 3000,
            tracking_table_max_keys: 1_000_000,
            bf_error_rate: 0.01,
            bf_error_rate_text: "0.01".into(),
            bf_initial_size: 100,
            bf_expansion_factor: 2,
            cf_bucket_size: 2,
            cf_initial_size: 1024,
            cf_max_iterations: 20,
            cf_expansion_factor: 1,
            cf_max_expansions: 32,
            config_file: None,
            replicaof: None,
            masterauth: None,
            masteruser: None,
            replica_read_only: true,
            replica_serve_stale_data: true,
            repl_timeout: 60,
            replica_priority: 100,
            replica_announce_ip: None,
            replica_announce_port: 0,
            replica_announced: true,
            repl_backlog_size: 1024 * 1024,
            repl_backlog_ttl: 3600,
            repl_ping_replica_period: 10,
            repl_diskless_sync: true,
            repl_diskless_sync_delay: 5,
            min_replicas_to_write: 0,
            min_replicas_max_lag: 10,
            client_obuf_limits: ObufLimits::default(),
            accepted: BTreeMap::new(),
            not_implemented: Vec::new(),
        }
    }
}

/// Why a directive was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `appendfsync`: when the AOF is fsynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendFsync {
    /// After every batch of writes, before the replies go out (group commit).
    Always,
    /// Once a second, in the background.
    EverySec,
    /// Never explicitly (the kernel decides).
    No,
}

impl AppendFsync {
    pub fn name(self) -> &'static str {
        match self {
            AppendFsync::Always => "always",
            AppendFsync::EverySec => "everysec",
            AppendFsync::No => "no",
        }
    }
}

/// A file name for the AOF: no path separators (Redis: "appendfilename can't be a path, just a
/// filename").
fn aof_name(args: &[String], what: &str) -> Result<String, String> {
    let v = one(args)?;
    if v.contains('/') || v.is_empty() {
        return Err(format!("{what} can't be a path, just a filename"));
    }
    Ok(v.to_string())
}

type Getter = fn(&Config) -> String;
type Setter = fn(&mut Config, &[String]) -> Result<(), String>;

/// One directive.
pub struct Directive {
    pub name: &'static str,
    pub get: Getter,
    pub set: Setter,
    /// May CONFIG SET change it while running?
    pub mutable: bool,
    /// One line for the sample config and CONFIG docs.
    pub doc: &'static str,
}

/// The values `maxmemory-policy` takes, in the order Redis's error lists them.
pub const MAXMEMORY_POLICIES: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

fn one(args: &[String]) -> Result<&str, String> {
    match args {
        [a] => Ok(a.as_str()),
        _ => Err("wrong number of arguments".into()),
    }
}

fn parse_bool(args: &[String]) -> Result<bool, String> {
    match one(args)?.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err("argument must be 'yes' or 'no'".into()),
    }
}

/// Integers with Redis's memory units (1k = 1000, 1kb = 1024, ... up to gb).
pub fn parse_memory(s: &str) -> Result<u64, String> {
    let lower = s.to_ascii_lowercase();
    let units: [(&str, u64); 8] = [
        ("kb", 1024),
        ("mb", 1024 * 1024),
        ("gb", 1024 * 1024 * 1024),
        ("k", 1000),
        ("m", 1_000_000),
        ("g", 1_000_000_000),
        ("b", 1),
        ("", 1),
    ];
    for (suffix, mul) in units {
        if let Some(num) = lower.strip_suffix(suffix) {
            if num.is_empty() {
                continue;
            }
            if let Ok(n) = num.parse::<u64>() {
                return n
                    .checked_mul(mul)
                    .ok_or_else(|| "argument out of range".into());
            }
            if !suffix.is_empty() {
                return Err("argument must be a memory value".into());
            }
        }
    }
    Err("argument must be a memory value".into())
}

fn parse_num<T: std::str::FromStr>(args: &[String], min: i128, max: i128) -> Result<T, String> {
    let s = one(args)?;
    // Redis's string2ll: no `+`, no leading zero or space, within i64 (then the range).
    let n = crate::numeric::parse_i64(s.as_bytes())
        .ok_or_else(|| "argument couldn't be parsed into an integer".to_string())?
        as i128;
    if n < min || n > max {
        return Err(format!(
            "argument must be between {min} and {max} inclusive"
        ));
    }
    s.parse::<T>()
        .map_err(|_| "argument couldn't be parsed into an integer".into())
}

/// An octal setting as Redis reads one (`strtoll(value, &end, 8)`, then the range): leading
/// white space and a sign are allowed, nothing after the digits, and "" is 0. The range error
/// shows the bounds in octal, as Redis's does.
fn parse_octal(s: &str, max: u32) -> Result<u32, String> {
    const NOT_OCTAL: &str = "argument couldn't be parsed as an octal number";
    let t = s.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let (negative, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    // No digits: strtoll converts nothing and leaves the end at the start, so only "" passes.
    if digits.is_empty() && !s.is_empty() {
        return Err(NOT_OCTAL.into());
    }
    let mut n: i64 = 0;
    for b in digits.bytes() {
        if !(b'0'..=b'7').contains(&b) {
            return Err(NOT_OCTAL.into());
        }
        n = n
            .checked_mul(8)
            .and_then(|n| n.checked_add(i64::from(b - b'0')))
            .ok_or(NOT_OCTAL)?;
    }
    let n = if negative { -n } else { n };
    if n < 0 || n > i64::from(max) {
        return Err(format!("argument must be between 0 and {max:o} inclusive"));
    }
    Ok(n as u32)
}

/// RedisBloom's integer settings: strict integer within `[min, max]`, with its error texts.
fn bf_int(args: &[String], name: &str, min: i64, max: i64) -> Result<i64, String> {
    let v = crate::numeric::parse_i64(one(args)?.as_bytes())
        .ok_or_else(|| format!("Invalid value for `{name}`"))?;
    if v < min || v > max {
        return Err(format!(
            "Value for `{name}` must be in the range [{min}, {max}]"
        ));
    }
    Ok(v)
}

/// CONFIG SET save: the points given replace all of them.
fn set_save(c: &mut Config, args: &[String]) -> Result<(), String> {
    c.save = parse_save(args)?;
    Ok(())
}

/// The points of a `save` line: both `save 900 1 300 10` and `save "900 1 300 10"`; `save ""`
/// is none. Seconds must be at least 1, as Redis checks.
fn parse_save(args: &[String]) -> Result<Vec<(u64, u64)>, String> {
    let words: Vec<&str> = args.iter().flat_map(|a| a.split_whitespace()).collect();
    if !words.len().is_multiple_of(2) {
        return Err("Invalid save parameters".into());
    }
    let mut points = Vec::new();
    for pair in words.chunks(2) {
        let secs = pair[0]
            .parse::<u64>()
            .ok()
            .filter(|&s| s >= 1)
            .ok_or("Invalid save parameters")?;
        let changes = pair[1]
            .parse::<u64>()
            .map_err(|_| "Invalid save parameters")?;
        points.push((secs, changes));
    }
    Ok(points)
}

fn get_save(c: &Config) -> String {
    c.save
        .iter()
        .map(|(s, n)| format!("{s} {n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The configs Redis 7.0 marks PROTECTED_CONFIG: CONFIG SET refuses them unless
/// `enable-protected-configs` allows the client (checked with redis-server 7.0.15: of its 192
/// configs, CONFIG SET answers "can't set protected config" for exactly these two).
pub const PROTECTED: &[&str] = &["dir", "dbfilename"];

/// Is `name` a protected config?
pub fn is_protected(name: &str) -> bool {
    PROTECTED.iter().any(|p| p.eq_ignore_ascii_case(name))
}

/// Redis's allowProtectedAction: `yes`, or `local` for a client on a loopback address.
pub fn allows_protected(setting: &str, loopback: bool) -> bool {
    setting == "yes" || (setting == "local" && loopback)
}

/// The enum of `enable-debug-command`, `enable-module-command`, `enable-protected-configs`.
fn protected_action(args: &[String]) -> Result<String, String> {
    let v = one(args)?.to_ascii_lowercase();
    if !["yes", "no", "local"].contains(&v.as_str()) {
        return Err("argument(s) must be one of the following: no, yes, local".into());
    }
    Ok(v)
}

/// Redis's `dir` setter chdir()s and reports strerror on failure. hyperbloom does not change the
/// process's directory (several servers may share a process in tests), so it checks what chdir
/// would: the path exists and is a directory, with the same texts.
fn check_dir(dir: &str) -> Result<(), String> {
    if dir.is_empty() {
        return Err("No such file or directory".into());
    }
    let meta = std::fs::metadata(dir).map_err(|e| crate::error::strerror(&e))?;
    if !meta.is_dir() {
        return Err("Not a directory".into());
    }
    Ok(())
}

/// Every directive, in the order of the sample config.
pub static DIRECTIVES: &[Directive] = &[
    Directive {
        name: "port",
        doc: "TCP port to listen on (0: none if a unixsocket is set, else a free one).",
        mutable: false,
        get: |c| c.port.to_string(),
        set: |c, a| {
            c.port = parse_num(a, 0, 65535)?;
            Ok(())
        },
    },
    Directive {
        name: "bind",
        doc: "Addresses to listen on; a leading '-' means 'skip if unavailable'.",
        mutable: false,
        get: |c| c.bind.join(" "),
        set: |c, a| {
            c.bind = a
                .iter()
                .flat_map(|s| s.split_whitespace())
                .map(String::from)
                .collect();
            Ok(())
        },
    },
    Directive {
        name: "protected-mode",
        doc: "Refuse non-loopback clients when no password is set.",
        mutable: true,
        get: |c| yes_no(c.protected_mode),
        set: |c, a| {
            c.protected_mode = parse_bool(a)?;
            Ok(())
        },
    },
    Directive {
        name: "tcp-backlog",
        doc: "Listen backlog.",
        mutable: false,
        get: |c| c.tcp_backlog.to_string(),
        set: |c, a| {
            c.tcp_backlog = parse_num(a, 0, i32::MAX as i128)?;
            Ok(())
        },
    },
    Directive {
        name: "unixsocket",
        doc: "Also listen on a Unix domain socket at this path (\"\" = none).",
        mutable: false,
        get: |c| c.unixsocket.clone(),
        set: |c, a| {
            c.unixsocket = one(a)?.to_string();
            Ok(())
        },
    },
    Directive {
        name: "unixsocketperm",
        doc: "Permission bits of the Unix socket file, in octal (0 = as the umask leaves them).",
        mutable: false,
        get: |c| format!("{:o}", c.unixsocketperm),
        set: |c, a| {
            c.unixsocketperm = parse_octal(one(a)?, 0o777)?;
            Ok(())
        },
    },
    Directive {
        name: "timeout",
        doc: "Close a client idle for this many seconds (0 = never).",
        mutable: true,
        get: |c| c.timeout.to_string(),
        set: |c, a| {
            c.timeout = parse_num(a, 0, i32::MAX as i128)?;
            Ok(())
        },
    },
    Directive {
        name: "tcp-keepalive",
        doc: "TCP keepalive interval in seconds (0 = off).",
        mutable: true,
        get: |c| c.tcp_keepalive.to_string(),
        set: |c, a| {
            c.tcp_keepalive = parse_num(a, 0, i32::MAX as i128)?;
            Ok(())
        },
    },
    Directive {
        name: "daemonize",
        doc: "Accepted for compatibility; hyperbloom always runs in the foreground.",
        mutable: false,
        get: |c| yes_no(c.daemonize),
        set: |c, a| {
            c.daemonize = parse_bool(a)?;
            Ok(())
        },
    },
    Directive {
        name: "loglevel",
        doc: "debug, verbose, notice or warning.",
        mutable: true,
        get: |c| c.loglevel.clone(),
        set: |c, a| {
            let v = one(a)?.to_ascii_lowercase();
            if !["debug", "verbose", "notice", "warning", "nothing"].contains(&v.as_str()) {
                return Err("argument(s) must be one of the following: debug, verbose, notice, warning, nothing".into());
            }
            c.loglevel = v;
            Ok(())
        },
    },
    Directive {
        name: "logfile",
        doc: "Accepted for compatibility; logs always go to stdout.",
        mutable: false,
        get: |c| c.logfile.clone(),
        set: |c, a| {
            c.logfile = a.join(" ");
            Ok(())
        },
    },
    Directive {
        name: "databases",
        doc: "Number of databases (SELECT 0..n-1).",
        mutable: false,
        get: |c| c.databases.to_string(),
        set: |c, a| {
            c.databases = parse_num(a, 1, i32::MAX as i128)?;
            Ok(())
        },
    },
    Directive {
        name: "save",
        doc: "Snapshot after <seconds> if at least <changes> writes happened; \"\" disables.",
        mutable: true,
        get: get_save,
        set: set_save,
    },
    Directive {
        name: "stop-writes-on-bgsave-error",
        doc: "Refuse writes while the last background save failed.",
        mutable: true,
        get: |c| yes_no(c.stop_writes_on_bgsave_error),
        set: |c, a| {
            c.stop_writes_on_bgsave_error = parse_bool(a)?;
            Ok(())
        },
    },
    Directive {
        name: "rdbcompression",
        doc: "LZF-compress strings in snapshots.",
        mutable: true,
        get: |c| yes_no(c.rdbcompression),
        set: |c, a| {
            c.rdbcompression = parse_bool(a)?;
            Ok(())
        },
    },
    Directive {
        name: "rdbchecksum",
        doc: "Write and verify the CRC-64 at the end of snapshots.",
        mutable: true,
        get: |c| yes_no(c.rdbchecksum),
        set: |c, a| {
            c.rdbchecksum = parse_bool(a)?;
            Ok(())
        },
    },
    Directive {
        name: "rdb-key-save-delay",
        doc: "Testing only: microseconds slept per key a save or rewrite writes (hidden, as in Redis).",
        mutable: true,
        get: |c| c.rdb_key_save_delay.to_string(),
        set: |c, a| {
            c.rdb_key_save_delay = parse_num(a, i32::MIN as i128, i32::MAX as i128)?;
            Ok(())
        },
    },
    Directive {
        name: "dbfilename",
        doc: "Snapshot file name.",
        mutable: true,
        get: |c| c.dbfilename.clone(),
        set: |c, a| {
            let v = one(a)?;
            if v.contains('/') {
                return Err("dbfilename can't be a path, just a filename".into());
            }
            c.dbfilename = v.into();
            Ok(())
        },
    },
    Directive {
        name: "dir",
        doc: "Working directory: snapshots are written here.",
        mutable: true,
        get: |c| c.dir.clone(),
        set: |c, a| {
            let dir = one(a)?;
            check_dir(dir)?;
            c.dir = dir.into();
            Ok(())
        },
    },
    Directive {
        name: "requirepass",
        doc: "Password clients must AUTH with (empty = none).",
        mutable: true,
        get: |c| c.requirepass.clone().unwrap_or_default(),
        set: |c, a| {
            let v = a.join(" ");
            c.requirepass = if v.is_empty() { None } else { Some(v) };
            Ok(())
        },
    },
    Directive {
        name: "maxclients",
        doc: "Maximum simultaneous clients.",
        mutable: true,
        get: |c| c.maxclients.to_string(),
        set: |c, a| {
            c.maxclients = parse_num(a, 1, u32::MAX as i128)?;
            Ok(())
        },
    },
    Directive {
        name: "maxmemory",
        doc: "Memory limit: above it, evict by maxmemory-policy or refuse deny-oom commands (0 = no limit).",
        mutable: true,
        get: |c| c.maxmemory.to_string(),
        set: |c, a| {
            c.maxmemory = parse_memory(one(a)?)?;
            Ok(())
        },
    },
    Directive {
        name: "maxmemory-policy",
        doc: "What to evict over maxmemory: noeviction, allkeys-/volatile-lru, -lfu, -random, volatile-ttl.",
        mutable: true,
        get: |c| c.maxmemory_policy.clone(),
        set: |c, a| {
            let policy = one(a)?.to_ascii_lowercase();
            if !MAXMEMORY_POLICIES.contains(&policy.as_str()) {
                return Err(format!(
                    "argument(s) must be one of the following: {}",
                    MAXMEMORY_POLICIES.join(", ")
                ));
            }
            c.maxmemory_policy = policy;
            Ok(())
        },
    },
    Directive {
        name: "maxmemory-samples",
        doc: "Keys sampled for each eviction (LRU, LFU and TTL policies).",
        mutable: true,
        get: |c| c.maxmemory_samples.to_string(),
        set: |c, a| {
            c.maxmemory_samples = parse_num(a, 1, i32::MAX as i128)?;
            Ok(())
        },
    },
    Directive {
        name: "lfu-log-factor",
        doc: "How slowly the LFU counter grows (LFU policies).",
        mutable: true,
        get: |c| c.lfu_log_factor.to_string(),
        set: |c, a| {
            c.lfu_log_factor = parse_num(a, 0, i32::MAX as i128)?;
            Ok(())
        },
    },
    Directive {
        name: "lfu-decay-time",
        doc: "Minutes for the LFU counter to lose one (0 = never).",
        mutable: true,
        get: |c| c.lfu_decay_time.to_string(),
        set: |c, a| {
            c.lfu_decay_time = parse_num(a, 0, i32::MAX as i128)?;
            Ok(())
        },
    },
    Directive {
        name: "slowlog-log-slower-than",
        doc: "Microseconds from which a command is logged in the slow log (-1 none, 0 all).",
        mutable: true,
        get: |c| c.slowlog_log_slower_than.to_string(),
        set: |c, a| {
            c.slowlog_log_slower_than = parse_num(a, -1, i64::MAX as i128)?;
            Ok(())
        },
    },
    Directive {
        name: "slowlog-max-len",
        doc: "Entries the slow log keeps.",
        mutable: true,
        get: |c| c.slowlog_max_len.to_string(),
        set: |c, a| {
            c.slowlog_max_len = parse_num(a, 0, i64::MAX as i128)?;
            Ok(())
        },
    },
    Directive {
        name: "maxmemory-eviction-tenacity",
        doc: "How long one eviction run may take: 0-10 is 0-500 us, then 15 % more per step, 100 no limit.",
        mutable: true,
        get: |c| c.maxmemory_eviction_tenacity.to_string(),
        set: |c, a| {
            c.maxmemory_eviction_tenacity = parse_num(a, 0, 100)?;
            Ok(())
        },
    },
    Directive {
        name: "lazyfree-lazy-eviction",
        doc: "Evicted keys reach the AOF and replicas as UNLINK instead of DEL.",
        mutable: true,
        get: |c| yes_no(c.lazyfree_lazy_eviction),
        set: |c, a| {
            c.lazyfree_lazy_eviction = parse_bool(a)?;
            Ok(())
        },
    },
    Directive {
        name: "notify-keyspace-events",
        doc: "Keyspace events to publish: K, E and the classes g $ x e n m d ... (A = g$lshzxetd).",
        mutable: true,
        get: |c| crate::events::to_text(c.notify_keyspace_events),
        set: |c, a| {
            c.notify_keyspace_events = crate::events::parse(one(a)?).ok_or_else(|| {
                "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".to_string()
            })?;
            Ok(())
        },
    },
    Directive {
        name: "appendonly",
        doc: "Log every write to the append-only files in appenddirname (Redis 7 multi-part AOF).",
        mutable: true,
        get: |c| yes_no(c.appendonly),
        set: |c, a| {
            c.appendonly = parse_bool(a)?;
            Ok(())
        },
    },
    Directive {
        name: "appendfilename",
        doc: "Base name of the AOF files (appendonly.aof.1.base.rdb, ...).",
        mutable: false,
        get: |c| c.appendfilename.clone(),
        set: |c, a| {
            c.appendfilename = aof_name(a, "appendfilename")?;
            Ok(())
        },
    },
    Directive {
        name: "appenddirname",
        doc: "Directory (inside dir) holding the AOF files and their manifest.",
        mutable: false,
        get: |c| c.appenddirname.clone(),
        set: |c, a| {
            c.appenddirname = aof_name(a, "appenddirname")?;
            Ok(())
        },
    },
    Directive {
        name: "appendfsync",
        doc: "always (fsync before replying, one fsync per batch), everysec, or no.",
        mutable: true,
        get: |c| c.appendfsync.name().into(),
        set: |c, a| {
            c.appendfsync = match one(a)?.to_ascii_lowercase().as_str() {
                "always" => AppendFsync::Always,
                "everysec" => AppendFsync::EverySec,
                "no" => AppendFsync::No,
                _ => return Err("argument(s) must be one of the following: always, everysec, no".into()),
            };
            Ok(())
        },
    },
    Directive {
        name: "no-appendfsync-on-rewrite",
        doc: "Skip the AOF fsync while a rewrite or BGSAVE runs.",
        mutable: true,
        get: |c| yes_no(c.no_appendfsync_on_rewrite),
        set: |c, a| {
            c.no_appendfsync_on_rewrite = parse_bool(a)?;
            Ok(())
        },
    },
    Directive {
        name: "auto-aof-rewrite-percentage",
        doc: "Rewrite when the AOF grew by this percentage over its size after the last rewrite (0: never).",
        mutable: true,
        get: |c| c.auto_aof_rewrite_percentage.to_string(),
        set: |c, a| {
            let v = one(a)?
                .parse::<i64>()
                .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
            if !(0..=i32::MAX as i64).contains(&v) {
                return Err("argument must be between 0 and 2147483647 inclusive".into());
            }
            c.auto_aof_rewrite_percentage = v as u64;
            Ok(())
        },
    },
    Directive {
        name: "auto-aof-rewrite-min-size",
        doc: "No automatic rewrite below this AOF size.",
        mutable: true,
        get: |c| c.auto_aof_rewrite_min_size.to_string(),
        set: |c, a| {
            c.auto_aof_rewrite_min_size = parse_memory(one(a)?)?;
            Ok(())
        },
    },
    Directive {
        name: "aof-load-truncated",
        doc: "Load an AOF whose last command is cut short (yes) or refuse to start (no).",
        mutable: true,
        get: |c| yes_no(c.aof_load_truncated),
        set: |c, a| {
            c.aof_load_truncated = parse_bool(a)?;
            Ok(())
        },
    },
    Directive {
        name: "aof-use-rdb-preamble",
        doc: "Write the AOF base file in RDB format (yes) or as commands (no).",
        mutable: true,
        get: |c| yes_no(c.aof_use_rdb_preamble),
        set: |c, a| {
            c.aof_use_rdb_preamble = parse_bool(a)?;
            Ok(())
        },
    },
    Directive {
        name: "aof-timestamp-enabled",
        doc: "Annotate the AOF with #TS:<unix time> lines.",
        mutable: true,
        get: |c| yes_no(c.aof_timestamp_enabled),
        set: |c, a| {
            c.aof_timestamp_enabled = parse_bool(a)?;
            Ok(())
        },
    },
    Directive {
        name: "aof-rewrite-incremental-fsync",
        doc: "fsync the rewritten base every 4 MB while writing it.",
        mutable: true,
        get: |c| yes_no(c.aof_rewrite_incremental_fsync),
        set: |c, a| {
            c.aof_rewrite_incremental_fsync = parse_bool(a)?;
            Ok(())
        },
    },
    Directive {
        name: "proto-max-bulk-len",
        doc: "Largest bulk argument a client may send.",
        mutable: true,
        get: |c| c.proto_max_bulk_len.to_string(),
        set: |c, a| {
            let v = parse_memory(one(a)?)?;
            if v < 1024 * 1024 {
                return Err(
                    "argument must be between 1048576 and 9223372036854775807 inclusive".into(),
                );
            }
            c.proto_max_bulk_len = v as usize;
            Ok(())
        },
    },
    Directive {
        name: "client-query-buffer-limit",
        doc: "Disconnect a client whose unparsed input exceeds this.",
        mutable: true,
        get: |c| c.client_query_buffer_limit.to_string(),
        set: |c, a| {
            let v = parse_memory(one(a)?)?;
            if v < 1024 * 1024 {
                return Err(
                    "argument must be between 1048576 and 9223372036854775807 inclusive".into(),
                );
            }
            c.client_query_buffer_limit = v as usize;
            Ok(())
        },
    },
    Directive {
        name: "hz",
        doc: "Background task frequency (expiry, save points, timeouts).",
        mutable: true,
        get: |c| c.hz.to_string(),
        set: |c, a| {
            // Redis accepts 0..INT_MAX and clamps to 1..500 (updateHZ); CONFIG GET shows the
            // clamped value.
            let hz: u32 = parse_num(a, 0, i32::MAX as i128)?;
            c.hz = hz.clamp(1, 500);
            Ok(())
        },
    },
    Directive {
        name: "enable-debug-command",
        doc: "yes, local or no: who may run DEBUG (local = loopback clients only).",
        mutable: false,
        get: |c| c.enable_debug_command.clone(),
        set: |c, a| {
            c.enable_debug_command = protected_action(a)?;
            Ok(())
        },
    },
    Directive {
        name: "enable-protected-configs",
        doc: "yes, local or no: who may CONFIG SET dir and dbfilename (local = loopback clients only).",
        mutable: false,
        get: |c| c.enable_protected_configs.clone(),
        set: |c, a| {
            c.enable_protected_configs = protected_action(a)?;
            Ok(())
        },
    },
    Directive {
        name: "enable-module-command",
        doc: "yes, local or no: who may run MODULE LOAD/LOADEX/UNLOAD (local = loopback clients only).",
        mutable: false,
        get: |c| c.enable_module_command.clone(),
        set: |c, a| {
            c.enable_module_command = protected_action(a)?;
            Ok(())
        },
    },
    Directive {
        name: "tracking-table-max-keys",
        doc: "Keys CLIENT TRACKING remembers for its clients (0 = no limit); beyond it random keys are dropped and invalidated.",
        mutable: true,
        get: |c| c.tracking_table_max_keys.to_string(),
        set: |c, a| {
            c.tracking_table_max_keys = parse_num(a, 0, i64::MAX as i128)?;
            Ok(())
        },
    },
    Directive {
        name: "hll-sparse-max-bytes",
        doc: "Largest sparse HyperLogLog before it turns dense.",
        mutable: true,
        get: |c| c.hll_sparse_max_bytes.to_string(),
        set: |c, a| {
            c.hll_sparse_max_bytes = parse_memory(one(a)?)? as usize;
            Ok(())
        },
    },
    Directive {
        name: "bf-error-rate",
        doc: "Error rate of Bloom filters created by BF.ADD/BF.MADD/BF.INSERT (0 < rate < 1; above 0.25 acts as 0.25).",
        mutable: true,
        get: |c| c.bf_error_rate_text.clone(),
        set: |c, a| {
            let text = one(a)?;
            let v = crate::numeric::parse_f64(text.as_bytes())
                .ok_or("Invalid value for `bf-error-rate`")?;
            if !(v > 0.0 && v < 1.0) {
                return Err(
                    "Value for `bf-error-rate` must be in the range (0.000000, 1.000000)".into(),
                );
            }
            c.bf_error_rate = v.min(crate::limits::BF_MAX_ERROR_RATE);
            c.bf_error_rate_text = text.to_string();
            Ok(())
        },
    },
    Directive {
        name: "bf-initial-size",
        doc: "Capacity of Bloom filters created by BF.ADD/BF.MADD/BF.INSERT (1 to 1073741824).",
        mutable: true,
        get: |c| c.bf_initial_size.to_string(),
        set: |c, a| {
            c.bf_initial_size = bf_int(a, "bf-initial-size", 1, crate::limits::BF_MAX_CAPACITY)?;
            Ok(())
        },
    },
    Directive {
        name: "bf-expansion-factor",
        doc: "Growth of each new Bloom sub-filter (0 to 32768; 0 = non-scaling).",
        mutable: true,
        get: |c| c.bf_expansion_factor.to_string(),
        set: |c, a| {
            c.bf_expansion_factor =
                bf_int(a, "bf-expansion-factor", 0, crate::limits::BF_MAX_EXPANSION)?;
            Ok(())
        },
    },
    Directive {
        name: "cf-bucket-size",
        doc: "Cuckoo filters: default slots per bucket (at most cf-initial-size / 2).",
        mutable: true,
        get: |c| c.cf_bucket_size.to_string(),
        set: |c, a| {
            let max = (c.cf_initial_size / 2).min(255) as i64;
            c.cf_bucket_size = bf_int(a, "cf-bucket-size", 1, max)? as u16;
            Ok(())
        },
    },
    Directive {
        name: "cf-initial-size",
        doc: "Cuckoo filters: default capacity of auto-created filters (at least 2 * cf-bucket-size).",
        mutable: true,
        get: |c| c.cf_initial_size.to_string(),
        set: |c, a| {
            let min = 2 * c.cf_bucket_size as i64;
            c.cf_initial_size = bf_int(a, "cf-initial-size", min, 1 << 30)? as u64;
            Ok(())
        },
    },
    Directive {
        name: "cf-max-iterations",
        doc: "Cuckoo filters: default eviction steps per insert.",
        mutable: true,
        get: |c| c.cf_max_iterations.to_string(),
        set: |c, a| {
            c.cf_max_iterations = bf_int(a, "cf-max-iterations", 1, 65535)? as u16;
            Ok(())
        },
    },
    Directive {
        name: "cf-expansion-factor",
        doc: "Cuckoo filters: default growth factor (0 = never grow).",
        mutable: true,
        get: |c| c.cf_expansion_factor.to_string(),
        set: |c, a| {
            c.cf_expansion_factor = bf_int(a, "cf-expansion-factor", 0, 32768)? as u16;
            Ok(())
        },
    },
    Directive {
        name: "cf-max-expansions",
        doc: "Cuckoo filters: adds are refused once a filter has this many sub-filters.",
        mutable: true,
        get: |c| c.cf_max_expansions.to_string(),
        set: |c, a| {
            c.cf_max_expansions = bf_int(a, "cf-max-expansions", 1, 65536)? as u32;
            Ok(())
        },
    },
    Directive {
        name: "replicaof",
        doc: "Replicate <host> <port> at startup (REPLICAOF at run time).",
        mutable: false,
        get: |c| c.replicaof.as_ref().map(|(h, p)| format!("{h} {p}")).unwrap_or_default(),
        set: |c, a| {
            let words: Vec<&str> = a.iter().flat_map(|s| s.split_whitespace()).collect();
            c.replicaof = match words[..] {
                [] => None,
                [h, p] if h.eq_ignore_ascii_case("no") && p.eq_ignore_ascii_case("one") => None,
                [h, p] => Some((
                    h.to_string(),
                    p.parse().map_err(|_| "Invalid master port".to_string())?,
                )),
                _ => return Err("wrong number of arguments".into()),
            };
            Ok(())
        },
    },
    Directive {
        name: "masterauth",
        doc: "Password this replica sends to its primary.",
        mutable: true,
        get: |c| c.masterauth.clone().unwrap_or_default(),
        set: |c, a| {
            let v = a.join(" ");
            c.masterauth = if v.is_empty() { None } else { Some(v) };
            Ok(())
        },
    },
    Directive {
        name: "masteruser",
        doc: "ACL user this replica authenticates as (AUTH <user> <pass>).",
        mutable: true,
        get: |c| c.masteruser.clone().unwrap_or_default(),
        set: |c, a| {
            let v = a.join(" ");
            c.masteruser = if v.is_empty() { None } else { Some(v) };
            Ok(())
        },
    },
    Directive {
        name: "replica-read-only",
        doc: "A replica refuses writes from its own clients.",
        mutable: true,
        get: |c| yes_no(c.replica_read_only),
        set: |c, a| {
            c.replica_read_only = parse_bool(a)?;
            Ok(())
        },
    },
    Directive {
        name: "replica-serve-stale-data",
        doc: "While the link to the primary is down, keep answering reads (no = -MASTERDOWN).",
        mutable: true,
        get: |c| yes_no(c.replica_serve_stale_data),
        set: |c, a| {
            c.replica_serve_stale_data = parse_bool(a)?;
            Ok(())
        },
    },
    Directive {
        name: "repl-timeout",
        doc: "Seconds of silence after which a replication link is dropped.",
        mutable: true,
        get: |c| c.repl_timeout.to_string(),
        set: |c, a| {
            c.repl_timeout = parse_num(a, 1, i32::MAX as i128)?;
            Ok(())
        },
    },
    Directive {
        name: "replica-priority",
        doc: "Sentinel promotes the replica with the lowest priority (0 = never).",
        mutable: true,
        get: |c| c.replica_priority.to_string(),
        set: |c, a| {
            c.replica_priority = parse_num(a, 0, i32::MAX as i128)?;
            Ok(())
        },
    },
    Directive {
        name: "replica-announce-ip",
        doc: "Address this replica announces to its primary.",
        mutable: true,
        get: |c| c.replica_announce_ip.clone().unwrap_or_default(),
        set: |c, a| {
            let v = a.join(" ");
            c.replica_announce_ip = if v.is_empty() { None } else { Some(v) };
            Ok(())
        },
    },
    Directive {
        name: "replica-announce-port",
        doc: "Port this replica announces to its primary (0 = the listening port).",
        mutable: true,
        get: |c| c.replica_announce_port.to_string(),
        set: |c, a| {
            c.replica_announce_port = parse_num(a, 0, 65535)?;
            Ok(())
        },
    },
    Directive {
        name: "replica-announced",
        doc: "Whether Sentinel should list this replica.",
        mutable: true,
        get: |c| yes_no(c.replica_announced),
        set: |c, a| {
            c.replica_announced = parse_bool(a)?;
            Ok(())
        },
    },
    Directive {
        name: "repl-backlog-size",
        doc: "Bytes of the replication stream kept for partial resyncs.",
        mutable: true,
        get: |c| c.repl_backlog_size.to_string(),
        set: |c, a| {
            c.repl_backlog_size = parse_memory(one(a)?)?.max(16 * 1024);
            Ok(())
        },
    },
    Directive {
        name: "repl-backlog-ttl",
        doc: "Seconds a primary without replicas keeps its backlog (0 = forever).",
        mutable: true,
        get: |c| c.repl_backlog_ttl.to_string(),
        set: |c, a| {
            c.repl_backlog_ttl = parse_num(a, 0, i32::MAX as i128)?;
            Ok(())
        },
    },
    Directive {
        name: "repl-ping-replica-period",
        doc: "A primary PINGs its replicas every this many seconds.",
        mutable: true,
        get: |c| c.repl_ping_replica_period.to_string(),
        set: |c, a| {
            c.repl_ping_replica_period = parse_num(a, 1, i32::MAX as i128)?;
            Ok(())
        },
    },
    Directive {
        name: "repl-diskless-sync",
        doc: "Stream full-sync snapshots to replicas without a file ($EOF: framing).",
        mutable: true,
        get: |c| yes_no(c.repl_diskless_sync),
        set: |c, a| {
            c.repl_diskless_sync = parse_bool(a)?;
            Ok(())
        },
    },
    Directive {
        name: "repl-diskless-sync-delay",
        doc: "Accepted for compatibility; hyperbloom starts each full sync at once.",
        mutable: true,
        get: |c| c.repl_diskless_sync_delay.to_string(),
        set: |c, a| {
            c.repl_diskless_sync_delay = parse_num(a, 0, i32::MAX as i128)?;
            Ok(())
        },
    },
    Directive {
        name: "min-replicas-to-write",
        doc: "Refuse writes unless this many replicas acknowledged within min-replicas-max-lag.",
        mutable: true,
        get: |c| c.min_replicas_to_write.to_string(),
        set: |c, a| {
            c.min_replicas_to_write = parse_num(a, 0, i32::MAX as i128)?;
            Ok(())
        },
    },
    Directive {
        name: "min-replicas-max-lag",
        doc: "Seconds since a replica's last ACK for it to count toward min-replicas-to-write.",
        mutable: true,
        get: |c| c.min_replicas_max_lag.to_string(),
        set: |c, a| {
            c.min_replicas_max_lag = parse_num(a, 0, i32::MAX as i128)?;
            Ok(())
        },
    },
    Directive {
        name: OBUF_DIRECTIVE,
        doc: "Per class (normal, replica, pubsub): <class> <hard> <soft> <soft-seconds>; closes a client over hard, or over soft for longer than soft-seconds.",
        mutable: true,
        get: |c| c.client_obuf_limits.render(),
        set: |c, a| {
            // One word is split again as Redis splits a multi-argument config given quoted.
            let split;
            let words: Vec<&str> = match a {
                [one] if !one.is_empty() => {
                    split = split_args(one.as_bytes())
                        .map_err(|_| obuf::WRONG_NUMBER.to_string())?
                        .into_iter()
                        .map(|w| String::from_utf8_lossy(&w).into_owned())
                        .collect::<Vec<String>>();
                    split.iter().map(String::as_str).collect()
                }
                _ => a.iter().map(String::as_str).collect(),
            };
            obuf::set_words(&mut c.client_obuf_limits, &words)
        },
    },
];

/// The name of `client-output-buffer-limit`, whose CONFIG SET and REWRITE differ from the table's.
pub const OBUF_DIRECTIVE: &str = "client-output-buffer-limit";

/// Redis's old names for the replication directives.
pub static ALIASES: &[(&str, &str)] = &[
    ("slaveof", "replicaof"),
    ("slave-read-only", "replica-read-only"),
    ("slave-serve-stale-data", "replica-serve-stale-data"),
    ("slave-priority", "replica-priority"),
    ("slave-announce-ip", "replica-announce-ip"),
    ("slave-announce-port", "replica-announce-port"),
    ("repl-ping-slave-period", "repl-ping-replica-period"),
    ("min-slaves-to-write", "min-replicas-to-write"),
    ("min-slaves-max-lag", "min-replicas-max-lag"),
];

/// Redis's `HIDDEN_CONFIG`s among [`DIRECTIVES`]: testing knobs that `CONFIG GET` shows only when
/// asked by their exact name (never for a glob pattern such as `*`), and that `CONFIG REWRITE`
/// writes only when changed from their default.
pub const HIDDEN: &[(&str, &str)] = &[("rdb-key-save-delay", "0")];

/// The default of a hidden directive, `None` for a listed one.
pub fn hidden_default(name: &str) -> Option<&'static str> {
    HIDDEN.iter().find(|(n, _)| *n == name).map(|(_, d)| *d)
}

pub fn find(name: &str) -> Option<&'static Directive> {
    let name = ALIASES
        .iter()
        .find(|(old, _)| old.eq_ignore_ascii_case(name))
        .map_or(name, |(_, new)| new);
    DIRECTIVES
        .iter()
        .find(|d| d.name.eq_ignore_ascii_case(name))
}

/// A `rename-command OLD NEW` line, kept with where it was for the error Redis would give.
#[derive(Debug, Clone, PartialEq)]
pub struct Rename {
    pub old: String,
    /// Empty: the command is removed.
    pub new: String,
    /// Its line number in the configuration text (the file's lines, then the flags').
    pub line: usize,
    pub text: String,
}

impl Rename {
    /// Redis's fatal error for this line, `why` being the reason.
    pub fn fatal(&self, why: &str) -> ConfigError {
        fatal_at(self.line, &self.text, why)
    }
}

/// Redis's header of a fatal configuration error.
fn fatal_header() -> String {
    format!(
        "*** FATAL CONFIG FILE ERROR (Redis {}) ***",
        crate::REDIS_VERSION
    )
}

/// Redis's fatal error for line `line_no` (from 1) of the configuration text, reading `line`.
fn fatal_at(line_no: usize, line: &str, why: &str) -> ConfigError {
    ConfigError(format!(
        "{}\nReading the configuration file, at line {line_no}\n>>> '{line}'\n{why}",
        fatal_header()
    ))
}

impl Config {
    /// Applies one directive line's words (name first). Used by the file, the flags and CONFIG SET.
    pub fn apply(&mut self, name: &str, args: &[String]) -> Result<(), String> {
        if let Some(d) = find(name) {
            return (d.set)(self, args);
        }
        if let Some(a) = accepted::find(name) {
            return self.accept(a, args);
        }
        if let Some(n) = accepted::ACCEPTED_NON_CONFIG
            .iter()
            .find(|n| n.eq_ignore_ascii_case(name))
        {
            self.note_not_implemented(n);
            return Ok(());
        }
        Err("Bad directive or wrong number of arguments".into())
    }

    /// Stores the value of an accepted, not implemented directive (for CONFIG GET).
    pub fn accept(
        &mut self,
        a: &'static accepted::Accepted,
        args: &[String],
    ) -> Result<(), String> {
        if args.is_empty() {
            return Err("wrong number of arguments".into());
        }
        let value = if a.default == "yes" || a.default == "no" {
            yes_no(parse_bool(args)?)
        } else {
            args.join(" ")
        };
        self.accepted.insert(a.name, value);
        self.note_not_implemented(a.name);
        Ok(())
    }

    fn note_not_implemented(&mut self, name: &'static str) {
        if !self.not_implemented.contains(&name) {
            self.not_implemented.push(name);
        }
    }

    /// The CONFIG GET value of an accepted, not implemented directive.
    pub fn accepted_value(&self, a: &accepted::Accepted) -> String {
        self.accepted
            .get(a.name)
            .cloned()
            .unwrap_or_else(|| a.default.to_string())
    }

    /// Applies config text as Redis's loadServerConfigFromString does: lines trimmed, `#` comments
    /// and blank lines skipped, `include` read in place. An error is Redis's fatal text (the
    /// line number counts from 1 in `text`).
    pub fn apply_text(&mut self, text: &str, origin: &str) -> Result<(), ConfigError> {
        for (i, line) in text.split('\n').enumerate() {
            let trimmed = line.trim_matches([' ', '\t', '\r', '\n']);
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let words = split_args(trimmed.as_bytes())
                .map_err(|_| fatal_at(i + 1, trimmed, "Unbalanced quotes in configuration line"))?;
            let words: Vec<String> = words
                .into_iter()
                .map(|w| String::from_utf8_lossy(&w).into_owned())
                .collect();
            let Some((name, args)) = words.split_first() else {
                continue;
            };
            if name.eq_ignore_ascii_case("include") {
                let [path] = args else {
                    return Err(fatal_at(
                        i + 1,
                        trimmed,
                        "Bad directive or wrong number of arguments",
                    ));
                };
                self.include(path, origin)?;
                continue;
            }
            if name.eq_ignore_ascii_case("rename-command") {
                let [old, new] = args else {
                    return Err(fatal_at(
                        i + 1,
                        trimmed,
                        "Bad directive or wrong number of arguments",
                    ));
                };
                self.renames.push(Rename {
                    old: old.clone(),
                    new: new.clone(),
                    line: i + 1,
                    text: trimmed.to_string(),
                });
                continue;
            }
            if find(name).is_some_and(|d| d.name == "save") {
                self.read_save_line(args)
                    .map_err(|why| fatal_at(i + 1, trimmed, &why))?;
                continue;
            }
            if let Err(why) = self.apply(name, args) {
                return Err(fatal_at(i + 1, trimmed, &why));
            }
        }
        Ok(())
    }

    /// A `save` line of the file or the flags, read as Redis reads it: the first one replaces
    /// the default points, each later one adds its own (a redis.conf says `save 900 1`,
    /// `save 300 10`, `save 60 10000` on three lines, and CONFIG REWRITE writes them so), and
    /// `save ""` clears what came before.
    fn read_save_line(&mut self, args: &[String]) -> Result<(), String> {
        let points = parse_save(args)?;
        let clears = matches!(args, [only] if only.is_empty());
        if clears || !self.save_read {
            self.save.clear();
        }
        self.save_read = true;
        self.save.extend(points);
        Ok(())
    }

    /// `include <path>`: the file's lines apply in place (its errors name its own lines).
    fn include(&mut self, path: &str, _from: &str) -> Result<(), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError(format!("Fatal error, can't open config file '{path}': {e}"))
        })?;
        self.apply_text(&text, path)
    }

    /// Builds the configuration from `redis-server`-style arguments:
    /// `[CONFIG_FILE] [--directive value ...]`. As redis-server does, the options become config
    /// lines appended to the file's text after a newline (each `--name` starts a line, each value
    /// is quoted), so an error's line number counts the file's lines first.
    pub fn from_args(args: &[String]) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        let mut rest = args;
        let mut text = String::new();
        if let Some(first) = args.first() {
            if !first.starts_with("--") {
                text = std::fs::read_to_string(first).map_err(|e| {
                    ConfigError(format!(
                        "Fatal error, can't open config file '{first}': {e}"
                    ))
                })?;
                config.config_file = Some(first.clone());
                rest = &args[1..];
            }
        }
        let mut options = String::new();
        for a in rest {
            if let Some(name) = a.strip_prefix("--") {
                if !options.is_empty() {
                    options.push('\n');
                }
                options.push_str(name);
                options.push(' ');
            } else {
                options.push_str(&repr(a));
                options.push(' ');
            }
        }
        if !options.is_empty() {
            text.push('\n');
            text.push_str(&options);
        }
        let origin = config.config_file.clone().unwrap_or_default();
        config.apply_text(&text, &origin)?;
        Ok(config)
    }
}

/// A double-quoted, escaped rendering of `s` (Redis's sdscatrepr), which `split_args` reads back.
fn repr(s: &str) -> String {
    let mut out = String::from("\"");
    for b in s.bytes() {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
    out
}

/// Quotes a value for a config line when it is empty or has anything but printable non-blank ASCII,
/// escaping as Redis's `sdscatrepr` does (`\\`, `\"`, `\n`, `\r`, `\t`, `\a`, `\b`, `\xHH`), so the
/// configuration parser reads back exactly the value written (found by the `config` fuzz target:
/// a control character inside a quoted value made CONFIG REWRITE's file unreadable).
fn quote(v: &str) -> String {
    // Unicode blanks are quoted too: the file reader trims each line.
    let plain = |c: char| {
        (c.is_ascii_graphic() && !matches!(c, '"' | '\'' | '\\'))
            || (!c.is_ascii() && !c.is_whitespace())
    };
    if !v.is_empty() && v.chars().all(plain) {
        return v.to_string();
    }
    let mut s = String::from("\"");
    for c in v.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' => s.push_str("\\t"),
            '\u{7}' => s.push_str("\\a"),
            '\u{8}' => s.push_str("\\b"),
            c if c.is_ascii() && !(c.is_ascii_graphic() || c == ' ') => {
                s.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn octal_settings_parse_as_redis_reads_them() {
        let ok = |v: &str| parse_octal(v, 0o777);
        for (text, want) in [
            ("700", 0o700),
            ("0777", 0o777),
            ("", 0),
            (" 7", 7),
            ("+7", 7),
            ("-0", 0),
        ] {
            assert_eq!(ok(text), Ok(want), "{text:?}");
        }
        for text in [
            "999",
            "8",
            "abc",
            "7x",
            " ",
            "+",
            "0x7",
            "77777777777777777777777",
        ] {
            assert_eq!(
                ok(text),
                Err("argument couldn't be parsed as an octal number".into()),
                "{text:?}"
            );
        }
        for text in ["1000", "-1"] {
            assert_eq!(
                ok(text),
                Err("argument must be between 0 and 777 inclusive".into()),
                "{text:?}"
            );
        }
    }

    use super::*;

    /// Each `save` line of a file adds its points (the first replaces the defaults), a
    /// `save ""` clears what came before, and the flags go on from the file; CONFIG SET replaces.
    #[test]
    fn save_lines_add_up_as_redis_reads_them() {
        let read = |text: &str| {
            let mut c = Config::default();
            c.apply_text(text, "t.conf").map(|()| c.save)
        };
        assert_eq!(
            read("save 900 1\nsave 300 10\nsave 60 10000\n").unwrap(),
            [(900, 1), (300, 10), (60, 10000)]
        );
        assert_eq!(
            read("save 900 1\nsave \"\"\nsave 60 5\n").unwrap(),
            [(60, 5)]
        );
        assert_eq!(
            read("save \"900 1 300 10\"\n").unwrap(),
            [(900, 1), (300, 10)]
        );
        assert_eq!(read("port 7000\n").unwrap(), Config::default().save);
        assert!(read("save 0 1\n").is_err());
        let mut c = Config::default();
        c.apply_text("save 900 1\nsave 300 10\n", "t.conf").unwrap();
        c.apply("save", &["60 5".into()]).unwrap();
        assert_eq!(c.save, [(60, 5)]);
    }

    #[test]
    fn rewrite_reads_back_values_with_control_characters() {
        // From the config fuzz target: quote() left \r and other control bytes raw.
        let mut c = Config::default();
        let odd = "#a run\r\u{b}\"x\\y\" \t\u{a0}end\u{7f}";
        c.apply("logfile", &[odd.to_string()]).unwrap();
        let text = c.rewrite("");
        let mut back = Config::default();
        back.apply_text(&text, "rewritten.conf").unwrap();
        assert_eq!(back.rewrite(""), text);
        assert_eq!(back.logfile, odd);
    }

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn flags_like_redis_server() {
        let c = Config::from_args(&args(&[
            "--port",
            "7000",
            "--save",
            "900 1",
            "--requirepass",
            "s3cret",
            "--loadmodule",
            "/x.so",
        ]))
        .unwrap();
        assert_eq!(c.port, 7000);
        assert_eq!(c.save, vec![(900, 1)]);
        assert_eq!(c.requirepass.as_deref(), Some("s3cret"));
        let c = Config::from_args(&args(&["--save", ""])).unwrap();
        assert!(c.save.is_empty());
    }

    #[test]
    fn bad_directive_names_the_line() {
        let mut c = Config::default();
        let e = c.apply_text("port 1\nbogus 2\n", "x.conf").unwrap_err();
        assert_eq!(
            e.0,
            "*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***\nReading the configuration file, at line 2\n>>> 'bogus 2'\nBad directive or wrong number of arguments"
        );
        let e = c.apply_text("port notanumber\n", "x.conf").unwrap_err();
        assert!(e.0.contains("at line 1\n"));
    }

    #[test]
    fn command_line_errors_count_lines_as_redis_server() {
        // `redis-server --port 16391 --bogus-directive 1` reports line 3 with the value quoted.
        let e =
            Config::from_args(&args(&["--port", "16391", "--bogus-directive", "1"])).unwrap_err();
        assert_eq!(
            e.0,
            "*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***\nReading the configuration file, at line 3\n>>> 'bogus-directive \"1\"'\nBad directive or wrong number of arguments"
        );
        let e = Config::from_args(&args(&["--save", "1 2 3"])).unwrap_err();
        assert!(
            e.0.ends_with(">>> 'save \"1 2 3\"'\nInvalid save parameters"),
            "{}",
            e.0
        );
    }

    #[test]
    fn accepted_directives_keep_their_values() {
        let mut c = Config::default();
        c.apply_text(
            "jemalloc-bg-thread no\nlatency-monitor-threshold 7\nrename-command FLUSHALL \"\"\nlazyfree-lazy-expire yes\n",
            "x.conf",
        )
        .unwrap();
        assert_eq!(
            c.not_implemented,
            [
                "jemalloc-bg-thread",
                "latency-monitor-threshold",
                "lazyfree-lazy-expire"
            ]
        );
        assert_eq!(
            c.renames
                .iter()
                .map(|r| (r.old.as_str(), r.new.as_str(), r.line))
                .collect::<Vec<_>>(),
            [("FLUSHALL", "", 3)]
        );
        let get = |c: &Config, n: &str| c.accepted_value(accepted::find(n).unwrap());
        assert_eq!(get(&c, "jemalloc-bg-thread"), "no");
        assert_eq!(get(&c, "activerehashing"), "yes");
        assert_eq!(get(&c, "latency-monitor-threshold"), "7");
        let e = c
            .apply_text("lazyfree-lazy-expire maybe\n", "x.conf")
            .unwrap_err();
        assert!(e.0.ends_with("argument must be 'yes' or 'no'"), "{}", e.0);
    }

    #[test]
    fn no_directive_is_both_implemented_and_accepted() {
        for d in DIRECTIVES {
            assert!(
                accepted::find(d.name).is_none(),
                "{} is in both tables",
                d.name
            );
        }
    }

    #[test]
    fn memory_units() {
        assert_eq!(parse_memory("1kb"), Ok(1024));
        assert_eq!(parse_memory("1k"), Ok(1000));
        assert_eq!(parse_memory("5"), Ok(5));
        assert_eq!(parse_memory("2gb"), Ok(2 << 30));
        assert!(parse_memory("x").is_err());
    }
}
