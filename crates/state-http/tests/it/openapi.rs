//! /openapi.json against the live server: every documented operation is served.

use serde_json::Value;

use crate::{Place, expect};

#[test]
fn every_documented_operation_is_a_live_route() {
    let place = Place::new();
    let server = place.in_process(&[]);
    let http = server.client();
    let doc = expect(&http.get("/openapi.json").unwrap(), 200);
    assert_eq!(doc["openapi"], "3.1.0");
    let mut served = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let concrete = path
                .replace("{key}", "probe/x")
                .replace("{resource_id}", "probe/l")
                .replace("{session_id}", "probe/s")
                .replace("{run_id}", "no-such-run")
                .replace("{profile}", "native")
                .replace("{name}", "state_health")
                // A watch streams until the client leaves; a bad parameter gets a JSON answer.
                .replace("/v1/watch", "/v1/watch?probe=1");
            let body: &[u8] = match operation["requestBody"]["required"] {
                Value::Bool(true) => b"1",
                _ => b"{}",
            };
            let method = method.to_ascii_uppercase();
            let has_body = method == "POST" || method == "PUT";
            let response = http
                .request(&method, &concrete, &[("Content-Type", "application/json")], has_body.then_some(body))
                .unwrap();
            let content_type = response.header("content-type").unwrap_or("");
            let label = format!("{method} {concrete}: {} {content_type} {}", response.status, response.text());
            assert_ne!(response.status, 405, "{label}");
            assert!(
                content_type.starts_with("application/json")
                    || content_type.starts_with("application/problem+json")
                    || content_type.starts_with("text/plain"),
                "no route answered (a route's own answers are JSON): {label}"
            );
            served += 1;
        }
    }
    assert!(served >= 31, "{served} operations documented");
    // The check above can fail: a path with no route gets an empty 404.
    let missing = http.get("/v1/not-a-route").unwrap();
    assert_eq!((missing.status, missing.header("content-type")), (404, None));
}
