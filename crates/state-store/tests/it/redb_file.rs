//! What only a file-backed store can show: data surviving a reopen, and the file lock.

use std::sync::Arc;

use serde_json::json;
use state_store::{Engine, EngineConfig, OpenError, RedbBackend, SystemClock};

fn engine(path: &std::path::Path) -> Engine {
    let backend = RedbBackend::open(path).expect("open");
    Engine::new(Arc::new(backend), Arc::new(SystemClock), EngineConfig::default()).expect("engine")
}

#[tokio::test]
async fn state_and_revision_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/dir/state.redb");
    let first = engine(&path);
    first.set(crate::support::set_req("k", json!({"v": 1}), None)).await.unwrap();
    first.set(crate::support::set_req("k", json!({"v": 2}), None)).await.unwrap();
    first.close().await;

    let second = engine(&path);
    let got =
        second.get(state_core::ops::kv::GetRequest { key: "k".into(), version: None, revision: None }).await.unwrap();
    assert_eq!((got.version, got.revision, got.value), (2, 2, Some(json!({"v": 2}))));
    let next = second.set(crate::support::set_req("k2", json!(0), None)).await.unwrap();
    assert_eq!(next.revision, 3, "revisions continue where they stopped");
}

#[tokio::test]
async fn a_second_open_fails_fast_and_names_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let holder = RedbBackend::open(&path).expect("first open");
    let started = std::time::Instant::now();
    let err = match RedbBackend::open(&path) {
        Err(err) => err,
        Ok(_) => panic!("second open must fail"),
    };
    assert!(started.elapsed() < std::time::Duration::from_secs(2), "it must not hang");
    assert!(matches!(err, OpenError::InUse { .. }));
    let text = err.to_string();
    assert!(text.contains(&format!("pid {}", std::process::id())), "{text}");
    drop(holder);
    assert!(!state_store::backend::redb::holder_note_path(&path).exists(), "the note goes with the holder");
    RedbBackend::open(&path).expect("free again once the holder closes");
}

#[tokio::test]
async fn close_from_any_handle_releases_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let engine = engine(&path);
    let clone = engine.clone();
    let _maintenance = engine.start_maintenance();
    engine.set(crate::support::set_req("k", json!(1), None)).await.unwrap();
    clone.close().await;
    let err = engine.set(crate::support::set_req("k", json!(2), None)).await.unwrap_err();
    assert_eq!(err, state_store::EngineError::Closed);
    assert!(engine.health().await.is_err());
    // The file is free even though handles still exist.
    let reopened = RedbBackend::open(&path).expect("released by close");
    drop(reopened);
    drop(engine);
}
