//! Calls served in this process: operation + JSON arguments -> engine call -> classified reply.
//! Argument parsing, compatibility translation and result encoding happen here once, for
//! every frontend and for every process that joins an owner.

pub(crate) mod seam;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::catalog::{Operation, Runner};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use state_core::InvalidInput;
use state_core::ops::health::{HealthRequest, HealthResult, OwnerInfo};
use state_core::ops::watch::{WatchRequest, WatchResult};
use state_store::backend::postgres::{PostgresBackend, PostgresOptions};
use state_store::{
    DEFAULT_HISTORY_RETENTION, Engine, EngineConfig, EngineError, MaintenanceHandle, OpenError, RedbBackend,
    StorageError, SystemClock,
};

use crate::classify::Classify;
use crate::reply::{ApiError, ErrorCode, Reply};
use crate::wire::Settings;

/// Why a call failed before or after reaching the engine; becomes an [`ApiError`] in one place.
#[derive(Debug)]
pub(crate) enum CallError {
    /// The arguments do not fit the operation's input schema.
    Arguments(String),
    Engine(EngineError),
    /// A compatibility tool's subject does not exist, which its server reported as an error.
    NotFound(String),
    /// The result could not be encoded: a bug, and the operation may have been applied.
    Encode(String),
    /// A native call an adapter made was refused, as the seam put it.
    Refused(ApiError),
}

impl From<EngineError> for CallError {
    fn from(e: EngineError) -> CallError {
        CallError::Engine(e)
    }
}

impl From<InvalidInput> for CallError {
    fn from(e: InvalidInput) -> CallError {
        CallError::Engine(e.into())
    }
}

/// How this process holds its engine: alone, or as the owner other processes join.
#[derive(Debug)]
pub(crate) struct Host {
    mode: &'static str,
    clients: AtomicU64,
    log_file: Option<PathBuf>,
}

impl Host {
    pub(crate) fn owner(log_file: Option<PathBuf>) -> Arc<Host> {
        Arc::new(Host { mode: "owner", clients: AtomicU64::new(0), log_file })
    }

    pub(crate) fn client_joined(&self) -> u64 {
        self.clients.fetch_add(1, Ordering::SeqCst) + 1
    }

    pub(crate) fn client_left(&self) -> u64 {
        self.clients.fetch_sub(1, Ordering::SeqCst).saturating_sub(1)
    }

    pub(crate) fn clients(&self) -> u64 {
        self.clients.load(Ordering::SeqCst)
    }

    fn info(&self) -> OwnerInfo {
        OwnerInfo {
            pid: std::process::id(),
            mode: self.mode.to_owned(),
            clients: self.clients(),
            log_file: self.log_file.as_ref().map(|p| p.display().to_string()),
        }
    }
}

/// Why a database could not be opened in this process.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StandaloneError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error("cannot start the engine: {0}")]
    Engine(#[from] EngineError),
    #[error("cannot open the store in PostgreSQL: {0}")]
    Postgres(StorageError),
}

/// The engine configuration `settings` ask for, defaults elsewhere.
pub(crate) fn engine_config(settings: Settings) -> EngineConfig {
    let defaults = EngineConfig::default();
    let retention = settings.history_retention.unwrap_or(DEFAULT_HISTORY_RETENTION);
    EngineConfig {
        limits: state_core::Limits {
            max_value_bytes: settings.max_value_bytes.unwrap_or(defaults.limits.max_value_bytes),
        },
        history_retention: (retention > 0).then_some(retention),
        watch_buffer_bytes: settings.watch_buffer_bytes.unwrap_or(defaults.watch_buffer_bytes),
        ..defaults
    }
}

/// The engine served in this process.
#[derive(Clone)]
pub struct Local {
    engine: Engine,
    host: Arc<Host>,
    maintenance: Arc<std::sync::Mutex<Option<MaintenanceHandle>>>,
}

impl Local {
    /// Serves `engine` in this process alone (`--standalone`, embedding, tests), running its
    /// background maintenance (TTL sweeps, history compaction) until closed.
    pub fn standalone(engine: Engine) -> Local {
        Local::hosted(engine, Arc::new(Host { mode: "standalone", clients: AtomicU64::new(0), log_file: None }))
    }

    /// Opens the database file and serves it in this process alone. Fails, naming the
    /// holder, if another process holds it.
    pub fn open_standalone(db: &Path, settings: Settings) -> Result<Local, StandaloneError> {
        Local::open_standalone_with_clock(db, settings, Arc::new(SystemClock))
    }

    /// [`Local::open_standalone`] keeping time by `clock` (a [`crate::ManualClock`] in tests
    /// that need every stamp and countdown the same on every run).
    pub fn open_standalone_with_clock(
        db: &Path,
        settings: Settings,
        clock: Arc<dyn state_store::Clock>,
    ) -> Result<Local, StandaloneError> {
        let backend = RedbBackend::open_with_cache(db, "standalone", settings.cache_bytes)?;
        let engine = Engine::new(Arc::new(backend), clock, engine_config(settings))?;
        Ok(Local::standalone(engine))
    }

    /// Opens a store kept in PostgreSQL, which any number of processes may serve at once (each a
    /// replica: no owner, no socket; the database serialises their writes). Blocks while it
    /// connects and migrates: call it off the async workers.
    pub fn open_postgres(options: PostgresOptions, settings: Settings) -> Result<Local, StandaloneError> {
        let backend = PostgresBackend::open(options).map_err(StandaloneError::Postgres)?;
        let engine = Engine::new(Arc::new(backend), Arc::new(SystemClock), engine_config(settings))?;
        Ok(Local::hosted(engine, Arc::new(Host { mode: "replica", clients: AtomicU64::new(0), log_file: None })))
    }

    /// An engine without background maintenance: tests that drive expiry by hand.
    pub fn without_maintenance(engine: Engine) -> Local {
        let host = Arc::new(Host { mode: "standalone", clients: AtomicU64::new(0), log_file: None });
        Local { engine, host, maintenance: Arc::default() }
    }

    pub(crate) fn hosted(engine: Engine, host: Arc<Host>) -> Local {
        let maintenance = engine.start_maintenance();
        Local { engine, host, maintenance: Arc::new(std::sync::Mutex::new(Some(maintenance))) }
    }

    /// This store, with the changes made through the handle it returns recorded as
    /// `author`'s (`Event::by`): a token's name or an OAuth subject.
    pub(crate) fn on_behalf_of(&self, author: Option<&str>) -> Local {
        Local {
            engine: self.engine.on_behalf_of(author),
            host: Arc::clone(&self.host),
            maintenance: Arc::clone(&self.maintenance),
        }
    }

    pub(crate) fn host(&self) -> &Arc<Host> {
        &self.host
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    pub async fn call(&self, op: Operation, args: Value) -> Reply {
        self.call_with_id(op, args, None).await
    }

    /// Calls `op`, giving a mutating call `request_id` as its idempotency key unless its
    /// arguments carry their own.
    pub(crate) async fn call_with_id(&self, op: Operation, args: Value, request_id: Option<String>) -> Reply {
        let request_id = if op.is_mutating() { request_id } else { None };
        match dispatch(self, op, args, request_id).await {
            Ok(reply) => reply,
            Err(error) => Reply::error(api_error(op, error)),
        }
    }

    /// A watch of this engine's changes.
    pub(crate) async fn watch(&self, request: WatchRequest) -> Result<state_store::Watch, ApiError> {
        self.engine.watch(request).await.map_err(|e| engine_error(Operation::StateWatch, e))
    }

    /// A consistent copy of the store written to `path`, a new file: `{revision, bytes, path}`.
    pub(crate) async fn backup(&self, path: PathBuf) -> Result<Value, ApiError> {
        if !path.is_absolute() {
            let message = format!("a backup path must be absolute (it is written by the owner): {}", path.display());
            return Err(ApiError::new(ErrorCode::InvalidArguments, message));
        }
        let taken = self.engine.backup(path.clone()).await.map_err(|error| match error {
            EngineError::Closed => {
                ApiError::new(ErrorCode::Unavailable, "the store is shutting down; back it up once it runs again")
            }
            error => ApiError::new(
                ErrorCode::Storage,
                format!("the backup to {} was not written: {error}. The store is unchanged", path.display()),
            ),
        })?;
        Ok(serde_json::json!({"revision": taken.revision, "bytes": taken.bytes, "path": path.display().to_string()}))
    }

    /// Whether this engine commits: answered once its writer has taken a turn.
    pub(crate) async fn ping(&self) -> Result<(), ApiError> {
        self.engine.ping().await.map_err(|e| engine_error(Operation::StateHealth, e))
    }

    /// Stops maintenance, lets queued writes commit, and releases the database.
    pub async fn close(&self) {
        drop(self.maintenance.lock().ok().and_then(|mut m| m.take()));
        self.engine.close().await;
    }
}

/// Runs `op` as its declaration in the catalog says.
async fn dispatch(local: &Local, op: Operation, args: Value, id: Option<String>) -> Result<Reply, CallError> {
    match op.spec().runner() {
        Runner::Engine(run) => run(local, with_request_id(args, id)).await,
        Runner::Compat(run) => run(local, args, id).await,
    }
}

/// `state_health`: the engine's, with who serves it.
pub(crate) async fn health(local: &Local, _request: HealthRequest) -> Result<HealthResult, EngineError> {
    let mut health = local.engine.health().await?;
    health.owner = Some(local.host.info());
    Ok(health)
}

/// `state_watch`: wait for the first change after the revision asked for (or the timeout),
/// then take whatever else has already been committed, up to the limit, without waiting.
pub(crate) async fn long_poll(local: &Local, request: WatchRequest) -> Result<WatchResult, EngineError> {
    let engine = &local.engine;
    request.validate()?;
    let (wait, limit) = (Duration::from_millis(request.wait_millis()?), request.limit()?);
    let mut watch = engine.watch(request).await?;
    let first = match tokio::time::timeout(wait, watch.next()).await {
        Err(_) => return Ok(WatchResult { events: Vec::new(), revision: watch.position(), timed_out: true }),
        Ok(None) => return Err(EngineError::Closed),
        Ok(Some(batch)) => batch?,
    };
    let mut events = first.events;
    let now = engine.revision().await?;
    // Whole revisions only, so a revision is never split between two answers.
    while events.len() < limit {
        match watch.next_until(now).await {
            Some(batch) => events.extend(batch?.events),
            None => break,
        }
    }
    Ok(WatchResult { events, revision: watch.position(), timed_out: false })
}

/// Puts the caller's idempotency key into native arguments that lack one.
fn with_request_id(args: Value, id: Option<String>) -> Value {
    match (args, id) {
        (Value::Object(mut map), Some(id)) => {
            map.entry("request_id").or_insert(Value::String(id));
            Value::Object(map)
        }
        (args, _) => args,
    }
}

pub(crate) fn parse<T: DeserializeOwned>(args: Value) -> Result<T, CallError> {
    parse_or_why(args).map_err(CallError::Arguments)
}

/// The arguments as `T`, or why not, naming the argument at fault.
pub(crate) fn parse_or_why<T: DeserializeOwned>(args: Value) -> Result<T, String> {
    serde_path_to_error::deserialize(args).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        if path == "." { inner } else { format!("`{path}`: {inner}") }
    })
}

pub(crate) fn reply<T: Serialize + Classify>(result: Result<T, EngineError>) -> Result<Reply, CallError> {
    let result = result?;
    Ok(Reply::result(result.outcome(), encode(&result)?))
}

pub(crate) fn encode<T: Serialize>(result: &T) -> Result<Value, CallError> {
    serde_json::to_value(result).map_err(|e| CallError::Encode(e.to_string()))
}

/// An engine error as the seam reports it.
pub(crate) fn engine_error(op: Operation, error: EngineError) -> ApiError {
    api_error(op, CallError::Engine(error))
}

/// The one place a failed call becomes an [`ApiError`] with a message the caller can act on.
/// What a failed call left as it was, in words: a write was not applied; a read changes nothing.
fn unchanged(op: Operation) -> &'static str {
    if op.is_mutating() { "It was not applied." } else { "Nothing was read." }
}

fn api_error(op: Operation, error: CallError) -> ApiError {
    let name = op.name();
    match error {
        CallError::Arguments(message) => {
            ApiError::new(ErrorCode::InvalidArguments, format!("invalid arguments for `{name}`: {message}"))
        }
        CallError::NotFound(message) => ApiError::new(ErrorCode::NotFound, message),
        CallError::Refused(error) => error,
        CallError::Encode(message) => ApiError::new(
            ErrorCode::Internal,
            format!(
                "internal error: `{name}` ran but its result could not be encoded ({message}); this is a bug. \
                 It may have been applied: read the state it changes to check."
            ),
        ),
        CallError::Engine(EngineError::Invalid(invalid)) => ApiError {
            argument: Some(invalid.argument()),
            ..ApiError::new(
                ErrorCode::InvalidInput,
                format!("invalid input to `{name}`: {invalid}. Nothing was changed."),
            )
        },
        CallError::Engine(error @ EngineError::Compacted { compacted_revision, .. }) => ApiError {
            compacted_revision: Some(compacted_revision),
            ..ApiError::new(ErrorCode::Compacted, format!("`{name}`: {error}"))
        },
        CallError::Engine(error @ EngineError::WatchLagged { resume_after }) => ApiError {
            resume_after: Some(resume_after),
            ..ApiError::new(ErrorCode::WatchLagged, format!("`{name}`: {error}"))
        },
        CallError::Engine(EngineError::Closed) => ApiError::new(
            ErrorCode::Unavailable,
            format!("`{name}` was not run: the store is shutting down. Retry once it is running again."),
        ),
        CallError::Engine(EngineError::Storage(storage @ StorageError::OutcomeUnknown(_))) => ApiError::new(
            ErrorCode::OutcomeUnknown,
            format!("`{name}`: {storage}. Read the state it changes, or retry with the same request_id."),
        ),
        // A database that cannot be reached now (PostgreSQL down, a connection dropped) is a
        // store that is unavailable, as a client sees it: retry later.
        CallError::Engine(EngineError::Storage(storage @ StorageError::Retryable(_))) => ApiError::new(
            ErrorCode::Unavailable,
            format!("`{name}` could not run: {storage}. {} Retry once it is reachable.", unchanged(op)),
        ),
        CallError::Engine(EngineError::Storage(storage)) => ApiError::new(
            ErrorCode::Storage,
            format!(
                "`{name}` failed in storage: {storage}. {} Check state_health and the server's log.",
                unchanged(op)
            ),
        ),
        CallError::Engine(other) => ApiError::new(ErrorCode::Internal, format!("`{name}` failed: {other}")),
    }
}

#[cfg(test)]
mod tests;
