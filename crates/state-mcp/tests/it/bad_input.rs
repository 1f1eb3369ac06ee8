//! Bad input gets a clear error naming the argument and the fix; nothing is written and the
//! server keeps serving.

use serde_json::{Value, json};

use crate::TestServer;

fn tool_error(server: &mut TestServer, tool: &str, args: Value) -> String {
    let result = server.client.call(tool, args.clone()).expect("the call itself is answered");
    assert!(result.is_error, "{tool} {args} should fail, got {}", result.text);
    result.text
}

#[test]
fn invalid_arguments_are_explained_and_change_nothing() {
    let mut s = TestServer::in_process(&["--max-value-bytes", "1024"]);
    let cases: Vec<(&str, Value, &[&str])> = vec![
        ("state_set", json!({"key": "", "value": 1}), &["`key`", "empty"]),
        ("state_set", json!({"key": "k".repeat(513), "value": 1}), &["`key`", "513 bytes", "512"]),
        ("state_set", json!({"key": "bell\u{7}", "value": 1}), &["`key`", "control character", "U+0007"]),
        ("state_set", json!({"key": "big", "value": "x".repeat(2000)}), &["`value`", "1024-byte"]),
        ("state_set", json!({"key": "k"}), &["missing field `value`"]),
        (
            "state_set",
            json!({"key": "k", "value": 1, "expected_version": "x"}),
            &["`expected_version`", "invalid type"],
        ),
        ("state_set", json!({"key": "k", "value": 1, "expected_version": -3}), &["`expected_version`"]),
        ("state_set", json!({"key": 42, "value": 1}), &["`key`", "invalid type"]),
        ("state_set", json!({"key": "k", "value": 1, "ttl": 5}), &["unknown field `ttl`", "ttl_seconds"]),
        ("state_set", json!({"key": "k", "value": 1, "ttl_seconds": 0}), &["`ttl_seconds`"]),
        ("state_get", json!({"key": "k", "version": 1, "revision": 1}), &["`version`", "`revision`"]),
        ("state_delete", json!({"key": "k", "expected_version": 0}), &["`expected_version`"]),
        ("state_list", json!({"limit": 5000}), &["`limit`", "1000"]),
        ("state_list", json!({"cursor": "forged"}), &["`cursor`", "next_cursor"]),
        ("state_batch_get", json!({"keys": []}), &["`keys`"]),
        ("state_txn", json!({"compare": [{"key": "a"}]}), &["compare", "exactly one of"]),
        (
            "state_txn",
            json!({"success": [{"op": "put", "key": "a", "value": 1}, {"op": "put", "key": "a", "value": 2}]}),
            &["more than once"],
        ),
        ("state_txn", json!({"success": [{"op": "upsert", "key": "a"}]}), &["upsert"]),
        ("history_log", json!({"key": "a", "prefix": "b"}), &["`key`", "`prefix`"]),
    ];
    for (tool, args, needles) in cases {
        let text = tool_error(&mut s, tool, args.clone());
        for needle in needles {
            assert!(text.contains(needle), "{tool} {args}: {text:?} lacks {needle:?}");
        }
    }
    let health = s.client.call("state_health", json!({})).unwrap().json();
    assert_eq!((health["revision"].as_u64(), health["keys"].as_u64()), (Some(0), Some(0)), "nothing was written");
}

#[test]
fn protocol_garbage_is_survived() {
    let mut s = TestServer::in_process(&[]);
    let wait = std::time::Duration::from_secs(10);
    // Not JSON at all: a parse error, with a null id (there is none to answer).
    s.client.send_raw("{this is not json").unwrap();
    let parse_error = s.client.next_message(wait).unwrap();
    assert_eq!(
        (parse_error["error"]["code"].as_i64(), &parse_error["id"]),
        (Some(-32700), &json!(null)),
        "{parse_error}"
    );
    // Blank lines are not messages.
    s.client.send_raw("").unwrap();
    // JSON, but not a JSON-RPC message: an Invalid Request error.
    s.client.send_raw(r#"{"hello": "world"}"#).unwrap();
    let invalid = s.client.next_message(wait).unwrap();
    assert_eq!(invalid["error"]["code"], -32600, "{invalid}");
    s.client.send_raw("[1, 2]").unwrap();
    assert_eq!(s.client.next_message(wait).unwrap()["error"]["code"], -32600, "batches are gone from MCP");
    // A tools/call without params, and an unknown method.
    let no_params = s.client.request("tools/call", json!(null)).unwrap();
    assert_eq!(no_params["error"]["code"], -32602, "{no_params}");
    let unknown_method = s.client.request("state/explode", json!({})).unwrap();
    assert_eq!(unknown_method["error"]["code"], -32601, "{unknown_method}");
    // An unknown tool is a protocol error naming the tools that exist.
    let unknown_tool = s.client.request("tools/call", json!({"name": "state_put", "arguments": {}})).unwrap();
    assert_eq!(unknown_tool["error"]["code"], -32602);
    assert!(unknown_tool["error"]["message"].as_str().unwrap().contains("state_set"), "{unknown_tool}");
    // Arguments that are not an object: invalid params, answered to this request's id.
    let not_object = s.client.request("tools/call", json!({"name": "state_get", "arguments": [1, 2]})).unwrap();
    assert_eq!(not_object["error"]["code"], -32602, "{not_object}");
    assert!(not_object["error"]["message"].as_str().unwrap().contains("tools/call"), "{not_object}");

    // Ids that are neither a string nor an integer an id can be (issue 30: these got no answer
    // at all, and the client waited forever): -32600, with a null id.
    for id in [r#"{"a": 1}"#, "[1]", "1.5", "true", "null", "18446744073709551616", "18446744073709551615"] {
        let line = format!(r#"{{"jsonrpc": "2.0", "id": {id}, "method": "tools/list"}}"#);
        s.client.send_raw(&line).unwrap();
        let refused = s.client.next_message(wait).unwrap();
        assert_eq!(
            (refused["error"]["code"].as_i64(), &refused["id"]),
            (Some(-32600), &json!(null)),
            "{id}: {refused}"
        );
    }

    // An integer past 64 bits would be stored as a double and read back as another number
    // (issue 30): refused, naming it, and nothing is written.
    let line = r#"{"jsonrpc": "2.0", "id": 90, "method": "tools/call", "params": {"name": "state_set", "arguments": {"key": "big", "value": 18446744073709551617}}}"#;
    s.client.send_raw(line).unwrap();
    let wide = s.client.next_message(wait).unwrap();
    assert_eq!((wide["error"]["code"].as_i64(), &wide["id"]), (Some(-32602), &json!(90)), "{wide}");
    assert!(wide["error"]["message"].as_str().unwrap().contains("18446744073709551617"), "{wide}");

    // Still serving, with nothing written.
    let set = s.client.call("state_set", json!({"key": "alive", "value": true})).unwrap();
    assert_eq!(set.json()["revision"], 1);
}
