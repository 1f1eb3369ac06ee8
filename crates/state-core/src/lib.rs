//! `state-core`: the pure domain of the state store.
//!
//! Keys, values, versions and revisions; the conditional-write rule; TTL expiry; transaction
//! semantics; the request/result types of every operation and their JSON schemas. Nothing
//! here performs IO or reads a clock: time comes in as an argument (`now`), and write
//! decisions come out as data (`Plan`) for the store to apply atomically.

pub mod checkpoint;
pub mod cursor;
pub mod entry;
pub mod error;
pub mod expire;
pub mod glob;
pub mod idempotency;
pub mod key;
pub mod keyspace;
pub mod knowledge;
pub mod kv;
pub mod lease;
pub mod limits;
pub mod numbers;
pub mod occ;
pub mod ops;
pub mod plan;
pub mod queue;
pub mod rate;
pub mod reservation;
pub mod semaphore;
pub mod session;
#[cfg(test)]
mod testing;
pub mod text_index;
pub mod time;
pub mod transfer;
pub mod usage;
pub mod view;
pub mod workflow;

pub use entry::{Action, Entry, Event, EventKind};
pub use error::InvalidInput;
pub use limits::Limits;
pub use time::UnixMillis;
pub use view::{MemoryView, StateView};
