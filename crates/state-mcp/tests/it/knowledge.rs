//! Checkpoints and knowledge through the real binary: Sage's and Goldfish's tools exactly as
//! their documents show them, bad input named by field, prompts and checkpoint resources, and
//! two agents saving into one session through one owner.

use std::path::Path;

use serde_json::{Value, json};
use state_e2e::{McpClient, ProtocolEra, ToolResult, result_of};

use crate::Place;

fn call(client: &mut McpClient, tool: &str, args: Value) -> ToolResult {
    client.call(tool, args.clone()).unwrap_or_else(|e| panic!("{tool} {args}: {e}"))
}

fn ok(client: &mut McpClient, tool: &str, args: Value) -> Value {
    let result = call(client, tool, args.clone());
    assert!(!result.is_error, "{tool} {args}: {}", result.text);
    result.json()
}

/// Text of a tool that answers in text only.
fn text(client: &mut McpClient, tool: &str, args: Value) -> String {
    let result = call(client, tool, args.clone());
    assert!(result.structured.is_none(), "{tool} answers in text only");
    result.text
}

/// A directory that looks like a git checkout of `branch`, as an agent's workspace.
fn repo(root: &Path, branch: &str) -> std::path::PathBuf {
    let dir = root.join("my-project");
    std::fs::create_dir_all(dir.join(".git")).unwrap();
    std::fs::write(dir.join(".git/HEAD"), format!("ref: refs/heads/{branch}\n")).unwrap();
    dir
}

#[test]
fn sage_tools_keep_sages_shapes() {
    let place = Place::new();
    // As a Sage user switches: one flag, which brings Sage's tools with it.
    let mut client = place.spawn(&["--compat", "sage"]);
    client.handshake(ProtocolEra::Legacy).unwrap();
    let tools = result_of(client.request("tools/list", json!({})).unwrap()).unwrap();
    let names: Vec<&str> = tools["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    for sage in ["save_checkpoint", "list_checkpoints", "load_checkpoint", "save_knowledge", "recall_knowledge"] {
        assert!(names.contains(&sage), "{sage} in {names:?}");
    }

    // 002's input, field for field.
    let saved = ok(
        &mut client,
        "save_checkpoint",
        json!({
            "core_question": "Should the knowledge index live in the store?",
            "thesis": "Postings in the store keep note and index in one transaction",
            "confidence": 0.8,
            "trigger": "synthesis",
            "open_questions": ["How fast at 100k notes?"],
            "sources": [{"id": "notes", "type": "document", "take": "hand-rolled BM25", "relation": "supports"}],
            "tensions": [{"between": ["tantivy", "redb"], "nature": "speed vs atomicity", "resolution": "resolved"}],
            "unique_contributions": [{"type": "discovery", "content": "the tokenizer loads in 130 ms"}],
            "action": {"goal": "measure recall latency", "type": "implementation"}
        }),
    );
    let id = saved["checkpoint_id"].as_str().unwrap().to_owned();
    assert!(id.ends_with("_postings-in-the-store-keep-note"), "{id}");
    assert_eq!(id.len(), "2026-01-10T23-45-00_".len() + "postings-in-the-store-keep-note".len());
    assert_eq!(saved["path"], format!("state://checkpoint/{id}"));
    assert_eq!(saved.as_object().unwrap().len(), 2, "exactly checkpoint_id and path: {saved}");

    let listed = ok(&mut client, "list_checkpoints", json!({"limit": 10}));
    let first = &listed["checkpoints"][0];
    assert_eq!(
        (first["id"].as_str(), first["confidence"].as_f64(), first["trigger"].as_str()),
        (Some(id.as_str()), Some(0.8), Some("synthesis"))
    );
    assert_eq!(first["saved"].as_str().unwrap().len(), "2026-01-10T23:45:00".len());
    assert!(
        ok(&mut client, "list_checkpoints", json!({"skill": "cooking"}))["checkpoints"].as_array().unwrap().is_empty()
    );

    let loaded = ok(&mut client, "load_checkpoint", json!({"checkpoint_id": "keep-note"}));
    assert_eq!(loaded["checkpoint"]["id"], id.as_str(), "a partial id loads");
    assert_eq!(loaded["checkpoint"]["tensions"][0]["resolution"], "resolved");
    let context = loaded["formatted_context"].as_str().unwrap();
    assert!(context.starts_with("# Research Context (Restored)"), "{context}");
    assert!(context.contains("How fast at 100k notes?"));
    let missing = call(&mut client, "load_checkpoint", json!({"checkpoint_id": "no-such-thing"}));
    assert!(missing.is_error && missing.text.contains("no-such-thing"), "{}", missing.text);

    // The path reads as a resource.
    let read = result_of(client.request("resources/read", json!({"uri": saved["path"]})).unwrap()).unwrap();
    let body: Value = serde_json::from_str(read["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(body["checkpoint"]["core_question"], "Should the knowledge index live in the store?");

    ok(
        &mut client,
        "save_knowledge",
        json!({"id": "tokio-blocking", "content": "Blocking calls inside async tasks stall the runtime; use `spawn_blocking`.",
               "keywords": ["tokio", "async"], "skill": "rust", "source": "a stalled server"}),
    );
    ok(
        &mut client,
        "save_knowledge",
        json!({"id": "sourdough", "content": "Feed the starter twice a day.", "keywords": ["bread"]}),
    );
    let recalled = ok(
        &mut client,
        "recall_knowledge",
        json!({"query": "why does blocking stall my tokio runtime", "skill": "rust"}),
    );
    assert_eq!(recalled["items"].as_array().unwrap().len(), 1, "{recalled}");
    let item = &recalled["items"][0];
    assert_eq!((item["id"].as_str(), item["source"].as_str()), (Some("tokio-blocking"), Some("a stalled server")));
    assert!(item["tokens"].as_u64().unwrap() > 10);
    assert_eq!(recalled["total_tokens"], item["tokens"]);
    assert!(recalled["formatted_context"].as_str().unwrap().starts_with("📚 Recalled Knowledge"));
    let nothing = ok(&mut client, "recall_knowledge", json!({"query": "quantum chromodynamics"}));
    assert_eq!(
        (nothing["items"].clone(), nothing["formatted_context"].clone()),
        (json!([]), json!("No relevant knowledge found."))
    );
}

#[test]
fn goldfish_infers_every_action_and_speaks_each_output_format() {
    let place = Place::new();
    let root = tempfile::tempdir().unwrap();
    let workspace = repo(root.path(), "feature/goldfish");
    let mut client = place.spawn_in(&["--compat", "goldfish"], Some(&workspace));
    client.handshake(ProtocolEra::Legacy).unwrap();
    let tools = result_of(client.request("tools/list", json!({})).unwrap()).unwrap();
    let checkpoint = tools["tools"].as_array().unwrap().iter().find(|t| t["name"] == "checkpoint").unwrap().clone();
    let properties = checkpoint["inputSchema"]["properties"].as_object().unwrap();
    let mut fields: Vec<&str> = properties.keys().map(String::as_str).collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "action",
            "activeFiles",
            "checkpointId",
            "depth",
            "description",
            "format",
            "gitBranch",
            "global",
            "highlights",
            "limit",
            "mode",
            "outputFormat",
            "query",
            "range",
            "sessionId",
            "since",
            "workContext",
            "workspace"
        ],
        "003's whole input schema"
    );
    assert_eq!(properties["action"]["enum"], json!(["save", "restore", "search", "timeline"]));

    // description => save; workspace and branch come from where the agent runs.
    let saved = text(
        &mut client,
        "checkpoint",
        json!({"description": "Added the fencing check to lease renewals", "highlights": ["renew checks the token"],
               "activeFiles": ["src/lease.rs"], "workContext": "next: expire path", "sessionId": "fish-1"}),
    );
    assert!(saved.starts_with("💾 Checkpoint saved: Added the fencing check"), "{saved}");
    assert!(saved.contains("🌿 Branch: feature/goldfish"), "branch read from .git/HEAD: {saved}");
    assert!(saved.contains(&format!("📁 Workspace: {}", workspace.display())), "{saved}");
    let id = saved.lines().find_map(|l| l.strip_prefix("🆔 ID: ")).unwrap().to_owned();
    text(
        &mut client,
        "checkpoint",
        json!({"description": "Expired leases now fenced", "highlights": ["expiry fences"], "sessionId": "fish-1"}),
    );

    // Nothing at all => restore the latest, with the session's highlights.
    let restored = text(&mut client, "checkpoint", json!({}));
    assert!(restored.starts_with("🧠 # Checkpoint restored: Expired leases now fenced"), "{restored}");
    assert!(restored.contains("renew checks the token") && restored.contains("expiry fences"), "{restored}");
    // checkpointId, depth or mode => restore.
    let specific = text(&mut client, "checkpoint", json!({"checkpointId": id}));
    assert!(specific.contains("Added the fencing check") && specific.contains("src/lease.rs"), "{specific}");
    let minimal = text(&mut client, "checkpoint", json!({"depth": "minimal"}));
    assert!(minimal.contains("Expired leases") && !minimal.contains("renew checks the token"), "{minimal}");
    assert!(text(&mut client, "checkpoint", json!({"mode": "latest"})).contains("Expired leases now fenced"));
    let by_search =
        text(&mut client, "checkpoint", json!({"action": "restore", "mode": "search", "query": "fencing renewals"}));
    assert!(by_search.contains("Added the fencing check"), "{by_search}");
    // query => search; range => timeline.
    let found = text(&mut client, "checkpoint", json!({"query": "lease renewals fencing"}));
    assert!(found.starts_with("🔍 2 checkpoint(s) match"), "{found}");
    assert!(found.lines().nth(1).unwrap().contains(&id), "the best match first: {found}");
    let timeline = text(&mut client, "checkpoint", json!({"range": "24h", "format": "detailed"}));
    assert!(timeline.starts_with("📅 # Timeline: 2 checkpoints"), "{timeline}");
    assert!(timeline.contains("### my-project") && timeline.contains("  - renew checks the token"), "{timeline}");

    // Output formats.
    let plain = text(&mut client, "checkpoint", json!({"range": "24h", "outputFormat": "plain"}));
    assert!(plain.starts_with("# Timeline") && !plain.contains('📅'), "{plain}");
    let json_out = text(&mut client, "checkpoint", json!({"description": "json please", "outputFormat": "json"}));
    let parsed: Value = serde_json::from_str(&json_out).unwrap();
    assert!(parsed["checkpoint_id"].as_str().unwrap().ends_with("_json-please"));
    let dual = text(&mut client, "checkpoint", json!({"query": "json", "outputFormat": "dual"}));
    let (human, machine) = dual.split_once("\n\n").unwrap();
    assert!(human.starts_with("🔍 1 checkpoint(s)"), "{dual}");
    assert_eq!(serde_json::from_str::<Value>(machine).unwrap()["checkpoints"].as_array().unwrap().len(), 1);

    // Goldfish answers failures in text, as it did.
    let unknown = text(&mut client, "checkpoint", json!({"action": "frobnicate"}));
    assert_eq!(unknown, "❓ Unknown action: frobnicate. Supported actions: save, restore, search, timeline");
    let no_id = text(&mut client, "checkpoint", json!({"action": "restore", "mode": "specific"}));
    assert_eq!(no_id, "❌ Error in checkpoint tool: mode \"specific\" needs checkpointId");
    let bad_depth = text(&mut client, "checkpoint", json!({"depth": "deep"}));
    assert!(bad_depth.starts_with("❌ Error in checkpoint tool:") && bad_depth.contains("depth"), "{bad_depth}");
}

#[test]
fn bad_input_gets_errors_naming_the_field() {
    let place = Place::new();
    let mut client = place.start(&["--tools", "checkpoint,knowledge"], ProtocolEra::Legacy);
    let error = |client: &mut McpClient, tool: &str, args: Value| {
        let result = call(client, tool, args.clone());
        assert!(result.is_error, "{tool} {args} should fail: {}", result.text);
        result.text
    };
    let confidence = error(&mut client, "checkpoint_save", json!({"description": "d", "confidence": 1.5}));
    assert!(confidence.contains("`confidence` must be between 0 and 1") && confidence.contains("1.5"), "{confidence}");
    let trigger = error(&mut client, "checkpoint_save", json!({"description": "d", "trigger": "eureka"}));
    assert!(
        trigger.contains("`trigger`") && trigger.contains("eureka") && trigger.contains("branch_point"),
        "{trigger}"
    );
    let typo = error(&mut client, "checkpoint_save", json!({"description": "d", "highlight": ["x"]}));
    assert!(typo.contains("unknown field `highlight`") && typo.contains("`highlights`"), "{typo}");
    let untitled = error(&mut client, "checkpoint_save", json!({"highlights": ["x"]}));
    assert!(untitled.contains("`description` is required"), "{untitled}");
    let huge = "x".repeat(10 * 1024 * 1024);
    let note = error(&mut client, "knowledge_save", json!({"id": "big", "content": huge}));
    assert!(note.contains("`content`") && note.contains("10485760 bytes") && note.contains("split it"), "{note}");
    let empty = error(&mut client, "knowledge_recall", json!({"query": "  "}));
    assert!(empty.contains("`query` is empty"), "{empty}");
    let search = error(&mut client, "checkpoint_search", json!({"query": ""}));
    assert!(search.contains("`query` is empty"), "{search}");
    let since = error(&mut client, "checkpoint_search", json!({"query": "x", "since": "last tuesday"}));
    assert!(since.contains("`since`") && since.contains("24h"), "{since}");
    let budget = error(&mut client, "knowledge_recall", json!({"query": "x", "max_tokens": 1_000_000}));
    assert!(budget.contains("`max_tokens` must be 1 to 32000"), "{budget}");
    // Nothing was written by any of them.
    let listed = ok(&mut client, "knowledge_list", json!({}));
    assert_eq!(listed["notes"], json!([]));
}

#[test]
fn prompts_teach_when_to_checkpoint_and_recall_with_this_servers_tool_names() {
    let place = Place::new();
    let mut native = place.start(&["--tools", "all"], ProtocolEra::Legacy);
    let listed = result_of(native.request("prompts/list", json!({})).unwrap()).unwrap();
    let names: Vec<&str> = listed["prompts"].as_array().unwrap().iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(names, ["when_to_checkpoint", "when_to_recall"]);
    let got = result_of(native.request("prompts/get", json!({"name": "when_to_checkpoint"})).unwrap()).unwrap();
    let text = got["messages"][0]["content"]["text"].as_str().unwrap();
    for trigger in
        ["synthesis", "branch point", "constraint", "transition", "`checkpoint_save`", "`checkpoint_restore`"]
    {
        assert!(text.contains(trigger), "{trigger}: {text}");
    }
    let unknown = native.request("prompts/get", json!({"name": "nope"})).unwrap();
    assert!(unknown["error"]["message"].as_str().unwrap().contains("when_to_recall"), "{unknown}");

    let mut goldfish = place.start(&["--compat", "goldfish"], ProtocolEra::Legacy);
    let listed = result_of(goldfish.request("prompts/list", json!({})).unwrap()).unwrap();
    assert_eq!(listed["prompts"].as_array().unwrap().len(), 1, "no recall prompt without knowledge tools");
    let got = result_of(goldfish.request("prompts/get", json!({"name": "when_to_checkpoint"})).unwrap()).unwrap();
    assert!(got["messages"][0]["content"]["text"].as_str().unwrap().contains("`checkpoint`"));
}

#[test]
fn two_agents_saving_into_one_session_at_once_lose_no_highlight() {
    const SAVES: usize = 25;
    let place = Place::new();
    // Both join the same owner; their saves interleave in its writer.
    let agents: Vec<std::thread::JoinHandle<()>> = ["a", "b"]
        .into_iter()
        .map(|agent| {
            let mut client = place.start(&["--tools", "checkpoint"], ProtocolEra::Legacy);
            std::thread::spawn(move || {
                for n in 0..SAVES {
                    let args = json!({"description": format!("{agent} step {n}"), "session_id": "pair",
                                      "workspace": "/shared", "highlights": [format!("{agent}-{n}")]});
                    assert!(!client.call("checkpoint_save", args).unwrap().is_error);
                }
            })
        })
        .collect();
    for agent in agents {
        agent.join().unwrap();
    }
    let mut reader = place.start(&["--tools", "checkpoint"], ProtocolEra::Legacy);
    let restored = ok(&mut reader, "checkpoint_restore", json!({"session_id": "pair"}));
    let mut highlights: Vec<String> =
        restored["session_highlights"].as_array().unwrap().iter().map(|h| h.as_str().unwrap().to_owned()).collect();
    highlights.sort();
    let mut expected: Vec<String> = (0..SAVES).flat_map(|n| [format!("a-{n}"), format!("b-{n}")]).collect();
    expected.sort();
    assert_eq!(highlights, expected);
    let timeline = ok(&mut reader, "checkpoint_timeline", json!({"range": "1h", "workspace": "/shared"}));
    assert_eq!(timeline["total"], 2 * SAVES);
}
