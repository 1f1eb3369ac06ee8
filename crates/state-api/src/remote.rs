//! A client of a database's owner: the seam's second implementation.
//!
//! [`join`] connects to the owner, or starts one (a detached process running the same binary
//! in owner mode) when none answers, then says hello with this client's tool choices. If the
//! owner dies, the next call (or the reader noticing the connection end) rejoins: some joiner
//! starts a new owner, the database's file lock picks exactly one, and everyone reconnects.
//! Calls in flight are resent; a mutating call carries an idempotency key, so a write the old
//! owner committed is answered from its record instead of applying twice.

use state_store::backoff::Backoff;
use std::collections::HashMap;
use std::ffi::OsString;
use std::future::Future;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::catalog::Operation;
use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::oneshot;
use tokio::time::Instant;

use self::launch::{Launched, launch};
use crate::options::Options;
use crate::paths::{PathError, RUNTIME_DIR_ENV, Rendezvous, current_uid};
use crate::reply::{ApiError, ErrorCode, Reply};
use crate::settle::{self, Attempt, RequestIds, Transport, Unreached};
use crate::wire::{self, Call, Greeting, Hello, PROTOCOL, ReplyFrame, Settings, WIRE_VERSION, Welcome};

/// How long an owner may leave a joiner without any answer (to a hello, or to calls and then
/// a ping) before the joiner ends it as hung and starts another.
pub const DEFAULT_HANG_TIMEOUT: Duration = Duration::from_secs(10);

/// How a joiner starts an owner when none answers: a program and its arguments (the same
/// binary, in owner mode, with this client's engine settings).
#[derive(Debug, Clone)]
pub struct OwnerLauncher {
    pub program: PathBuf,
    pub args: Vec<OsString>,
}

#[derive(Debug, Clone)]
pub struct JoinConfig {
    pub db: PathBuf,
    pub runtime_dir: Option<PathBuf>,
    /// The tools this client is served.
    pub options: Options,
    /// Engine settings this client asked for; the owner's apply.
    pub settings: Settings,
    /// Who is joining, e.g. `state-mcp 0.1.0`.
    pub client: String,
    pub launcher: OwnerLauncher,
    /// How long to keep trying to reach (or start) an owner before giving up on a call.
    pub settle_timeout: Duration,
    /// How long an owner may stay silent, with calls outstanding and a ping unanswered,
    /// before it is ended as hung and replaced ([`DEFAULT_HANG_TIMEOUT`]).
    pub hang_timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JoinError {
    #[error(transparent)]
    Paths(#[from] PathError),
    #[error(
        "something other than a state owner is listening at {} ({detail}); stop it, or set {RUNTIME_DIR_ENV} to another directory",
        socket.display()
    )]
    NotAnOwner { socket: PathBuf, detail: String },
    #[error(
        "the owner of {} (pid {pid}, state {owner_version}) speaks owner wire version {owner_wire}, but this {client} speaks version {ours}: \
         stop the old owner with `kill {pid}` (it finishes queued writes and closes the database cleanly), then start again",
        db.display(), ours = WIRE_VERSION
    )]
    VersionSkew { db: PathBuf, pid: u32, owner_version: String, owner_wire: u32, client: String },
    #[error("the owner of {} (pid {pid}) refused this client: {message}", db.display())]
    Refused { db: PathBuf, pid: u32, message: String },
    #[error(
        "database {} is held by {holder}, which does not share it; stop that process (or run it without --standalone) so that clients can share the database",
        db.display()
    )]
    HeldAlone { db: PathBuf, holder: String },
    #[error("the owner started for {} could not serve it: {message}", db.display())]
    OwnerFailed { db: PathBuf, message: String },
    #[error("cannot start an owner for {} with {}: {source}", db.display(), program.display())]
    Launch { db: PathBuf, program: PathBuf, source: std::io::Error },
    #[error("no owner of {} could be reached or started within {waited:?}: {detail}", db.display())]
    Unreachable { db: PathBuf, waited: Duration, detail: String },
}

impl JoinError {
    /// Whether trying again later might help (as opposed to a setup the user must fix).
    fn is_transient(&self) -> bool {
        matches!(self, JoinError::Unreachable { .. })
    }
}

/// A joined owner, as the first connection found it.
#[derive(Debug, Clone)]
pub struct Joined {
    pub welcome: Welcome,
    /// This process started the owner (no owner was answering).
    pub started_owner: bool,
}

impl Joined {
    /// Logs one line saying whose store this is, and a warning for each engine setting the
    /// process asked for that the owner does not use.
    pub fn report(&self, db: &Path, asked: Settings) {
        let owner = &self.welcome;
        let log = owner.log_file.as_ref().map_or_else(|| "none".to_owned(), |p| p.display().to_string());
        let verb = if self.started_owner { "started the owner of" } else { "joined the owner of" };
        tracing::info!("{verb} {} (pid {}, state {}); owner log: {log}", db.display(), owner.pid, owner.version);
        let theirs = owner.settings;
        let differs = |flag: &str, asked: Option<String>, theirs: Option<String>| {
            if let Some(asked) = asked.filter(|a| Some(a) != theirs.as_ref()) {
                tracing::warn!(
                    "{flag} {asked} is not in effect: the owner (pid {}) uses {}; engine-wide settings are the owner's (stop it to change them)",
                    owner.pid,
                    theirs.unwrap_or_else(|| "its default".into())
                );
            }
        };
        let text = |n: Option<u64>| n.map(|n| n.to_string());
        let size = |n: Option<usize>| n.map(|n| n.to_string());
        differs("--max-value-bytes", size(asked.max_value_bytes), size(theirs.max_value_bytes));
        differs("--history-retention", text(asked.history_retention), text(theirs.history_retention));
        differs("--watch-buffer-bytes", size(asked.watch_buffer_bytes), size(theirs.watch_buffer_bytes));
    }
}

/// How long a lost owner is left before it is replaced with no call waiting (see
/// `read_replies`): longer than a signal takes to arrive, short beside any client's timeout.
const EAGER_REJOIN_PAUSE: Duration = Duration::from_millis(250);

/// The client half of the seam.
#[derive(Clone)]
pub(crate) struct Remote {
    inner: Arc<Inner>,
}

struct Inner {
    config: JoinConfig,
    rendezvous: Rendezvous,
    /// The live connection, if any. Held across a (re)join so concurrent callers wait for
    /// one join instead of starting one each.
    current: tokio::sync::Mutex<Option<Arc<Connection>>>,
    next_call: AtomicU64,
    request_ids: RequestIds,
    closing: AtomicBool,
    /// Set when this process is stopping: see [`Remote::stop_starting_owners`].
    no_new_owners: AtomicBool,
}

struct Connection {
    writer: tokio::sync::Mutex<OwnedWriteHalf>,
    pending: Mutex<Pending>,
    welcome: Welcome,
    /// The owner's process as the kernel gave it when connecting (not as it says itself).
    peer_pid: Option<u32>,
    /// The socket, for asking whether the owner hung up without taking the writer's lock
    /// (which a write to a stopped owner may hold).
    probe: std::os::fd::OwnedFd,
    opened: Instant,
    /// When a frame last arrived, in milliseconds since `opened`.
    last_heard: AtomicU64,
    /// Places for calls awaiting the owner's answer: never more than the owner runs for one
    /// connection, so a busy process waits here for a place rather than hear "busy".
    calls: Arc<tokio::sync::Semaphore>,
}

#[derive(Default)]
struct Pending {
    closed: bool,
    waiting: HashMap<u64, oneshot::Sender<ReplyFrame>>,
    /// Open watches: their frames after the first go here.
    streams: HashMap<u64, watch::Stream>,
}

/// Why a call did not get its reply on a connection.
struct Lost {
    /// The call may have reached the owner.
    sent: bool,
}

/// Connects to the owner of `config.db`, starting one if none answers.
pub(crate) async fn join(config: JoinConfig) -> Result<(Remote, Joined), JoinError> {
    let rendezvous = Rendezvous::for_database(&config.db, config.runtime_dir.as_deref())?;
    let remote = Remote {
        inner: Arc::new(Inner {
            config,
            rendezvous,
            current: tokio::sync::Mutex::new(None),
            next_call: AtomicU64::new(1),
            request_ids: RequestIds::new(),
            closing: AtomicBool::new(false),
            no_new_owners: AtomicBool::new(false),
        }),
    };
    let deadline = Instant::now() + remote.inner.config.settle_timeout;
    let mut current = remote.inner.current.lock().await;
    let (connection, started_owner) = establish(&remote.inner, deadline).await?;
    let joined = Joined { welcome: connection.welcome.clone(), started_owner };
    *current = Some(connection);
    drop(current);
    Ok((remote, joined))
}

impl Remote {
    /// Calls `op`; a mutating call carries an idempotency key: the one in its arguments, else
    /// `request_id`, else a fresh one of this process's.
    pub(crate) async fn call_with_id(
        &self,
        op: Operation,
        args: Value,
        request_id: Option<String>,
        by: Option<&str>,
    ) -> Reply {
        settle::settle(self, op, args, request_id, by).await
    }

    /// Asks the owner for a backup written to `path` (see [`Call::backup`]).
    pub(crate) async fn backup(&self, path: std::path::PathBuf) -> Result<Value, ApiError> {
        let inner = &self.inner;
        let id = inner.next_call.fetch_add(1, Ordering::Relaxed);
        let frame = wire::encode(&Call { id, backup: Some(path), ..Call::default() })
            .map_err(|e| ApiError::new(ErrorCode::Internal, format!("cannot encode a call: {e}")))?;
        let deadline = Instant::now() + inner.config.settle_timeout;
        let connection = connection(inner, deadline).await.map_err(|error| {
            ApiError::new(ErrorCode::Unavailable, format!("cannot reach the store's owner: {error}"))
        })?;
        // A backup reads the whole store: it takes as long as it takes, and is not resent (a
        // lost answer leaves at most a `.partial` file, which the next attempt replaces).
        match connection.send(id, &frame).await {
            Ok(reply) => reply.into_reply().body,
            Err(_) => Err(ApiError::new(
                ErrorCode::Unavailable,
                "the connection to the store's owner broke during the backup; try again",
            )),
        }
    }

    /// From now on a lost owner is rejoined only if another answers; none is started. For a
    /// process that is stopping: starting an owner then would leave one with no client.
    pub(crate) fn stop_starting_owners(&self) {
        self.inner.no_new_owners.store(true, Ordering::SeqCst);
    }

    /// Stops using the owner: closes the connection so the owner counts one client fewer.
    pub(crate) async fn close(&self) {
        self.inner.closing.store(true, Ordering::SeqCst);
        if let Some(connection) = self.inner.current.lock().await.take() {
            let _ = connection.writer.lock().await.shutdown().await;
        }
    }
}

/// The live connection, joining again (and starting an owner if need be) when there is none.
/// Boxed: rejoining spawns a reader that may rejoin in turn.
fn connection(
    inner: &Arc<Inner>,
    deadline: Instant,
) -> Pin<Box<dyn Future<Output = Result<Arc<Connection>, JoinError>> + Send + '_>> {
    Box::pin(async move {
        let mut current = inner.current.lock().await;
        if let Some(connection) = current.as_ref().filter(|c| !c.is_closed()) {
            return Ok(connection.clone());
        }
        let (connection, started) = establish(inner, deadline).await?;
        tracing::info!(
            owner_pid = connection.welcome.pid,
            started_owner = started,
            "rejoined the owner of {}",
            inner.rendezvous.db.display()
        );
        *current = Some(connection.clone());
        Ok(connection)
    })
}

/// Drops `dead` as the current connection (unless a newer one already replaced it).
async fn forget(inner: &Inner, dead: &Arc<Connection>) {
    let mut current = inner.current.lock().await;
    if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, dead)) {
        *current = None;
    }
}

/// Why a call could not be brought to an owner before its deadline.
fn unreached(error: &JoinError) -> Unreached {
    Unreached {
        transient: error.is_transient(),
        reason: error.to_string(),
        lost: "it reached the store's owner, which stopped before answering",
    }
}

/// A call to the owner: its id on the connection (kept across resends) and its frame.
pub(crate) struct Encoded {
    id: u64,
    frame: Vec<u8>,
}

impl Transport for Remote {
    type Encoded = Encoded;
    /// Rejoining waits for an owner by itself (starting one if need be), until the deadline.
    const FIRST_PAUSE: Duration = Duration::ZERO;

    fn request_ids(&self) -> &RequestIds {
        &self.inner.request_ids
    }

    fn settle_timeout(&self) -> Duration {
        self.inner.config.settle_timeout
    }

    fn encode(
        &self,
        op: Operation,
        args: &Value,
        request_id: Option<&str>,
        by: Option<&str>,
    ) -> Result<Encoded, ApiError> {
        let id = self.inner.next_call.fetch_add(1, Ordering::Relaxed);
        let call = Call {
            id,
            op: op.id(),
            args: args.clone(),
            request_id: request_id.map(str::to_owned),
            by: by.map(str::to_owned),
            ..Call::default()
        };
        let frame = wire::encode(&call)
            .map_err(|e| ApiError::new(ErrorCode::Internal, format!("cannot encode a call: {e}")))?;
        Ok(Encoded { id, frame })
    }

    async fn attempt(&self, op: Operation, call: &Encoded, deadline: Instant, answer_within: Duration) -> Attempt {
        let inner = &self.inner;
        let connection = match connection(inner, deadline).await {
            Ok(connection) => connection,
            Err(error) => return Attempt::Unreached { sent: false, why: unreached(&error) },
        };
        // Waiting for a place is this process's queue, not the owner's silence.
        let place = match tokio::time::timeout_at(deadline, connection.calls.clone().acquire_owned()).await {
            Ok(Ok(place)) => place,
            Ok(Err(_)) | Err(_) => {
                let why = Unreached {
                    transient: true,
                    reason: format!(
                        "this process had {} calls waiting on the store's owner until the deadline",
                        wire::MAX_CALLS_IN_FLIGHT
                    ),
                    lost: "it was never sent",
                };
                return Attempt::Unreached { sent: false, why };
            }
        };
        let answered = tokio::time::timeout(answer_within, connection.send(call.id, &call.frame)).await;
        drop(place);
        match answered {
            Ok(Ok(reply)) => Attempt::Answered(reply.into_reply()),
            Ok(Err(lost)) => {
                forget(inner, &connection).await;
                Attempt::Lost { sent: lost.sent, reason: "the connection to the owner was lost during the call".into() }
            }
            Err(_) => {
                connection.abandon(call.id);
                let pid = connection.welcome.pid;
                tracing::warn!(
                    op = op.name(),
                    owner_pid = pid,
                    "the owner has not answered a call for {answer_within:?}"
                );
                let why = Unreached {
                    transient: true,
                    reason: format!(
                        "the store's owner (pid {pid}) has not answered for {answer_within:?} and could not be replaced \
                         (its log and this process's say why): it is stuck or overloaded (`kill -9 {pid}` lets the next \
                         call start a new one)"
                    ),
                    lost: "it was sent to the store's owner, which has not answered",
                };
                Attempt::Unreached { sent: true, why }
            }
        }
    }

    fn gave_up(&self, reason: String) -> Unreached {
        Unreached {
            transient: true,
            reason: format!("no owner answered within {:?} ({reason})", self.inner.config.settle_timeout),
            lost: "it reached the store's owner, which stopped before answering",
        }
    }
}

impl Connection {
    fn is_closed(&self) -> bool {
        self.pending.lock().map_or(true, |p| p.closed)
    }

    fn heard(&self) {
        let since = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_heard.store(since, Ordering::Relaxed);
    }

    fn silent_for(&self) -> Duration {
        self.opened.elapsed().saturating_sub(Duration::from_millis(self.last_heard.load(Ordering::Relaxed)))
    }

    fn awaits_answers(&self) -> bool {
        self.pending.lock().is_ok_and(|p| !p.waiting.is_empty())
    }

    async fn send(&self, id: u64, frame: &[u8]) -> Result<ReplyFrame, Lost> {
        let (tx, rx) = oneshot::channel();
        {
            let Ok(mut pending) = self.pending.lock() else { return Err(Lost { sent: false }) };
            if pending.closed {
                return Err(Lost { sent: false });
            }
            pending.waiting.insert(id, tx);
        }
        if self.write(frame).await.is_err() {
            // Part of the frame may have gone out: only its absence from the log could say.
            self.close();
            return Err(Lost { sent: true });
        }
        rx.await.map_err(|_| Lost { sent: true })
    }

    /// Stops waiting for the reply to call `id`; a late reply is dropped.
    fn abandon(&self, id: u64) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.waiting.remove(&id);
        }
    }

    /// Marks the connection dead and wakes every waiting call and watch (their senders drop).
    fn close(&self) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.closed = true;
            pending.waiting.clear();
            pending.streams.clear();
        }
    }

    /// Writes one frame whole; an error means the connection is unusable.
    async fn write(&self, frame: &[u8]) -> std::io::Result<()> {
        self.writer.lock().await.write_all(frame).await
    }
}

/// Reads replies until the connection ends, then closes it and, unless this client is
/// closing, rejoins at once so the owner is replaced even when no call is waiting.
async fn read_replies(
    connection: Weak<Connection>,
    mut reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    inner: Weak<Inner>,
) {
    let mut line = Vec::new();
    while let Ok(true) = wire::read_line(&mut reader, &mut line, wire::MAX_FRAME_BYTES).await {
        let Some(connection) = connection.upgrade() else { return };
        connection.heard();
        let Ok(frame) = serde_json::from_slice::<ReplyFrame>(&line) else {
            tracing::warn!("the owner sent a malformed reply; reconnecting");
            break;
        };
        let Ok(mut pending) = connection.pending.lock() else { break };
        if let Some(waiter) = pending.waiting.remove(&frame.id) {
            drop(pending);
            let _ = waiter.send(frame);
        } else if let Some(unwanted) = watch::deliver(&mut pending, frame, line.len()) {
            drop(pending);
            tokio::spawn(watch::stop(connection, unwanted));
        }
    }
    let Some(connection) = connection.upgrade() else { return };
    connection.close();
    let Some(inner) = inner.upgrade() else { return };
    if inner.closing.load(Ordering::SeqCst) {
        return;
    }
    tracing::warn!(owner_pid = connection.welcome.pid, "the owner went away; rejoining");
    forget(&inner, &connection).await;
    // An owner that went away is most often stopping with everything around it: a service
    // manager signals every unit at once, and ours may arrive a moment after the owner's EOF.
    // Give it that moment before starting an owner nobody would use; a call arriving meanwhile
    // rejoins by itself.
    tokio::time::sleep(EAGER_REJOIN_PAUSE).await;
    if inner.closing.load(Ordering::SeqCst) || inner.no_new_owners.load(Ordering::SeqCst) {
        return;
    }
    let deadline = Instant::now() + inner.config.settle_timeout;
    if let Err(error) = self::connection(&inner, deadline).await {
        // The next call tries again and reports it.
        tracing::warn!(%error, "could not rejoin an owner yet");
    }
}

/// Watches a connection for an owner that stopped answering: when calls are outstanding and
/// nothing has arrived for half the hang timeout, pings it; when the ping goes unanswered for
/// the other half too, ends the owner and lets the calls rejoin a new one.
async fn watch_liveness(connection: Weak<Connection>, inner: Weak<Inner>, hang: Duration) {
    let half = hang / 2;
    loop {
        tokio::time::sleep((hang / 4).max(Duration::from_millis(10))).await;
        let Some(live) = connection.upgrade() else { return };
        if live.is_closed() {
            return;
        }
        if !live.awaits_answers() || live.silent_for() < half {
            continue;
        }
        let Some(id) = inner.upgrade().map(|inner| inner.next_call.fetch_add(1, Ordering::Relaxed)) else { return };
        let Ok(frame) = wire::encode(&Call { id, ping: true, ..Call::default() }) else { return };
        match tokio::time::timeout(half, live.send(id, &frame)).await {
            Ok(Ok(_)) => continue,
            // The connection ended: the reader rejoins.
            Ok(Err(_)) => return,
            Err(_) => live.abandon(id),
        }
        let Some(inner) = inner.upgrade() else { return };
        replace_hung_owner(&inner, &live).await;
        return;
    }
}

/// Ends the owner behind `connection`, which answers nothing, and drops the connection so its
/// calls rejoin (starting a new owner) and are resent under their idempotency keys.
async fn replace_hung_owner(inner: &Arc<Inner>, connection: &Arc<Connection>) {
    let silent = connection.silent_for();
    match connection.peer_pid {
        Some(pid) => {
            tracing::warn!(
                owner_pid = pid,
                "the store's owner has answered nothing for {silent:?}, not even a ping: ending it and taking over"
            );
            report_ending(pid, takeover::end_hung_owner(&inner.rendezvous.db, pid, connection.probe.as_fd()).await);
        }
        None => tracing::warn!("the store's owner has answered nothing for {silent:?}, and its process is unknown"),
    }
    connection.close();
    forget(inner, connection).await;
}

fn report_ending(pid: u32, ended: Result<takeover::Ended, String>) {
    match ended {
        Ok(takeover::Ended::Stopped) => tracing::warn!(owner_pid = pid, "the hung owner stopped on SIGTERM"),
        Ok(takeover::Ended::Killed) => tracing::warn!(owner_pid = pid, "the hung owner was killed (SIGKILL)"),
        Ok(takeover::Ended::AlreadyGone) => tracing::info!(owner_pid = pid, "the owner had already gone"),
        Err(why) => tracing::error!(owner_pid = pid, "could not end the hung owner: {why}"),
    }
}

/// Connects to the owner, starting one whenever none answers, until `deadline`.
async fn establish(inner: &Arc<Inner>, deadline: Instant) -> Result<(Arc<Connection>, bool), JoinError> {
    let config = &inner.config;
    let db = inner.rendezvous.db.clone();
    let mut backoff = Backoff::new(Duration::from_millis(1), Duration::from_millis(100));
    let mut started_owner = false;
    // What stood in the way last time, reported if the deadline passes.
    let mut problem;
    loop {
        match connect(inner).await {
            Ok(connection) => return Ok((connection, started_owner)),
            Err(Contact::Fatal(error)) => return Err(error),
            Err(Contact::Absent(absent)) => problem = absent,
        }
        if Instant::now() < deadline && !inner.no_new_owners.load(Ordering::SeqCst) {
            // Nobody answers: start an owner. The database's file lock lets exactly one of the
            // processes doing this at the same moment become it; the others join it.
            match launch(inner, deadline).await? {
                Launched::Ready => {
                    started_owner = true;
                    continue;
                }
                Launched::HeldBy { role, holder } => {
                    if role.as_deref() == Some("standalone") {
                        return Err(JoinError::HeldAlone { db, holder });
                    }
                    problem = format!("the database is held by {holder}, which is not answering");
                }
                Launched::Failed(failed) => problem = failed,
                Launched::Fatal(message) => return Err(JoinError::OwnerFailed { db, message }),
            }
        }
        if Instant::now() >= deadline {
            return Err(JoinError::Unreachable { db, waited: config.settle_timeout, detail: problem });
        }
        // Another process holds the database and is about to listen (or is opening a large
        // database after a crash): try again shortly.
        backoff.pause_until(deadline).await;
    }
}

enum Contact {
    /// Nobody is listening, or the listener is going away: start or wait for an owner.
    Absent(String),
    /// A setup the user has to fix: retrying will not help.
    Fatal(JoinError),
}

async fn connect(inner: &Arc<Inner>) -> Result<Arc<Connection>, Contact> {
    let socket = &inner.rendezvous.socket;
    let not_an_owner = |detail: String| Contact::Fatal(JoinError::NotAnOwner { socket: socket.clone(), detail });
    let stream = match UnixStream::connect(socket).await {
        Ok(stream) => stream,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Err(not_an_owner(format!("connecting was refused: {e}")));
        }
        Err(e) => return Err(Contact::Absent(format!("nothing is listening at {} ({e})", socket.display()))),
    };
    let peer_pid = match stream.peer_cred() {
        Ok(cred) if cred.uid() == current_uid() => cred.pid().and_then(|pid| u32::try_from(pid).ok()),
        Ok(cred) => return Err(not_an_owner(format!("the listener runs as uid {}, not as this user", cred.uid()))),
        Err(e) => return Err(not_an_owner(format!("cannot read the listener's credentials: {e}"))),
    };
    let probe = stream
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| Contact::Absent(format!("cannot keep a handle on the connection: {e}")))?;
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let config = &inner.config;
    let hello = Hello {
        protocol: PROTOCOL.into(),
        wire: WIRE_VERSION,
        client: config.client.clone(),
        pid: std::process::id(),
        db: inner.rendezvous.db.clone(),
        options: config.options.clone(),
        settings: config.settings,
    };
    let frame = wire::encode(&hello).map_err(|e| not_an_owner(format!("cannot encode the hello: {e}")))?;
    // A listener that answers at once and hangs up (another program, an owner of another
    // version refusing) can close the socket before the hello is all written: what it said
    // is still there to read, and decides, not the failed write.
    let unsent = write.write_all(&frame).await.err();
    let mut line = Vec::new();
    let hang = config.hang_timeout;
    let read = tokio::time::timeout(hang, wire::read_line(&mut reader, &mut line, wire::MAX_HANDSHAKE_BYTES)).await;
    if let Some(e) = unsent
        && !matches!(read, Ok(Ok(true)))
    {
        return Err(Contact::Absent(format!("the owner closed the connection during the handshake ({e})")));
    }
    match read {
        // A listener of this user's, at this database's socket, that accepts and says nothing:
        // a hung owner. End it (if it is the database's holder) and start another.
        Err(_) => {
            let Some(pid) = peer_pid else {
                return Err(not_an_owner(format!("no answer to the hello within {hang:?}")));
            };
            tracing::warn!(
                owner_pid = pid,
                "the store's owner has not answered a hello for {hang:?}: ending it and taking over"
            );
            let ended = takeover::end_hung_owner(&inner.rendezvous.db, pid, probe.as_fd()).await;
            let gone = ended.is_ok();
            report_ending(pid, ended);
            return match gone {
                true => Err(Contact::Absent(format!("ended the hung owner (pid {pid})"))),
                false => Err(not_an_owner(format!("no answer to the hello within {hang:?}"))),
            };
        }
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::InvalidData => {
            return Err(not_an_owner("it answered with an overlong line".into()));
        }
        Ok(Err(e)) => return Err(Contact::Absent(format!("the handshake failed ({e}); the owner may be stopping"))),
        Ok(Ok(false)) => return Err(Contact::Absent("the owner closed the connection during the handshake".into())),
        Ok(Ok(true)) => {}
    }
    let greeting = match serde_json::from_slice::<Greeting>(&line) {
        Ok(greeting) => greeting,
        Err(_) => {
            let said = String::from_utf8_lossy(&line);
            let said: String = said.trim_end().chars().take(80).collect();
            return Err(not_an_owner(format!("it answered {said:?}")));
        }
    };
    let db = inner.rendezvous.db.clone();
    let welcome = match greeting {
        Greeting::Welcome(welcome) if welcome.protocol == PROTOCOL && welcome.wire == WIRE_VERSION => welcome,
        Greeting::Welcome(Welcome { protocol, .. }) | Greeting::Refused(wire::Refused { protocol, .. })
            if protocol != PROTOCOL =>
        {
            return Err(not_an_owner(format!("it speaks `{protocol}`")));
        }
        Greeting::Welcome(Welcome { pid, version, wire, .. })
        | Greeting::Refused(wire::Refused { pid, version, wire, .. })
            if wire != WIRE_VERSION =>
        {
            return Err(Contact::Fatal(JoinError::VersionSkew {
                db,
                pid,
                owner_version: version,
                owner_wire: wire,
                client: config.client.clone(),
            }));
        }
        Greeting::Refused(refused) => {
            return Err(Contact::Fatal(JoinError::Refused { db, pid: refused.pid, message: refused.message }));
        }
        Greeting::Welcome(welcome) => welcome,
    };
    let connection = Arc::new(Connection {
        writer: tokio::sync::Mutex::new(write),
        pending: Mutex::new(Pending::default()),
        welcome,
        peer_pid,
        probe,
        opened: Instant::now(),
        last_heard: AtomicU64::new(0),
        calls: Arc::new(tokio::sync::Semaphore::new(wire::MAX_CALLS_IN_FLIGHT)),
    });
    tokio::spawn(read_replies(Arc::downgrade(&connection), reader, Arc::downgrade(inner)));
    tokio::spawn(watch_liveness(Arc::downgrade(&connection), Arc::downgrade(inner), hang));
    Ok(connection)
}

mod launch;
mod takeover;
#[cfg(test)]
mod tests;
mod watch;
