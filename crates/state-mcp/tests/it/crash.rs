//! Crash safety with real processes: a server holding the database alone (`--standalone`, so
//! the process killed is the one that writes) acknowledges writes, is killed with SIGKILL at a
//! random moment, and the reopened database holds every acknowledged write, whole, and no
//! write that was never sent.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use state_api::catalog::Operation;
use state_api::{Local, Settings};
use state_e2e::{McpClient, ProtocolEra, result_of, tool_result};

const ROUNDS: u64 = 12;
const IN_FLIGHT: usize = 24;

/// xorshift: enough randomness for kill timing, reproducible from the printed seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn value_for(round: u64, n: u64) -> Value {
    // Sizes vary so that some writes span several pages.
    json!({"round": round, "n": n, "pad": "x".repeat((n as usize * 37) % 3000)})
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    let seed = std::env::var("CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64) | 1);
    eprintln!("crash test seed {seed} (rerun with CRASH_SEED={seed})");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crash.redb");
    let db_arg = db.to_string_lossy().into_owned();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();

    let mut acked: BTreeMap<String, Value> = BTreeMap::new();
    let mut total_acked_this_run = 0;
    for round in 0..ROUNDS {
        let mut client =
            McpClient::start(crate::binary(), &["--db", &db_arg, "--standalone"], ProtocolEra::Legacy).unwrap();
        let kill_after = Duration::from_millis(30 + rng.below(250));
        let started = Instant::now();
        let mut in_flight: HashMap<u64, (String, Value)> = HashMap::new();
        let mut n = 0u64;
        while started.elapsed() < kill_after {
            while in_flight.len() < IN_FLIGHT {
                let key = format!("r{round:02}/k{n:05}");
                let value = value_for(round, n);
                let args =
                    json!({"name": "state_set", "arguments": {"key": key, "value": value, "expected_version": 0}});
                let id = client.send_request("tools/call", args).unwrap();
                in_flight.insert(id, (key, value));
                n += 1;
            }
            let response = client.next_response(Duration::from_secs(30)).unwrap();
            let id = response["id"].as_u64().unwrap();
            let result = tool_result(result_of(response).unwrap()).unwrap();
            assert_eq!(result.json()["status"], "ok", "{}", result.text);
            let (key, value) = in_flight.remove(&id).unwrap();
            acked.insert(key, value);
            total_acked_this_run += 1;
        }
        client.kill().unwrap();

        // Reopen as a new process would, and check.
        let unacked: BTreeMap<String, Value> = in_flight.into_values().collect();
        runtime.block_on(async {
            let local = Local::open_standalone(&db, Settings::default()).expect("reopen after SIGKILL");
            let call = |op: Operation, args: Value| {
                let local = &local;
                async move { local.call(op, args).await.body.unwrap_or_else(|e| panic!("{}: {}", op.name(), e.message)) }
            };
            let mut present: BTreeMap<String, (u64, Value)> = BTreeMap::new();
            let mut cursor = Value::Null;
            loop {
                let args = json!({"prefix": "", "limit": 1000, "cursor": cursor, "include_values": true});
                let page = call(Operation::StateList, args).await;
                for e in page["entries"].as_array().unwrap() {
                    let key = e["key"].as_str().unwrap().to_owned();
                    present.insert(key, (e["version"].as_u64().unwrap(), e["value"].clone()));
                }
                match &page["next_cursor"] {
                    Value::Null => break,
                    next => cursor = next.clone(),
                }
            }
            for (key, value) in &acked {
                let (version, stored) =
                    present.get(key).unwrap_or_else(|| panic!("seed {seed} round {round}: acknowledged {key} lost"));
                assert_eq!((*version, stored), (1, value), "seed {seed}: {key} damaged");
            }
            for (key, (_, stored)) in &present {
                if !acked.contains_key(key) {
                    let sent = unacked.get(key).unwrap_or_else(|| panic!("seed {seed}: {key} was never sent"));
                    assert_eq!(stored, sent, "seed {seed}: unacknowledged {key} is half-written");
                }
            }
            // Writes that landed without an ack are now durable facts: later rounds expect them.
            for key in present.keys() {
                if let Some(value) = unacked.get(key) {
                    acked.insert(key.clone(), value.clone());
                }
            }
            // One revision per committed write, and a history entry for each: no torn batch.
            let revision = call(Operation::StateHealth, json!({})).await["revision"].as_u64().unwrap();
            assert_eq!(revision, present.len() as u64, "seed {seed}: revision counter disagrees with contents");
            let args = json!({"since_revision": revision.saturating_sub(1000), "n": 1000});
            let history = call(Operation::HistoryLog, args).await;
            for event in history["events"].as_array().unwrap() {
                let key = event["key"].as_str().unwrap();
                assert!(present.contains_key(key), "seed {seed}: history names missing {key}");
            }
            local.close().await;
        });
    }
    assert!(total_acked_this_run > ROUNDS as usize * 10, "the servers acknowledged too little to prove anything");
}

/// A note and its index entries are one transaction: after SIGKILL at a random moment, every
/// stored note is found by its own marker word and no note that is absent is found, so the
/// index never points at a note that is not there, or misses one that is.
#[test]
fn notes_and_their_index_survive_sigkill_together() {
    let seed = SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64) | 1;
    eprintln!("knowledge crash test seed {seed}");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("notes.redb");
    let db_arg = db.to_string_lossy().into_owned();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let marker = |round: u64, n: u64| format!("marker{round}x{n}");
    let mut acked: Vec<(String, String)> = Vec::new();
    for round in 0..4 {
        let args = ["--db", &db_arg, "--standalone", "--tools", "knowledge"];
        let mut client = McpClient::start(crate::binary(), &args, ProtocolEra::Legacy).unwrap();
        // The first save loads the tokenizer; the kill timer starts once the server is warm.
        let warm = json!({"id": format!("warm/{round}"), "content": "warm up", "request_id": format!("warm-{round}")});
        assert!(!client.call("knowledge_save", warm).unwrap().is_error);
        let kill_after = Duration::from_millis(100 + rng.below(300));
        let started = Instant::now();
        let mut in_flight: HashMap<u64, (String, String)> = HashMap::new();
        let mut sent: Vec<(String, String)> = Vec::new();
        let mut n = 0u64;
        while started.elapsed() < kill_after {
            while in_flight.len() < IN_FLIGHT {
                let (id, word) = (format!("r{round}/n{n:05}"), marker(round, n));
                let content = format!("Note {n} of round {round} about lease fencing and {word}.");
                let args = json!({"name": "knowledge_save", "arguments": {"id": id, "content": content}});
                let request = client.send_request("tools/call", args).unwrap();
                in_flight.insert(request, (id.clone(), word.clone()));
                sent.push((id, word));
                n += 1;
            }
            let response = client.next_response(Duration::from_secs(30)).unwrap();
            let request = response["id"].as_u64().unwrap();
            let result = tool_result(result_of(response).unwrap()).unwrap();
            assert_eq!(result.json()["status"], "ok", "{}", result.text);
            acked.push(in_flight.remove(&request).unwrap());
        }
        client.kill().unwrap();

        runtime.block_on(async {
            let local = Local::open_standalone(&db, Settings::default()).expect("reopen after SIGKILL");
            let mut present = std::collections::BTreeSet::new();
            let mut cursor = Value::Null;
            loop {
                let page = local.call(Operation::KnowledgeList, json!({"limit": 1000, "cursor": cursor})).await;
                let page = page.body.unwrap();
                present.extend(page["notes"].as_array().unwrap().iter().map(|n| n["id"].as_str().unwrap().to_owned()));
                match &page["next_cursor"] {
                    Value::Null => break,
                    next => cursor = next.clone(),
                }
            }
            for (id, _) in &acked {
                assert!(present.contains(id), "seed {seed}: acknowledged note {id} lost");
            }
            for (id, word) in &sent {
                let recalled = local.call(Operation::KnowledgeRecall, json!({"query": word})).await.body.unwrap();
                let found: Vec<&str> =
                    recalled["items"].as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap()).collect();
                let expected: Vec<&str> = if present.contains(id) { vec![id.as_str()] } else { Vec::new() };
                assert_eq!(found, expected, "seed {seed}: the index disagrees with the notes about {id}");
            }
            local.close().await;
        });
    }
    assert!(acked.len() > 40, "the servers acknowledged too little to prove anything: {}", acked.len());
}
