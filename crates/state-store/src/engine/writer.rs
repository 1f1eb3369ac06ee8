//! The single writer and its group commit.
//!
//! All writes go through one OS thread that owns the backend's write transaction. It blocks
//! for the first queued command, then drains whatever else is already queued (no waiting for
//! stragglers), applies each command in queue order inside one transaction so each sees the
//! effects of the ones before it, commits once (one fsync), and only then answers every
//! command. Nothing is acknowledged or visible before it is durable.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use state_core::UnixMillis;
use state_core::ops::kv::{DeleteRequest, DeleteResult, SetRequest, SetResult};
use state_core::ops::txn::{TxnRequest, TxnResult};
use state_core::plan::{self, Mutation, Plan, WriteContext};
use tokio::sync::{mpsc, oneshot};

use crate::backend::{Backend, WriteTxn};
use crate::clock::Clock;
use crate::error::{EngineError, StorageError};

pub(super) type Reply<T> = oneshot::Sender<Result<T, EngineError>>;

pub(super) enum WriteCommand {
    Set(SetRequest, Reply<SetResult>),
    Delete(DeleteRequest, Reply<DeleteResult>),
    Txn(TxnRequest, Reply<TxnResult>),
    /// Remove up to this many keys whose TTL has run out.
    Expire(usize, Reply<usize>),
    /// Drop history through this revision, about `limit` events per call.
    Compact {
        through: u64,
        limit: usize,
        reply: Reply<u64>,
    },
}

enum Outcome {
    Set(SetResult),
    Delete(DeleteResult),
    Txn(TxnResult),
    Expired(usize),
    Compacted(u64),
}

impl WriteCommand {
    fn respond(self, result: Result<Outcome, EngineError>) {
        // A caller that stopped waiting (dropped its receiver) needs no answer.
        match (self, result) {
            (WriteCommand::Set(_, reply), Ok(Outcome::Set(r))) => drop(reply.send(Ok(r))),
            (WriteCommand::Delete(_, reply), Ok(Outcome::Delete(r))) => drop(reply.send(Ok(r))),
            (WriteCommand::Txn(_, reply), Ok(Outcome::Txn(r))) => drop(reply.send(Ok(r))),
            (WriteCommand::Expire(_, reply), Ok(Outcome::Expired(n))) => drop(reply.send(Ok(n))),
            (WriteCommand::Compact { reply, .. }, Ok(Outcome::Compacted(r))) => drop(reply.send(Ok(r))),
            (command, Ok(_)) => {
                command.respond(Err(StorageError::Other("internal error: mismatched write outcome".into()).into()))
            }
            (WriteCommand::Set(_, reply), Err(e)) => drop(reply.send(Err(e))),
            (WriteCommand::Delete(_, reply), Err(e)) => drop(reply.send(Err(e))),
            (WriteCommand::Txn(_, reply), Err(e)) => drop(reply.send(Err(e))),
            (WriteCommand::Expire(_, reply), Err(e)) => drop(reply.send(Err(e))),
            (WriteCommand::Compact { reply, .. }, Err(e)) => drop(reply.send(Err(e))),
        }
    }
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
    mut queue: mpsc::Receiver<WriteCommand>,
    max_batch: usize,
    stats: Arc<WriterStats>,
) {
    let mut batch = Vec::with_capacity(max_batch);
    while let Some(first) = queue.blocking_recv() {
        batch.push(first);
        while batch.len() < max_batch {
            match queue.try_recv() {
                Ok(command) => batch.push(command),
                Err(_) => break,
            }
        }
        stats.record(batch.len());
        let now = clock.now();
        match stage_and_commit(&*backend, now, &batch) {
            Ok(outcomes) => {
                for (command, outcome) in batch.drain(..).zip(outcomes) {
                    command.respond(Ok(outcome));
                }
            }
            Err(error) => {
                tracing::error!(%error, commands = batch.len(), "write batch failed; nothing in it was applied");
                for command in batch.drain(..) {
                    command.respond(Err(error.clone().into()));
                }
            }
        }
    }
    tracing::debug!("write queue closed; writer stopping");
}

fn stage_and_commit(
    backend: &dyn Backend,
    now: UnixMillis,
    batch: &[WriteCommand],
) -> Result<Vec<Outcome>, StorageError> {
    let mut txn = backend.begin_write()?;
    let start = txn.revision()?;
    let mut revision = start;
    let mut dirty = false;
    let mut outcomes = Vec::with_capacity(batch.len());
    for command in batch {
        let ctx = WriteContext { now, revision };
        let (outcome, changed) = apply(&mut *txn, command, &ctx)?;
        if changed.advances_revision {
            revision += 1;
        }
        dirty |= changed.touched;
        outcomes.push(outcome);
    }
    if revision != start {
        txn.set_revision(revision)?;
    }
    if dirty {
        txn.commit()?;
    }
    // A batch of pure conflicts or no-ops changed nothing: dropping the transaction aborts it
    // and skips an fsync.
    Ok(outcomes)
}

struct Changed {
    advances_revision: bool,
    touched: bool,
}

fn apply(
    txn: &mut dyn WriteTxn,
    command: &WriteCommand,
    ctx: &WriteContext,
) -> Result<(Outcome, Changed), StorageError> {
    match command {
        WriteCommand::Set(req, _) => {
            let stored = txn.get(&req.key)?;
            apply_plan(txn, plan::plan_set(req, stored.as_ref(), ctx)).map(|(r, c)| (Outcome::Set(r), c))
        }
        WriteCommand::Delete(req, _) => {
            let stored = txn.get(&req.key)?;
            apply_plan(txn, plan::plan_delete(req, stored.as_ref(), ctx)).map(|(r, c)| (Outcome::Delete(r), c))
        }
        WriteCommand::Txn(req, _) => {
            let mut stored = BTreeMap::new();
            for key in req.keys() {
                stored.insert(key.to_owned(), txn.get(key)?);
            }
            apply_plan(txn, plan::plan_txn(req, &stored, ctx)).map(|(r, c)| (Outcome::Txn(r), c))
        }
        WriteCommand::Expire(limit, _) => {
            let candidates = txn.expired(ctx.now, *limit)?;
            apply_plan(txn, plan::plan_expire(&candidates, ctx)).map(|(n, c)| (Outcome::Expired(n), c))
        }
        WriteCommand::Compact { through, limit, .. } => {
            let before = txn.compacted_revision()?;
            let through = (*through).min(ctx.revision);
            let after = txn.compact(through, *limit)?;
            Ok((Outcome::Compacted(after), Changed { advances_revision: false, touched: after != before }))
        }
    }
}

fn apply_plan<T>(txn: &mut dyn WriteTxn, plan: Plan<T>) -> Result<(T, Changed), StorageError> {
    let commits = plan.commits();
    for mutation in &plan.mutations {
        match mutation {
            Mutation::Put(entry) => txn.put(entry)?,
            Mutation::Delete(key) => txn.delete(key)?,
        }
    }
    for event in &plan.events {
        txn.append(event)?;
    }
    Ok((plan.outcome, Changed { advances_revision: commits, touched: commits }))
}
