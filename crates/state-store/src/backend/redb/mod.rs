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
mod codec;
mod failpoint;
#[cfg(feature = "conformance")]
pub mod faults;
mod holder;
mod identity;
pub mod inspect;
mod logged;
mod unpublished;
pub mod wal;

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use redb::{
    Database, Durability, ReadTransaction, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition,
    WriteTransaction,
};
use state_core::keyspace;
use state_core::ops::history::KeyFilter;
use state_core::{Entry, Event, UnixMillis};

use self::holder::Holder;
pub use self::holder::HolderProcess;
use self::identity::{Distrust, Stored};
use self::logged::Calls;
use self::unpublished::{HeldLog, Logged};
use self::wal::{LogError, LogFile, Wal};
use super::{Backend, Order, ReadTxn, SpaceGiven, Unpublished, WriteTxn, WriterExclusion};
use crate::error::{OpenError, StorageError};
use crate::files;

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

/// Files smaller than this are never compacted: the space is not worth the time.
const SHRINK_FROM_BYTES: u64 = 16 * 1024 * 1024;
/// How long giving space back waits for reads under way (every other read and write waits
/// with it) before it leaves the file for another time.
const READS_WAITED_FOR: Duration = Duration::from_millis(20);

/// Smallest and largest page cache chosen for a database by its size ([`cache_for`]).
const CACHE_MIN_BYTES: u64 = 8 * 1024 * 1024;
const CACHE_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// redb's page cache for a database file of `file_bytes`, unless a size is given: half the
/// file, between 8 and 64 MiB. The cache sits above the kernel's page cache, which keeps the
/// rest of a large file at hand; a cache sized to the file keeps a store of a few MB costing
/// a few MB, where a fixed 256 MiB filled up behind any long-running store.
pub fn cache_for(file_bytes: u64, given: Option<u64>) -> usize {
    let bytes = given.unwrap_or_else(|| (file_bytes / 2).clamp(CACHE_MIN_BYTES, CACHE_MAX_BYTES));
    usize::try_from(bytes).unwrap_or(usize::MAX)
}

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

/// Free space a commit leaves on the disk at least, beyond what it writes: room for redb's own
/// pages, for the commit after it, and for opening again after a crash (which replays the log
/// into the file).
const DISK_RESERVE_BYTES: u64 = 4 * 1024 * 1024;

impl RedbBackend {
    /// Opens or creates the database file, creating parent directories as needed. Fails at
    /// once, naming the holder, if another process has it open.
    pub fn open(path: &Path) -> Result<RedbBackend, OpenError> {
        RedbBackend::open_as(path, "standalone")
    }

    /// Like [`RedbBackend::open`], recording `role` (e.g. "owner") in the note that tells a
    /// process refused by the file lock who holds it and whether it shares the database.
    ///
    /// The database is opened under its one name ([`files::database_path`]: symbolic links
    /// resolved), never through a link planted in its place, only if this user owns it and it
    /// has no second name. Opening refuses a write-ahead log that may lack acknowledged writes
    /// (missing after a crash, cut short, another database's, an older copy), saying why and
    /// what to do; [`RedbBackend::open_accepting_log_loss`] is what to do when nothing better is
    /// left.
    pub fn open_as(path: &Path, role: &str) -> Result<RedbBackend, OpenError> {
        RedbBackend::open_file(path, role, LogLoss::Refuse, None)
    }

    /// [`RedbBackend::open_as`] with a page cache of `cache_bytes` instead of one sized from
    /// the file ([`cache_for`]; `--cache-size`).
    pub fn open_with_cache(path: &Path, role: &str, cache_bytes: Option<u64>) -> Result<RedbBackend, OpenError> {
        RedbBackend::open_file(path, role, LogLoss::Refuse, cache_bytes)
    }

    /// Opens a database whose write-ahead log was refused, without the writes it lacks: a log
    /// cut short is replayed as far as it goes; one that belongs to another database, or is an
    /// older copy, is moved aside (`<log>.set-aside-<time>`) and a new one started.
    pub fn open_accepting_log_loss(path: &Path) -> Result<RedbBackend, OpenError> {
        RedbBackend::open_file(path, "standalone", LogLoss::Accept, None)
    }

    fn open_file(path: &Path, role: &str, loss: LogLoss, cache_bytes: Option<u64>) -> Result<RedbBackend, OpenError> {
        let path = files::database_path(path).map_err(|source| OpenError::File { path: path.to_owned(), source })?;
        // Made here, private, before redb (which would create it with the umask's mode) fills
        // it in; checked here for the message, and again by every reopen.
        let file = open_database_file(&path).map_err(|source| OpenError::File { path: path.clone(), source })?;
        let cache = cache_for(file.metadata().map_or(0, |m| m.len()), cache_bytes);
        tracing::debug!(cache_bytes = cache, "redb page cache");
        let opener = {
            let path = path.clone();
            move || {
                let file = open_database_file(&path)?;
                redb::Builder::new().set_cache_size(cache).create_with_backend(redb::backends::FileBackend::new(file)?)
            }
        };
        let backend = RedbBackend::open_with(&path, role, Box::new(opener), Some(log_file(&path)), loss)?;
        // Opening is the moment nothing else holds the database: the first chance to move
        // every page down and cut the file short; the writer gives space back while it runs.
        if let Err(error) = backend.shrink(Duration::ZERO) {
            tracing::warn!(%error, "could not compact the database file; it keeps its size");
        }
        Ok(backend)
    }

    /// Compacts the file when at least half of it is free (deletes, overwrites and history
    /// compaction free pages, but redb never shrinks a file by itself), and says how long
    /// reads and writes waited for it.
    ///
    /// Only the writer thread calls this, between batches, so no write transaction is live.
    /// Reads go on while it looks whether compacting is worth it, and wait while it compacts:
    /// redb compacts only with no transaction live, so the handle is taken out of everyone's
    /// reach. A read already under way is waited for up to `wait_for_reads`; one that takes
    /// longer leaves the file as it is until the next call.
    fn shrink(&self, wait_for_reads: Duration) -> Result<Option<SpaceGiven>, StorageError> {
        let Some(path) = &self.path else { return Ok(None) };
        let file_bytes = std::fs::metadata(path).map_err(|e| StorageError::Io(e.to_string()))?.len();
        if file_bytes < SHRINK_FROM_BYTES {
            return Ok(None);
        }
        // What commits counted as freed decides cheaply whether to look closer (counting the
        // file's pages walks all of it). Freed pages get reused, so it overcounts as time
        // goes by; the walk decides, and starts the count over.
        let freed = meta_value(
            &self.database()?.begin_read().map_err(storage)?.open_table(META).map_err(storage)?,
            META_FREED,
        )?;
        if freed.saturating_mul(4) < file_bytes {
            return Ok(None);
        }
        // Pages that commits since the last durable one freed are free in the file only after
        // the next: a checkpoint first, so the walk counts them free.
        self.checkpoint_if(|_| true)?;
        let used_bytes = {
            let db = self.database()?;
            let txn = db.begin_write().map_err(storage)?;
            let stats = txn.stats().map_err(storage)?;
            // Counted afresh from here, whether or not the file is compacted.
            txn.open_table(META).map_err(storage)?.insert(META_FREED, 0).map_err(storage)?;
            txn.commit().map_err(|e| self.noted(storage(e)))?;
            stats.allocated_pages().saturating_mul(stats.page_size() as u64)
        };
        if used_bytes.saturating_mul(2) > file_bytes {
            return Ok(None);
        }
        let mut slot =
            self.db.write().map_err(|_| StorageError::Other("the database handle lock is poisoned".into()))?;
        let held_from = std::time::Instant::now();
        let deadline = held_from + wait_for_reads;
        let compacted = match exclusive(&mut slot, deadline) {
            Some(db) => compact_file(db, deadline).map_err(|e| self.noted(e))?,
            None => false,
        };
        drop(slot);
        if !compacted {
            tracing::debug!("a read was under way; the file is compacted another time");
            // The count starts where it was, so the next call looks again.
            let db = self.database()?;
            let txn = db.begin_write().map_err(storage)?;
            add_freed(&txn, freed)?;
            txn.commit().map_err(|e| self.noted(storage(e)))?;
            return Ok(None);
        }
        let given = SpaceGiven {
            before_bytes: file_bytes,
            after_bytes: std::fs::metadata(path).map_or(file_bytes, |m| m.len()),
            in_use_bytes: used_bytes,
            held_for: held_from.elapsed(),
        };
        tracing::info!(
            before_bytes = given.before_bytes,
            after_bytes = given.after_bytes,
            in_use_bytes = given.in_use_bytes,
            held_millis = given.held_for.as_millis() as u64,
            "compacted the database file"
        );
        Ok(Some(given))
    }

    /// Opens the database at `path` through `opener` (which tests use to put a fault-injecting
    /// file under it), recording `role` in the holder note.
    fn open_with(
        path: &Path,
        role: &str,
        opener: Reopen,
        log: Option<OpenLog>,
        loss: LogLoss,
    ) -> Result<RedbBackend, OpenError> {
        let db = opener().map_err(|e| match e {
            redb::DatabaseError::DatabaseAlreadyOpen => {
                let (holder, role) = Holder::describe(path);
                OpenError::InUse { path: path.to_owned(), holder, role }
            }
            redb::DatabaseError::UpgradeRequired(v) => OpenError::Incompatible {
                path: path.to_owned(),
                message: format!("redb file format {v} needs an upgrade"),
            },
            other => OpenError::Storage { path: path.to_owned(), source: storage(other) },
        })?;
        let holder = Holder::record(path, role);
        let file = {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
        };
        let log = log.map(|open| Log {
            wal: Mutex::new(None),
            checkpoint_bytes: wal::CHECKPOINT_BYTES.into(),
            open,
            path: wal::log_path(path),
        });
        let backend = RedbBackend {
            db: RwLock::new(Some(Arc::new(db))),
            reopen: Some(opener),
            failed: AtomicBool::new(false),
            path: Some(path.to_owned()),
            log,
            undurable: 0.into(),
            file,
            _holder: Some(holder),
        };
        backend.initialize().map_err(|source| match source {
            StorageError::Corrupt(message) => OpenError::Incompatible { path: path.to_owned(), message },
            source => OpenError::Storage { path: path.to_owned(), source },
        })?;
        let db = backend.database().map_err(|source| OpenError::Storage { path: path.to_owned(), source })?;
        backend.replay(&db, loss).map_err(|refusal| match refusal {
            Replay::Storage(source) => OpenError::Storage { path: path.to_owned(), source },
            Replay::Distrusted { log, why } => OpenError::LogDistrusted { path: path.to_owned(), log, why },
        })?;
        Ok(backend)
    }

    /// Redoes, on `db` as of its last durable commit, every logged batch after it, makes that
    /// durable and starts the log over. Run at open and after a reopen. A log that may lack
    /// acknowledged writes is refused unless `loss` accepts that.
    fn replay(&self, db: &Database, loss: LogLoss) -> Result<(), Replay> {
        let Some(log) = &self.log else { return Ok(()) };
        let mut slot = log.wal.lock().map_err(|_| StorageError::Other("the log's lock is poisoned".into()))?;
        drop(slot.take());
        let stored = Stored::read(db)?;
        let store = stored.store.unwrap_or_else(wal::new_store_id);
        let open_log = || -> Result<(Wal, Vec<wal::Record>), StorageError> {
            let file = (log.open)().map_err(|e| StorageError::Io(format!("{}: {e}", log.path.display())))?;
            Wal::open(file, &log.path, stored.applied + 1, store).map_err(|e| log_error(&log.path, e))
        };
        let (mut wal, mut records) = open_log()?;
        if let Some(distrust) = identity::judge(&stored, wal.found(), wal.tail(), !records.is_empty()) {
            let why = distrust.describe(&log.path, &stored);
            if loss == LogLoss::Refuse {
                return Err(Replay::Distrusted { log: log.path.clone(), why });
            }
            tracing::warn!(log = %log.path.display(), "opening without the writes the log lacks: {why}");
            match distrust {
                Distrust::Foreign { .. } | Distrust::Stale { .. } => {
                    drop(wal);
                    let aside = set_aside(&log.path)?;
                    tracing::warn!(log = %log.path.display(), moved_to = %aside.display(), "moved the log aside");
                    (wal, records) = open_log()?;
                }
                // The records before the damage are replayed; the log with the rest is kept
                // aside for whoever wants them, and a new one begins.
                Distrust::Damaged { .. } => {
                    let kept = std::mem::take(&mut records);
                    drop(wal);
                    let aside = set_aside(&log.path)?;
                    tracing::warn!(log = %log.path.display(), moved_to = %aside.display(), "moved the log aside");
                    (wal, _) = open_log()?;
                    records = kept;
                }
                Distrust::Missing | Distrust::CutShort { .. } => {}
            }
        }
        let mut applied = stored.applied;
        let durable = applied;
        let replayed = records.iter().filter(|r| r.lsn > durable).count();
        for record in records.iter().filter(|r| r.lsn > durable) {
            if record.lsn != applied + 1 {
                return Err(Replay::Storage(StorageError::Corrupt(format!(
                    "{}: the database holds writes through log record {applied}, but the log's next record \
                     is {}: the records between are missing. If the database file was restored from a \
                     backup, this log belongs to the store it replaced: move it aside and open again",
                    log.path.display(),
                    record.lsn
                ))));
            }
            self.redo(db, [(record.lsn, record.payload.as_slice())])?;
            applied = record.lsn;
        }
        if wal.next_lsn() > applied + 1 {
            // Nothing to replay, but the log was started over by a newer state of the database
            // than this file: a backup put in its place. Its records were all applied to the
            // store the backup replaced; this one goes on from its own.
            tracing::warn!(
                log = %log.path.display(),
                "the database file is older than its log (restored from a backup?); the log starts over from it"
            );
        }
        // A log that holds nothing of this database's (none was there, or another's empty one
        // is taken over) gets a header naming it first: were the commit below made first, a
        // crash or a full disk before the header would leave a store that requires a log it
        // never had.
        if wal.found().is_none_or(|found| found.store != Some(store)) {
            wal.start_over(applied + 1).map_err(|e| log_error(&log.path, e))?;
        }
        // From here on the log may hold writes the file lacks: a later open needs this log.
        let marks = [
            (identity::META_STORE_ID, store),
            (identity::META_LOG_EPOCH, wal.next_epoch()),
            (identity::META_LOG_OPEN, 1),
        ];
        durable_commit(db, &marks, self.path.as_deref())?;
        failpoint::crash_at("opened-durable");
        self.undurable.store(0, Ordering::Relaxed);
        wal.start_over(applied + 1).map_err(|e| log_error(&log.path, e))?;
        if replayed > 0 {
            tracing::info!(log = %log.path.display(), replayed, "replayed the write-ahead log");
        }
        *slot = Some(wal);
        Ok(())
    }

    /// Applies logged batches (their LSNs and payloads, in order) to `db` in one commit without
    /// a sync of its own, recording the last as applied.
    fn redo<'p>(&self, db: &Database, records: impl IntoIterator<Item = (u64, &'p [u8])>) -> Result<(), StorageError> {
        let mut txn = db.begin_write().map_err(storage)?;
        txn.set_durability(Durability::None).map_err(|e| StorageError::Other(e.to_string()))?;
        let mut write = RedbWrite { txn, next_seq: None, backend: self, written: 0, freed: 0, calls: None, held: None };
        let mut last = None;
        for (lsn, payload) in records {
            logged::replay(payload, &mut write)?;
            last = Some(lsn);
        }
        if let Some(lsn) = last {
            write.txn.open_table(META).map_err(storage)?.insert(META_WAL_LSN, lsn).map_err(storage)?;
        }
        write.txn.commit().map_err(storage)
    }

    /// A log whose last append failed takes no more until it starts over: checkpoint first.
    /// Before a write transaction begins, since the checkpoint is a write transaction itself.
    fn mend_log(&self) -> Result<(), StorageError> {
        let tight = self.tight_on_space();
        self.checkpoint_if(|wal| wal.is_damaged() || tight)
    }

    /// Checkpoints when `due` says so of the log. The database handle is taken between two
    /// looks at the log, never under its lock, since a reopen takes the handle's lock first and
    /// the log's second; a handle that failed is reopened then (replaying the log, which starts
    /// it over), as a checkpoint on it could never succeed.
    fn checkpoint_if(&self, due: impl Fn(&Wal) -> bool) -> Result<(), StorageError> {
        let Some(log) = &self.log else { return Ok(()) };
        let lock = || log.wal.lock().map_err(|_| StorageError::Other("the log's lock is poisoned".into()));
        if !lock()?.as_ref().is_some_and(&due) {
            return Ok(());
        }
        let db = self.database()?;
        let mut slot = lock()?;
        match slot.as_mut() {
            Some(wal) if due(wal) => self.checkpoint(&db, wal),
            _ => Ok(()),
        }
    }

    /// Makes every commit so far durable in `db` itself and starts the log over.
    fn checkpoint(&self, db: &Database, wal: &mut Wal) -> Result<(), StorageError> {
        durable_commit(db, &[(identity::META_LOG_EPOCH, wal.next_epoch())], None).map_err(|e| self.noted(e))?;
        self.undurable.store(0, Ordering::Relaxed);
        failpoint::crash_at("checkpoint-durable");
        let path = self.log.as_ref().map(|l| l.path.clone()).unwrap_or_default();
        wal.start_over(wal.next_lsn()).map_err(|e| log_error(&path, e))
    }

    /// Checkpoints once the log holds this many bytes of records (default 8 MiB): smaller
    /// means a shorter replay after a crash and more frequent durable commits.
    pub fn set_checkpoint_bytes(&self, bytes: u64) {
        if let Some(log) = &self.log {
            log.checkpoint_bytes.store(bytes, Ordering::Relaxed);
        }
    }

    /// The live process that recorded itself as holding the database at `path`, with its role
    /// ("owner", "standalone") and start time, if it left a note.
    pub fn holder(path: &Path) -> Option<HolderProcess> {
        holder::recorded(path)
    }

    /// A database that lives only in memory: for tests and benchmarks of the engine itself.
    pub fn in_memory() -> Result<RedbBackend, StorageError> {
        let db = redb::Builder::new().create_with_backend(redb::backends::InMemoryBackend::new()).map_err(storage)?;
        let backend = RedbBackend {
            db: RwLock::new(Some(Arc::new(db))),
            reopen: None,
            failed: AtomicBool::new(false),
            path: None,
            log: None,
            undurable: 0.into(),
            file: None,
            _holder: None,
        };
        backend.initialize()?;
        Ok(backend)
    }

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

    /// Reopens the database after a failed write: redb refuses everything until then, and a
    /// reopen rolls back to the last commit, as after a crash.
    fn recover(&self) -> Result<(), StorageError> {
        let Some(reopen) = &self.reopen else {
            return Err(StorageError::Io("a write failed and an in-memory database cannot be reopened".into()));
        };
        let mut slot =
            self.db.write().map_err(|_| StorageError::Other("the database handle lock is poisoned".into()))?;
        if !self.failed.load(Ordering::SeqCst) {
            return Ok(());
        }
        drop(slot.take());
        // One attempt per operation, never a wait: reads may run on an async worker. Until it
        // succeeds (space is back, the old handle's last transaction ended), each operation
        // says why it cannot run.
        match reopen() {
            Ok(db) => {
                // The reopened file is as of its last durable commit: the log has the rest.
                self.replay(&db, LogLoss::Refuse).map_err(|refusal| match refusal {
                    Replay::Storage(error) => error,
                    Replay::Distrusted { why, .. } => StorageError::Corrupt(why),
                })?;
                *slot = Some(Arc::new(db));
                self.failed.store(false, Ordering::SeqCst);
                tracing::warn!("reopened the database after a failed write; it holds everything committed before it");
                Ok(())
            }
            Err(error) => {
                Err(StorageError::Io(format!("the database could not be reopened after a failed write yet: {error}")))
            }
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

    /// Refuses a commit of `written` bytes that would leave less than the reserve free on the
    /// database's disk: redb must never meet a full disk, since a failed write stops it until
    /// it is reopened, and a disk at 0 bytes would keep the store from opening again. Reads
    /// are unaffected.
    ///
    /// What a commit really costs the disk: its record in the log (and the step the log may
    /// grow by), and in the file, at the next checkpoint, twice what it and every commit
    /// since the last checkpoint wrote (copy-on-write: the new pages, and the old ones until
    /// freed), since redb holds those in its write buffer until a durable commit writes them.
    fn check_space(&self, written: u64) -> Result<(), StorageError> {
        let needed = self.space_needed(written);
        match self.free_space() {
            Some(available) if available < needed => {
                let path = self.path.clone().unwrap_or_default();
                Err(StorageError::Full { path, available, needed })
            }
            _ => Ok(()),
        }
    }

    /// Refuses a write once the database's name leads elsewhere than the file opened: the
    /// file was deleted (a user starting over while an idle owner still held it) or replaced.
    /// One `stat` per commit, beside its sync.
    fn check_named(&self) -> Result<(), StorageError> {
        use std::os::unix::fs::MetadataExt;
        let (Some(path), Some(opened)) = (&self.path, self.file) else { return Ok(()) };
        match std::fs::metadata(path) {
            Ok(now) if (now.dev(), now.ino()) == opened => Ok(()),
            _ => Err(StorageError::Gone { path: path.clone() }),
        }
    }

    fn space_needed(&self, written: u64) -> u64 {
        let undurable = self.undurable.load(Ordering::Relaxed);
        undurable
            .saturating_add(written)
            .saturating_mul(2)
            .saturating_add(written)
            .saturating_add(wal::GROW_BYTES)
            .saturating_add(DISK_RESERVE_BYTES)
    }

    /// Bytes free on the database's disk, for a database in a file.
    fn free_space(&self) -> Option<u64> {
        let path = self.path.as_ref()?;
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        crate::files::free_space(dir).ok()
    }

    /// Whether the disk is too tight to leave what redb holds unwritten: then a checkpoint
    /// writes it before the next batch, turning an estimate into what the disk really holds.
    fn tight_on_space(&self) -> bool {
        self.undurable.load(Ordering::Relaxed) > 0
            && self.free_space().is_some_and(|free| free < self.space_needed(0).saturating_add(DISK_RESERVE_BYTES))
    }

    /// Creates every table so readers never meet a missing one, and checks the format.
    fn initialize(&self) -> Result<(), StorageError> {
        let txn = self.database()?.begin_write().map_err(storage)?;
        {
            txn.open_table(ENTRIES).map_err(storage)?;
            txn.open_table(RECORDS).map_err(storage)?;
            txn.open_table(EXPIRY).map_err(storage)?;
            txn.open_table(EVENTS).map_err(storage)?;
            txn.open_table(KEY_EVENTS).map_err(storage)?;
            txn.open_table(NAMES).map_err(storage)?;
            let mut meta = txn.open_table(META).map_err(storage)?;
            let format = meta.get(META_FORMAT).map_err(storage)?.map(|g| g.value());
            match format {
                None => {
                    meta.insert(META_FORMAT, STORE_FORMAT).map_err(storage)?;
                }
                Some(STORE_FORMAT) => {}
                Some(other) => {
                    return Err(StorageError::Corrupt(format!(
                        "store format {other} is newer than this build understands ({STORE_FORMAT}); upgrade the server"
                    )));
                }
            }
        }
        txn.commit().map_err(storage)
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
        self.shrink(READS_WAITED_FOR)
    }
}

/// Opens (creating it private) the log file beside the database at `db`.
fn log_file(db: &Path) -> OpenLog {
    let path = wal::log_path(db);
    Box::new(move || {
        let existed = path.exists();
        let file = wal::direct::DirectLog::open(&path)?;
        if !existed {
            // The new name must survive a crash as surely as what is written under it.
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::File::open(dir)?.sync_all()?;
            }
        }
        Ok(Box::new(file) as Box<dyn LogFile>)
    })
}

/// A commit that makes every earlier one durable (redb persists commits made without a sync
/// of their own with the next one that has it), recording `marks` in `meta` and the path the
/// database is open at, if given.
fn durable_commit(db: &Database, marks: &[(&str, u64)], path: Option<&Path>) -> Result<(), StorageError> {
    let txn = db.begin_write().map_err(storage)?;
    {
        let mut meta = txn.open_table(META).map_err(storage)?;
        for (name, value) in marks {
            meta.insert(*name, *value).map_err(storage)?;
        }
    }
    if let Some(path) = path.and_then(Path::to_str) {
        txn.open_table(NAMES).map_err(storage)?.insert(identity::NAME_LAST_PATH, path).map_err(storage)?;
    }
    txn.commit().map_err(storage)
}

/// Whether an open may go on without writes its log lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LogLoss {
    Refuse,
    Accept,
}

/// Why a replay did not happen.
enum Replay {
    Storage(StorageError),
    /// The log may lack acknowledged writes (`identity.rs`).
    Distrusted {
        log: PathBuf,
        why: String,
    },
}

impl From<StorageError> for Replay {
    fn from(error: StorageError) -> Replay {
        Replay::Storage(error)
    }
}

/// The handle to itself, once no other thread holds it, waiting (a millisecond at a time)
/// until `deadline`. The slot's lock keeps anyone from taking it meanwhile.
fn exclusive(slot: &mut Option<Arc<Database>>, deadline: std::time::Instant) -> Option<&mut Database> {
    while slot.as_mut().is_some_and(|db| Arc::get_mut(db).is_none()) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    slot.as_mut().and_then(Arc::get_mut)
}

/// Moves the live pages down and cuts the file short, a few passes (each moves what it can).
/// A read transaction under way refuses it (redb compacts only with none live): waited for
/// until `deadline`; `false` if it was still there then.
fn compact_file(db: &mut Database, deadline: std::time::Instant) -> Result<bool, StorageError> {
    let mut passes = 0;
    while passes < 4 {
        match db.compact() {
            Ok(true) => passes += 1,
            Ok(false) => break,
            Err(redb::CompactionError::TransactionInProgress) if passes == 0 => {
                if std::time::Instant::now() >= deadline {
                    return Ok(false);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(error) => return Err(storage(error)),
        }
    }
    Ok(true)
}

/// Opens the database file for redb: see [`RedbBackend::open_as`].
fn open_database_file(path: &Path) -> std::io::Result<std::fs::File> {
    let file =
        files::open_private(path, std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false))?;
    files::single_name(&file, path)?;
    Ok(file)
}

/// Renames a log that is not to be replayed out of the way, keeping it for whoever wants what
/// it holds. Returns its new name.
fn set_aside(log: &Path) -> Result<PathBuf, StorageError> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let mut name = log.as_os_str().to_owned();
    name.push(format!(".set-aside-{}.{:09}", now.as_secs(), now.subsec_nanos()));
    let aside = PathBuf::from(name);
    std::fs::rename(log, &aside)
        .map_err(|e| StorageError::Io(format!("cannot move {} aside to {}: {e}", log.display(), aside.display())))?;
    Ok(aside)
}

fn log_error(path: &Path, error: LogError) -> StorageError {
    match error {
        LogError::Io(e) => StorageError::Io(format!("{}: {e}", path.display())),
        LogError::Corrupt(message) => StorageError::Corrupt(message),
        LogError::MaybeWritten(e) => StorageError::OutcomeUnknown(format!("{}: {e}", path.display())),
    }
}

impl RedbBackend {
    /// A clean close leaves nothing to replay: everything goes into the database file, which
    /// records that it no longer needs its log. Not after a failed write: the next open
    /// replays the log instead.
    fn close(&self) -> Result<(), StorageError> {
        let Some(log) = &self.log else { return Ok(()) };
        if self.failed.load(Ordering::SeqCst) {
            return Ok(());
        }
        let db = self.database()?;
        let mut slot = log.wal.lock().map_err(|_| StorageError::Other("the log's lock is poisoned".into()))?;
        let Some(wal) = slot.as_mut() else { return Ok(()) };
        let marks = [(identity::META_LOG_OPEN, 0), (identity::META_LOG_EPOCH, wal.next_epoch())];
        durable_commit(&db, &marks, None)?;
        // Emptied too, so a backup restored in the database's place finds a log that holds
        // nobody's writes, and takes it over.
        wal.start_over(wal.next_lsn()).map_err(|e| log_error(&log.path, e))
    }
}

impl Drop for RedbBackend {
    fn drop(&mut self) {
        if let Err(error) = self.close() {
            tracing::warn!(%error, "could not close the database cleanly; its log is replayed at the next open");
        }
    }
}

/// Where a database's holder note lives, so tools can show it.
pub fn holder_note_path(db_path: &Path) -> PathBuf {
    holder::note_path(db_path)
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

struct RedbRead(ReadTransaction);

struct RedbWrite<'a> {
    txn: WriteTransaction,
    /// Sequence number for the next event of the revision being appended.
    next_seq: Option<(u64, u32)>,
    backend: &'a RedbBackend,
    /// Bytes of entries and events written, for the free-space check at commit.
    written: u64,
    /// Bytes of the entries it overwrote or deleted, added to what the file has free
    /// ([`META_FREED`]) at commit.
    freed: u64,
    /// The calls made, for the log record; `None` without a log, or while replaying one.
    calls: Option<Calls>,
    /// The log, when this transaction carries logged batches not yet published (it was
    /// resumed after one).
    held: Option<HeldLog<'a>>,
}

/// Read paths shared by read and write transactions: redb exposes the same `ReadableTable`
/// trait on both, so one implementation serves each.
macro_rules! read_methods {
    ($field:tt) => {
        fn revision(&self) -> Result<u64, StorageError> {
            meta_value(&self.$field.open_table(META).map_err(storage)?, META_REVISION)
        }

        fn compacted_revision(&self) -> Result<u64, StorageError> {
            meta_value(&self.$field.open_table(META).map_err(storage)?, META_COMPACTED)
        }

        fn get(&self, key: &str) -> Result<Option<Entry>, StorageError> {
            let table = self.$field.open_table(table_for(key)).map_err(storage)?;
            let guard = table.get(key).map_err(storage)?;
            guard.map(|g| codec::decode_entry(key, g.value())).transpose()
        }

        fn scan(
            &self,
            prefix: &str,
            after: Option<&str>,
            visit: &mut dyn FnMut(Entry) -> bool,
        ) -> Result<(), StorageError> {
            // System keys all sort before user keys, so "everything" is records, then entries.
            let mut go_on = true;
            if prefix.is_empty() || keyspace::is_system(prefix) {
                go_on = scan_table(&|| self.$field.open_table(RECORDS).map_err(storage), prefix, after, visit)?;
            }
            if go_on && !keyspace::is_system(prefix) {
                scan_table(&|| self.$field.open_table(ENTRIES).map_err(storage), prefix, after, visit)?;
            }
            Ok(())
        }

        fn key_count(&self) -> Result<u64, StorageError> {
            self.$field.open_table(ENTRIES).map_err(storage)?.len().map_err(storage)
        }

        fn expired_before(&self, now: UnixMillis, limit: usize) -> Result<Vec<Entry>, StorageError> {
            let expiry = self.$field.open_table(EXPIRY).map_err(storage)?;
            let mut keys = Vec::new();
            for item in expiry.range((0u64, "")..=(now.0, "\u{10FFFF}")).map_err(storage)? {
                let (k, _) = item.map_err(storage)?;
                let (at, key) = k.value();
                if at > now.0 || keys.len() >= limit {
                    break;
                }
                keys.push(key.to_owned());
            }
            drop(expiry);
            let mut entries = Vec::with_capacity(keys.len());
            for key in keys {
                match self.get(&key)? {
                    Some(entry) => entries.push(entry),
                    None => return Err(StorageError::Corrupt(format!("expiry index names missing key `{key}`"))),
                }
            }
            Ok(entries)
        }

        fn history(
            &self,
            keys: &KeyFilter,
            revisions: RangeInclusive<u64>,
            order: Order,
            visit: &mut dyn FnMut(Event) -> bool,
        ) -> Result<(), StorageError> {
            let events = self.$field.open_table(EVENTS).map_err(storage)?;
            match keys {
                KeyFilter::Exact(key) => {
                    let index = self.$field.open_table(KEY_EVENTS).map_err(storage)?;
                    key_history(&index, &events, key, revisions, order, visit)
                }
                filter => scan_history(&events, filter, revisions, order, visit),
            }
        }
    };
}

impl ReadTxn for RedbRead {
    read_methods!(0);
}

impl ReadTxn for RedbWrite<'_> {
    read_methods!(txn);
}

fn meta_value(meta: &impl ReadableTable<&'static str, u64>, name: &str) -> Result<u64, StorageError> {
    Ok(meta.get(name).map_err(storage)?.map_or(0, |g| g.value()))
}

/// Entries read per chunk of a scan.
const SCAN_CHUNK: usize = 64;

/// Visits one table's entries under `prefix`; returns false once `visit` asked to stop.
///
/// The table is read a chunk at a time and closed before the chunk is visited, so a visitor
/// may read other records (a write transaction refuses to open a table twice).
fn scan_table<T: ReadableTable<&'static str, &'static [u8]>>(
    open: &dyn Fn() -> Result<T, StorageError>,
    prefix: &str,
    after: Option<&str>,
    visit: &mut dyn FnMut(Entry) -> bool,
) -> Result<bool, StorageError> {
    use std::ops::Bound;
    let mut cursor = after.map(str::to_owned);
    loop {
        let chunk = {
            let table = open()?;
            let start = match cursor.as_deref() {
                Some(after) if after >= prefix => Bound::Excluded(after),
                _ => Bound::Included(prefix),
            };
            let mut chunk = Vec::with_capacity(SCAN_CHUNK);
            for item in table.range::<&str>((start, Bound::Unbounded)).map_err(storage)? {
                let (key, value) = item.map_err(storage)?;
                let key = key.value();
                if !key.starts_with(prefix) || chunk.len() == SCAN_CHUNK {
                    break;
                }
                chunk.push(codec::decode_entry(key, value.value())?);
            }
            chunk
        };
        let complete = chunk.len() < SCAN_CHUNK;
        for entry in chunk {
            cursor = Some(entry.key.clone());
            if !visit(entry) {
                return Ok(false);
            }
        }
        if complete {
            return Ok(true);
        }
    }
}

/// A redb range walked forwards or backwards.
fn ordered<'a, T: DoubleEndedIterator + 'a>(range: T, order: Order) -> Box<dyn Iterator<Item = T::Item> + 'a> {
    match order {
        Order::Ascending => Box::new(range),
        Order::Descending => Box::new(range.rev()),
    }
}

fn key_history(
    index: &impl ReadableTable<(&'static str, u64, u32), u64>,
    events: &impl ReadableTable<(u64, u32), &'static [u8]>,
    key: &str,
    revisions: RangeInclusive<u64>,
    order: Order,
    visit: &mut dyn FnMut(Event) -> bool,
) -> Result<(), StorageError> {
    let range = index.range((key, *revisions.start(), 0)..=(key, *revisions.end(), u32::MAX)).map_err(storage)?;
    // Walking backwards, one revision's events are gathered and handed over in append order.
    let mut pending: Vec<Event> = Vec::new();
    for item in ordered(range, order) {
        let (k, _) = item.map_err(storage)?;
        let (_, revision, seq) = k.value();
        let bytes = events
            .get((revision, seq))
            .map_err(storage)?
            .ok_or_else(|| StorageError::Corrupt(format!("history index points at missing event {revision}.{seq}")))?;
        let event = codec::decode_event(revision, bytes.value())?;
        match order {
            Order::Ascending => {
                if !visit(event) {
                    return Ok(());
                }
            }
            Order::Descending => {
                if pending.last().is_some_and(|e| e.revision != revision)
                    && !flush(&mut pending, &KeyFilter::All, visit)
                {
                    return Ok(());
                }
                pending.push(event);
            }
        }
    }
    flush(&mut pending, &KeyFilter::All, visit);
    Ok(())
}

fn scan_history(
    events: &impl ReadableTable<(u64, u32), &'static [u8]>,
    filter: &KeyFilter,
    revisions: RangeInclusive<u64>,
    order: Order,
    visit: &mut dyn FnMut(Event) -> bool,
) -> Result<(), StorageError> {
    let range = events.range((*revisions.start(), 0)..=(*revisions.end(), u32::MAX)).map_err(storage)?;
    // Walking backwards, one revision's events are gathered and handed over in append order,
    // so a reader replaying them sees each transaction as it happened.
    let mut pending: Vec<Event> = Vec::new();
    for item in ordered(range, order) {
        let (k, v) = item.map_err(storage)?;
        let (revision, _) = k.value();
        let event = codec::decode_event(revision, v.value())?;
        match order {
            Order::Ascending => {
                if filter.matches(&event.key) && !visit(event) {
                    return Ok(());
                }
            }
            Order::Descending => {
                if pending.last().is_some_and(|e| e.revision != revision) && !flush(&mut pending, filter, visit) {
                    return Ok(());
                }
                pending.push(event);
            }
        }
    }
    flush(&mut pending, filter, visit);
    Ok(())
}

/// Hands one revision's events (collected newest first) to `visit` in append order.
fn flush(pending: &mut Vec<Event>, filter: &KeyFilter, visit: &mut dyn FnMut(Event) -> bool) -> bool {
    for event in pending.drain(..).rev() {
        if filter.matches(&event.key) && !visit(event) {
            return false;
        }
    }
    true
}

impl WriteTxn for RedbWrite<'_> {
    fn put(&mut self, entry: &Entry) -> Result<(), StorageError> {
        let mut entries = self.txn.open_table(table_for(&entry.key)).map_err(storage)?;
        let encoded = codec::encode_entry(entry);
        self.written += encoded.len() as u64;
        if let Some(calls) = &mut self.calls {
            calls.put(entry, &encoded);
        }
        let old_expiry = match entries.insert(entry.key.as_str(), encoded.as_slice()).map_err(storage)? {
            Some(old) => {
                self.freed += old.value().len() as u64;
                codec::entry_expiry(&entry.key, old.value())?
            }
            None => None,
        };
        drop(entries);
        if old_expiry != entry.expires_at {
            let mut expiry = self.txn.open_table(EXPIRY).map_err(storage)?;
            if let Some(at) = old_expiry {
                expiry.remove((at.0, entry.key.as_str())).map_err(storage)?;
            }
            if let Some(at) = entry.expires_at {
                expiry.insert((at.0, entry.key.as_str()), ()).map_err(storage)?;
            }
        }
        Ok(())
    }

    fn delete(&mut self, key: &str) -> Result<(), StorageError> {
        if let Some(calls) = &mut self.calls {
            calls.delete(key);
        }
        let mut entries = self.txn.open_table(table_for(key)).map_err(storage)?;
        let old_expiry = match entries.remove(key).map_err(storage)? {
            Some(old) => {
                self.freed += old.value().len() as u64;
                codec::entry_expiry(key, old.value())?
            }
            None => None,
        };
        drop(entries);
        if let Some(at) = old_expiry {
            self.txn.open_table(EXPIRY).map_err(storage)?.remove((at.0, key)).map_err(storage)?;
        }
        Ok(())
    }

    fn append(&mut self, event: &Event) -> Result<(), StorageError> {
        let seq = match self.next_seq {
            Some((revision, seq)) if revision == event.revision => seq,
            _ => 0,
        };
        self.next_seq = Some((event.revision, seq + 1));
        let encoded = codec::encode_event(event);
        self.written += encoded.len() as u64;
        if let Some(calls) = &mut self.calls {
            calls.append(event, &encoded);
        }
        self.txn
            .open_table(EVENTS)
            .map_err(storage)?
            .insert((event.revision, seq), encoded.as_slice())
            .map_err(storage)?;
        self.txn
            .open_table(KEY_EVENTS)
            .map_err(storage)?
            .insert((event.key.as_str(), event.revision, seq), event.version)
            .map_err(storage)?;
        Ok(())
    }

    fn set_revision(&mut self, revision: u64) -> Result<(), StorageError> {
        if let Some(calls) = &mut self.calls {
            calls.set_revision(revision);
        }
        self.txn.open_table(META).map_err(storage)?.insert(META_REVISION, revision).map_err(storage)?;
        Ok(())
    }

    fn clear(&mut self, compacted_through: u64) -> Result<u64, StorageError> {
        if let Some(calls) = &mut self.calls {
            calls.clear(compacted_through);
        }
        let mut removed = 0;
        for table in [ENTRIES, RECORDS] {
            removed += self.txn.open_table(table).map_err(storage)?.len().map_err(storage)?;
        }
        // Dropping and recreating a table frees its pages at once instead of row by row.
        for table in [ENTRIES, RECORDS] {
            self.txn.delete_table(table).map_err(storage)?;
            self.txn.open_table(table).map_err(storage)?;
        }
        self.txn.delete_table(EXPIRY).map_err(storage)?;
        self.txn.open_table(EXPIRY).map_err(storage)?;
        self.txn.delete_table(EVENTS).map_err(storage)?;
        self.txn.open_table(EVENTS).map_err(storage)?;
        self.txn.delete_table(KEY_EVENTS).map_err(storage)?;
        self.txn.open_table(KEY_EVENTS).map_err(storage)?;
        self.txn.open_table(META).map_err(storage)?.insert(META_COMPACTED, compacted_through).map_err(storage)?;
        self.next_seq = None;
        Ok(removed)
    }

    fn compact(&mut self, through: u64, limit: usize) -> Result<u64, StorageError> {
        if let Some(calls) = &mut self.calls {
            calls.compact(through, limit);
        }
        let mut compacted = meta_value(&self.txn.open_table(META).map_err(storage)?, META_COMPACTED)?;
        if through <= compacted {
            return Ok(compacted);
        }
        let mut doomed: Vec<(u64, u32, String)> = Vec::new();
        let mut stopped_early = false;
        let mut freed = 0u64;
        {
            let events = self.txn.open_table(EVENTS).map_err(storage)?;
            for item in events.range((compacted + 1, 0)..=(through, u32::MAX)).map_err(storage)? {
                let (k, v) = item.map_err(storage)?;
                let (revision, seq) = k.value();
                // Stop only between revisions, so a revision is never half compacted.
                if doomed.len() >= limit && doomed.last().is_some_and(|d| d.0 != revision) {
                    stopped_early = true;
                    break;
                }
                let key = codec::event_key(v.value())?;
                // The event, and its key again in the index.
                freed += (v.value().len() + 2 * key.len() + 24) as u64;
                doomed.push((revision, seq, key));
            }
        }
        {
            let mut events = self.txn.open_table(EVENTS).map_err(storage)?;
            let mut index = self.txn.open_table(KEY_EVENTS).map_err(storage)?;
            for (revision, seq, key) in &doomed {
                events.remove((*revision, *seq)).map_err(storage)?;
                index.remove((key.as_str(), *revision, *seq)).map_err(storage)?;
            }
        }
        compacted = match doomed.last() {
            Some(last) if stopped_early => last.0,
            _ => through,
        };
        self.txn.open_table(META).map_err(storage)?.insert(META_COMPACTED, compacted).map_err(storage)?;
        self.freed += freed;
        Ok(compacted)
    }

    fn commit(self: Box<Self>) -> Result<(), StorageError> {
        if let Some(mut logged) = self.commit_durably()? {
            // Durable either way: a failure to apply it now is recovered from the log.
            if let Err(error) = logged.publish() {
                tracing::warn!(%error, "a logged batch is applied when the database is reopened");
            }
            logged.finish();
        }
        Ok(())
    }

    fn commit_durably<'t>(self: Box<Self>) -> Result<Option<Box<dyn Unpublished + 't>>, StorageError>
    where
        Self: 't,
    {
        let RedbWrite { mut txn, backend, calls, held, written, freed, .. } = *self;
        let nothing_to_log = calls.as_ref().is_some_and(Calls::is_empty);
        let held = match held {
            // A batch that changed nothing, in a transaction that carries others: nothing to
            // log, nothing more to write.
            Some(held) if nothing_to_log && held.carrying() => {
                return Ok(Some(Box::new(Logged::new(txn, held, backend))));
            }
            held => held,
        };
        // The commit that publishes writes what every batch the transaction carries wrote.
        // Refused, the transaction is dropped, so nothing of this batch reaches the file (and
        // the batches it carried are redone on their own, see `HeldLog`).
        // Batches the transaction carries are counted already (in `undurable`).
        let counted = add_freed(&txn, freed);
        if let Err(refused) = counted.and_then(|()| backend.check_named()).and_then(|()| backend.check_space(written)) {
            // The transaction goes first, as below: the batches it carried are redone in a
            // transaction of their own, which waits for this one's write slot. Left to the
            // return, `held` (declared later) would be dropped first and wait for ever.
            drop(txn);
            drop(held);
            return Err(refused);
        }
        let (Some(calls), Some(log)) = (calls, &backend.log) else {
            txn.commit().map_err(|e| backend.noted(storage(e)))?;
            return Ok(None);
        };
        // Held until the batch is published: a reopen (which replays the log) must not run
        // between the append and the commit that applies it.
        let mut held = match held {
            Some(held) => held,
            None => HeldLog::lock(log, backend)?,
        };
        match append_batch(&mut txn, &mut held, calls, written, log) {
            Ok(()) => {
                backend.undurable.fetch_add(written, Ordering::Relaxed);
                failpoint::crash_at("wal-synced");
                Ok(Some(Box::new(Logged::new(txn, held, backend))))
            }
            Err(error) => {
                // The transaction goes first: batches it carried are redone in one of their own.
                drop(txn);
                drop(held);
                Err(error)
            }
        }
    }
}

/// Adds `bytes` to what the file is counted to have free: entries overwritten or deleted and
/// history compacted leave their pages free, which tells [`RedbBackend::shrink`] without a
/// walk of the file whether it is worth compacting.
fn add_freed(txn: &WriteTransaction, bytes: u64) -> Result<(), StorageError> {
    if bytes == 0 {
        return Ok(());
    }
    let mut meta = txn.open_table(META).map_err(storage)?;
    let before = meta_value(&meta, META_FREED)?;
    meta.insert(META_FREED, before.saturating_add(bytes)).map_err(storage)?;
    Ok(())
}

/// Appends the batch's calls to the log, durably, and marks `txn` as applying them.
fn append_batch(
    txn: &mut WriteTransaction,
    held: &mut HeldLog<'_>,
    calls: Calls,
    written: u64,
    log: &Log,
) -> Result<(), StorageError> {
    let Some(wal) = held.wal() else {
        return Err(StorageError::Io("the write-ahead log is being reopened; retry shortly".into()));
    };
    let lsn = wal.next_lsn();
    txn.open_table(META).map_err(storage)?.insert(META_WAL_LSN, lsn).map_err(storage)?;
    txn.set_durability(Durability::None).map_err(|e| StorageError::Other(e.to_string()))?;
    let payload = calls.into_bytes();
    // Durable once this returns; visible to readers only once published.
    if let Err(error) = wal.append(&payload) {
        // Not applied unless the log could not say: the transaction is dropped unapplied.
        return Err(match error {
            LogError::MaybeWritten(e) => StorageError::OutcomeUnknown(format!(
                "{}: the write reached the log but its sync failed, and it could not be taken back, so a \
                 restart may apply it: {e}",
                log.path.display()
            )),
            other => log_error(&log.path, other),
        });
    }
    held.carry(lsn, payload, written);
    Ok(())
}

#[cfg(test)]
mod cache_tests {
    use super::cache_for;

    #[test]
    fn the_cache_follows_the_file_between_its_bounds_unless_given() {
        const MIB: u64 = 1024 * 1024;
        assert_eq!(cache_for(0, None) as u64, 8 * MIB, "a new store");
        assert_eq!(cache_for(40 * MIB, None) as u64, 20 * MIB);
        assert_eq!(cache_for(1200 * MIB, None) as u64, 64 * MIB, "the 30-minute soak's file");
        assert_eq!(cache_for(1200 * MIB, Some(512 * MIB)) as u64, 512 * MIB, "--cache-size wins");
    }
}
