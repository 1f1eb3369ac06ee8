use serde_json::Value;
use state_api::catalog::{Operation, Profile};

use super::*;

fn refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("$ref", Value::String(r)) => out.push(r.clone()),
                    _ => refs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

#[test]
fn every_reference_resolves_inside_the_document() {
    let doc = document(&state_api::Options::default());
    let mut found = Vec::new();
    refs(&doc, &mut found);
    assert!(!found.is_empty());
    for reference in found {
        let name = reference.strip_prefix("#/components/schemas/").unwrap_or_else(|| panic!("{reference}"));
        assert!(doc["components"]["schemas"].get(name).is_some(), "{reference} does not resolve");
    }
    assert!(!doc.to_string().contains("$defs"), "schemas' local definitions were all hoisted");
}

#[test]
fn every_native_operation_is_documented_once() {
    let doc = document(&state_api::Options::default());
    let mut ids = Vec::new();
    for item in doc["paths"].as_object().unwrap().values() {
        for operation in item.as_object().unwrap().values() {
            ids.push(operation["operationId"].as_str().unwrap().to_owned());
        }
    }
    for op in Operation::all().filter(|op| op.spec().profile == Profile::Native) {
        assert_eq!(ids.iter().filter(|id| *id == op.name()).count(), 1, "{}", op.name());
    }
    assert_eq!(doc["openapi"], "3.1.0");
}

#[test]
fn kv_writes_document_their_preconditions() {
    let doc = document(&state_api::Options::default());
    let put = &doc["paths"]["/v1/kv/{key}"]["put"];
    let headers: Vec<&str> = put["parameters"].as_array().unwrap().iter().filter_map(|p| p["name"].as_str()).collect();
    for header in ["If-Match", "If-None-Match", "Idempotency-Key", "key", "expected_version", "ttl_seconds"] {
        assert!(headers.contains(&header), "{header}: {headers:?}");
    }
    assert!(!headers.contains(&"value"), "the value is the body");
    assert!(put["responses"]["412"].is_object());
}

#[test]
fn the_document_lists_only_what_the_server_serves() {
    let kv = document(&state_api::Options::new([], [state_api::catalog::ToolGroup::Kv]));
    let paths = kv["paths"].as_object().unwrap();
    assert!(paths.contains_key("/v1/kv/{key}"));
    assert!(!paths.contains_key("/v1/admin:reset") && !paths.contains_key("/v1/watch"), "{:?}", paths.keys());
}
