//! What a tool list costs every session, and how a default session reaches every operation.
//! Budgets are bytes of the compact JSON of `tools/list`'s `tools` array, the figure a client
//! pays for in context on every conversation (about 4 bytes a token).

use std::time::Duration;

use serde_json::{Value, json};
use state_e2e::ProtocolEra;

use crate::TestServer;

/// The default list's budget (≈3k tokens).
const DEFAULT_BUDGET: usize = 12_288;

/// A profile alone costs at most 1.25× the server it replaces. Their lists, measured by
/// `tools/list` against agentcheckpoint 1.0.0 and mcp-state-sidecar 0.1.0 from PyPI.
const AGENTCHECKPOINT_BYTES: usize = 2_094;
const SIDECAR_BYTES: usize = 14_657;

fn listed(server: &mut TestServer) -> (Vec<String>, usize) {
    let listed = server.client.request("tools/list", json!({})).unwrap();
    let tools = listed["result"]["tools"].as_array().unwrap();
    let names = tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect();
    (names, serde_json::to_string(tools).unwrap().len())
}

#[test]
fn the_default_list_is_short_and_within_its_budget() {
    let mut server = TestServer::in_process(&[]);
    let (names, bytes) = listed(&mut server);
    assert_eq!(
        names,
        [
            "state_get",
            "state_set",
            "state_delete",
            "state_list",
            "state_txn",
            "state_watch",
            "state_tools",
            "state_call"
        ]
    );
    assert!(bytes <= DEFAULT_BUDGET, "the default tool list is {bytes} bytes, over its budget of {DEFAULT_BUDGET}");
}

#[test]
fn a_profile_alone_costs_little_more_than_the_server_it_replaces() {
    // Ours, for the profiles whose servers cannot be run here, are held to what they cost now.
    let budgets = [
        ("agentcheckpoint", AGENTCHECKPOINT_BYTES * 5 / 4),
        ("sidecar", SIDECAR_BYTES * 5 / 4),
        ("caxton", 2_600),
        ("sage", 6_000),
        ("goldfish", 2_600),
    ];
    for (profile, budget) in budgets {
        let mut server = TestServer::in_process(&["--compat", profile]);
        let (names, bytes) = listed(&mut server);
        assert!(bytes <= budget, "--compat {profile}: {} tools in {bytes} bytes, over {budget}", names.len());
        assert!(!names.iter().any(|n| n == "state_tools"), "--compat {profile} alone lists only its tools: {names:?}");
    }
}

#[test]
fn enabling_a_group_changes_a_sessions_list_and_says_so() {
    let mut server = TestServer::in_process(&[]);
    let answer = server.client.call("state_tools", json!({"enable": ["lease", "session"]})).unwrap().json();
    let added: Vec<&str> = answer["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(
        added,
        [
            "lease_acquire",
            "lease_renew",
            "lease_release",
            "lease_get",
            "lease_list",
            "session_save",
            "session_restore",
            "session_list"
        ]
    );
    assert!(answer["tools"][0]["inputSchema"]["properties"]["resource_id"].is_object(), "{answer}");
    server.client.wait_notification("notifications/tools/list_changed", Duration::from_secs(10)).unwrap();
    let (names, _) = listed(&mut server);
    assert!(names.iter().any(|n| n == "lease_acquire") && names.iter().any(|n| n == "state_get"), "{names:?}");
    let more: Vec<&str> = answer["more"].as_array().unwrap().iter().filter_map(|g| g["group"].as_str()).collect();
    assert!(!more.contains(&"lease") && more.contains(&"workflow"), "{more:?}");
    // Enabled tools are called like any other.
    let lease = server.client.call("lease_acquire", json!({"resource_id": "r", "holder_id": "h", "ttl_seconds": 5}));
    assert_eq!(lease.unwrap().json()["status"], "acquired");
    let unknown = server.client.call("state_tools", json!({"enable": ["gpu"]})).unwrap();
    assert!(unknown.is_error && unknown.text.contains("no tool group"), "{}", unknown.text);
}

#[test]
fn on_the_2026_protocol_the_list_stays_put_and_state_call_reaches_the_rest() {
    let mut server = TestServer::start_era(&[], ProtocolEra::Modern);
    let (before, _) = listed(&mut server);
    let answer = server.client.call("state_tools", json!({"enable": ["workflow"]})).unwrap().json();
    assert!(answer["tools"].as_array().unwrap().iter().any(|t| t["name"] == "workflow_create"), "{answer}");
    assert_eq!(listed(&mut server).0, before, "a 2026-07-28 list may not change as a side effect of a call");
    let created =
        server.client.call("state_call", json!({"tool": "workflow_create", "arguments": {"name": "job"}})).unwrap();
    assert!(created.json()["run_id"].is_string(), "{}", created.text);
    let missing = server.client.call("state_call", json!({"tool": "workflow_explode"})).unwrap();
    assert!(missing.is_error && missing.text.contains("workflow_create"), "{}", missing.text);
}

#[test]
fn every_operation_is_two_calls_from_a_default_session() {
    let mut server = TestServer::in_process(&[]);
    let (listed_names, _) = listed(&mut server);
    let groups = server.client.call("state_tools", json!({})).unwrap().json();
    let mut reachable: Vec<String> = listed_names;
    for group in groups["more"].as_array().unwrap() {
        let answer = server.client.call("state_tools", json!({"enable": [group["group"]]})).unwrap().json();
        let defined: Vec<&str> =
            answer["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
        let promised: Vec<&str> = group["tools"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        assert_eq!(defined, promised, "{group}");
        reachable.extend(defined.iter().map(|n| (*n).to_owned()));
    }
    let mut everything = TestServer::in_process(&["--tools", "all"]);
    let (all, _) = listed(&mut everything);
    for name in all {
        assert!(reachable.contains(&name), "{name} cannot be reached from a default session");
    }
}

#[test]
fn no_tools_at_all_is_a_choice() {
    for none in ["none", ""] {
        let mut server = TestServer::in_process(&["--tools", none]);
        assert_eq!(listed(&mut server).0, Vec::<String>::new(), "--tools {none:?}");
    }
}

/// `--tools kv` serves keys only (issue 30: lease and run resources were still read through
/// resources/read): the other kinds' resources are neither listed as templates nor read.
#[test]
fn resources_follow_the_tools_served() {
    let place = crate::Place::new();
    let mut client = place.start(&["--tools", "kv"], state_e2e::ProtocolEra::Legacy);
    let set = client.call("state_set", serde_json::json!({"key": "k", "value": 1})).unwrap();
    assert!(!set.is_error, "{}", set.text);
    let templates =
        state_e2e::result_of(client.request("resources/templates/list", serde_json::json!({})).unwrap()).unwrap();
    let uris: Vec<&str> =
        templates["resourceTemplates"].as_array().unwrap().iter().map(|t| t["uriTemplate"].as_str().unwrap()).collect();
    assert_eq!(uris, ["state://kv/{key}"], "{templates}");
    let read = client.request("resources/read", serde_json::json!({"uri": "state://kv/k"})).unwrap();
    assert!(state_e2e::result_of(read).is_ok());
    for uri in ["state://lease/printer", "state://workflow/r-1", "state://checkpoint/c"] {
        let refused = client.request("resources/read", serde_json::json!({"uri": uri})).unwrap();
        assert!(refused.get("error").is_some(), "{uri}: {refused}");
        let refused = client.request("resources/subscribe", serde_json::json!({"uri": uri})).unwrap();
        assert_eq!(refused["error"]["code"], -32602, "{uri}: {refused}");
    }
}
