//! The change feed: every committed change after a revision, in order, then live.
//!
//! The writer publishes each committed batch on a bounded broadcast channel after its fsync.
//! A watch subscribes first, then reads the current revision, so every later commit reaches it
//! through the channel; the revisions up to the current one it reads from history. Revisions
//! it has delivered are skipped wherever they come from again: no gap, no duplicate.
//!
//! A watcher that falls behind never holds the writer up: the channel overwrites what the
//! slowest reader has not taken, and that watcher ends with [`EngineError::WatchLagged`],
//! naming the revision to resume after.
//!
//! Nor does a watcher that stops reading hold memory: the events the feed carries count
//! against a budget of bytes, shared by every watcher. A batch that would go over it is
//! published without its events (as another process's commit is), and watchers read it from
//! history; events are freed as soon as every watcher has taken them.
//!
//! A batch wakes only the watchers of the keys it touches (`routes.rs`), not every receiver of
//! the channel: ten thousand watchers of other keys cost a commit nothing.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use state_core::Event;
use state_core::ops::history::{HistoryEvent, HistoryKind, HistoryRequest, KeyFilter};
use state_core::ops::watch::{WatchBatch, WatchRequest};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::TryRecvError;

use self::routes::Route;
pub(crate) use self::routes::Routes;

mod routes;

use super::{Engine, ReadCost};
use crate::error::EngineError;

/// One committed batch of the writer: revisions `first..=last`, with their events when any
/// watcher was listening as it began (otherwise watchers read them from history).
#[derive(Debug)]
pub(crate) struct Committed {
    pub(crate) first: u64,
    pub(crate) last: u64,
    pub(crate) events: Option<Vec<Event>>,
    /// What the events count against the feed's budget, given back when the batch is freed.
    _held: Option<Held>,
}

/// Bytes of events the feed holds, released when the batch holding them is dropped (every
/// watcher took it, or the channel overwrote it).
#[derive(Debug)]
struct Held {
    bytes: usize,
    total: Arc<AtomicUsize>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.total.fetch_sub(self.bytes, Ordering::SeqCst);
    }
}

/// Where committed batches are published: by the writer (with their events), and, where other
/// processes share the database, by the backend's follower (revisions only; watchers read
/// those from history).
#[derive(Clone)]
pub(crate) struct Feed {
    pub(crate) sender: broadcast::Sender<Arc<Committed>>,
    /// The highest revision published, so the follower announces only what is new.
    published: Arc<AtomicU64>,
    /// Bytes of events held for watchers now, and the most it may be.
    held: Arc<AtomicUsize>,
    budget: usize,
    pub(crate) routes: Arc<Routes>,
    /// Dropped with the last feed, after the channel's sender: wakes every watcher to find it
    /// closed.
    _closing: Arc<WakeOnClose>,
}

struct WakeOnClose(Arc<Routes>);

impl Drop for WakeOnClose {
    fn drop(&mut self) {
        self.0.wake_everyone();
    }
}

impl Feed {
    pub(crate) fn new(capacity: usize, budget: usize) -> Feed {
        let routes = Arc::new(Routes::new(capacity));
        Feed {
            sender: broadcast::channel(capacity).0,
            published: Arc::new(AtomicU64::new(0)),
            held: Arc::new(AtomicUsize::new(0)),
            budget,
            _closing: Arc::new(WakeOnClose(routes.clone())),
            routes,
        }
    }

    /// Publishes revisions `first..=last` of this process's writer, with their events while
    /// they fit in the budget.
    pub(crate) fn publish(&self, first: u64, last: u64, events: Option<Vec<Event>>) {
        self.published.fetch_max(last, Ordering::SeqCst);
        let (events, held) = match events {
            Some(events) => {
                let bytes = events.iter().map(event_bytes).sum::<usize>();
                let before = self.held.fetch_add(bytes, Ordering::SeqCst);
                let held = Held { bytes, total: self.held.clone() };
                if before + bytes > self.budget {
                    tracing::debug!(
                        first,
                        last,
                        bytes,
                        "watchers hold too much; this batch goes to them through history"
                    );
                    (None, None)
                } else {
                    (Some(events), Some(held))
                }
            }
            None => (None, None),
        };
        // No receiver is not an error: nobody is watching.
        let committed = Arc::new(Committed { first, last, events, _held: held });
        if self.sender.send(committed.clone()).is_ok() {
            self.routes.wake_for(committed.events.as_deref());
        }
    }

    /// Another process committed up to `revision`: announce whatever of it is new here.
    pub(crate) fn committed_elsewhere(&self, revision: u64) {
        let before = self.published.fetch_max(revision, Ordering::SeqCst);
        if revision > before && self.sender.receiver_count() > 0 {
            let committed = Committed { first: before + 1, last: revision, events: None, _held: None };
            if self.sender.send(Arc::new(committed)).is_ok() {
                self.routes.wake_everyone();
            }
        }
    }
}

/// History pages a catching-up watcher reads at a time.
const CATCH_UP_PAGE: usize = 1000;

/// A live view of the changes a [`WatchRequest`] covers.
pub struct Watch {
    engine: Engine,
    feed: broadcast::Receiver<Arc<Committed>>,
    /// What wakes this watch: a batch touching its keys.
    route: Route,
    request: WatchRequest,
    filter: KeyFilter,
    include_values: bool,
    /// Every revision up to here has been delivered, or had nothing for this watch.
    delivered: u64,
    /// Revisions up to here are read from history before the feed is followed again.
    catch_up_to: u64,
    ready: VecDeque<WatchBatch>,
}

impl Engine {
    /// Starts a watch after `request.after_revision` (or from now). Fails with
    /// [`EngineError::Compacted`] if history after that revision is already gone.
    pub async fn watch(&self, request: WatchRequest) -> Result<Watch, EngineError> {
        request.validate()?;
        let (feed, routes) = self.subscribe()?;
        let route = routes.register(&request.filter());
        let (revision, compacted) =
            self.read(ReadCost::Point, |txn, _| Ok((txn.revision()?, txn.compacted_revision()?))).await?;
        let from = request.after_revision.unwrap_or(revision);
        if from > revision {
            // A watch from beyond the present would wait for revisions nobody has promised.
            return Err(EngineError::Invalid(state_core::InvalidInput::OutOfRange {
                argument: "after_revision",
                message: format!(
                    "is {from}, past this store's current revision {revision}: pass a revision this store returned"
                ),
            }));
        }
        if from < compacted {
            return Err(EngineError::Compacted { requested: from + 1, compacted_revision: compacted });
        }
        Ok(Watch {
            engine: self.clone(),
            feed,
            route,
            filter: request.filter(),
            include_values: request.include_values(),
            request,
            delivered: from,
            catch_up_to: revision,
            ready: VecDeque::new(),
        })
    }
}

/// The longest a bounded wait sleeps between looks when nothing it watches changes: what it
/// waits for may come due on the store's clock (an expiry, a delay) before any write says so.
const RECHECK: std::time::Duration = std::time::Duration::from_secs(1);

impl Engine {
    /// Returns once the records of `kind` under `key` changed after `revision`, `due` has
    /// passed (when the caller knows something comes due by the clock), a second went by, or
    /// `deadline` came: the step of a bounded wait (a semaphore permit, a queue message).
    pub(super) async fn wait_for_change(
        &self,
        kind: HistoryKind,
        key: &str,
        revision: u64,
        due: Option<std::time::Duration>,
        deadline: tokio::time::Instant,
    ) -> Result<(), EngineError> {
        let until = deadline.min(tokio::time::Instant::now() + due.unwrap_or(RECHECK).min(RECHECK));
        let request = WatchRequest { after_revision: Some(revision), ..WatchRequest::key(Some(kind), key) };
        let mut watch = self.watch(request).await?;
        match tokio::time::timeout_at(until, watch.next()).await {
            Ok(Some(Err(EngineError::WatchLagged { .. }))) | Ok(Some(Ok(_))) | Err(_) => Ok(()),
            Ok(Some(Err(error))) => Err(error),
            Ok(None) => Err(EngineError::Closed),
        }
    }
}

impl Watch {
    /// The next revision's changes, waiting for one. `None` once the engine has closed; an
    /// error ends the watch (resume with [`Watch::position`] as `after_revision`).
    pub async fn next(&mut self) -> Option<Result<WatchBatch, EngineError>> {
        self.next_until(u64::MAX).await
    }

    /// Like [`Watch::next`], but only up to `revision` (an already committed one): `None`
    /// once everything up to it has been delivered, without waiting for later changes.
    pub async fn next_until(&mut self, revision: u64) -> Option<Result<WatchBatch, EngineError>> {
        loop {
            if let Some(batch) = self.ready.pop_front() {
                return Some(Ok(batch));
            }
            if self.delivered >= revision {
                return None;
            }
            if self.delivered < self.catch_up_to {
                if let Err(error) = self.read_history().await {
                    return Some(Err(error));
                }
                continue;
            }
            // The channel is read without waiting on it (a wait there is woken by every
            // send); the route's notification says when something for this watch came.
            match self.feed.try_recv() {
                Ok(committed) => self.take(&committed),
                // Up to a revision already committed, nothing need come: batches that touched
                // none of this watch's keys wake it not, so what is left is read from history.
                Err(TryRecvError::Empty) if revision != u64::MAX => {
                    self.catch_up_to = self.catch_up_to.max(revision);
                }
                Err(TryRecvError::Empty) => self.route.notify.notified().await,
                Err(TryRecvError::Lagged(_)) => {
                    return Some(Err(EngineError::WatchLagged { resume_after: self.position() }));
                }
                Err(TryRecvError::Closed) => return None,
            }
        }
    }

    /// The last revision handed to the caller (or passed over as having nothing for it):
    /// resume after it. Batches read ahead but not yet returned do not count.
    pub fn position(&self) -> u64 {
        self.ready.front().map_or(self.delivered, |next| next.revision - 1)
    }

    /// A batch from the feed: its events when it has them and follows on from what was
    /// delivered, else a reason to read that stretch from history.
    fn take(&mut self, committed: &Committed) {
        if committed.last <= self.delivered {
            return;
        }
        match &committed.events {
            Some(events) if committed.first <= self.delivered + 1 => {
                for event in events.iter().filter(|e| e.revision > self.delivered && self.filter.matches(&e.key)) {
                    push_event(&mut self.ready, HistoryEvent::copied(event, self.include_values));
                }
                self.delivered = committed.last;
            }
            _ => self.catch_up_to = self.catch_up_to.max(committed.last),
        }
    }

    /// One page of history after what was delivered.
    async fn read_history(&mut self) -> Result<(), EngineError> {
        let request = HistoryRequest {
            since_revision: Some(self.delivered),
            n: Some(CATCH_UP_PAGE),
            include_values: Some(self.include_values),
            ..self.request.as_history()
        };
        let page = self.engine.history(request).await?;
        for event in page.events {
            push_event(&mut self.ready, event);
        }
        // A page never splits a revision: after a full page, resume after its last revision;
        // after the last page, everything up to the revision it was read at has been seen.
        self.delivered = match (page.more, self.ready.back()) {
            (true, Some(last)) => last.revision,
            _ => self.delivered.max(page.revision),
        };
        Ok(())
    }
}

/// What an event costs a watcher that holds it: its value, its key, and a little for the rest.
fn event_bytes(event: &Event) -> usize {
    const FIXED: usize = 128;
    FIXED + event.key.len() + event.value.as_ref().map_or(0, state_core::limits::json_len)
}

/// Adds an event to the batch of its revision: the last one, or a new one after it. Events come
/// in revision order, and everything already queued is older than what is added.
fn push_event(ready: &mut VecDeque<WatchBatch>, event: HistoryEvent) {
    match ready.back_mut() {
        Some(open) if open.revision == event.revision => open.events.push(event),
        _ => ready.push_back(WatchBatch { revision: event.revision, events: vec![event] }),
    }
}
