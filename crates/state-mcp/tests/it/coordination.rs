//! Leases, workflow runs and sessions through the real binary, as an agent would use them.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::{TestServer, manual_clock};

fn ok(server: &mut TestServer, tool: &str, args: Value) -> Value {
    let result = server.client.call(tool, args.clone()).expect("tool call");
    assert!(!result.is_error, "{tool} {args} failed: {}", result.text);
    result.json()
}

#[test]
fn a_lease_fences_the_writes_of_a_holder_that_lost_it() {
    let clock = manual_clock();
    let mut s = TestServer::in_process_with_clock(&[], Arc::new(clock.clone()));
    let a =
        ok(&mut s, "lease_acquire", json!({"resource_id": "deploy/prod", "holder_id": "agent-a", "ttl_seconds": 30}));
    assert_eq!(a["status"], "acquired");
    let a_token = a["token"].as_u64().unwrap();
    let held =
        ok(&mut s, "lease_acquire", json!({"resource_id": "deploy/prod", "holder_id": "agent-b", "ttl_seconds": 5}));
    assert_eq!((held["status"].as_str(), held["holder"].as_str()), (Some("held"), Some("agent-a")));
    let guarded = |token: u64| json!({"key": "prod/version", "value": "v2", "lease": "deploy/prod", "token": token});
    assert_eq!(ok(&mut s, "state_set", guarded(a_token))["status"], "ok");

    // agent-a stalls past its lease; agent-b takes over.
    clock.advance_millis(30_001);
    let b =
        ok(&mut s, "lease_acquire", json!({"resource_id": "deploy/prod", "holder_id": "agent-b", "ttl_seconds": 5}));
    assert_eq!(b["status"], "acquired", "{b}");
    let b_token = b["token"].as_u64().unwrap();
    assert!(b_token > a_token, "the new holder's token is larger");

    let stale = ok(&mut s, "state_set", guarded(a_token));
    assert_eq!(stale["status"], "fenced");
    assert!(stale["message"].as_str().unwrap().contains("agent-b"));
    let renew = ok(
        &mut s,
        "lease_renew",
        json!({"resource_id": "deploy/prod", "holder_id": "agent-a", "token": a_token, "ttl_seconds": 5}),
    );
    assert_eq!((renew["status"].as_str(), renew["holder"].as_str()), (Some("lost"), Some("agent-b")));
    assert_eq!(ok(&mut s, "state_set", guarded(b_token))["status"], "ok");
    let who = ok(&mut s, "lease_get", json!({"resource_id": "deploy/prod"}));
    assert_eq!((who["status"].as_str(), who["holder"].as_str()), (Some("held"), Some("agent-b")));
    assert!(who.get("token").is_none(), "reads never reveal tokens");
    let released =
        ok(&mut s, "lease_release", json!({"resource_id": "deploy/prod", "holder_id": "agent-b", "token": b_token}));
    assert_eq!(released["status"], "ok");
    let history = ok(&mut s, "history_log", json!({"kind": "lease", "key": "deploy/prod"}));
    let ops: Vec<&str> = history["events"].as_array().unwrap().iter().filter_map(|e| e["op"].as_str()).collect();
    assert_eq!(ops, ["grant", "expire", "grant", "release"]);
}

#[test]
fn a_run_survives_its_worker_and_the_old_worker_is_fenced() {
    let clock = manual_clock();
    let mut s = TestServer::in_process_with_clock(&[], Arc::new(clock.clone()));
    let created = ok(
        &mut s,
        "workflow_create",
        json!({"name": "ingest", "tags": {"queue": "io"}, "input": {"files": 3}, "max_attempts": 3}),
    );
    let run = created["run_id"].as_str().unwrap().to_owned();
    let claim = |agent: &str| json!({"agent_id": agent, "tags": {"queue": "io"}, "lease_ttl_seconds": 30});
    let first = ok(&mut s, "workflow_claim", claim("w1"));
    assert_eq!(
        (first["status"].as_str(), first["run_id"].as_str(), first["attempt"].as_u64()),
        (Some("claimed"), Some(run.as_str()), Some(1))
    );
    assert_eq!(first["input"], json!({"files": 3}));
    let t1 = first["token"].as_u64().unwrap();
    let step = |agent: &str, token: u64, n: u64| json!({"run_id": run, "agent_id": agent, "token": token, "step": n, "output": {"file": n}});
    assert_eq!(ok(&mut s, "workflow_checkpoint", step("w1", t1, 1))["status"], "ok");
    assert_eq!(ok(&mut s, "workflow_checkpoint", step("w1", t1, 1))["status"], "duplicate");
    assert_eq!(ok(&mut s, "workflow_claim", claim("w2"))["status"], "none_available");

    // w1 dies. Its claim lapses and w2 picks the run up where w1 left it.
    clock.advance_millis(30_001);
    let second = ok(&mut s, "workflow_claim", claim("w2"));
    assert_eq!(second["status"], "claimed", "{second}");
    assert_eq!((second["attempt"].as_u64(), second["last_step"].as_u64()), (Some(2), Some(1)));
    let t2 = second["token"].as_u64().unwrap();
    let resumed = ok(&mut s, "workflow_resume", json!({"run_id": run}));
    assert_eq!(resumed["steps"][0]["output"], json!({"file": 1}));
    assert_eq!(
        ok(
            &mut s,
            "workflow_heartbeat",
            json!({"run_id": run, "agent_id": "w2", "token": t2, "lease_ttl_seconds": 30})
        )["status"],
        "ok"
    );
    let zombie = ok(&mut s, "workflow_checkpoint", step("w1", t1, 2));
    assert_eq!(zombie["status"], "fenced", "{zombie}");
    assert_eq!(ok(&mut s, "workflow_checkpoint", step("w2", t2, 2))["status"], "ok");
    assert_eq!(ok(&mut s, "workflow_checkpoint", step("w2", t2, 3))["status"], "ok");
    let done =
        ok(&mut s, "workflow_complete", json!({"run_id": run, "agent_id": "w2", "token": t2, "result": {"rows": 30}}));
    assert_eq!(done["run_status"], "completed");
    assert_eq!(
        ok(&mut s, "workflow_complete", json!({"run_id": run, "agent_id": "w1", "token": t1}))["status"],
        "fenced"
    );

    let status = ok(&mut s, "workflow_status", json!({"run_id": run}));
    assert_eq!(
        (status["run"]["run_status"].as_str(), status["run"]["last_step"].as_u64()),
        (Some("completed"), Some(3))
    );
    let listed = ok(&mut s, "workflow_list", json!({"status": "completed"}));
    assert_eq!(listed["runs"].as_array().unwrap().len(), 1);
    let history = ok(&mut s, "history_log", json!({"kind": "workflow", "key": run}));
    let ops: Vec<&str> = history["events"].as_array().unwrap().iter().filter_map(|e| e["op"].as_str()).collect();
    assert_eq!(
        ops,
        [
            "create",
            "claim",
            "checkpoint",
            "claim_expired",
            "reclaim",
            "heartbeat",
            "checkpoint",
            "checkpoint",
            "complete"
        ]
    );
}

#[test]
fn failures_retry_then_fail_and_runs_can_be_cancelled() {
    let mut s = TestServer::in_process(&[]);
    let run = ok(&mut s, "workflow_create", json!({"name": "flaky", "max_attempts": 2}))["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    for (attempt, expected) in [(1, "pending"), (2, "failed")] {
        let claimed = ok(&mut s, "workflow_claim", json!({"agent_id": "w", "run_id": run}));
        assert_eq!(claimed["attempt"], attempt);
        let failed = ok(
            &mut s,
            "workflow_fail",
            json!({"run_id": run, "agent_id": "w", "token": claimed["token"], "error": "timeout"}),
        );
        assert_eq!(failed["run_status"], expected);
    }
    let other = ok(&mut s, "workflow_create", json!({"name": "doomed"}))["run_id"].as_str().unwrap().to_owned();
    let cancelled = ok(&mut s, "workflow_cancel", json!({"run_id": other, "reason": "superseded"}));
    assert_eq!(cancelled["run_status"], "cancelled");
    assert_eq!(ok(&mut s, "workflow_claim", json!({"agent_id": "w", "run_id": other}))["status"], "finished");
    assert!(ok(&mut s, "workflow_discover", json!({}))["runs"].as_array().unwrap().is_empty());
}

#[test]
fn sessions_restore_any_saved_version() {
    let mut s = TestServer::in_process(&[]);
    for turn in 1..=3 {
        let saved = ok(
            &mut s,
            "session_save",
            json!({"session_id": "chat/7", "context": {"turn": turn}, "agent_id": "assistant"}),
        );
        assert_eq!(saved["version"], turn);
    }
    let latest = ok(&mut s, "session_restore", json!({"session_id": "chat/7"}));
    assert_eq!((latest["version"].as_u64(), latest["context"].clone()), (Some(3), json!({"turn": 3})));
    let first = ok(&mut s, "session_restore", json!({"session_id": "chat/7", "version": 1}));
    assert_eq!(first["context"], json!({"turn": 1}));
    assert_eq!(ok(&mut s, "session_restore", json!({"session_id": "nope"}))["status"], "not_found");
    let listed = ok(&mut s, "session_list", json!({"prefix": "chat/"}));
    assert_eq!(listed["sessions"][0]["latest_version"], 3);
}

#[test]
fn reset_needs_the_confirmation_phrase() {
    let mut s = TestServer::in_process(&[]);
    ok(&mut s, "state_set", json!({"key": "keep", "value": 1}));
    let refused = s.client.call("state_reset", json!({"confirm": "yes"})).unwrap();
    assert!(refused.is_error && refused.text.contains("DELETE EVERYTHING"), "{}", refused.text);
    assert_eq!(ok(&mut s, "state_get", json!({"key": "keep"}))["status"], "ok");
    let reset = ok(&mut s, "state_reset", json!({"confirm": "DELETE EVERYTHING"}));
    assert_eq!(reset["removed"], 1);
    assert_eq!(ok(&mut s, "state_get", json!({"key": "keep"}))["status"], "not_found");
}
