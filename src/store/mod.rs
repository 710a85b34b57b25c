//! The keyspace and the data structures: pure Rust, no sockets, no RESP.
pub mod cuckoo;
pub mod hll;
