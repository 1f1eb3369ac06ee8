//! Waiting instead of polling: resource subscriptions on both protocol generations and the
//! `state_watch` long poll, each woken by a write another `state-mcp` process makes through
//! the same owner.

use std::time::Duration;

use serde_json::{Value, json};
use state_e2e::{McpClient, ProtocolEra, result_of, tool_result};

use crate::Place;

const UPDATED: &str = "notifications/resources/updated";
/// Generous: CI machines are shared. A healthy owner delivers in milliseconds (see the bench).
const NOTICE: Duration = Duration::from_secs(20);

fn ok(client: &mut McpClient, tool: &str, args: Value) -> Value {
    let result = client.call(tool, args.clone()).unwrap_or_else(|e| panic!("{tool} {args}: {e}"));
    assert!(!result.is_error, "{tool} {args}: {}", result.text);
    result.json()
}

fn updated_uri(client: &mut McpClient) -> String {
    let notice = client.wait_notification(UPDATED, NOTICE).unwrap();
    notice["params"]["uri"].as_str().expect("an updated notice names its uri").to_owned()
}

#[test]
fn a_legacy_subscriber_hears_of_another_processs_write_until_it_unsubscribes() {
    let place = Place::new();
    let mut reviewer = place.start(&[], ProtocolEra::Legacy);
    let mut worker = place.start(&[], ProtocolEra::Legacy);

    let subscribed = reviewer.request("resources/subscribe", json!({"uri": "state://kv/result/42"})).unwrap();
    result_of(subscribed).unwrap();
    ok(&mut worker, "state_set", json!({"key": "result/other", "value": "not this one"}));
    ok(&mut worker, "state_set", json!({"key": "result/42", "value": {"verdict": "ship it"}}));
    assert_eq!(updated_uri(&mut reviewer), "state://kv/result/42");
    // The notice says what changed; reading the resource gives its new state.
    let read = result_of(reviewer.request("resources/read", json!({"uri": "state://kv/result/42"})).unwrap()).unwrap();
    let entry: Value = serde_json::from_str(read["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(entry["value"], json!({"verdict": "ship it"}), "{read}");

    // After unsubscribing, writes to it are not announced: the next notice is for the other
    // key subscribed afterwards, though the first key was written before it.
    result_of(reviewer.request("resources/unsubscribe", json!({"uri": "state://kv/result/42"})).unwrap()).unwrap();
    result_of(reviewer.request("resources/subscribe", json!({"uri": "state://kv/result/43"})).unwrap()).unwrap();
    ok(&mut worker, "state_set", json!({"key": "result/42", "value": "again"}));
    ok(&mut worker, "state_set", json!({"key": "result/43", "value": "next"}));
    assert_eq!(updated_uri(&mut reviewer), "state://kv/result/43");
}

#[test]
fn a_listener_hears_when_the_lease_it_waits_for_is_released() {
    let place = Place::new();
    let mut holder = place.start(&[], ProtocolEra::Legacy);
    let mut waiter = place.start(&[], ProtocolEra::Modern);
    let lease =
        ok(&mut holder, "lease_acquire", json!({"resource_id": "printer", "holder_id": "a", "ttl_seconds": 60}));
    let refused =
        waiter.call("lease_acquire", json!({"resource_id": "printer", "holder_id": "b", "ttl_seconds": 60})).unwrap();
    assert_eq!((refused.json()["status"].clone(), refused.json()["holder"].clone()), (json!("held"), json!("a")));

    // 2026-07-28: one long-lived request carries the subscription's notices.
    let listen = waiter
        .send_request(
            "subscriptions/listen",
            json!({"notifications": {"resourceSubscriptions": ["state://lease/printer"]}}),
        )
        .unwrap();
    let ack = waiter.wait_notification("notifications/subscriptions/acknowledged", NOTICE).unwrap();
    assert_eq!(ack["params"]["notifications"]["resourceSubscriptions"], json!(["state://lease/printer"]), "{ack}");

    let token = lease["token"].clone();
    ok(&mut holder, "lease_release", json!({"resource_id": "printer", "holder_id": "a", "token": token}));
    assert_eq!(updated_uri(&mut waiter), "state://lease/printer");
    let acquired =
        ok(&mut waiter, "lease_acquire", json!({"resource_id": "printer", "holder_id": "b", "ttl_seconds": 60}));
    assert!(acquired["token"].as_u64().unwrap() > token.as_u64().unwrap(), "{acquired}");
    waiter.notify("notifications/cancelled", json!({"requestId": listen})).unwrap();
}

/// The acknowledgment of a listen is a promise: every write after it is announced. rmcp sends it
/// before the handler runs, so the watches must be in place first. Many resources make a late
/// start show: each is a round trip to the owner, and the write is sent the moment the
/// acknowledgment arrives, for the resource that would be followed last.
#[test]
fn a_write_made_on_seeing_the_acknowledgment_is_announced() {
    let place = Place::new();
    let mut writer = place.start(&[], ProtocolEra::Legacy);
    let mut listener = place.start(&[], ProtocolEra::Modern);
    let uris: Vec<String> = (0..200).map(|i| format!("state://kv/burst/{i}")).collect();
    let listen = listener
        .send_request("subscriptions/listen", json!({"notifications": {"resourceSubscriptions": uris}}))
        .unwrap();
    let ack = listener.wait_notification("notifications/subscriptions/acknowledged", NOTICE).unwrap();
    let written = writer
        .send_request("tools/call", json!({"name": "state_set", "arguments": {"key": "burst/199", "value": 1}}))
        .unwrap();
    assert_eq!(ack["params"]["notifications"]["resourceSubscriptions"].as_array().map(Vec::len), Some(200), "{ack}");
    assert_eq!(updated_uri(&mut listener), "state://kv/burst/199");
    let answer = tool_result(result_of(writer.wait_response(written).unwrap()).unwrap()).unwrap();
    assert!(!answer.is_error, "{}", answer.text);
    listener.notify("notifications/cancelled", json!({"requestId": listen})).unwrap();

    // A listen naming more than a listen may hold is refused before anything is acknowledged.
    let too_many: Vec<String> = (0..257).map(|i| format!("state://kv/burst/{i}")).collect();
    let refused = listener
        .request("subscriptions/listen", json!({"notifications": {"resourceSubscriptions": too_many}}))
        .unwrap();
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("at most 256"), "{refused}");
}

#[test]
fn state_watch_returns_the_write_another_process_makes() {
    let place = Place::new();
    let mut worker = place.start(&[], ProtocolEra::Legacy);
    let mut planner = place.start(&[], ProtocolEra::Legacy);
    let start = ok(&mut worker, "state_set", json!({"key": "plan/draft", "value": 0}))["revision"].clone();

    // The worker waits for a plan; the planner writes one from its own process.
    let waiting = worker
        .send_request(
            "tools/call",
            json!({"name": "state_watch", "arguments": {"prefix": "plan/", "after_revision": start, "timeout_seconds": 30}}),
        )
        .unwrap();
    // Wait until the watch is in place: a write before it would be returned too (it starts
    // from `after_revision`), so this only makes the test exercise the wake-up path.
    state_e2e::wait::until("the worker's watch to be in place", Duration::from_secs(10), || {
        ok(&mut planner, "state_health", json!({}))["watchers"].as_u64() >= Some(1)
    });
    let written = ok(&mut planner, "state_set", json!({"key": "plan/final", "value": {"steps": 3}}));
    let answer = tool_result(result_of(worker.wait_response(waiting).unwrap()).unwrap()).unwrap();
    assert!(!answer.is_error, "{}", answer.text);
    let answer = answer.json();
    assert_eq!(answer["timed_out"], false, "{answer}");
    assert_eq!(answer["revision"], written["revision"], "{answer}");
    let events = answer["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{answer}");
    assert_eq!((events[0]["key"].clone(), events[0]["value"].clone()), (json!("plan/final"), json!({"steps": 3})));

    // Passing the returned revision back misses nothing written in between.
    ok(&mut planner, "state_delete", json!({"key": "plan/draft"}));
    let next = ok(&mut worker, "state_watch", json!({"prefix": "plan/", "after_revision": answer["revision"]}));
    assert_eq!(
        (next["events"][0]["key"].clone(), next["events"][0]["op"].clone()),
        (json!("plan/draft"), json!("delete"))
    );
    // Nothing more: the wait ends at its timeout, saying so.
    let quiet = ok(
        &mut worker,
        "state_watch",
        json!({"prefix": "plan/", "after_revision": next["revision"], "timeout_seconds": 0.2}),
    );
    assert_eq!((quiet["timed_out"].clone(), quiet["events"].clone()), (json!(true), json!([])), "{quiet}");
}

#[test]
fn resources_list_and_read_keys_runs_and_leases() {
    let place = Place::new();
    let mut client = place.start(&[], ProtocolEra::Legacy);
    ok(&mut client, "state_set", json!({"key": "notes/a b", "value": 1}));
    ok(&mut client, "lease_acquire", json!({"resource_id": "db-migration", "holder_id": "me", "ttl_seconds": 60}));

    let templates = result_of(client.request("resources/templates/list", json!({})).unwrap()).unwrap();
    let templates: Vec<&str> =
        templates["resourceTemplates"].as_array().unwrap().iter().map(|t| t["uriTemplate"].as_str().unwrap()).collect();
    assert_eq!(
        templates,
        ["state://kv/{key}", "state://workflow/{run_id}", "state://lease/{resource_id}", "state://checkpoint/{id}"]
    );

    let listed = result_of(client.request("resources/list", json!({})).unwrap()).unwrap();
    let uris: Vec<&str> = listed["resources"].as_array().unwrap().iter().map(|r| r["uri"].as_str().unwrap()).collect();
    assert!(uris.contains(&"state://kv/notes/a%20b"), "{uris:?}");

    let read = result_of(client.request("resources/read", json!({"uri": "state://kv/notes/a%20b"})).unwrap()).unwrap();
    let entry: Value = serde_json::from_str(read["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!((entry["value"].clone(), entry["version"].clone()), (json!(1), json!(1)), "{entry}");
    let read =
        result_of(client.request("resources/read", json!({"uri": "state://lease/db-migration"})).unwrap()).unwrap();
    let lease: Value = serde_json::from_str(read["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(lease["holder"], "me", "{lease}");

    let missing = client.request("resources/read", json!({"uri": "state://kv/nope"})).unwrap();
    assert!(missing["error"]["message"].as_str().unwrap().contains("state://kv/nope"), "{missing}");
    let foreign = client.request("resources/subscribe", json!({"uri": "file:///etc/passwd"})).unwrap();
    assert_eq!(foreign["error"]["code"], -32602, "{foreign}");
}

#[test]
fn an_expired_lease_and_a_lapsed_claim_wake_their_watchers() {
    let place = Place::new();
    let mut crashed = place.start(&[], ProtocolEra::Legacy);
    let mut waiter = place.start(&[], ProtocolEra::Legacy);
    // A holder that stops renewing (here: never does) loses its lease when the TTL runs out.
    let lease = ok(&mut crashed, "lease_acquire", json!({"resource_id": "gpu", "holder_id": "a", "ttl_seconds": 1}));
    let args = json!({"kind": "lease", "key": "gpu", "after_revision": lease["revision"], "timeout_seconds": 30});
    let expired = ok(&mut waiter, "state_watch", args);
    assert_eq!(
        (expired["events"][0]["key"].clone(), expired["events"][0]["op"].clone()),
        (json!("gpu"), json!("expire"))
    );
    assert_eq!(
        ok(&mut waiter, "lease_acquire", json!({"resource_id": "gpu", "holder_id": "b", "ttl_seconds": 60}))["status"],
        "acquired"
    );

    // A worker that stops heartbeating loses its claim; the run is claimable again.
    ok(&mut crashed, "workflow_create", json!({"name": "render"}));
    let claim = ok(&mut crashed, "workflow_claim", json!({"agent_id": "w1", "lease_ttl_seconds": 1}));
    let args =
        json!({"kind": "workflow", "key": claim["run_id"], "after_revision": claim["revision"], "timeout_seconds": 30});
    let lapsed = ok(&mut waiter, "state_watch", args);
    let event = &lapsed["events"][0];
    assert_eq!(
        (event["op"].clone(), event["value"]["run_status"].clone()),
        (json!("claim_expired"), json!("pending")),
        "{lapsed}"
    );
    let reclaimed = ok(&mut waiter, "workflow_claim", json!({"agent_id": "w2", "run_id": claim["run_id"]}));
    assert_eq!(
        (reclaimed["status"].clone(), reclaimed["attempt"].clone()),
        (json!("claimed"), json!(2)),
        "{reclaimed}"
    );
}

/// The probe's subscription flood (issue 30): 20,000 `resources/subscribe` in one session
/// each held a watch. A session follows at most 256; the next is refused, saying why, and
/// one already followed can still be subscribed again.
#[test]
fn a_session_follows_at_most_256_resources() {
    let place = Place::new();
    let mut client = place.start(&[], ProtocolEra::Legacy);
    for n in 0..256 {
        let subscribed = client.request("resources/subscribe", json!({"uri": format!("state://kv/k/{n}")})).unwrap();
        result_of(subscribed).unwrap();
    }
    let refused = client.request("resources/subscribe", json!({"uri": "state://kv/k/256"})).unwrap();
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("256"), "{refused}");
    result_of(client.request("resources/subscribe", json!({"uri": "state://kv/k/3"})).unwrap()).unwrap();
    result_of(client.request("resources/unsubscribe", json!({"uri": "state://kv/k/0"})).unwrap()).unwrap();
    result_of(client.request("resources/subscribe", json!({"uri": "state://kv/k/256"})).unwrap()).unwrap();
}
