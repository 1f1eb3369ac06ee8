//! Semaphores and path reservations across processes: many `state-mcp` processes, one owner.

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
        let released =
            ok(client, "semaphore_release", json!({"name": "build-slots", "holder_id": holder, "token": token}));
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

/// Eight agents, each its own process, race to reserve overlapping parts of one repository
/// again and again: no path is ever held exclusively by two of them at once.
#[test]
fn racing_agents_never_both_hold_an_overlapping_path_reservation() {
    let place = Place::new();
    let tools = ["--tools", "kv,paths"];
    let mut watcher = place.start(&tools, ProtocolEra::Modern);
    let patterns = [json!(["src/**"]), json!(["src/lib.rs", "docs/"]), json!(["docs/*.md"]), json!(["**/*.rs"])];
    let workers: Vec<_> = (0..8)
        .map(|me| {
            let mut client = place.start(&tools, ProtocolEra::Legacy);
            let patterns = patterns.clone();
            thread::spawn(move || {
                let holder = format!("agent-{me}");
                let mut granted = 0;
                for round in 0..12 {
                    let mine = &patterns[(me + round) % patterns.len()];
                    let args = json!({"scope": "/repo", "holder_id": holder, "patterns": mine, "ttl_seconds": 60});
                    let got = ok(&mut client, "paths_reserve", args);
                    match got["status"].as_str() {
                        Some("granted") => {
                            granted += 1;
                            let id = got["reservation"]["reservation_id"].as_u64().unwrap();
                            let args = json!({"scope": "/repo", "holder_id": holder, "reservation_id": id});
                            assert_eq!(ok(&mut client, "paths_release", args)["status"], "ok");
                        }
                        Some("conflict") => assert!(!got["conflicts"].as_array().unwrap().is_empty(), "{got}"),
                        other => panic!("unexpected {other:?}: {got}"),
                    }
                }
                client.shutdown().unwrap();
                granted
            })
        })
        .collect();
    let granted: usize = workers.into_iter().map(|w| w.join().expect("an agent panicked")).sum();
    assert!(granted > 0, "some reservations were granted");

    // Replay the scope's history: between a grant and its release, no other holder was granted
    // an overlapping reservation.
    let history = ok(&mut watcher, "history_log", json!({"kind": "reservation", "key": "/repo", "n": 1000}));
    let events = history["events"].as_array().unwrap();
    let grants = events.iter().filter(|e| e["op"] == "grant").count();
    assert_eq!(grants, granted);
    let mut live: Vec<(u64, String, Vec<String>)> = Vec::new();
    let overlap = |a: &[String], b: &[String]| {
        let probes = ["src/lib.rs", "src/a/b.rs", "docs/x.md", "docs/a/b.md", "x.rs"];
        let covers = |patterns: &[String], probe: &str| {
            patterns.iter().any(|p| state_core::glob::Glob::parse(p).unwrap().matches(probe))
        };
        probes.iter().any(|probe| covers(a, probe) && covers(b, probe))
    };
    for event in events {
        let id = event["value"]["id"].as_u64();
        match event["op"].as_str() {
            Some("grant") => {
                let holder = event["agent_id"].as_str().unwrap().to_owned();
                let patterns: Vec<String> = serde_json::from_value(event["value"]["patterns"].clone()).unwrap();
                for (_, other, theirs) in &live {
                    assert!(
                        !(other != &holder && overlap(&patterns, theirs)),
                        "{holder} and {other} both held {patterns:?} / {theirs:?}"
                    );
                }
                live.push((id.unwrap(), holder, patterns));
            }
            Some("release") => live.retain(|(held, _, _)| Some(*held) != id),
            other => panic!("nothing expires within the test's 60 s reservations: {other:?}"),
        }
    }
    let contested = granted < 8 * 12;
    assert!(contested, "some reserves met a conflict (none: the agents never raced)");
}
