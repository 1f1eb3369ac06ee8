//! MCP Streamable HTTP at /mcp: both protocol generations, the tool choices, Origin and Host.

use serde_json::{Value, json};
use state_e2e::{HttpClient, HttpResponse};

use crate::{Place, expect};

const MODERN: &str = "2026-07-28";

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}})
}

/// A 2026-07-28 request: no session, version and capabilities in `_meta` and headers.
fn modern(http: &HttpClient, method: &str, name: Option<&str>, mut params: Value) -> HttpResponse {
    params["_meta"] = meta();
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", MODERN),
        ("Mcp-Method", method),
    ];
    if let Some(name) = name {
        headers.push(("Mcp-Name", name));
    }
    http.request("POST", "/mcp", &headers, Some(body.to_string().as_bytes())).unwrap()
}

/// The JSON-RPC message of a response, whether sent as JSON or as one SSE event.
fn message(response: &HttpResponse) -> Value {
    response.events().into_iter().find(|e| e.get("id").is_some()).unwrap_or_else(|| response.json())
}

/// A 2025-11-25 session: initialize, then requests carrying the session id.
struct Legacy {
    http: HttpClient,
    session: String,
}

impl Legacy {
    fn open(http: &HttpClient) -> (Legacy, Value) {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}});
        let response = http.request("POST", "/mcp", &Legacy::headers(None), Some(init.to_string().as_bytes())).unwrap();
        assert_eq!(response.status, 200, "{}", response.text());
        let session = response.header("mcp-session-id").expect("a legacy session id").to_owned();
        let legacy = Legacy { http: http.clone(), session };
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let ack = legacy.post(&initialized);
        assert_eq!(ack.status, 202, "{}", ack.text());
        (legacy, message(&response))
    }

    fn headers(session: Option<&str>) -> Vec<(&str, &str)> {
        let mut headers = vec![("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
        if let Some(session) = session {
            headers.push(("Mcp-Session-Id", session));
            headers.push(("MCP-Protocol-Version", "2025-11-25"));
        }
        headers
    }

    fn post(&self, body: &Value) -> HttpResponse {
        self.http
            .request("POST", "/mcp", &Legacy::headers(Some(&self.session)), Some(body.to_string().as_bytes()))
            .unwrap()
    }

    fn request(&self, method: &str, params: Value) -> Value {
        message(&self.post(&json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": params})))
    }
}

#[test]
fn both_protocol_generations_are_served() {
    let place = Place::new();
    let server = place.in_process(&[]);
    let http = server.client();

    let (legacy, init) = Legacy::open(&http);
    assert_eq!(init["result"]["serverInfo"]["name"], "state", "{init}");
    assert_eq!(init["result"]["serverInfo"]["version"], env!("CARGO_PKG_VERSION"));
    let tools = legacy.request("tools/list", json!({}));
    assert_eq!(tools["result"]["tools"].as_array().unwrap().len(), 8, "the same short list as stdio");
    let set = legacy.request("tools/call", json!({"name": "state_set", "arguments": {"key": "k", "value": "legacy"}}));
    assert_eq!(set["result"]["structuredContent"]["version"], 1, "{set}");

    let discovered = message(&modern(&http, "server/discover", None, json!({})));
    let versions = discovered["result"]["supportedVersions"].as_array().unwrap();
    assert!(versions.contains(&json!(MODERN)) && versions.contains(&json!("2025-11-25")), "{discovered}");
    let got = message(&modern(
        &http,
        "tools/call",
        Some("state_get"),
        json!({"name": "state_get", "arguments": {"key": "k"}}),
    ));
    assert_eq!(got["result"]["structuredContent"]["value"], "legacy", "both generations share one store: {got}");
    // What REST wrote, MCP reads.
    expect(&http.request("PUT", "/v1/kv/from-rest", &[], Some(b"true")).unwrap(), 200);
    let read = message(&modern(
        &http,
        "tools/call",
        Some("state_get"),
        json!({"name": "state_get", "arguments": {"key": "from-rest"}}),
    ));
    assert_eq!(read["result"]["structuredContent"]["value"], true);
}

#[test]
fn foreign_origins_and_hosts_are_refused() {
    let place = Place::new();
    let server = place.in_process(&[]);
    let http = server.client();
    let ok = modern(
        &http.with_header("Origin", &format!("http://127.0.0.1:{}", server.addr.port())),
        "server/discover",
        None,
        json!({}),
    );
    assert_eq!(ok.status, 200, "{}", ok.text());
    let evil = modern(&http.with_header("Origin", "http://evil.example"), "server/discover", None, json!({}));
    assert_eq!(evil.status, 403, "{}", evil.text());
    // DNS rebinding: a page from another name pointed at this address.
    let rebound = http.request(
        "POST",
        "/mcp",
        &[("Host", "attacker.example:7478"), ("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")],
        Some(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#),
    );
    assert_eq!(rebound.unwrap().status, 403);
}

#[test]
fn a_client_closing_its_session_hears_204_and_the_session_is_gone() {
    let place = Place::new();
    let server = place.in_process(&[]);
    let http = server.client();
    let (legacy, _) = Legacy::open(&http);
    let closed = http.request("DELETE", "/mcp", &Legacy::headers(Some(&legacy.session)), None).unwrap();
    // The official Python SDK takes only 200 or 204 as a clean close.
    assert_eq!(closed.status, 204, "{}", closed.text());
    let after = legacy.post(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}));
    assert_eq!(after.status, 404, "the session is gone: {}", after.text());
}

#[test]
fn tool_choices_apply_over_http() {
    let place = Place::new();
    let server = place.in_process(&["--tools", "kv", "--compat", "caxton"]);
    let listed = message(&modern(&server.client(), "tools/list", None, json!({})));
    let names: Vec<&str> =
        listed["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"state_get") && names.contains(&"retrieve"), "{names:?}");
    assert!(!names.contains(&"lease_acquire") && !names.contains(&"state_health"), "{names:?}");

    // REST serves the same selection: the store cannot be wiped through a route /mcp refuses.
    let http = server.client();
    expect(&http.request("PUT", "/v1/kv/kept", &[], Some(b"1")).unwrap(), 200);
    let reset = http.json("POST", "/v1/admin:reset", &json!({"confirm": "DELETE EVERYTHING"})).unwrap();
    assert_eq!(reset.status, 404, "{}", reset.text());
    assert_eq!(reset.json()["code"], "not_enabled");
    let seam = http.json("POST", "/v1/call/native/state_reset", &json!({"confirm": "DELETE EVERYTHING"})).unwrap();
    assert_eq!(seam.status, 404, "{}", seam.text());
    let sidecar_reset = http.json("POST", "/v1/call/sidecar/sidecar_reset", &json!({})).unwrap();
    assert_eq!(sidecar_reset.status, 404, "a replaced server's wipe is no way around it");
    assert_eq!(http.get("/v1/watch?prefix=k").unwrap().status, 404);
    assert_eq!(expect(&http.get("/v1/kv/kept").unwrap(), 200)["value"], 1, "nothing was wiped");
    let document = expect(&http.get("/openapi.json").unwrap(), 200);
    assert!(document["paths"].get("/v1/admin:reset").is_none(), "the document lists what is served");
}

#[test]
fn state_call_and_state_tools_hold_a_token_to_its_prefixes() {
    // The discovery tools run what a token could run directly, and nothing more.
    let place = Place::new();
    let server = place.in_process_with_auth();
    let http = server.client().with_token(crate::TEAM_A);
    let call = |tool: &str, arguments: Value| {
        let params = json!({"name": "state_call", "arguments": {"tool": tool, "arguments": arguments}});
        message(&modern(&http, "tools/call", Some("state_call"), params))
    };
    let own = call("state_set", json!({"key": "team-a/x", "value": 1}));
    assert_eq!(own["result"]["isError"], json!(false), "{own}");
    let other = call("state_get", json!({"key": "team-b/x"}));
    assert_eq!(other["result"]["isError"], json!(true), "{other}");
    assert!(other.to_string().contains("may not use"), "{other}");
    let wipe = call("state_reset", json!({"confirm": "DELETE EVERYTHING"}));
    assert_eq!(wipe["result"]["isError"], json!(true), "a write token cannot wipe through state_call: {wipe}");
    let groups = json!({"name": "state_tools", "arguments": {"enable": ["admin"]}});
    let listed = message(&modern(&http, "tools/call", Some("state_tools"), groups));
    assert_eq!(listed["result"]["isError"], json!(false), "{listed}");
    let kept = call("state_get", json!({"key": "team-a/x"}));
    assert_eq!(kept["result"]["structuredContent"]["value"], 1, "{kept}");
}
