//! One story through the seam, told to each of its three implementations: the engine in this
//! process (`Api::local`), the database's owner in another process (`Api::join`, starting the
//! owner as a client does), and a `state-http` server (`Api::connect_http`). A frontend holds
//! an `Api` and cannot tell which it has: values, versions, conflicts, idempotent retries,
//! errors, paging, watches and leases must read the same through all three.

use std::time::Duration;

use serde_json::{Value, json};
use state_api::auth::Caller;
use state_api::catalog::Operation;
use state_api::{Api, ErrorCode, HttpConfig, JoinConfig, Local, Options, Outcome, OwnerLauncher, Settings};
use state_core::ops::watch::WatchRequest;

use crate::{Place, binary};

const SETTLE: Duration = Duration::from_secs(10);

async fn ok(api: &Api, op: Operation, args: Value) -> Value {
    let reply = api.call(op, args.clone()).await;
    assert_eq!(reply.outcome, Outcome::Ok, "{op:?} {args}: {:?}", reply.body);
    reply.body.unwrap()
}

/// The story; `through` names the implementation in failures.
async fn story(api: &Api, through: &str) {
    // A write and a read of it.
    let set = ok(api, Operation::StateSet, json!({"key": "job/1", "value": {"step": 1}})).await;
    assert_eq!(set["version"], 1, "{through}: {set}");
    let got = ok(api, Operation::StateGet, json!({"key": "job/1"})).await;
    assert_eq!((got["value"].clone(), got["version"].clone()), (json!({"step": 1}), json!(1)), "{through}");

    // A stale compare-and-set is a conflict, with the current version to retry from.
    let stale = api.call(Operation::StateSet, json!({"key": "job/1", "value": 2, "expected_version": 7})).await;
    assert_eq!(stale.outcome, Outcome::Conflict, "{through}: {:?}", stale.body);

    // A retried write with the same request_id is applied once and answered the same.
    let once = json!({"key": "job/1", "value": {"step": 2}, "request_id": "story-1"});
    let first = ok(api, Operation::StateSet, once.clone()).await;
    let again = ok(api, Operation::StateSet, once).await;
    assert_eq!((first["version"].clone(), again.clone()), (json!(2), first.clone()), "{through}");

    // Errors keep their class.
    let missing = api.call(Operation::StateGet, json!({"key": "job/nothing"})).await;
    assert_eq!(missing.outcome, Outcome::NotFound, "{through}");
    let invalid = api.call(Operation::StateSet, json!({"key": "", "value": 1})).await;
    assert_eq!(invalid.outcome, Outcome::Invalid, "{through}");
    assert_eq!(invalid.body.unwrap_err().code, ErrorCode::InvalidInput, "{through}");

    // A listing read in pages of two: every key once, in order.
    for i in 0..5 {
        ok(api, Operation::StateSet, json!({"key": format!("page/{i}"), "value": i})).await;
    }
    let mut pages = state_api::Pages::new(api.clone(), Operation::StateList, json!({"prefix": "page/", "limit": 2}));
    let (mut keys, mut count) = (Vec::new(), 0);
    while let Some(reply) = pages.next().await {
        count += 1;
        let page = reply.body.unwrap();
        keys.extend(page["entries"].as_array().unwrap().iter().map(|e| e["key"].as_str().unwrap().to_owned()));
    }
    assert_eq!(count, 3, "{through}");
    assert_eq!(keys, (0..5).map(|i| format!("page/{i}")).collect::<Vec<_>>(), "{through}");

    // A watch sees the changes under its prefix, in order, once.
    let request = WatchRequest { prefix: Some("w/".into()), ..WatchRequest::default() };
    let mut watcher = api.watch(&Caller::LocalUser, request).await.unwrap();
    let mut written = Vec::new();
    for i in 0..3 {
        ok(api, Operation::StateSet, json!({"key": "elsewhere", "value": i})).await;
        written
            .push(ok(api, Operation::StateSet, json!({"key": format!("w/{i}"), "value": i})).await["revision"].clone());
    }
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let batch = tokio::time::timeout(SETTLE, watcher.next()).await.unwrap().unwrap().unwrap();
        seen.extend(batch.events.into_iter().map(|e| (json!(e.revision), e.key)));
    }
    let expected: Vec<(Value, String)> = written.into_iter().zip((0..3).map(|i| format!("w/{i}"))).collect();
    assert_eq!(seen, expected, "{through}");
    drop(watcher);

    // A lease: one holder at a time, released with its fencing token.
    let lease = json!({"resource_id": "printer", "holder_id": "a", "ttl_seconds": 600});
    let acquired = ok(api, Operation::LeaseAcquire, lease).await;
    assert_eq!(acquired["status"], "acquired", "{through}");
    let other = api
        .call(Operation::LeaseAcquire, json!({"resource_id": "printer", "holder_id": "b", "ttl_seconds": 600}))
        .await;
    assert_eq!(other.outcome, Outcome::Conflict, "{through}");
    let held = other.body.unwrap();
    assert_eq!((held["status"].as_str(), held["holder"].as_str()), (Some("held"), Some("a")), "{through}");
    let token = acquired["token"].clone();
    let released =
        ok(api, Operation::LeaseRelease, json!({"resource_id": "printer", "holder_id": "a", "token": token})).await;
    assert_eq!(released["status"], "ok", "{through}");

    // And a delete is a delete.
    ok(api, Operation::StateDelete, json!({"key": "job/1"})).await;
    let gone = api.call(Operation::StateGet, json!({"key": "job/1"})).await;
    assert_eq!(gone.outcome, Outcome::NotFound, "{through}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_story_reads_the_same_through_every_implementation_of_the_seam() {
    // In this process.
    let place = Place::new();
    let local = Api::local(Local::open_standalone(&place.db, Settings::default()).unwrap());
    story(&local, "local").await;
    local.close().await;

    // Through the owner, which joining starts (state-http's own `owner` mode).
    let place = Place::new();
    let db = place.db.to_string_lossy().into_owned();
    let launcher = OwnerLauncher {
        program: binary().to_owned(),
        args: ["owner", "--notify-ready", "--db", &db, "--idle", "1s"].map(Into::into).to_vec(),
    };
    let config = JoinConfig {
        db: place.db.clone(),
        runtime_dir: Some(place.runtime.clone()),
        options: Options::everything(),
        settings: Settings::default(),
        client: "seam story".into(),
        launcher,
        settle_timeout: SETTLE,
        hang_timeout: state_api::DEFAULT_HANG_TIMEOUT,
    };
    let (joined, how) = Api::join(config).await.unwrap();
    assert!(how.started_owner, "no owner ran before");
    story(&joined, "owner").await;
    joined.close().await;

    // Through a state-http server.
    let place = Place::new();
    let server = place.serve(&[]);
    let config = HttpConfig { url: format!("http://{}", server.addr), token: None, settle_timeout: SETTLE };
    let http = Api::connect_http(config).await.unwrap();
    story(&http, "http").await;
    http.close().await;
    drop(server);
}
