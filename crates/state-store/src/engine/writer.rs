//! The single writer and its group commit.
//!
//! All writes go through one OS thread that owns the backend's write transaction. It blocks
//! for the first queued command, then drains whatever else is already queued (no waiting for
//! stragglers), applies each command in queue order inside one transaction so each sees the
//! effects of the ones before it, commits once (one fsync), and only then answers every
//! command. Nothing is acknowledged or visible before it is durable.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use state_core::plan::{Mutation, Plan, WriteContext};
use tokio::sync::{mpsc, oneshot};

use super::view::TxnView;
use crate::backend::{Backend, ReadTxn, WriteTxn};
use crate::clock::Clock;
use crate::error::{EngineError, StorageError};

pub(super) type Reply<T> = oneshot::Sender<Result<T, EngineError>>;

/// What a command did inside the batch's transaction.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Applied {
    /// It committed changes as the next revision.
    pub(super) advances_revision: bool,
    /// It changed stored data (possibly without a revision, like compaction).
    pub(super) touched: bool,
}

/// One queued write. Applied inside the batch transaction, answered after the batch's commit.
pub(super) trait Command: Send {
    fn apply(&mut self, txn: &mut dyn WriteTxn, ctx: &WriteContext) -> Result<Applied, StorageError>;
    fn answer(self: Box<Self>, failure: Option<&StorageError>);
}

/// A command whose rules live in a core planner: `plan` reads through a view of the batch's
/// transaction and returns the outcome with the exact changes to apply.
pub(super) struct Planned<T, F> {
    plan: Option<F>,
    outcome: Option<T>,
    reply: Reply<T>,
}

impl<T, F> Planned<T, F>
where
    T: Send + 'static,
    F: FnOnce(&TxnView<'_>, &WriteContext) -> Result<Plan<T>, StorageError> + Send + 'static,
{
    pub(super) fn boxed(plan: F, reply: Reply<T>) -> Box<dyn Command> {
        Box::new(Planned { plan: Some(plan), outcome: None, reply })
    }
}

impl<T, F> Command for Planned<T, F>
where
    T: Send,
    F: FnOnce(&TxnView<'_>, &WriteContext) -> Result<Plan<T>, StorageError> + Send,
{
    fn apply(&mut self, txn: &mut dyn WriteTxn, ctx: &WriteContext) -> Result<Applied, StorageError> {
        let plan =
            self.plan.take().ok_or_else(|| StorageError::Other("internal error: command applied twice".into()))?;
        let read: &dyn ReadTxn = &*txn;
        let plan = plan(&TxnView(read), ctx)?;
        let commits = plan.commits();
        apply_plan(txn, &plan)?;
        self.outcome = Some(plan.outcome);
        Ok(Applied { advances_revision: commits, touched: commits })
    }

    fn answer(self: Box<Self>, failure: Option<&StorageError>) {
        answer(self.reply, failure, self.outcome);
    }
}

/// A command that works on the transaction directly (compaction, reset).
pub(super) struct Raw<T, F> {
    run: Option<F>,
    outcome: Option<T>,
    reply: Reply<T>,
}

impl<T, F> Raw<T, F>
where
    T: Send + 'static,
    F: FnOnce(&mut dyn WriteTxn, &WriteContext) -> Result<(T, Applied), StorageError> + Send + 'static,
{
    pub(super) fn boxed(run: F, reply: Reply<T>) -> Box<dyn Command> {
        Box::new(Raw { run: Some(run), outcome: None, reply })
    }
}

impl<T, F> Command for Raw<T, F>
where
    T: Send,
    F: FnOnce(&mut dyn WriteTxn, &WriteContext) -> Result<(T, Applied), StorageError> + Send,
{
    fn apply(&mut self, txn: &mut dyn WriteTxn, ctx: &WriteContext) -> Result<Applied, StorageError> {
        let run = self.run.take().ok_or_else(|| StorageError::Other("internal error: command applied twice".into()))?;
        let (outcome, applied) = run(txn, ctx)?;
        self.outcome = Some(outcome);
        Ok(applied)
    }

    fn answer(self: Box<Self>, failure: Option<&StorageError>) {
        answer(self.reply, failure, self.outcome);
    }
}

/// Answers a caller once its batch's fate is known.
fn answer<T>(reply: Reply<T>, failure: Option<&StorageError>, outcome: Option<T>) {
    let result = match (failure, outcome) {
        (Some(error), _) => Err(error.clone().into()),
        (None, Some(outcome)) => Ok(outcome),
        (None, None) => Err(StorageError::Other("internal error: command never applied".into()).into()),
    };
    // A caller that stopped waiting (dropped its receiver) needs no answer.
    let _ = reply.send(result);
}

fn apply_plan<T>(txn: &mut dyn WriteTxn, plan: &Plan<T>) -> Result<(), StorageError> {
    for mutation in &plan.mutations {
        match mutation {
            Mutation::Put(entry) => txn.put(entry)?,
            Mutation::Delete(key) => txn.delete(key)?,
        }
    }
    for event in &plan.events {
        txn.append(event)?;
    }
    Ok(())
}

/// How well group commit is batching, for benchmarks and health.
#[derive(Debug, Default)]
pub(super) struct WriterStats {
    batches: AtomicU64,
    commands: AtomicU64,
    largest: AtomicU64,
}

/// A snapshot of the writer's batching so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BatchStats {
    /// Write transactions the writer ran (one fsync each when something changed).
    pub batches: u64,
    /// Commands they carried.
    pub commands: u64,
    /// The most commands one transaction carried.
    pub largest: u64,
}

impl BatchStats {
    pub fn average(&self) -> f64 {
        if self.batches == 0 { 0.0 } else { self.commands as f64 / self.batches as f64 }
    }
}

impl WriterStats {
    fn record(&self, size: usize) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.commands.fetch_add(size as u64, Ordering::Relaxed);
        self.largest.fetch_max(size as u64, Ordering::Relaxed);
    }

    pub(super) fn snapshot(&self) -> BatchStats {
        BatchStats {
            batches: self.batches.load(Ordering::Relaxed),
            commands: self.commands.load(Ordering::Relaxed),
            largest: self.largest.load(Ordering::Relaxed),
        }
    }
}

pub(super) fn run(
    backend: Arc<dyn Backend>,
    clock: Arc<dyn Clock>,
    mut queue: mpsc::Receiver<Box<dyn Command>>,
    max_batch: usize,
    stats: Arc<WriterStats>,
) {
    let mut batch: Vec<Box<dyn Command>> = Vec::with_capacity(max_batch);
    while let Some(first) = queue.blocking_recv() {
        batch.push(first);
        while batch.len() < max_batch {
            match queue.try_recv() {
                Ok(command) => batch.push(command),
                Err(_) => break,
            }
        }
        stats.record(batch.len());
        let failure = stage_and_commit(&*backend, clock.now(), &mut batch).err();
        if let Some(error) = &failure {
            tracing::error!(%error, commands = batch.len(), "write batch failed; nothing in it was applied");
        }
        for command in batch.drain(..) {
            command.answer(failure.as_ref());
        }
    }
    tracing::debug!("write queue closed; writer stopping");
}

fn stage_and_commit(
    backend: &dyn Backend,
    now: state_core::UnixMillis,
    batch: &mut [Box<dyn Command>],
) -> Result<(), StorageError> {
    let mut txn = backend.begin_write()?;
    let start = txn.revision()?;
    let mut revision = start;
    let mut touched = false;
    for command in batch.iter_mut() {
        let ctx = WriteContext { now, revision };
        let applied = command.apply(&mut *txn, &ctx)?;
        if applied.advances_revision {
            revision += 1;
        }
        touched |= applied.touched;
    }
    if revision != start {
        txn.set_revision(revision)?;
    }
    // A batch of pure conflicts or no-ops changed nothing: dropping the transaction aborts it
    // and skips an fsync.
    if touched { txn.commit() } else { Ok(()) }
}
