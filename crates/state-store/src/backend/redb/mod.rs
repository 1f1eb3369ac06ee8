//! The embedded default backend on redb: one file, one writer process, copy-on-write B-trees.
//! A write transaction is made durable by its record in the write-ahead log beside the file
//! (`wal.rs`: appended and synced before the commit, which is then not synced itself); a
//! durable commit every few megabytes of log is a checkpoint, after which the log starts over.
//! Opening replays the records past the last durable commit (`logged.rs`: what they carry).
//!
//! Tables:
//! - `entries`    user key -> current entry
//! - `records`    system key -> current entry (leases, runs, sessions; see state_core::keyspace),
//!   kept apart so the user key count stays O(1)
//! - `expiry`     (expires_at, key) -> ()           keys with a TTL, soonest first
//! - `events`     (revision, seq) -> event          the history log
//! - `key_events` (key, revision, seq) -> version   per-key index into the log (one revision
//!   can hold several events on one key: an expiry, then the write that replaced it)
//! - `meta`       name -> u64                        revision, compacted revision, format, the
//!   sequence number of the last log record applied (`wal_lsn`), and the database's identity
//!   and what it expects of its log (`identity.rs`)
//! - `names`      name -> text                       the path the database was last opened at

mod backup;
mod checkpoint;
mod codec;
mod failpoint;
#[cfg(feature = "conformance")]
pub mod faults;
mod holder;
mod identity;
pub mod inspect;
mod logged;
mod open;
mod recovery;
mod space;
mod txn;
mod unpublished;
pub mod wal;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use state_core::keyspace;

use self::holder::Holder;
pub use self::holder::HolderProcess;
use self::logged::Calls;
pub use self::open::holder_note_path;
pub use self::space::cache_for;
use self::space::{MOST_MOVED_WHILE_SERVING, READS_WAITED_FOR};
use self::txn::{RedbRead, RedbWrite};
use self::wal::{LogError, LogFile, Wal};
use super::{Backend, ReadTxn, SpaceGiven, WriteTxn, WriterExclusion};
use crate::error::StorageError;

const ENTRIES: TableDefinition<&str, &[u8]> = TableDefinition::new("entries");
const RECORDS: TableDefinition<&str, &[u8]> = TableDefinition::new("records");
const EXPIRY: TableDefinition<(u64, &str), ()> = TableDefinition::new("expiry");
const EVENTS: TableDefinition<(u64, u32), &[u8]> = TableDefinition::new("events");
const KEY_EVENTS: TableDefinition<(&str, u64, u32), u64> = TableDefinition::new("key_events");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const NAMES: TableDefinition<&str, &str> = TableDefinition::new("names");

const META_REVISION: &str = "revision";
const META_COMPACTED: &str = "compacted_revision";
const META_FORMAT: &str = "format";
const META_WAL_LSN: &str = "wal_lsn";
/// Bytes of entries and history removed since the file was last compacted: how much of it
/// may be free, known without walking the file.
const META_FREED: &str = "freed_bytes";
const STORE_FORMAT: u64 = 1;

/// The page cache of the fault-injection tests' stores.
#[cfg(feature = "conformance")]
const CACHE_BYTES: usize = 16 * 1024 * 1024;

pub struct RedbBackend {
    /// The open database; `None` while it is being reopened after a failed write.
    db: RwLock<Option<Arc<Database>>>,
    /// How to open it again (a file backend only).
    reopen: Option<Reopen>,
    /// A write failed in I/O: redb refuses every later operation until the database is
    /// reopened (which also rolls back to the last commit, as after a crash).
    failed: AtomicBool,
    path: Option<PathBuf>,
    /// The write-ahead log (a database in a file); none in memory.
    log: Option<Log>,
    /// Bytes of entries and events committed since the last durable commit: redb holds them in
    /// its write buffer, and the next durable commit (a checkpoint) puts them on the disk.
    undurable: std::sync::atomic::AtomicU64,
    /// The device and inode of the file opened, to notice it being removed or replaced.
    file: Option<(u64, u64)>,
    /// Not before then does the next try to give space back (see `space.rs`), after one that
    /// could not.
    shrink_due: Mutex<Option<std::time::Instant>>,
    _holder: Option<Holder>,
}

/// Opens the database file again, the same way as the first time.
type Reopen = Box<dyn Fn() -> Result<Database, redb::DatabaseError> + Send + Sync>;

/// Opens the log's file, the same way every time.
pub type OpenLog = Box<dyn Fn() -> std::io::Result<Box<dyn LogFile>> + Send + Sync>;

struct Log {
    /// `None` while the database is reopened and the log replayed.
    wal: Mutex<Option<Wal>>,
    /// Bytes of records after which a commit checkpoints.
    checkpoint_bytes: std::sync::atomic::AtomicU64,
    open: OpenLog,
    path: PathBuf,
}

impl RedbBackend {
    /// The database, reopened first if a write failed in I/O since it was last opened.
    fn database(&self) -> Result<Arc<Database>, StorageError> {
        if self.failed.load(Ordering::SeqCst) {
            self.recover()?;
        }
        match self.db.read().ok().and_then(|db| db.clone()) {
            Some(db) => Ok(db),
            None => Err(StorageError::Io("the database is being reopened after a failed write; retry shortly".into())),
        }
    }

    /// Begins a transaction; when redb refuses because an earlier write failed in I/O (the
    /// failure may have surfaced inside a transaction, where it was not noted), reopens the
    /// database and tries once more, so the first operation after space returns succeeds.
    fn retrying<T>(&self, begin: impl Fn(&Database) -> Result<T, StorageError>) -> Result<T, StorageError> {
        // The first handle must be gone before a reopen: it holds the file's lock.
        let first = {
            let db = self.database()?;
            begin(&db)
        };
        match first {
            Ok(txn) => Ok(txn),
            Err(error) => {
                let error = self.noted(error);
                if !self.failed.load(Ordering::SeqCst) {
                    return Err(error);
                }
                let db = self.database()?;
                begin(&db).map_err(|e| self.noted(e))
            }
        }
    }

    /// Notes an error from redb: one of I/O means the handle must be reopened.
    fn noted(&self, error: StorageError) -> StorageError {
        if matches!(error, StorageError::Io(_)) {
            self.failed.store(true, Ordering::SeqCst);
        }
        error
    }
}

impl Backend for RedbBackend {
    fn kind(&self) -> &'static str {
        "redb"
    }

    /// redb locks its file: one process at a time.
    fn writer_exclusion(&self) -> WriterExclusion {
        WriterExclusion::Process
    }

    /// Point reads are B-tree lookups in redb's page cache: microseconds.
    fn inline_point_reads(&self) -> bool {
        true
    }

    fn begin_read(&self) -> Result<Box<dyn ReadTxn + '_>, StorageError> {
        let txn = self.retrying(|db| db.begin_read().map_err(storage))?;
        Ok(Box::new(RedbRead(txn)))
    }

    fn begin_write(&self) -> Result<Box<dyn WriteTxn + '_>, StorageError> {
        self.mend_log()?;
        let txn = self.retrying(|db| db.begin_write().map_err(storage))?;
        let calls = self.log.as_ref().map(|_| Calls::default());
        Ok(Box::new(RedbWrite { txn, next_seq: None, backend: self, written: 0, freed: 0, calls, held: None }))
    }

    fn size_on_disk(&self) -> Option<u64> {
        self.path.as_ref().and_then(|p| std::fs::metadata(p).ok()).map(|m| m.len())
    }

    fn backup(&self, to: &Path) -> Result<crate::backend::Backup, StorageError> {
        backup::backup(&*self.database()?, to)
    }

    fn give_back_space(&self) -> Result<Option<SpaceGiven>, StorageError> {
        self.shrink(READS_WAITED_FOR, MOST_MOVED_WHILE_SERVING)
    }
}

/// The table a key lives in.
fn table_for(key: &str) -> TableDefinition<'static, &'static str, &'static [u8]> {
    if keyspace::is_system(key) { RECORDS } else { ENTRIES }
}

fn storage(e: impl Into<redb::Error>) -> StorageError {
    match e.into() {
        redb::Error::Io(io) => StorageError::Io(io.to_string()),
        redb::Error::PreviousIo => StorageError::Io("an earlier write failed; the database is being reopened".into()),
        redb::Error::Corrupted(what) => StorageError::Corrupt(what),
        other => StorageError::Other(other.to_string()),
    }
}

fn meta_value(meta: &impl ReadableTable<&'static str, u64>, name: &str) -> Result<u64, StorageError> {
    Ok(meta.get(name).map_err(storage)?.map_or(0, |g| g.value()))
}

fn log_error(path: &Path, error: LogError) -> StorageError {
    match error {
        LogError::Io(e) => StorageError::Io(format!("{}: {e}", path.display())),
        LogError::Corrupt(message) => StorageError::Corrupt(message),
        LogError::MaybeWritten(e) => StorageError::OutcomeUnknown(format!("{}: {e}", path.display())),
    }
}
