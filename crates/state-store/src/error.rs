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
    /// A write failed at a point where it may or may not have become durable (a connection
    /// lost during COMMIT, a log whose failed append could not be taken back): retry it only
    /// with the same idempotency key.
    #[error("storage failed, and whether the write was applied is unknown: {0}")]
    OutcomeUnknown(String),
    /// A transient failure before commit (a serialization conflict, a dropped connection):
    /// nothing was applied, and running the same transaction again may succeed. The writer
    /// retries these itself; callers see one only when every retry failed.
    #[error("storage is temporarily unavailable: {0}")]
    Retryable(String),
    /// The disk holding the database has too little room left for this commit; nothing of it
    /// was written. Reads go on; writes resume once space is freed.
    #[error(
        "the disk holding {} is full: {available} bytes free, and this write needs about {needed}; it was not applied. \
         Writes resume once space is freed; reads go on",
        path.display()
    )]
    Full { path: PathBuf, available: u64, needed: u64 },
    /// The database's name no longer leads to the file this process has open (removed, or
    /// another file put in its place): a write to the open one would be acknowledged into a
    /// file nobody can open again, so none is made.
    #[error(
        "the database file {} was removed or replaced while this process had it open; writes are refused so none \
         is acknowledged into a file that can never be opened again. Stop this process (an owner also exits once \
         its clients leave): the next one opens what is at that path now. Reads still show the old file",
        path.display()
    )]
    Gone { path: PathBuf },
}

/// Why a database could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    #[error("database {} is in use by {holder}; stop that process or pass a different --db path", path.display())]
    InUse {
        path: PathBuf,
        holder: String,
        /// The role the holder declared when it opened the file, if it left a note.
        role: Option<String>,
    },
    #[error("cannot create the directory for database {}: {source}", path.display())]
    CreateDir { path: PathBuf, source: std::io::Error },
    #[error("database {} was written by an incompatible version of the storage format: {message}", path.display())]
    Incompatible { path: PathBuf, message: String },
    #[error("cannot open database {}: {source}", path.display())]
    Storage { path: PathBuf, source: StorageError },
    /// The database file itself is not one to open: a symbolic link planted in its place,
    /// another user's, a second name (hard link) of a database.
    #[error("refusing database {}: {source}", path.display())]
    File { path: PathBuf, source: std::io::Error },
    /// The write-ahead log beside the database may lack writes that were acknowledged.
    #[error(
        "refusing to open database {} without writes it may lack: {why}. If this database's own log is elsewhere, put \
         it at {}; otherwise `statectl recover --db {} --accept-lost-writes` opens the database with \
         what it has, and the writes only the log held are lost",
        path.display(), log.display(), path.display()
    )]
    LogDistrusted { path: PathBuf, log: PathBuf, why: String },
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
    /// A watcher fell further behind the writer than the watch buffer holds. Nothing was
    /// lost: watch again after the revision named.
    #[error("the watch fell behind the changes and was ended; watch again with after_revision {resume_after}")]
    WatchLagged { resume_after: u64 },
    #[error(transparent)]
    Storage(#[from] StorageError),
}
