//! `--compat caxton`: the StateTool interface's operations as tools, results serialized the
//! way the interface's Rust types serialize.

use serde_json::{Value, json};

use crate::TestServer;

fn call(server: &mut TestServer, tool: &str, args: Value) -> Value {
    let result = server.client.call(tool, args.clone()).expect("tool call");
    assert!(!result.is_error, "{tool} {args}: {}", result.text);
    assert!(result.structured.is_none(), "plain JSON text results");
    serde_json::from_str(&result.text).expect("JSON text")
}

#[test]
fn the_state_tool_interface() {
    let mut s = TestServer::in_process(&["--compat", "caxton", "--tools", "admin"]);
    // An agent saves and restores its checkpoint, as the spec's example agent does.
    let state = json!({"id": "processor-001", "data": {"cursor": 17}});
    assert_eq!(call(&mut s, "store", json!({"key": "checkpoints/processor-001/latest", "value": state})), Value::Null);
    assert_eq!(call(&mut s, "retrieve", json!({"key": "checkpoints/processor-001/latest"})), state);
    assert_eq!(call(&mut s, "retrieve", json!({"key": "checkpoints/nobody/latest"})), Value::Null);
    assert_eq!(call(&mut s, "exists", json!({"key": "checkpoints/processor-001/latest"})), json!(true));
    assert_eq!(call(&mut s, "exists", json!({"key": "nope"})), json!(false));

    // Versioned state, listed by prefix.
    for v in [1, 2, 10] {
        call(&mut s, "store", json!({"key": format!("states/agent-1/v{v}"), "value": v}));
    }
    assert_eq!(
        call(&mut s, "list", json!({"prefix": "states/agent-1/v"})),
        json!(["states/agent-1/v1", "states/agent-1/v10", "states/agent-1/v2"])
    );

    // batch_store is atomic, with items as [key, value] pairs.
    let items = json!([["state/7", {"s": 1}], ["metadata/7", {"m": 2}], ["timestamp/7", 1_795_219_200]]);
    assert_eq!(call(&mut s, "batch_store", json!({"items": items})), Value::Null);
    let values = call(&mut s, "batch_retrieve", json!({"keys": ["state/7", "missing", "timestamp/7"]}));
    assert_eq!(values, json!([{"s": 1}, null, 1_795_219_200]));
    let health = s.client.call("state_health", json!({})).unwrap().json();
    let before = health["revision"].as_u64().unwrap();
    let bad = s.client.call("batch_store", json!({"items": [["ok/1", 1], ["", 2]]})).unwrap();
    assert!(bad.is_error, "one bad item fails the whole batch");
    assert_eq!(call(&mut s, "exists", json!({"key": "ok/1"})), json!(false), "and nothing of it was stored");
    assert_eq!(s.client.call("state_health", json!({})).unwrap().json()["revision"].as_u64(), Some(before));

    assert_eq!(call(&mut s, "delete", json!({"key": "state/7"})), Value::Null);
    assert_eq!(call(&mut s, "exists", json!({"key": "state/7"})), json!(false));
}
