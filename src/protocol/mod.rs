//! The wire protocol: requests in, replies out. Knows nothing of storage.
pub mod parser;
pub mod reply;

pub use reply::Reply;
