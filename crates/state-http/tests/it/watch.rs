//! Watching over HTTP: `GET /v1/watch` as server-sent events (resume, keep-alive, shutdown,
//! auth, errors), the long poll outliving the request timeout, and MCP resource
//! subscriptions on /mcp in both protocol generations.

use std::thread;
use std::time::Duration;

use serde_json::{Value, json};
use state_e2e::{HttpClient, McpClient, ProtocolEra, SseEvent, SseStream};

use crate::{ADMIN, Place, READER, TEAM_A, expect, state_mcp};

/// Generous: CI machines are shared; a healthy server delivers in milliseconds.
const PATIENCE: Duration = Duration::from_secs(20);

fn put(http: &HttpClient, key: &str, value: Value) -> u64 {
    let body = value.to_string();
    expect(&http.request("PUT", &format!("/v1/kv/{key}"), &[], Some(body.as_bytes())).unwrap(), 200)["revision"]
        .as_u64()
        .unwrap()
}

/// The next event that is not a keep-alive comment, within [`PATIENCE`].
pub(crate) fn next_event(stream: &mut SseStream) -> SseEvent {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        stream
            .set_timeout(deadline.saturating_duration_since(std::time::Instant::now()).max(Duration::from_millis(1)))
            .unwrap();
        let event = stream.next_event().unwrap().expect("the stream is still open");
        if event.comment.is_none() {
            return event;
        }
        assert!(std::time::Instant::now() < deadline, "only keep-alives for {PATIENCE:?}");
    }
}

/// The next change event: its id, and the keys of its events.
fn next_change(stream: &mut SseStream) -> (u64, Vec<String>) {
    let event = next_event(stream);
    assert_eq!(event.event, None, "a change event, not {event:?}");
    let batch = event.json();
    let id: u64 = event.id.as_deref().unwrap().parse().unwrap();
    assert_eq!(batch["revision"], json!(id), "the event id is the batch's revision: {batch}");
    let keys = batch["events"].as_array().unwrap().iter().map(|e| e["key"].as_str().unwrap().to_owned()).collect();
    (id, keys)
}

#[test]
fn sse_delivers_every_change_and_resumes_from_last_event_id() {
    let place = Place::new();
    let server = place.serve(&[]);
    let http = server.client();
    let first = put(&http, "jobs/1", json!("queued"));

    let mut stream = http.stream("/v1/watch?prefix=jobs/&from_revision=0", &[]).unwrap();
    assert_eq!(stream.header("content-type"), Some("text/event-stream"));
    let opening = next_event(&mut stream);
    assert_eq!((opening.event.as_deref(), opening.id.as_deref()), (Some("position"), Some("0")), "{opening:?}");
    // History first, then live changes, filtered to the prefix.
    assert_eq!(next_change(&mut stream), (first, vec!["jobs/1".to_owned()]));
    put(&http, "other/1", json!("unwatched"));
    let second = put(&http, "jobs/2", json!("queued"));
    assert_eq!(next_change(&mut stream), (second, vec!["jobs/2".to_owned()]));
    drop(stream);

    // Changes while disconnected are delivered on resume, exactly once each.
    let third = put(&http, "jobs/3", json!("queued"));
    expect(&http.request("DELETE", "/v1/kv/jobs/1", &[], None).unwrap(), 200);
    let last = second.to_string();
    // Last-Event-ID wins over from_revision, as an EventSource reconnecting keeps its URL.
    let mut resumed = http.stream("/v1/watch?prefix=jobs/&from_revision=0", &[("Last-Event-ID", &last)]).unwrap();
    assert_eq!(next_event(&mut resumed).id, Some(last));
    assert_eq!(next_change(&mut resumed), (third, vec!["jobs/3".to_owned()]));
    let (deleted, keys) = next_change(&mut resumed);
    assert_eq!((deleted, keys), (third + 1, vec!["jobs/1".to_owned()]));
}

#[test]
fn an_idle_stream_gets_keep_alives_and_ends_with_a_problem_when_the_server_stops() {
    let place = Place::new();
    let mut server = place.serve(&["--keep-alive", "100ms"]);
    let http = server.client();
    let mut stream = http.stream("/v1/watch?prefix=quiet/", &[]).unwrap();
    assert_eq!(next_event(&mut stream).event.as_deref(), Some("position"));
    let keep_alive = stream.next_event().unwrap().unwrap();
    assert_eq!(keep_alive.comment.as_deref(), Some("keep-alive"), "{keep_alive:?}");

    let stopping = thread::spawn(move || {
        let status = server.terminate().unwrap();
        (status, server.stderr())
    });
    let last = next_event(&mut stream);
    assert_eq!(last.event.as_deref(), Some("problem"), "{last:?}");
    assert_eq!((last.json()["status"].clone(), last.json()["code"].clone()), (json!(503), json!("unavailable")));
    let rest: Vec<SseEvent> = std::iter::from_fn(|| stream.next_event().unwrap()).collect();
    assert!(rest.iter().all(|e| e.comment.is_some()), "nothing after the problem: {rest:?}");
    let (status, stderr) = stopping.join().unwrap();
    assert!(status.success(), "an open watch does not hold up shutdown: {status:?} {stderr}");
}

#[test]
fn watch_is_scoped_by_token_and_refuses_bad_requests() {
    let place = Place::new();
    let server = place.serve_with_auth();
    let anonymous = server.client();
    let team_a = anonymous.with_token(TEAM_A);
    let error = anonymous.stream("/v1/watch?prefix=team-a/", &[]).err().unwrap().to_string();
    assert!(error.starts_with("401"), "{error}");
    let error = anonymous.with_token(READER).stream("/v1/watch?prefix=team-b/", &[]).err().unwrap().to_string();
    assert!(error.starts_with("403"), "{error}");
    // Everything (no prefix) is beyond a token scoped to one prefix.
    let error = team_a.stream("/v1/watch", &[]).err().unwrap().to_string();
    assert!(error.starts_with("403"), "{error}");

    let mut reader = anonymous.with_token(READER).stream("/v1/watch?prefix=team-a/", &[]).unwrap();
    next_event(&mut reader);
    put(&anonymous.with_token(ADMIN), "team-b/secret", json!("hidden"));
    let visible = put(&team_a, "team-a/plan", json!("shared"));
    assert_eq!(next_change(&mut reader), (visible, vec!["team-a/plan".to_owned()]));

    for (path, headers, needle) in [
        ("/v1/watch?prefix=team-a/&colour=red", &[][..], "`colour`"),
        ("/v1/watch?prefix=team-a/&from_revision=soon", &[][..], "from_revision"),
        ("/v1/watch?prefix=team-a/", &[("Last-Event-ID", "yesterday")][..], "Last-Event-ID"),
    ] {
        let error = team_a.stream(path, headers).err().unwrap().to_string();
        assert!(error.starts_with("400") && error.contains("invalid_arguments"), "{path}: {error}");
        assert!(error.contains(needle), "{path}: {error}");
    }
}

#[test]
fn a_client_that_stops_reading_is_ended_with_where_to_resume_and_loses_nothing() {
    let place = Place::new();
    let server = place.serve(&[]);
    let http = server.client();
    let mut stalled = http.stream("/v1/watch?prefix=big/", &[]).unwrap();
    assert_eq!(next_event(&mut stalled).event.as_deref(), Some("position"));
    // Large changes fill the connection's buffers, so the server stops reading the watch; then
    // more commits than a watch may fall behind (4096) overrun it.
    let mut written = Vec::new();
    for i in 0..200 {
        written.push(put(&http, &format!("big/{i}"), json!("x".repeat(64 * 1024))));
    }
    for i in 0..4200 {
        put(&http, &format!("small/{}", i % 16), json!(i));
    }
    // Writers were never held up; the stalled client, reading at last, gets what was sent
    // before the overrun, in order, then a problem naming the revision to resume after.
    let mut seen = Vec::new();
    let problem = loop {
        let event = next_event(&mut stalled);
        if event.event.as_deref() == Some("problem") {
            break event.json();
        }
        seen.push(next_change_of(&event));
    };
    assert_eq!((problem["status"].clone(), problem["code"].clone()), (json!(503), json!("watch_lagged")), "{problem}");
    let resume_after = problem["resume_after"].as_u64().unwrap();
    assert!(seen.len() < written.len(), "the client was overrun, so it cannot have everything yet");
    assert_eq!(seen, written[..seen.len()], "in order, none skipped");
    // It names a revision at or after the last change received and before the first missed.
    assert!(seen.last().is_none_or(|last| resume_after >= *last), "{resume_after} {seen:?}");
    assert!(resume_after < written[seen.len()], "{resume_after} {seen:?}");
    // Resuming there delivers the rest: together, every change exactly once.
    let mut resumed = http.stream(&format!("/v1/watch?prefix=big/&from_revision={resume_after}"), &[]).unwrap();
    next_event(&mut resumed);
    while seen.len() < written.len() {
        seen.push(next_change_of(&next_event(&mut resumed)));
    }
    assert_eq!(seen, written);
}

/// The revision of a change event.
fn next_change_of(event: &SseEvent) -> u64 {
    assert_eq!(event.event, None, "a change event, not {event:?}");
    event.id.as_deref().unwrap().parse().unwrap()
}

#[test]
fn a_compacted_start_is_gone_and_names_the_oldest_revision() {
    let place = Place::new();
    let server = place.serve(&["--history-retention", "2"]);
    let http = server.client();
    for i in 0..400 {
        put(&http, "churn", json!(i));
    }
    // Compaction catches up in steps; wait until it keeps only the last 2 of 400 revisions.
    let body = state_e2e::wait::until_some("history compacted to revision 398", PATIENCE, || {
        let error = http.stream("/v1/watch?key=churn&from_revision=1", &[]).err()?.to_string();
        assert!(error.starts_with("410"), "{error}");
        let body: Value = serde_json::from_str(error.split_once(' ').unwrap().1).unwrap();
        (body["compacted_revision"] == 398).then_some(body)
    });
    assert_eq!(body["code"], "compacted", "{body}");
    assert!(body["detail"].as_str().unwrap().contains("revision 2 is no longer available"), "{body}");
    let oldest = body["compacted_revision"].as_u64().unwrap();
    // Resuming from the revision it names works.
    let mut stream = http.stream(&format!("/v1/watch?key=churn&from_revision={oldest}"), &[]).unwrap();
    assert_eq!(next_event(&mut stream).id, Some(oldest.to_string()));
}

#[test]
fn the_long_poll_outlives_the_request_timeout_and_wakes_on_another_processs_write() {
    let place = Place::new();
    let server = place.serve(&["--request-timeout", "1s"]);
    let http = server.client();
    let start = put(&http, "plan/draft", json!(0));

    let poller = http.clone();
    let waiting = thread::spawn(move || {
        let args = json!({"prefix": "plan/", "after_revision": start, "timeout_seconds": 30});
        poller.json("POST", "/v1/call/native/state_watch", &args).unwrap()
    });
    // Longer than the request timeout, and a write from a stdio process joined to the server.
    thread::sleep(Duration::from_millis(1500));
    let db = place.db.to_string_lossy().into_owned();
    let env = place.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut agent = McpClient::spawn_with_env(&state_mcp(), &["--db", &db], &env).unwrap();
    agent.handshake(ProtocolEra::Legacy).unwrap();
    let written = agent.call("state_set", json!({"key": "plan/final", "value": "go"})).unwrap();
    assert!(!written.is_error, "{}", written.text);

    let answer = expect(&waiting.join().unwrap(), 200);
    let result = &answer["result"];
    assert_eq!(result["timed_out"], false, "{answer}");
    assert_eq!(result["revision"], written.json()["revision"], "{answer}");
    assert_eq!(result["events"][0]["key"], "plan/final", "{answer}");
    agent.shutdown().unwrap();
}

const MODERN: &str = "2026-07-28";

const LISTEN_HEADERS: [(&str, &str); 4] = [
    ("Content-Type", "application/json"),
    ("Accept", "application/json, text/event-stream"),
    ("MCP-Protocol-Version", MODERN),
    ("Mcp-Method", "subscriptions/listen"),
];

/// A 2026-07-28 `subscriptions/listen` on /mcp, its stream read up to the acknowledgment.
fn listen(http: &HttpClient, uris: &[String]) -> SseStream {
    let listen = json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": {
        "notifications": {"resourceSubscriptions": uris},
        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}},
    }});
    let mut stream = http.stream_request("POST", "/mcp", &LISTEN_HEADERS, Some(listen.to_string().as_bytes())).unwrap();
    let ack = next_message(&mut stream);
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");
    assert_eq!(ack["params"]["notifications"]["resourceSubscriptions"], json!(uris), "{ack}");
    stream
}

fn updated_uri(stream: &mut SseStream) -> Value {
    let updated = next_message(stream);
    assert_eq!(updated["method"], "notifications/resources/updated", "{updated}");
    updated["params"]["uri"].clone()
}

#[test]
fn an_mcp_listener_on_http_hears_of_a_rest_write() {
    let place = Place::new();
    let server = place.serve(&[]);
    let http = server.client();
    let mut stream = listen(&http, &["state://kv/review/7".to_owned()]);
    put(&http, "review/7", json!({"approved": true}));
    assert_eq!(updated_uri(&mut stream), "state://kv/review/7");
}

/// The acknowledgment promises that every later write is announced, though rmcp sends it
/// before the handler runs. A server joined to an owner starts each watch with a round trip,
/// so a listen of many resources shows a late start: the write is made the moment the
/// acknowledgment arrives, to the resource that would be followed last.
#[test]
fn a_joined_servers_listener_hears_a_write_made_on_seeing_the_acknowledgment() {
    let place = Place::new();
    let db = place.db.to_string_lossy().into_owned();
    let env = place.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut owner_starter =
        McpClient::spawn_with_env(&state_mcp(), &["--db", &db, "--owner-idle", "5s"], &env).unwrap();
    owner_starter.handshake(ProtocolEra::Legacy).unwrap();
    let server = place.serve(&[]);
    assert!(server.stderr().contains("joined the owner"), "{}", server.stderr());
    let http = server.client();
    let uris: Vec<String> = (0..200).map(|i| format!("state://kv/burst/{i}")).collect();
    let mut stream = listen(&http, &uris);
    put(&http, "burst/199", json!(1));
    assert_eq!(updated_uri(&mut stream), "state://kv/burst/199");

    // More resources than a listen may hold are refused before anything is acknowledged.
    let too_many: Vec<String> = (0..257).map(|i| format!("state://kv/burst/{i}")).collect();
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "subscriptions/listen", "params": {
        "notifications": {"resourceSubscriptions": too_many},
        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}},
    }});
    let refused =
        expect(&http.request("POST", "/mcp", &LISTEN_HEADERS, Some(body.to_string().as_bytes())).unwrap(), 200);
    assert_eq!((refused["id"].clone(), refused["error"]["code"].clone()), (json!(2), json!(-32602)), "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("at most 256"), "{refused}");
}

#[test]
fn a_legacy_mcp_session_on_http_hears_of_a_rest_write_on_its_stream() {
    let place = Place::new();
    let server = place.serve(&[]);
    let http = server.client();
    let post = |session: Option<&str>, body: Value| {
        let mut headers = vec![("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
        if let Some(session) = session {
            headers.extend([("Mcp-Session-Id", session), ("MCP-Protocol-Version", "2025-11-25")]);
        }
        http.request("POST", "/mcp", &headers, Some(body.to_string().as_bytes())).unwrap()
    };
    let init = post(
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}}),
    );
    let session = init.header("mcp-session-id").expect("a session").to_owned();
    assert_eq!(post(Some(&session), json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).status, 202);
    // The session's standalone stream is where server-initiated messages go.
    let mut stream =
        http.stream("/mcp", &[("Mcp-Session-Id", session.as_str()), ("MCP-Protocol-Version", "2025-11-25")]).unwrap();
    let subscribe =
        json!({"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": "state://kv/review/8"}});
    let subscribed = post(Some(&session), subscribe);
    assert_eq!(subscribed.status, 200, "{}", subscribed.text());
    put(&http, "review/8", json!("done"));
    let updated = next_message(&mut stream);
    assert_eq!(
        (updated["method"].clone(), updated["params"]["uri"].clone()),
        (json!("notifications/resources/updated"), json!("state://kv/review/8"))
    );
}

/// The next JSON-RPC message on an MCP event stream (skipping priming events without data).
fn next_message(stream: &mut SseStream) -> Value {
    loop {
        let event = next_event(stream);
        if !event.data.is_empty() {
            return event.json();
        }
    }
}

/// A listen is refused before anything is acknowledged, and before any watch stays open, when
/// it names another tenant's keys or its body is over the limit.
#[test]
fn a_listen_for_another_tenants_key_or_over_the_body_limit_is_refused_unacknowledged() {
    let place = Place::new();
    let server = place.serve_with_auth();
    let team_a = server.client().with_token(TEAM_A);
    let listen = |uris: &[&str]| {
        json!({"jsonrpc": "2.0", "id": 3, "method": "subscriptions/listen", "params": {
            "notifications": {"resourceSubscriptions": uris},
            "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}},
        }})
        .to_string()
    };
    let body = listen(&["state://kv/team-a/plan", "state://kv/team-b/secret"]);
    let refused = expect(&team_a.request("POST", "/mcp", &LISTEN_HEADERS, Some(body.as_bytes())).unwrap(), 200);
    assert_eq!(refused["id"], 3, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("team-b/secret"), "{refused}");
    assert!(refused.get("method").is_none() && refused.get("result").is_none(), "{refused}");
    // Its own keys it may follow.
    let mut own = team_a
        .stream_request("POST", "/mcp", &LISTEN_HEADERS, Some(listen(&["state://kv/team-a/plan"]).as_bytes()))
        .unwrap();
    assert_eq!(next_message(&mut own)["method"], "notifications/subscriptions/acknowledged");

    let place = Place::new();
    let server = place.serve(&["--max-body-bytes", "2048"]);
    let http = server.client();
    let long: Vec<String> = (0..40).map(|i| format!("state://kv/{}/{i}", "x".repeat(60))).collect();
    let long: Vec<&str> = long.iter().map(String::as_str).collect();
    let body = listen(&long);
    assert!(body.len() > 2048);
    let response = http.request("POST", "/mcp", &LISTEN_HEADERS, Some(body.as_bytes())).unwrap();
    assert_eq!(response.status, 413, "{}", response.text());
}
