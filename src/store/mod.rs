//! The keyspace and the data structures. Pure Rust: no sockets, no RESP, no files.
pub mod bloom;
pub mod cuckoo;
pub mod db;
pub mod hll;
pub mod murmur;
pub mod value;

pub use db::{Db, Store};
pub use value::Value;
