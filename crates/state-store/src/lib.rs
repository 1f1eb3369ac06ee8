//! `state-store`: the engine behind every frontend.
//!
//! [`Engine`] is the API boundary: frontends call it (directly, or by operation name through
//! [`dispatch::call`]) and never touch a backend. Below it sit the storage trait
//! ([`backend::Backend`]) and its implementations, the group-committing writer, history,
//! TTL sweeping and compaction.

pub mod backend;
pub mod clock;
pub mod dispatch;
pub mod engine;
pub mod error;

pub use backend::redb::RedbBackend;
pub use clock::{Clock, ManualClock, SystemClock};
pub use engine::{BatchStats, DEFAULT_HISTORY_RETENTION, Engine, EngineConfig, MaintenanceHandle};
pub use error::{EngineError, OpenError, StorageError};
