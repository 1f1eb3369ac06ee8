//! Replaying the write-ahead log into the file at open, and reopening the file after a write
//! failed in I/O: what a crash and a full disk leave behind is redone from the log.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use redb::{Database, Durability};

use super::checkpoint::durable_commit;
use super::identity::{Distrust, Stored};
use super::txn::RedbWrite;
use super::wal::Wal;
use super::{META, META_WAL_LSN, RedbBackend, log_error, storage};
use super::{failpoint, identity, logged, wal};
use crate::error::StorageError;

/// Whether an open may go on without writes its log lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LogLoss {
    Refuse,
    Accept,
}

/// Why a replay did not happen.
pub(super) enum Replay {
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

/// Renames a log that is not to be replayed out of the way, keeping it for whoever wants what
/// it holds. Returns its new name.
pub(super) fn set_aside(log: &Path) -> Result<PathBuf, StorageError> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let mut name = log.as_os_str().to_owned();
    name.push(format!(".set-aside-{}.{:09}", now.as_secs(), now.subsec_nanos()));
    let aside = PathBuf::from(name);
    std::fs::rename(log, &aside)
        .map_err(|e| StorageError::Io(format!("cannot move {} aside to {}: {e}", log.display(), aside.display())))?;
    Ok(aside)
}

impl RedbBackend {
    /// Redoes, on `db` as of its last durable commit, every logged batch after it, makes that
    /// durable and starts the log over. Run at open and after a reopen. A log that may lack
    /// acknowledged writes is refused unless `loss` accepts that.
    pub(super) fn replay(&self, db: &Database, loss: LogLoss) -> Result<(), Replay> {
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
    pub(super) fn redo<'p>(
        &self,
        db: &Database,
        records: impl IntoIterator<Item = (u64, &'p [u8])>,
    ) -> Result<(), StorageError> {
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

    /// Reopens the database after a failed write: redb refuses everything until then, and a
    /// reopen rolls back to the last commit, as after a crash.
    pub(super) fn recover(&self) -> Result<(), StorageError> {
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
}
