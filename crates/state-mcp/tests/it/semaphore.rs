//! Semaphores across processes: many `state-mcp` processes, one owner, one capacity.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::thread;

use serde_json::{Value, json};
use state_e2e::{McpClient, ProtocolEra};

use crate::Place;

fn ok(client: &mut McpClient, tool: &str, args: Value) -> Value {
    let result = client.call(tool, args.clone()).expect("tool call");
    assert!(!result.is_error, "{tool} {args} failed: {}", result.text);
    result.json()
}

const CAPACITY: usize = 3;
const CONTENDERS: usize = 16;
const ROUNDS: usize = 4;

/// Takes a permit `ROUNDS` times, waiting for one each time; while holding it, marks itself
/// in the store and counts the marks, which can only exceed the capacity if two more holders
/// than permits were ever inside at once. Returns the tokens granted and the most marks seen.
fn contend(client: &mut McpClient, me: usize) -> (Vec<u64>, usize) {
    let holder = format!("agent-{me}");
    let mut tokens = Vec::new();
    let mut most = 0;
    for _ in 0..ROUNDS {
        let args = json!({"name": "build-slots", "holder_id": holder, "capacity": CAPACITY, "ttl_seconds": 60, "wait_seconds": 50});
        let got = ok(client, "semaphore_acquire", args);
        assert_eq!(got["status"], "acquired", "{holder} waited for a permit and got one: {got}");
        let token = got["token"].as_u64().unwrap();
        tokens.push(token);
        ok(client, "state_set", json!({"key": format!("inside/{holder}"), "value": token}));
        let inside = ok(client, "state_list", json!({"prefix": "inside/"}))["entries"].as_array().unwrap().len();
        most = most.max(inside);
        ok(client, "state_delete", json!({"key": format!("inside/{holder}")}));
        let released = ok(client, "semaphore_release", json!({"name": "build-slots", "holder_id": holder, "token": token}));
        assert_eq!(released["status"], "ok");
    }
    (tokens, most)
}

#[test]
fn sixteen_processes_never_hold_more_permits_than_the_capacity() {
    let place = Place::new();
    let tools = ["--tools", "kv,semaphore"];
    let mut watcher = place.start(&tools, ProtocolEra::Modern);
    let most_seen = Arc::new(Mutex::new(0usize));
    let workers: Vec<_> = (0..CONTENDERS)
        .map(|me| {
            let mut client = place.start(&tools, if me % 2 == 0 { ProtocolEra::Legacy } else { ProtocolEra::Modern });
            let most_seen = most_seen.clone();
            thread::spawn(move || {
                let (tokens, most) = contend(&mut client, me);
                let mut seen = most_seen.lock().unwrap();
                *seen = (*seen).max(most);
                client.shutdown().unwrap();
                tokens
            })
        })
        .collect();
    let mut tokens = BTreeSet::new();
    let mut granted = 0;
    for worker in workers {
        for token in worker.join().expect("a contender panicked") {
            granted += 1;
            tokens.insert(token);
        }
    }
    assert_eq!(granted, CONTENDERS * ROUNDS, "every contender got every permit it waited for");
    assert_eq!(tokens.len(), granted, "every grant carried its own fencing token");
    let most = *most_seen.lock().unwrap();
    assert!(most <= CAPACITY, "{most} holders were inside at once, over the capacity of {CAPACITY}");

    let now = ok(&mut watcher, "semaphore_get", json!({"name": "build-slots"}));
    assert_eq!(now["holders"], json!([]), "every permit was given back: {now}");
    let history = ok(&mut watcher, "history_log", json!({"kind": "semaphore", "key": "build-slots", "n": 1000}));
    let events = history["events"].as_array().unwrap();
    let grants = events.iter().filter(|e| e["op"] == "grant").count();
    assert_eq!(grants, granted, "history records each grant");
    // Replaying the history, no more than the capacity were ever held at once.
    let mut held: i64 = 0;
    let mut peak = 0;
    for event in events {
        match event["op"].as_str() {
            Some("grant") => held += 1,
            Some("release" | "expire") => held -= 1,
            _ => {}
        }
        peak = peak.max(held);
    }
    assert_eq!(peak, CAPACITY as i64, "the permits were contended for (peak below capacity proves nothing)");
}
