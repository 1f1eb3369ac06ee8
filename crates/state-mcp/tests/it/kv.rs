//! The key-value tools through the real binary.

use serde_json::{Value, json};

use crate::TestServer;

fn ok(server: &mut TestServer, tool: &str, args: Value) -> Value {
    let result = server.client.call(tool, args.clone()).expect("tool call");
    assert!(!result.is_error, "{tool} {args} failed: {}", result.text);
    result.json()
}

#[test]
fn create_read_compare_and_set() {
    let mut s = TestServer::in_process(&[]);
    let created = ok(
        &mut s,
        "state_set",
        json!({"key": "plan/today", "value": {"step": 1}, "expected_version": 0, "agent_id": "planner"}),
    );
    assert_eq!(
        (created["status"].as_str(), created["version"].as_u64(), created["revision"].as_u64()),
        (Some("ok"), Some(1), Some(1))
    );

    let read = ok(&mut s, "state_get", json!({"key": "plan/today"}));
    assert_eq!(read["value"], json!({"step": 1}));
    assert_eq!((read["version"].as_u64(), read["agent_id"].as_str()), (Some(1), Some("planner")));

    let updated = ok(&mut s, "state_set", json!({"key": "plan/today", "value": {"step": 2}, "expected_version": 1}));
    assert_eq!(
        (updated["status"].as_str(), updated["version"].as_u64(), updated["revision"].as_u64()),
        (Some("ok"), Some(2), Some(2))
    );

    // A writer still holding version 1 loses, and learns the current state from the result.
    let stale = ok(&mut s, "state_set", json!({"key": "plan/today", "value": {"step": 99}, "expected_version": 1}));
    assert_eq!(stale["status"], "conflict");
    assert_eq!((stale["version"].as_u64(), stale["expected_version"].as_u64()), (Some(2), Some(1)));
    assert_eq!(stale["value"], json!({"step": 2}));

    let again = ok(&mut s, "state_set", json!({"key": "plan/today", "value": {"step": 3}, "expected_version": 0}));
    assert_eq!(
        (again["status"].as_str(), again["version"].as_u64()),
        (Some("conflict"), Some(2)),
        "create-only on an existing key"
    );

    let deleted = ok(&mut s, "state_delete", json!({"key": "plan/today", "expected_version": 2}));
    assert_eq!((deleted["status"].as_str(), deleted["revision"].as_u64()), (Some("ok"), Some(3)));
    let gone = ok(&mut s, "state_get", json!({"key": "plan/today"}));
    assert_eq!((gone["status"].as_str(), gone["version"].as_u64()), (Some("not_found"), Some(0)));
}

#[test]
fn ttl_keys_vanish_on_time() {
    let clock = crate::manual_clock();
    let mut s = TestServer::in_process_with_clock(&[], std::sync::Arc::new(clock.clone()));
    ok(&mut s, "state_set", json!({"key": "lock/job", "value": "mine", "ttl_seconds": 40}));
    let live = ok(&mut s, "state_get", json!({"key": "lock/job"}));
    assert_eq!(live["status"], "ok");
    assert_eq!(live["expires_at"], "2026-11-26T12:00:40.000Z");

    // Not a millisecond early; gone the instant it is due.
    clock.advance_millis(39_999);
    assert_eq!(ok(&mut s, "state_get", json!({"key": "lock/job"}))["status"], "ok");
    clock.advance_millis(1);
    assert_eq!(ok(&mut s, "state_get", json!({"key": "lock/job"}))["status"], "not_found");
    // Once gone, it can be created again from scratch.
    let recreated = ok(&mut s, "state_set", json!({"key": "lock/job", "value": "yours", "expected_version": 0}));
    assert_eq!((recreated["status"].as_str(), recreated["version"].as_u64()), (Some("ok"), Some(1)));
}

#[test]
fn transactions_are_all_or_nothing() {
    let mut s = TestServer::in_process(&[]);
    ok(&mut s, "state_set", json!({"key": "inv/apples", "value": 5}));
    let take = |version: u64| {
        json!({
            "compare": [{"key": "inv/apples", "version": version}, {"key": "orders/1", "exists": false}],
            "success": [
                {"op": "put", "key": "inv/apples", "value": 4},
                {"op": "put", "key": "orders/1", "value": {"item": "apple"}},
            ],
            "failure": [{"op": "get", "key": "inv/apples"}, {"op": "get", "key": "orders/1"}],
        })
    };
    let first = ok(&mut s, "state_txn", take(1));
    assert_eq!((first["succeeded"].as_bool(), first["revision"].as_u64()), (Some(true), Some(2)));
    let second = ok(&mut s, "state_txn", take(1));
    assert_eq!(second["succeeded"], false);
    assert_eq!(second["failed_compares"], json!([0, 1]));
    assert_eq!(second["results"][0]["value"], 4);
    assert_eq!(second["revision"], 2, "the failed transaction wrote nothing");

    let batch = ok(&mut s, "state_batch_get", json!({"keys": ["inv/apples", "orders/1", "nope"]}));
    let statuses: Vec<&str> =
        batch["entries"].as_array().unwrap().iter().filter_map(|e| e["status"].as_str()).collect();
    assert_eq!(statuses, ["ok", "ok", "not_found"]);
    assert_eq!(batch["entries"][1]["mod_revision"], 2, "both keys were written by one revision");
}

#[test]
fn history_and_reading_past_versions() {
    let mut s = TestServer::in_process(&[]);
    for (value, agent) in [("draft", "writer"), ("review", "reviewer"), ("final", "writer")] {
        ok(&mut s, "state_set", json!({"key": "doc/status", "value": value, "agent_id": agent}));
    }
    ok(&mut s, "state_set", json!({"key": "doc/other", "value": 1}));

    let log = ok(&mut s, "history_log", json!({"key": "doc/status"}));
    let events: Vec<(u64, &str, &str)> = log["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["version"].as_u64().unwrap(), e["op"].as_str().unwrap(), e["agent_id"].as_str().unwrap()))
        .collect();
    assert_eq!(events, [(1, "put", "writer"), (2, "put", "reviewer"), (3, "put", "writer")]);
    assert!(log["events"][0]["time"].as_str().unwrap().ends_with('Z'));

    let v2 = ok(&mut s, "state_get", json!({"key": "doc/status", "version": 2}));
    assert_eq!((v2["value"].as_str(), v2["version"].as_u64()), (Some("review"), Some(2)));
    let at_rev1 = ok(&mut s, "state_get", json!({"key": "doc/status", "revision": 1}));
    assert_eq!(at_rev1["value"], "draft");

    let since = ok(&mut s, "history_log", json!({"since_revision": 3}));
    assert_eq!(since["events"].as_array().unwrap().len(), 1);
    assert_eq!(since["events"][0]["key"], "doc/other");
    let by_prefix = ok(&mut s, "history_log", json!({"prefix": "doc/", "n": 2}));
    assert_eq!(by_prefix["more"], true);

    let listing = ok(&mut s, "state_list", json!({"prefix": "doc/", "include_values": true}));
    let keys: Vec<&str> = listing["entries"].as_array().unwrap().iter().filter_map(|e| e["key"].as_str()).collect();
    assert_eq!(keys, ["doc/other", "doc/status"]);

    let health = ok(&mut s, "state_health", json!({}));
    assert_eq!(
        (health["backend"].as_str(), health["revision"].as_u64(), health["keys"].as_u64()),
        (Some("redb"), Some(4), Some(2))
    );
    assert!(health["database_bytes"].as_u64().is_some_and(|b| b > 0));
}

#[test]
fn pipelined_calls_from_one_client_all_commit() {
    let mut s = TestServer::in_process(&[]);
    let n = 200;
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(
            s.client
                .send_request(
                    "tools/call",
                    json!({"name": "state_set", "arguments": {"key": format!("p/{i:03}"), "value": i}}),
                )
                .unwrap(),
        );
    }
    for id in ids {
        let response = s.client.wait_response(id).unwrap();
        let result = state_e2e::tool_result(state_e2e::result_of(response).unwrap()).unwrap();
        assert_eq!(result.json()["status"], "ok");
    }
    let health = ok(&mut s, "state_health", json!({}));
    assert_eq!((health["revision"].as_u64(), health["keys"].as_u64()), (Some(n), Some(n)));
}
