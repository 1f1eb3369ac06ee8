//! Many processes, one database: every `state-mcp` on a database joins its one owner, which
//! the first of them starts. Real processes throughout: clients spawned as MCP clients spawn
//! them, owners killed with SIGKILL, databases reopened afterwards.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use state_e2e::{McpClient, ProtocolEra, Wiring, wait};

use crate::{Place, TestServer};

fn ok(client: &mut McpClient, tool: &str, args: Value) -> Value {
    let result = client.call(tool, args.clone()).unwrap_or_else(|e| panic!("{tool} {args}: {e}"));
    assert!(!result.is_error, "{tool} {args}: {}", result.text);
    result.json()
}

fn owner_of(client: &mut McpClient) -> Value {
    ok(client, "state_health", json!({}))["owner"].clone()
}

fn owner_pid(client: &mut McpClient) -> u32 {
    owner_of(client)["pid"].as_u64().expect("health names the owner's pid") as u32
}

fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill").args([signal, &pid.to_string()]).status().expect("kill runs");
    assert!(status.success(), "kill {signal} {pid}");
}

/// Waits (bounded) for a process to exit on its own.
fn wait_gone(pid: u32, within: Duration) {
    wait::until(&format!("process {pid} to exit"), within, || wait::process_gone(pid));
}

fn stop_owner(pid: u32) {
    signal(pid, "-TERM");
    wait_gone(pid, Duration::from_secs(10));
}

#[test]
fn clients_on_one_database_share_one_owner() {
    let place = Place::new();
    let mut first = place.start(&[], ProtocolEra::Legacy);
    let mut second = place.start(&[], ProtocolEra::Modern);
    ok(&mut first, "state_set", json!({"key": "shared", "value": "from the first"}));
    let got = ok(&mut second, "state_get", json!({"key": "shared"}));
    assert_eq!(got["value"], "from the first");

    let owner = owner_of(&mut second);
    assert_eq!(owner["mode"], "owner");
    assert_eq!(owner["clients"], 2, "{owner}");
    assert_eq!(owner_pid(&mut first), owner["pid"].as_u64().unwrap() as u32);
    let pid = owner["pid"].as_u64().unwrap() as u32;
    assert!(pid != first.pid() && pid != second.pid(), "the owner is a process of its own");
    let log = owner["log_file"].as_str().expect("health names the owner's log").to_owned();
    assert!(Path::new(&log).exists(), "{log}");

    first.shutdown().unwrap();
    second.shutdown().unwrap();
    assert!(first.stderr().contains("started the owner of") && first.stderr().contains(&log), "{}", first.stderr());
    assert!(second.stderr().contains("joined the owner of") && second.stderr().contains(&log), "{}", second.stderr());
    stop_owner(pid);
}

/// The names of a process's threads.
fn threads(pid: u32) -> Vec<String> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the process is running");
    tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .collect()
}

#[test]
fn a_client_that_gives_socket_pairs_is_served_without_a_thread_hand_off() {
    // Node's clients (the TypeScript SDK, and what is built on it) start servers with a Unix
    // socket pair for stdin and one for stdout, not pipes. Served through tokio's standard
    // streams, every message in and out was a task on its blocking pool ("tokio-rt-worker"
    // threads), a thread woken and the runtime woken back per message.
    let place = Place::new();
    for wiring in [Wiring::Sockets, Wiring::Pipes] {
        let mut client = place.spawn_wired(&[], None, wiring);
        client.handshake(ProtocolEra::Legacy).expect("handshake");
        for n in 0..50 {
            let key = format!("wired/{wiring:?}/{n}");
            let set = ok(&mut client, "state_set", json!({"key": key, "value": {"n": n}}));
            assert_eq!(set["status"], "ok", "{set}");
            assert_eq!(ok(&mut client, "state_get", json!({"key": key}))["value"], json!({"n": n}));
        }
        let names = threads(client.pid());
        assert!(
            !names.iter().any(|name| name.starts_with("tokio-r")),
            "{wiring:?}: the joining process woke blocking-pool threads to read and write: {names:?}"
        );
        let status = client.shutdown().expect("the server ends when its client closes");
        assert!(status.success(), "{wiring:?}: {status}; stderr:\n{}", client.stderr());
    }
}

#[test]
fn the_owner_outlives_the_client_that_started_it() {
    let place = Place::new();
    let mut starter = place.start(&[], ProtocolEra::Legacy);
    let pid = owner_pid(&mut starter);
    let mut other = place.start(&[], ProtocolEra::Legacy);
    ok(&mut starter, "state_set", json!({"key": "k", "value": 1}));
    starter.kill().unwrap();

    assert!(!wait::process_gone(pid), "killing the client that started the owner left the owner running");
    assert_eq!(ok(&mut other, "state_get", json!({"key": "k"}))["value"], 1);
    let mut late = place.start(&[], ProtocolEra::Legacy);
    assert_eq!(owner_pid(&mut late), pid, "a later client joins the same owner");
    stop_owner(pid);
}

/// Read, then compare-and-set `counter` to one more, until `increments` of them succeed.
/// Returns how many conflicts it met on the way.
fn increment(client: &mut McpClient, increments: u64, done: &AtomicU64) -> u64 {
    let mut conflicts = 0;
    let mut succeeded = 0;
    while succeeded < increments {
        let got = ok(client, "state_get", json!({"key": "counter"}));
        let (n, version) = (got["value"]["n"].as_u64().unwrap(), got["version"].as_u64().unwrap());
        let set = client
            .call("state_set", json!({"key": "counter", "value": {"n": n + 1}, "expected_version": version}))
            .unwrap();
        assert!(!set.is_error, "a compare-and-set failed instead of succeeding or conflicting: {}", set.text);
        match set.json()["status"].as_str() {
            Some("ok") => {
                succeeded += 1;
                done.fetch_add(1, Ordering::SeqCst);
            }
            Some("conflict") => conflicts += 1,
            other => panic!("unexpected status {other:?}: {}", set.text),
        }
    }
    conflicts
}

/// `processes` clients, each its own `state-mcp` process, increment one counter `each` times.
/// `during` runs meanwhile with the number of increments done so far.
fn count_together(processes: usize, each: u64, during: impl FnOnce(&AtomicU64, &mut McpClient)) -> (u64, u64) {
    let place = Place::new();
    let mut setup = place.start(&[], ProtocolEra::Legacy);
    ok(&mut setup, "state_set", json!({"key": "counter", "value": {"n": 0}, "expected_version": 0}));
    let done = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..processes)
        .map(|i| {
            let mut client = place.start(&[], if i % 2 == 0 { ProtocolEra::Legacy } else { ProtocolEra::Modern });
            let done = done.clone();
            thread::spawn(move || {
                let conflicts = increment(&mut client, each, &done);
                (conflicts, client)
            })
        })
        .collect();
    during(&done, &mut setup);
    let mut conflicts = 0;
    for worker in workers {
        let (met, mut client) = worker.join().expect("a worker panicked");
        conflicts += met;
        client.shutdown().unwrap();
    }
    let final_count = ok(&mut setup, "state_get", json!({"key": "counter"}))["value"]["n"].as_u64().unwrap();
    stop_owner(owner_pid(&mut setup));
    assert_eq!(done.load(Ordering::SeqCst), processes as u64 * each);
    (final_count, conflicts)
}

#[test]
fn eight_processes_increment_one_counter_without_losing_an_update() {
    let (count, conflicts) = count_together(8, 200, |_, _| {});
    assert_eq!(count, 1600, "every successful compare-and-set is counted exactly once");
    assert!(conflicts > 0, "the clients really raced (no conflicts: the test proved nothing)");
}

/// Keeps `depth` unconditional writes of fresh keys in flight until `stop`, and returns the
/// keys acknowledged. Pipelined, so a killed owner always leaves writes mid-way.
fn pipelined_writes(client: &mut McpClient, depth: usize, stop: &AtomicBool) -> Vec<String> {
    let mut in_flight = std::collections::HashMap::new();
    let mut acked = Vec::new();
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) || !in_flight.is_empty() {
        while !stop.load(Ordering::SeqCst) && in_flight.len() < depth {
            let key = format!("w/{n:06}");
            let args = json!({"name": "state_set", "arguments": {"key": key, "value": n}});
            in_flight.insert(client.send_request("tools/call", args).unwrap(), key);
            n += 1;
        }
        let response = client.next_response(Duration::from_secs(30)).unwrap();
        let result = state_e2e::tool_result(state_e2e::result_of(response.clone()).unwrap()).unwrap();
        assert!(!result.is_error && result.json()["status"] == "ok", "{}", result.text);
        let key = in_flight.remove(&response["id"].as_u64().unwrap()).unwrap();
        assert_eq!(result.json()["version"], 1, "{key} was written once, so it is at version 1");
        acked.push(key);
    }
    acked
}

#[test]
fn killing_the_owner_mid_run_loses_nothing_and_applies_nothing_twice() {
    let kills = AtomicU64::new(0);
    let (count, conflicts) = count_together(8, 200, |done, watcher| {
        for target in [200, 600, 1000] {
            let what = format!("{target} increments, after {} kills", kills.load(Ordering::SeqCst));
            wait::until(&what, Duration::from_secs(60), || done.load(Ordering::SeqCst) >= target);
            let pid = owner_pid(watcher);
            signal(pid, "-KILL");
            kills.fetch_add(1, Ordering::SeqCst);
            wait_gone(pid, Duration::from_secs(10));
        }
    });
    assert_eq!(kills.load(Ordering::SeqCst), 3);
    assert_eq!(count, 1600, "the count equals the increments reported successful: none lost, none applied twice");
    assert!(conflicts > 0);
}

#[test]
fn pipelined_writes_through_owner_kills_are_each_applied_once() {
    let place = Place::new();
    let mut writer = place.start(&[], ProtocolEra::Legacy);
    let mut watcher = place.start(&[], ProtocolEra::Legacy);
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = stop.clone();
    let writing = thread::spawn(move || {
        let acked = pipelined_writes(&mut writer, 32, &stopping);
        (acked, writer)
    });
    for _ in 0..6 {
        let before = ok(&mut watcher, "state_health", json!({}))["revision"].as_u64().unwrap();
        // Let writes flow, then kill the owner in the middle of them.
        wait::until("300 more revisions", Duration::from_secs(60), || {
            // A writer that finished failed: its panic is reported below.
            writing.is_finished()
                || ok(&mut watcher, "state_health", json!({}))["revision"].as_u64().unwrap() >= before + 300
        });
        let pid = owner_pid(&mut watcher);
        signal(pid, "-KILL");
        wait_gone(pid, Duration::from_secs(10));
    }
    stop.store(true, Ordering::SeqCst);
    let (acked, mut writer) = writing.join().expect("the writer panicked");
    assert!(acked.len() > 1800, "only {} writes acknowledged", acked.len());
    // Every acknowledged write is there, at version 1: none lost, none applied twice.
    let listed = ok(&mut watcher, "state_list", json!({"prefix": "w/", "limit": 1000}));
    let mut seen = 0;
    let mut cursor = listed["next_cursor"].clone();
    let mut page = listed;
    loop {
        for entry in page["entries"].as_array().unwrap() {
            assert_eq!(entry["version"], 1, "{entry}: applied twice");
            seen += 1;
        }
        if cursor.is_null() {
            break;
        }
        page = ok(&mut watcher, "state_list", json!({"prefix": "w/", "limit": 1000, "cursor": cursor}));
        cursor = page["next_cursor"].clone();
    }
    assert_eq!(seen, acked.len(), "every acknowledged write is stored, and nothing unacknowledged");
    writer.shutdown().unwrap();
    let pid = owner_pid(&mut watcher);
    watcher.shutdown().unwrap();
    stop_owner(pid);
}

#[test]
fn two_processes_racing_to_start_an_owner_get_one_owner() {
    for round in 0..50 {
        let place = Place::new();
        let mut a = place.spawn(&[]);
        let mut b = place.spawn(&[]);
        a.handshake(ProtocolEra::Legacy).unwrap_or_else(|e| panic!("round {round}: {e}"));
        b.handshake(ProtocolEra::Legacy).unwrap_or_else(|e| panic!("round {round}: {e}"));
        let (pid_a, pid_b) = (owner_pid(&mut a), owner_pid(&mut b));
        assert_eq!(pid_a, pid_b, "round {round}: two owners");
        assert_eq!(owner_of(&mut a)["clients"], 2, "round {round}: both are served by it");
        a.shutdown().unwrap();
        b.shutdown().unwrap();
        let started = [&a, &b].iter().filter(|c| c.stderr().contains("started the owner")).count();
        assert!(started <= 1, "round {round}: both claim to have started the owner");
        stop_owner(pid_a);
    }
}

#[test]
fn a_retried_request_returns_its_first_result_and_writes_once() {
    let mut s = TestServer::start(&[]);
    let write = json!({"key": "job", "value": {"step": 1}, "expected_version": 0, "request_id": "agent-7-write-1"});
    let first = ok(&mut s.client, "state_set", write.clone());
    let retried = ok(&mut s.client, "state_set", write);
    assert_eq!(retried, first, "the retry is answered with the first result, not a conflict");
    let history = ok(&mut s.client, "history_log", json!({"key": "job"}));
    assert_eq!(history["events"].as_array().unwrap().len(), 1, "one write: {history}");

    let reused =
        s.client.call("state_set", json!({"key": "job", "value": 2, "request_id": "agent-7-write-1"})).unwrap();
    assert!(reused.is_error && reused.text.contains("request_id"), "{}", reused.text);
    let pid = owner_pid(&mut s.client);
    s.client.shutdown().unwrap();
    stop_owner(pid);
}

#[test]
fn engine_settings_are_the_owners() {
    let place = Place::new();
    let mut first = place.start(&["--max-value-bytes", "2048"], ProtocolEra::Legacy);
    let mut second = place.start(&["--max-value-bytes", "65536"], ProtocolEra::Legacy);
    let big = json!({"key": "big", "value": "x".repeat(4000)});
    let refused = second.call("state_set", big).unwrap();
    assert!(refused.is_error && refused.text.contains("2048-byte value limit"), "{}", refused.text);
    let pid = owner_pid(&mut first);
    first.shutdown().unwrap();
    second.shutdown().unwrap();
    let warning = second.stderr();
    assert!(warning.contains("--max-value-bytes 65536 is not in effect") && warning.contains("uses 2048"), "{warning}");
    assert!(!first.stderr().contains("not in effect"), "{}", first.stderr());
    stop_owner(pid);
}

#[test]
fn an_idle_owner_exits_and_the_database_reopens_cleanly() {
    let place = Place::new();
    let mut client = place.start(&["--owner-idle", "300ms"], ProtocolEra::Legacy);
    ok(&mut client, "state_set", json!({"key": "kept", "value": 42}));
    let pid = owner_pid(&mut client);
    client.shutdown().unwrap();
    wait_gone(pid, Duration::from_secs(10));

    let log = std::fs::read_to_string(state_api::owner_log_path(&place.db)).unwrap();
    assert!(log.contains("owner stopped; database closed") && log.contains("Idle"), "{log}");
    let leftovers: Vec<_> = std::fs::read_dir(&place.runtime).unwrap().collect();
    assert!(leftovers.is_empty(), "the owner removed its socket: {leftovers:?}");
    assert!(!state_api::holder_note_path(&place.db).exists(), "and its holder note");
    // Opened in this process, as a new holder would: no repair needed, the value is there.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let local = state_api::Local::open_standalone(&place.db, Default::default()).expect("reopens");
        let got = local.call(state_api::catalog::Operation::StateGet, json!({"key": "kept"})).await;
        assert_eq!(got.body.unwrap()["value"], 42);
        local.close().await;
    });
}

#[test]
fn a_database_held_alone_is_refused_at_once() {
    let place = Place::new();
    let mut alone = place.start(&["--standalone"], ProtocolEra::Legacy);
    let started = Instant::now();
    let mut joiner = place.spawn(&[]);
    let status = joiner.wait_exit(Duration::from_secs(15)).expect("the joiner exits instead of waiting forever");
    assert!(!status.success());
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    let stderr = joiner.stderr();
    assert!(stderr.contains("does not share it") && stderr.contains(&format!("pid {}", alone.pid())), "{stderr}");
    assert!(alone.shutdown().unwrap().success());
}

#[test]
fn an_unsafe_socket_directory_is_refused_naming_it() {
    let place = Place::new();
    std::fs::create_dir_all(&place.runtime).unwrap();
    std::fs::set_permissions(&place.runtime, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut client = place.spawn(&[]);
    assert!(!client.wait_exit(Duration::from_secs(10)).unwrap().success());
    let stderr = client.stderr();
    let dir = place.runtime.display().to_string();
    assert!(stderr.contains(&dir) && stderr.contains("mode 0755") && stderr.contains("chmod 700"), "{stderr}");

    // Owned by someone else: only root can arrange that here.
    if rustix_uid() == 0 {
        std::fs::set_permissions(&place.runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(&place.runtime, Some(65534), None).unwrap();
        let mut client = place.spawn(&[]);
        assert!(!client.wait_exit(Duration::from_secs(10)).unwrap().success());
        let stderr = client.stderr();
        assert!(stderr.contains(&dir) && stderr.contains("belongs to uid 65534"), "{stderr}");
    } else {
        eprintln!("skipped the foreign-owner half: it needs root to chown a directory");
    }
}

/// A temporary directory too deep for a socket path (macOS's `$TMPDIR` is deep, and socket
/// paths there are limited to 103 bytes): by default the sockets move to `/tmp/state-<uid>`
/// and clients still meet one owner; a socket directory given that deep is refused, saying
/// how long it may be.
#[test]
fn a_temporary_directory_too_deep_for_a_socket_still_works() {
    let place = Place::new();
    let deep = place.db.parent().unwrap().join("t".repeat(60)).join("u".repeat(60));
    std::fs::create_dir_all(&deep).unwrap();
    let deep_text = deep.to_string_lossy().into_owned();
    let db = place.db_arg();
    let args = ["--db", db.as_str(), "--owner-idle", crate::TEST_OWNER_IDLE];
    let env = [("TMPDIR", deep_text.as_str()), ("XDG_RUNTIME_DIR", "")];
    let mut first = McpClient::spawn_with_env(crate::binary(), &args, &env).unwrap();
    first.handshake(ProtocolEra::Legacy).unwrap_or_else(|e| panic!("{e}: {}", first.stderr()));
    let set = first.call("state_set", json!({"key": "deep", "value": 1})).unwrap();
    assert_eq!(set.json()["version"], 1, "{}", set.text);
    let mut second = McpClient::spawn_with_env(crate::binary(), &args, &env).unwrap();
    second.handshake(ProtocolEra::Legacy).unwrap();
    assert_eq!(second.call("state_get", json!({"key": "deep"})).unwrap().json()["value"], 1);
    let short = std::path::PathBuf::from(format!("/tmp/state-{}", state_api::current_uid()));
    let rendezvous = state_api::Rendezvous::for_database(&place.db, Some(&short)).unwrap();
    assert!(rendezvous.socket.exists(), "the owner listens at {}", rendezvous.socket.display());
    drop((first, second));

    let mut refused =
        McpClient::spawn_with_env(crate::binary(), &args, &[("STATE_RUNTIME_DIR", deep_text.as_str())]).unwrap();
    assert!(!refused.wait_exit(Duration::from_secs(10)).unwrap().success());
    let stderr = refused.stderr();
    assert!(stderr.contains(&deep_text) && stderr.contains("too long") && stderr.contains("at most"), "{stderr}");
}

fn rustix_uid() -> u32 {
    state_api::current_uid()
}

/// A listener at the owner's socket path that answers like something else entirely, until
/// stopped.
struct Impostor {
    stop: Arc<AtomicBool>,
    socket: std::path::PathBuf,
    handle: thread::JoinHandle<()>,
}

impl Impostor {
    fn listen(place: &Place, answer: &'static str) -> Impostor {
        let rendezvous = state_api::Rendezvous::for_database(&place.db, Some(&place.runtime)).unwrap();
        let listener = std::os::unix::net::UnixListener::bind(&rendezvous.socket).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let handle = thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    return;
                }
                if let Ok(mut stream) = stream {
                    use std::io::Write;
                    let _ = stream.write_all(answer.as_bytes());
                }
            }
        });
        Impostor { stop, socket: rendezvous.socket, handle }
    }

    /// Stops listening: a connection of its own wakes the accept it waits in.
    fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = std::os::unix::net::UnixStream::connect(&self.socket);
        self.handle.join().unwrap();
    }
}

#[test]
fn something_else_listening_at_the_socket_is_refused() {
    let place = Place::new();
    let impostor = Impostor::listen(&place, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    let mut client = place.spawn(&[]);
    assert!(!client.wait_exit(Duration::from_secs(15)).unwrap().success());
    impostor.stop();
    let stderr = client.stderr();
    assert!(stderr.contains("something other than a state owner is listening at"), "{stderr}");
    assert!(stderr.contains("HTTP/1.1 400"), "says what it heard: {stderr}");
}

#[test]
fn an_owner_of_another_wire_version_is_named_with_the_fix() {
    let place = Place::new();
    let old = r#"{"type":"refused","protocol":"state-owner","wire":99,"version":"9.9.9","pid":4242,"message":"wire mismatch"}
"#;
    let impostor = Impostor::listen(&place, old);
    let mut client = place.spawn(&[]);
    assert!(!client.wait_exit(Duration::from_secs(15)).unwrap().success());
    impostor.stop();
    let stderr = client.stderr();
    let ours = format!("speaks version {}", state_api::WIRE_VERSION);
    assert!(stderr.contains("wire version 99") && stderr.contains(&ours), "names both versions: {stderr}");
    assert!(stderr.contains("kill 4242"), "says how to stop the old owner: {stderr}");
}
