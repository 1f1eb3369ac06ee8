//! What other local users, hung neighbours and hostile input can do to a store reached over
//! stdio: real processes, real files.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::json;
use state_e2e::{McpClient, ProtocolEra, wait};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).permissions().mode() & 0o777
}

#[test]
fn another_local_user_can_read_none_of_the_stores_files() {
    let dir = tempfile::tempdir().unwrap();
    // As a home directory usually is: others may traverse it.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let data = dir.path().join("data/agents");
    let db = data.join("state.redb");
    let runtime = dir.path().join("run");
    let (db_arg, runtime_arg) = (db.to_string_lossy().into_owned(), runtime.to_string_lossy().into_owned());
    let mut client = McpClient::spawn_with_env(
        crate::binary(),
        &["--db", &db_arg, "--owner-idle", crate::TEST_OWNER_IDLE],
        &[("STATE_RUNTIME_DIR", runtime_arg.as_str())],
    )
    .unwrap();
    client.handshake(ProtocolEra::Legacy).unwrap();
    let set = client.call("state_set", json!({"key": "secret", "value": "s3cr3t"})).unwrap();
    assert!(!set.is_error, "{}", set.text);

    for made in [dir.path().join("data"), data.clone()] {
        assert_eq!(mode(&made), 0o700, "{}", made.display());
    }
    let holder = data.join("state.redb.holder");
    let log = data.join("state.redb.owner.log");
    for file in [&db, &holder, &log] {
        assert_eq!(mode(file), 0o600, "{}", file.display());
    }
    assert_eq!(mode(dir.path()), 0o755, "a directory the store did not make is left alone");
    client.shutdown().unwrap();
}

fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill").args([signal, &pid.to_string()]).status().unwrap();
    assert!(status.success(), "kill {signal} {pid}");
}

fn owner_pid(client: &mut McpClient) -> u32 {
    let health = client.call("state_health", json!({})).unwrap();
    assert!(!health.is_error, "{}", health.text);
    health.json()["owner"]["pid"].as_u64().unwrap() as u32
}

#[test]
fn an_owner_that_is_alive_but_hung_is_replaced_and_nothing_is_applied_twice() {
    let place = crate::Place::new();
    let hang = ["--owner-hang-timeout", "1s"];
    let mut client = place.start(&hang, ProtocolEra::Legacy);
    let set = |client: &mut McpClient, value: i64, request: &str| {
        let result = client.call("state_set", json!({"key": "k", "value": value, "request_id": request})).unwrap();
        assert!(!result.is_error, "{}", result.text);
        result.json()
    };
    set(&mut client, 1, "first");
    let hung = owner_pid(&mut client);

    // Stopped, as a debugger or a stuck disk would: its socket still accepts connections.
    signal(hung, "-STOP");
    let started = std::time::Instant::now();
    let second = set(&mut client, 2, "second");
    assert_eq!(second["version"], 2, "{second}");
    assert!(started.elapsed() < std::time::Duration::from_secs(15), "took {:?}", started.elapsed());
    let replacement = owner_pid(&mut client);
    assert_ne!(replacement, hung);
    let what = format!("the hung owner {hung} to be gone");
    wait::until(&what, std::time::Duration::from_secs(10), || wait::process_gone(hung));
    assert!(client.stderr().contains("taking over"), "{}", client.stderr());

    // A process that starts while the owner is hung takes over at once too.
    signal(replacement, "-STOP");
    let mut late = place.start(&hang, ProtocolEra::Legacy);
    let third = set(&mut late, 3, "third");
    assert_eq!(third["version"], 3, "{third}");
    assert_ne!(owner_pid(&mut late), replacement);
    // The first client, whose owner is gone again, follows; its retry of an applied write is
    // answered from the record, not applied again.
    let retried = set(&mut client, 2, "second");
    assert_eq!(retried["version"], 2, "the first answer, not a third write: {retried}");
    let read = client.call("state_get", json!({"key": "k"})).unwrap().json();
    assert_eq!((read["value"].as_i64(), read["version"].as_u64()), (Some(3), Some(3)), "{read}");
    for pid in [hung, replacement] {
        if !wait::process_gone(pid) {
            signal(pid, "-KILL");
        }
    }
}

/// Resident memory of a process, in bytes.
fn rss_of(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// The probe's client that never reads (issue 30): it sends call after call for a large
/// value and never reads an answer. The owner used to buffer every reply (38 MB to 4.3 GB);
/// now the connection stops being read once its replies back up, and so does the client's
/// server, so neither grows past a bound while the client sends on.
#[test]
fn a_client_that_never_reads_its_answers_grows_neither_its_server_nor_the_owner() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let place = crate::Place::new();
    let mut writer = place.start(&[], state_e2e::ProtocolEra::Legacy);
    let big = "x".repeat(200_000);
    let set = writer.call("state_set", serde_json::json!({"key": "big", "value": big})).unwrap();
    assert!(!set.is_error, "{}", set.text);

    let db = place.db_arg();
    let runtime = place.runtime.to_string_lossy().into_owned();
    let mut silent = Command::new(crate::binary())
        .args(["--db", &db, "--owner-idle", crate::TEST_OWNER_IDLE])
        .env("STATE_RUNTIME_DIR", &runtime)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let note = std::fs::read_to_string(place.db.with_file_name("state.redb.holder")).unwrap();
    let owner: u32 = serde_json::from_str::<serde_json::Value>(&note).unwrap()["pid"].as_u64().unwrap() as u32;
    let mut stdin = silent.stdin.take().unwrap();
    let hello = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "silent", "version": "1"}}});
    writeln!(stdin, "{hello}").unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#).unwrap();
    // 4,000 reads of 200 KB: 800 MB of answers nobody reads. The writes block once both
    // servers stop reading, so they go from a thread that may block.
    let sender = std::thread::spawn(move || {
        for id in 1..=4000 {
            let call = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"state_get","arguments":{{"key":"big"}}}}}}"#
            );
            if writeln!(stdin, "{call}").is_err() {
                return id;
            }
        }
        4001
    });
    // Longer than the hang timeout (10 s): a client that does not read is no reason for its
    // server to take the owner for hung.
    std::thread::sleep(std::time::Duration::from_secs(13));
    let (server_rss, owner_rss) = (rss_of(silent.id()), rss_of(owner));
    let now = std::fs::read_to_string(place.db.with_file_name("state.redb.holder")).unwrap();
    let now: u32 = serde_json::from_str::<serde_json::Value>(&now).unwrap()["pid"].as_u64().unwrap() as u32;
    assert_eq!(now, owner, "the owner was replaced");
    assert!(server_rss < 300 << 20, "the client's server holds {} MB", server_rss >> 20);
    assert!(owner_rss < 300 << 20, "the owner holds {} MB", owner_rss >> 20);
    // Others are still served by the owner meanwhile.
    let other = writer.call("state_set", serde_json::json!({"key": "other", "value": 1})).unwrap();
    assert!(!other.is_error, "{}", other.text);
    silent.kill().unwrap();
    silent.wait().unwrap();
    let _ = sender.join();
}
