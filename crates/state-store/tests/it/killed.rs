//! Real processes killed at every phase of a commit and a checkpoint: half-way through a log
//! append, after the append's sync and before the callers were answered, after they were
//! answered and before redb applied the batch, after the commit, after a checkpoint's durable
//! commit and before the log starts over, half-way through the log's new header. A child
//! process (this test binary, re-run on one test) writes under concurrent load and prints each
//! write it saw acknowledged; it aborts at the chosen point (feature `failpoints`), and the
//! reopened store must hold every acknowledged write, transactions whole, and go on. Every
//! phase is run against both ways the log reaches the disk: direct writes (Linux's), and
//! buffered writes with a sync to the medium (macOS's, and Linux's where direct I/O is refused).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use serde_json::json;
use state_core::ops::kv::{GetRequest, ListRequest};
use state_store::{Engine, EngineConfig, RedbBackend, SystemClock};

use crate::support::{set_req, txn};

const PHASES: [&str; 6] =
    ["torn-append", "wal-synced", "acknowledged", "committed", "checkpoint-durable", "torn-header"];

fn open(db: &Path) -> Engine {
    let backend = RedbBackend::open(db).unwrap_or_else(|e| panic!("reopen after the kill: {e}"));
    backend.set_checkpoint_bytes(8 * 1024);
    Engine::new(Arc::new(backend), Arc::new(SystemClock), EngineConfig::default()).unwrap()
}

fn get(key: &str) -> GetRequest {
    GetRequest { key: key.to_owned(), version: None, revision: None }
}

/// The child: writes from four tasks until the armed point aborts it, printing each
/// acknowledged write. Runs only when the parent below starts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_writes_until_its_failpoint() {
    let (Ok(db), Ok(cycle)) = (std::env::var("KILLED_DB"), std::env::var("KILLED_CYCLE")) else { return };
    let engine = open(Path::new(&db));
    let mut tasks = Vec::new();
    for task in 0..4 {
        let (engine, cycle) = (engine.clone(), cycle.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..3000u64 {
                let key = format!("c{cycle}/t{task}/{i}");
                let line = if i % 3 == 0 {
                    let spec = json!({"success": [
                        {"op": "put", "key": format!("{key}/a"), "value": i},
                        {"op": "put", "key": format!("{key}/b"), "value": i},
                    ]});
                    engine.txn(txn(spec)).await.unwrap();
                    format!("pair {key} {i}")
                } else {
                    engine.set(set_req(&key, json!(i), None)).await.unwrap();
                    format!("ack {key} {i}")
                };
                let mut out = std::io::stdout().lock();
                writeln!(out, "{line}").unwrap();
                out.flush().unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    engine.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_killed_at_any_phase_of_a_commit_loses_nothing_acknowledged() {
    if std::env::var_os("KILLED_DB").is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("killed.redb");
    let mut kills = 0;
    let mut acknowledged = 0;
    for cycle in 0..100usize {
        let phase = PHASES[cycle % PHASES.len()];
        // Early and late passes of each point: the first commit, and deep into a run.
        let pass = 1 + (cycle / PHASES.len()) * 7 % 60;
        let log_writes = if (cycle / PHASES.len()).is_multiple_of(2) { "direct" } else { "buffered" };
        let child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "killed::child_writes_until_its_failpoint", "--nocapture"])
            .env("KILLED_DB", &db)
            .env("KILLED_CYCLE", cycle.to_string())
            .env("STATE_FAILPOINT", format!("{phase}:{pass}"))
            .env("STATE_LOG_WRITES", log_writes)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut child = child;
        let mut keys = Vec::new();
        let mut pairs = Vec::new();
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line.unwrap();
            let mut words = line.split(' ');
            match (words.next(), words.next(), words.next().and_then(|n| n.parse::<u64>().ok())) {
                (Some("ack"), Some(key), Some(n)) => keys.push((key.to_owned(), n)),
                (Some("pair"), Some(key), Some(n)) => pairs.push((key.to_owned(), n)),
                _ => {}
            }
        }
        let status = child.wait().unwrap();
        if status.signal() == Some(6) {
            kills += 1;
        } else {
            assert!(status.success(), "cycle {cycle} ({phase}:{pass}, {log_writes}): the child failed: {status}");
        }

        let engine = open(&db);
        for (key, n) in &keys {
            let got = engine.get(get(key)).await.unwrap().value;
            assert_eq!(
                got,
                Some(json!(n)),
                "cycle {cycle}, killed at {phase}:{pass} ({log_writes}): acknowledged {key} lost"
            );
        }
        for (key, n) in &pairs {
            for half in ["a", "b"] {
                let got = engine.get(get(&format!("{key}/{half}"))).await.unwrap().value;
                assert_eq!(
                    got,
                    Some(json!(n)),
                    "cycle {cycle}, killed at {phase}:{pass} ({log_writes}): {key}/{half} lost"
                );
            }
        }
        // Writes that landed unacknowledged are whole: a transaction's pair has both halves.
        let mut cursor = None;
        loop {
            let request = ListRequest {
                prefix: format!("c{cycle}/"),
                limit: Some(1000),
                cursor,
                include_values: false,
                delimiter: None,
            };
            let page = engine.list(request).await.unwrap();
            for entry in page.entries.iter().filter(|e| e.key.ends_with("/a")) {
                let twin = format!("{}/b", entry.key.trim_end_matches("/a"));
                assert!(engine.get(get(&twin)).await.unwrap().value.is_some(), "{} without {twin}", entry.key);
            }
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        acknowledged += keys.len() + pairs.len();
        engine.close().await;
    }
    assert!(kills >= 90, "only {kills} of 100 children reached their failpoint");
    assert!(acknowledged > 1000, "too few writes acknowledged ({acknowledged}) to prove anything");
}
