//! The change feed: every watcher sees exactly the history after its start, in order, with no
//! gap or duplicate, whatever the writers do meanwhile; a watcher that falls behind is ended
//! with an error naming where to resume, and never holds a writer up.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use serde_json::json;
use state_core::ops::history::{HistoryEvent, HistoryKind, HistoryRequest};
use state_core::ops::kv::DeleteRequest;
use state_core::ops::watch::{WatchBatch, WatchRequest};
use state_store::conformance::{Store, history_since, lease, set_req, txn};
use state_store::{EngineConfig, EngineError, Watch};

/// Reads a watch until it has delivered everything up to `revision`.
async fn drain(watch: &mut Watch, revision: u64) -> Vec<WatchBatch> {
    let mut batches = Vec::new();
    loop {
        let next = tokio::time::timeout(Duration::from_secs(30), watch.next_until(revision)).await;
        match next.unwrap_or_else(|_| panic!("the watch is stuck at {} of {revision}", watch.position())) {
            Some(batch) => batches.push(batch.expect("no error")),
            None => return batches,
        }
    }
}

fn flatten(batches: &[WatchBatch]) -> Vec<HistoryEvent> {
    for pair in batches.windows(2) {
        assert!(pair[0].revision < pair[1].revision, "revisions ascend, each delivered once");
    }
    for batch in batches {
        assert!(!batch.events.is_empty() && batch.events.iter().all(|e| e.revision == batch.revision));
    }
    batches.iter().flat_map(|b| b.events.clone()).collect()
}

/// What a watch from `start` must deliver: the same selection read from history.
async fn expected(store: &Store, request: &WatchRequest, start: u64) -> Vec<HistoryEvent> {
    let mut events = Vec::new();
    let mut since = start;
    loop {
        let page = store
            .engine
            .history(HistoryRequest {
                kind: request.kind,
                key: request.key.clone(),
                prefix: request.prefix.clone(),
                since_revision: Some(since),
                n: Some(1000),
                include_values: Some(true),
            })
            .await
            .unwrap();
        events.extend(page.events.iter().cloned());
        match page.events.last() {
            Some(last) if page.more => since = last.revision,
            _ => return events,
        }
    }
}

fn selections() -> Vec<WatchRequest> {
    vec![
        WatchRequest::default(),
        WatchRequest { prefix: Some("a/".into()), ..WatchRequest::default() },
        WatchRequest { prefix: Some("b/".into()), ..WatchRequest::default() },
        WatchRequest::key(None, "a/1"),
        WatchRequest::key(Some(HistoryKind::Lease), "l"),
    ]
}

/// One writer's operations: sets, deletes, multi-key transactions, lease grants.
async fn write(store: Arc<Store>, writer: u64, ops: Vec<u8>) {
    for (n, op) in ops.into_iter().enumerate() {
        let key = format!("{}/{}", if op % 2 == 0 { "a" } else { "b" }, op % 4);
        match op % 5 {
            0 | 1 => {
                store.engine.set(set_req(&key, json!({"w": writer, "n": n}), None)).await.unwrap();
            }
            2 => {
                store.engine.delete(DeleteRequest { key, ..DeleteRequest::default() }).await.unwrap();
            }
            3 => {
                let t = txn(json!({"success": [
                    {"op": "put", "key": "a/1", "value": n}, {"op": "put", "key": "b/1", "value": n}]}));
                store.engine.txn(t).await.unwrap();
            }
            _ => {
                store.engine.lease_acquire(lease("l", &format!("w{writer}"), 0.001)).await.unwrap();
            }
        }
    }
}

fn check_watchers(seed_ops: Vec<Vec<u8>>, starts: Vec<(usize, u8)>) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let store = Arc::new(Store::new(&crate::support::redb_memory));
        let total: usize = seed_ops.iter().map(Vec::len).sum();
        let writers: Vec<_> = seed_ops
            .into_iter()
            .enumerate()
            .map(|(w, ops)| tokio::spawn(write(store.clone(), w as u64, ops)))
            .collect();
        // Watchers start one after another while the writers run, each from a revision in the
        // past: what came before its start is caught up from history, the rest followed live.
        let mut watches = Vec::new();
        for (i, (selection, back)) in starts.iter().enumerate() {
            let progress = (total * (i + 1) / (starts.len() + 1) / 2) as u64;
            let under_way = async || store.revision().await >= progress || writers.iter().all(|w| w.is_finished());
            crate::support::until("the writers to get under way", Duration::from_secs(60), under_way).await;
            let current = store.revision().await;
            let start = current.saturating_sub(u64::from(*back) % (current + 1));
            let request = WatchRequest { after_revision: Some(start), ..selections()[selection % 5].clone() };
            watches.push((request.clone(), start, store.engine.watch(request).await.unwrap()));
        }
        for writer in writers {
            writer.await.unwrap();
        }
        let last = store.revision().await;
        for (request, start, mut watch) in watches {
            let delivered = flatten(&drain(&mut watch, last).await);
            assert_eq!(delivered, expected(&store, &request, start).await, "watch {request:?} from {start}");
        }
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn every_watcher_sees_exactly_the_history_after_its_start(
        ops in prop::collection::vec(prop::collection::vec(any::<u8>(), 1..40), 2..5),
        starts in prop::collection::vec((0usize..5, any::<u8>()), 1..8),
    ) {
        check_watchers(ops, starts);
    }
}

#[tokio::test]
async fn a_watch_follows_live_writes_after_its_start() {
    let store = Store::new(&crate::support::redb_memory);
    store.set("a/1", json!("before")).await;
    let mut watch =
        store.engine.watch(WatchRequest { prefix: Some("a/".into()), ..WatchRequest::default() }).await.unwrap();
    let waiting = tokio::spawn(async move { (watch.next().await, watch) });
    store.set("b/1", json!("elsewhere")).await;
    store.set("a/2", json!("after")).await;
    let (next, _watch) = waiting.await.unwrap();
    let batch = next.unwrap().unwrap();
    assert_eq!((batch.revision, batch.events[0].key.as_str()), (3, "a/2"));
    assert_eq!(batch.events[0].value, Some(json!("after")), "only changes after its start, only its prefix");
}

#[tokio::test]
async fn a_dropped_watcher_resumes_from_its_position_and_misses_nothing() {
    let store = Store::new(&crate::support::redb_memory);
    for n in 0..10 {
        store.set(&format!("k{}", n % 3), json!(n)).await;
    }
    let mut first =
        store.engine.watch(WatchRequest { after_revision: Some(0), ..WatchRequest::default() }).await.unwrap();
    let mut seen = drain(&mut first, 4).await;
    let position = first.position();
    drop(first);
    for n in 10..20 {
        store.set(&format!("k{}", n % 3), json!(n)).await;
    }
    let mut resumed =
        store.engine.watch(WatchRequest { after_revision: Some(position), ..WatchRequest::default() }).await.unwrap();
    seen.extend(drain(&mut resumed, 20).await);
    assert_eq!(flatten(&seen), history_since(&store.engine, 0, 1000).await);
}

#[tokio::test]
async fn watching_from_compacted_history_is_an_explicit_error() {
    let store = Store::new(&crate::support::redb_memory);
    for n in 0..10 {
        store.set("k", json!(n)).await;
    }
    store.engine.compact_history(6).await.unwrap();
    let error = store.engine.watch(WatchRequest { after_revision: Some(3), ..WatchRequest::default() }).await.err();
    assert!(matches!(error, Some(EngineError::Compacted { compacted_revision: 6, requested: 4 })), "{error:?}");
    let from_six = store.engine.watch(WatchRequest { after_revision: Some(6), ..WatchRequest::default() }).await;
    assert!(from_six.is_ok(), "history after the compacted revision is still there");
}

#[tokio::test]
async fn a_watcher_that_never_reads_is_ended_and_never_holds_writers_up() {
    let config = EngineConfig { watch_buffer: 8, ..EngineConfig::default() };
    let store = Store::with_config(&crate::support::redb_memory, config);
    let mut stuck = store.engine.watch(WatchRequest::default()).await.unwrap();
    // Far more commits than the buffer holds: none of them waits for the watcher.
    for n in 0..200 {
        store.set(&format!("k{n}"), json!(n)).await;
    }
    let ended = stuck.next().await.expect("the engine is open");
    assert!(matches!(ended, Err(EngineError::WatchLagged { resume_after: 0 })), "{ended:?}");
    let message = ended.unwrap_err().to_string();
    assert!(message.contains("after_revision 0"), "says where to resume: {message}");
    // Resuming there loses nothing.
    let mut resumed =
        store.engine.watch(WatchRequest { after_revision: Some(0), ..WatchRequest::default() }).await.unwrap();
    assert_eq!(flatten(&drain(&mut resumed, 200).await).len(), 200);
}

#[tokio::test]
async fn a_watch_ends_when_the_engine_closes() {
    let store = Store::new(&crate::support::redb_memory);
    let mut watch = store.engine.watch(WatchRequest::default()).await.unwrap();
    store.engine.close().await;
    assert!(watch.next().await.is_none());
}

#[tokio::test]
async fn a_watcher_that_stops_reading_holds_no_more_than_the_byte_budget_and_misses_nothing() {
    // Room for about two of these values: the rest must reach the watcher through history.
    let config = EngineConfig { watch_buffer_bytes: 250_000, ..EngineConfig::default() };
    let store = Store::with_config(&crate::support::redb_memory, config);
    let big = json!("x".repeat(100_000));
    let mut stalled = store.engine.watch(WatchRequest::default()).await.unwrap();
    let mut live = store.engine.watch(WatchRequest::default()).await.unwrap();
    for n in 0..40 {
        store.set(&format!("k{n}"), big.clone()).await;
    }
    // Both see every revision once, in order, with its value: the one that kept up and the one
    // that stopped reading.
    let expected = history_since(&store.engine, 0, 1000).await;
    assert_eq!(expected.len(), 40);
    for watch in [&mut live, &mut stalled] {
        let delivered = flatten(&drain(watch, 40).await);
        assert_eq!(delivered, expected);
        assert!(delivered.iter().all(|e| e.value.as_ref() == Some(&big)));
    }
}

#[tokio::test]
async fn pages_of_large_values_stop_at_a_size_and_say_there_is_more() {
    use state_core::limits::MAX_PAGE_VALUE_BYTES;
    use state_core::ops::kv::ListRequest;
    let store = Store::new(&crate::support::redb_memory);
    let value = json!("v".repeat(1_000_000));
    let n = MAX_PAGE_VALUE_BYTES / 1_000_000 + 4;
    for i in 0..n {
        store.set(&format!("big/{i:03}"), value.clone()).await;
    }
    // History: fewer events than asked for, and `more`; paging on reaches all of them.
    let page = store
        .engine
        .history(HistoryRequest { since_revision: Some(0), n: Some(1000), ..HistoryRequest::default() })
        .await
        .unwrap();
    assert!(page.more && page.events.len() < n && page.events.len() >= 16, "{} events", page.events.len());
    assert_eq!(history_since(&store.engine, 0, 1000).await.len(), n);
    // Listing with values: the same, by cursor; without values, one page holds them all.
    let mut seen = 0;
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let request = ListRequest { include_values: true, limit: Some(1000), cursor, ..ListRequest::default() };
        let page = store.engine.list(request).await.unwrap();
        seen += page.entries.len();
        pages += 1;
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!((seen, pages), (n, 2));
    let keys = store.engine.list(ListRequest { limit: Some(1000), ..ListRequest::default() }).await.unwrap();
    assert_eq!((keys.entries.len(), keys.next_cursor), (n, None));
}

/// The sweeper wakes when a stored expiry falls, not at its next interval: with an interval
/// of an hour, an expiry a few hundred milliseconds away still reaches watchers.
#[tokio::test]
async fn an_expiry_reaches_watchers_when_it_falls_not_at_the_next_sweep_interval() {
    let config = EngineConfig { sweep_interval: Duration::from_secs(3600), ..EngineConfig::default() };
    let backend = Arc::new(state_store::RedbBackend::in_memory().unwrap());
    let engine = state_store::Engine::new(backend, Arc::new(state_store::SystemClock), config).unwrap();
    let _maintenance = engine.start_maintenance();
    // Let the first sweep run and go to sleep with nothing to wait for.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut watch = engine.watch(WatchRequest { prefix: Some("t/".into()), ..WatchRequest::default() }).await.unwrap();
    engine
        .set(state_core::ops::kv::SetRequest { ttl_seconds: Some(0.3), ..set_req("t/short", json!(1), None) })
        .await
        .unwrap();
    let mut kinds = Vec::new();
    while kinds.len() < 2 {
        let batch = tokio::time::timeout(Duration::from_secs(30), watch.next()).await;
        let batch = batch.expect("the expiry arrives long before the hour-long interval").unwrap().unwrap();
        kinds.extend(batch.events.into_iter().map(|e| serde_json::to_value(e.op).unwrap()));
    }
    assert_eq!(kinds, [json!("put"), json!("expired")]);
}

/// Keys that expire a millisecond apart (a cache refreshed in a loop, or a tenant staggering
/// TTLs on purpose) are swept together: the sweeper wakes for expiries, but each sweep is a
/// commit with a sync, so it sweeps at most every 100 ms, not once per key.
#[tokio::test]
async fn keys_expiring_a_millisecond_apart_are_swept_in_a_few_commits_not_one_each() {
    let config = EngineConfig { sweep_interval: Duration::from_secs(3600), ..EngineConfig::default() };
    let backend = Arc::new(state_store::RedbBackend::in_memory().unwrap());
    let engine = state_store::Engine::new(backend, Arc::new(state_store::SystemClock), config).unwrap();
    let _maintenance = engine.start_maintenance();
    let keys = 200u32;
    for i in 0..keys {
        let ttl = 0.2 + f64::from(i) * 0.002;
        let set =
            state_core::ops::kv::SetRequest { ttl_seconds: Some(ttl), ..set_req(&format!("c/{i}"), json!(i), None) };
        engine.set(set).await.unwrap();
    }
    let before = engine.batch_stats().commits;
    // The last expires 0.6 s after the first was written; wait for every expiry to be swept.
    let swept = async || engine.health().await.unwrap().keys == Some(0);
    crate::support::until("every key to be swept", Duration::from_secs(30), swept).await;
    let sweeps = engine.batch_stats().commits - before;
    assert!(sweeps <= 12, "{keys} staggered expiries took {sweeps} sweep commits");
}
