//! The protocol surface: both MCP eras, tool definitions, resources.

use serde_json::{Value, json};
use state_e2e::ProtocolEra;

use crate::TestServer;

const NATIVE_TOOLS: [&str; 60] = [
    "state_get",
    "state_set",
    "state_delete",
    "state_list",
    "state_batch_get",
    "state_txn",
    "history_log",
    "lease_acquire",
    "lease_renew",
    "lease_release",
    "lease_get",
    "lease_list",
    "semaphore_acquire",
    "semaphore_renew",
    "semaphore_release",
    "semaphore_get",
    "semaphore_list",
    "paths_reserve",
    "paths_renew",
    "paths_release",
    "paths_list",
    "paths_check",
    "paths_scopes",
    "queue_send",
    "queue_receive",
    "queue_ack",
    "queue_nack",
    "queue_redrive",
    "queue_peek",
    "queue_list",
    "workflow_create",
    "workflow_claim",
    "workflow_checkpoint",
    "workflow_heartbeat",
    "workflow_resume",
    "workflow_complete",
    "workflow_fail",
    "workflow_cancel",
    "workflow_signal",
    "workflow_await_signal",
    "workflow_status",
    "workflow_list",
    "workflow_discover",
    "session_save",
    "session_restore",
    "session_list",
    "state_health",
    "state_reset",
    "state_watch",
    "checkpoint_save",
    "checkpoint_restore",
    "checkpoint_search",
    "checkpoint_timeline",
    "knowledge_save",
    "knowledge_recall",
    "knowledge_list",
    "knowledge_delete",
    "store_export",
    "store_import",
    "store_usage",
];

const READ_ONLY: [&str; 28] = [
    "state_get",
    "state_list",
    "state_batch_get",
    "history_log",
    "lease_get",
    "lease_list",
    "semaphore_get",
    "semaphore_list",
    "paths_list",
    "paths_check",
    "paths_scopes",
    "queue_peek",
    "queue_list",
    "workflow_resume",
    "workflow_status",
    "workflow_list",
    "workflow_discover",
    "session_restore",
    "session_list",
    "state_health",
    "state_watch",
    "checkpoint_restore",
    "checkpoint_search",
    "checkpoint_timeline",
    "knowledge_recall",
    "knowledge_list",
    "store_export",
    "store_usage",
];

const IDEMPOTENT: [&str; 10] = [
    "state_delete",
    "lease_release",
    "semaphore_release",
    "paths_release",
    "queue_ack",
    "workflow_checkpoint",
    "workflow_complete",
    "workflow_cancel",
    "knowledge_delete",
    "store_import",
];

fn tools(server: &mut TestServer) -> Vec<Value> {
    let listed = server.client.request("tools/list", json!({})).expect("tools/list");
    listed["result"]["tools"].as_array().cloned().expect("tools array")
}

#[test]
fn an_unusable_database_path_fails_before_serving() {
    let mut client =
        state_e2e::McpClient::spawn(crate::binary(), &["--db", "/dev/null/not-a-dir/state.redb"]).expect("spawn");
    let status = client.wait_exit(std::time::Duration::from_secs(10)).expect("exits instead of serving");
    assert!(!status.success());
    let stderr = client.stderr();
    assert!(stderr.contains("state-mcp: error:") && stderr.contains("/dev/null/not-a-dir"), "{stderr}");
}

#[test]
fn both_protocol_eras_are_served() {
    let mut legacy = TestServer::start_era(&[], ProtocolEra::Legacy);
    let set = legacy.client.call("state_set", json!({"key": "era", "value": "legacy"})).expect("legacy call");
    assert_eq!(set.json()["status"], "ok");

    let place = crate::Place::new();
    let mut modern = place.spawn(&[]);
    let discovered = modern.handshake(ProtocolEra::Modern).expect("server/discover");
    let versions: Vec<&str> =
        discovered["supportedVersions"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(versions.contains(&"2026-07-28") && versions.contains(&"2025-11-25"), "{versions:?}");
    assert_eq!(discovered["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "state");
    assert_eq!(discovered["_meta"]["io.modelcontextprotocol/serverInfo"]["version"], env!("CARGO_PKG_VERSION"));
    let set = modern.call("state_set", json!({"key": "era", "value": "modern"})).expect("modern call");
    assert_eq!((set.json()["status"].clone(), set.json()["version"].clone()), (json!("ok"), json!(1)));
}

#[test]
fn server_info_names_this_server() {
    let place = crate::Place::new();
    let mut client = place.spawn(&[]);
    let info = client.handshake(ProtocolEra::Legacy).unwrap();
    assert_eq!(info["serverInfo"]["name"], "state");
    assert_eq!(info["serverInfo"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(info["protocolVersion"], "2025-11-25");
    assert!(info["instructions"].as_str().is_some_and(|i| i.contains("expected_version")));
}

#[test]
fn tools_carry_titles_annotations_and_output_schemas() {
    let mut server = TestServer::start(&["--tools", "all"]);
    let tools = tools(&mut server);
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, NATIVE_TOOLS, "native tools only, in a stable order");
    for tool in &tools {
        let name = tool["name"].as_str().unwrap();
        assert!(tool["title"].is_string(), "{name} has a title");
        assert_eq!(tool["inputSchema"]["type"], "object", "{name}");
        assert_eq!(tool["outputSchema"]["type"], "object", "{name}");
        assert_eq!(tool["annotations"]["openWorldHint"], false, "{name}");
        let read_only = READ_ONLY.contains(&name);
        assert_eq!(tool["annotations"]["readOnlyHint"], read_only, "{name}");
        if !read_only {
            assert_eq!(tool["annotations"]["destructiveHint"], true, "{name}");
            assert_eq!(tool["annotations"]["idempotentHint"], IDEMPOTENT.contains(&name), "{name}");
        }
    }
    let reset = tools.iter().find(|t| t["name"] == "state_reset").unwrap();
    assert!(reset["description"].as_str().unwrap().contains("Irreversibly"), "the reset says what it does");
    // The default list is short: see surface.rs.
}

#[test]
fn tool_groups_keep_the_list_short() {
    let mut server = TestServer::start(&["--tools", "lease,admin"]);
    let names: Vec<String> = tools(&mut server).iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect();
    assert_eq!(
        names,
        ["lease_acquire", "lease_renew", "lease_release", "lease_get", "lease_list", "state_health", "state_reset"]
    );
    let hidden = server
        .client
        .request("tools/call", json!({"name": "state_set", "arguments": {"key": "k", "value": 1}}))
        .unwrap();
    assert_eq!(hidden["error"]["code"], -32602, "a tool outside the chosen groups does not exist: {hidden}");
}

#[test]
fn results_are_structured_and_textual() {
    let mut server = TestServer::start(&[]);
    let result = server.client.call("state_set", json!({"key": "k", "value": [1, "two"]})).unwrap();
    let structured = result.structured.clone().expect("structuredContent");
    let text: Value = serde_json::from_str(&result.text).expect("text is the same JSON");
    assert_eq!(structured, text);
    assert!(!result.is_error);
}

#[test]
fn usage_docs_are_resources() {
    let mut server = TestServer::start(&[]);
    let listed = server.client.request("resources/list", json!({})).unwrap();
    let uris: Vec<&str> =
        listed["result"]["resources"].as_array().unwrap().iter().filter_map(|r| r["uri"].as_str()).collect();
    assert_eq!(
        uris,
        ["state://docs/usage", "state://docs/coordination", "state://docs/keys", "state://docs/what-not-to-store"]
    );
    let read = server.client.request("resources/read", json!({"uri": "state://docs/usage"})).unwrap();
    let content = &read["result"]["contents"][0];
    assert_eq!(content["mimeType"], "text/markdown");
    assert!(content["text"].as_str().unwrap().contains("expected_version"));
    let missing = server.client.request("resources/read", json!({"uri": "state://docs/none"})).unwrap();
    assert!(missing["error"]["code"].is_i64(), "{missing}");
    assert_eq!(missing["error"]["data"]["uri"], "state://docs/none");
}

#[test]
fn stdin_eof_ends_a_standalone_server_cleanly() {
    let mut server = TestServer::start(&["--standalone"]);
    let holder_note = state_api::holder_note_path(&server.db);
    assert!(holder_note.exists(), "the running server records itself as the holder");
    let status = server.client.shutdown().expect("exits after EOF");
    assert!(status.success(), "{status:?}");
    assert!(!holder_note.exists(), "a clean exit removes the holder note; stderr: {}", server.client.stderr());
}

#[test]
fn a_client_leaving_before_the_handshake_is_a_normal_exit() {
    let place = crate::Place::new();
    let mut client = place.spawn(&[]);
    let status = client.shutdown().expect("exits on EOF");
    assert!(status.success(), "{status:?}: {}", client.stderr());
    assert!(!client.stderr().contains("error"), "{}", client.stderr());
}
