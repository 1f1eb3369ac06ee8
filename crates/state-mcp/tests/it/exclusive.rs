//! One process owns a database file; a second one fails fast and names the holder.

use std::time::{Duration, Instant};

use serde_json::json;
use state_e2e::{McpClient, ProtocolEra};

use crate::{TestServer, binary};

#[test]
fn second_server_on_the_same_database_fails_fast_naming_the_holder() {
    let mut first = TestServer::start(&[]);
    first.client.call("state_set", json!({"key": "k", "value": 1})).unwrap();
    let db = first.db.to_string_lossy().into_owned();

    let started = Instant::now();
    let mut second = McpClient::spawn(binary(), &["--db", &db]).unwrap();
    let status = second.wait_exit(Duration::from_secs(10)).expect("the second server exits instead of hanging");
    assert!(!status.success());
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    let stderr = second.stderr();
    assert!(stderr.contains("in use by"), "{stderr}");
    assert!(stderr.contains(&format!("pid {}", first.client.pid())), "names the holder: {stderr}");
    assert!(stderr.contains("state-mcp"), "{stderr}");

    // The holder is unaffected, and the database is free once it exits.
    let got = first.client.call("state_get", json!({"key": "k"})).unwrap();
    assert_eq!(got.json()["value"], 1);
    let TestServer { mut client, _dir: dir, .. } = first;
    assert!(client.shutdown().unwrap().success());
    let mut third = McpClient::start(binary(), &["--db", &db], ProtocolEra::Legacy).unwrap();
    assert_eq!(third.call("state_get", json!({"key": "k"})).unwrap().json()["version"], 1);
    assert!(third.shutdown().unwrap().success());
    drop(dir);
}
