//! Redis 7.0 directives that hyperbloom accepts but does not implement yet.
//!
//! Every name `CONFIG GET *` lists on redis-server 7.0.15 is either a row of
//! [`super::DIRECTIVES`] (implemented) or a row here: accepted in the file, on the command line
//! and by `CONFIG SET` (unless Redis makes it immutable), logged once at startup as not
//! implemented, and shown by `CONFIG GET` with the value it was given or Redis's default. The
//! defaults are what redis-server 7.0.15 answers to `CONFIG GET` with no config file.
//!
//! Implementing a directive = moving its row into `DIRECTIVES` (and out of here);
//! a unit test in `config/mod.rs` checks that no name (nor alias) is in both tables.

/// One accepted, not implemented directive.
pub struct Accepted {
    pub name: &'static str,
    /// Redis 7.0.15's default, as CONFIG GET shows it.
    pub default: &'static str,
    /// May CONFIG SET change it? (false where Redis answers "can't set immutable config")
    pub mutable: bool,
}

const fn row(name: &'static str, default: &'static str, mutable: bool) -> Accepted {
    Accepted {
        name,
        default,
        mutable,
    }
}

/// The accepted, not implemented configs, sorted by name.
#[rustfmt::skip]
pub static ACCEPTED: &[Accepted] = &[
    row("acl-pubsub-default", "resetchannels", true),
    row("aclfile", "", false),
    row("acllog-max-len", "128", true),
    row("active-defrag-cycle-max", "25", true),
    row("active-defrag-cycle-min", "1", true),
    row("active-defrag-ignore-bytes", "104857600", true),
    row("active-defrag-max-scan-fields", "1000", true),
    row("active-defrag-threshold-lower", "10", true),
    row("active-defrag-threshold-upper", "100", true),
    row("active-expire-effort", "1", true),
    row("activedefrag", "no", true),
    row("activerehashing", "yes", true),
    row("always-show-logo", "no", false),
    row("aof-disable-auto-gc", "no", true),
    row("aof_rewrite_cpulist", "", false),
    row("bgsave_cpulist", "", false),
    row("bind-source-addr", "", true),
    row("bio_cpulist", "", false),
    row("busy-reply-threshold", "5000", true),
    row("cluster-allow-pubsubshard-when-down", "yes", true),
    row("cluster-allow-reads-when-down", "no", true),
    row("cluster-allow-replica-migration", "yes", true),
    row("cluster-announce-bus-port", "0", true),
    row("cluster-announce-hostname", "", true),
    row("cluster-announce-ip", "", true),
    row("cluster-announce-port", "0", true),
    row("cluster-announce-tls-port", "0", true),
    row("cluster-config-file", "nodes.conf", false),
    row("cluster-enabled", "no", false),
    row("cluster-link-sendbuf-limit", "0", true),
    row("cluster-migration-barrier", "1", true),
    row("cluster-node-timeout", "15000", true),
    row("cluster-port", "0", false),
    row("cluster-preferred-endpoint-type", "ip", true),
    row("cluster-replica-no-failover", "no", true),
    row("cluster-replica-validity-factor", "10", true),
    row("cluster-require-full-coverage", "yes", true),
    row("cluster-slave-no-failover", "no", true),
    row("cluster-slave-validity-factor", "10", true),
    row("crash-log-enabled", "yes", true),
    row("crash-memcheck-enabled", "yes", true),
    row("disable-thp", "yes", false),
    row("dynamic-hz", "yes", true),
    row("hash-max-listpack-entries", "512", true),
    row("hash-max-listpack-value", "64", true),
    row("hash-max-ziplist-entries", "512", true),
    row("hash-max-ziplist-value", "64", true),
    row("ignore-warnings", "", true),
    row("io-threads", "1", false),
    row("io-threads-do-reads", "no", false),
    row("jemalloc-bg-thread", "yes", true),
    row("latency-monitor-threshold", "0", true),
    row("latency-tracking", "yes", true),
    row("latency-tracking-info-percentiles", "50 99 99.9", true),
    row("lazyfree-lazy-expire", "no", true),
    row("lazyfree-lazy-server-del", "no", true),
    row("lazyfree-lazy-user-del", "no", true),
    row("lazyfree-lazy-user-flush", "no", true),
    row("list-compress-depth", "0", true),
    row("list-max-listpack-size", "-2", true),
    row("list-max-ziplist-size", "-2", true),
    row("lua-time-limit", "5000", true),
    row("maxmemory-clients", "0", true),
    row("oom-score-adj", "no", true),
    row("oom-score-adj-values", "0 200 800", true),
    row("pidfile", "", false),
    row("proc-title-template", "{title} {listen-addr} {server-mode}", true),
    row("propagation-error-behavior", "ignore", true),
    row("rdb-del-sync-files", "no", true),
    row("rdb-save-incremental-fsync", "yes", true),
    row("repl-disable-tcp-nodelay", "no", true),
    row("repl-diskless-load", "disabled", true),
    row("repl-diskless-sync-max-replicas", "0", true),
    row("replica-ignore-disk-write-errors", "no", true),
    row("replica-ignore-maxmemory", "yes", true),
    row("replica-lazy-flush", "no", true),
    row("sanitize-dump-payload", "no", true),
    row("server_cpulist", "", false),
    row("set-max-intset-entries", "512", true),
    row("set-proc-title", "yes", false),
    row("shutdown-on-sigint", "default", true),
    row("shutdown-on-sigterm", "default", true),
    row("shutdown-timeout", "10", true),
    row("slave-ignore-maxmemory", "yes", true),
    row("slave-lazy-flush", "no", true),
    row("socket-mark-id", "0", false),
    row("stream-node-max-bytes", "4096", true),
    row("stream-node-max-entries", "100", true),
    row("supervised", "no", false),
    row("syslog-enabled", "no", false),
    row("syslog-facility", "local0", false),
    row("syslog-ident", "redis", false),
    row("tls-auth-clients", "yes", true),
    row("tls-ca-cert-dir", "", true),
    row("tls-ca-cert-file", "", true),
    row("tls-cert-file", "", true),
    row("tls-ciphers", "", true),
    row("tls-ciphersuites", "", true),
    row("tls-client-cert-file", "", true),
    row("tls-client-key-file", "", true),
    row("tls-client-key-file-pass", "", true),
    row("tls-cluster", "no", true),
    row("tls-dh-params-file", "", true),
    row("tls-key-file", "", true),
    row("tls-key-file-pass", "", true),
    row("tls-port", "0", true),
    row("tls-prefer-server-ciphers", "no", true),
    row("tls-protocols", "", true),
    row("tls-replication", "no", true),
    row("tls-session-cache-size", "20480", true),
    row("tls-session-cache-timeout", "300", true),
    row("tls-session-caching", "yes", true),
    row("zset-max-listpack-entries", "128", true),
    row("zset-max-listpack-value", "64", true),
    row("zset-max-ziplist-entries", "128", true),
    row("zset-max-ziplist-value", "64", true),
];

/// Directives of the redis.conf grammar that are not configs (CONFIG GET does not list them) and
/// that hyperbloom accepts without implementing: `user` and `loadmodule` (RedisBloom is built
/// in), plus the ones Redis 7.0 itself accepts and ignores as deprecated. (`rename-command` is
/// implemented: `Config::renames`.)
pub static ACCEPTED_NON_CONFIG: &[&str] = &[
    "user",
    "loadmodule",
    "list-max-ziplist-entries",
    "list-max-ziplist-value",
    "lua-replicate-commands",
];

/// The accepted row named `name` (any case).
pub fn find(name: &str) -> Option<&'static Accepted> {
    ACCEPTED.iter().find(|a| a.name.eq_ignore_ascii_case(name))
}
