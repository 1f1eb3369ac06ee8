//! The auth matrix: each token (read, write, admin; none; unknown) against each route and MCP
//! tool, on ids inside and outside its prefix.

use serde_json::{Value, json};
use state_e2e::HttpClient;

use crate::{ADMIN, Place, READER, TEAM_A, expect};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    Read,
    Write,
    /// Store-wide administration.
    Admin,
    /// Compatibility tools, checkpoints, recall: only a token over the whole store.
    WholeStore,
    /// Touches nobody's ids (health).
    Nothing,
}

struct Case {
    method: &'static str,
    /// `{p}` is the prefix under test, `{run}` a run named `{p}job`.
    path: &'static str,
    body: Option<&'static str>,
    need: Need,
}

const fn case(method: &'static str, path: &'static str, body: Option<&'static str>, need: Need) -> Case {
    Case { method, path, body, need }
}

const CASES: &[Case] = &[
    case("GET", "/v1/kv/{p}x", None, Need::Read),
    case("PUT", "/v1/kv/{p}x", Some("1"), Need::Write),
    case("DELETE", "/v1/kv/{p}gone", None, Need::Write),
    case("GET", "/v1/kv?prefix={p}", None, Need::Read),
    case("POST", "/v1/kv:batchGet", Some(r#"{"keys": ["{p}x"]}"#), Need::Read),
    case("POST", "/v1/kv:txn", Some(r#"{"success": [{"op": "put", "key": "{p}t", "value": 1}]}"#), Need::Write),
    case("GET", "/v1/history?prefix={p}", None, Need::Read),
    case(
        "POST",
        "/v1/leases:acquire",
        Some(r#"{"resource_id": "{p}l", "holder_id": "h", "ttl_seconds": 30}"#),
        Need::Write,
    ),
    case(
        "POST",
        "/v1/leases:renew",
        Some(r#"{"resource_id": "{p}l", "holder_id": "h", "token": 1, "ttl_seconds": 30}"#),
        Need::Write,
    ),
    case("POST", "/v1/leases:release", Some(r#"{"resource_id": "{p}l2", "holder_id": "h", "token": 1}"#), Need::Write),
    case("GET", "/v1/leases/{p}l", None, Need::Read),
    case("GET", "/v1/leases?prefix={p}", None, Need::Read),
    case("POST", "/v1/workflows", Some(r#"{"name": "{p}new"}"#), Need::Write),
    case("GET", "/v1/workflows?name={p}job", None, Need::Read),
    case("GET", "/v1/workflows:discover?name={p}job", None, Need::Read),
    case("POST", "/v1/workflows:claim", Some(r#"{"agent_id": "w", "name": "{p}none"}"#), Need::Write),
    case("GET", "/v1/workflows/{run}", None, Need::Read),
    case("GET", "/v1/workflows/{run}/resume", None, Need::Read),
    case("POST", "/v1/workflows/{run}/checkpoint", Some(r#"{"agent_id": "w", "token": 1, "step": 1}"#), Need::Write),
    case("POST", "/v1/workflows/{run}/heartbeat", Some(r#"{"agent_id": "w", "token": 1}"#), Need::Write),
    case("POST", "/v1/workflows/{run}/complete", Some(r#"{"agent_id": "w", "token": 1}"#), Need::Write),
    case("POST", "/v1/workflows/{run}/fail", Some(r#"{"agent_id": "w", "token": 1, "error": "x"}"#), Need::Write),
    case("PUT", "/v1/sessions/{p}s", Some(r#"{"a": 1}"#), Need::Write),
    case("GET", "/v1/sessions/{p}s", None, Need::Read),
    case("GET", "/v1/sessions?prefix={p}", None, Need::Read),
    case("GET", "/v1/health", None, Need::Nothing),
    case("POST", "/v1/call/native/state_get", Some(r#"{"key": "{p}x"}"#), Need::Read),
    case("POST", "/v1/call/sidecar/state_get", Some(r#"{"key": "{p}x"}"#), Need::WholeStore),
    case("POST", "/v1/workflows/{run}/cancel", Some("{}"), Need::Write),
    case("POST", "/v1/checkpoints", Some(r#"{"description": "{p}", "workspace": "/w"}"#), Need::WholeStore),
    case("GET", "/v1/checkpoints:restore?workspace=/w", None, Need::WholeStore),
    case("GET", "/v1/checkpoints:search?query=x", None, Need::WholeStore),
    case("GET", "/v1/checkpoints:timeline", None, Need::WholeStore),
    case("PUT", "/v1/knowledge/{p}note", Some(r#"{"content": "text"}"#), Need::Write),
    case("DELETE", "/v1/knowledge/{p}gone", None, Need::Write),
    case("GET", "/v1/knowledge?prefix={p}", None, Need::Read),
    case("GET", "/v1/knowledge:recall?query=text", None, Need::WholeStore),
    case("POST", "/v1/admin:reset", Some(r#"{"confirm": "nothing, refused"}"#), Need::Admin),
];

/// Whether `token` may make a call needing `need` on ids `inside` its prefix (or not).
fn allowed(token: &str, need: Need, inside: bool) -> bool {
    match (token, need) {
        (ADMIN, _) | (_, Need::Nothing) => true,
        (_, Need::Admin | Need::WholeStore) => false,
        (TEAM_A, Need::Read | Need::Write) => inside,
        (READER, Need::Read) => inside,
        _ => false,
    }
}

/// Runs named `team-a/job` and `team-b/job`, made by the admin.
fn runs(admin: &HttpClient) -> [(String, String); 2] {
    ["team-a/", "team-b/"].map(|prefix| {
        let made = expect(&admin.json("POST", "/v1/workflows", &json!({"name": format!("{prefix}job")})).unwrap(), 200);
        (prefix.to_owned(), made["run_id"].as_str().unwrap().to_owned())
    })
}

fn fill(text: &str, prefix: &str, run: &str) -> String {
    text.replace("{run}", run).replace("{p}", prefix)
}

#[test]
fn every_route_enforces_each_tokens_prefix_and_rights() {
    let place = Place::new();
    let server = place.in_process_with_auth();
    let anonymous = server.client();
    let admin = anonymous.with_token(ADMIN);
    for prefix in ["team-a/", "team-b/"] {
        expect(&admin.request("PUT", &format!("/v1/kv/{prefix}x"), &[], Some(b"1")).unwrap(), 200);
    }
    let runs = runs(&admin);
    let mut checked = 0;
    // The admin goes last: until then, nothing may have changed outside team-a/.
    for token in [TEAM_A, READER, "", "not-a-token-at-all-0000", ADMIN] {
        if token == ADMIN {
            assert_eq!(expect(&admin.get("/v1/kv/team-b/x").unwrap(), 200)["version"], 1, "a refusal changed team-b/");
            assert_eq!(admin.get("/v1/sessions/team-b/s").unwrap().status, 404);
        }
        let http = if token.is_empty() { anonymous.clone() } else { anonymous.with_token(token) };
        for case in CASES {
            for (prefix, run) in &runs {
                let inside = prefix == "team-a/";
                let path = fill(case.path, prefix, run);
                let body = case.body.map(|b| fill(b, prefix, run));
                let response = http
                    .request(
                        case.method,
                        &path,
                        &[("Content-Type", "application/json")],
                        body.as_deref().map(str::as_bytes),
                    )
                    .unwrap();
                let status = response.status;
                let label = format!("token {token:?} {} {path}: {status} {}", case.method, response.text());
                match token {
                    "" | "not-a-token-at-all-0000" => {
                        assert_eq!(status, 401, "{label}");
                        assert_eq!(response.header("www-authenticate"), Some("Bearer realm=\"state\""), "{label}");
                    }
                    _ if allowed(token, case.need, inside) => assert!(status != 401 && status != 403, "{label}"),
                    // Another tenant's run is answered exactly as a run that does not exist
                    // (issue 30): run ids can be guessed, and must tell nothing.
                    _ if case.path.contains("{run}") && !inside => {
                        let absent = "01JZZZZZZZZZZZZZZZZZZZZZZZ";
                        let path = fill(case.path, prefix, absent);
                        let body = case.body.map(|b| fill(b, prefix, absent));
                        let headers = [("Content-Type", "application/json")];
                        let body = body.as_deref().map(str::as_bytes);
                        let answer = http.request(case.method, &path, &headers, body).unwrap();
                        assert_eq!(status, answer.status, "{label}");
                        assert_ne!(status, 403, "{label}");
                        let theirs = response.text().replace(run.as_str(), "RUN");
                        assert_eq!(theirs, answer.text().replace(absent, "RUN"), "{label}");
                    }
                    _ => {
                        assert_eq!(status, 403, "{label}");
                        let body = response.json();
                        let code = body["code"].as_str().or(body["error"]["code"].as_str());
                        assert_eq!(code, Some("forbidden"), "{label}");
                    }
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, CASES.len() * 2 * 5);
    // Probes and the API description need no token.
    expect(&anonymous.get("/healthz").unwrap(), 200);
    expect(&anonymous.get("/openapi.json").unwrap(), 200);
    assert_eq!(anonymous.get("/metrics").unwrap().status, 401);
    // Metrics describe the whole store: a token over part of it may not read them.
    assert_eq!(anonymous.with_token(READER).get("/metrics").unwrap().status, 403);
    assert_eq!(anonymous.with_token(ADMIN).get("/metrics").unwrap().status, 200);
}

fn mcp_call(http: &HttpClient, tool: &str, args: Value) -> (u16, Value) {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": args, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}
    });
    let response = http
        .request(
            "POST",
            "/mcp",
            &[
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", tool),
            ],
            Some(body.to_string().as_bytes()),
        )
        .unwrap();
    let result = response.events().into_iter().next().or_else(|| Some(response.json())).unwrap_or(Value::Null);
    (response.status, result)
}

fn forbidden_tool(result: &Value) -> bool {
    result["result"]["isError"] == true
        && result["result"]["content"][0]["text"].as_str().is_some_and(|t| t.contains("may not use"))
}

#[test]
fn mcp_tools_enforce_the_same_scopes() {
    let place = Place::new();
    let server = place.in_process_with_auth();
    let anonymous = server.client();
    let team_a = anonymous.with_token(TEAM_A);
    let reader = anonymous.with_token(READER);
    assert_eq!(mcp_call(&anonymous, "state_get", json!({"key": "team-a/x"})).0, 401);

    let (status, set) = mcp_call(&team_a, "state_set", json!({"key": "team-a/x", "value": 1}));
    assert_eq!((status, set["result"]["structuredContent"]["version"].clone()), (200, json!(1)), "{set}");
    let (_, outside) = mcp_call(&team_a, "state_set", json!({"key": "team-b/x", "value": 1}));
    assert!(forbidden_tool(&outside), "{outside}");
    let (_, listed) = mcp_call(&team_a, "state_list", json!({}));
    assert!(forbidden_tool(&listed), "listing everything: {listed}");
    let (_, history) = mcp_call(&team_a, "history_log", json!({}));
    assert!(forbidden_tool(&history), "{history}");
    let (_, read) = mcp_call(&reader, "state_get", json!({"key": "team-a/x"}));
    assert_eq!(read["result"]["structuredContent"]["value"], 1, "{read}");
    let (_, write) = mcp_call(&reader, "state_set", json!({"key": "team-a/x", "value": 2}));
    assert!(forbidden_tool(&write), "a read token cannot write: {write}");
    let (_, reset) = mcp_call(&team_a, "state_reset", json!({"confirm": "DELETE EVERYTHING"}));
    assert!(forbidden_tool(&reset), "{reset}");
    let (_, health) = mcp_call(&reader, "state_health", json!({}));
    assert_eq!(health["result"]["isError"], false, "{health}");
}
