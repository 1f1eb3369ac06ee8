//! What the writer's batches are made of, and where a committed batch goes: the `Command`
//! each queued write is, what it `Applied`, and the `Outlets` (statistics, the watch feed, the
//! sweeper's hint, readers' visibility) the writer and its chaining both report to. Apart
//! from `writer.rs` so that `chain.rs` needs nothing of the writer itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use state_core::plan::WriteContext;
use state_core::{Event, UnixMillis};

use super::maintenance::ExpiryHint;
use super::visibility::Visibility;
use super::watch::Feed;
use crate::backend::{Backend, WriteTxn};
use crate::error::StorageError;

/// What a command did inside the batch's transaction.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Applied {
    /// The revision it committed changes as: the next one, or for an import one above every
    /// revision its records carried.
    pub(super) revision: Option<u64>,
    /// It changed stored data (possibly without a revision, like compaction).
    pub(super) touched: bool,
    /// The soonest expiry among the entries it wrote, for the sweeper to wake by.
    pub(super) soonest_expiry: Option<UnixMillis>,
}

impl Applied {
    pub(super) const NOTHING: Applied = Applied { revision: None, touched: false, soonest_expiry: None };
}

/// One queued write. Applied inside the batch transaction (possibly more than once, if the
/// batch is retried), answered after the batch's commit.
pub(super) trait Command: Send {
    /// Applies the command; when `feed` is given, the events it committed are added to it.
    fn apply(
        &mut self,
        txn: &mut dyn WriteTxn,
        ctx: &WriteContext,
        feed: Option<&mut Vec<Event>>,
    ) -> Result<Applied, StorageError>;
    fn answer(self: Box<Self>, failure: Option<&StorageError>);
    /// The keys its plan reads first (`state_core::plan::ReadsFirst`), for the backend to
    /// fetch with the whole batch's as the transaction begins.
    fn reads_first(&self) -> &[String] {
        &[]
    }
    /// Whether it needs the backend to itself instead of a place in a batch: the writer then
    /// runs it between batches ([`Command::run_alone`]), with no write transaction open.
    fn alone(&self) -> bool {
        false
    }
    /// Runs a command that is [`Command::alone`]; never called for the others.
    fn run_alone(&mut self, backend: &dyn Backend) {
        let _ = backend;
    }
}

/// How well group commit is batching, for benchmarks and health.
#[derive(Debug, Default)]
pub(super) struct WriterStats {
    batches: AtomicU64,
    commands: AtomicU64,
    largest: AtomicU64,
    pub(super) retries: AtomicU64,
    pub(super) commits: AtomicU64,
    pub(super) commit_nanos: AtomicU64,
    publications: AtomicU64,
    /// Commands the writer has staged so far, bumped as each is applied: proof of progress a
    /// ping can read while a long queue is still ahead of it.
    pub(super) applied: AtomicU64,
}

/// A snapshot of the writer's batching so far.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BatchStats {
    /// Write transactions the writer ran (one fsync each when something changed).
    pub batches: u64,
    /// Commands they carried.
    pub commands: u64,
    /// The most commands one transaction carried.
    pub largest: u64,
    /// Batches staged again after a retryable storage error.
    pub retries: u64,
    /// Batches that changed something and so committed (one fsync each).
    pub commits: u64,
    /// Time spent in those commits (mostly the fsync), in seconds.
    pub commit_seconds: f64,
    /// Publications of committed batches to readers that came after the answers (redb's:
    /// several batches staged in one transaction share one).
    pub publications: u64,
}

impl BatchStats {
    pub fn average(&self) -> f64 {
        if self.batches == 0 { 0.0 } else { self.commands as f64 / self.batches as f64 }
    }
}

impl WriterStats {
    pub(super) fn record(&self, size: usize) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.commands.fetch_add(size as u64, Ordering::Relaxed);
        self.largest.fetch_max(size as u64, Ordering::Relaxed);
    }

    pub(super) fn snapshot(&self) -> BatchStats {
        BatchStats {
            batches: self.batches.load(Ordering::Relaxed),
            commands: self.commands.load(Ordering::Relaxed),
            largest: self.largest.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            commits: self.commits.load(Ordering::Relaxed),
            commit_seconds: self.commit_nanos.load(Ordering::Relaxed) as f64 / 1e9,
            publications: self.publications.load(Ordering::Relaxed),
        }
    }

    pub(super) fn record_publication(&self) {
        self.publications.fetch_add(1, Ordering::Relaxed);
    }

    /// How many commands the writer has applied so far.
    pub(super) fn applied(&self) -> u64 {
        self.applied.load(Ordering::Relaxed)
    }
}

/// Where the writer reports each batch: to benchmarks and health, to watchers, to the
/// sweeper, and to readers waiting for what was acknowledged.
pub(super) struct Outlets {
    pub(super) stats: Arc<WriterStats>,
    pub(super) feed: Feed,
    pub(super) expiries: Arc<ExpiryHint>,
    pub(super) visibility: Arc<Visibility>,
}
