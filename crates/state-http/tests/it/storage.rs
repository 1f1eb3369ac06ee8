//! Storage quotas (issue 35): a tenant holds at most so many keys and bytes under its
//! prefixes. At its limit every call that could add is refused with a reason, removing is
//! let through, other tenants write on, and the limit holds on every server of the store
//! (two PostgreSQL replicas measure the one store), each server keeping its own figure.

use std::time::Duration;

use serde_json::{Value, json};
use state_e2e::wait;

use crate::replicas::Store;
use crate::{ADMIN, Place, TEAM_A, TEAM_B, expect, problem};

/// The test tokens, with team-b held to `limits` (TOML lines).
fn tokens_with(place: &Place, limits: &str) -> String {
    let text = crate::TOKENS.replace("prefixes = [\"team-b/\"]\n", &format!("prefixes = [\"team-b/\"]\n{limits}"));
    assert_ne!(text, crate::TOKENS);
    let path = place.tokens.with_file_name("storage.toml");
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

fn put(server: &state_e2e::HttpServer, token: &str, key: &str, value: &Value) -> state_e2e::HttpResponse {
    server.client().with_token(token).json("PUT", &format!("/v1/kv/{key}"), value).unwrap()
}

#[test]
fn a_tenant_at_its_key_quota_may_only_make_room_and_others_write_on() {
    let place = Place::new();
    let tokens = tokens_with(&place, "max_keys = 5\n");
    let server = place.serve(&["--auth", &tokens, "--tools", "all"]);
    for i in 0..5 {
        expect(&put(&server, TEAM_B, &format!("team-b/k{i}"), &json!(i)), 200);
    }
    // The sixth key is refused with the limit named, and waiting would not help: no Retry-After.
    let refused = put(&server, TEAM_B, "team-b/k5", &json!(5));
    let body = problem(&refused, 429, "quota_exceeded");
    let detail = body["detail"].as_str().unwrap();
    assert!(detail.contains("team-b") && detail.contains("5 keys and records of its 5"), "{detail}");
    assert!(refused.header("retry-after").is_none(), "waiting makes no room");
    // At the limit, whatever could add is refused: an overwrite, a queue message, a tool call.
    problem(&put(&server, TEAM_B, "team-b/k0", &json!("bigger")), 429, "quota_exceeded");
    let send = server
        .client()
        .with_token(TEAM_B)
        .json("POST", "/v1/call/native/queue_send", &json!({"queue": "team-b/q", "body": 1}))
        .unwrap();
    assert_eq!(send.status, 429, "{}", send.text());
    assert_eq!(send.json()["error"]["code"], "quota_exceeded");
    let listed = expect(&server.client().with_token(TEAM_B).get("/v1/kv?prefix=team-b/").unwrap(), 200);
    assert_eq!(listed["entries"].as_array().unwrap().len(), 5, "nothing refused was written");
    assert_eq!(expect(&server.client().with_token(TEAM_B).get("/v1/kv/team-b/k0").unwrap(), 200)["value"], 0);

    // Another tenant is not held to team-b's limit.
    for i in 0..10 {
        expect(&put(&server, TEAM_A, &format!("team-a/k{i}"), &json!(i)), 200);
    }

    // Removing makes room within moments: the figure is measured again as soon as twenty
    // times its last scan's time has passed (until then a write is refused on the estimate).
    expect(&server.client().with_token(TEAM_B).request("DELETE", "/v1/kv/team-b/k0", &[], None).unwrap(), 200);
    let mut refused = 3;
    wait::until("the room made to be seen", Duration::from_secs(10), || {
        let response = put(&server, TEAM_B, "team-b/k5", &json!(5));
        if response.status != 200 {
            problem(&response, 429, "quota_exceeded");
            refused += 1;
        }
        response.status == 200
    });
    problem(&put(&server, TEAM_B, "team-b/k6", &json!(6)), 429, "quota_exceeded");
    refused += 1;

    // The tenant's health says where it stands; the usage route measures any prefix it reads.
    let health = expect(&server.client().with_token(TEAM_B).get("/v1/health").unwrap(), 200);
    assert_eq!(health["storage"]["max_keys"], 5, "{health}");
    // The figure as last measured: 5, or 4 when it was measured just before k5 was written
    // and a scan again so soon would cost more than twenty times its share.
    let held = health["storage"]["keys"].as_u64().unwrap();
    assert!((4..=5).contains(&held), "{health}");
    assert_eq!(health["storage"]["writes_refused"], refused, "{health}");
    assert!(expect(&server.client().with_token(TEAM_A).get("/v1/health").unwrap(), 200).get("storage").is_none());
    let usage = expect(&server.client().with_token(TEAM_B).get("/v1/usage?prefix=team-b/").unwrap(), 200);
    assert_eq!((usage["keys"].as_u64(), usage["records"].as_u64()), (Some(5), Some(0)), "{usage}");
    let foreign = server.client().with_token(TEAM_B).get("/v1/usage?prefix=team-a/").unwrap();
    problem(&foreign, 403, "forbidden");
    // The operator sees every token's figures.
    let metrics = server.client().with_token(ADMIN).get("/metrics").unwrap().text();
    for line in [
        "state_token_storage_max_keys{token=\"team-b\"} 5",
        &format!("state_token_storage_keys{{token=\"team-b\"}} {held}"),
        &format!("state_token_storage_refused_total{{token=\"team-b\"}} {refused}"),
    ] {
        assert!(metrics.contains(line), "{line} missing from\n{metrics}");
    }
}

#[test]
fn a_byte_quota_counts_values_and_named_records() {
    let place = Place::new();
    let tokens = tokens_with(&place, "max_bytes = 3000\n");
    let server = place.serve(&["--auth", &tokens, "--tools", "all"]);
    let kilobyte = json!("x".repeat(1000));
    expect(&put(&server, TEAM_B, "team-b/a", &kilobyte), 200);
    // A session under its prefix counts as much as a key does.
    let client = server.client().with_token(TEAM_B);
    expect(&client.json("PUT", "/v1/sessions/team-b/s", &kilobyte).unwrap(), 200);
    let usage = expect(&client.get("/v1/usage?prefix=team-b/").unwrap(), 200);
    assert_eq!(
        (usage["keys"].as_u64(), usage["records"].as_u64()),
        (Some(1), Some(2)),
        "a session and its version: {usage}"
    );
    assert!(usage["bytes"].as_u64().unwrap() > 3000, "{usage}");
    // Between measurements the figure is what was measured plus what calls carried, which
    // undercounts a session (stored twice): a tenant may pass its limit by what it writes until
    // the figure is measured again (a second at most here). From then on it is held.
    let refused = refused_soon(&server, "team-b/b");
    assert!(refused["detail"].as_str().unwrap().contains("bytes of its 3000"), "{refused}");
    let health = expect(&client.get("/v1/health").unwrap(), 200);
    assert!(health["storage"]["bytes"].as_u64().unwrap() > 3000, "{health}");
}

/// Writes `key` as team-b until a write is refused for its storage quota: once the figure is
/// measured again (within a second or two), it is. The refusal's problem document.
fn refused_soon(server: &state_e2e::HttpServer, key: &str) -> Value {
    // Each try overwrites the one key: it adds at most that key while the figure ages.
    wait::until_some("a write refused for the quota", Duration::from_secs(10), || {
        let response = put(server, TEAM_B, key, &json!(1));
        match response.status {
            429 => Some(problem(&response, 429, "quota_exceeded")),
            200 => None,
            other => panic!("unexpected {other}: {}", response.text()),
        }
    })
}

/// Two replicas on one PostgreSQL store: what one let in counts on the other, since each
/// measures the store both write to (once its figure is measured again: between
/// measurements a replica does not see what the other let in).
#[test]
fn a_storage_quota_holds_across_replicas() {
    let Some(store) = Store::new("storage_quota") else { return };
    let place = Place::new();
    let tokens = tokens_with(&place, "max_keys = 4\n");
    let first = store.replica(&["--auth", &tokens]);
    let second = store.replica(&["--auth", &tokens]);
    for i in 0..2 {
        expect(&put(&first, TEAM_B, &format!("team-b/first{i}"), &json!(i)), 200);
        expect(&put(&second, TEAM_B, &format!("team-b/second{i}"), &json!(i)), 200);
    }
    for server in [&first, &second] {
        let refused = refused_soon(server, "team-b/more");
        assert!(refused["detail"].as_str().unwrap().contains("of its 4"), "{refused}");
        // Its health measures the store once a scan is due again: the other's keys are in it.
        wait::until("health to count the other replica's keys", Duration::from_secs(10), || {
            let health = expect(&server.client().with_token(TEAM_B).get("/v1/health").unwrap(), 200);
            health["storage"]["keys"].as_u64().unwrap() >= 4
        });
    }
    expect(&put(&second, TEAM_A, "team-a/free", &json!(1)), 200);
}
