//! Audit: every change names the token whose call made it, whichever server process took the
//! call (the owner, or one that joined it over the socket), in history, watch events and an
//! export, and the names survive the servers being killed and the store opened again.

use serde_json::{Value, json};

use crate::{ADMIN, Place, TEAM_A, TEAM_B, expect};

fn names(history: &Value) -> Vec<Option<&str>> {
    history["events"].as_array().unwrap().iter().map(|e| e["by"].as_str()).collect()
}

#[test]
fn history_names_the_token_of_every_change_across_processes_and_restarts() {
    let place = Place::new();
    let mut owner = place.serve_with_auth();
    // A second server on the same database joins the first one's owner: its calls cross the
    // socket, and the name with them.
    let mut joined = place.serve_with_auth();
    let put = |server: &state_e2e::HttpServer, token: &str, n: u64| {
        let client = server.client().with_token(token);
        expect(&client.json("PUT", "/v1/kv/team-a/plan", &json!({"step": n})).unwrap(), 200);
    };
    put(&owner, TEAM_A, 1);
    put(&owner, ADMIN, 2);
    put(&joined, TEAM_A, 3);
    let removed = joined.client().with_token(ADMIN).request("DELETE", "/v1/kv/team-a/plan", &[], None).unwrap();
    expect(&removed, 200);

    let history = expect(&owner.client().with_token(TEAM_A).get("/v1/history?key=team-a/plan").unwrap(), 200);
    assert_eq!(names(&history), [Some("team-a"), Some("admin"), Some("team-a"), Some("admin")], "{history}");

    // A watch replaying the same changes carries the same names.
    let mut stream =
        owner.client().with_token(TEAM_A).stream("/v1/watch?key=team-a/plan&from_revision=0", &[]).unwrap();
    let mut watched = Vec::new();
    while watched.len() < 4 {
        let event = crate::watch::next_event(&mut stream).json();
        for change in event["events"].as_array().into_iter().flatten() {
            watched.push(change["by"].clone());
        }
    }
    assert_eq!(watched, [json!("team-a"), json!("admin"), json!("team-a"), json!("admin")]);
    drop(stream);

    // Another tenant is not shown team-a's audit trail.
    let foreign = owner.client().with_token(TEAM_B).get("/v1/history?key=team-a/plan").unwrap();
    assert_eq!(foreign.status, 403, "{}", foreign.text());

    // An export with history, through this server as its admin, keeps the names.
    let statectl = crate::binary().with_file_name("statectl");
    let url = format!("http://{}", owner.addr);
    let exported = std::process::Command::new(&statectl)
        .args(["--server", &url, "export", "--history"])
        .env("STATE_TOKEN", ADMIN)
        .output()
        .unwrap();
    assert!(exported.status.success(), "{}", String::from_utf8_lossy(&exported.stderr));
    let dump = String::from_utf8(exported.stdout).unwrap();
    let exported_names: Vec<Value> = dump
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok()?.get("event").cloned())
        .filter(|event| event["key"] == "team-a/plan")
        .map(|event| event["by"].clone())
        .collect();
    assert_eq!(exported_names, [json!("team-a"), json!("admin"), json!("team-a"), json!("admin")], "{dump}");

    // Killed, not stopped: the names come back from what was on disk when each write was
    // acknowledged (the write-ahead log, replayed on open).
    joined.kill().unwrap();
    owner.kill().unwrap();
    let reopened = place.serve_with_auth();
    let history = expect(&reopened.client().with_token(ADMIN).get("/v1/history?key=team-a/plan").unwrap(), 200);
    assert_eq!(names(&history), [Some("team-a"), Some("admin"), Some("team-a"), Some("admin")], "{history}");
}

#[test]
fn a_change_made_by_a_local_process_names_no_one() {
    let place = Place::new();
    let server = place.serve(&[]);
    expect(&server.client().json("PUT", "/v1/kv/notes", &json!(1)).unwrap(), 200);
    let history = expect(&server.client().get("/v1/history?key=notes").unwrap(), 200);
    assert_eq!(names(&history), [None], "{history}");
    assert!(history["events"][0].get("by").is_none(), "absent, not null: {history}");
}
