//! Checkpoints: a durable redb commit after which the log starts over, when the log grows
//! past its limit, when it was damaged, when the disk is tight, and at a clean close.

use std::path::Path;
use std::sync::atomic::Ordering;

use redb::Database;

use super::wal::Wal;
use super::{META, NAMES, RedbBackend, log_error, storage};
use super::{failpoint, identity};
use crate::error::StorageError;

/// A commit that makes every earlier one durable (redb persists commits made without a sync
/// of their own with the next one that has it), recording `marks` in `meta` and the path the
/// database is open at, if given.
pub(super) fn durable_commit(db: &Database, marks: &[(&str, u64)], path: Option<&Path>) -> Result<(), StorageError> {
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

impl Drop for RedbBackend {
    fn drop(&mut self) {
        if let Err(error) = self.close() {
            tracing::warn!(%error, "could not close the database cleanly; its log is replayed at the next open");
        }
    }
}

impl RedbBackend {
    /// A log whose last append failed takes no more until it starts over: checkpoint first.
    /// Before a write transaction begins, since the checkpoint is a write transaction itself.
    pub(super) fn mend_log(&self) -> Result<(), StorageError> {
        let tight = self.tight_on_space();
        self.checkpoint_if(|wal| wal.is_damaged() || tight)
    }

    /// Checkpoints when `due` says so of the log. The database handle is taken between two
    /// looks at the log, never under its lock, since a reopen takes the handle's lock first and
    /// the log's second; a handle that failed is reopened then (replaying the log, which starts
    /// it over), as a checkpoint on it could never succeed.
    pub(super) fn checkpoint_if(&self, due: impl Fn(&Wal) -> bool) -> Result<(), StorageError> {
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
    pub(super) fn checkpoint(&self, db: &Database, wal: &mut Wal) -> Result<(), StorageError> {
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

    /// A clean close leaves nothing to replay: everything goes into the database file, which
    /// records that it no longer needs its log. Not after a failed write: the next open
    /// replays the log instead.
    pub(super) fn close(&self) -> Result<(), StorageError> {
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
