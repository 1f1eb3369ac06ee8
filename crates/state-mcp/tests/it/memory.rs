//! `--compat memory`, the official memory server's tools, as its users meet them: the lost
//! update that server has across processes (measured on it with the same workload), the
//! one-time import of its file, and a tool list that costs no more than its own.

use std::process::Command;

use serde_json::{Value, json};
use state_e2e::sdk::{self, run};
use state_e2e::{McpClient, ProtocolEra, result_of};

use crate::{Place, binary};

fn race(sdk: &std::path::Path, env: &[(&str, &str)], command: &[&str]) -> (u64, u64) {
    let mut python = Command::new(sdk.join("venv/bin/python"));
    python.arg(sdk::repository().join("tests/sdk/memory_race.py")).args(["4", "100", "--"]).args(command);
    for (k, v) in env {
        python.env(k, v);
    }
    let out = run(&mut python);
    let last = out.lines().last().unwrap_or("").to_owned();
    let number = |word: &str| -> u64 {
        let mut words = last.split_whitespace();
        words.by_ref().find(|w| *w == word);
        words.next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("no `{word}` in {last:?}"))
    };
    (number("acknowledged"), number("lost"))
}

/// Four processes each add 100 observations to one entity at once (the upstream report): the
/// original keeps about half to two thirds of what it acknowledged; ours keeps all 400.
#[test]
fn four_processes_adding_observations_at_once_lose_nothing() {
    let Some(sdk) = sdk::dir() else { return };
    let place = Place::new();
    let runtime = place.runtime.to_string_lossy().into_owned();
    let db = place.db_arg();
    let ours = [binary().to_str().unwrap(), "--db", &db, "--compat", "memory", "--log", "warn"];
    let (acknowledged, lost) = race(&sdk, &[("STATE_RUNTIME_DIR", &runtime)], &ours);
    assert_eq!((acknowledged, lost), (400, 0), "state-mcp --compat memory lost acknowledged observations");

    // The same workload on the original, for the record (its losses vary run to run).
    let original = sdk.join("node/node_modules/@modelcontextprotocol/server-memory/dist/index.js");
    let scratch = tempfile::tempdir().unwrap();
    let file = scratch.path().join("memory.jsonl");
    let (acknowledged, lost) =
        race(&sdk, &[("MEMORY_FILE_PATH", file.to_str().unwrap())], &["node", original.to_str().unwrap()]);
    assert_eq!(acknowledged, 400, "the original answered every call");
    eprintln!("the original memory server, same workload: {lost} of {acknowledged} acknowledged observations lost");
}

fn graph(client: &mut McpClient) -> Value {
    client.call("read_graph", json!({})).unwrap().json()
}

/// MEMORY_FILE_PATH is imported at the first start and never again: an entity deleted since
/// stays deleted, and the file is left as it was.
#[test]
fn the_memory_file_is_imported_once_and_never_written() {
    let place = Place::new();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memory.jsonl");
    let lines = [
        r#"{"type":"entity","name":"Ada","entityType":"person","observations":["wrote notes"]}"#,
        r#"{"type":"entity","name":"Engine","entityType":"machine","observations":[]}"#,
        r#"{"type":"relation","from":"Ada","to":"Engine","relationType":"programmed"}"#,
    ];
    std::fs::write(&file, lines.join("\n")).unwrap();
    let env = |place: &Place| {
        let runtime = place.runtime.to_string_lossy().into_owned();
        vec![("STATE_RUNTIME_DIR".to_owned(), runtime), ("MEMORY_FILE_PATH".to_owned(), file.display().to_string())]
    };
    let start = |place: &Place| {
        let env = env(place);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let db = place.db_arg();
        let mut client =
            McpClient::spawn_with_env(binary(), &["--db", &db, "--compat", "memory", "--owner-idle", "1s"], &env)
                .unwrap();
        client.handshake(ProtocolEra::Legacy).unwrap();
        client
    };
    let mut first = start(&place);
    let imported = graph(&mut first);
    assert_eq!(imported["entities"].as_array().unwrap().len(), 2, "{imported}");
    assert_eq!(imported["relations"][0]["relationType"], "programmed", "{imported}");
    assert!(first.stderr().contains("imported the memory file"), "{}", first.stderr());
    first.call("delete_entities", json!({"entityNames": ["Engine"]})).unwrap();
    first.shutdown().unwrap();

    let mut second = start(&place);
    let after = graph(&mut second);
    assert_eq!(after["entities"].as_array().unwrap().len(), 1, "the file was imported again: {after}");
    assert!(second.stderr().contains("was imported before"), "{}", second.stderr());
    second.shutdown().unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), lines.join("\n"), "the file is never written");

    // A file that is not the format stops the start, naming the line.
    std::fs::write(dir.path().join("bad.jsonl"), "{\"type\":\"entity\"}\n").unwrap();
    let other = Place::new();
    let db = other.db_arg();
    let bad = dir.path().join("bad.jsonl").display().to_string();
    let runtime = other.runtime.to_string_lossy().into_owned();
    let out = Command::new(binary())
        .args(["--db", &db, "--compat", "memory"])
        .env("MEMORY_FILE_PATH", &bad)
        .env("STATE_RUNTIME_DIR", &runtime)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("at line 1") && stderr.contains("MEMORY_FILE_PATH"), "{stderr}");
}

/// The nine tools, by name, in a list no longer than the original's (10,750 bytes measured
/// from its tools/list), each annotated as that server annotates it.
#[test]
fn its_tool_list_is_the_originals_nine_and_costs_no_more() {
    let place = Place::new();
    let mut client = place.start(&["--compat", "memory"], ProtocolEra::Legacy);
    let listed = result_of(client.request("tools/list", json!({})).unwrap()).unwrap();
    let tools = listed["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "create_entities",
            "create_relations",
            "add_observations",
            "delete_entities",
            "delete_observations",
            "delete_relations",
            "read_graph",
            "search_nodes",
            "open_nodes"
        ]
    );
    let bytes = serde_json::to_string(&listed).unwrap().len();
    assert!(bytes <= 10_750, "the tool list is {bytes} bytes; the original's is 10,750");
    for tool in tools {
        let read_only = tool["annotations"]["readOnlyHint"] == true;
        let name = tool["name"].as_str().unwrap();
        assert_eq!(read_only, ["read_graph", "search_nodes", "open_nodes"].contains(&name), "{tool}");
        assert!(tool["outputSchema"].is_object(), "{name} declares its result");
    }
}
