//! The engine: the one façade every frontend calls, in domain verbs. This file holds its
//! plumbing; each family's verbs live in a file of their own (`keys.rs`, `leases.rs`,
//! `runs.rs`, `sessions.rs`, `queue.rs`, `semaphore.rs`, `reservation.rs`, `text.rs`,
//! `transfer.rs`, `watch.rs`, `maintenance.rs`).
//!
//! Validation happens here, before a request is queued, so bad input never reaches storage.
//! Writes go to the single group-committing writer; reads run on snapshots in the blocking
//! pool, never on the async workers.

mod batch;
mod chain;
mod keys;
mod leases;
mod maintenance;
mod queue;
mod reads;
mod reservation;
mod runs;
mod semaphore;
mod sessions;
mod text;
mod transfer;
mod view;
mod visibility;
mod watch;
mod writer;

use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use state_core::idempotency::Once;
use state_core::keyspace::{self, Space};

use state_core::expire;
use state_core::ops::health::{HealthResult, WriteStats};
use state_core::ops::{
    OkStatus,
    admin::{ResetRequest, ResetResult},
};
use state_core::plan::{Plan, Query, Rule, WriteContext};
use state_core::workflow;
use state_core::{Action, Event, EventKind, Limits, UnixMillis};
use tokio::sync::{broadcast, mpsc, oneshot};

pub use self::batch::BatchStats;
use self::batch::{Applied, Command, WriterStats};
use self::maintenance::ExpiryHint;
pub use self::maintenance::MaintenanceHandle;
use self::view::TxnView;
use self::visibility::Visibility;
pub use self::watch::Watch;
use self::watch::{Committed, Feed};
use self::writer::{Alone, Idempotency, Planned, Raw};
use crate::backend::{Backend, Follower, ReadTxn, SpaceGiven, WriteTxn};
use crate::clock::Clock;
use crate::error::{EngineError, StorageError};

/// Tuning and limits of one engine.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub limits: Limits,
    /// Keep history for this many most recent revisions; `None` keeps everything.
    pub history_retention: Option<u64>,
    /// How often the background sweeper removes expired keys and compacts history.
    pub sweep_interval: Duration,
    /// Most commands one write transaction carries.
    pub max_batch: usize,
    /// Writes that may wait for the writer before callers are made to wait (backpressure).
    pub queue_depth: usize,
    /// How long a request's `request_id` is remembered, so a retry returns the first result.
    pub idempotency_window: Duration,
    /// Committed batches a watcher may fall behind by before it is ended (and told to resume).
    pub watch_buffer: usize,
    /// Bytes of changes held for watchers that have not taken them yet, all watchers together;
    /// past it, batches reach watchers through history instead of memory.
    pub watch_buffer_bytes: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            limits: Limits::default(),
            history_retention: Some(DEFAULT_HISTORY_RETENTION),
            sweep_interval: Duration::from_secs(1),
            max_batch: 1024,
            queue_depth: 4096,
            idempotency_window: Duration::from_millis(state_core::idempotency::DEFAULT_WINDOW_MILLIS),
            watch_buffer: 4096,
            watch_buffer_bytes: DEFAULT_WATCH_BUFFER_BYTES,
        }
    }
}

pub const DEFAULT_HISTORY_RETENTION: u64 = 100_000;

/// What watchers may hold in memory by default, together.
pub const DEFAULT_WATCH_BUFFER_BYTES: usize = 64 * 1024 * 1024;

/// Batch reads of up to this many keys count as point reads.
const POINT_READ_KEYS: usize = 16;
/// How often a ping waiting behind a queue looks whether the writer moved.
const PING_PROGRESS_POLL: std::time::Duration = std::time::Duration::from_millis(50);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadCost {
    /// A handful of lookups in the page cache.
    Point,
    /// A walk over many entries or events.
    Scan,
}

#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
    /// Who the changes made through this handle are recorded as made by (`Event::by`): set
    /// by [`Engine::on_behalf_of`] for an authenticated caller, `None` for a local process.
    author: Option<Arc<str>>,
}

struct Inner {
    /// `None` once the engine is closed. Each operation clones what it needs (an atomic
    /// increment under an uncontended lock), so `close` can take both away from every handle.
    backend: RwLock<Option<Arc<dyn Backend>>>,
    writes: RwLock<Option<mpsc::Sender<Box<dyn Command>>>>,
    /// Where the writer publishes committed batches; taken away on close.
    feed: RwLock<Option<Feed>>,
    /// Announces commits made by other processes sharing the database; dropped on close.
    follower: Mutex<Option<Follower>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    clock: Arc<dyn Clock>,
    config: EngineConfig,
    stats: Arc<WriterStats>,
    /// The soonest expiry written since the sweeper last looked, to wake it early.
    expiries: Arc<ExpiryHint>,
    /// Holds back reads until what was acknowledged is visible.
    visibility: Arc<Visibility>,
    started_at: UnixMillis,
}

impl Engine {
    /// Starts an engine over `backend`. Background maintenance is separate
    /// ([`Engine::start_maintenance`]) so tests can drive expiry by hand.
    pub fn new(backend: Arc<dyn Backend>, clock: Arc<dyn Clock>, config: EngineConfig) -> Result<Engine, EngineError> {
        let (writes, queue) = mpsc::channel(config.queue_depth.max(1));
        let feed = Feed::new(config.watch_buffer.max(1), config.watch_buffer_bytes);
        let stats = Arc::new(WriterStats::default());
        let expiries = Arc::new(ExpiryHint::default());
        let visibility = Arc::new(Visibility::default());
        let writer = {
            let (backend, clock) = (backend.clone(), clock.clone());
            let outlets = batch::Outlets {
                stats: stats.clone(),
                feed: feed.clone(),
                expiries: expiries.clone(),
                visibility: visibility.clone(),
            };
            let max_batch = config.max_batch.max(1);
            std::thread::Builder::new()
                .name("state-writer".into())
                .spawn(move || writer::run(backend, clock, queue, max_batch, outlets))
                .map_err(|e| StorageError::Other(format!("cannot start the writer thread: {e}")))?
        };
        let started_at = clock.now();
        let follower = {
            let feed = feed.clone();
            backend.follow(Box::new(move |revision| feed.committed_elsewhere(revision)))?
        };
        Ok(Engine {
            inner: Arc::new(Inner {
                backend: RwLock::new(Some(backend)),
                writes: RwLock::new(Some(writes)),
                feed: RwLock::new(Some(feed)),
                follower: Mutex::new(follower),
                writer: Mutex::new(Some(writer)),
                clock,
                config,
                stats,
                expiries,
                visibility,
                started_at,
            }),
            author: None,
        })
    }

    /// This engine, recording the changes made through the handle it returns as `author`'s
    /// (a token's name or an OAuth subject; `None`: a process of the machine's own user).
    pub fn on_behalf_of(&self, author: Option<&str>) -> Engine {
        Engine { inner: Arc::clone(&self.inner), author: author.map(Arc::from) }
    }

    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    pub fn batch_stats(&self) -> BatchStats {
        self.inner.stats.snapshot()
    }

    /// Runs expiry sweeps and history compaction in the background until the engine is dropped.
    pub fn start_maintenance(&self) -> MaintenanceHandle {
        maintenance::spawn(Arc::downgrade(&self.inner), self.inner.config.clone())
    }

    /// Stops accepting operations, lets every queued write commit and be answered, and
    /// releases the database. Works from any handle; afterwards every operation on any clone
    /// fails with [`EngineError::Closed`].
    pub async fn close(&self) {
        drop(self.inner.writes.write().ok().and_then(|mut w| w.take()));
        drop(self.inner.backend.write().ok().and_then(|mut b| b.take()));
        // Watchers end once the writer, holding the last sender, has published its last batch.
        drop(self.inner.follower.lock().ok().and_then(|mut f| f.take()));
        drop(self.inner.feed.write().ok().and_then(|mut f| f.take()));
        // The writer drains the queue, then exits and drops the last long-lived backend handle.
        let handle = self.inner.writer.lock().ok().and_then(|mut w| w.take());
        if let Some(handle) = handle {
            let _ = tokio::task::spawn_blocking(move || handle.join()).await;
        }
    }

    /// Watches open on this engine now.
    pub fn watchers(&self) -> u64 {
        let feed = self.inner.feed.read().ok();
        feed.as_ref().and_then(|f| f.as_ref()).map_or(0, |feed| feed.sender.receiver_count() as u64)
    }

    fn subscribe(&self) -> Result<(broadcast::Receiver<Arc<Committed>>, Arc<watch::Routes>), EngineError> {
        self.inner
            .feed
            .read()
            .ok()
            .and_then(|f| f.as_ref().map(|feed| (feed.sender.subscribe(), feed.routes.clone())))
            .ok_or(EngineError::Closed)
    }

    fn backend(&self) -> Result<Arc<dyn Backend>, EngineError> {
        self.inner.backend.read().ok().and_then(|b| b.clone()).ok_or(EngineError::Closed)
    }

    /// Wipes every key, lease, run and session, and all history. Revisions keep counting up
    /// (fencing tokens must never repeat); one `reset` event records it. Idempotency records
    /// are kept.
    pub async fn reset(&self, req: ResetRequest) -> Result<ResetResult, EngineError> {
        req.validate()?;
        let once = Once::of(&req)?;
        let agent = req.agent_id;
        let by = self.author.as_deref().map(str::to_owned);
        self.write(|reply| {
            Raw::boxed(
                move |txn: &mut dyn WriteTxn, ctx: &WriteContext| {
                    // Request records survive: a write retried after the reset was applied
                    // once (and then wiped), so its retry must not bring it back.
                    let mut requests = Vec::new();
                    txn.scan(&keyspace::prefix(Space::Request), None, &mut |record| {
                        requests.push(record);
                        true
                    })?;
                    let removed = txn.clear(ctx.revision)?.saturating_sub(requests.len() as u64);
                    for record in &requests {
                        txn.put(record)?;
                    }
                    txn.append(&Event {
                        revision: ctx.next_revision(),
                        key: keyspace::RESET_KEY.to_owned(),
                        kind: EventKind::Put,
                        action: Some(Action::StoreReset),
                        version: 1,
                        agent_id: agent.clone(),
                        time: ctx.now,
                        value: Some(json!({"removed": removed})),
                        by: by.clone(),
                    })?;
                    let result = ResetResult { status: OkStatus::Ok, removed, revision: ctx.next_revision() };
                    Ok((result, Applied { revision: Some(ctx.next_revision()), touched: true, soonest_expiry: None }))
                },
                self.idempotency(once),
                reply,
            )
        })
        .await
    }

    /// Applies a write the core's rules decide but no verb here names: a compatibility
    /// profile's (`state_core::plan::Rule`).
    pub async fn apply<R: Rule>(&self, rule: R) -> Result<R::Output, EngineError> {
        let once = rule.admit(&self.inner.config.limits)?;
        self.plan(once, move |view, ctx| rule.plan(view, ctx)).await
    }

    /// Answers a read the core states but no verb here names (`state_core::plan::Query`).
    pub async fn query<Q: Query>(&self, query: Q) -> Result<Q::Output, EngineError> {
        self.read(ReadCost::Scan, move |txn, now| Ok(query.read(&TxnView(txn), now)?)).await
    }

    /// Removes up to `limit` keys whose TTL has run out, recording an `expired` event for
    /// each (and returning runs whose claim lapsed to the queue). Returns how many were
    /// removed. Reads hide expired keys whether or not this ran.
    pub async fn expire_due(&self, limit: usize) -> Result<usize, EngineError> {
        self.plan(None, move |view, ctx| {
            let due = view.0.expired_before(ctx.now, limit.max(1))?;
            expire::plan_expire(view, &due, ctx)
        })
        .await
    }

    /// When the soonest stored expiry falls, expired or not; `None` when nothing expires.
    pub(crate) async fn next_expiry(&self) -> Result<Option<UnixMillis>, EngineError> {
        self.read(ReadCost::Point, |txn, _| {
            // The largest instant every backend can hold (PostgreSQL's bigint).
            let end_of_time = UnixMillis(i64::MAX.unsigned_abs());
            Ok(txn.expired_before(end_of_time, 1)?.first().and_then(|entry| entry.expires_at))
        })
        .await
    }

    /// Releases runs still waiting on finished runs beyond what the finishing write released
    /// itself (see `state_core::workflow::RELEASES_PER_WRITE`). Returns how many finished runs
    /// it worked on; 0 when none is left.
    pub async fn release_dependents(&self) -> Result<usize, EngineError> {
        self.plan(None, |view, ctx| workflow::plan_release_pending(view, ctx)).await
    }

    /// Drops history through revision `through` (capped at the current revision). Returns
    /// the new compacted revision.
    pub async fn compact_history(&self, through: u64) -> Result<u64, EngineError> {
        const EVENTS_PER_TRANSACTION: usize = 10_000;
        loop {
            let reached = self
                .write(|reply| {
                    Raw::boxed(
                        move |txn: &mut dyn WriteTxn, ctx: &WriteContext| {
                            let before = txn.compacted_revision()?;
                            let after = txn.compact(through.min(ctx.revision), EVENTS_PER_TRANSACTION)?;
                            Ok((after, Applied { revision: None, touched: after != before, soonest_expiry: None }))
                        },
                        self.idempotency(None),
                        reply,
                    )
                })
                .await?;
            let revision = self.read(ReadCost::Point, |txn, _| Ok(txn.revision()?)).await?;
            if reached >= through.min(revision) {
                return Ok(reached);
            }
        }
    }

    /// Shrinks the database file when most of it is free pages, holding reads and writes up
    /// while it moves the live pages down (see [`Backend::give_back_space`]); `None` when
    /// there was nothing worth giving back. Run between two write batches.
    pub async fn give_back_space(&self) -> Result<Option<SpaceGiven>, EngineError> {
        self.write(|reply| Alone::boxed(|backend: &dyn Backend| backend.give_back_space(), reply)).await
    }

    /// Returns once the writer has shown it moves: it took this ping's turn, or applied
    /// another command since the ping came. Proof that this engine commits, not merely that
    /// its process accepts connections (a stuck disk stops the writer, not the sockets); a
    /// writer busy with a long queue answers as soon as it finishes the command at hand.
    pub async fn ping(&self) -> Result<(), EngineError> {
        let before = self.inner.stats.applied();
        let turn = self.write(|reply| {
            Raw::boxed(
                |_: &mut dyn WriteTxn, _: &WriteContext| Ok(((), Applied::default())),
                self.idempotency(None),
                reply,
            )
        });
        tokio::pin!(turn);
        loop {
            tokio::select! {
                taken = &mut turn => return taken,
                () = tokio::time::sleep(PING_PROGRESS_POLL) => {
                    if self.inner.stats.applied() != before {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// A consistent copy of the store as of its last commit, written to a new file at `to`
    /// while writes go on (off the async workers: it reads the whole store).
    pub async fn backup(&self, to: std::path::PathBuf) -> Result<crate::backend::Backup, EngineError> {
        let backend = self.backend()?;
        self.inner.visibility.settled().await;
        tokio::task::spawn_blocking(move || backend.backup(&to))
            .await
            .map_err(|_| EngineError::Closed)?
            .map_err(EngineError::Storage)
    }

    /// The last committed revision.
    pub async fn revision(&self) -> Result<u64, EngineError> {
        self.read(ReadCost::Point, |txn, _| Ok(txn.revision()?)).await
    }

    pub async fn health(&self) -> Result<HealthResult, EngineError> {
        let backend = self.backend()?;
        let started_at = self.inner.started_at;
        let stats = self.batch_stats();
        let watchers = self.watchers();
        self.read(ReadCost::Point, move |txn, now| {
            Ok(HealthResult {
                status: OkStatus::Ok,
                backend: backend.kind().to_owned(),
                revision: txn.revision()?,
                keys: Some(txn.key_count()?),
                database_bytes: backend.size_on_disk(),
                uptime_seconds: now.0.saturating_sub(started_at.0) / 1000,
                compacted_revision: txn.compacted_revision()?,
                server_version: env!("CARGO_PKG_VERSION").to_owned(),
                owner: None,
                writes: Some(WriteStats {
                    batches: stats.batches,
                    requests: stats.commands,
                    commits: stats.commits,
                    largest_batch: stats.largest,
                    commit_seconds: stats.commit_seconds,
                    retries: stats.retries,
                }),
                watchers: Some(watchers),
                replicas: txn.replicas()?,
                quota: None,
                storage: None,
            })
        })
        .await
    }

    /// The one place reads run. Scans go to the blocking pool so a long walk never stalls
    /// an async worker. Point reads run in place when the backend says they are cheap (redb:
    /// a few B-tree lookups in the page cache, microseconds, like parsing the request), since
    /// handing them to another thread costs two context switches, measured at half the
    /// server's CPU per `state_get`.
    async fn read<T, F>(&self, cost: ReadCost, f: F) -> Result<T, EngineError>
    where
        T: Send + 'static,
        F: FnOnce(&dyn ReadTxn, UnixMillis) -> Result<T, EngineError> + Send + 'static,
    {
        let backend = self.backend()?;
        self.inner.visibility.settled().await;
        let now = self.inner.clock.now();
        let inline = cost == ReadCost::Point && backend.inline_point_reads();
        let run = move || {
            let txn = backend.begin_read()?;
            f(&*txn, now)
        };
        match inline {
            true => {
                // Completing without an await point would let a task that loops over reads
                // starve every other task on its worker; spend the cooperative budget so
                // the scheduler can preempt it like any other tokio operation.
                tokio::task::consume_budget().await;
                run()
            }
            false => tokio::task::spawn_blocking(run)
                .await
                .map_err(|e| StorageError::Other(format!("read task failed: {e}")))?,
        }
    }

    /// Queues a write planned by the core and waits until it is durable. With an idempotency
    /// key, a retry of an applied request gets the first result back instead.
    async fn plan<T, F>(&self, once: Option<Once>, plan: F) -> Result<T, EngineError>
    where
        T: Serialize + DeserializeOwned + Send + 'static,
        F: Fn(&TxnView<'_>, &WriteContext) -> Result<Plan<T>, StorageError> + Send + 'static,
    {
        self.plan_reading(once, Vec::new(), plan).await
    }

    /// [`Engine::plan`] for a plan that reads `reads` first (`ReadsFirst`), which the
    /// backend may fetch with the rest of its batch's.
    async fn plan_reading<T, F>(&self, once: Option<Once>, reads: Vec<String>, plan: F) -> Result<T, EngineError>
    where
        T: Serialize + DeserializeOwned + Send + 'static,
        F: Fn(&TxnView<'_>, &WriteContext) -> Result<Plan<T>, StorageError> + Send + 'static,
    {
        let idempotency = self.idempotency(once);
        let author = self.author.clone();
        self.write(|reply| Planned::boxed(plan, idempotency, reads, author, reply)).await
    }

    fn idempotency(&self, once: Option<Once>) -> Idempotency {
        let window_millis = u64::try_from(self.inner.config.idempotency_window.as_millis()).unwrap_or(u64::MAX);
        Idempotency { once, window_millis }
    }

    async fn write<T>(&self, command: impl FnOnce(writer::Reply<T>) -> Box<dyn Command>) -> Result<T, EngineError> {
        let writes = self.inner.writes.read().ok().and_then(|w| w.clone()).ok_or(EngineError::Closed)?;
        let (reply, answer) = oneshot::channel();
        writes.send(command(reply)).await.map_err(|_| EngineError::Closed)?;
        answer.await.map_err(|_| EngineError::Closed)?
    }
}
