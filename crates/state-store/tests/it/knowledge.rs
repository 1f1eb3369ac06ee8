//! Knowledge recall through the engine on a real redb file: relevance on the fixed corpus in
//! `tests/data/knowledge_corpus.json` (231 notes written for it, 32 labelled queries).

use serde::Deserialize;
use state_core::ops::knowledge::{KnowledgeRecallRequest, KnowledgeSaveRequest};

use crate::support::Store;

#[derive(Deserialize)]
struct Corpus {
    notes: Vec<Note>,
    queries: Vec<Query>,
}

#[derive(Deserialize)]
struct Note {
    id: String,
    content: String,
    keywords: Vec<String>,
    scope: Option<String>,
    source: Option<String>,
}

#[derive(Deserialize)]
struct Query {
    query: String,
    expected: String,
    scope: Option<String>,
}

fn corpus() -> Corpus {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/knowledge_corpus.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_ranks_the_expected_note_first_on_the_fixed_corpus() {
    let corpus = corpus();
    assert!(corpus.notes.len() >= 200 && corpus.queries.len() >= 30);
    let store = Store::new(&crate::support::redb_file);
    for note in &corpus.notes {
        let saved = store
            .engine
            .knowledge_save(KnowledgeSaveRequest {
                id: note.id.clone(),
                content: note.content.clone(),
                keywords: note.keywords.clone(),
                scope: note.scope.clone(),
                source: note.source.clone(),
                ..KnowledgeSaveRequest::default()
            })
            .await
            .unwrap();
        assert_eq!(saved.version, 1, "{}", note.id);
    }
    let (mut top1, mut top3, mut misses) = (0, 0, Vec::new());
    for q in &corpus.queries {
        let request = KnowledgeRecallRequest {
            query: q.query.clone(),
            scope: q.scope.clone(),
            max_tokens: Some(32_000),
            limit: Some(3),
        };
        let recalled = store.engine.knowledge_recall(request).await.unwrap();
        let ids: Vec<&str> = recalled.items.iter().map(|i| i.id.as_str()).collect();
        if let Some(scope) = &q.scope {
            assert!(recalled.items.iter().all(|i| i.scope.is_none() || i.scope.as_ref() == Some(scope)));
        }
        match ids.iter().position(|id| *id == q.expected) {
            Some(0) => {
                top1 += 1;
                top3 += 1;
            }
            Some(_) => {
                top3 += 1;
                misses.push(format!("{:?}: {} ranked {ids:?}", q.query, q.expected));
            }
            None => misses.push(format!("{:?}: {} not in {ids:?}", q.query, q.expected)),
        }
    }
    let n = corpus.queries.len() as f64;
    let (p1, p3) = (f64::from(top1) / n, f64::from(top3) / n);
    eprintln!("top-1 {top1}/{n} = {p1:.3}, top-3 {top3}/{n} = {p3:.3}; misses: {misses:#?}");
    assert!(p1 >= 0.90, "top-1 {p1:.3} below 0.90: {misses:#?}");
    assert!(p3 >= 0.97, "top-3 {p3:.3} below 0.97: {misses:#?}");
}
