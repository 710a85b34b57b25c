//! hyperbloom: a Redis-protocol server for Bloom filters, cuckoo filters and HyperLogLog.
//!
//! The map of the crate, floor by floor from the top. A module imports only from floors below its
//! own (`python3 ../shared/tools/layering.py src` checks it), so each floor can be read and tested
//! without the ones above it.
//! 1. `main.rs`: the command line, then [`server::run`].
//! 2. [`server`]: listeners, the connection loop, shutdown — the only code that touches sockets.
//! 3. [`commands`]: the one command table, the dispatcher, and one file per command family.
//! 4. [`persistence`]: RDB snapshots, save scheduling, DUMP/RESTORE payloads. It knows the keyspace
//!    and the shared state, never a connection.
//!    [`replication`] sits beside it: Redis's primary/replica protocol (PSYNC decisions, the
//!    full-sync RDB stream, the framing of the replica side), with the sockets left to `server`.
//! 5. [`engine`]: the shared state — the locked keyspace and its statistics, the client registry as
//!    commands see it, server stats, persistence status, the clock and the memory accounting.
//! 6. [`store`]: the keyspace and the data structures — pure Rust, no sockets, no RESP, no files
//!    ([`store::hll`]: HyperLogLog strings; [`store::cuckoo`]: cuckoo filters; [`store::bloom`]:
//!    scalable Bloom filters; [`store::tdigest`]: t-digests; [`store::cms`]: count-min sketches;
//!    [`store::topk`]: Top-K (HeavyKeeper) sketches; [`store::murmur`]: the MurmurHash2 family).
//! 7. The bottom, importing nothing above it: [`protocol`] (the request parser and the RESP2/RESP3
//!    reply encoder), [`config`] (the redis.conf-style configuration shared by the file and the
//!    `--flags`), [`error`] (every client-visible error string as a named constant), [`events`] (the keyspace-event classes), [`glob`]
//!    (Redis's pattern matching: KEYS, SCAN, pub/sub patterns), [`numeric`] (Redis's integer and
//!    float parsing and formatting) and [`limits`] (argument bounds shared by
//!    the configuration and the commands).
pub mod commands;
pub mod config;
pub mod engine;
pub mod error;
pub mod events;
pub mod glob;
pub mod limits;
pub mod numeric;
pub mod persistence;
pub mod protocol;
pub mod replication;
pub mod server;
pub mod store;

/// The Redis version hyperbloom reports (INFO `redis_version`, HELLO `version`): a 7.x so clients
/// enable their Redis 7 code paths.
pub const REDIS_VERSION: &str = "7.0.15";
/// hyperbloom's own version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The RedisBloom version hyperbloom advertises as module `bf`: a current-line number (8.4.0), above
/// 80000 so redis-rs's harness treats the server as RedisBloom (clients.md §4).
pub const BF_MODULE_VERSION: i64 = 80400;
