//! Checkpoints through the engine: every field round-trips, sessions accumulate highlights,
//! ids stay unique and readable, and time ranges hold at their boundaries (manual clock).

use serde_json::json;
use state_core::ops::checkpoint::*;
use state_store::conformance::T0;

use crate::support::Store;

fn save(description: &str, workspace: &str) -> CheckpointSaveRequest {
    CheckpointFields {
        description: Some(description.into()),
        workspace: Some(workspace.into()),
        ..CheckpointFields::default()
    }
}

fn restore_id(id: &str, depth: Depth) -> CheckpointRestoreRequest {
    CheckpointRestoreRequest { checkpoint_id: Some(id.into()), depth: Some(depth), ..Default::default() }
}

#[tokio::test]
async fn restore_returns_every_saved_field() {
    let store = Store::new(&crate::support::redb_memory);
    let fields: CheckpointFields = serde_json::from_value(json!({
        "description": "Chose BM25 postings in redb",
        "thesis": "One transaction for note and index beats a second engine",
        "workspace": "/home/me/state",
        "session_id": "research-1",
        "highlights": ["postings as entries", "counts before the queue"],
        "active_files": ["crates/state-core/src/text_index.rs"],
        "git_branch": "knowledge",
        "work_context": "Next: the relevance corpus",
        "core_question": "Where should the index live?",
        "confidence": 0.8,
        "trigger": "branch_point",
        "open_questions": ["Is 100k notes fast enough?"],
        "sources": [{"id": "tantivy", "type": "code", "take": "a second commit protocol", "relation": "contradicts"}],
        "tensions": [{"between": ["tantivy", "redb"], "nature": "speed vs atomicity", "resolution": "resolved"}],
        "unique_contributions": [{"type": "experiment", "content": "measured 130 ms tokenizer load"}],
        "action": {"goal": "write the bench", "type": "implementation"},
        "scope": "research",
        "global": true
    }))
    .unwrap();
    let request = CheckpointFields { agent_id: Some("agent-a".into()), ..fields.clone() };
    let saved = store.engine.checkpoint_save(request).await.unwrap();
    assert_eq!(saved.checkpoint_id, "2026-11-21T00-00-00_chose-bm25-postings-in-redb");
    assert_eq!(saved.uri, "state://checkpoint/2026-11-21T00-00-00_chose-bm25-postings-in-redb");
    assert_eq!((saved.session_id.as_str(), saved.session_highlights), ("research-1", 2));

    let full = store.engine.checkpoint_restore(restore_id(&saved.checkpoint_id, Depth::Full)).await.unwrap();
    assert_eq!(full.status, RestoreStatus::Ok);
    let checkpoint = full.checkpoint.unwrap();
    assert_eq!(checkpoint.fields, fields, "every field comes back as saved");
    assert_eq!(
        (checkpoint.saved_at.as_str(), checkpoint.agent_id.as_deref()),
        ("2026-11-21T00:00:00.000Z", Some("agent-a"))
    );
    for expected in ["Chose BM25", "Next: the relevance corpus", "postings as entries", "text_index.rs", "tantivy"] {
        assert!(full.context.contains(expected), "context lacks {expected}: {}", full.context);
    }

    let minimal = store.engine.checkpoint_restore(restore_id(&saved.checkpoint_id, Depth::Minimal)).await.unwrap();
    let minimal = minimal.checkpoint.unwrap().fields;
    assert!(minimal.highlights.is_empty() && minimal.sources.is_empty() && minimal.confidence.is_none());
    assert_eq!(minimal.work_context.as_deref(), Some("Next: the relevance corpus"));
}

#[tokio::test]
async fn highlights_accumulate_in_a_session_and_a_restore_returns_them() {
    let store = Store::new(&crate::support::redb_memory);
    for (n, highlights) in [["a", "b"], ["b", "c"]].into_iter().enumerate() {
        let mut request = save(&format!("step {n}"), "/w");
        request.session_id = Some("s1".into());
        request.highlights = highlights.iter().map(|h| (*h).to_owned()).collect();
        store.engine.checkpoint_save(request).await.unwrap();
    }
    let restored = store
        .engine
        .checkpoint_restore(CheckpointRestoreRequest { session_id: Some("s1".into()), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(restored.checkpoint.unwrap().fields.description.as_deref(), Some("step 1"));
    assert_eq!(restored.session_highlights, ["a", "b", "c"], "accumulated, each once, oldest first");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_are_readable_time_ordered_and_unique_under_concurrent_saves() {
    let store = std::sync::Arc::new(Store::new(&crate::support::redb_memory));
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move { store.engine.checkpoint_save(save("Same title!", "/w")).await.unwrap() }));
    }
    let mut ids = Vec::new();
    for task in tasks {
        ids.push(task.await.unwrap().checkpoint_id);
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 20, "no two saves share an id");
    assert!(ids.contains(&"2026-11-21T00-00-00_same-title".to_owned()));
    assert!(ids.contains(&"2026-11-21T00-00-00_same-title-20".to_owned()));

    let ambiguous = store.engine.checkpoint_restore(restore_id("2026-11-21T00-00-00_same", Depth::Minimal)).await;
    let ambiguous = ambiguous.unwrap();
    assert_eq!(ambiguous.status, RestoreStatus::Ambiguous);
    assert_eq!(ambiguous.candidates.len(), 10, "a bounded list of candidates");
    store.clock.advance_millis(1000);
    let later = store.engine.checkpoint_save(save("Same title!", "/w")).await.unwrap();
    assert_eq!(later.checkpoint_id, "2026-11-21T00-00-01_same-title");
    let unique = store.engine.checkpoint_restore(restore_id("2026-11-21T00-00-01", Depth::Minimal)).await.unwrap();
    assert_eq!(unique.checkpoint.unwrap().id, later.checkpoint_id, "a unique prefix selects");
    let part = store.engine.checkpoint_restore(restore_id("00-01_same", Depth::Minimal)).await.unwrap();
    assert_eq!(part.status, RestoreStatus::Ok, "a unique part of an id selects");
}

#[tokio::test]
async fn latest_is_per_workspace_and_global_checkpoints_show_everywhere() {
    let store = Store::new(&crate::support::redb_memory);
    store.engine.checkpoint_save(save("in alpha", "/src/alpha")).await.unwrap();
    store.clock.advance_millis(1000);
    store.engine.checkpoint_save(save("in beta", "/src/beta")).await.unwrap();
    let latest = |workspace: &str| {
        let request = CheckpointRestoreRequest { workspace: Some(workspace.into()), ..Default::default() };
        let engine = store.engine.clone();
        async move { engine.checkpoint_restore(request).await.unwrap().checkpoint.map(|c| c.fields.description) }
    };
    assert_eq!(latest("/src/alpha").await, Some(Some("in alpha".into())));
    assert_eq!(latest("alpha").await, Some(Some("in alpha".into())), "a workspace's name finds it");
    assert_eq!(latest("/src/gamma").await, None);
    store.clock.advance_millis(1000);
    let mut global = save("a global note", "/src/beta");
    global.global = true;
    store.engine.checkpoint_save(global).await.unwrap();
    assert_eq!(latest("/src/alpha").await, Some(Some("a global note".into())));
    assert_eq!(latest("/src/gamma").await, Some(Some("a global note".into())));
}

#[tokio::test]
async fn timeline_and_since_are_exact_at_their_boundaries() {
    let store = Store::new(&crate::support::redb_memory);
    let first = store.engine.checkpoint_save(save("indexed the postings table", "/src/alpha")).await.unwrap();
    store.clock.advance_millis(3_600_000);
    let timeline = |range: &str| {
        let request = CheckpointTimelineRequest { range: Some(range.into()), ..Default::default() };
        let engine = store.engine.clone();
        async move { engine.checkpoint_timeline(request).await.unwrap() }
    };
    let exact = timeline("1h").await;
    assert_eq!(exact.total, 1, "a checkpoint exactly `range` old is inside it");
    assert_eq!(exact.since, "2026-11-21T00:00:00.000Z");
    store.clock.advance_millis(1);
    assert_eq!(timeline("1h").await.total, 0, "one millisecond older is outside");
    assert_eq!(timeline("24h").await.total, 1);

    let search = |since: &str| {
        let request =
            CheckpointSearchRequest { query: "postings index".into(), since: Some(since.into()), ..Default::default() };
        let engine = store.engine.clone();
        async move { engine.checkpoint_search(request).await.unwrap().checkpoints }
    };
    assert!(search("1h").await.is_empty());
    assert_eq!(search("2026-11-21T00:00:00Z").await[0].id, first.checkpoint_id, "since is inclusive");
    assert!(search("2026-11-21T00:00:00.001Z").await.is_empty());

    // Two days, two workspaces: grouped newest day first, by workspace within a day.
    store.clock.set(state_core::UnixMillis(T0.0 + 86_400_000 + 5_000));
    store.engine.checkpoint_save(save("day two alpha", "/src/alpha")).await.unwrap();
    store.engine.checkpoint_save(save("day two beta", "/src/beta")).await.unwrap();
    let week = timeline("7d").await;
    assert_eq!(week.total, 3);
    let days: Vec<(&str, usize)> = week.days.iter().map(|d| (d.date.as_str(), d.workspaces.len())).collect();
    assert_eq!(days, [("2026-11-22", 2), ("2026-11-21", 1)]);
    assert!(week.formatted.contains("## 2026-11-22") && week.formatted.contains("### beta"), "{}", week.formatted);
    let bad = store
        .engine
        .checkpoint_timeline(CheckpointTimelineRequest { range: Some("forever".into()), ..Default::default() })
        .await
        .unwrap_err();
    assert!(bad.to_string().contains("range"), "{bad}");
}

#[tokio::test]
async fn checkpoint_and_note_changes_are_watchable_by_kind_without_their_index() {
    use state_core::ops::history::{HistoryKind, HistoryOp};
    use state_core::ops::knowledge::{KnowledgeDeleteRequest, KnowledgeSaveRequest};
    use state_core::ops::watch::WatchRequest;
    let store = Store::new(&crate::support::redb_memory);
    let watch = |kind| WatchRequest { kind: Some(kind), after_revision: Some(0), ..WatchRequest::default() };
    let mut checkpoints = store.engine.watch(watch(HistoryKind::Checkpoint)).await.unwrap();
    let mut notes = store.engine.watch(watch(HistoryKind::Knowledge)).await.unwrap();
    let saved = store.engine.checkpoint_save(save("watched", "/w")).await.unwrap();
    let note = KnowledgeSaveRequest { id: "n".into(), content: "some words".into(), ..Default::default() };
    store.engine.knowledge_save(note).await.unwrap();
    let gone = KnowledgeDeleteRequest { id: "n".into(), ..Default::default() };
    store.engine.knowledge_delete(gone).await.unwrap();

    let batch = checkpoints.next().await.unwrap().unwrap();
    let seen: Vec<(&str, HistoryOp)> = batch.events.iter().map(|e| (e.key.as_str(), e.op)).collect();
    assert_eq!(seen, [(saved.checkpoint_id.as_str(), HistoryOp::Save)], "one event, no index or session records");
    let mut ops = Vec::new();
    while ops.len() < 2 {
        let batch = notes.next().await.unwrap().unwrap();
        ops.extend(batch.events.iter().map(|e| (e.key.clone(), e.op)));
    }
    assert_eq!(ops, [("n".to_owned(), HistoryOp::Save), ("n".to_owned(), HistoryOp::Delete)]);
}
