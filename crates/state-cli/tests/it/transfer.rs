//! `statectl export` / `import`: a dump round-trips exactly, re-running changes nothing, a
//! differing key is reported and left alone, and a cut-off dump changes nothing.

use serde_json::{Value, json};

use super::Place;

/// A store with a bit of everything: key versions, a TTL and a writer, a lease, a run with a
/// claim and a step, a session with two versions, a note and a checkpoint.
fn populated() -> Place {
    let p = Place::new();
    p.json(&["put", "jobs/1", r#"{"step": 1}"#], 0);
    p.json(&["put", "jobs/1", r#"{"step": 2}"#, "--agent", "planner"], 0);
    p.json(&["put", "cache/émoji 🙂", r#"[1, "二", null]"#, "--ttl", "1h"], 0);
    p.json(&["lease", "acquire", "printer", "--holder", "me", "--ttl", "1h"], 0);
    let run =
        p.json(&["workflow", "create", "report", "--input", r#"{"n": 3}"#], 0)["run_id"].as_str().unwrap().to_owned();
    let token = p.json(&["workflow", "claim", "--agent", "w1", "--run", &run, "--ttl", "1h"], 0)["token"].to_string();
    p.json(&["workflow", "checkpoint", &run, "--agent", "w1", "--fencing-token", &token, "--step", "1", "{}"], 0);
    p.json(&["session", "save", "chat/1", r#"{"turn": 1}"#], 0);
    p.json(&["session", "save", "chat/1", r#"{"turn": 2}"#], 0);
    p.json(&["knowledge", "save", "pgbouncer", "transaction pooling breaks prepared statements"], 0);
    p.json(&["checkpoint", "save", "Moved the importer", "--highlight", "chunks of 500"], 0);
    p
}

/// The record lines of a dump, revisions left out: an import writes at its own revisions.
fn records(dump: &str) -> Vec<Value> {
    dump.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).unwrap().get("record").cloned())
        .map(|mut record| {
            let map = record.as_object_mut().unwrap();
            map.remove("create_revision");
            map.remove("mod_revision");
            record
        })
        .collect()
}

#[test]
fn a_dump_round_trips_exactly_and_an_import_can_be_run_again() {
    let source = populated();
    let exported = source.run(&["export", "--history", "-o", "dump.jsonl"]);
    assert_eq!(exported.code, 0, "{}", exported.stderr);
    let dump = std::fs::read_to_string(source.dir.path().join("dump.jsonl")).unwrap();
    let n = records(&dump).len() as u64;
    assert!(
        exported.stdout.contains(&format!("exported {n} records and")),
        "the summary is on stdout: {}",
        exported.stdout
    );
    let to_stdout = source.run(&["export"]);
    assert!(to_stdout.stderr.contains("exported"), "with the dump on stdout, the summary is on stderr");
    // 3 keys, the lease, the run with its claim, queue entry and step, the session and its two
    // versions, the note, and the checkpoint with its session and latest pointer.
    assert_eq!(n, 14);
    assert!(!source.dir.path().join("dump.jsonl.partial").exists());

    let target = Place::new();
    let path = source.dir.path().join("dump.jsonl");
    let path = path.to_str().unwrap();
    let dry = target.json(&["import", path, "--dry-run"], 0);
    assert_eq!((dry["imported"].as_u64(), dry["dry_run"].as_bool()), (Some(n), Some(true)));
    assert_eq!(target.json(&["get", "jobs/1"], 3)["status"], "not_found", "a dry run writes nothing");

    // Chunks of 4 (4 + 4 + 4 + 2), streamed from the file.
    let first = target.json(&["import", path, "--chunk", "4"], 0);
    assert_eq!((first["imported"].as_u64(), first["unchanged"].as_u64()), (Some(n), Some(0)));
    let events = dump.lines().filter(|line| line.starts_with("{\"event\"")).count() as u64;
    assert_eq!(first["history_events_not_replayed"].as_u64(), Some(events));
    assert!(events >= 11, "every change of the source is in the dump: {events}");
    let again = target.json(&["import", path], 0);
    assert_eq!((again["imported"].as_u64(), again["unchanged"].as_u64()), (Some(0), Some(n)));

    let round_trip = target.run(&["export"]);
    assert_eq!(round_trip.code, 0, "{}", round_trip.stderr);
    assert_eq!(records(&round_trip.stdout), records(&dump), "every key, value, version, time and writer");

    // What was imported works as it did: versions go on, recall finds the note, the run
    // resumes with its step, and a new lease token is above every imported one.
    let got = target.json(&["get", "jobs/1"], 0);
    assert_eq!((got["version"].as_u64(), got["value"].clone()), (Some(2), json!({"step": 2})));
    assert_eq!(target.json(&["put", "jobs/1", "3", "--if-version", "2"], 0)["version"], 3);
    let recalled = target.json(&["knowledge", "recall", "prepared statements"], 0);
    assert_eq!(recalled["items"][0]["id"], "pgbouncer");
    assert_eq!(target.json(&["session", "restore", "chat/1", "--version", "1"], 0)["context"], json!({"turn": 1}));
    let runs = target.json(&["workflow", "ls"], 0);
    let run = runs["runs"][0]["run_id"].as_str().unwrap().to_owned();
    assert_eq!(target.json(&["workflow", "resume", &run], 0)["steps"][0]["step"], 1);
    let lease = records(&dump).into_iter().find(|r| r["key"] == "\u{1}Lprinter").unwrap();
    let imported_token = lease["value"]["token"].as_u64().unwrap();
    assert_eq!(target.json(&["lease", "ls"], 0)["leases"][0]["holder"], "me");
    let fresh = target.json(&["lease", "acquire", "scanner", "--holder", "me", "--ttl", "1m"], 0);
    assert!(fresh["token"].as_u64().unwrap() > imported_token, "{fresh} after token {imported_token}");
}

#[test]
fn a_key_that_differs_is_reported_and_never_overwritten() {
    let source = populated();
    let dump = source.run(&["export"]).stdout;
    let target = Place::new();
    target.json(&["put", "jobs/1", r#""mine""#], 0);
    let run = target.run_with_stdin(&["import", "-"], &dump);
    assert_eq!(run.code, 4, "conflicts exit 4: {}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("jobs/1: version 1 here, 2 in the import (left as it is)"), "{}", run.stdout);
    assert!(run.stdout.contains("imported   13"), "the rest is imported: {}", run.stdout);
    assert_eq!(target.json(&["get", "jobs/1"], 0)["value"], "mine");
}

#[test]
fn a_cut_off_or_foreign_file_is_refused_before_anything_is_written() {
    let source = populated();
    let dump = source.run(&["export"]).stdout;
    let target = Place::new();
    let cut: Vec<&str> = dump.lines().collect();
    let cut = cut[..cut.len() - 1].join("\n");
    let run = target.run_with_stdin(&["import"], &cut);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("it was cut off"), "{}", run.stderr);
    let run = target.run_with_stdin(&["import"], "{\"key\": \"a\"}\n");
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("line 1 is not a dump line"), "{}", run.stderr);
    assert!(!target.db.exists(), "a refused import does not even create the database");
}

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/import").join(name)
}

/// Every row the server left in its database, as `make_import_fixtures.py` read it back.
fn expected(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture(name)).unwrap()).unwrap()
}

fn epoch_rfc3339(seconds: f64) -> String {
    let millis = (seconds * 1000.0).round() as u64;
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(millis);
    let secs = at.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    // Civil date from days (Howard Hinnant's algorithm), to check the CLI's own conversion.
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z", rem / 3600, rem / 60 % 60, rem % 60, millis % 1000)
}

#[test]
fn agentcheckpoint_database_is_imported_with_every_version() {
    let p = Place::new();
    let db = fixture("agentcheckpoint.db");
    let summary = p.json(&["import", "--from", "agentcheckpoint", db.to_str().unwrap()], 0);
    let rows = expected("expected_agentcheckpoint.json")["checkpoints"].as_array().unwrap().clone();
    assert_eq!(summary["imported"].as_u64(), Some(rows.len() as u64));
    assert!(rows.len() >= 10, "the fixture holds the keys its script wrote");
    for row in &rows {
        let key = row["key"].as_str().unwrap();
        let got = p.json(&["get", key], 0);
        let value: Value = serde_json::from_str(row["value"].as_str().unwrap()).unwrap();
        assert_eq!(got["value"], value, "{key}");
        assert_eq!(got["version"], row["version"], "{key}");
        let updated = format!("{}.000Z", row["updated_at"].as_str().unwrap().replace(' ', "T"));
        assert_eq!(got["updated_at"].as_str(), Some(updated.as_str()), "{key}");
    }
    let listed = p.json(&["ls"], 0)["entries"].as_array().unwrap().len();
    assert_eq!(listed, rows.len(), "nothing more: the deleted key stays deleted");
    let again = p.json(&["import", "--from", "agentcheckpoint", db.to_str().unwrap()], 0);
    assert_eq!((again["imported"].as_u64(), again["unchanged"].as_u64()), (Some(0), Some(rows.len() as u64)));
}

#[test]
fn sidecar_database_is_imported_with_writers_expiry_and_sessions() {
    let p = Place::new();
    let db = fixture("sidecar.db");
    let summary = p.json(&["import", "--from", "sidecar", db.to_str().unwrap()], 0);
    let tables = expected("expected_sidecar.json");
    let history = tables["history"].as_array().unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let mut live = 0;
    for row in tables["kv_store"].as_array().unwrap() {
        let key = row["key"].as_str().unwrap();
        if row["expires_at"].as_f64().is_some_and(|at| at <= now) {
            assert_eq!(p.json(&["get", key], 3)["status"], "not_found", "{key} had expired");
            continue;
        }
        live += 1;
        let writes: Vec<&Value> = history.iter().filter(|h| h["key"] == key).collect();
        let last = writes.last().unwrap();
        let got = p.json(&["get", key], 0);
        let value: Value = serde_json::from_str(row["value_json"].as_str().unwrap()).unwrap();
        assert_eq!(got["value"], value, "{key}");
        assert_eq!(got["version"].as_u64(), Some(writes.len() as u64), "{key}: one version per recorded write");
        assert_eq!(got["agent_id"], last["agent_id"], "{key}: the last writer");
        assert_eq!(got["updated_at"].as_str(), Some(epoch_rfc3339(last["written_at"].as_f64().unwrap()).as_str()));
        let expires = row["expires_at"].as_f64().map(epoch_rfc3339);
        assert_eq!(got["expires_at"].as_str(), expires.as_deref(), "{key}");
    }
    assert!(live >= 5 && summary["expired"].as_u64() == Some(1), "{summary}");
    assert_eq!(p.json(&["ls"], 0)["entries"].as_array().unwrap().len(), live);
    for row in tables["sessions"].as_array().unwrap() {
        let session = row["session_id"].as_str().unwrap();
        let context: Value = serde_json::from_str(row["context_json"].as_str().unwrap()).unwrap();
        let restored = p.json(&["session", "restore", session], 0);
        assert_eq!((restored["context"].clone(), restored["version"].as_u64()), (context, Some(1)), "{session}");
    }
    assert_eq!(summary["not_imported"], json!({"leases": 1}), "said, not dropped silently");
    let text = p.run(&["import", "--from", "sidecar", db.to_str().unwrap(), "--dry-run"]);
    assert!(text.stdout.contains("not imported: 1 live leases"), "{}", text.stdout);

    // Workflow runs keep their ids, names, tags and steps; a run the sidecar had claimed is
    // claimable again here (no token could come over) and resumes after its last step.
    let runs = p.json(&["workflow", "ls"], 0)["runs"].as_array().unwrap().clone();
    let workflows = tables["workflows"].as_array().unwrap();
    assert_eq!(runs.len(), workflows.len());
    for row in workflows {
        let run_id = row["run_id"].as_str().unwrap();
        let resumed = p.json(&["workflow", "resume", run_id], 0);
        assert_eq!(resumed["run"]["name"], row["name"], "{run_id}");
        let tags: Value = serde_json::from_str(row["tags_json"].as_str().unwrap()).unwrap();
        assert_eq!(resumed["run"]["tags"], tags, "{run_id}");
        let steps: Vec<(Value, Value)> = tables["step_outputs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["run_id"] == row["run_id"])
            .map(|s| (s["step"].clone(), serde_json::from_str(s["output_json"].as_str().unwrap()).unwrap()))
            .collect();
        let got: Vec<(Value, Value)> =
            resumed["steps"].as_array().unwrap().iter().map(|s| (s["step"].clone(), s["output"].clone())).collect();
        assert_eq!(got, steps, "{run_id}");
    }
    let running = workflows.iter().find(|w| w["status"] == "running").unwrap()["run_id"].as_str().unwrap();
    let claim = p.json(&["workflow", "claim", "--agent", "worker-9", "--run", running], 0);
    let claimed = (claim["status"].as_str(), claim["last_step"].as_u64(), claim["attempt"].as_u64());
    assert_eq!(claimed, (Some("claimed"), Some(2), Some(2)), "{claim}");
}

/// The memory server's file: merged once into the graph `--compat memory` serves, and written
/// back out in the same format.
#[test]
fn a_memory_servers_file_is_imported_once_and_exported_in_its_format() {
    let p = Place::new();
    let file = p.dir.path().join("memory.jsonl");
    let lines = [
        r#"{"type":"entity","name":"Ada","entityType":"person","observations":["wrote notes","born 1815"]}"#,
        r#"{"type":"entity","name":"Engine","entityType":"machine","observations":[]}"#,
        r#"{"type":"relation","from":"Ada","to":"Engine","relationType":"programmed"}"#,
    ];
    std::fs::write(&file, lines.join("\n")).unwrap();
    let path = file.to_str().unwrap();

    let dry = p.run(&["import", "--from", "memory", path, "--dry-run"]);
    assert!(dry.stdout.contains("would merge 2 entities and 1 relations"), "{}", dry.stdout);
    let summary = p.json(&["import", "--from", "memory", path], 0);
    assert_eq!(summary["imported"], true, "{summary}");
    assert_eq!((summary["entities_created"].as_u64(), summary["relations_created"].as_u64()), (Some(2), Some(1)));
    let again = p.json(&["import", "--from", "memory", path], 0);
    assert_eq!(again["imported"], false, "a file is merged once: {again}");

    let out = p.dir.path().join("exported.jsonl");
    let exported = p.run(&["export", "--format", "memory", "-o", out.to_str().unwrap()]);
    assert_eq!(exported.code, 0, "{}", exported.stderr);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), lines.join("\n"), "the same lines, in the same order");

    // A line that is not the format is refused before anything is written, naming the line.
    let other = Place::new();
    let bad = other.dir.path().join("bad.jsonl");
    std::fs::write(&bad, format!("{}\n{{\"type\":\"relation\",\"from\":\"A\"}}\n", lines[0])).unwrap();
    let refused = other.run(&["import", "--from", "memory", bad.to_str().unwrap()]);
    assert_ne!(refused.code, 0);
    assert!(refused.stderr.contains("at line 2"), "{}", refused.stderr);
    assert!(!other.db.exists(), "bad input starts no owner and creates no database");
}
