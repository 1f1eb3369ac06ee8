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

fn owner_pid(client: &mut McpClient) -> u32 {
    ok(client, "state_health", json!({}))["owner"]["pid"].as_u64().expect("health names the owner's pid") as u32
}

/// Eight workers, each its own process, drain a queue of messages with priorities, delays and
/// duplicate sends while the owner is killed mid-way: every message is processed and acked
/// exactly once, and a receipt from before a redelivery never acks.
#[test]
fn eight_workers_drain_a_queue_through_an_owner_kill() {
    const MESSAGES: u64 = 160;
    let place = Place::new();
    let tools = ["--tools", "kv,queue,admin"];
    let mut producer = place.start(&tools, ProtocolEra::Modern);
    let mut ids = BTreeSet::new();
    for n in 0..MESSAGES {
        let mut args = json!({"queue": "jobs", "body": {"n": n}, "priority": (n % 3) * 3, "sender": "producer"});
        if n % 8 == 0 {
            args["delay_seconds"] = json!(0.3);
        }
        if n < 40 {
            args["dedupe_key"] = json!(format!("job-{n}"));
        }
        let sent = ok(&mut producer, "queue_send", args);
        assert_eq!(sent["status"], "sent");
        ids.insert(sent["message_id"].as_str().unwrap().to_owned());
    }
    for n in 0..20u64 {
        let again = json!({"queue": "jobs", "body": {"n": n}, "dedupe_key": format!("job-{n}")});
        assert_eq!(ok(&mut producer, "queue_send", again)["status"], "duplicate", "job-{n} is still queued");
    }

    let processed = Arc::new(Mutex::new(Vec::<(String, u64)>::new()));
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let workers: Vec<_> = (0..8)
        .map(|me| {
            let mut client = place.start(&tools, if me % 2 == 0 { ProtocolEra::Legacy } else { ProtocolEra::Modern });
            let (processed, acked) = (processed.clone(), acked.clone());
            thread::spawn(move || {
                let mut empty_in_a_row = 0;
                while empty_in_a_row < 3 {
                    let args = json!({"queue": "jobs", "consumer_id": format!("w{me}"), "visibility_seconds": 5, "wait_seconds": 1});
                    let got = client.call("queue_receive", args).expect("tool call");
                    let got = got.json();
                    if got["status"] != "received" {
                        empty_in_a_row += 1;
                        continue;
                    }
                    empty_in_a_row = 0;
                    let message = &got["message"];
                    let id = message["message_id"].as_str().unwrap().to_owned();
                    processed.lock().unwrap().push((id.clone(), message["body"]["n"].as_u64().unwrap()));
                    let receipt = message["receipt"].as_u64().unwrap();
                    let ack = ok(&mut client, "queue_ack", json!({"queue": "jobs", "message_id": id, "receipt": receipt}));
                    if ack["status"] == "ok" {
                        acked.lock().unwrap().push(id);
                    }
                }
                client.shutdown().unwrap();
            })
        })
        .collect();

    // Kill the owner once the workers are well into the queue; the next call starts another.
    state_e2e::wait::until("50 messages processed", std::time::Duration::from_secs(60), || {
        processed.lock().unwrap().len() >= 50
    });
    let pid = owner_pid(&mut producer);
    let status = std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap();
    assert!(status.success());

    for worker in workers {
        worker.join().expect("a worker panicked");
    }
    assert_ne!(owner_pid(&mut producer), pid, "a new owner took over");
    let processed = processed.lock().unwrap();
    let seen: BTreeSet<u64> = processed.iter().map(|(_, n)| *n).collect();
    assert_eq!(seen, (0..MESSAGES).collect(), "every message was processed");
    let acked = acked.lock().unwrap();
    let acked_once: BTreeSet<&String> = acked.iter().collect();
    assert_eq!(acked.len(), acked_once.len(), "no message was acked twice");
    assert_eq!(acked_once.into_iter().cloned().collect::<BTreeSet<_>>(), ids, "every message was acked once");
    let left = ok(&mut producer, "queue_peek", json!({"queue": "jobs"}));
    assert_eq!(
        (left["visible"].as_u64(), left["in_flight"].as_u64(), left["delayed"].as_u64()),
        (Some(0), Some(0), Some(0))
    );
    let dead = ok(&mut producer, "queue_peek", json!({"queue": "jobs.dead"}));
    assert_eq!(dead["visible"], 0, "nothing was dead-lettered");
}

/// A DAG of 50 runs with priorities, drained by eight worker processes: no run is claimed
/// before every run it depends on completed, and every run completes.
#[test]
fn eight_workers_claim_a_dag_of_runs_in_dependency_order() {
    let place = Place::new();
    let tools = ["--tools", "kv,workflow,watch"];
    let mut planner = place.start(&tools, ProtocolEra::Modern);
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let mut runs: Vec<String> = Vec::new();
    let mut depends: std::collections::BTreeMap<String, Vec<String>> = std::collections::BTreeMap::new();
    for i in 0..50u64 {
        let parents: Vec<String> =
            if i == 0 { Vec::new() } else { (0..next(3)).map(|_| runs[next(i) as usize].clone()).collect() };
        let args = json!({"name": "dag", "depends_on": parents, "priority": next(10), "input": {"i": i}});
        let created = ok(&mut planner, "workflow_create", args);
        let id = created["run_id"].as_str().unwrap().to_owned();
        depends.insert(id.clone(), parents);
        runs.push(id);
    }
    let total = runs.len();
    let log = Arc::new(Mutex::new(Vec::<(String, u64, u64)>::new()));
    let workers: Vec<_> = (0..8)
        .map(|me| {
            let mut client = place.start(&tools, ProtocolEra::Legacy);
            let log = log.clone();
            thread::spawn(move || {
                let agent = format!("w{me}");
                loop {
                    if log.lock().unwrap().len() == total {
                        break;
                    }
                    let claim = ok(
                        &mut client,
                        "workflow_claim",
                        json!({"agent_id": agent, "name": "dag", "lease_ttl_seconds": 60}),
                    );
                    if claim["status"] != "claimed" {
                        // Nothing claimable now: wait for the next change to any run.
                        let after = claim["revision"].as_u64().unwrap();
                        ok(
                            &mut client,
                            "state_watch",
                            json!({"kind": "workflow", "after_revision": after, "timeout_seconds": 1}),
                        );
                        continue;
                    }
                    let run = claim["run_id"].as_str().unwrap().to_owned();
                    let token = claim["token"].as_u64().unwrap();
                    let done = ok(
                        &mut client,
                        "workflow_complete",
                        json!({"run_id": run, "agent_id": agent, "token": token, "result": me}),
                    );
                    assert_eq!(done["status"], "ok", "{done}");
                    let claimed_at = claim["revision"].as_u64().unwrap();
                    log.lock().unwrap().push((run, claimed_at, done["revision"].as_u64().unwrap()));
                }
                client.shutdown().unwrap();
            })
        })
        .collect();
    // The planner waits for the last run's result as a caller would: each call returns when
    // the run finishes, or after at most 10 s with it still going.
    let last = runs.last().unwrap().clone();
    let outcome = (0..12)
        .map(|_| ok(&mut planner, "workflow_status", json!({"run_id": last, "wait_seconds": 10})))
        .find(|status| status["run"]["run_status"] != "pending" && status["run"]["run_status"] != "running")
        .expect("the last run finished within two minutes");
    assert_eq!(outcome["run"]["run_status"], "completed", "{outcome}");
    assert!(outcome["result"].as_u64().is_some_and(|worker| worker < 8), "the worker's result: {outcome}");
    for worker in workers {
        worker.join().expect("a worker panicked");
    }
    let log = log.lock().unwrap();
    let by_run: std::collections::BTreeMap<&str, (u64, u64)> =
        log.iter().map(|(run, claimed, completed)| (run.as_str(), (*claimed, *completed))).collect();
    assert_eq!(by_run.len(), total, "every run completed exactly once");
    for (run, parents) in &depends {
        let (claimed, _) = by_run[run.as_str()];
        for parent in parents {
            let (_, parent_done) = by_run[parent.as_str()];
            assert!(
                claimed > parent_done,
                "{run} was claimed at revision {claimed}, before {parent} completed at {parent_done}"
            );
        }
    }
}
