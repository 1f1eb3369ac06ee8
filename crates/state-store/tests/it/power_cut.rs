//! Power cuts under load, on disks that forget everything written since their last sync: the
//! database file and its write-ahead log alike. Every acknowledged write survives; a
//! transaction is there whole or not at all; the store reopens at a revision that covers
//! everything acknowledged, and goes on from it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::json;
use state_core::ops::kv::GetRequest;
use state_store::backend::redb::faults::Volatile;
use state_store::{Engine, EngineConfig, RedbBackend, SystemClock};

use crate::support::{set_req, txn};

fn engine_on(dir: &std::path::Path, disk: &Volatile, log: &Volatile, checkpoint_bytes: u64) -> Engine {
    let backend = RedbBackend::open_volatile(&dir.join("state.redb"), disk, log).expect("opens after the cut");
    backend.set_checkpoint_bytes(checkpoint_bytes);
    Engine::new(Arc::new(backend), Arc::new(SystemClock), EngineConfig::default()).expect("engine")
}

fn get(key: String) -> GetRequest {
    GetRequest { key, version: None, revision: None }
}

/// What one writer had acknowledged before the power went: single keys, and pairs written by
/// one transaction.
#[derive(Default)]
struct Acknowledged {
    keys: Vec<(String, u64)>,
    pairs: Vec<(String, String, u64)>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_write_survives_a_power_cut_at_any_moment() {
    let dir = tempfile::tempdir().unwrap();
    let (mut disk, mut log) = (Volatile::default(), Volatile::default());
    let mut revision = 0;
    let mut survivors: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    // Small checkpoints, so cuts land before, during and after them too.
    for cycle in 0..12u64 {
        let engine = engine_on(dir.path(), &disk, &log, 16 * 1024 + cycle * 4096);
        assert!(engine.revision().await.unwrap() >= revision, "cycle {cycle}: the store went back in time");
        for (key, n) in &survivors {
            let got = engine.get(get(key.clone())).await.unwrap();
            assert_eq!(got.value.as_ref(), Some(n), "cycle {cycle}: {key} was acknowledged and is gone");
        }
        let cut = Arc::new(AtomicBool::new(false));
        let mut writers = Vec::new();
        for writer in 0..4u64 {
            let (engine, cut) = (engine.clone(), cut.clone());
            writers.push(tokio::spawn(async move {
                let mut acknowledged = Acknowledged::default();
                for i in 0..10_000u64 {
                    let key = format!("c{cycle}/w{writer}/{i}");
                    let done = if i % 3 == 0 {
                        let spec = json!({"success": [
                            {"op": "put", "key": format!("{key}/a"), "value": i},
                            {"op": "put", "key": format!("{key}/b"), "value": i},
                        ]});
                        engine.txn(txn(spec)).await.map(|_| ())
                    } else {
                        engine.set(set_req(&key, json!(i), None)).await.map(|_| ())
                    };
                    // The cut is flagged before it is taken: a write seen acknowledged with
                    // the flag still down was synced before the cut.
                    if done.is_err() || cut.load(Ordering::SeqCst) {
                        break;
                    }
                    if i % 3 == 0 {
                        acknowledged.pairs.push((format!("{key}/a"), format!("{key}/b"), i));
                    } else {
                        acknowledged.keys.push((key, i));
                    }
                }
                acknowledged
            }));
        }
        // Let the writers run for a while that differs each cycle, then cut the power.
        tokio::time::sleep(std::time::Duration::from_millis(20 + cycle * 17 % 90)).await;
        cut.store(true, Ordering::SeqCst);
        let crashed = Volatile::crashed_together(&[&disk, &log]);
        let (crashed_disk, crashed_log) = (crashed[0].clone(), crashed[1].clone());
        let mut acknowledged = Vec::new();
        for writer in writers {
            acknowledged.push(writer.await.unwrap());
        }
        engine.close().await;
        drop(engine);
        (disk, log) = (crashed_disk, crashed_log);

        let reopened = engine_on(dir.path(), &disk, &log, 1 << 20);
        let mut count = 0;
        for ack in &acknowledged {
            for (key, n) in &ack.keys {
                assert_eq!(reopened.get(get(key.clone())).await.unwrap().value, Some(json!(n)), "cycle {cycle}: {key}");
                survivors.insert(key.clone(), json!(n));
                count += 1;
            }
            for (a, b, n) in &ack.pairs {
                for key in [a, b] {
                    assert_eq!(reopened.get(get(key.clone())).await.unwrap().value, Some(json!(n)), "{key}");
                    survivors.insert(key.clone(), json!(n));
                }
                count += 1;
            }
        }
        // Whatever else made it (synced, never seen acknowledged) is whole: a pair has both.
        let listed = reopened
            .list(state_core::ops::kv::ListRequest {
                prefix: format!("c{cycle}/"),
                limit: Some(1000),
                cursor: None,
                include_values: false,
                delimiter: None,
            })
            .await
            .unwrap();
        for entry in listed.entries.iter().filter(|e| e.key.ends_with("/a")) {
            let twin = format!("{}/b", entry.key.trim_end_matches("/a"));
            assert!(reopened.get(get(twin.clone())).await.unwrap().value.is_some(), "{} without {twin}", entry.key);
        }
        revision = reopened.revision().await.unwrap();
        assert!(revision >= count, "cycle {cycle}: revision {revision} below {count} acknowledged commits");
        assert!(count > 0, "cycle {cycle}: nothing was acknowledged before the cut");
        // It goes on from there, and a clean close leaves it all on the disk.
        reopened.set(set_req(&format!("c{cycle}/after"), json!(true), None)).await.unwrap();
        survivors.insert(format!("c{cycle}/after"), json!(true));
        reopened.close().await;
        drop(reopened);
        (disk, log) = (disk.crashed_copy(), log.crashed_copy());
    }
}

#[tokio::test]
async fn damage_in_the_middle_of_the_log_refuses_to_open_and_names_the_place() {
    let dir = tempfile::tempdir().unwrap();
    let (disk, log) = (Volatile::default(), Volatile::default());
    let engine = engine_on(dir.path(), &disk, &log, 1 << 30);
    for i in 0..20 {
        engine.set(set_req(&format!("k{i}"), json!({"n": i, "pad": "x".repeat(900)}), None)).await.unwrap();
    }
    // The power goes before any checkpoint: the log holds all twenty, and one of the first is
    // damaged.
    let (disk, log) = (disk.crashed_copy(), log.crashed_copy());
    engine.close().await;
    log.damage(4096 + 40);
    let refused = match RedbBackend::open_volatile(&dir.path().join("state.redb"), &disk, &log) {
        Err(error) => error.to_string(),
        Ok(_) => panic!("a log damaged before acknowledged records was opened"),
    };
    assert!(refused.contains("state.redb.wal") && refused.contains("damaged at offset 4096"), "{refused}");
    // It says how much follows the damage, and what to do (issue 31).
    assert!(refused.contains("19 acknowledged write batches follow the damage"), "{refused}");
    assert!(refused.contains("--accept-lost-writes") && refused.contains("backup"), "{refused}");
}
