//! Attacks on a running server, each one a request an attacker could really send: a foreign web
//! page, a DNS-rebinding page, a flood of silent sockets, clients that never read. Each test
//! runs the exploit and asserts that it changes nothing and locks nobody out.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::json;
use state_e2e::wait;

use crate::{Place, expect, problem};

/// A browser's "simple" request from a page at `origin`: no preflight, so it reaches the
/// server whatever the server would say about CORS.
fn simple_post(server: &state_e2e::HttpServer, path: &str, origin: &str, content_type: &str, body: &str) -> u16 {
    let headers = [("Origin", origin), ("Content-Type", content_type), ("Sec-Fetch-Site", "cross-site")];
    server.client().request("POST", path, &headers, Some(body.as_bytes())).unwrap().status
}

#[test]
fn a_foreign_page_cannot_write_or_wipe_a_loopback_store() {
    let place = Place::new();
    let server = place.serve(&[]);
    let http = server.client();
    expect(&http.json("PUT", "/v1/kv/precious", &json!(1)).unwrap(), 200);

    let write = r#"{"success": [{"op": "put", "key": "precious", "value": "pwned"}]}"#;
    for content_type in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"] {
        let status = simple_post(&server, "/v1/kv:txn", "http://evil.example", content_type, write);
        assert_eq!(status, 403, "{content_type}");
        let status = simple_post(&server, "/v1/admin:reset", "http://evil.example", content_type, "{}");
        assert_eq!(status, 403, "{content_type}");
    }
    // A page on another loopback port is another site too.
    assert_eq!(simple_post(&server, "/v1/admin:reset", "http://127.0.0.1:8000", "text/plain", ""), 403);
    // Without an Origin (an old browser, a form in a privacy mode), the body type still stops it.
    let form =
        http.request("POST", "/v1/admin:reset", &[("Content-Type", "application/x-www-form-urlencoded")], Some(b""));
    problem(&form.unwrap(), 415, "unsupported_media_type");
    let plain = http.request("POST", "/v1/kv:txn", &[("Content-Type", "text/plain")], Some(write.as_bytes()));
    problem(&plain.unwrap(), 415, "unsupported_media_type");

    let stored = expect(&http.get("/v1/kv/precious").unwrap(), 200);
    assert_eq!(stored["value"], 1, "nothing a foreign page sent was applied: {stored}");
    assert_eq!(stored["version"], 1);
}

#[test]
fn a_dns_rebinding_page_cannot_read_values() {
    let place = Place::new();
    let server = place.serve(&[]);
    let http = server.client();
    expect(&http.json("PUT", "/v1/kv/secret", &json!("s3cr3t")).unwrap(), 200);
    let port = server.addr.port();
    let rebound_host = format!("evil.example:{port}");
    for path in ["/v1/kv/secret", "/v1/kv", "/v1/history", "/metrics", "/v1/store:export"] {
        let response = http.request("GET", path, &[("Host", rebound_host.as_str())], None).unwrap();
        assert_eq!(response.status, 403, "{path}: {}", response.text());
        assert!(!response.text().contains("s3cr3t"), "{path}");
    }
    // The names the server does answer to still work.
    for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
        expect(&http.request("GET", "/v1/kv/secret", &[("Host", host.as_str())], None).unwrap(), 200);
    }
}

#[test]
fn cors_is_only_for_configured_origins() {
    let place = Place::new();
    let server = place.serve(&["--allow-origin", "https://app.example.com"]);
    let http = server.client();
    let preflight = [
        ("Origin", "https://app.example.com"),
        ("Access-Control-Request-Method", "PUT"),
        ("Access-Control-Request-Headers", "content-type, if-match"),
    ];
    let answered = http.request("OPTIONS", "/v1/kv/x", &preflight, None).unwrap();
    assert!(answered.status < 300, "{}", answered.text());
    assert_eq!(answered.header("access-control-allow-origin"), Some("https://app.example.com"));
    let put = http
        .request(
            "PUT",
            "/v1/kv/x",
            &[("Origin", "https://app.example.com"), ("Content-Type", "application/json")],
            Some(b"1"),
        )
        .unwrap();
    assert_eq!(put.status, 200, "{}", put.text());
    assert_eq!(put.header("access-control-allow-origin"), Some("https://app.example.com"));
    // Anyone else: no CORS grant, and no access.
    let foreign = [("Origin", "https://evil.example"), ("Access-Control-Request-Method", "PUT")];
    let refused = http.request("OPTIONS", "/v1/kv/x", &foreign, None).unwrap();
    assert_eq!(refused.header("access-control-allow-origin"), None);
    let plain = place.serve(&[]);
    let none = plain.client().request("OPTIONS", "/v1/kv/x", &preflight, None).unwrap();
    assert_eq!(none.header("access-control-allow-origin"), None, "no CORS unless configured");
}

/// Opens `n` connections that never send a byte.
fn silent_sockets(server: &state_e2e::HttpServer, n: usize) -> Vec<TcpStream> {
    (0..n).map(|_| TcpStream::connect(server.addr).unwrap()).collect()
}

#[test]
fn a_flood_of_silent_sockets_locks_nobody_out() {
    let place = Place::new();
    let server = place.serve(&[]);
    // More than the default cap of 1,024, from a client with no token.
    let flood = silent_sockets(&server, 1100);
    let started = Instant::now();
    let health = server.client().get("/healthz").unwrap();
    assert_eq!(health.status, 200, "{}", health.text());
    assert!(started.elapsed() < Duration::from_secs(5), "healthz took {:?}", started.elapsed());
    expect(&server.client().json("PUT", "/v1/kv/still-served", &json!(true)).unwrap(), 200);
    drop(flood);
}

#[test]
fn a_silent_socket_is_closed_after_the_header_timeout() {
    let place = Place::new();
    let server = place.serve(&["--header-timeout", "500ms", "--idle-timeout", "700ms"]);
    let mut silent = TcpStream::connect(server.addr).unwrap();
    silent.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 64];
    let read = silent.read(&mut buf).unwrap_or(0);
    assert_eq!(read, 0, "the server closes a connection that never spoke");
    assert!(started.elapsed() < Duration::from_secs(5), "closed after {:?}", started.elapsed());

    // A keep-alive connection that goes quiet after a request is closed too.
    let mut kept = TcpStream::connect(server.addr).unwrap();
    kept.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(kept, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut answered = Vec::new();
    let started = Instant::now();
    loop {
        let n = kept.read(&mut buf).unwrap_or(0);
        if n == 0 {
            break;
        }
        answered.extend_from_slice(&buf[..n]);
        assert!(started.elapsed() < Duration::from_secs(5), "the idle connection stayed open");
    }
    assert!(String::from_utf8_lossy(&answered).starts_with("HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answered));
}

#[test]
fn when_every_connection_is_busy_a_newcomer_gets_503_at_once() {
    let place = Place::new();
    let server = place.serve(&["--max-connections", "4"]);
    let http = server.client();
    // Four watch streams hold every connection with a request in flight.
    let streams: Vec<_> = (0..4).map(|_| http.stream("/v1/watch?prefix=x/", &[]).unwrap()).collect();
    let started = Instant::now();
    let shed = http.get("/healthz").unwrap();
    problem(&shed, 503, "overloaded");
    assert_eq!(shed.header("retry-after"), Some("1"));
    assert!(started.elapsed() < Duration::from_secs(5));
    drop(streams);
    // Once they go, service resumes.
    wait::until("the server to recover", Duration::from_secs(10), || http.get("/healthz").unwrap().status == 200);
}

#[test]
fn one_tenants_idempotency_keys_neither_block_nor_reveal_anothers() {
    let place = Place::new();
    let server = place.serve_with_auth();
    let a = server.client().with_token(crate::TEAM_A);
    let b = server.client().with_token(crate::TEAM_B);
    let key = [("Idempotency-Key", "deploy-2026-11-26")];
    let put = |client: &state_e2e::HttpClient, path: &str, body: &[u8]| {
        client.request("PUT", path, &key, Some(body)).unwrap()
    };
    let first = expect(&put(&a, "/v1/kv/team-a/deploy", b"1"), 200);
    // team-b, using the same key for its own write, is neither refused nor answered with
    // team-a's result: its write is applied.
    let theirs = expect(&put(&b, "/v1/kv/team-b/deploy", b"2"), 200);
    assert_eq!((theirs["key"].as_str(), theirs["version"].as_u64()), (Some("team-b/deploy"), Some(1)), "{theirs}");
    assert_ne!(theirs["revision"], first["revision"]);
    // Each tenant's retry still answers from its own record, writing nothing twice.
    let again = expect(&put(&a, "/v1/kv/team-a/deploy", b"1"), 200);
    assert_eq!(again["revision"], first["revision"]);
    let reused = put(&a, "/v1/kv/team-a/other", b"1");
    let problem = crate::problem(&reused, 400, "invalid_input");
    assert!(problem["detail"].as_str().unwrap().contains("`deploy-2026-11-26` was already used"), "{problem}");
    let stored = expect(&b.get("/v1/kv/team-b/deploy").unwrap(), 200);
    assert_eq!(stored["value"], 2);
}

#[test]
fn non_finite_numbers_are_refused_not_read_as_absent() {
    let place = Place::new();
    let server = place.serve(&[]);
    let http = server.client();
    for ttl in ["inf", "-inf", "NaN", "infinity", "1e400"] {
        let response = http.request("PUT", &format!("/v1/kv/forever?ttl_seconds={ttl}"), &[], Some(b"1")).unwrap();
        let body = problem(&response, 400, "invalid_arguments");
        assert!(body["detail"].as_str().unwrap().contains("ttl_seconds"), "{body}");
    }
    problem(&http.get("/v1/kv/forever").unwrap(), 404, "not_found");
    // An integer past 64 bits would come back as another number: refused, on every route.
    let wide = b"{\"n\": 18446744073709551616}";
    let response = http.request("PUT", "/v1/kv/wide", &[], Some(wide)).unwrap();
    let body = problem(&response, 400, "invalid_arguments");
    assert!(body["detail"].as_str().unwrap().contains("does not fit in 64 bits"), "{body}");
    let call = br#"{"key": "wide", "value": -9223372036854775809}"#;
    let response = http.request("POST", "/v1/call/native/state_set", &[], Some(call)).unwrap();
    problem(&response, 400, "invalid_arguments");
    problem(&http.get("/v1/kv/wide").unwrap(), 404, "not_found");
    // The edges of the 64-bit ranges are kept exactly.
    expect(&http.request("PUT", "/v1/kv/edge", &[], Some(b"18446744073709551615")).unwrap(), 200);
    assert_eq!(expect(&http.get("/v1/kv/edge").unwrap(), 200)["value"], serde_json::json!(u64::MAX));
}

#[test]
fn a_watch_from_beyond_the_present_is_refused_at_once() {
    let place = Place::new();
    let server = place.serve(&[]);
    let http = server.client();
    expect(&http.json("PUT", "/v1/kv/x", &json!(1)).unwrap(), 200);
    let max = u64::MAX.to_string();
    let sse = http.request("GET", &format!("/v1/watch?from_revision={max}"), &[], None).unwrap();
    let body = problem(&sse, 400, "invalid_input");
    assert!(body["detail"].as_str().unwrap().contains("past this store's current revision 1"), "{body}");
    assert!(body["detail"].as_str().unwrap().contains("`from_revision`"), "named as this route names it: {body}");
    assert!(!body["detail"].as_str().unwrap().contains("shutting down"));
    let resumed = http.request("GET", "/v1/watch", &[("Last-Event-ID", max.as_str())], None).unwrap();
    problem(&resumed, 400, "invalid_input");
    let poll = http.json("POST", "/v1/call/native/state_watch", &json!({"after_revision": u64::MAX})).unwrap();
    assert_eq!(poll.status, 400, "{}", poll.text());
    assert_eq!(poll.json()["error"]["code"], "invalid_input", "{}", poll.text());
}

#[test]
fn a_malformed_tokens_file_does_not_print_its_secret() {
    let place = Place::new();
    let secret = "hunter2-super-secret-token-value";
    std::fs::write(&place.tokens, format!("[[token]]\nname = \"ci\"\nsecret = \"{secret}\nprefixes = [\"\"]\n"))
        .unwrap();
    let db = place.db.to_string_lossy().into_owned();
    let tokens = place.tokens.to_string_lossy().into_owned();
    let (status, stderr) =
        state_e2e::run_to_exit(crate::binary(), &["--db", &db, "--auth", &tokens, "--listen", "127.0.0.1:0"], &[])
            .unwrap();
    assert!(!status.success());
    assert!(stderr.contains("tokens file") && stderr.contains("line 3"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "the startup error quotes the secret: {stderr}");
}

#[test]
fn a_scoped_token_learns_nothing_of_other_tenants_or_of_the_store() {
    let place = Place::new();
    let server = place.serve_with_auth();
    let admin = server.client().with_token(crate::ADMIN);
    let a = server.client().with_token(crate::TEAM_A);
    let run = expect(&admin.json("POST", "/v1/workflows", &json!({"name": "team-b/payroll-export"})).unwrap(), 200);
    let run_id = run["run_id"].as_str().unwrap();
    // Answered as a run that does not exist (404), telling nothing of it.
    let refused = a.get(&format!("/v1/workflows/{run_id}")).unwrap();
    let body = problem(&refused, 404, "not_found");
    assert!(!refused.text().contains("payroll") && !refused.text().contains("team-b"), "{body}");
    // Depending on another tenant's run would read its outcome through waiting_on and
    // blocked_by; a dedupe key shared with its runs would hand back its run id and name.
    let depends = json!({"name": "team-a/after-payroll", "depends_on": [run_id]});
    problem(&a.json("POST", "/v1/workflows", &depends).unwrap(), 403, "forbidden");
    let keyed = |name: &str| json!({"name": name, "dedupe_key": "nightly"});
    expect(&admin.json("POST", "/v1/workflows", &keyed("team-b/nightly-export")).unwrap(), 200);
    let mine = expect(&a.json("POST", "/v1/workflows", &keyed("team-a/nightly")).unwrap(), 200);
    assert_eq!(mine["status"], "ok", "another tenant's run with the same dedupe key is not a duplicate: {mine}");

    let health = expect(&a.get("/v1/health").unwrap(), 200);
    for store_wide in ["keys", "owner", "database_bytes", "writes"] {
        assert!(health.get(store_wide).is_none(), "{store_wide} shown to a scoped token: {health}");
    }
    assert!(health["revision"].is_u64());
    let full = expect(&admin.get("/v1/health").unwrap(), 200);
    assert!(full["keys"].is_u64() && full["owner"]["pid"].is_u64(), "{full}");
    problem(&a.get("/metrics").unwrap(), 403, "forbidden");
    assert_eq!(admin.get("/metrics").unwrap().status, 200);
    let probe = expect(&server.client().get("/healthz").unwrap(), 200);
    assert_eq!(probe, json!({"status": "ok"}), "an anonymous probe learns only that the store answers");
}

/// The resident memory of a process, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

#[test]
fn a_watcher_that_stops_reading_does_not_make_the_server_hold_the_values_it_missed() {
    // Enough values that what the allocator keeps cached (up to ~13 MB seen here) stays well
    // under what holding them all would cost.
    const VALUES: usize = 80;
    const BUDGET: &str = "1048576";
    let value = format!("\"{}\"", "x".repeat(1_000_000));
    // The same load on two servers; only one has a watcher that stops reading. What the
    // stalled watcher costs is the difference.
    let (place_a, place_b) = (Place::new(), Place::new());
    // The allocator keeps freed megabyte blocks resident for a while before it returns them
    // (mimalloc's purge delay; glibc's heap once made the two servers differ by 24 MB):
    // resident memory would measure the allocator's history, not what the server holds.
    // Returned at once, freed blocks leave only what is live.
    let exact_rss = [("MIMALLOC_PURGE_DELAY", "0")];
    let stalled_server = place_a.serve_with_env(&["--watch-buffer-bytes", BUDGET], &exact_rss);
    let control = place_b.serve_with_env(&["--watch-buffer-bytes", BUDGET], &exact_rss);
    let mut stalled = stalled_server.client().stream("/v1/watch?prefix=big/", &[]).unwrap();
    assert_eq!(stalled.next_event().unwrap().unwrap().event.as_deref(), Some("position"));
    let before = (rss(stalled_server.pid()), rss(control.pid()));
    for server in [&stalled_server, &control] {
        let http = server.client();
        for i in 0..VALUES {
            expect(&http.request("PUT", &format!("/v1/kv/big/{i}"), &[], Some(value.as_bytes())).unwrap(), 200);
        }
    }
    let grew = |now: u64, then: u64| now.saturating_sub(then);
    let cost = grew(rss(stalled_server.pid()), before.0) as i64 - grew(rss(control.pid()), before.1) as i64;
    eprintln!("a stalled watcher cost {:.1} MB over {VALUES} values of 1 MB", cost as f64 / 1e6);
    // Without the budget it held every value it missed: 80 MB here.
    assert!(cost < (VALUES as i64) * 1_000_000 / 2, "the stalled watcher made the server hold {cost} more bytes");

    // Once it reads again it gets every change, in order, the values included.
    stalled.set_timeout(Duration::from_secs(30)).unwrap();
    let mut revisions = Vec::new();
    while revisions.len() < VALUES {
        let event = stalled.next_event().unwrap().expect("the stream goes on");
        if event.comment.is_some() {
            continue;
        }
        let batch = event.json();
        assert_eq!(batch["events"][0]["value"].as_str().map(str::len), Some(1_000_000), "{}", event.data.len());
        revisions.push(batch["revision"].as_u64().unwrap());
    }
    assert_eq!(revisions, (1..=VALUES as u64).collect::<Vec<_>>());
}

/// Opens a 2025-11-25 MCP session; its id, or the refusal's status.
fn open_session(http: &state_e2e::HttpClient) -> Result<String, u16> {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "flood", "version": "1"}}});
    let headers = [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
    let response = http.request("POST", "/mcp", &headers, Some(init.to_string().as_bytes())).unwrap();
    match response.header("mcp-session-id") {
        Some(id) if response.status == 200 => Ok(id.to_owned()),
        _ => Err(response.status),
    }
}

/// Whether a session still answers (a closed one is 404).
fn session_lives(http: &state_e2e::HttpClient, session: &str) -> bool {
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("Mcp-Session-Id", session),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let response = http.request("POST", "/mcp", &headers, Some(ping.to_string().as_bytes())).unwrap();
    match response.status {
        200 => true,
        404 => false,
        other => panic!("ping answered {other}: {}", response.text()),
    }
}

/// A leaked session id is no way into someone else's session: another token that names it is
/// told it does not exist, whether it posts into it, listens to it or tries to end it.
#[test]
fn another_tokens_session_id_opens_nothing() {
    let place = Place::new();
    let server = place.serve_with_auth();
    let (team, reader) = (server.client().with_token(crate::TEAM_A), server.client().with_token(crate::READER));
    let session = open_session(&team).unwrap();
    assert!(!session_lives(&reader, &session), "a ping through another token's session is a 404");
    let listen = reader.request(
        "GET",
        "/mcp",
        &[("Accept", "text/event-stream"), ("Mcp-Session-Id", &session), ("MCP-Protocol-Version", "2025-11-25")],
        None,
    );
    assert_eq!(listen.unwrap().status, 404, "nor may it listen to its notifications");
    let ended = reader
        .request("DELETE", "/mcp", &[("Mcp-Session-Id", &session), ("MCP-Protocol-Version", "2025-11-25")], None)
        .unwrap();
    problem(&ended, 404, "session_not_found");
    assert!(session_lives(&team, &session), "the session lives on for the token that opened it");
    let own = team
        .request("DELETE", "/mcp", &[("Mcp-Session-Id", &session), ("MCP-Protocol-Version", "2025-11-25")], None)
        .unwrap();
    assert_eq!(own.status, 204, "{}", own.text());
    assert!(!session_lives(&team, &session));
}

#[test]
fn a_session_flood_is_capped_per_token_and_in_total() {
    let place = Place::new();
    let tokens = place.tokens.to_string_lossy().into_owned();
    let server = place.serve(&["--auth", &tokens, "--max-mcp-sessions", "12", "--max-mcp-sessions-per-token", "5"]);
    let reader = server.client().with_token(crate::READER);
    // A read-only token opening session after session: it never holds more than five, the
    // first ones closing as new ones open.
    let flood: Vec<String> = (0..40).map(|_| open_session(&reader).expect("its own oldest make room")).collect();
    let alive: Vec<bool> = flood.iter().map(|s| session_lives(&reader, s)).collect();
    assert_eq!(alive.iter().filter(|a| **a).count(), 5, "{alive:?}");
    assert!(alive[35..].iter().all(|a| *a), "the most recent ones are kept");
    // Other tokens are untouched by it, until the server itself is full.
    let team = server.client().with_token(crate::TEAM_A);
    let admin = server.client().with_token(crate::ADMIN);
    let theirs: Vec<String> = (0..5).map(|_| open_session(&team).unwrap()).collect();
    let admins: Vec<String> = (0..2).map(|_| open_session(&admin).unwrap()).collect();
    assert_eq!(open_session(&admin), Err(503), "twelve sessions is the server's cap");
    assert!(admins.iter().all(|s| session_lives(&admin, s)));
    assert!(theirs.iter().all(|s| session_lives(&team, s)), "a flood by one token closes no one else's");
    // The stateless protocol needs no session and is still served.
    let discover = json!({"jsonrpc": "2.0", "id": 3, "method": "server/discover", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}});
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "server/discover"),
    ];
    assert_eq!(admin.request("POST", "/mcp", &headers, Some(discover.to_string().as_bytes())).unwrap().status, 200);
}

/// Sockets a process has open.
fn open_files(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0)
}

#[test]
fn watchers_that_stop_reading_a_busy_stream_are_cut_off() {
    let place = Place::new();
    let server = place.serve(&["--stall-timeout", "1s"]);
    let http = server.client();
    // Four watchers ask for every change with its value, then never read a byte.
    let stalled: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut socket = TcpStream::connect(server.addr).unwrap();
            write!(
                socket,
                "GET /v1/watch?prefix=big/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n"
            )
            .unwrap();
            socket
        })
        .collect();
    expect(&http.get("/healthz").unwrap(), 200);
    let with_them = open_files(server.pid());
    // More than their socket buffers hold: their streams stop moving, and are cut off.
    let value = format!("\"{}\"", "v".repeat(1_000_000));
    for i in 0..17 {
        expect(&http.request("PUT", &format!("/v1/kv/big/{i}"), &[], Some(value.as_bytes())).unwrap(), 200);
    }
    wait::until("the watchers that stopped reading to lose their connections", Duration::from_secs(20), || {
        open_files(server.pid()) + 4 <= with_them
    });
    drop(stalled);
}
