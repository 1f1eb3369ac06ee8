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

#[tokio::test]
async fn a_write_the_disk_refuses_costs_nothing_acknowledged_and_the_store_recovers_in_place() {
    use state_store::backend::redb::faults::Faults;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let faults = Arc::new(Faults::default());
    let backend = RedbBackend::open_with_faults(&path, faults.clone()).unwrap();
    backend.set_checkpoint_bytes(1);
    let engine = Engine::new(Arc::new(backend), Arc::new(SystemClock), EngineConfig::default()).unwrap();
    let get = |key: &str| state_core::ops::kv::GetRequest { key: key.into(), version: None, revision: None };
    for n in 0..5 {
        engine.set(crate::support::set_req(&format!("k{n}"), json!(n), None)).await.unwrap();
    }
    // A write is answered once it is durable; redb's commit and the checkpoint come after,
    // and the writer may stage a request that comes soon in the same transaction first. A read
    // makes it publish (commit, then checkpoint) before it takes the next request: once a
    // conflict (which changes nothing) sent after a read is answered, the disk may fill
    // without touching the last write's upkeep.
    let upkeep_done = || async {
        engine.get(get("k0")).await.unwrap();
        let conflict = engine.set(crate::support::set_req("k0", json!(0), Some(99))).await.unwrap();
        assert_eq!(conflict.status, state_core::ops::WriteStatus::Conflict, "{conflict:?}");
    };
    upkeep_done().await;

    // The disk fills up (another process filled it past the free-space check): the write's
    // log append fails, clearly, and it is not applied. Reads go on meanwhile.
    faults.disk_full.store(true, std::sync::atomic::Ordering::SeqCst);
    let refused = engine.set(crate::support::set_req("k5", json!(5), None)).await.unwrap_err();
    assert!(matches!(refused, state_store::EngineError::Storage(state_store::StorageError::Io(_))), "{refused:?}");
    assert!(refused.to_string().contains("No space left on device"), "{refused}");
    assert!(faults.refused.load(std::sync::atomic::Ordering::SeqCst) > 0);
    assert_eq!(engine.get(get("k1")).await.unwrap().value, Some(json!(1)), "reads go on");

    // Space returns: writes go on, with every acknowledged write and without the refused one.
    faults.disk_full.store(false, std::sync::atomic::Ordering::SeqCst);
    for n in 0..5 {
        let got = engine.get(get(&format!("k{n}"))).await.unwrap();
        assert_eq!((got.value, got.version), (Some(json!(n)), 1));
    }
    assert_eq!(engine.get(get("k5")).await.unwrap().value, None, "the refused write was not applied");
    let next = engine.set(crate::support::set_req("k5", json!("later"), None)).await.unwrap();
    assert_eq!(next.revision, 6, "revisions go on from the last commit, without a gap");
    upkeep_done().await;

    // Now only the database's disk is full (the log lives elsewhere). Writes are acknowledged
    // from the log while the database file cannot take a checkpoint (one is tried after every
    // commit here); once redb has failed, writes wait for it to reopen, which needs space.
    faults.log_spared.store(true, std::sync::atomic::Ordering::SeqCst);
    faults.disk_full.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut acknowledged = Vec::new();
    for n in 6..9 {
        if engine.set(crate::support::set_req(&format!("k{n}"), json!(n), None)).await.is_ok() {
            acknowledged.push(n);
        }
    }
    assert!(acknowledged.contains(&6), "the first write after the disk filled is acknowledged from the log");
    // Space returns: writes go on at once, with nothing else in between (no read to reopen it).
    faults.disk_full.store(false, std::sync::atomic::Ordering::SeqCst);
    engine.set(crate::support::set_req("k9", json!(9), None)).await.unwrap();
    acknowledged.push(9);
    engine.close().await;
    let reopened = engine_at(&path);
    assert_eq!(reopened.get(get("k5")).await.unwrap().value, Some(json!("later")));
    for n in acknowledged {
        assert_eq!(reopened.get(get(&format!("k{n}"))).await.unwrap().value, Some(json!(n)), "k{n} lost");
    }
}

fn engine_at(path: &std::path::Path) -> Engine {
    engine(path)
}

#[test]
fn a_file_of_a_newer_format_is_refused_by_name_not_misread() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    drop(RedbBackend::open(&path).expect("create"));
    // What a later version would leave: the same file, a higher format number.
    {
        let db = redb::Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(redb::TableDefinition::<&str, u64>::new("meta")).unwrap().insert("format", 2).unwrap();
        txn.commit().unwrap();
    }
    let error = match RedbBackend::open(&path) {
        Err(error) => error.to_string(),
        Ok(_) => panic!("a newer format was opened"),
    };
    assert!(error.contains("store format 2 is newer than this build understands (1)"), "{error}");
    assert!(error.contains("upgrade"), "it says what to do: {error}");
}

#[tokio::test]
async fn a_backup_put_in_place_of_the_database_opens_beside_the_newer_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let get = |key: &str| state_core::ops::kv::GetRequest { key: key.into(), version: None, revision: None };
    let live = engine(&path);
    live.set(crate::support::set_req("before", json!(1), None)).await.unwrap();
    live.backup(dir.path().join("backup.redb")).await.unwrap();
    for n in 0..50 {
        live.set(crate::support::set_req(&format!("after/{n}"), json!(n), None)).await.unwrap();
    }
    live.close().await;
    drop(live);
    // Restored as the README says: stopped, the copy put in place; the log stays beside it.
    std::fs::copy(dir.path().join("backup.redb"), &path).unwrap();
    let restored = engine(&path);
    assert_eq!(restored.get(get("before")).await.unwrap().value, Some(json!(1)));
    assert_eq!(restored.get(get("after/0")).await.unwrap().value, None, "the backup's state, not the log's");
    restored.set(crate::support::set_req("restored", json!(true), None)).await.unwrap();
    restored.close().await;
    drop(restored);
    assert_eq!(engine(&path).get(get("restored")).await.unwrap().value, Some(json!(true)));
}

/// Big values with live ones between them, and a key to check, `keep`: 34 MiB of which
/// [`make_the_holes`] leaves 2 live.
async fn fill_with_holes_to_be(engine: &Engine) {
    // Noise, so no compression makes it small.
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut noise = |bytes: usize| -> serde_json::Value {
        let text: String = (0..bytes)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                char::from(b'a' + (seed % 26) as u8)
            })
            .collect();
        json!(text)
    };
    // Live values between the ones deleted later: the free pages end up in holes, not at the
    // end of the file, where redb trims them by itself.
    for n in 0..40 {
        engine.set(crate::support::set_req(&format!("bulk/{n}"), noise(900 * 1024), None)).await.unwrap();
        engine.set(crate::support::set_req(&format!("live/{n}"), noise(50 * 1024), None)).await.unwrap();
    }
    engine.set(crate::support::set_req("keep", json!({"v": 1}), None)).await.unwrap();
}

/// Deletes the big values and compacts their history away; returns the revision of `keep`'s
/// second value.
async fn make_the_holes(engine: &Engine) -> u64 {
    for n in 0..40 {
        let delete = state_core::ops::kv::DeleteRequest { key: format!("bulk/{n}"), ..Default::default() };
        engine.delete(delete).await.unwrap();
    }
    let revision = engine.set(crate::support::set_req("keep", json!({"v": 2}), None)).await.unwrap().revision;
    engine.compact_history(revision).await.unwrap();
    revision
}

/// A file whose data was deleted and whose history was compacted is mostly free pages, which
/// redb never gives back by itself: the next open compacts it, and nothing live is lost.
#[tokio::test]
async fn a_mostly_free_file_is_compacted_at_the_next_open_and_keeps_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let first = engine(&path);
    fill_with_holes_to_be(&first).await;
    // Made durable in the file itself (closing checkpoints the log), then deleted and their
    // history compacted: pages a durable commit held are free only in the file after it.
    first.close().await;
    let full = std::fs::metadata(&path).unwrap().len();
    let first = engine(&path);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), full, "a full file is left as it is");
    let revision = make_the_holes(&first).await;
    first.close().await;
    let grown = std::fs::metadata(&path).unwrap().len();
    assert!(grown > 32 * 1024 * 1024, "the values took room: {grown} bytes");

    let opening = std::time::Instant::now();
    let second = engine(&path);
    let shrunk = std::fs::metadata(&path).unwrap().len();
    eprintln!("compacted at open: {grown} -> {shrunk} bytes in {:?}", opening.elapsed());
    assert!(shrunk * 4 < grown, "the open gave the space back: {grown} -> {shrunk} bytes");
    let got = second
        .get(state_core::ops::kv::GetRequest { key: "keep".into(), version: None, revision: None })
        .await
        .unwrap();
    assert_eq!((got.value, got.revision), (Some(json!({"v": 2})), revision));
    let next = second.set(crate::support::set_req("after", json!(0), None)).await.unwrap();
    assert_eq!(next.revision, revision + 1, "revisions continue where they stopped");
}

/// The same, while the store serves: the writer compacts the file between two batches.
#[tokio::test]
async fn a_mostly_free_file_is_compacted_while_serving_and_keeps_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let engine = engine(&path);
    fill_with_holes_to_be(&engine).await;
    assert_eq!(engine.give_back_space().await.unwrap(), None, "a full file is left as it is");
    let revision = make_the_holes(&engine).await;
    let grown = std::fs::metadata(&path).unwrap().len();
    let given = engine.give_back_space().await.unwrap().expect("a mostly free file is compacted");
    eprintln!("compacted while serving: {given:?}");
    assert_eq!(given.before_bytes, grown);
    assert_eq!(given.after_bytes, std::fs::metadata(&path).unwrap().len());
    assert!(given.after_bytes * 4 < grown, "the space went back: {given:?}");
    assert!(given.in_use_bytes * 4 < grown, "what was in use was counted before: {given:?}");
    assert_eq!(engine.give_back_space().await.unwrap(), None, "nothing is left to give back");
    let get = |key: &str| state_core::ops::kv::GetRequest { key: key.into(), version: None, revision: None };
    let got = engine.get(get("keep")).await.unwrap();
    assert_eq!((got.value, got.revision), (Some(json!({"v": 2})), revision));
    assert!(engine.get(get("live/39")).await.unwrap().value.is_some());
    let next = engine.set(crate::support::set_req("after", json!(0), None)).await.unwrap();
    assert_eq!(next.revision, revision + 1, "revisions go on");
    engine.close().await;
    drop(engine);
    let reopened = crate::redb_file::engine(&path);
    assert_eq!(reopened.get(get("after")).await.unwrap().value, Some(json!(0)));
}

/// A reset wipes the store by dropping its tables, which frees every page at once: counted as
/// all of it, so the file shrinks while serving as after deleting key by key.
#[tokio::test]
async fn a_reset_store_gives_its_space_back_while_serving() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let engine = engine(&path);
    fill_with_holes_to_be(&engine).await;
    let reset =
        state_core::ops::admin::ResetRequest { confirm: "DELETE EVERYTHING".into(), agent_id: None, request_id: None };
    engine.reset(reset).await.unwrap();
    let given = engine.give_back_space().await.unwrap().expect("a wiped file is compacted");
    assert!(given.after_bytes * 4 < given.before_bytes, "the space went back: {given:?}");
    let after = engine.set(crate::support::set_req("after", json!(1), None)).await.unwrap();
    assert!(after.revision > 1, "revisions go on after a reset");
}
