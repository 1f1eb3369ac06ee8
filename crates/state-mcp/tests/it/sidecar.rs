//! `--compat sidecar`, used the way mcp-state-sidecar's README and tool docs use it: the same
//! tool names, argument shapes and result models, field for field.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::TestServer;

fn start() -> TestServer {
    TestServer::in_process(&["--compat", "sidecar"])
}

fn call(server: &mut TestServer, tool: &str, args: Value) -> Value {
    let result = server.client.call(tool, args.clone()).expect("tool call");
    assert!(!result.is_error, "{tool} {args}: {}", result.text);
    let structured = result.structured.clone().expect("that server returned structured results");
    assert_eq!(serde_json::from_str::<Value>(&result.text).unwrap(), structured, "text mirrors the structure");
    structured
}

/// The result has exactly these fields, as that server's model declared them.
fn fields(value: &Value) -> BTreeSet<&str> {
    value.as_object().unwrap().keys().map(String::as_str).collect()
}

fn set(names: &[&'static str]) -> BTreeSet<&'static str> {
    names.iter().copied().collect()
}

#[test]
fn exposes_every_sidecar_tool_by_name() {
    let mut s = start();
    let listed = s.client.request("tools/list", json!({})).unwrap();
    let tools = listed["result"]["tools"].as_array().unwrap();
    let names: BTreeSet<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    let sidecar = [
        "state_set",
        "state_get",
        "state_delete",
        "state_list",
        "workflow_create",
        "workflow_discover",
        "workflow_claim",
        "workflow_checkpoint",
        "workflow_resume",
        "workflow_status",
        "workflow_list",
        "lease_acquire",
        "lease_release",
        "lease_renew",
        "sidecar_health",
        "sidecar_reset",
        "session_save",
        "session_restore",
        "history_log",
    ];
    for name in sidecar {
        assert!(names.contains(name), "{name} missing");
    }
    assert_eq!(tools.iter().filter(|t| t["name"] == "state_set").count(), 1, "the profile's tool replaces ours");
    let checkpoint = tools.iter().find(|t| t["name"] == "workflow_checkpoint").unwrap();
    let required: Vec<&str> =
        checkpoint["inputSchema"]["required"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(required, ["run_id", "step", "output"], "no agent or token, as that server took");
    assert_eq!(names.len(), sidecar.len(), "alone, the profile serves only its own tools: {names:?}");
    // With ours asked for beside it: its tools replace ours of the same name, the rest stay.
    let mut both = TestServer::in_process(&["--compat", "sidecar", "--tools", "kv,workflow"]);
    let listed = both.client.request("tools/list", json!({})).unwrap();
    let tools = listed["result"]["tools"].as_array().unwrap();
    let names: std::collections::BTreeSet<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains("state_txn") && names.contains("workflow_heartbeat"), "our other tools stay available");
    assert_eq!(tools.iter().filter(|t| t["name"] == "state_set").count(), 1, "the profile's tool replaces ours");
}

#[test]
fn key_value_and_history_as_that_server_answered() {
    let mut s = start();
    assert_eq!(
        call(&mut s, "state_set", json!({"key": "fact_1", "value": {"x": 1}, "agent_id": "researcher"})),
        json!({"ok": true})
    );
    call(&mut s, "state_set", json!({"key": "fact_1", "value": {"x": 2}, "agent_id": "editor"}));
    call(&mut s, "state_set", json!({"key": "shared:tmp", "value": "soon gone", "ttl_seconds": 60}));
    let got = call(&mut s, "state_get", json!({"key": "fact_1"}));
    assert_eq!(got, json!({"key": "fact_1", "value": {"x": 2}, "found": true}));
    assert_eq!(
        call(&mut s, "state_get", json!({"key": "nope"})),
        json!({"key": "nope", "value": null, "found": false})
    );
    assert_eq!(call(&mut s, "state_list", json!({"prefix": "fact_"})), json!({"keys": ["fact_1"]}));
    assert_eq!(call(&mut s, "state_list", json!({}))["keys"], json!(["fact_1", "shared:tmp"]));

    let log = call(&mut s, "history_log", json!({"key": "fact_1"}));
    assert_eq!(log["total"], 2);
    let newest = &log["entries"][0];
    assert_eq!(fields(newest), set(&["id", "key", "new_value", "previous_value", "agent_id", "written_at"]));
    assert_eq!(
        (newest["new_value"].clone(), newest["previous_value"].clone(), newest["agent_id"].clone()),
        (json!({"x": 2}), json!({"x": 1}), json!("editor"))
    );
    assert!(newest["written_at"].as_f64().unwrap() > 1.7e9, "epoch seconds");
    assert_eq!(log["entries"][1]["previous_value"], Value::Null);
    assert_eq!(call(&mut s, "history_log", json!({"n": 1}))["total"], 1);

    assert_eq!(call(&mut s, "state_delete", json!({"key": "fact_1"})), json!({"ok": true}));
    assert_eq!(
        call(&mut s, "state_delete", json!({"key": "fact_1"})),
        json!({"ok": false}),
        "idempotent: ok is false the second time"
    );
}

#[test]
fn the_distributed_workflow_story_from_its_readme() {
    let mut s = start();
    // The orchestrator registers work; workers find it without being told the run id.
    let created =
        call(&mut s, "workflow_create", json!({"name": "etl", "tags": {"pipeline": "data-etl", "customer": "acme"}}));
    assert_eq!(fields(&created), set(&["run_id", "name", "status"]));
    assert_eq!(created["status"], "created");
    let run = created["run_id"].as_str().unwrap().to_owned();
    call(&mut s, "workflow_create", json!({"name": "other", "tags": {"pipeline": "ml"}}));

    let found = call(&mut s, "workflow_discover", json!({"status": "created", "tags": {"pipeline": "data-etl"}}));
    let runs = found["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(
        fields(&runs[0]),
        set(&["run_id", "name", "status", "tags", "agent_id", "last_step", "created_at", "updated_at"])
    );

    // Two workers race for it: exactly one wins.
    let a = call(&mut s, "workflow_claim", json!({"run_id": run, "agent_id": "worker-a"}));
    let b = call(&mut s, "workflow_claim", json!({"run_id": run, "agent_id": "worker-b"}));
    assert_eq!(a, json!({"claimed": true, "run_id": run, "agent_id": "worker-a", "reason": null}));
    assert_eq!(b["claimed"], false);
    assert_eq!(b["reason"], "Workflow is in status 'claimed' (agent: worker-a)");
    assert_eq!(call(&mut s, "workflow_status", json!({"run_id": run}))["status"], "claimed");

    assert_eq!(
        call(&mut s, "workflow_checkpoint", json!({"run_id": run, "step": 1, "output": {"rows": 100}})),
        json!({"ok": true, "run_id": run, "step": 1})
    );
    call(&mut s, "workflow_checkpoint", json!({"run_id": run, "step": 2, "output": {"rows": 250}}));
    // "If step N was already checkpointed, calling again overwrites the stored output."
    call(&mut s, "workflow_checkpoint", json!({"run_id": run, "step": 2, "output": {"rows": 251}}));

    // worker-a crashes; a replacement resumes from the sidecar's state.
    let resume = call(&mut s, "workflow_resume", json!({"run_id": run}));
    assert_eq!(fields(&resume), set(&["run_id", "last_step", "step_outputs", "meta"]));
    assert_eq!(resume["last_step"], 2);
    assert_eq!(resume["step_outputs"], json!({"1": {"rows": 100}, "2": {"rows": 251}}));
    assert_eq!(
        (resume["meta"]["status"].as_str(), resume["meta"]["agent_id"].as_str()),
        (Some("running"), Some("worker-a"))
    );

    let status = call(&mut s, "workflow_status", json!({"run_id": run}));
    assert_eq!(fields(&status), set(&["run_id", "status", "last_step", "agent_id", "created_at", "updated_at"]));
    let all = call(&mut s, "workflow_list", json!({}));
    assert_eq!(all["runs"].as_array().unwrap().len(), 2);
    assert_eq!(all["runs"][0]["name"], "other", "newest first");

    let missing = s.client.call("workflow_resume", json!({"run_id": "wf-nope"})).unwrap();
    assert!(missing.is_error && missing.text.contains("not found"), "{}", missing.text);
}

#[test]
fn leases_without_tokens() {
    let mut s = start();
    let got = call(&mut s, "lease_acquire", json!({"resource_id": "db", "holder_id": "a", "ttl_seconds": 30}));
    assert_eq!(fields(&got), set(&["acquired", "resource_id", "holder", "expires_at", "reason"]));
    assert_eq!(
        (got["acquired"].clone(), got["holder"].clone(), got["reason"].clone()),
        (json!(true), json!("a"), Value::Null)
    );
    assert!(got["expires_at"].as_f64().unwrap() > 1.7e9);
    let other = call(&mut s, "lease_acquire", json!({"resource_id": "db", "holder_id": "b", "ttl_seconds": 30}));
    assert_eq!(
        (other["acquired"].clone(), other["holder"].clone(), other["reason"].clone()),
        (json!(false), json!("a"), json!("Held by 'a'"))
    );
    let renewed = call(&mut s, "lease_renew", json!({"resource_id": "db", "holder_id": "a", "ttl_seconds": 60}));
    assert_eq!((renewed["renewed"].clone(), renewed["resource_id"].clone()), (json!(true), json!("db")));
    assert_eq!(
        call(&mut s, "lease_renew", json!({"resource_id": "db", "holder_id": "b", "ttl_seconds": 60}))["renewed"],
        false
    );
    assert_eq!(
        call(&mut s, "lease_release", json!({"resource_id": "db", "holder_id": "b"})),
        json!({"released": false, "resource_id": "db"})
    );
    assert_eq!(
        call(&mut s, "lease_release", json!({"resource_id": "db", "holder_id": "a"})),
        json!({"released": true, "resource_id": "db"})
    );
    assert_eq!(
        call(&mut s, "lease_acquire", json!({"resource_id": "db", "holder_id": "b", "ttl_seconds": 30}))["acquired"],
        true
    );
}

#[test]
fn sessions_health_and_reset() {
    let mut s = start();
    assert_eq!(
        call(&mut s, "session_save", json!({"session_id": "s1", "context": {"plan": ["a", "b"]}})),
        json!({"ok": true, "session_id": "s1"})
    );
    assert_eq!(
        call(&mut s, "session_restore", json!({"session_id": "s1"})),
        json!({"found": true, "session_id": "s1", "context": {"plan": ["a", "b"]}})
    );
    assert_eq!(
        call(&mut s, "session_restore", json!({"session_id": "s2"})),
        json!({"found": false, "session_id": "s2", "context": null})
    );
    let not_a_dict = s.client.call("session_save", json!({"session_id": "s1", "context": [1]})).unwrap();
    assert!(not_a_dict.is_error, "context must be an object, as that server required");

    call(&mut s, "state_set", json!({"key": "k", "value": 1}));
    call(&mut s, "workflow_create", json!({"name": "w"}));
    let health = call(&mut s, "sidecar_health", json!({}));
    assert_eq!(fields(&health), set(&["status", "backend", "uptime_s", "key_count", "workflow_count", "version"]));
    assert_eq!(
        (health["status"].as_str(), health["key_count"].as_u64(), health["workflow_count"].as_u64()),
        (Some("ok"), Some(1), Some(1))
    );

    let reset = call(&mut s, "sidecar_reset", json!({}));
    assert_eq!(reset["ok"], true);
    assert!(reset["cleared"].as_u64().unwrap() >= 3);
    assert_eq!(call(&mut s, "sidecar_health", json!({}))["workflow_count"], 0);
    assert_eq!(call(&mut s, "state_get", json!({"key": "k"}))["found"], false);
}
