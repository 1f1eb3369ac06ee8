//! The owner: the one process that holds a database's engine and serves every other process
//! on that database over a private Unix socket.
//!
//! Exactly one owner per database is guaranteed by the database's own file lock: a process
//! becomes the owner only after opening the database, and only then claims the socket path.
//! On the way out it gives the path up first and closes the database last, so a successor
//! never finds a live listener in its place.

use std::future::Future;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::catalog::Operation;
use state_core::ops::watch::WatchRequest;
use state_store::{Clock, Engine, EngineError, OpenError, RedbBackend};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::local::{Host, Local, engine_config};
use crate::options::Options;
use crate::paths::{PathError, Rendezvous, current_uid};
use crate::reply::{ApiError, ErrorCode, Outcome, Reply};
use crate::wire::{
    self, Call, Greeting, Hello, MAX_CALLS_IN_FLIGHT, PROTOCOL, Readiness, Refused, ReplyFrame, Settings, WIRE_VERSION,
    Welcome,
};

/// How long a connecting client has to say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// Watches one connection may have open (a joined `state-http` carries all its callers').
const MAX_WATCHES_PER_CONNECTION: usize = 4096;

/// Pings and backups one connection may have running at once.
const MAX_CONTROL_IN_FLIGHT: usize = 16;

/// Bytes of replies a connection may have waiting to be written (its client not reading them)
/// before its next call is read.
const MAX_UNSENT_REPLY_BYTES: usize = 32 * 1024 * 1024;

/// However short the idle period, an owner waits this long for its first client: the process
/// that launched it connects only after reading that it is ready.
const FIRST_CLIENT_GRACE: Duration = Duration::from_secs(1);

/// How an owner is started.
#[derive(Debug, Clone)]
pub struct OwnerConfig {
    pub db: PathBuf,
    /// Overrides where the socket lives (see [`crate::paths`]).
    pub runtime_dir: Option<PathBuf>,
    /// Exit after this long with no client connected.
    pub idle: Duration,
    pub settings: Settings,
    /// Where the owner logs, reported to joiners and in health.
    pub log_file: Option<PathBuf>,
    /// The engine's time: [`SystemClock`] in service, a [`crate::ManualClock`] in tests that
    /// expire leases and keys through the owner without waiting.
    pub clock: Arc<dyn Clock>,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OwnerError {
    #[error(transparent)]
    Paths(#[from] PathError),
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error("cannot start the engine: {0}")]
    Engine(#[from] EngineError),
    #[error("{}", socket_problem(path, message))]
    Socket { path: PathBuf, message: String },
}

fn socket_problem(path: &Path, message: &str) -> String {
    format!("owner socket {}: {message}", path.display())
}

impl OwnerError {
    /// Whether another process holds the database, and in which role ("owner", "standalone").
    pub fn holder_role(&self) -> Option<Option<&str>> {
        match self {
            OwnerError::Open(OpenError::InUse { role, .. }) => Some(role.as_deref()),
            _ => None,
        }
    }
}

/// How starting went, for the process that launched this owner (see [`Readiness`]).
fn readiness(started: Result<(), &OwnerError>) -> Readiness {
    match started {
        Ok(()) => Readiness { ready: true, ..Readiness::default() },
        Err(OwnerError::Open(OpenError::InUse { holder, role, .. })) => {
            Readiness { held: true, holder_role: role.clone(), message: holder.clone(), ..Readiness::default() }
        }
        Err(error @ (OwnerError::Paths(_) | OwnerError::Socket { .. } | OwnerError::Open(_))) => {
            Readiness { fatal: true, message: error.to_string(), ..Readiness::default() }
        }
        Err(error) => Readiness { message: error.to_string(), ..Readiness::default() },
    }
}

/// Why an owner stopped serving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerExit {
    /// No client for the idle period.
    Idle,
    /// Asked to stop (a signal).
    Shutdown,
}

/// An owner that holds its database and has claimed its socket, ready to serve.
pub struct Owner {
    listener: UnixListener,
    rendezvous: Rendezvous,
    local: Local,
    idle: Duration,
    welcome: Welcome,
}

impl Owner {
    /// Opens the database (its file lock makes this process the only owner) and binds the
    /// socket. Fails with [`OpenError::InUse`] when another process holds the database.
    pub async fn start(config: OwnerConfig) -> Result<Owner, OwnerError> {
        let rendezvous = Rendezvous::for_database(&config.db, config.runtime_dir.as_deref())?;
        let backend = RedbBackend::open_with_cache(&rendezvous.db, "owner", config.settings.cache_bytes)?;
        let engine_config = engine_config(config.settings);
        let settings = Settings {
            max_value_bytes: Some(engine_config.limits.max_value_bytes),
            history_retention: Some(engine_config.history_retention.unwrap_or(0)),
            watch_buffer_bytes: Some(engine_config.watch_buffer_bytes),
            cache_bytes: config.settings.cache_bytes,
        };
        let engine = Engine::new(Arc::new(backend), config.clock.clone(), engine_config)?;
        let listener = match claim_socket(&rendezvous.socket).await {
            Ok(listener) => listener,
            Err(error) => {
                engine.close().await;
                return Err(error);
            }
        };
        let local = Local::hosted(engine, Host::owner(config.log_file.clone()));
        let welcome = Welcome {
            protocol: PROTOCOL.into(),
            wire: WIRE_VERSION,
            version: env!("CARGO_PKG_VERSION").into(),
            pid: std::process::id(),
            db: rendezvous.db.clone(),
            settings,
            log_file: config.log_file,
        };
        tracing::info!(db = %rendezvous.db.display(), socket = %rendezvous.socket.display(), "owner serving");
        Ok(Owner { listener, rendezvous, local, idle: config.idle, welcome })
    }

    /// The seam over this owner's engine, for a frontend hosted in the owner's own process.
    pub fn api(&self) -> crate::Api {
        crate::Api::local(self.local.clone())
    }

    /// Serves clients until `shutdown` completes or no client has been connected for the idle
    /// period. Then stops listening, lets queued writes commit, and closes the database.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> OwnerExit {
        let Owner { listener, rendezvous, local, idle, welcome } = self;
        let shared = Arc::new(Shared { local: local.clone(), welcome, changed: Notify::new() });
        // An idle period too long to add up (an owner that should never idle out) is no deadline.
        let mut idle_deadline = Instant::now().checked_add(idle.max(FIRST_CLIENT_GRACE));
        let mut connections = tokio::task::JoinSet::new();
        tokio::pin!(shutdown);
        let exit = loop {
            let idle_over = async {
                match idle_deadline {
                    Some(deadline) => tokio::time::sleep_until(deadline).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = &mut shutdown => break OwnerExit::Shutdown,
                () = idle_over => {
                    if shared.local.host().clients() == 0 {
                        break OwnerExit::Idle;
                    }
                    idle_deadline = None;
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
                () = shared.changed.notified() => {
                    idle_deadline = if shared.local.host().clients() == 0 { Instant::now().checked_add(idle) } else { None };
                }
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        // Counted before the handshake, so the idle timer never fires under a
                        // client that is still saying hello.
                        shared.local.host().client_joined();
                        idle_deadline = None;
                        let shared = shared.clone();
                        connections.spawn(async move {
                            serve_connection(stream, &shared).await;
                            shared.local.host().client_left();
                            shared.changed.notify_one();
                        });
                    }
                    Err(error) => {
                        tracing::warn!(%error, "accepting a connection failed");
                        // Out of file descriptors, typically: give clients a moment to leave.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
            }
        };
        // Give the path up before the database, so no successor meets this listener. Cut the
        // clients off rather than answer them "shutting down": they rejoin the next owner and
        // resend what was in flight under its idempotency key, so writes queued here (which
        // still commit while the engine closes) are answered there from their records.
        drop(listener);
        release_socket(&rendezvous.socket);
        connections.shutdown().await;
        local.close().await;
        tracing::info!(reason = ?exit, "owner stopped; database closed");
        exit
    }
}

/// Makes `path` ours: a stale socket file left by an owner that died is removed; a file that
/// is not a socket, or a socket something still answers on, is refused.
async fn claim_socket(path: &Path) -> Result<UnixListener, OwnerError> {
    let refuse = |message: String| OwnerError::Socket { path: path.to_owned(), message };
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(refuse("exists and is not a socket; remove it".into()));
        }
        // This process holds the database, so no owner of it can be listening here: anything
        // that answers is something else.
        if UnixStream::connect(path).await.is_ok() {
            return Err(refuse(format!(
                "something that is not this database's owner is listening there; stop it, or set {} to another directory",
                crate::paths::RUNTIME_DIR_ENV
            )));
        }
        std::fs::remove_file(path).map_err(|e| refuse(format!("cannot remove the stale socket: {e}")))?;
        tracing::info!(socket = %path.display(), "removed a stale socket left by an owner that stopped abruptly");
    }
    let listener = UnixListener::bind(path).map_err(|e| refuse(format!("cannot listen: {e}")))?;
    // The directory already keeps other users out; the mode says so on the socket too.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| refuse(format!("cannot restrict its permissions: {e}")))?;
    Ok(listener)
}

fn release_socket(path: &Path) {
    if let Err(error) = std::fs::remove_file(path)
        && error.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(%error, socket = %path.display(), "could not remove the socket");
    }
}

struct Shared {
    local: Local,
    welcome: Welcome,
    /// Signalled when a client leaves, so the idle timer can start.
    changed: Notify,
}

async fn serve_connection(stream: UnixStream, shared: &Shared) {
    match stream.peer_cred() {
        Ok(cred) if cred.uid() == current_uid() => {}
        Ok(cred) => {
            tracing::warn!(uid = cred.uid(), "refused a connection from another user");
            return;
        }
        Err(error) => {
            tracing::warn!(%error, "cannot read a client's credentials; refused it");
            return;
        }
    }
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let mut line = Vec::new();
    let read =
        tokio::time::timeout(HELLO_TIMEOUT, wire::read_line(&mut reader, &mut line, wire::MAX_HANDSHAKE_BYTES)).await;
    let said = match read {
        Ok(Ok(true)) => serde_json::from_slice::<serde_json::Value>(&line).ok(),
        _ => None,
    };
    let (greeting, hello) = greet(said, &shared.welcome);
    let Ok(frame) = wire::encode(&greeting) else { return };
    if write.write_all(&frame).await.is_err() {
        return;
    }
    let (Greeting::Welcome(_), Some(hello)) = (greeting, hello) else { return };
    tracing::info!(
        client = %hello.client,
        pid = hello.pid,
        connected = shared.local.host().clients(),
        "a client joined"
    );

    let allowed = Arc::new(hello.options);
    // Calls run concurrently and answer in any order; the lock keeps their frames whole.
    let write = Arc::new(tokio::sync::Mutex::new(write));
    let mut watches: std::collections::HashMap<u64, (tokio::task::AbortHandle, Arc<Credit>)> =
        std::collections::HashMap::new();
    // Backpressure, not buffering: a client that sends calls and never reads their replies
    // stops being read itself.
    let calls = Arc::new(tokio::sync::Semaphore::new(MAX_CALLS_IN_FLIGHT));
    let control = Arc::new(tokio::sync::Semaphore::new(MAX_CONTROL_IN_FLIGHT));
    let unsent = Arc::new(Unsent::default());
    loop {
        unsent.wait_below(MAX_UNSENT_REPLY_BYTES).await;
        match wire::read_line(&mut reader, &mut line, wire::MAX_FRAME_BYTES).await {
            Ok(true) => {}
            Ok(false) => break,
            Err(error) => {
                tracing::debug!(%error, client = %hello.client, "connection failed");
                break;
            }
        }
        let call: Call = match serde_json::from_slice(&line) {
            Ok(call) => call,
            Err(error) => {
                tracing::warn!(%error, client = %hello.client, "dropped a client that sent a malformed frame");
                break;
            }
        };
        if let Some(request) = call.watch {
            if watches.len() >= MAX_WATCHES_PER_CONNECTION {
                watches.retain(|_, (task, _)| !task.is_finished());
            }
            if watches.len() >= MAX_WATCHES_PER_CONNECTION {
                let busy = busy(format!("this connection has {MAX_WATCHES_PER_CONNECTION} watches open"));
                let frame = ReplyFrame { end: true, ..ReplyFrame::new(call.id, Reply::error(busy)) };
                reply_now(&write, &unsent, &frame);
                continue;
            }
            let credit = Arc::new(Credit::new(call.window));
            let task = tokio::spawn(serve_watch(shared.local.clone(), write.clone(), call.id, request, credit.clone()));
            watches.insert(call.id, (task.abort_handle(), credit));
            continue;
        }
        if call.ping || call.backup.is_some() {
            // Each waits on the writer or reads the whole store: a few at a time per connection.
            let Ok(permit) = control.clone().try_acquire_owned() else {
                let busy = busy(format!("this connection has {MAX_CONTROL_IN_FLIGHT} pings and backups running"));
                reply_now(&write, &unsent, &ReplyFrame::new(call.id, Reply::error(busy)));
                continue;
            };
            let (local, write, id) = (shared.local.clone(), write.clone(), call.id);
            let Some(path) = call.backup else {
                tokio::spawn(async move {
                    let reply = match local.ping().await {
                        Ok(()) => Reply::result(Outcome::Ok, serde_json::json!({})),
                        Err(error) => Reply::error(error),
                    };
                    send(&write, &ReplyFrame::new(id, reply)).await;
                    drop(permit);
                });
                continue;
            };
            tokio::spawn(async move {
                let reply = match local.backup(path).await {
                    Ok(taken) => Reply::result(Outcome::Ok, taken),
                    Err(error) => Reply::error(error),
                };
                send(&write, &ReplyFrame::new(id, reply)).await;
                drop(permit);
            });
            continue;
        }
        if let Some(bytes) = call.credit {
            if let Some((_, credit)) = watches.get(&call.id) {
                credit.grant(bytes);
            }
            continue;
        }
        if call.stop {
            if let Some((task, _)) = watches.remove(&call.id) {
                task.abort();
            }
            continue;
        }
        // Never a wait here: this loop must go on reading the connection's pings, or a joiner
        // whose long polls fill every place would take a busy owner for a hung one.
        let Ok(permit) = calls.clone().try_acquire_owned() else {
            let busy = busy(format!("this connection has {MAX_CALLS_IN_FLIGHT} calls running on the owner"));
            reply_now(&write, &unsent, &ReplyFrame::new(call.id, Reply::error(busy)));
            continue;
        };
        let replying = Replying { write: write.clone(), unsent: unsent.clone(), _permit: permit };
        let mut answer = Box::pin(answer(shared.local.clone(), allowed.clone(), replying, call));
        // Most calls (point reads) finish without waiting: answer those here, saving a task
        // and a wake-up per call. One that waits (a write for its commit, a scan) becomes a
        // task of its own, so this connection's later calls are not held up behind it.
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        if answer.as_mut().poll(&mut context).is_pending() {
            tokio::spawn(answer);
        }
    }
    // Calls still running answer into a closed connection (or find the client gone) and end;
    // watches would go on forever, so they stop here.
    for (task, _) in watches.into_values() {
        task.abort();
    }
    tracing::info!(client = %hello.client, pid = hello.pid, "a client left");
}

type SharedWrite = Arc<tokio::sync::Mutex<tokio::net::unix::OwnedWriteHalf>>;

/// What a client lets the owner send of one watch before it has taken what came before: the
/// bytes of its window not yet used. A watch waits here, not in memory, when its client's
/// consumer is slow; the engine's watch behind it then waits too, holding nothing.
struct Credit {
    /// `None`: a client without flow control; send freely.
    window: Option<u64>,
    available: std::sync::Mutex<u64>,
    granted: Notify,
}

impl Credit {
    fn new(window: Option<u64>) -> Credit {
        Credit { window, available: std::sync::Mutex::new(window.unwrap_or(0)), granted: Notify::new() }
    }

    fn grant(&self, bytes: u64) {
        if let Ok(mut available) = self.available.lock() {
            *available = available.saturating_add(bytes);
        }
        self.granted.notify_one();
    }

    /// Waits until `bytes` may be sent, and uses them. A frame larger than the whole window
    /// goes once the window is wholly free, so every watch moves.
    async fn take(&self, bytes: u64) {
        let Some(window) = self.window else { return };
        loop {
            let granted = self.granted.notified();
            if let Ok(mut available) = self.available.lock()
                && (*available >= bytes || *available >= window)
            {
                *available = available.saturating_sub(bytes);
                return;
            }
            granted.await;
        }
    }
}

/// Runs one watch for a client: an acknowledgement with its starting position (or the error
/// that prevented it), its batches as they come (as its credit allows), and a last frame when
/// it ends.
async fn serve_watch(local: Local, write: SharedWrite, id: u64, request: WatchRequest, credit: Arc<Credit>) {
    let frame = |outcome: Outcome| ReplyFrame { id, outcome, result: None, error: None, batch: None, end: false };
    let mut watch = match local.watch(request).await {
        Ok(watch) => watch,
        Err(error) => {
            let end = ReplyFrame { error: Some(error.clone()), end: true, ..frame(error.code.outcome()) };
            send(&write, &end).await;
            return;
        }
    };
    let opened = ReplyFrame { result: Some(serde_json::json!({ "position": watch.position() })), ..frame(Outcome::Ok) };
    if !send(&write, &opened).await {
        return;
    }
    loop {
        let next = match watch.next().await {
            Some(Ok(batch)) => ReplyFrame { batch: Some(batch), ..frame(Outcome::Ok) },
            Some(Err(error)) => {
                let error = crate::local::engine_error(Operation::StateWatch, error);
                ReplyFrame { error: Some(error.clone()), end: true, ..frame(error.code.outcome()) }
            }
            None => {
                let error = ApiError::new(ErrorCode::Unavailable, "the store is shutting down");
                ReplyFrame { error: Some(error), end: true, ..frame(Outcome::Unavailable) }
            }
        };
        let last = next.end;
        let Some(bytes) = encode_frame(&next) else { return };
        if next.batch.is_some() {
            credit.take(bytes.len() as u64).await;
        }
        if write.lock().await.write_all(&bytes).await.is_err() || last {
            return;
        }
    }
}

/// Writes one frame; false when the client is gone.
async fn send(write: &SharedWrite, frame: &ReplyFrame) -> bool {
    match encode_frame(frame) {
        Some(bytes) => write.lock().await.write_all(&bytes).await.is_ok(),
        None => false,
    }
}

fn encode_frame(frame: &ReplyFrame) -> Option<Vec<u8>> {
    wire::encode(frame).inspect_err(|error| tracing::error!(%error, "cannot encode a frame")).ok()
}

/// The refusal of a call past one of a connection's bounds (`what` it already has).
fn busy(what: String) -> ApiError {
    ApiError::new(ErrorCode::Unavailable, format!("{what}, the most it may: retry once some have ended"))
}

/// Writes `frame` from a task of its own, counted as unsent until written: the reading loop
/// never waits on a write.
fn reply_now(write: &SharedWrite, unsent: &Arc<Unsent>, frame: &ReplyFrame) {
    let Some(bytes) = encode_frame(frame) else { return };
    unsent.bytes.fetch_add(bytes.len(), std::sync::atomic::Ordering::SeqCst);
    let (write, unsent) = (write.clone(), unsent.clone());
    tokio::spawn(async move {
        drop(write.lock().await.write_all(&bytes).await);
        unsent.bytes.fetch_sub(bytes.len(), std::sync::atomic::Ordering::SeqCst);
        unsent.drained.notify_waiters();
    });
}

/// Bytes of replies waiting to be written on one connection.
#[derive(Default)]
struct Unsent {
    bytes: std::sync::atomic::AtomicUsize,
    drained: Notify,
}

impl Unsent {
    async fn wait_below(&self, limit: usize) {
        loop {
            let drained = self.drained.notified();
            if self.bytes.load(std::sync::atomic::Ordering::SeqCst) < limit {
                return;
            }
            drained.await;
        }
    }
}

/// Where a call's reply goes, and what it holds of its connection's bounds until written.
struct Replying {
    write: SharedWrite,
    unsent: Arc<Unsent>,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

/// Runs one call and writes its reply.
async fn answer(local: Local, allowed: Arc<Options>, replying: Replying, call: Call) {
    let id = call.id;
    let reply = serve_call(&local, &allowed, call).await;
    match wire::encode(&ReplyFrame::new(id, reply)) {
        Ok(frame) => {
            let unsent = &replying.unsent;
            unsent.bytes.fetch_add(frame.len(), std::sync::atomic::Ordering::SeqCst);
            // A client that left needs no answer.
            drop(replying.write.lock().await.write_all(&frame).await);
            unsent.bytes.fetch_sub(frame.len(), std::sync::atomic::Ordering::SeqCst);
            unsent.drained.notify_waiters();
        }
        Err(error) => tracing::error!(%error, "cannot encode a reply"),
    }
}

/// The answer to a hello: welcome, or a refusal that says exactly what to do. The protocol
/// and version are read before the rest, so a newer client whose hello does not parse here
/// is told about the versions rather than about a field.
fn greet(said: Option<serde_json::Value>, welcome: &Welcome) -> (Greeting, Option<Hello>) {
    let refuse = |message: String| {
        let refused = Refused {
            protocol: PROTOCOL.into(),
            wire: WIRE_VERSION,
            version: welcome.version.clone(),
            pid: welcome.pid,
            message,
        };
        (Greeting::Refused(refused), None)
    };
    let Some(said) = said else {
        return refuse("expected a state-owner hello as the first line".into());
    };
    let protocol = said.get("protocol").and_then(serde_json::Value::as_str).unwrap_or("");
    if protocol != PROTOCOL {
        return refuse(format!("this is a state owner; `{protocol}` is not its protocol"));
    }
    let client = said.get("client").and_then(serde_json::Value::as_str).unwrap_or("the client").to_owned();
    let wire = said.get("wire").and_then(serde_json::Value::as_u64);
    if wire != Some(u64::from(WIRE_VERSION)) {
        let theirs = wire.map_or_else(|| "no".to_owned(), |w| w.to_string());
        return refuse(format!(
            "this owner speaks wire version {WIRE_VERSION} (state {}), {client} speaks version {theirs}",
            welcome.version
        ));
    }
    let hello: Hello = match serde_json::from_value(said) {
        Ok(hello) => hello,
        Err(error) => {
            return refuse(format!("this owner (state {}) cannot serve {client}: {error}", welcome.version));
        }
    };
    if hello.db != welcome.db {
        return refuse(format!("this owner holds {}, not {}", welcome.db.display(), hello.db.display()));
    }
    (Greeting::Welcome(welcome.clone()), Some(hello))
}

async fn serve_call(local: &Local, allowed: &Options, call: Call) -> Reply {
    let Some(op) = Operation::from_id(&call.op) else {
        return Reply::error(ApiError::new(
            ErrorCode::InvalidArguments,
            format!(
                "the store's owner (state {}) has no operation `{}`; it may be older than this client",
                env!("CARGO_PKG_VERSION"),
                call.op
            ),
        ));
    };
    if !allowed.permits(op) {
        return Reply::error(ApiError::new(
            ErrorCode::NotEnabled,
            format!("`{}` is not among the tools this client enabled (--tools, --compat)", op.name()),
        ));
    }
    match call.by.as_deref() {
        Some(by) => local.on_behalf_of(Some(by)).call_with_id(op, call.args, call.request_id).await,
        None => local.call_with_id(op, call.args, call.request_id).await,
    }
}

/// Everything `<binary> owner` does, for a binary's `main`: prepare the database's directory
/// and the size-capped log beside it (`config.log_file`), hand the log to `start_logging` (the
/// binary installs its subscriber there), then [`run`] on a one-thread runtime, printing the
/// readiness line on stdout if `notify_ready`.
pub fn main(
    config: OwnerConfig,
    notify_ready: bool,
    start_logging: impl FnOnce(crate::CappedLog),
) -> Result<OwnerExit, MainError> {
    let db = config.db.clone();
    let log_path = crate::owner_log_path(&db);
    let prepared = prepare(&db, &log_path);
    let log = match prepared {
        Ok(log) => log,
        Err(error) => {
            // The process that launched this owner waits for a line: it hears why at once,
            // instead of finding nobody listening when its deadline passes.
            if notify_ready {
                let line = Readiness { fatal: true, message: error.to_string(), ..Readiness::default() };
                if let Ok(text) = serde_json::to_string(&line) {
                    println!("{text}");
                }
            }
            return Err(error);
        }
    };
    start_logging(log);
    // One thread for the protocol: a call is microseconds of parsing and encoding, while
    // commits run on the engine's writer thread and scans on the blocking pool. A single
    // thread spares every call a cross-thread wake-up (docs/BENCHMARKS.md).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| MainError::Setup { path: PathBuf::from("(runtime)"), source })?;
    let config = OwnerConfig { log_file: Some(log_path), ..config };
    let mut stdout = std::io::stdout();
    let notify: Option<&mut dyn std::io::Write> = if notify_ready { Some(&mut stdout) } else { None };
    let exit = runtime.block_on(run(config, notify))?;
    tracing::info!(?exit, "owner exited");
    Ok(exit)
}

/// What to do about a setup failure a user can fix.
fn setup_hint(path: &Path, source: &std::io::Error) -> String {
    if source.kind() != std::io::ErrorKind::PermissionDenied {
        return String::new();
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    format!(
        ". This user (uid {}) cannot write in {}: give --db (or STATE_DB) a path in a directory you can write, \
         or have that directory's owner grant write access",
        current_uid(),
        dir.display()
    )
}

/// The database's directory and the owner's log beside it.
fn prepare(db: &Path, log_path: &Path) -> Result<crate::CappedLog, MainError> {
    if let Some(dir) = db.parent().filter(|d| !d.as_os_str().is_empty()) {
        state_store::files::create_private_dir_all(dir)
            .map_err(|source| MainError::Setup { path: dir.to_owned(), source })?;
    }
    crate::CappedLog::open(log_path, crate::DEFAULT_LOG_CAP)
        .map_err(|source| MainError::Setup { path: log_path.to_owned(), source })
}

/// Why `<binary> owner` could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MainError {
    #[error("cannot prepare {}: {source}{}", path.display(), setup_hint(path, source))]
    Setup { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Owner(#[from] OwnerError),
}

/// What `<binary> owner` does: start, tell `notify` how that went (one JSON line, for the
/// client that launched this owner), then serve until idle or until SIGTERM or SIGINT.
/// SIGHUP is ignored: an owner outlives the terminal of the client that started it.
pub async fn run(config: OwnerConfig, notify: Option<&mut dyn std::io::Write>) -> Result<OwnerExit, OwnerError> {
    let started = Owner::start(config).await;
    let launched = notify.is_some();
    if let Some(out) = notify {
        let line = readiness(started.as_ref().map(|_| ()));
        // The launcher may already be gone; serving matters more than telling it.
        if let Ok(text) = serde_json::to_string(&line) {
            let _ = writeln!(out, "{text}").and_then(|()| out.flush());
        }
    }
    let owner = started?;
    if !launched {
        // Started by hand: say where it serves, whether or not its log reaches this terminal.
        let idle = if owner.idle == Duration::MAX { "never".to_owned() } else { format!("{:?}", owner.idle) };
        eprintln!(
            "owner of {} serving at {} (pid {}); log: {}; exits after {idle} without clients, or on SIGTERM",
            owner.rendezvous.db.display(),
            owner.rendezvous.socket.display(),
            std::process::id(),
            owner.welcome.log_file.as_ref().map_or_else(|| "stderr".to_owned(), |f| f.display().to_string()),
        );
    }
    Ok(owner.serve(stop_signal()).await)
}

/// Completes on SIGTERM or SIGINT; SIGHUP is ignored meanwhile.
pub async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut terminate), Ok(mut interrupt)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        tracing::warn!("cannot listen for signals; the owner stops only when idle");
        return std::future::pending().await;
    };
    // Registering a handler replaces SIGHUP's default action (exit); it is never acted on.
    let _hangup = signal(SignalKind::hangup());
    tokio::select! {
        _ = terminate.recv() => tracing::info!("SIGTERM: stopping"),
        _ = interrupt.recv() => tracing::info!("SIGINT: stopping"),
    }
}

#[cfg(test)]
mod tests;
