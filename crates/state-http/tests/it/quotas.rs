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
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match reader.stream("/v1/watch?prefix=team-a/", &[]) {
            Ok(stream) => {
                open.push(stream);
                break;
            }
            Err(e) => assert!(Instant::now() < deadline, "the place was never given back: {e}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
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
    let held: Vec<TcpStream> =
        (0..3).map(|_| trickle(&server, "POST", "/v1/call/native/state_get", Some(crate::READER))).collect();
    // The trickles are in flight once their headers are read: wait until the fourth is refused.
    let reader = server.client().with_token(crate::READER);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let response = reader.get("/v1/kv/team-a/x").unwrap();
        if response.status == 429 {
            let body = problem(&response, 429, "too_many_requests");
            assert!(body["detail"].as_str().unwrap().contains("3 requests in flight"), "{body}");
            assert_eq!(response.header("retry-after"), Some("1"));
            break;
        }
        assert!(Instant::now() < deadline, "the fourth request was served: {}", response.text());
        std::thread::sleep(Duration::from_millis(50));
    }
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
