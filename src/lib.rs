//! hyperbloom: a Redis-protocol server for Bloom filters, cuckoo filters and HyperLogLog.
//!
//! The map of the crate:
//! - [`protocol`]: the request parser (inline and multibulk, resumable) and the RESP2/RESP3 reply encoder.
//! - [`server`]: listeners, the connection loop, shutdown, the client registry and stats — the I/O.
//! - [`commands`]: the command table, the dispatcher and one file per command family.
//! - [`store`]: the keyspace and the data structures — pure Rust, no sockets, no RESP
//!   ([`store::hll`]: HyperLogLog strings; [`store::cuckoo`]: cuckoo filters;
//!   [`store::bloom`]: scalable Bloom filters; [`store::murmur`]: the MurmurHash2 family).
//! - [`persistence`]: RDB snapshots, save scheduling, DUMP/RESTORE payloads.
//! - [`config`]: the redis.conf-style configuration shared by the file and the `--flags`.
//! - [`error`]: every client-visible error string as a named constant, and the `CmdError` type.
pub mod commands;
pub mod config;
pub mod error;
pub mod persistence;
pub mod protocol;
pub mod server;
pub mod store;

/// The Redis version hyperbloom reports (INFO `redis_version`, HELLO `version`): a 7.x so clients
/// enable their Redis 7 code paths.
pub const REDIS_VERSION: &str = "7.0.15";
/// hyperbloom's own version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
