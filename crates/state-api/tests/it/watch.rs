//! Watches through the owner: a joined process sees every change once, in order, across an
//! owner's replacement, and hears the same errors an in-process watcher does.

use std::time::Duration;

use serde_json::json;
use state_api::auth::Caller;
use state_api::catalog::Operation;
use state_api::owner::Owner;
use state_api::{Api, ErrorCode, Options, Settings, Watcher};
use state_core::ops::watch::WatchRequest;

use crate::owner::{Place, call};

const WAIT: Duration = Duration::from_secs(10);

fn prefix(prefix: &str, after: Option<u64>) -> WatchRequest {
    WatchRequest { prefix: Some(prefix.into()), after_revision: after, ..WatchRequest::default() }
}

/// The next `n` changes as (revision, key, value), failing the test if they take too long.
async fn take(watcher: &mut Watcher, n: usize) -> Vec<(u64, String, serde_json::Value)> {
    let mut seen = Vec::new();
    while seen.len() < n {
        let batch = tokio::time::timeout(WAIT, watcher.next()).await.expect("a change in time");
        let batch = batch.expect("the watch goes on").expect("no error");
        for event in batch.events {
            assert_eq!(event.revision, batch.revision, "a batch is one revision");
            seen.push((event.revision, event.key, event.value.unwrap_or_default()));
        }
    }
    seen
}

async fn set(api: &Api, key: &str, value: i64) -> u64 {
    call(api, Operation::StateSet, json!({"key": key, "value": value})).await["revision"].as_u64().unwrap()
}

/// Ends a test: the watch and clients first, so the owner stops with nothing open.
async fn finish(
    watcher: Watcher,
    clients: [Api; 2],
    stop: tokio::sync::oneshot::Sender<()>,
    serving: tokio::task::JoinHandle<state_api::owner::OwnerExit>,
) {
    drop(watcher);
    for client in clients {
        client.close().await;
    }
    stop.send(()).unwrap();
    serving.await.unwrap();
}

#[tokio::test]
async fn a_joined_watcher_sees_exactly_the_changes_under_its_prefix() {
    let place = Place::new();
    let (stop, serving) = place.serve().await;
    let watching = place.join(Options::default(), WAIT).await;
    let writing = place.join(Options::default(), WAIT).await;
    let mut watcher = watching.watch(&Caller::LocalUser, prefix("p/", None)).await.unwrap();
    let start = watcher.position();
    let mut expected = Vec::new();
    for i in 0..40 {
        let key = if i % 3 == 0 { format!("q/{i}") } else { format!("p/{i}") };
        let revision = set(&writing, &key, i).await;
        if key.starts_with("p/") {
            expected.push((revision, key, json!(i)));
        }
    }
    assert!(expected.iter().all(|(revision, ..)| *revision > start));
    assert_eq!(take(&mut watcher, expected.len()).await, expected);
    assert_eq!(watcher.position(), expected.last().unwrap().0);
    finish(watcher, [watching, writing], stop, serving).await;
}

#[tokio::test]
async fn a_joined_watch_resumes_on_a_replacement_owner_without_gap_or_repeat() {
    let place = Place::new();
    let (stop, serving) = place.serve().await;
    let watching = place.join(Options::default(), WAIT).await;
    let writing = place.join(Options::default(), WAIT).await;
    let mut watcher = watching.watch(&Caller::LocalUser, prefix("p/", Some(0))).await.unwrap();
    let mut expected = Vec::new();
    for i in 0..3 {
        expected.push((set(&writing, &format!("p/{i}"), i).await, format!("p/{i}"), json!(i)));
    }
    let mut seen = take(&mut watcher, 2).await;
    stop.send(()).unwrap();
    serving.await.unwrap();

    // Written while the watcher's owner is gone: it must see these after it rejoins.
    let (stop, serving) = place.serve().await;
    for i in 3..6 {
        expected.push((set(&writing, &format!("p/{i}"), i).await, format!("p/{i}"), json!(i)));
    }
    seen.extend(take(&mut watcher, 4).await);
    assert_eq!(seen, expected);
    finish(watcher, [watching, writing], stop, serving).await;
}

#[tokio::test]
async fn a_joined_watcher_hears_bad_requests_compaction_and_falling_behind() {
    let place = Place::new();
    let settings = Settings { history_retention: Some(5), ..Settings::default() };
    let owner = Owner::start(state_api::owner::OwnerConfig { settings, ..place.config(Duration::from_secs(3600)) })
        .await
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(owner.serve(async move { drop(stopped.await) }));
    let api = place.join(Options::default(), WAIT).await;

    let both = WatchRequest { key: Some("k".into()), prefix: Some("p".into()), ..WatchRequest::default() };
    let invalid = api.watch(&Caller::LocalUser, both).await.err().expect("key and prefix together are refused");
    assert_eq!(invalid.code, ErrorCode::InvalidInput, "{invalid:?}");

    // A watcher that stops reading (its owner may send it only a little ahead): the writers
    // go on without it.
    let stalled = Settings { watch_buffer_bytes: Some(2_000), ..Settings::default() };
    let reader = place.join_with(Options::default(), WAIT, stalled).await;
    let mut stuck = reader.watch(&Caller::LocalUser, prefix("bulk/", None)).await.unwrap();
    let start = stuck.position();
    let writes = (0..3000).map(|i| {
        let api = api.clone();
        async move { set(&api, &format!("bulk/{i}"), i).await }
    });
    let last = futures_max(writes).await;

    // Retention 5: the sweeper compacts history to within five revisions of the last one (in
    // steps, so a watch may first meet a compaction still on its way there).
    let compacted = tokio::time::timeout(WAIT, async {
        loop {
            match api.watch(&Caller::LocalUser, prefix("bulk/", Some(1))).await {
                Err(error) if error.compacted_revision.is_some_and(|c| c >= last - 5) => return error,
                Err(error) if error.code != ErrorCode::Compacted => return error,
                // Not compacted that far yet: the sweeper runs again within its interval.
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    })
    .await
    .expect("history is compacted");
    assert_eq!(compacted.code, ErrorCode::Compacted, "{compacted:?}");
    assert!(compacted.compacted_revision.is_some_and(|c| c >= last - 5), "{compacted:?}");

    // Once it reads again it gets every change in order, from memory while the engine still
    // holds them; if it fell so far behind that what it missed is gone from memory and from
    // history, it is told so with where it stands.
    let mut delivered = start;
    while delivered < last {
        match tokio::time::timeout(WAIT, stuck.next()).await.expect("the stuck watcher moves") {
            Some(Ok(batch)) => {
                assert_eq!(batch.revision, delivered + 1, "in order, without gaps");
                delivered = batch.revision;
            }
            Some(Err(error)) => {
                match error.code {
                    ErrorCode::WatchLagged => assert_eq!(error.resume_after, Some(delivered), "{error:?}"),
                    ErrorCode::Compacted => assert!(error.compacted_revision.is_some_and(|c| c > delivered)),
                    _ => panic!("{error:?}"),
                }
                break;
            }
            None => panic!("the watch ended without saying why"),
        }
    }
    drop(stuck);
    reader.close().await;
    api.close().await;
    stop.send(()).unwrap();
    serving.await.unwrap();
}

/// Runs the futures concurrently (so their writes commit in groups) and returns the largest.
async fn futures_max(futures: impl Iterator<Item = impl Future<Output = u64> + Send + 'static>) -> u64 {
    let tasks: Vec<_> = futures.map(tokio::spawn).collect();
    let mut max = 0;
    for task in tasks {
        max = max.max(task.await.unwrap());
    }
    max
}

#[tokio::test]
async fn a_joined_watcher_that_stops_reading_gets_every_change_once_it_reads_again() {
    let place = Place::new();
    let (stop, serving) = place.serve().await;
    // The owner may send at most 300 kB ahead of what this watcher took: three of these values.
    let settings = Settings { watch_buffer_bytes: Some(300_000), ..Settings::default() };
    let watching = place.join_with(Options::default(), WAIT, settings).await;
    let writing = place.join(Options::default(), WAIT).await;
    let mut stalled = watching.watch(&Caller::LocalUser, prefix("big/", None)).await.unwrap();
    let start = stalled.position();
    let value = json!("x".repeat(100_000));
    let mut expected = Vec::new();
    for i in 0..40 {
        let key = format!("big/{i}");
        let written = call(&writing, Operation::StateSet, json!({"key": key, "value": value})).await;
        expected.push((written["revision"].as_u64().unwrap(), key, value.clone()));
    }
    // The writes never waited for it; now it reads, and gets every one, in order.
    assert!(expected[0].0 > start);
    assert_eq!(take(&mut stalled, expected.len()).await, expected);
    finish(stalled, [watching, writing], stop, serving).await;
}

#[tokio::test]
async fn a_followed_watcher_that_falls_behind_goes_on_where_it_stopped() {
    // Room for eight commits only: a watcher that does not read lags at once.
    let config = state_store::EngineConfig { watch_buffer: 8, ..state_store::EngineConfig::default() };
    let backend = std::sync::Arc::new(state_store::RedbBackend::in_memory().unwrap());
    let engine = state_store::Engine::new(backend, std::sync::Arc::new(state_store::SystemClock), config).unwrap();
    let api = Api::local(state_api::Local::standalone(engine));
    let mut plain = api.watch(&Caller::LocalUser, prefix("bulk/", None)).await.unwrap();
    let mut followed = api.follow(&Caller::LocalUser, prefix("bulk/", None)).await.unwrap();
    let start = followed.position();
    let mut expected = Vec::new();
    for i in 0..60 {
        expected.push((set(&api, &format!("bulk/{i}"), i).await, format!("bulk/{i}"), json!(i)));
        set(&api, &format!("other/{i}"), i).await;
    }
    assert!(expected[0].0 > start);

    // Without following, the watch ends lagged, naming where to resume.
    let lagged = loop {
        match tokio::time::timeout(WAIT, plain.next()).await.expect("the plain watch moves") {
            Some(Ok(_)) => continue,
            Some(Err(error)) => break error,
            None => panic!("the watch ended without saying why"),
        }
    };
    assert_eq!(lagged.code, ErrorCode::WatchLagged, "{lagged:?}");
    // Followed, the same fall gets every change, once, in order.
    assert_eq!(take(&mut followed, expected.len()).await, expected);
    assert!(followed.position() >= expected.last().unwrap().0);
    drop((plain, followed));
    api.close().await;
}
