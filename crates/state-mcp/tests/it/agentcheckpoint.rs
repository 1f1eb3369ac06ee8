//! `--compat agentcheckpoint`, used the way that server's own documentation uses it: its tool
//! names, its arguments (values as JSON-encoded strings), its result shapes and text.

use serde_json::{Value, json};

use crate::TestServer;

fn call(server: &mut TestServer, tool: &str, args: Value) -> (Value, String) {
    let result = server.client.call(tool, args.clone()).expect("tool call");
    assert!(!result.is_error, "{tool} {args}: {}", result.text);
    assert!(result.structured.is_none(), "that server returned text only");
    let parsed = serde_json::from_str(&result.text).expect("the text is JSON");
    (parsed, result.text)
}

fn start() -> TestServer {
    TestServer::in_process(&["--compat", "agentcheckpoint"])
}

fn listed_names(s: &mut TestServer) -> Vec<String> {
    let listed = s.client.request("tools/list", json!({})).unwrap();
    listed["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect()
}

#[test]
fn alone_it_serves_its_five_tools_and_ours_only_when_asked() {
    let mut s = start();
    assert_eq!(listed_names(&mut s), ["get_state", "set_state", "force_set_state", "list_state", "delete_state"]);
    let refused = s.client.call("state_get", json!({"key": "k"}));
    assert!(refused.is_err(), "ours are not served: {refused:?}");
    let mut both = TestServer::in_process(&["--compat", "agentcheckpoint", "--tools", "default"]);
    let names = listed_names(&mut both);
    for name in ["get_state", "set_state", "force_set_state", "list_state", "delete_state", "state_get", "state_tools"]
    {
        assert!(names.iter().any(|n| n == name), "{name} missing from {names:?}");
    }
}

#[test]
fn its_schemas_are_its_own() {
    let mut s = start();
    let listed = s.client.request("tools/list", json!({})).unwrap();
    let set_state = listed["result"]["tools"].as_array().unwrap().iter().find(|t| t["name"] == "set_state").unwrap();
    assert_eq!(set_state["inputSchema"]["properties"]["value"]["type"], "string");
    assert_eq!(set_state["inputSchema"]["properties"]["expected_version"]["default"], -1);
    assert_eq!(set_state["inputSchema"]["required"], json!(["key", "value"]));
}

#[test]
fn single_writer_pattern() {
    let mut s = start();
    let (_, text) = call(
        &mut s,
        "force_set_state",
        json!({"key": "proyecto:build-status", "value": "{\"phase\": \"testing\", \"passed\": 13, \"failed\": 2}"}),
    );
    assert_eq!(
        text, r#"{"status": "ok", "key": "proyecto:build-status", "version": 1}"#,
        "byte-for-byte the text that server printed"
    );

    let (got, _) = call(&mut s, "get_state", json!({"key": "proyecto:build-status"}));
    assert_eq!(
        (got["status"].as_str(), got["key"].as_str(), got["version"].as_u64()),
        (Some("ok"), Some("proyecto:build-status"), Some(1))
    );
    let value: Value = serde_json::from_str(got["value"].as_str().expect("value is a JSON string")).unwrap();
    assert_eq!(value, json!({"phase": "testing", "passed": 13, "failed": 2}));
    let updated_at = got["updated_at"].as_str().unwrap();
    assert_eq!(updated_at.len(), 19, "SQLite datetime shape: {updated_at}");
    assert_eq!((&updated_at[4..5], &updated_at[10..11], &updated_at[13..14]), ("-", " ", ":"));

    let (again, _) =
        call(&mut s, "force_set_state", json!({"key": "proyecto:build-status", "value": "{\"phase\": \"done\"}"}));
    assert_eq!(again["version"], 2);
}

#[test]
fn multi_agent_occ_pattern() {
    let mut s = start();
    call(&mut s, "force_set_state", json!({"key": "workflow:plan-today", "value": "{\"current_index\": 5}"}));

    // Agent A and agent B both read version 1.
    let (a_read, _) = call(&mut s, "get_state", json!({"key": "workflow:plan-today"}));
    let (b_read, _) = call(&mut s, "get_state", json!({"key": "workflow:plan-today"}));
    let mut plan: Value = serde_json::from_str(a_read["value"].as_str().unwrap()).unwrap();
    plan["current_index"] = json!(6);
    let (a_write, _) = call(
        &mut s,
        "set_state",
        json!({"key": "workflow:plan-today", "value": plan.to_string(), "expected_version": a_read["version"]}),
    );
    assert_eq!((a_write["status"].as_str(), a_write["version"].as_u64()), (Some("ok"), Some(2)));

    // B's write, based on the stale read, is refused with the versions involved.
    let (b_write, _) = call(
        &mut s,
        "set_state",
        json!({"key": "workflow:plan-today", "value": "{\"current_index\": 6}", "expected_version": b_read["version"]}),
    );
    assert_eq!(b_write["status"], "conflict");
    assert_eq!((b_write["expected_version"].as_i64(), b_write["actual_version"].as_u64()), (Some(1), Some(2)));
    assert!(b_write["message"].as_str().is_some_and(|m| m.contains("get_state")));

    // B re-reads and retries: that is the OCC loop.
    let (b_reread, _) = call(&mut s, "get_state", json!({"key": "workflow:plan-today"}));
    let (b_retry, _) = call(
        &mut s,
        "set_state",
        json!({"key": "workflow:plan-today", "value": "{\"current_index\": 7}", "expected_version": b_reread["version"]}),
    );
    assert_eq!((b_retry["status"].as_str(), b_retry["version"].as_u64()), (Some("ok"), Some(3)));
}

#[test]
fn create_only_not_found_and_bad_json() {
    let mut s = start();
    let (first, _) = call(
        &mut s,
        "set_state",
        json!({"key": "lock:migration", "value": "{\"owner\": \"a\"}", "expected_version": 0}),
    );
    assert_eq!((first["status"].as_str(), first["version"].as_u64()), (Some("ok"), Some(1)));
    let (second, _) = call(
        &mut s,
        "set_state",
        json!({"key": "lock:migration", "value": "{\"owner\": \"b\"}", "expected_version": 0}),
    );
    assert_eq!((second["status"].as_str(), second["actual_version"].as_u64()), (Some("conflict"), Some(1)));

    let (missing, _) = call(&mut s, "set_state", json!({"key": "nothing:here", "value": "1", "expected_version": 3}));
    assert_eq!((missing["status"].as_str(), missing["key"].as_str()), (Some("not_found"), Some("nothing:here")));
    assert!(missing["message"].is_string());

    let (bad, _) = call(&mut s, "set_state", json!({"key": "k", "value": "{oops"}));
    assert_eq!(bad["status"], "error");
    assert!(bad["message"].as_str().unwrap().contains("Invalid JSON"));
    let (bad_force, _) = call(&mut s, "force_set_state", json!({"key": "k", "value": "nope"}));
    assert_eq!(bad_force["status"], "error");

    // expected_version omitted means -1: unconditional.
    let (unconditional, _) = call(&mut s, "set_state", json!({"key": "lock:migration", "value": "{\"owner\": \"c\"}"}));
    assert_eq!((unconditional["status"].as_str(), unconditional["version"].as_u64()), (Some("ok"), Some(2)));

    let (empty_key, _) = call(&mut s, "set_state", json!({"key": "", "value": "1"}));
    assert_eq!(empty_key["status"], "error", "unstorable input is reported in that server's error shape");
}

#[test]
fn list_state_takes_like_patterns() {
    let mut s = start();
    for key in ["project:site:build", "project:api:build", "plan:2026-11-21", "Project:Upper"] {
        call(&mut s, "force_set_state", json!({"key": key, "value": "1"}));
    }
    let keys = |listing: &Value| -> Vec<String> {
        listing["keys"].as_array().unwrap().iter().map(|k| k["key"].as_str().unwrap().to_owned()).collect()
    };
    let (all, _) = call(&mut s, "list_state", json!({}));
    assert_eq!(all["status"], "ok");
    assert_eq!(keys(&all), ["Project:Upper", "plan:2026-11-21", "project:api:build", "project:site:build"]);
    let first = &all["keys"][0];
    assert!(first["version"].is_u64() && first["updated_at"].is_string());

    let (projects, _) = call(&mut s, "list_state", json!({"pattern": "project:%"}));
    assert_eq!(
        keys(&projects),
        ["Project:Upper", "project:api:build", "project:site:build"],
        "LIKE ignores ASCII case"
    );
    let (builds, _) = call(&mut s, "list_state", json!({"pattern": "project:___:build"}));
    assert_eq!(keys(&builds), ["project:api:build"]);
    let (none, text) = call(&mut s, "list_state", json!({"pattern": "zzz%"}));
    assert_eq!(keys(&none), Vec::<String>::new());
    assert_eq!(text, r#"{"status": "ok", "keys": []}"#);
}

#[test]
fn delete_and_worker_startup_check() {
    let mut s = start();
    // A worker checks whether the night's work was already done.
    let (check, _) = call(&mut s, "get_state", json!({"key": "checkpoint:nocturno-2026-06-12"}));
    assert_eq!(check, json!({"status": "not_found", "key": "checkpoint:nocturno-2026-06-12"}));
    call(
        &mut s,
        "force_set_state",
        json!({"key": "checkpoint:nocturno-2026-06-12", "value": "{\"status\": \"in-progress\"}"}),
    );
    let (deleted, text) = call(&mut s, "delete_state", json!({"key": "checkpoint:nocturno-2026-06-12"}));
    assert_eq!(deleted, json!({"status": "ok", "key": "checkpoint:nocturno-2026-06-12", "deleted": true}));
    assert_eq!(text, r#"{"status": "ok", "key": "checkpoint:nocturno-2026-06-12", "deleted": true}"#);
    let (after, _) = call(&mut s, "get_state", json!({"key": "checkpoint:nocturno-2026-06-12"}));
    assert_eq!(after["status"], "not_found");
}

#[test]
fn both_tool_sets_share_one_store() {
    let mut s = TestServer::in_process(&["--compat", "agentcheckpoint", "--tools", "kv"]);
    call(&mut s, "force_set_state", json!({"key": "shared:doc", "value": "{\"a\": [1, 2]}"}));
    let native = s.client.call("state_get", json!({"key": "shared:doc"})).unwrap().json();
    assert_eq!((native["value"].clone(), native["version"].as_u64()), (json!({"a": [1, 2]}), Some(1)));
    s.client.call("state_set", json!({"key": "shared:doc", "value": {"a": [3]}, "expected_version": 1})).unwrap();
    let (compat, _) = call(&mut s, "get_state", json!({"key": "shared:doc"}));
    assert_eq!((compat["value"].as_str(), compat["version"].as_u64()), (Some("{\"a\":[3]}"), Some(2)));
}

#[test]
fn its_docs_are_resources_too() {
    let mut s = start();
    let listed = s.client.request("resources/list", json!({})).unwrap();
    let uris: Vec<&str> =
        listed["result"]["resources"].as_array().unwrap().iter().filter_map(|r| r["uri"].as_str()).collect();
    for uri in ["checkpoint://docs/usage", "checkpoint://docs/coordination", "checkpoint://docs/keys"] {
        assert!(uris.contains(&uri), "{uri} missing from {uris:?}");
        let read = s.client.request("resources/read", json!({"uri": uri})).unwrap();
        assert!(
            read["result"]["contents"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("set_state") || t.contains("list_state")),
            "{uri}"
        );
    }
}
