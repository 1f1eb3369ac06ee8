use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use state_api::catalog::{Operation, ToolGroup};
use state_api::owner::{Owner, OwnerConfig, OwnerExit};
use state_api::{Api, ErrorCode, JoinConfig, Options, Outcome, OwnerLauncher, Rendezvous, Settings};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub(crate) struct Place {
    db: PathBuf,
    runtime: PathBuf,
    _dir: tempfile::TempDir,
}

impl Place {
    pub(crate) fn new() -> Place {
        let dir = tempfile::tempdir().unwrap();
        Place { db: dir.path().join("s.redb"), runtime: dir.path().join("run"), _dir: dir }
    }

    pub(crate) fn config(&self, idle: Duration) -> OwnerConfig {
        OwnerConfig {
            db: self.db.clone(),
            runtime_dir: Some(self.runtime.clone()),
            idle,
            settings: Settings::default(),
            log_file: None,
            clock: std::sync::Arc::new(state_api::SystemClock),
        }
    }

    fn socket(&self) -> PathBuf {
        Rendezvous::for_database(&self.db, Some(&self.runtime)).unwrap().socket
    }

    /// An owner serving in a task until `stop` is sent (or it is idle for an hour).
    pub(crate) async fn serve(&self) -> (oneshot::Sender<()>, JoinHandle<OwnerExit>) {
        let owner = Owner::start(self.config(Duration::from_secs(3600))).await.unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        (stop, tokio::spawn(owner.serve(async move { drop(stopped.await) })))
    }

    /// A client whose "owner launcher" starts nothing: these tests start owners themselves.
    pub(crate) async fn join(&self, options: Options, settle: Duration) -> Api {
        self.join_with(options, settle, Settings::default()).await
    }

    /// [`Place::join`], asking for `settings`.
    pub(crate) async fn join_with(&self, options: Options, settle: Duration, settings: Settings) -> Api {
        let config = JoinConfig {
            db: self.db.clone(),
            runtime_dir: Some(self.runtime.clone()),
            options,
            settings,
            client: "owner-test".into(),
            launcher: OwnerLauncher { program: "/bin/true".into(), args: vec![] },
            settle_timeout: settle,
            hang_timeout: state_api::DEFAULT_HANG_TIMEOUT,
        };
        Api::join(config).await.unwrap().0
    }
}

pub(crate) async fn call(api: &Api, op: Operation, args: Value) -> Value {
    let reply = api.call(op, args).await;
    reply.body.unwrap_or_else(|e| panic!("{op:?}: {e}"))
}

/// Sends one raw line to the socket and returns the first line of the answer.
async fn exchange(socket: &std::path::Path, line: &str) -> String {
    let stream = UnixStream::connect(socket).await.unwrap();
    let (read, mut write) = stream.into_split();
    write.write_all(format!("{line}\n").as_bytes()).await.unwrap();
    let mut answer = String::new();
    BufReader::new(read).read_line(&mut answer).await.unwrap();
    answer
}

#[tokio::test]
async fn each_connection_is_served_its_own_tool_choices() {
    let place = Place::new();
    let (stop, serving) = place.serve().await;
    let kv_only = place.join(Options::new([], [ToolGroup::Kv, ToolGroup::Admin]), Duration::from_secs(5)).await;
    let everything = place.join(Options::default(), Duration::from_secs(5)).await;

    call(&kv_only, Operation::StateSet, json!({"key": "k", "value": 1})).await;
    let lease = json!({"resource_id": "r", "holder_id": "a", "ttl_seconds": 5});
    let refused = kv_only.call(Operation::LeaseAcquire, lease.clone()).await;
    assert_eq!(refused.outcome, Outcome::Invalid);
    assert_eq!(refused.body.unwrap_err().code, ErrorCode::NotEnabled);
    assert_eq!(call(&everything, Operation::LeaseAcquire, lease).await["status"], "acquired");

    let health = call(&everything, Operation::StateHealth, json!({})).await;
    assert_eq!((health["owner"]["mode"].clone(), health["owner"]["clients"].clone()), (json!("owner"), json!(2)));
    assert_eq!(health["owner"]["pid"], std::process::id());
    kv_only.close().await;
    everything.close().await;
    stop.send(()).unwrap();
    assert_eq!(serving.await.unwrap(), OwnerExit::Shutdown);
}

#[tokio::test]
async fn a_hello_of_another_wire_version_or_database_is_refused() {
    let place = Place::new();
    let (stop, serving) = place.serve().await;
    let socket = place.socket();
    let db = Rendezvous::for_database(&place.db, Some(&place.runtime)).unwrap().db;
    let hello = |wire: u32, db: &std::path::Path| {
        json!({
            "protocol": "state-owner", "wire": wire, "client": "state-mcp 9.0.0", "pid": 1,
            "db": db, "options": {"profiles": ["native"], "groups": ["kv"]}, "settings": {}
        })
        .to_string()
    };
    let answer: Value = serde_json::from_str(&exchange(&socket, &hello(99, &db)).await).unwrap();
    assert_eq!(answer["type"], "refused");
    let message = answer["message"].as_str().unwrap();
    let ours = format!("wire version {}", state_api::WIRE_VERSION);
    assert!(message.contains(&ours) && message.contains("version 99"), "{message}");

    let answer: Value =
        serde_json::from_str(&exchange(&socket, &hello(state_api::WIRE_VERSION, "/elsewhere/x.redb".as_ref())).await)
            .unwrap();
    assert!(answer["message"].as_str().unwrap().contains("/elsewhere/x.redb"), "{answer}");

    let newer = json!({
        "protocol": "state-owner", "wire": state_api::WIRE_VERSION, "client": "state-mcp 9.0.0", "pid": 1, "db": db,
        "options": {"profiles": ["native", "future"], "groups": []}, "settings": {}
    });
    let answer: Value = serde_json::from_str(&exchange(&socket, &newer.to_string()).await).unwrap();
    let message = answer["message"].as_str().unwrap();
    assert!(
        message.contains("cannot serve state-mcp 9.0.0") && message.contains("unknown tool profile `future`"),
        "{message}"
    );

    let answer: Value = serde_json::from_str(&exchange(&socket, "GET / HTTP/1.1").await).unwrap();
    assert_eq!(answer["type"], "refused", "garbage gets a refusal, not a crash");
    assert_eq!(answer["protocol"], "state-owner");
    stop.send(()).unwrap();
    serving.await.unwrap();
}

#[tokio::test]
async fn a_stale_socket_is_replaced_but_a_live_one_is_refused() {
    let place = Place::new();
    let socket = place.socket();
    // A socket file whose listener is gone, as an owner killed with SIGKILL leaves it.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let owner = Owner::start(place.config(Duration::from_millis(10))).await.expect("the stale socket is replaced");
    assert_eq!(owner.serve(std::future::pending()).await, OwnerExit::Idle);
    assert!(!socket.exists(), "an owner removes its socket on the way out");

    let _live = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let error = Owner::start(place.config(Duration::from_secs(1))).await.err().unwrap().to_string();
    assert!(error.contains("something that is not this database's owner is listening"), "{error}");
    drop(_live);
    std::fs::remove_file(&socket).unwrap();

    std::fs::write(&socket, "not a socket").unwrap();
    let error = Owner::start(place.config(Duration::from_secs(1))).await.err().unwrap().to_string();
    assert!(error.contains("is not a socket") && error.contains(&*socket.to_string_lossy()), "{error}");
    // None of the refusals kept the database: it opens.
    state_api::Local::open_standalone(&place.db, Settings::default()).unwrap().close().await;
}

#[tokio::test]
async fn an_idle_owner_closes_the_database() {
    let place = Place::new();
    let owner = Owner::start(place.config(Duration::from_millis(50))).await.unwrap();
    let serving = tokio::spawn(owner.serve(std::future::pending()));
    let api = place.join(Options::default(), Duration::from_secs(5)).await;
    call(&api, Operation::StateSet, json!({"key": "k", "value": 7})).await;
    // Three idle periods pass, which is the point: a connected client keeps it up through them.
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(!serving.is_finished(), "a connected client keeps the owner up");
    api.close().await;
    assert_eq!(serving.await.unwrap(), OwnerExit::Idle);
    let local = state_api::Local::open_standalone(&place.db, Settings::default()).unwrap();
    assert_eq!(local.call(Operation::StateGet, json!({"key": "k"})).await.body.unwrap()["value"], 7);
    local.close().await;
}

#[tokio::test]
async fn clients_rejoin_a_replacement_owner() {
    let place = Place::new();
    let (stop, serving) = place.serve().await;
    let api = place.join(Options::default(), Duration::from_secs(10)).await;
    let first = call(&api, Operation::StateSet, json!({"key": "k", "value": 1})).await;
    let before = call(&api, Operation::StateHealth, json!({})).await;
    stop.send(()).unwrap();
    serving.await.unwrap();

    let (stop, serving) = place.serve().await;
    let second = call(&api, Operation::StateSet, json!({"key": "k", "value": 2})).await;
    assert_eq!((first["version"].clone(), second["version"].clone()), (json!(1), json!(2)));
    let after = call(&api, Operation::StateHealth, json!({})).await;
    assert!(after["uptime_seconds"].as_u64() <= before["uptime_seconds"].as_u64().map(|s| s + 1));
    api.close().await;
    stop.send(()).unwrap();
    serving.await.unwrap();
}

#[tokio::test]
async fn a_call_with_no_owner_to_reach_says_it_was_not_applied() {
    let place = Place::new();
    let (stop, serving) = place.serve().await;
    let api = place.join(Options::default(), Duration::from_millis(300)).await;
    stop.send(()).unwrap();
    serving.await.unwrap();
    let reply = api.call(Operation::StateSet, json!({"key": "k", "value": 1})).await;
    assert_eq!(reply.outcome, Outcome::Unavailable);
    let error = reply.body.unwrap_err();
    assert_eq!(error.code, ErrorCode::Unavailable);
    assert!(error.message.contains("was not applied") && error.message.contains("no owner"), "{}", error.message);
}

#[tokio::test]
async fn a_backup_never_overwrites_a_file_and_says_which_one() {
    let dir = tempfile::tempdir().unwrap();
    let local = state_api::Local::open_standalone(&dir.path().join("s.redb"), Default::default()).unwrap();
    let api = state_api::Api::local(local);
    let taken = dir.path().join("copy.redb");
    assert!(api.backup(taken.clone()).await.is_ok());
    let error = api.backup(taken.clone()).await.unwrap_err();
    assert_eq!(error.code, state_api::ErrorCode::Storage);
    assert!(error.message.contains(&format!("the backup to {} was not written", taken.display())), "{}", error.message);
    assert!(error.message.contains("never overwrites"), "{}", error.message);
    let relative = api.backup("copy2.redb".into()).await.unwrap_err();
    assert_eq!(relative.code, state_api::ErrorCode::InvalidArguments, "{}", relative.message);
    api.close().await;
}

#[tokio::test]
async fn leases_and_keys_expire_through_the_owner_by_its_clock_not_by_waiting() {
    let place = Place::new();
    let clock = state_api::ManualClock::new(state_core::UnixMillis(1_800_000_000_000));
    let config = OwnerConfig { clock: std::sync::Arc::new(clock.clone()), ..place.config(Duration::from_secs(3600)) };
    let owner = Owner::start(config).await.unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let serving = tokio::spawn(owner.serve(async move { drop(stopped.await) }));
    let api = place.join(Options::default(), Duration::from_secs(10)).await;

    let lease = |holder: &str| json!({"resource_id": "printer", "holder_id": holder, "ttl_seconds": 60});
    assert_eq!(call(&api, Operation::LeaseAcquire, lease("a")).await["status"], "acquired");
    call(&api, Operation::StateSet, json!({"key": "session", "value": 1, "ttl_seconds": 30})).await;
    let held = api.call(Operation::LeaseAcquire, lease("b")).await;
    assert_eq!(held.outcome, Outcome::Conflict, "a holds it for another minute: {:?}", held.body);

    // Thirty seconds on the owner's clock: the key is gone, the lease still held.
    clock.advance_millis(30_000);
    let gone = api.call(Operation::StateGet, json!({"key": "session"})).await;
    assert_eq!(gone.outcome, Outcome::NotFound, "{:?}", gone.body);
    assert_eq!(api.call(Operation::LeaseAcquire, lease("b")).await.outcome, Outcome::Conflict);

    // Past the minute, b gets it, with a larger fencing token than a's.
    clock.advance_millis(30_001);
    let taken = call(&api, Operation::LeaseAcquire, lease("b")).await;
    assert_eq!((taken["status"].as_str(), taken["holder"].as_str()), (Some("acquired"), Some("b")), "{taken}");

    api.close().await;
    stop.send(()).unwrap();
    serving.await.unwrap();
}
