//! Batches whose log records are durable and acknowledged, not yet committed to redb: the
//! commit (without a sync of its own) is what publishes them to readers.
//!
//! The transaction can be resumed to stage the next batch before that commit. redb copies
//! every page a commit published before changing it again, and writes a page it has not
//! published in place, so batches published together cost the B-trees a fraction of batches
//! published one by one.

use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};

use redb::{Database, WriteTransaction};

use super::logged::Calls;
use super::wal::Wal;
use super::{Log, RedbBackend, RedbWrite, failpoint, storage};
use crate::backend::{Unpublished, WriteTxn};
use crate::error::StorageError;

/// The log's lock, held from a batch's append until the commit that publishes it, so a reopen
/// (which replays the log) never runs in between; with the batches the transaction carries.
/// Let go while it still carries batches (the transaction was abandoned before its commit,
/// a later batch in it having failed), it redoes them in a transaction of their own, so
/// acknowledged batches are never lost nor left unseen; failing that, the database is reopened
/// and the log replayed before the next operation.
pub(super) struct HeldLog<'a> {
    wal: MutexGuard<'a, Option<Wal>>,
    backend: &'a RedbBackend,
    /// The handle the transaction came from, for the redo: taken before the log's lock, as a
    /// reopen takes them.
    db: Arc<Database>,
    /// The logged batches the transaction applies and its commit has not published: their
    /// LSNs and payloads.
    carried: Vec<(u64, Vec<u8>)>,
    /// Bytes of entries and events those batches wrote.
    carried_bytes: u64,
}

/// A transaction stops taking more batches once those it carries wrote this much: their
/// payloads stay in memory until the commit, and the commit writes them all.
const MAX_CARRIED_BYTES: u64 = 8 * 1024 * 1024;

impl<'a> HeldLog<'a> {
    pub(super) fn lock(log: &'a Log, backend: &'a RedbBackend) -> Result<HeldLog<'a>, StorageError> {
        // The handle as it is, never reopened here: this transaction came from it.
        let db = backend.db.read().ok().and_then(|db| db.clone()).ok_or_else(|| {
            StorageError::Io("the database is being reopened after a failed write; retry shortly".into())
        })?;
        let wal = log.wal.lock().map_err(|_| StorageError::Other("the log's lock is poisoned".into()))?;
        Ok(HeldLog { wal, backend, db, carried: Vec::new(), carried_bytes: 0 })
    }

    /// The log, unless it is being reopened.
    pub(super) fn wal(&mut self) -> Option<&mut Wal> {
        self.wal.as_mut()
    }

    /// Whether the transaction carries logged batches its commit has not published.
    pub(super) fn carrying(&self) -> bool {
        !self.carried.is_empty()
    }

    /// A batch that wrote `written` bytes was appended: the transaction now carries it.
    pub(super) fn carry(&mut self, lsn: u64, payload: Vec<u8>, written: u64) {
        self.carried.push((lsn, payload));
        self.carried_bytes += written;
    }

    /// The transaction's commit published what it carried.
    fn published(&mut self) {
        self.carried.clear();
        self.carried_bytes = 0;
    }

    /// The commit failed: redb must be reopened (and the log replayed) before anything else.
    fn give_up_for_reopen(mut self) {
        self.carried.clear();
        self.carried_bytes = 0;
        self.backend.failed.store(true, Ordering::SeqCst);
    }
}

impl Drop for HeldLog<'_> {
    fn drop(&mut self) {
        if self.carried.is_empty() {
            return;
        }
        let records = self.carried.iter().map(|(lsn, payload)| (*lsn, payload.as_slice()));
        if let Err(error) = self.backend.redo(&self.db, records) {
            tracing::warn!(%error, "could not redo acknowledged batches after a later one failed; the log is replayed instead");
            // Noted before the lock goes: the next operation reopens the database first.
            self.backend.failed.store(true, Ordering::SeqCst);
        }
    }
}

/// A transaction whose batches are durable in the log and acknowledged; committing it to
/// redb publishes them.
pub(super) struct Logged<'a> {
    /// `None` once its commit was tried, or it was resumed.
    txn: Option<WriteTransaction>,
    /// `None` once given up (for a reopen after a failed commit, or to a resumed transaction).
    log: Option<HeldLog<'a>>,
    backend: &'a RedbBackend,
}

impl<'a> Logged<'a> {
    pub(super) fn new(txn: WriteTransaction, log: HeldLog<'a>, backend: &'a RedbBackend) -> Logged<'a> {
        Logged { txn: Some(txn), log: Some(log), backend }
    }
}

impl Unpublished for Logged<'_> {
    fn publish(&mut self) -> Result<(), StorageError> {
        let Some(txn) = self.txn.take() else { return Ok(()) };
        // The engine has answered: the callers get time to say so before the crash, so the
        // batch only the log holds is among the writes the test checks.
        failpoint::crash_at_after("acknowledged", std::time::Duration::from_millis(20));
        if let Err(error) = txn.commit() {
            // The batches are in the log and were acknowledged: they must not be lost nor stay
            // unseen. Whatever redb's error, the handle is reopened and the log replayed, these
            // batches included: here, before readers are let through, or else by the next
            // operation (a reopen needs every other handle gone).
            if let Some(log) = self.log.take() {
                log.give_up_for_reopen();
            }
            if let Err(reopen) = self.backend.recover() {
                tracing::warn!(%reopen, "the database is reopened by the next operation instead");
            }
            return Err(storage(error));
        }
        if let Some(log) = self.log.as_mut() {
            log.published();
        }
        failpoint::crash_at("committed");
        Ok(())
    }

    fn finish(mut self: Box<Self>) {
        // Only after a commit that succeeded: a failed one gave the log up for a reopen.
        let (None, Some(log)) = (&self.txn, self.log.take()) else { return };
        let backend = self.backend;
        let threshold = backend.log.as_ref().map_or(u64::MAX, |log| log.checkpoint_bytes.load(Ordering::Relaxed));
        // The lock goes before the checkpoint takes the database handle.
        drop(log);
        if let Err(error) = backend.checkpoint_if(|wal| wal.used() >= threshold) {
            // The batch is durable in the log: it stands. The next commit checkpoints again.
            tracing::warn!(%error, "checkpoint failed; the log keeps growing until one succeeds");
        }
    }

    fn resumable(&self) -> bool {
        self.txn.is_some() && self.log.as_ref().is_some_and(|log| log.carried_bytes < MAX_CARRIED_BYTES)
    }

    fn resume<'t>(mut self: Box<Self>) -> Result<Box<dyn WriteTxn + 't>, StorageError>
    where
        Self: 't,
    {
        let (Some(txn), Some(held)) = (self.txn.take(), self.log.take()) else {
            return Err(StorageError::Other("internal error: a published batch cannot be resumed".into()));
        };
        let calls = Some(Calls::default());
        Ok(Box::new(RedbWrite {
            txn,
            next_seq: None,
            backend: self.backend,
            written: 0,
            freed: 0,
            calls,
            held: Some(held),
        }))
    }
}
