//! One caller cannot lock the others out (issue 30): the probe's floods, each run against a
//! real server. A token's watch streams and requests in flight are bounded, a body trickled a
//! byte at a time is cut off, HTTP/2 is not spoken, and a listen from a foreign page is refused
//! before it starts anything.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::{Place, expect, problem};

/// Reads what the server sends on `socket` until it closes or `limit` passes.
fn read_answer(socket: &mut TcpStream, limit: Duration) -> Vec<u8> {
    socket.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while started.elapsed() < limit {
        match socket.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                if !answer.is_empty() {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    answer
}

#[test]
fn http2_with_prior_knowledge_is_not_spoken() {
    let place = Place::new();
    let server = place.serve(&[]);
    let mut socket = TcpStream::connect(server.addr).unwrap();
    // HTTP/2's connection preface, then an empty SETTINGS frame.
    socket.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00").unwrap();
    let answer = read_answer(&mut socket, Duration::from_secs(5));
    // An HTTP/2 server answers with its own SETTINGS frame (type 4 at byte 3); HTTP/1.1 refuses
    // the preface as a bad request, or closes.
    assert!(answer.len() < 9 || answer[3] != 4, "answered as HTTP/2: {answer:?}");
    assert!(answer.is_empty() || answer.starts_with(b"HTTP/1.1 4"), "{}", String::from_utf8_lossy(&answer));
    expect(&server.client().get("/healthz").unwrap(), 200);
}

#[test]
fn one_tokens_watch_flood_is_capped_and_locks_nobody_else_out() {
    let place = Place::new();
    let tokens = place.tokens.to_string_lossy().into_owned();
    let server = place.serve(&["--auth", &tokens, "--max-watches-per-caller", "8"]);
    let reader = server.client().with_token(crate::READER);
    let mut open: Vec<_> = (0..8).map(|_| reader.stream("/v1/watch?prefix=team-a/", &[]).unwrap()).collect();
    let refused = reader.stream("/v1/watch?prefix=team-a/", &[]).err().expect("a ninth watch is refused");
    assert!(refused.to_string().starts_with("429") && refused.to_string().contains("8 watch streams"), "{refused}");
    // Another token is untouched, for watches and for writes.
    let team = server.client().with_token(crate::TEAM_A);
    let theirs = team.stream("/v1/watch?prefix=team-a/", &[]).unwrap();
    expect(&team.json("PUT", "/v1/kv/team-a/x", &json!(1)).unwrap(), 200);
    drop(theirs);
    // A watch that ends gives its place back.
    drop(open.pop());
    let stream = state_e2e::wait::until_some("the watch's place to be given back", Duration::from_secs(10), || {
        reader.stream("/v1/watch?prefix=team-a/", &[]).ok()
    });
    open.push(stream);
}

/// Starts a request whose body never finishes arriving.
fn trickle(server: &state_e2e::HttpServer, method: &str, path: &str, token: Option<&str>) -> TcpStream {
    let mut socket = TcpStream::connect(server.addr).unwrap();
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    write!(
        socket,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{{\"jsonrpc\""
    )
    .unwrap();
    socket
}

#[test]
fn a_body_trickled_to_mcp_is_cut_off_at_the_request_timeout() {
    let place = Place::new();
    let server = place.serve(&["--request-timeout", "1s"]);
    let mut socket = trickle(&server, "POST", "/mcp", None);
    let started = Instant::now();
    let answer = read_answer(&mut socket, Duration::from_secs(10));
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("request_timeout"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(8), "cut off after {:?}", started.elapsed());
}

#[test]
fn one_tokens_requests_in_flight_are_capped_and_others_are_served() {
    let place = Place::new();
    let tokens = place.tokens.to_string_lossy().into_owned();
    let server = place.serve(&["--auth", &tokens, "--max-requests-per-caller", "3"]);
    let hold = || trickle(&server, "POST", "/v1/call/native/state_get", Some(crate::READER));
    let mut held: Vec<TcpStream> = (0..3).map(|_| hold()).collect();
    // The trickles are in flight once their headers are read: wait until the fourth is refused.
    let reader = server.client().with_token(crate::READER);
    let mut last = String::new();
    state_e2e::wait::within(Duration::from_secs(10), || {
        // A probe can take a place before the last trickle's headers are read, and that
        // trickle is then the one refused: one already answered is replaced.
        for socket in &mut held {
            socket.set_nonblocking(true).unwrap();
            let answered = socket.peek(&mut [0u8; 1]).is_ok();
            if answered {
                *socket = hold();
            }
        }
        let response = reader.get("/v1/kv/team-a/x").unwrap();
        if response.status != 429 {
            last = response.text();
            return None;
        }
        let body = problem(&response, 429, "too_many_requests");
        assert!(body["detail"].as_str().unwrap().contains("3 requests in flight"), "{body}");
        assert_eq!(response.header("retry-after"), Some("1"));
        Some(())
    })
    .unwrap_or_else(|| panic!("the fourth request was served: {last}"));
    let team = server.client().with_token(crate::TEAM_A);
    expect(&team.json("PUT", "/v1/kv/team-a/y", &json!(2)).unwrap(), 200);
    drop(held);
}

#[test]
fn a_listen_from_a_foreign_page_is_refused_before_it_starts_anything() {
    let place = Place::new();
    let server = place.serve(&[]);
    let listen = json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": {
        "notifications": {"resourceSubscriptions": ["state://kv/a"]},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}},
    }});
    let port = server.addr.port();
    for (name, value) in [("Origin", "http://evil.example".to_owned()), ("Host", format!("evil.example:{port}"))] {
        let headers = [
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "subscriptions/listen"),
            (name, value.as_str()),
        ];
        let response = server.client().request("POST", "/mcp", &headers, Some(listen.to_string().as_bytes())).unwrap();
        // Refused by the guard in front of everything (a problem document), not by rmcp after
        // the listen's watches were started.
        let code = if name == "Origin" { "forbidden_origin" } else { "forbidden_host" };
        problem(&response, 403, code);
    }
}

/// A tokens file where team-b may make 5 writes a second (bursts of 5); team-a has no quota.
fn with_write_quota(place: &Place) -> std::path::PathBuf {
    let text = crate::TOKENS
        .replace("prefixes = [\"team-b/\"]\n", "prefixes = [\"team-b/\"]\nwrites_per_second = 5\nwrite_burst = 5\n");
    assert_ne!(text, crate::TOKENS);
    let path = place.tokens.with_file_name("quota.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A tenant past its write quota is refused, with when to retry, before its write reaches the
/// store; one that comes back sooner is held until then instead of being answered at once;
/// another tenant's writes and its own reads go on; the refusals show in its `state_health` and
/// in `/metrics`.
#[test]
fn a_token_past_its_write_quota_is_refused_with_retry_after_and_no_one_else_is() {
    let place = Place::new();
    let tokens = with_write_quota(&place);
    let server = place.serve(&["--auth", &tokens.to_string_lossy(), "--tools", "all"]);
    let team_b = server.client().with_token(crate::TEAM_B);
    let team_a = server.client().with_token(crate::TEAM_A);
    let put = |n: usize| team_b.request("PUT", &format!("/v1/kv/team-b/k{n}"), &[], Some(b"1")).unwrap();
    // The burst, then a refusal (unless the bucket refilled meanwhile on a slow machine).
    let mut accepted = 0;
    let refused = loop {
        let response = put(accepted);
        match response.status {
            200 => accepted += 1,
            429 => break response,
            other => panic!("unexpected {other}: {}", response.text()),
        }
        assert!(accepted <= 8, "the burst of 5 was never used up");
    };
    assert!(accepted >= 5, "accepted {accepted}");
    let body = problem(&refused, 429, "quota_exceeded");
    let retry_after: u64 = refused.header("retry-after").expect("Retry-After").parse().unwrap();
    assert_eq!(retry_after, 1, "200 ms rounded up to whole seconds");
    let detail = body["detail"].as_str().unwrap();
    assert!(detail.contains("team-b") && detail.contains("5 writes per second"), "{detail}");
    let told = body["retry_after_ms"].as_u64().expect("retry_after_ms");
    assert!(told <= 200, "{body}");

    // Coming back at once, it is held until the time it was told, then written: a writer that
    // never pauses is slowed to the rate, not answered refusals as fast as it can ask.
    let started = Instant::now();
    expect(&put(accepted), 200);
    accepted += 1;
    let held = started.elapsed();
    assert!(held >= Duration::from_millis(told.saturating_sub(40)), "held {held:?}, told {told} ms");
    assert!(held < Duration::from_secs(2), "held {held:?}");

    // Nothing refused was written: the store holds exactly the accepted keys.
    let listed = expect(&team_b.get("/v1/kv?prefix=team-b/").unwrap(), 200);
    assert_eq!(listed["entries"].as_array().unwrap().len(), accepted);
    // Others write on, and team-b still reads.
    for i in 0..20 {
        expect(&team_a.request("PUT", &format!("/v1/kv/team-a/k{i}"), &[], Some(b"1")).unwrap(), 200);
    }
    expect(&team_b.get("/v1/kv/team-b/k0").unwrap(), 200);
    // Its own health says where it stands; /metrics says it to the operator.
    let health = expect(&team_b.get("/v1/health").unwrap(), 200);
    assert_eq!(health["quota"]["writes_per_second"], 5.0);
    assert_eq!(health["quota"]["writes_refused"].as_u64(), Some(1), "{health}");
    assert!(expect(&team_a.get("/v1/health").unwrap(), 200).get("quota").is_none(), "team-a has none");
    let metrics = server.client().with_token(crate::ADMIN).get("/metrics").unwrap().text();
    assert!(metrics.contains("state_token_writes_refused_total{token=\"team-b\"} 1"), "{metrics}");
    assert!(metrics.contains("route=\"/v1/kv/{*key}\",method=\"PUT\",outcome=\"limited\""), "{metrics}");
}

/// The quota is the token's, whichever door it comes through: /mcp's tools share it with REST,
/// and a refused tool call is an error that names the limit.
#[test]
fn a_write_quota_holds_over_mcp_too() {
    let place = Place::new();
    let tokens = with_write_quota(&place);
    let server = place.serve(&["--auth", &tokens.to_string_lossy()]);
    let team_b = server.client().with_token(crate::TEAM_B);
    for i in 0..5 {
        expect(&team_b.request("PUT", &format!("/v1/kv/team-b/rest{i}"), &[], Some(b"1")).unwrap(), 200);
    }
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "state_set", "arguments": {"key": "team-b/over-mcp", "value": 1}}});
    let headers = [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "quota", "version": "1"}}});
    let opened = team_b.request("POST", "/mcp", &headers, Some(init.to_string().as_bytes())).unwrap();
    let session = opened.header("mcp-session-id").expect("a session").to_owned();
    let mut with_session = headers.to_vec();
    with_session.push(("Mcp-Session-Id", &session));
    with_session.push(("MCP-Protocol-Version", "2025-11-25"));
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    team_b.request("POST", "/mcp", &with_session, Some(initialized.to_string().as_bytes())).unwrap();
    let answer = team_b.request("POST", "/mcp", &with_session, Some(call.to_string().as_bytes())).unwrap();
    let text = answer.text();
    assert!(text.contains("\"isError\":true") && text.contains("5 writes per second"), "{text}");
    let written = server.client().with_token(crate::ADMIN).get("/v1/kv/team-b/over-mcp").unwrap();
    assert_eq!(written.status, 404, "the refused tool call wrote nothing");
}
