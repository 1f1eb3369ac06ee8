//! Typed errors of the engine. Backend errors are converted inside each backend and never
//! cross the engine boundary as their own types.

use std::path::PathBuf;

use state_core::InvalidInput;

/// A failure of the storage layer. Carries text, not the backend's own error type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    #[error("storage I/O failed: {0}")]
    Io(String),
    /// Bytes on disk that do not decode: a bug or damage, never user input.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("storage failed: {0}")]
    Other(String),
}

/// Why a database could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    #[error("database {} is in use by {holder}; stop that process or pass a different --db path", path.display())]
    InUse { path: PathBuf, holder: String },
    #[error("cannot create the directory for database {}: {source}", path.display())]
    CreateDir { path: PathBuf, source: std::io::Error },
    #[error("database {} was written by an incompatible version of the storage format: {message}", path.display())]
    Incompatible { path: PathBuf, message: String },
    #[error("cannot open database {}: {source}", path.display())]
    Storage { path: PathBuf, source: StorageError },
}

/// An operation that did not complete. A conflict is not an error: it is a normal result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    #[error(transparent)]
    Invalid(#[from] InvalidInput),
    #[error(
        "history through revision {compacted_revision} has been compacted away, so revision {requested} is no longer available: read the current state and continue from its revision"
    )]
    Compacted { requested: u64, compacted_revision: u64 },
    #[error("the store is shutting down; retry against a running server")]
    Closed,
    #[error(transparent)]
    Storage(#[from] StorageError),
}
