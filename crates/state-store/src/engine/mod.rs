//! The engine: the one façade every frontend calls, in domain verbs.
//!
//! Validation happens here, before a request is queued, so bad input never reaches storage.
//! Writes go to the single group-committing writer; reads run on snapshots in the blocking
//! pool, never on the async workers.

mod maintenance;
mod reads;
mod writer;

use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use state_core::ops::OkStatus;
use state_core::ops::health::HealthResult;
use state_core::ops::history::{HistoryRequest, HistoryResult};
use state_core::ops::kv::{
    BatchGetRequest, BatchGetResult, DeleteRequest, DeleteResult, GetRequest, GetResult, ListRequest, ListResult,
    SetRequest, SetResult,
};
use state_core::ops::txn::{TxnRequest, TxnResult};
use state_core::{Limits, UnixMillis};
use tokio::sync::{mpsc, oneshot};

pub use self::maintenance::MaintenanceHandle;
pub use self::writer::BatchStats;
use self::writer::{WriteCommand, WriterStats};
use crate::backend::{Backend, ReadTxn};
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
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            limits: Limits::default(),
            history_retention: Some(DEFAULT_HISTORY_RETENTION),
            sweep_interval: Duration::from_secs(1),
            max_batch: 1024,
            queue_depth: 4096,
        }
    }
}

pub const DEFAULT_HISTORY_RETENTION: u64 = 100_000;

/// Batch reads of up to this many keys count as point reads.
const POINT_READ_KEYS: usize = 16;

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
}

struct Inner {
    /// `None` once the engine is closed. Each operation clones what it needs (an atomic
    /// increment under an uncontended lock), so `close` can take both away from every handle.
    backend: RwLock<Option<Arc<dyn Backend>>>,
    writes: RwLock<Option<mpsc::Sender<WriteCommand>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    clock: Arc<dyn Clock>,
    config: EngineConfig,
    stats: Arc<WriterStats>,
    started_at: UnixMillis,
    backend_kind: &'static str,
}

impl Engine {
    /// Starts an engine over `backend`. Background maintenance is separate
    /// ([`Engine::start_maintenance`]) so tests can drive expiry by hand.
    pub fn new(backend: Arc<dyn Backend>, clock: Arc<dyn Clock>, config: EngineConfig) -> Result<Engine, EngineError> {
        let (writes, queue) = mpsc::channel(config.queue_depth.max(1));
        let stats = Arc::new(WriterStats::default());
        let writer = {
            let (backend, clock, stats) = (backend.clone(), clock.clone(), stats.clone());
            let max_batch = config.max_batch.max(1);
            std::thread::Builder::new()
                .name("state-writer".into())
                .spawn(move || writer::run(backend, clock, queue, max_batch, stats))
                .map_err(|e| StorageError::Other(format!("cannot start the writer thread: {e}")))?
        };
        let started_at = clock.now();
        Ok(Engine {
            inner: Arc::new(Inner {
                backend_kind: backend.kind(),
                backend: RwLock::new(Some(backend)),
                writes: RwLock::new(Some(writes)),
                writer: Mutex::new(Some(writer)),
                clock,
                config,
                stats,
                started_at,
            }),
        })
    }

    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    pub fn backend_kind(&self) -> &'static str {
        self.inner.backend_kind
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
        // The writer drains the queue, then exits and drops the last long-lived backend handle.
        let handle = self.inner.writer.lock().ok().and_then(|mut w| w.take());
        if let Some(handle) = handle {
            let _ = tokio::task::spawn_blocking(move || handle.join()).await;
        }
    }

    fn backend(&self) -> Result<Arc<dyn Backend>, EngineError> {
        self.inner.backend.read().ok().and_then(|b| b.clone()).ok_or(EngineError::Closed)
    }

    pub async fn get(&self, req: GetRequest) -> Result<GetResult, EngineError> {
        req.validate()?;
        // A read of the current value is one B-tree lookup; one in the past walks history.
        let cost = if req.version.is_none() && req.revision.is_none() { ReadCost::Point } else { ReadCost::Scan };
        self.read(cost, move |txn, now| reads::get(txn, &req, now)).await
    }

    pub async fn batch_get(&self, req: BatchGetRequest) -> Result<BatchGetResult, EngineError> {
        req.validate()?;
        let cost = if req.keys.len() <= POINT_READ_KEYS { ReadCost::Point } else { ReadCost::Scan };
        self.read(cost, move |txn, now| reads::batch_get(txn, &req, now)).await
    }

    pub async fn list(&self, req: ListRequest) -> Result<ListResult, EngineError> {
        req.validate()?;
        self.read(ReadCost::Scan, move |txn, now| reads::list(txn, &req, now)).await
    }

    pub async fn history(&self, req: HistoryRequest) -> Result<HistoryResult, EngineError> {
        req.validate()?;
        self.read(ReadCost::Scan, move |txn, _| reads::history(txn, &req)).await
    }

    pub async fn set(&self, req: SetRequest) -> Result<SetResult, EngineError> {
        req.validate(&self.inner.config.limits)?;
        self.write(|reply| WriteCommand::Set(req, reply)).await
    }

    pub async fn delete(&self, req: DeleteRequest) -> Result<DeleteResult, EngineError> {
        req.validate()?;
        self.write(|reply| WriteCommand::Delete(req, reply)).await
    }

    pub async fn txn(&self, req: TxnRequest) -> Result<TxnResult, EngineError> {
        req.validate(&self.inner.config.limits)?;
        self.write(|reply| WriteCommand::Txn(req, reply)).await
    }

    /// Removes up to `limit` keys whose TTL has run out, recording an `expired` event for
    /// each. Returns how many were removed. Reads hide expired keys whether or not this ran.
    pub async fn expire_due(&self, limit: usize) -> Result<usize, EngineError> {
        self.write(|reply| WriteCommand::Expire(limit.max(1), reply)).await
    }

    /// Drops history through revision `through` (capped at the current revision). Returns
    /// the new compacted revision.
    pub async fn compact_history(&self, through: u64) -> Result<u64, EngineError> {
        const EVENTS_PER_TRANSACTION: usize = 10_000;
        loop {
            let reached =
                self.write(|reply| WriteCommand::Compact { through, limit: EVENTS_PER_TRANSACTION, reply }).await?;
            let revision = self.read(ReadCost::Point, |txn, _| Ok(txn.revision()?)).await?;
            if reached >= through.min(revision) {
                return Ok(reached);
            }
        }
    }

    pub async fn health(&self) -> Result<HealthResult, EngineError> {
        let backend = self.backend()?;
        let started_at = self.inner.started_at;
        self.read(ReadCost::Point, move |txn, now| {
            Ok(HealthResult {
                status: OkStatus::Ok,
                backend: backend.kind().to_owned(),
                revision: txn.revision()?,
                keys: txn.key_count()?,
                database_bytes: backend.size_on_disk(),
                uptime_seconds: now.0.saturating_sub(started_at.0) / 1000,
                compacted_revision: txn.compacted_revision()?,
                server_version: env!("CARGO_PKG_VERSION").to_owned(),
            })
        })
        .await
    }

    /// The one place reads run. Scans go to the blocking pool so a long walk never stalls
    /// an async worker. Point reads run in place: they are a few B-tree lookups in the page
    /// cache (microseconds, like parsing the request), while handing them to another thread
    /// costs two context switches, measured at half the server's CPU per `state_get`.
    async fn read<T, F>(&self, cost: ReadCost, f: F) -> Result<T, EngineError>
    where
        T: Send + 'static,
        F: FnOnce(&dyn ReadTxn, UnixMillis) -> Result<T, EngineError> + Send + 'static,
    {
        let backend = self.backend()?;
        let now = self.inner.clock.now();
        let run = move || {
            let txn = backend.begin_read()?;
            f(&*txn, now)
        };
        match cost {
            ReadCost::Point => {
                // Completing without an await point would let a task that loops over reads
                // starve every other task on its worker; spend the cooperative budget so
                // the scheduler can preempt it like any other tokio operation.
                tokio::task::consume_budget().await;
                run()
            }
            ReadCost::Scan => tokio::task::spawn_blocking(run)
                .await
                .map_err(|e| StorageError::Other(format!("read task failed: {e}")))?,
        }
    }

    async fn write<T>(&self, command: impl FnOnce(writer::Reply<T>) -> WriteCommand) -> Result<T, EngineError> {
        let writes = self.inner.writes.read().ok().and_then(|w| w.clone()).ok_or(EngineError::Closed)?;
        let (reply, answer) = oneshot::channel();
        writes.send(command(reply)).await.map_err(|_| EngineError::Closed)?;
        answer.await.map_err(|_| EngineError::Closed)?
    }
}
