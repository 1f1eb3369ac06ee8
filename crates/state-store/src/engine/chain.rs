//! Batches published together. After answering a batch the writer may keep its transaction
//! open and stage the next batch in it, when that batch is already queued or comes within
//! moments: each batch is still durable (its own log record) before it is answered, and
//! one publication then covers them all. Where the backend changes a page it has not
//! published in place (redb), this takes most of a lone writer's B-tree copying and commit
//! work off its path.
//!
//! What it never does: hold a batch back from anyone waiting to see it. A read that waits for
//! a publication (see `visibility.rs`), a watcher, or a limit on how many batches (or, on
//! redb, bytes) one transaction carries makes the writer publish next.

use std::time::{Duration, Instant};

use state_core::{Event, UnixMillis};
use tokio::sync::mpsc::{self, error::TryRecvError};

use super::batch::{Command, Outlets};
use super::visibility::{ReadsHeld, Visibility};
use crate::backend::{Unpublished, WriteTxn};

/// Batches one transaction carries at most before it is published.
const MAX_CARRIED: usize = 32;

/// The longest the writer waits, spinning, for a next batch before it publishes. A lone
/// caller in this process turns an answer into its next write in tens of microseconds; a
/// caller further away (another process, the network) takes longer, and the writer learns not
/// to wait for it.
const MAX_PATIENCE: Duration = Duration::from_micros(50);

/// A batch that is durable and answered for, not yet visible to readers.
pub(super) struct Durable<'b> {
    /// What makes it visible, unless it already is.
    pub(super) unpublished: Option<Box<dyn Unpublished + 'b>>,
    /// The revisions it committed (first and last), if any.
    pub(super) revisions: Option<(u64, u64)>,
    /// Its events, for watchers, while there are any.
    pub(super) events: Option<Vec<Event>>,
    pub(super) soonest_expiry: Option<UnixMillis>,
}

/// Batches answered and not yet published: one transaction, and what readers, watchers and
/// the sweeper are told once it is published.
#[derive(Default)]
pub(super) struct Pending<'a> {
    unpublished: Option<Box<dyn Unpublished + 'a>>,
    /// One per batch, each holding back reads until the publication.
    readers_held: Vec<ReadsHeld<'a>>,
    revisions: Option<(u64, u64)>,
    /// `None` once a batch came without them (nobody was watching).
    events: Option<Vec<Event>>,
    soonest_expiry: Option<UnixMillis>,
    batches: usize,
}

impl<'a> Pending<'a> {
    /// Adds a batch: the first, or one staged in this one's transaction (see
    /// [`Pending::resume`]).
    pub(super) fn extend(&mut self, durable: Durable<'a>, readers_held: Option<ReadsHeld<'a>>) {
        let Durable { unpublished, revisions, events, soonest_expiry } = durable;
        self.unpublished = unpublished;
        self.readers_held.extend(readers_held);
        self.revisions = match (self.revisions, revisions) {
            (Some((first, _)), Some((_, last))) => Some((first, last)),
            (earlier, later) => later.or(earlier),
        };
        self.events = match (self.events.take(), events) {
            (_, later) if self.batches == 0 => later,
            (Some(mut earlier), Some(later)) => {
                earlier.extend(later);
                Some(earlier)
            }
            _ => None,
        };
        self.soonest_expiry = self.soonest_expiry.into_iter().chain(soonest_expiry).min();
        self.batches += 1;
    }

    /// Whether the next batch may be staged before these are published.
    pub(super) fn may_grow(&self, outlets: &Outlets) -> bool {
        self.batches < MAX_CARRIED
            && self.unpublished.as_ref().is_some_and(|unpublished| unpublished.resumable())
            && outlets.feed.sender.receiver_count() == 0
            && !outlets.visibility.readers_waiting()
    }

    /// The transaction, to stage the next batch in. `None` if it cannot be resumed; then its
    /// batches are the backend's to redo, as the transaction is gone.
    pub(super) fn resume(&mut self) -> Option<Box<dyn WriteTxn + 'a>> {
        let unpublished = self.unpublished.take()?;
        match unpublished.resume() {
            Ok(txn) => Some(txn),
            Err(error) => {
                tracing::warn!(%error, "could not stage a batch with the ones before it; they are recovered from the log");
                None
            }
        }
    }

    /// Makes the batches visible to readers, then tells watchers and the sweeper, then lets
    /// the backend do its upkeep. Without a transaction (it was abandoned), the backend has
    /// redone them on their own already.
    pub(super) fn publish(mut self, outlets: &Outlets) {
        if let Some(unpublished) = self.unpublished.as_mut() {
            outlets.stats.record_publication();
            if let Err(error) = unpublished.publish() {
                // Durable and acknowledged: the backend recovers it before the next operation.
                tracing::error!(%error, "an acknowledged batch could not be applied yet; it is recovered from the log");
            }
        }
        drop(std::mem::take(&mut self.readers_held));
        if let Some((first, last)) = self.revisions {
            outlets.feed.publish(first, last, self.events);
        }
        if let Some(at) = self.soonest_expiry {
            outlets.expiries.note(at);
        }
        if let Some(unpublished) = self.unpublished {
            unpublished.finish();
        }
    }
}

/// How long the writer waits for a next batch before it publishes: learnt from how soon
/// commands have come after an answer.
#[derive(Debug)]
pub(super) struct Pacing {
    answered_at: Option<Instant>,
    /// A running average of the time from an answer to the next command.
    gap: Duration,
}

impl Default for Pacing {
    /// Unknown until measured: no waiting.
    fn default() -> Pacing {
        Pacing { answered_at: None, gap: MAX_PATIENCE }
    }
}

impl Pacing {
    pub(super) fn answered(&mut self) {
        self.answered_at = Some(Instant::now());
    }

    /// A command came: how long after the last answer.
    pub(super) fn arrived(&mut self) {
        if let Some(answered_at) = self.answered_at.take() {
            self.gap = (self.gap * 3 + answered_at.elapsed()) / 4;
        }
    }

    fn patience(&self) -> Duration {
        if self.gap < MAX_PATIENCE { (self.gap * 2).min(MAX_PATIENCE) } else { Duration::ZERO }
    }

    /// The next command, if it is queued or comes within the patience learnt, and no read is
    /// waiting for a publication meanwhile.
    pub(super) fn next_soon(
        &mut self,
        queue: &mut mpsc::Receiver<Box<dyn Command>>,
        visibility: &Visibility,
    ) -> Option<Box<dyn Command>> {
        let patience = self.patience();
        let since = self.answered_at.unwrap_or_else(Instant::now);
        loop {
            // A read already waiting goes first, however busy the queue.
            if visibility.readers_waiting() {
                return None;
            }
            match queue.try_recv() {
                Ok(command) => {
                    self.arrived();
                    return Some(command);
                }
                Err(TryRecvError::Disconnected) => return None,
                Err(TryRecvError::Empty) => {}
            }
            if since.elapsed() >= patience {
                return None;
            }
            std::hint::spin_loop();
        }
    }
}
