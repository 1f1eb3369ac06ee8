//! The single writer and its group commit.
//!
//! All writes go through one OS thread that owns the backend's write transaction. It blocks
//! for the first queued command, then drains whatever else is already queued (no waiting for
//! stragglers), applies each command in queue order inside one transaction so each sees the
//! effects of the ones before it, makes it durable once (one sync; on redb one log append), and only
//! then answers every command. Nothing is acknowledged or visible before it is durable; the
//! batch is published to readers right after the answers ([`Visibility`] holds back reads that
//! begin in between), so a backend's apply step is not part of a write's latency.
//!
//! A batch that fails with a retryable storage error is staged again from the start: commands
//! are re-runnable (their plans are `Fn`), and nothing of a failed attempt was applied.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use state_core::idempotency::{self, Once, Seen};
use state_core::ops::history::KeyFilter;
use state_core::plan::{Mutation, Plan, WriteContext};
use state_core::{Event, EventKind, keyspace};
use tokio::sync::{mpsc, oneshot};

use super::batch::{Applied, Command, Outlets, WriterStats};
use super::chain::{Durable, Pacing, Pending};
use super::view::TxnView;
use super::watch::Feed;
use crate::backend::{Backend, Order, ReadTxn, WriteTxn};
use crate::backoff::Backoff;
use crate::clock::Clock;
use crate::error::{EngineError, StorageError};

pub(super) type Reply<T> = oneshot::Sender<Result<T, EngineError>>;

/// How often a batch that failed with a retryable error is staged again, and the first pause.
const RETRIES: u32 = 6;
const FIRST_BACKOFF: Duration = Duration::from_millis(2);

/// A request's idempotency key and how long its record is kept.
pub(super) struct Idempotency {
    pub(super) once: Option<Once>,
    pub(super) window_millis: u64,
}

impl Idempotency {
    /// The recorded outcome of an earlier identical request, or a refusal of a reused id;
    /// `None` when the command should run.
    fn earlier<T: DeserializeOwned>(
        &self,
        txn: &dyn ReadTxn,
        ctx: &WriteContext,
    ) -> Result<Option<Result<T, EngineError>>, StorageError> {
        let Some(once) = &self.once else { return Ok(None) };
        Ok(match idempotency::seen(&TxnView(txn), once, ctx.now)? {
            Seen::New => None,
            Seen::Reused(invalid) => Some(Err(invalid.into())),
            Seen::Replay(recorded) => Some(serde_json::from_value(recorded).map_err(|e| {
                StorageError::Corrupt(format!(
                    "the recorded result of request `{}` does not decode: {e}",
                    once.request_id
                ))
                .into()
            })),
        })
    }

    /// The record that answers a retry of this request with `outcome`, if it has an id.
    fn record<T: Serialize>(&self, outcome: &T, ctx: &WriteContext) -> Result<Option<Mutation>, StorageError> {
        let Some(once) = &self.once else { return Ok(None) };
        let result = serde_json::to_value(outcome)
            .map_err(|e| StorageError::Other(format!("internal error: cannot record a result: {e}")))?;
        Ok(Some(idempotency::record(once, result, ctx, self.window_millis)))
    }
}

/// A command whose rules live in a core planner: `plan` reads through a view of the batch's
/// transaction and returns the outcome with the exact changes to apply.
pub(super) struct Planned<T, F> {
    plan: F,
    idempotency: Idempotency,
    /// What the plan reads first, and the request's idempotency record.
    reads: Vec<String>,
    /// Recorded as `by` on the events the plan makes (not on expiries it sweeps on the way).
    author: Option<Arc<str>>,
    outcome: Option<Result<T, EngineError>>,
    reply: Reply<T>,
}

impl<T, F> Planned<T, F>
where
    T: Serialize + DeserializeOwned + Send + 'static,
    F: Fn(&TxnView<'_>, &WriteContext) -> Result<Plan<T>, StorageError> + Send + 'static,
{
    pub(super) fn boxed(
        plan: F,
        idempotency: Idempotency,
        mut reads: Vec<String>,
        author: Option<Arc<str>>,
        reply: Reply<T>,
    ) -> Box<dyn Command> {
        if let Some(once) = &idempotency.once {
            reads.push(keyspace::request_key(&once.request_id));
        }
        Box::new(Planned { plan, idempotency, reads, author, outcome: None, reply })
    }
}

impl<T, F> Command for Planned<T, F>
where
    T: Serialize + DeserializeOwned + Send,
    F: Fn(&TxnView<'_>, &WriteContext) -> Result<Plan<T>, StorageError> + Send,
{
    fn apply(
        &mut self,
        txn: &mut dyn WriteTxn,
        ctx: &WriteContext,
        feed: Option<&mut Vec<Event>>,
    ) -> Result<Applied, StorageError> {
        if let Some(earlier) = self.idempotency.earlier(&*txn, ctx)? {
            self.outcome = Some(earlier);
            return Ok(Applied::NOTHING);
        }
        let read: &dyn ReadTxn = &*txn;
        let mut plan = (self.plan)(&TxnView(read), ctx)?;
        if let Some(author) = &self.author {
            for event in plan.events.iter_mut().filter(|e| e.kind != EventKind::Expired) {
                event.by = Some(author.to_string());
            }
        }
        // Only a request that changed something is recorded: one that changed nothing can be
        // evaluated again on retry without applying anything twice.
        if plan.advances_revision()
            && let Some(record) = self.idempotency.record(&plan.outcome, ctx)?
        {
            plan.mutations.push(record);
        }
        let soonest_expiry = plan
            .mutations
            .iter()
            .filter_map(|m| match m {
                Mutation::Put(entry) => entry.expires_at,
                Mutation::Delete(_) => None,
            })
            .min();
        let applied = Applied { revision: plan.commit_revision(), touched: plan.commits(), soonest_expiry };
        apply_plan(txn, &plan)?;
        let Plan { outcome, events, .. } = plan;
        if let Some(feed) = feed {
            feed.extend(events);
        }
        self.outcome = Some(Ok(outcome));
        Ok(applied)
    }

    fn answer(self: Box<Self>, failure: Option<&StorageError>) {
        answer(self.reply, failure, self.outcome);
    }

    fn reads_first(&self) -> &[String] {
        &self.reads
    }
}

/// A command that works on the transaction directly (compaction, reset).
pub(super) struct Raw<T, F> {
    run: F,
    idempotency: Idempotency,
    outcome: Option<Result<T, EngineError>>,
    reply: Reply<T>,
}

impl<T, F> Raw<T, F>
where
    T: Serialize + DeserializeOwned + Send + 'static,
    F: Fn(&mut dyn WriteTxn, &WriteContext) -> Result<(T, Applied), StorageError> + Send + 'static,
{
    pub(super) fn boxed(run: F, idempotency: Idempotency, reply: Reply<T>) -> Box<dyn Command> {
        Box::new(Raw { run, idempotency, outcome: None, reply })
    }
}

impl<T, F> Command for Raw<T, F>
where
    T: Serialize + DeserializeOwned + Send,
    F: Fn(&mut dyn WriteTxn, &WriteContext) -> Result<(T, Applied), StorageError> + Send,
{
    fn apply(
        &mut self,
        txn: &mut dyn WriteTxn,
        ctx: &WriteContext,
        feed: Option<&mut Vec<Event>>,
    ) -> Result<Applied, StorageError> {
        if let Some(earlier) = self.idempotency.earlier(&*txn, ctx)? {
            self.outcome = Some(earlier);
            return Ok(Applied::NOTHING);
        }
        let (outcome, applied) = (self.run)(txn, ctx)?;
        if applied.revision.is_some()
            && let Some(feed) = feed
        {
            // A raw command appends its events itself: read them back from the transaction.
            let revision = ctx.next_revision();
            txn.history(&KeyFilter::All, revision..=revision, Order::Ascending, &mut |event| {
                feed.push(event);
                true
            })?;
        }
        if applied.revision.is_some()
            && let Some(Mutation::Put(record)) = self.idempotency.record(&outcome, ctx)?
        {
            txn.put(&record)?;
        }
        self.outcome = Some(Ok(outcome));
        Ok(applied)
    }

    fn answer(self: Box<Self>, failure: Option<&StorageError>) {
        answer(self.reply, failure, self.outcome);
    }
}

/// A command that needs the backend to itself (giving the file's space back): run between
/// batches, never inside one.
pub(super) struct Alone<T, F> {
    run: Option<F>,
    outcome: Option<Result<T, EngineError>>,
    reply: Reply<T>,
}

impl<T, F> Alone<T, F>
where
    T: Send + 'static,
    F: FnOnce(&dyn Backend) -> Result<T, StorageError> + Send + 'static,
{
    pub(super) fn boxed(run: F, reply: Reply<T>) -> Box<dyn Command> {
        Box::new(Alone { run: Some(run), outcome: None, reply })
    }
}

impl<T, F> Command for Alone<T, F>
where
    T: Send,
    F: FnOnce(&dyn Backend) -> Result<T, StorageError> + Send,
{
    fn apply(
        &mut self,
        _: &mut dyn WriteTxn,
        _: &WriteContext,
        _: Option<&mut Vec<Event>>,
    ) -> Result<Applied, StorageError> {
        Err(StorageError::Other("internal error: a command that runs alone was put in a batch".into()))
    }

    fn answer(self: Box<Self>, failure: Option<&StorageError>) {
        answer(self.reply, failure, self.outcome);
    }

    fn alone(&self) -> bool {
        true
    }

    fn run_alone(&mut self, backend: &dyn Backend) {
        if let Some(run) = self.run.take() {
            self.outcome = Some(run(backend).map_err(EngineError::from));
        }
    }
}

/// Answers a caller once its batch's fate is known.
fn answer<T>(reply: Reply<T>, failure: Option<&StorageError>, outcome: Option<Result<T, EngineError>>) {
    let result = match (failure, outcome) {
        (Some(error), _) => Err(error.clone().into()),
        (None, Some(outcome)) => outcome,
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

pub(super) fn run(
    backend: Arc<dyn Backend>,
    clock: Arc<dyn Clock>,
    mut queue: mpsc::Receiver<Box<dyn Command>>,
    max_batch: usize,
    outlets: Outlets,
) {
    let mut batch: Vec<Box<dyn Command>> = Vec::with_capacity(max_batch);
    let mut pacing = Pacing::default();
    // Batches answered and not yet published, whose transaction the next batch continues.
    let mut pending: Option<Pending<'_>> = None;
    // A command that runs alone, met while draining the queue into a batch: next.
    let mut after_batch: Option<Box<dyn Command>> = None;
    loop {
        let first = match after_batch.take() {
            Some(command) => command,
            None => match pending.take() {
                Some(open) => match pacing.next_soon(&mut queue, &outlets.visibility) {
                    Some(command) => {
                        pending = Some(open);
                        command
                    }
                    None => {
                        open.publish(&outlets);
                        continue;
                    }
                },
                None => match queue.blocking_recv() {
                    Some(command) => {
                        pacing.arrived();
                        command
                    }
                    None => break,
                },
            },
        };
        if first.alone() {
            // Published first: what it carries holds the transaction it needs gone.
            if let Some(open) = pending.take() {
                open.publish(&outlets);
            }
            let mut command = first;
            command.run_alone(&*backend);
            command.answer(None);
            continue;
        }
        batch.push(first);
        while batch.len() < max_batch {
            match queue.try_recv() {
                Ok(command) if command.alone() => {
                    after_batch = Some(command);
                    break;
                }
                Ok(command) => batch.push(command),
                Err(_) => break,
            }
        }
        outlets.stats.record(batch.len());
        let resumed = pending.as_mut().and_then(Pending::resume);
        match commit_with_retries(&*backend, &*clock, &mut batch, &outlets.stats, &outlets.feed, resumed) {
            Ok((durable, continued)) => {
                if !continued && let Some(earlier) = pending.take() {
                    // Its transaction was abandoned: the backend redid its batches on their
                    // own before this one was staged afresh, so they are visible now.
                    earlier.publish(&outlets);
                }
                // Answered as soon as it is durable; published to readers after, while the
                // callers go on. Reads that begin meanwhile wait for the publication.
                let readers_held = durable
                    .as_ref()
                    .filter(|durable| durable.unpublished.is_some())
                    .map(|_| outlets.visibility.acknowledging());
                for command in batch.drain(..) {
                    command.answer(None);
                }
                pacing.answered();
                if let Some(durable) = durable {
                    let mut open = pending.take().unwrap_or_default();
                    open.extend(durable, readers_held);
                    if open.may_grow(&outlets) {
                        pending = Some(open);
                    } else {
                        open.publish(&outlets);
                    }
                }
            }
            Err(error) => {
                if let Some(earlier) = pending.take() {
                    earlier.publish(&outlets);
                }
                tracing::error!(%error, commands = batch.len(), "write batch failed; nothing in it was applied");
                for command in batch.drain(..) {
                    command.answer(Some(&error));
                }
            }
        }
    }
    if let Some(open) = pending.take() {
        open.publish(&outlets);
    }
    if let Some(command) = after_batch {
        command.answer(Some(&StorageError::Other("the writer stopped".into())));
    }
    tracing::debug!("write queue closed; writer stopping");
}

/// Stages a batch and makes it durable, staging it again after a retryable error. Each
/// attempt plans against the state the backend has then, so a retried batch decides afresh.
/// The first attempt continues `resumed` (batches answered, not yet published) when given;
/// whether the result does is the `bool` (a failed attempt abandons that transaction, and the
/// backend redoes the batches it carried on their own). `None` when the batch changed nothing.
fn commit_with_retries<'b>(
    backend: &'b dyn Backend,
    clock: &dyn Clock,
    batch: &mut [Box<dyn Command>],
    stats: &WriterStats,
    feed: &Feed,
    mut resumed: Option<Box<dyn WriteTxn + 'b>>,
) -> Result<(Option<Durable<'b>>, bool), StorageError> {
    let mut backoff = Backoff::new(FIRST_BACKOFF, Duration::from_millis(200));
    let mut attempt = 1;
    loop {
        // Events are copied for watchers only while there are any; a watcher that arrives
        // meanwhile reads this batch from history instead.
        let events = (feed.sender.receiver_count() > 0).then(Vec::new);
        let continuing = resumed.is_some();
        let txn = match resumed.take() {
            Some(txn) => Ok(txn),
            None => backend.begin_write_reading(&mut batch.iter().flat_map(|c| c.reads_first()).map(String::as_str)),
        };
        match txn.and_then(|txn| stage_and_commit(txn, continuing, clock, batch, stats, events)) {
            Err(StorageError::Retryable(reason)) if attempt < RETRIES => {
                tracing::warn!(%reason, attempt, commands = batch.len(), "write batch hit a transient failure; retrying");
                stats.retries.fetch_add(1, Ordering::Relaxed);
                // The writer thread has nothing else to do until this batch is settled.
                std::thread::sleep(backoff.next_pause());
                attempt += 1;
            }
            settled => return settled.map(|durable| (durable, continuing)),
        }
    }
}

/// Stages the batch in `txn` and makes it durable. A transaction that carries earlier
/// batches (`continuing`) is handed on even when this one changed nothing.
fn stage_and_commit<'b>(
    mut txn: Box<dyn WriteTxn + 'b>,
    continuing: bool,
    clock: &dyn Clock,
    batch: &mut [Box<dyn Command>],
    stats: &WriterStats,
    mut events: Option<Vec<Event>>,
) -> Result<Option<Durable<'b>>, StorageError> {
    // Where processes share the database, its clock decides expiry, so they all agree.
    let now = txn.database_now().unwrap_or_else(|| clock.now());
    let start = txn.revision()?;
    let mut revision = start;
    let mut touched = false;
    let mut soonest_expiry = None;
    for command in batch.iter_mut() {
        let ctx = WriteContext { now, revision };
        let applied = command.apply(&mut *txn, &ctx, events.as_mut())?;
        stats.applied.fetch_add(1, Ordering::Relaxed);
        if let Some(committed) = applied.revision {
            revision = committed;
        }
        touched |= applied.touched;
        soonest_expiry = soonest_expiry.into_iter().chain(applied.soonest_expiry).min();
    }
    if revision != start {
        txn.set_revision(revision)?;
    }
    // A batch of pure conflicts or no-ops changed nothing: dropping the transaction aborts it
    // and skips an fsync.
    if !touched && !continuing {
        return Ok(None);
    }
    let started = std::time::Instant::now();
    let unpublished = txn.commit_durably()?;
    if touched {
        stats.commits.fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        stats.commit_nanos.fetch_add(nanos, Ordering::Relaxed);
    }
    let revisions = (revision != start).then_some((start + 1, revision));
    Ok(Some(Durable { unpublished, revisions, events, soonest_expiry }))
}
