//! Batches staged in one transaction and published together (`engine/chain.rs`): when a later
//! batch fails, the earlier ones, already acknowledged, stay visible and durable.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::json;
use state_core::{Entry, UnixMillis};
use state_store::backend::Backend;
use state_store::backend::redb::faults::Faults;
use state_store::{Engine, EngineConfig, RedbBackend, SystemClock};

fn entry(key: &str, revision: u64) -> Entry {
    Entry {
        key: key.into(),
        value: json!(revision),
        version: 1,
        create_revision: revision,
        mod_revision: revision,
        updated_at: UnixMillis(0),
        expires_at: None,
        agent_id: None,
    }
}

#[test]
fn a_batch_dropped_after_another_in_its_transaction_leaves_that_one_visible_and_durable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let backend = RedbBackend::open(&path).unwrap();
    let mut first = backend.begin_write().unwrap();
    first.put(&entry("acknowledged", 1)).unwrap();
    first.set_revision(1).unwrap();
    let logged = first.commit_durably().unwrap().expect("a logged batch waits for its publication");
    assert!(logged.resumable());
    let mut second = logged.resume().unwrap();
    second.put(&entry("failed", 2)).unwrap();
    second.set_revision(2).unwrap();
    // The second batch fails before it is logged: its transaction, carrying the first, goes.
    drop(second);

    let read = backend.begin_read().unwrap();
    assert_eq!(read.get("acknowledged").unwrap().map(|e| e.value), Some(json!(1)), "the first batch is visible");
    assert_eq!(read.get("failed").unwrap(), None, "nothing of the second is");
    assert_eq!(read.revision().unwrap(), 1);
    drop(read);
    // Writes go on from it, and both are there after a reopen.
    let mut third = backend.begin_write().unwrap();
    assert_eq!(third.revision().unwrap(), 1);
    third.put(&entry("next", 2)).unwrap();
    third.set_revision(2).unwrap();
    let mut published = third.commit_durably().unwrap().expect("logged");
    published.publish().unwrap();
    published.finish();
    drop(backend);
    let reopened = RedbBackend::open(&path).unwrap();
    let read = reopened.begin_read().unwrap();
    assert_eq!(read.get("acknowledged").unwrap().map(|e| e.value), Some(json!(1)));
    assert_eq!(read.get("next").unwrap().map(|e| e.value), Some(json!(2)));
    assert_eq!((read.get("failed").unwrap(), read.revision().unwrap()), (None, 2));
}

/// Many writers keep the writer staging batches in one transaction; then the disk fills, so a
/// batch fails after others were answered in its transaction. Once there is space again,
/// every acknowledged write is read back, writes go on, and all of it is there after a reopen.
/// (While the disk is full, the writes that go on make redb fail, and reads wait for space to
/// reopen it, as without batches published together: `redb_file.rs` shows reads going on
/// after one refused write.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_in_the_middle_of_a_transaction_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let faults = Arc::new(Faults::default());
    let backend = RedbBackend::open_with_faults(&path, faults.clone()).unwrap();
    let engine = Engine::new(Arc::new(backend), Arc::new(SystemClock), EngineConfig::default()).unwrap();
    let get = |key: String| state_core::ops::kv::GetRequest { key, version: None, revision: None };

    let mut writers = Vec::new();
    for w in 0..16 {
        let engine = engine.clone();
        let faults = faults.clone();
        writers.push(tokio::spawn(async move {
            let mut acknowledged = Vec::new();
            let mut refused = 0;
            for n in 0..400 {
                if w == 0 && n == 200 {
                    faults.disk_full.store(true, Ordering::SeqCst);
                }
                let key = format!("w{w}/{n}");
                match engine.set(state_store::conformance::set_req(&key, json!(n), None)).await {
                    Ok(_) => acknowledged.push((key, n)),
                    Err(_) => refused += 1,
                }
            }
            (acknowledged, refused)
        }));
    }
    let mut acknowledged = Vec::new();
    let mut refused = 0;
    for writer in writers {
        let (acked, failed) = writer.await.unwrap();
        acknowledged.extend(acked);
        refused += failed;
    }
    let stats = engine.batch_stats();
    assert!(refused > 0, "the disk filled while writes went on");
    assert!(stats.publications < stats.commits, "batches were published together: {stats:?}");

    faults.disk_full.store(false, Ordering::SeqCst);
    for (key, n) in &acknowledged {
        let got = engine.get(get(key.clone())).await.unwrap();
        assert_eq!(got.value, Some(json!(n)), "{key} acknowledged but not read back");
    }
    engine.set(state_store::conformance::set_req("after", json!(1), None)).await.unwrap();
    engine.close().await;

    let backend = RedbBackend::open(&path).unwrap();
    let reopened = Engine::new(Arc::new(backend), Arc::new(SystemClock), EngineConfig::default()).unwrap();
    for (key, n) in &acknowledged {
        assert_eq!(reopened.get(get(key.clone())).await.unwrap().value, Some(json!(n)), "{key} lost");
    }
    assert_eq!(reopened.get(get("after".into())).await.unwrap().value, Some(json!(1)));
    reopened.close().await;
}
