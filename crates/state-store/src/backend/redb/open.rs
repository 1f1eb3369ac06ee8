//! Opening a database file (or one in memory): the file made private and checked, the tables
//! created, the log replayed, and a mostly free file compacted before anyone else holds it.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use redb::ReadableTable;

use super::holder::{Holder, HolderProcess};
use super::recovery::{LogLoss, Replay};
use super::space::cache_for;
use super::wal::LogFile;
use super::{
    ENTRIES, EVENTS, EXPIRY, KEY_EVENTS, Log, META, META_FORMAT, NAMES, OpenLog, RECORDS, RedbBackend, Reopen,
    STORE_FORMAT, storage,
};
use super::{holder, wal};
use crate::error::{OpenError, StorageError};
use crate::files;

/// Opens (creating it private) the log file beside the database at `db`.
pub(super) fn log_file(db: &Path) -> OpenLog {
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

/// Opens the database file for redb: see [`RedbBackend::open_as`].
pub(super) fn open_database_file(path: &Path) -> std::io::Result<std::fs::File> {
    let file =
        files::open_private(path, std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false))?;
    files::single_name(&file, path)?;
    Ok(file)
}

/// Where a database's holder note lives, so tools can show it.
pub fn holder_note_path(db_path: &Path) -> PathBuf {
    holder::note_path(db_path)
}

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

    pub(super) fn open_file(
        path: &Path,
        role: &str,
        loss: LogLoss,
        cache_bytes: Option<u64>,
    ) -> Result<RedbBackend, OpenError> {
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
        if let Err(error) = backend.shrink(Duration::ZERO, u64::MAX) {
            tracing::warn!(%error, "could not compact the database file; it keeps its size");
        }
        Ok(backend)
    }

    /// Opens the database at `path` through `opener` (which tests use to put a fault-injecting
    /// file under it), recording `role` in the holder note.
    pub(super) fn open_with(
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
            shrink_due: Mutex::new(None),
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
            shrink_due: Mutex::new(None),
            _holder: None,
        };
        backend.initialize()?;
        Ok(backend)
    }

    /// Creates every table so readers never meet a missing one, and checks the format.
    pub(super) fn initialize(&self) -> Result<(), StorageError> {
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
