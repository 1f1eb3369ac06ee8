//! End-to-end tests of the `statectl` binary: every command through the real binary, `--json`
//! parsed back, exit codes, stdin input, beside a running `state-mcp`, and against a spawned
//! `state-http`.

// A panic is how a test reports failure.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use state_e2e::{HttpServer, McpClient, ProtocolEra, wait};

mod aliases;
mod transfer;
mod tui;

fn statectl() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_statectl"))
}

/// A binary of another crate, built beside this one by a workspace build.
fn sibling(name: &str) -> PathBuf {
    let path = statectl().with_file_name(name);
    assert!(path.exists(), "{} is missing: build the workspace's binaries (cargo build --workspace)", path.display());
    path
}

/// A database and its owner's socket directory, in a temporary directory.
struct Place {
    db: PathBuf,
    runtime: PathBuf,
    dir: tempfile::TempDir,
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}: {}\n{}", self.stdout, self.stderr))
    }
}

impl Place {
    fn new() -> Place {
        let dir = tempfile::tempdir().unwrap();
        Place { db: dir.path().join("s.redb"), runtime: dir.path().join("run"), dir }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(statectl());
        command
            .args(args)
            .env("STATE_DB", &self.db)
            .env("STATE_RUNTIME_DIR", &self.runtime)
            .env("STATE_OWNER_IDLE", "2s")
            .env_remove("STATE_SERVER")
            .env_remove("STATE_TOKEN")
            .current_dir(self.dir.path());
        command
    }

    fn run_with_stdin(&self, args: &[&str], stdin: &str) -> Run {
        let mut child =
            self.command(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    fn run(&self, args: &[&str]) -> Run {
        self.run_with_stdin(args, "")
    }

    /// A `state-http` on this database (joining its owner); it stops when dropped.
    fn state_http(&self) -> (HttpServer, String) {
        let (db, runtime) = (self.db.to_string_lossy(), self.runtime.to_string_lossy());
        let server = HttpServer::start(
            &sibling("state-http"),
            &["--db", &db, "--owner-idle", "2s"],
            &[("STATE_RUNTIME_DIR", runtime.as_ref())],
        )
        .unwrap();
        let url = format!("http://{}", server.addr);
        (server, url)
    }

    /// A `state-mcp` an MCP client started on this place's database, joined to its owner and
    /// past the handshake.
    fn agent(&self) -> McpClient {
        let (db, runtime) = (self.db.to_string_lossy(), self.runtime.to_string_lossy());
        let mut agent = McpClient::spawn_with_env(
            &sibling("state-mcp"),
            &["--db", &db, "--owner-idle", "2s"],
            &[("STATE_RUNTIME_DIR", runtime.as_ref())],
        )
        .unwrap();
        agent.handshake(ProtocolEra::Legacy).unwrap();
        agent
    }

    /// Runs with --json, expecting `code`; the parsed output.
    fn json(&self, args: &[&str], code: i32) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let run = self.run(&all);
        assert_eq!(run.code, code, "statectl {args:?}: {}\n{}", run.stdout, run.stderr);
        run.json()
    }
}

#[test]
fn a_read_never_creates_a_database() {
    let place = Place::new();
    for read in [&["get", "jobs/42"][..], &["ls"], &["history"], &["health"], &["lease", "ls"], &["export"]] {
        let run = place.run(read);
        assert_eq!(run.code, 2, "statectl {read:?}: {}", run.stderr);
        assert!(run.stderr.contains("there is no database at") && run.stderr.contains("s.redb"), "{}", run.stderr);
    }
    let entries: Vec<_> = std::fs::read_dir(place.dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(entries.is_empty(), "nothing was left behind: {entries:?}");
    // The first write creates it, and reads work from then on.
    assert_eq!(place.run(&["put", "jobs/42", "1"]).code, 0);
    assert_eq!(place.run(&["get", "jobs/42"]).code, 0);
}

#[test]
fn keys_versions_and_exit_codes() {
    let p = Place::new();
    assert_eq!(p.json(&["put", "jobs/42", r#"{"step": 1}"#, "--create-only"], 0)["version"], 1);
    let conflict = p.json(&["put", "jobs/42", r#"{"step": 9}"#, "--create-only"], 4);
    assert_eq!((conflict["status"].as_str(), conflict["value"].clone()), (Some("conflict"), json!({"step": 1})));
    assert_eq!(p.json(&["put", "jobs/42", r#"{"step": 2}"#, "--if-version", "1"], 0)["version"], 2);
    assert_eq!(
        p.json(&["put", "jobs/42", "3", "--if-version", "1"], 4)["version"],
        2,
        "stale: exit 4 with the current"
    );
    let got = p.json(&["get", "jobs/42"], 0);
    assert_eq!((got["value"].clone(), got["version"].as_u64()), (json!({"step": 2}), Some(2)));
    assert_eq!(p.json(&["get", "jobs/42", "--version", "1"], 0)["value"], json!({"step": 1}));
    assert_eq!(p.json(&["get", "missing"], 3)["status"], "not_found");

    // Values from stdin and from a file; text with --raw; not-JSON refused before anything runs.
    let piped = p.run_with_stdin(&["--json", "put", "jobs/42/status"], "\"done\"\n");
    assert_eq!(piped.code, 0, "{}", piped.stderr);
    std::fs::write(p.dir.path().join("v.json"), r#"{"from": "file"}"#).unwrap();
    p.json(&["put", "jobs/43", "@v.json"], 0);
    assert_eq!(p.json(&["get", "jobs/43"], 0)["value"], json!({"from": "file"}));
    p.json(&["put", "note", "plain words", "--raw"], 0);
    assert_eq!(p.json(&["get", "note"], 0)["value"], "plain words");
    let bad = p.run(&["put", "k", "not json"]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("--raw"), "{}", bad.stderr);
    assert_eq!(p.run(&["get"]).code, 2, "clap's usage error");

    p.json(&["put", "tmp/a", "1", "--ttl", "1h"], 0);
    let listed = p.json(&["ls", "jobs/", "--values"], 0);
    let keys: Vec<&str> = listed["entries"].as_array().unwrap().iter().map(|e| e["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["jobs/42", "jobs/42/status", "jobs/43"]);
    assert_eq!(p.json(&["ls", "--limit", "2"], 0)["entries"].as_array().unwrap().len(), 2);
    let text = p.run(&["ls", "jobs/"]);
    assert!(text.stdout.starts_with("KEY ") && text.stdout.contains("jobs/42/status"), "{}", text.stdout);

    assert_eq!(p.json(&["del", "jobs/43", "--if-version", "7"], 4)["status"], "conflict");
    assert_eq!(p.json(&["del", "jobs/43"], 0)["status"], "ok");
    assert_eq!(p.json(&["del", "jobs/43"], 3)["status"], "not_found");
    let history = p.json(&["history", "jobs/42"], 0);
    assert_eq!(history["events"].as_array().unwrap().len(), 2);

    let txn = r#"{"compare": [{"key": "jobs/44", "exists": false}], "success": [{"op": "put", "key": "jobs/44", "value": 1}]}"#;
    assert_eq!(p.run_with_stdin(&["--json", "txn", "-"], txn).code, 0);
    assert_eq!(p.run_with_stdin(&["--json", "txn", "-"], txn).code, 4, "its compare no longer holds");
    assert_eq!(p.json(&["call", "native/state_get", r#"{"key": "jobs/44"}"#], 0)["value"], 1);
    assert_eq!(p.run(&["call", "native/nope"]).code, 2);
    assert_eq!(p.json(&["health"], 0)["status"], "ok");

    // --raw: only the value, ready for a script.
    p.json(&["put", "greeting", "--raw", "hello world"], 0);
    let raw = p.run(&["get", "greeting", "--raw"]);
    assert_eq!((raw.code, raw.stdout.as_str()), (0, "hello world\n"));
    p.json(&["put", "doc", r#"{"a": [1, 2]}"#], 0);
    assert_eq!(p.run(&["get", "doc", "--raw"]).stdout, "{\"a\":[1,2]}\n");
    let missing = p.run(&["get", "absent", "--raw"]);
    assert_eq!((missing.code, missing.stdout.as_str()), (3, ""));
}

/// The coordination commands as a script uses them: exit codes say granted or refused, and
/// the listings find what is held without knowing its name.
#[test]
fn semaphores_path_reservations_and_queues() {
    let p = Place::new();
    let slot =
        |holder| ["semaphore", "acquire", "ci/build-slots", "--holder", holder, "--capacity", "1", "--ttl", "1m"];
    let granted = p.json(&slot("me"), 0);
    assert!(granted["token"].is_u64(), "{granted}");
    let full = p.json(&slot("you"), 4);
    assert_eq!((full["status"].as_str(), full["holders"][0]["holder"].as_str()), (Some("full"), Some("me")));
    let semaphores = p.json(&["semaphore", "ls", "ci/"], 0);
    assert_eq!(semaphores["semaphores"][0]["name"], "ci/build-slots", "{semaphores}");
    assert_eq!(semaphores["semaphores"][0]["available"], 0);

    let reserve =
        ["paths", "reserve", "/repo", "src/parser/**", "--holder", "me", "--ttl", "30m", "--reason", "grammar"];
    p.json(&reserve, 0);
    let overlap = p.json(&["paths", "reserve", "/repo", "src/**/*.rs", "--holder", "you", "--ttl", "30m"], 4);
    assert_eq!(overlap["conflicts"][0]["holder"], "me", "{overlap}");
    let scopes = p.json(&["paths", "scopes"], 0);
    assert_eq!(scopes["scopes"][0]["scope"], "/repo", "{scopes}");
    assert_eq!(scopes["scopes"][0]["reservations"][0]["reason"], "grammar");

    p.json(&["queue", "send", "inbox/reviewer", r#"{"pr": 42}"#, "--priority", "5"], 0);
    p.json(&["queue", "send", "inbox/reviewer", r#"{"pr": 43}"#, "--delay", "1h"], 0);
    let got = p.json(&["queue", "receive", "inbox/reviewer", "--consumer", "reviewer"], 0);
    assert_eq!(got["message"]["body"], json!({"pr": 42}));
    let queues = p.json(&["queue", "ls", "inbox/"], 0);
    let counts = &queues["queues"][0];
    assert_eq!(
        (counts["visible"].as_u64(), counts["in_flight"].as_u64(), counts["delayed"].as_u64()),
        (Some(0), Some(1), Some(1)),
        "{queues}"
    );
    assert_eq!(p.run(&["queue", "receive", "inbox/reviewer", "--consumer", "reviewer"]).code, 3, "empty");
    let text = p.run(&["queue", "ls"]);
    assert!(text.stdout.contains("inbox/reviewer"), "{}", text.stdout);
}

#[test]
fn leases_workflows_sessions_checkpoints_and_knowledge() {
    let p = Place::new();
    let granted = p.json(&["lease", "acquire", "printer", "--holder", "me", "--ttl", "30s"], 0);
    let token = granted["token"].as_u64().unwrap().to_string();
    assert_eq!(p.json(&["lease", "acquire", "printer", "--holder", "you", "--ttl", "30s"], 4)["holder"], "me");
    p.json(&["lease", "renew", "printer", "--holder", "me", "--fencing-token", &token, "--ttl", "60s"], 0);
    assert_eq!(p.json(&["lease", "ls"], 0)["leases"].as_array().unwrap().len(), 1);
    assert_eq!(p.json(&["lease", "get", "printer"], 0)["holder"], "me");
    assert_eq!(p.json(&["lease", "get", "scanner"], 0)["status"], "free");
    p.json(&["lease", "release", "printer", "--holder", "me", "--fencing-token", &token], 0);
    assert_eq!(
        p.json(&["lease", "release", "printer", "--holder", "me", "--fencing-token", &token], 5)["status"],
        "lost"
    );

    let run = p.json(&["workflow", "create", "report", "--input", r#"{"n": 3}"#, "--tag", "team=a"], 0);
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    let claim = p.json(&["workflow", "claim", "--agent", "w1", "--name", "report", "--ttl", "1m"], 0);
    let token = claim["token"].as_u64().unwrap().to_string();
    let beat = ["workflow", "heartbeat", &run_id, "--agent", "w1", "--fencing-token", &token, "--ttl", "2m"];
    assert_eq!(p.json(&beat, 0)["status"], "ok");
    let stale = ["workflow", "heartbeat", &run_id, "--agent", "w1", "--fencing-token", "999999"];
    assert_eq!(p.run(&stale).code, 5, "a stale token is fenced");
    assert_eq!(p.json(&["workflow", "status", &run_id], 0)["run"]["holder"], "w1");
    let step = [
        "workflow",
        "checkpoint",
        &run_id,
        "--agent",
        "w1",
        "--fencing-token",
        &token,
        "--step",
        "1",
        r#"{"done": 1}"#,
    ];
    p.json(&step, 0);
    let resumed = p.json(&["workflow", "resume", &run_id], 0);
    assert_eq!(resumed["steps"][0]["output"], json!({"done": 1}), "{resumed}");
    let stale = ["workflow", "complete", &run_id, "--agent", "w1", "--fencing-token", "1", r#""ok""#];
    assert_eq!(p.run(&stale).code, 5, "an old token is fenced");
    p.json(&["workflow", "complete", &run_id, "--agent", "w1", "--fencing-token", &token, r#""ok""#], 0);
    let waited = p.json(&["workflow", "status", &run_id, "--wait", "5s"], 0);
    assert_eq!((waited["run"]["run_status"].as_str(), waited["result"].as_str()), (Some("completed"), Some("ok")));
    assert_eq!(p.json(&["workflow", "ls", "--status", "completed"], 0)["runs"].as_array().unwrap().len(), 1);
    let other = p.json(&["workflow", "create", "other"], 0)["run_id"].as_str().unwrap().to_owned();
    p.json(&["workflow", "cancel", &other, "--reason", "not needed"], 0);
    let doomed = p.json(&["workflow", "create", "doomed"], 0)["run_id"].as_str().unwrap().to_owned();
    let claim = p.json(&["workflow", "claim", "--agent", "w2", "--run", &doomed], 0);
    let token = claim["token"].as_u64().unwrap().to_string();
    p.json(&["workflow", "fail", &doomed, "--agent", "w2", "--fencing-token", &token, "--error", "disk full"], 0);

    p.json(&["session", "save", "chat/1", r#"{"turn": 1}"#], 0);
    p.run_with_stdin(&["session", "save", "chat/1"], r#"{"turn": 2}"#);
    assert_eq!(p.json(&["session", "restore", "chat/1"], 0)["context"], json!({"turn": 2}));
    assert_eq!(p.json(&["session", "restore", "chat/1", "--version", "1"], 0)["context"], json!({"turn": 1}));
    assert_eq!(p.json(&["session", "ls"], 0)["sessions"][0]["latest_version"], 2);

    let saved = p.json(&["checkpoint", "save", "Wrote the CLI", "--highlight", "exit codes", "--file", "main.rs"], 0);
    assert_eq!(saved["workspace"], p.dir.path().display().to_string(), "the current directory by default");
    let restored = p.run(&["checkpoint", "restore"]);
    assert!(restored.stdout.starts_with("# Checkpoint restored: Wrote the CLI"), "{}", restored.stdout);
    let found = p.json(&["checkpoint", "search", "CLI exit codes"], 0);
    assert_eq!(found["checkpoints"][0]["id"], saved["checkpoint_id"]);
    assert_eq!(p.json(&["checkpoint", "timeline", "--range", "1h"], 0)["total"], 1);

    p.run_with_stdin(
        &["knowledge", "save", "pgbouncer", "--keyword", "postgres"],
        "Transaction pooling breaks prepared statements.",
    );
    let recalled = p.json(&["knowledge", "recall", "prepared statements pooling", "--max-tokens", "100"], 0);
    assert_eq!(recalled["items"][0]["id"], "pgbouncer");
    assert!(recalled["context_tokens"].as_u64().unwrap() <= 100);
    assert_eq!(p.json(&["knowledge", "save", "pgbouncer", "new", "--if-version", "0"], 4)["current_version"], 1);
    assert_eq!(p.json(&["knowledge", "ls"], 0)["notes"].as_array().unwrap().len(), 1);
    p.json(&["knowledge", "del", "pgbouncer"], 0);
    assert_eq!(p.run(&["knowledge", "del", "pgbouncer"]).code, 3);
}

#[test]
fn watch_prints_each_change_as_it_happens() {
    let p = Place::new();
    p.json(&["put", "w/a", "1"], 0);
    let watcher = p
        .command(&["--json", "watch", "w/", "--from", "0", "--count", "3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    p.json(&["put", "w/b", "2"], 0);
    p.json(&["put", "elsewhere", "0"], 0);
    p.json(&["del", "w/a"], 0);
    let out = watcher.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let events: Vec<Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let seen: Vec<(&str, &str)> =
        events.iter().map(|e| (e["key"].as_str().unwrap(), e["op"].as_str().unwrap())).collect();
    assert_eq!(seen, [("w/a", "put"), ("w/b", "put"), ("w/a", "delete")], "history from revision 0, then live");
    // Text names the operations as JSON does.
    let text = p.run(&["watch", "w/", "--from", "0", "--count", "3"]);
    let ops: Vec<&str> = text.stdout.lines().filter_map(|l| l.split(' ').nth(1)).collect();
    assert_eq!(ops, ["put", "put", "delete"], "{}", text.stdout);
}

#[test]
fn completions_and_man_page_are_generated() {
    let p = Place::new();
    let out = p.dir.path().join("share");
    let run = p.run(&["generate", "--dir", out.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let bash = std::fs::read_to_string(out.join("statectl.bash")).unwrap();
    assert!(bash.contains("statectl") && bash.contains("knowledge"), "bash completes the commands");
    assert!(out.join("_statectl").exists() && out.join("statectl.fish").exists());
    let man = std::fs::read_to_string(out.join("statectl.1")).unwrap();
    assert!(man.starts_with(".ie") || man.contains(".TH statectl"), "{}", &man[..200.min(man.len())]);
    assert!(man.contains("Exit codes"), "the man page documents the exit codes");
}

#[test]
fn call_alone_lists_every_operation_with_the_command_that_runs_it() {
    let p = Place::new();
    let all = p.run(&["call", "--json"]);
    assert_eq!(all.code, 0, "{}", all.stderr);
    let listing = all.json();
    let entry = |id: &str| listing.as_array().unwrap().iter().find(|e| e["operation"] == id).cloned().unwrap();
    assert_eq!(entry("native/workflow_claim")["command"], "statectl workflow claim");
    let reset = entry("native/state_reset");
    assert!(reset["command"].is_null() && reset["call_only"].as_str().unwrap().contains("call"), "{reset}");
    assert!(entry("native/state_get")["description"].as_str().unwrap().contains("version"));
    let sidecar = p.run(&["call", "sidecar", "--json"]).json();
    let ids: Vec<&str> = sidecar.as_array().unwrap().iter().map(|e| e["operation"].as_str().unwrap()).collect();
    assert!(ids.len() >= 19 && ids.iter().all(|id| id.starts_with("sidecar/")), "{ids:?}");
    assert!(!p.db.exists(), "listing the catalog opens no store");
}

#[test]
fn works_beside_a_running_agent_and_against_state_http() {
    let p = Place::new();
    let mut agent = p.agent();
    assert!(!agent.call("state_set", json!({"key": "shared", "value": "from the agent"})).unwrap().is_error);
    assert_eq!(p.json(&["get", "shared"], 0)["value"], "from the agent", "joined the agent's owner");
    p.json(&["put", "shared", r#""from the shell""#, "--if-version", "1"], 0);
    let read = agent.call("state_get", json!({"key": "shared"})).unwrap().json();
    assert_eq!(read["value"], "from the shell");

    let (_server, url) = p.state_http();
    let remote = |args: &[&str], code: i32| {
        let mut all = vec!["--server", url.as_str()];
        all.extend_from_slice(args);
        p.json(&all, code)
    };
    assert_eq!(remote(&["get", "shared"], 0)["version"], 2);
    assert_eq!(remote(&["put", "shared", "3", "--if-version", "1"], 4)["version"], 2);
    assert_eq!(remote(&["ls"], 0)["entries"].as_array().unwrap().len(), 1);
    let unreachable = p.run(&["--server", "http://127.0.0.1:9", "get", "k"]);
    assert_eq!(unreachable.code, 6, "{}", unreachable.stderr);
    assert!(unreachable.stderr.contains("cannot reach a server at http://127.0.0.1:9"), "{}", unreachable.stderr);
    let https = p.run(&["--server", "https://127.0.0.1:9", "get", "k"]);
    assert_eq!(https.code, 2, "an https URL is the command line's mistake: {}", https.stderr);
}

#[test]
fn a_server_that_refuses_the_token_exits_7() {
    let p = Place::new();
    let tokens = p.dir.path().join("tokens.toml");
    let file =
        "[[token]]\nname = \"ci\"\nsecret = \"ci-secret-0123456789ab\"\nprefixes = [\"\"]\nrights = [\"read\"]\n";
    std::fs::write(&tokens, file).unwrap();
    let (db, runtime) = (p.db.to_string_lossy(), p.runtime.to_string_lossy());
    let server = HttpServer::start(
        &sibling("state-http"),
        &["--db", &db, "--owner-idle", "2s", "--auth", &tokens.to_string_lossy()],
        &[("STATE_RUNTIME_DIR", runtime.as_ref())],
    )
    .unwrap();
    let url = format!("http://{}", server.addr);
    let missing = p.run(&["--server", &url, "get", "k"]);
    assert_eq!(missing.code, 7, "no token: {}", missing.stderr);
    let mut wrong = p.command(&["--server", &url, "get", "k"]);
    let wrong = wrong.env("STATE_TOKEN", "not-the-secret-at-all").output().unwrap();
    assert_eq!(wrong.status.code(), Some(7), "{}", String::from_utf8_lossy(&wrong.stderr));
    let mut right = p.command(&["--server", &url, "health"]);
    let right = right.env("STATE_TOKEN", "ci-secret-0123456789ab").output().unwrap();
    assert_eq!(right.status.code(), Some(0), "{}", String::from_utf8_lossy(&right.stderr));
}

#[test]
fn a_reader_that_stops_early_ends_statectl_quietly() {
    let p = Place::new();
    let big = p.dir.path().join("big.json");
    std::fs::write(&big, format!("\"{}\"", "x".repeat(300_000))).unwrap();
    p.json(&["put", "big", &format!("@{}", big.display())], 0);
    // More than a pipe holds, read by a `head` that leaves after 10 bytes.
    let script = format!("{} get big | head -c 10 >/dev/null; echo \"exit ${{PIPESTATUS[0]}}\"", statectl().display());
    let run = Command::new("bash")
        .args(["-c", &script])
        .env("STATE_DB", &p.db)
        .env("STATE_RUNTIME_DIR", &p.runtime)
        .env("STATE_OWNER_IDLE", "2s")
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert!(!stderr.contains("panicked"), "statectl panicked on a closed pipe:\n{stderr}");
    assert_eq!(stdout.trim(), "exit 0", "{stderr}");
}

#[test]
fn a_database_written_by_0_1_0_opens_with_everything_in_it() {
    // crates/state-cli/tests/data/format/format-1.redb: written on 2026-11-26 by statectl 0.1.0
    // (store format 1): two versions of project/status, notes/a, a workflow run, a session, a
    // checkpoint and a note. A newer build must read it all and write on.
    let p = Place::new();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/format/format-1.redb");
    std::fs::copy(fixture, &p.db).unwrap();
    let status = p.json(&["get", "project/status"], 0);
    assert_eq!((status["version"].as_u64(), status["value"]["tests"].as_u64()), (Some(2), Some(434)));
    assert_eq!(p.json(&["history", "project/status"], 0)["events"].as_array().unwrap().len(), 2);
    assert_eq!(p.json(&["get", "notes/a"], 0)["value"], json!([1, 2, 3]));
    let runs = p.json(&["workflow", "ls", "--name", "nightly"], 0);
    assert_eq!(runs["runs"][0]["tags"]["team"], "a", "{runs}");
    assert_eq!(p.json(&["session", "restore", "agent-1"], 0)["context"]["turn"], 7);
    assert_eq!(p.json(&["knowledge", "ls", "notes/"], 0)["notes"][0]["id"], "notes/format");
    let restored = p.json(&["checkpoint", "restore", "--workspace", "fixture"], 0);
    assert!(restored.to_string().contains("format fixture written"), "{restored}");
    let written = p.json(&["put", "project/status", "\"upgraded\"", "--if-version", "2"], 0);
    assert_eq!(written["revision"], 8, "revisions go on from the old file's");
}

#[test]
fn a_backup_taken_under_writes_holds_exactly_the_writes_up_to_its_revision() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    let p = Place::new();
    p.json(&["put", "seed", "0"], 0);
    // An agent writes one new key after another through the database's owner, noting each
    // acknowledged write's revision.
    let acked: Arc<Mutex<Vec<(String, u64)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (acked, stop) = (Arc::clone(&acked), Arc::clone(&stop));
        let mut agent = p.agent();
        std::thread::spawn(move || {
            for i in 0..20_000 {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let key = format!("w/{i:05}");
                let set = agent.call("state_set", json!({"key": key, "value": i})).unwrap().json();
                acked.lock().unwrap().push((key, set["revision"].as_u64().unwrap()));
            }
            agent.shutdown().unwrap();
        })
    };
    wait::until("200 acknowledged writes", std::time::Duration::from_secs(60), || acked.lock().unwrap().len() >= 200);
    let before_backup: Vec<(String, u64)> = acked.lock().unwrap().clone();
    let file = p.dir.path().join("backup.redb");
    let taken = p.json(&["backup", file.to_str().unwrap()], 0);
    // Writes go on after it; then stop.
    let after = acked.lock().unwrap().len();
    wait::until("200 more acknowledged writes", std::time::Duration::from_secs(60), || {
        acked.lock().unwrap().len() >= after + 200
    });
    stop.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    let revision = taken["revision"].as_u64().unwrap();

    // The backup is a database of its own: open it, alone.
    let mut list = p.command(&["--json", "--db", file.to_str().unwrap(), "--standalone", "ls", "w/"]);
    let listed = list.output().unwrap();
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let present: std::collections::BTreeSet<String> =
        listed["entries"].as_array().unwrap().iter().map(|e| e["key"].as_str().unwrap().to_owned()).collect();
    for (key, _) in &before_backup {
        assert!(present.contains(key), "{key}, acknowledged before the backup began, is missing from it");
    }
    for (key, at) in acked.lock().unwrap().iter() {
        assert_eq!(present.contains(key), *at <= revision, "{key} (revision {at}) against a backup at {revision}");
    }
    assert!(acked.lock().unwrap().iter().any(|(_, at)| *at > revision), "writes went on during and after it");
    let again = p.run(&["backup", file.to_str().unwrap()]);
    assert_eq!(again.code, 2, "{}", again.stderr);
    assert!(again.stderr.contains("never overwrites"), "{}", again.stderr);
}

#[test]
fn doctor_says_what_is_wrong_and_what_to_do() {
    use std::os::unix::fs::PermissionsExt;
    let p = Place::new();
    std::fs::set_permissions(p.dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let missing = p.run(&["doctor"]);
    assert_eq!(missing.code, 0, "{}", missing.stderr);
    assert!(missing.stdout.contains("WARN  database   none at"), "{}", missing.stdout);
    assert!(!p.db.exists(), "doctor creates nothing");

    p.json(&["put", "k", "1"], 0);
    let healthy = p.run(&["doctor"]);
    assert_eq!(healthy.code, 0, "{}", healthy.stdout);
    for line in ["ok    database", "ok    log        ", "ok    owner      pid", "ok    version    state", "ok    disk"]
    {
        assert!(healthy.stdout.contains(line), "{line}:\n{}", healthy.stdout);
    }

    std::fs::set_permissions(&p.db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let exposed = p.run(&["--json", "doctor"]);
    let checks: Value = serde_json::from_str(&exposed.stdout).unwrap();
    let database = checks.as_array().unwrap().iter().find(|c| c["check"] == "database").unwrap();
    assert_eq!(
        (database["status"].as_str(), database["fix"].as_str().map(|f| f.starts_with("chmod 600"))),
        (Some("warn"), Some(true))
    );
    let log = p.db.with_file_name("s.redb.wal");
    assert!(log.exists(), "the write went through the log beside the database");
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o644)).unwrap();
    let exposed_log = p.run(&["doctor"]);
    assert!(
        exposed_log.stdout.contains("WARN  log") && exposed_log.stdout.contains("chmod 600"),
        "{}",
        exposed_log.stdout
    );

    std::fs::set_permissions(&p.runtime, std::fs::Permissions::from_mode(0o755)).unwrap();
    let broken = p.run(&["doctor"]);
    assert_eq!(broken.code, 1, "an unsafe socket directory is a failure: {}", broken.stdout);
    assert!(broken.stdout.contains("FAIL  sockets") && broken.stdout.contains("chmod 700"), "{}", broken.stdout);
    std::fs::set_permissions(&p.runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
}

/// The probe's stopped owner (issue 30): `statectl` gave up after 5 s, before the hang
/// timeout let it replace the owner, and failed a call the next one would have served. Its
/// deadline now outlasts a takeover.
#[test]
fn statectl_against_a_stopped_owner_replaces_it_and_succeeds() {
    let place = Place::new();
    place.json(&["put", "k", "1"], 0);
    let note = std::fs::read_to_string(place.db.with_file_name("s.redb.holder")).unwrap();
    let hung = serde_json::from_str::<Value>(&note).unwrap()["pid"].as_u64().unwrap().to_string();
    assert!(Command::new("kill").args(["-STOP", &hung]).status().unwrap().success());
    let mut command = place.command(&["--json", "get", "k"]);
    let out = command.output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(serde_json::from_str::<Value>(&stdout).unwrap()["value"], 1);
    // The stopped owner was asked to stop (with SIGCONT, so it hears it) and is gone.
    let pid: u32 = hung.parse().unwrap();
    wait::until(&format!("the stopped owner {hung} to be gone"), std::time::Duration::from_secs(15), || {
        wait::process_gone(pid)
    });
}

/// The database file deleted while its owner idles (a user starting over): the owner, still
/// holding the old file, used to acknowledge writes into it, lost at its next start. It refuses
/// them now, saying why, and nothing acknowledged is lost.
#[test]
fn a_write_after_the_database_file_was_deleted_is_refused_not_lost() {
    let place = Place::new();
    place.json(&["put", "a", "1"], 0);
    std::fs::remove_file(&place.db).unwrap();
    let refused = place.run(&["put", "b", "2"]);
    assert_ne!(refused.code, 0, "a write into the deleted file was acknowledged: {}", refused.stdout);
    assert!(refused.stderr.contains("was removed or replaced"), "{}", refused.stderr);
    // Replaced by another file at that name: refused the same way.
    std::fs::write(&place.db, b"").unwrap();
    let replaced = place.run(&["put", "c", "3"]);
    assert!(replaced.code != 0 && replaced.stderr.contains("removed or replaced"), "{}", replaced.stderr);
}

/// `statectl lease acquire` hands out fencing tokens, and a write can now be fenced by one
/// from the command line as through the tools (issue 31: the flags did not exist).
#[test]
fn a_write_fenced_by_a_stale_token_is_refused_with_exit_5() {
    let place = Place::new();
    let first = place.json(&["lease", "acquire", "printer", "--holder", "a", "--ttl", "30s"], 0);
    let old = first["token"].as_u64().unwrap().to_string();
    place.json(&["put", "job", "1", "--lease", "printer", "--fencing-token", &old], 0);
    // The lease goes to another holder: the old token no longer writes.
    place.json(&["lease", "release", "printer", "--holder", "a", "--fencing-token", &old], 0);
    let second = place.json(&["lease", "acquire", "printer", "--holder", "b", "--ttl", "30s"], 0);
    let new = second["token"].as_u64().unwrap().to_string();
    let refused = place.run(&["put", "job", "2", "--lease", "printer", "--fencing-token", &old]);
    assert_eq!(refused.code, 5, "{}{}", refused.stdout, refused.stderr);
    let refused = place.run(&["del", "job", "--lease", "printer", "--fencing-token", &old]);
    assert_eq!(refused.code, 5, "{}{}", refused.stdout, refused.stderr);
    place.json(&["put", "job", "3", "--lease", "printer", "--fencing-token", &new], 0);
    assert_eq!(place.json(&["get", "job"], 0)["value"], 3);
    // One without the other is a usage error, before anything is sent.
    assert_eq!(place.run(&["put", "job", "4", "--lease", "printer"]).code, 2);
}

/// The new user's first meeting (issue 31): as a user who may not write in the database's
/// directory, `statectl put` waited 5 s and said nothing was listening; the real reason showed
/// only with --standalone. It is said at once, with what to do. Run as uid 65534 (needs root
/// to switch to it; CI runs as root).
#[test]
fn a_directory_the_user_cannot_write_is_named_at_once() {
    if !std::fs::read_to_string("/proc/self/status").unwrap_or_default().contains("Uid:\t0\t") {
        assert!(std::env::var_os("STATE_REQUIRE_MOUNT").is_none(), "CI runs this as root");
        eprintln!("SKIPPED: switching to another user needs root");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let readonly = dir.path().join("ro");
    std::fs::create_dir(&readonly).unwrap();
    std::fs::set_permissions(&readonly, std::fs::Permissions::from_mode(0o755)).unwrap();
    let db = readonly.join("state.redb");
    let runtime = dir.path().join("run-nobody");
    std::fs::create_dir(&runtime).unwrap();
    std::os::unix::fs::chown(&runtime, Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    let as_nobody = |program: &Path, args: &[&str]| {
        let started = std::time::Instant::now();
        let out = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(program)
            .args(args)
            .env("STATE_RUNTIME_DIR", &runtime)
            .env("HOME", dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned(), started.elapsed())
    };
    let db_arg = db.to_str().unwrap();
    let (code, stderr, took) = as_nobody(statectl(), &["--db", db_arg, "put", "a", "1"]);
    assert_ne!(code, Some(0));
    assert!(stderr.contains("Permission denied") && stderr.contains("cannot write in"), "{stderr}");
    assert!(!stderr.contains("nothing is listening"), "{stderr}");
    assert!(took < std::time::Duration::from_secs(3), "the reason took {took:?}");
    // An MCP client's server says the same, and stops, instead of hanging.
    let (code, stderr, took) = as_nobody(&sibling("state-mcp"), &["--db", db_arg]);
    assert_ne!(code, Some(0));
    assert!(stderr.contains("Permission denied") && stderr.contains("cannot write in"), "{stderr}");
    assert!(took < std::time::Duration::from_secs(3), "state-mcp took {took:?}");
    // And doctor names it as a failure, with the fix.
    let (code, doctor, _) = {
        let out = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(statectl())
            .args(["--db", db_arg, "doctor"])
            .env("STATE_RUNTIME_DIR", &runtime)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned(), ())
    };
    assert_eq!(code, Some(1), "{doctor}");
    assert!(doctor.contains("FAIL  directory") && doctor.contains("cannot write in"), "{doctor}");
}

/// `statectl doctor` said "ok" of stores that would not open (issue 31): a file that is not a
/// database, and a log damaged before acknowledged writes. It opens what it checks, read-only,
/// and fails on both, naming the fix; a healthy store that was not closed cleanly is fine.
#[test]
fn doctor_opens_what_it_checks_and_fails_on_what_would_stop_a_command() {
    let p = Place::new();
    for n in 0..5 {
        p.json(&["put", &format!("k{n}"), "1"], 0);
    }
    let note = std::fs::read_to_string(p.db.with_file_name("s.redb.holder")).unwrap();
    let owner = serde_json::from_str::<Value>(&note).unwrap()["pid"].as_u64().unwrap().to_string();
    assert!(Command::new("kill").args(["-9", &owner]).status().unwrap().success());
    let pid: u32 = owner.parse().unwrap();
    wait::until(&format!("owner {owner} to die of SIGKILL"), std::time::Duration::from_secs(10), || {
        wait::process_gone(pid)
    });
    // Killed: not closed cleanly, and that is fine; its log is sound and says what it holds.
    let crashed = p.run(&["doctor"]);
    assert_eq!(crashed.code, 0, "{}", crashed.stdout);
    assert!(crashed.stdout.contains("not closed cleanly") && crashed.stdout.contains("sound"), "{}", crashed.stdout);
    assert!(!crashed.stdout.contains("0.0 MB"), "sizes as people read them: {}", crashed.stdout);

    // The log damaged before acknowledged writes: a failure, with the way out.
    let log = p.db.with_file_name("s.redb.wal");
    let mut bytes = std::fs::read(&log).unwrap();
    bytes[4096 + 40] ^= 0x55;
    std::fs::write(&log, &bytes).unwrap();
    let damaged = p.run(&["doctor"]);
    assert_eq!(damaged.code, 1, "{}", damaged.stdout);
    assert!(damaged.stdout.contains("FAIL  log") && damaged.stdout.contains("damaged at offset"), "{}", damaged.stdout);
    assert!(damaged.stdout.contains("statectl recover"), "{}", damaged.stdout);
    assert!(
        damaged.stdout.contains("4 acknowledged write batches")
            || damaged.stdout.contains("acknowledged write batches")
    );

    // A file that is not a database at all.
    std::fs::write(&p.db, vec![0x42u8; 8192]).unwrap();
    let garbage = p.run(&["doctor"]);
    assert_eq!(garbage.code, 1, "{}", garbage.stdout);
    assert!(garbage.stdout.contains("FAIL  database") && garbage.stdout.contains("backup"), "{}", garbage.stdout);
}
