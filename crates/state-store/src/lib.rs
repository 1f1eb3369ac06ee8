//! `state-store`: the engine, and the storage backends below it.
//!
//! [`Engine`] is the API boundary: `state-api` calls it, and nothing above calls a backend.
//! Below it sit the storage contract ([`backend::Backend`]) and its implementations, the
//! group-committing writer, history, TTL sweeping and compaction. Backend crates implement
//! the contract and prove it with the conformance suite (feature `conformance`).

pub mod backend;
pub mod backoff;
mod clock;
#[cfg(feature = "conformance")]
pub mod conformance;
mod engine;
mod error;
pub mod files;

pub use backend::redb::RedbBackend;
pub use backend::{Backend, Backup, SpaceGiven, WriterExclusion};
pub use clock::{Clock, ManualClock, SystemClock};
pub use engine::{
    BatchStats, DEFAULT_HISTORY_RETENTION, DEFAULT_WATCH_BUFFER_BYTES, Engine, EngineConfig, MaintenanceHandle, Watch,
};
pub use error::{EngineError, OpenError, StorageError};
