//! Knowledge: how fast notes are saved (each with its index entries, in one transaction),
//! how large the index makes the database, and how long recall takes as the corpus grows.
//!
//! Notes are synthetic: 40-120 words drawn with a Zipf distribution (the shape of natural
//! text) from the vocabulary of the relevance corpus in
//! `crates/state-store/tests/data/knowledge_corpus.json`. Queries are 3-6 words drawn from
//! one note, the way an agent asks about something it once saved.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use state_core::ops::knowledge::{KnowledgeRecallRequest, KnowledgeSaveRequest};

use crate::{Rng, ms, open_engine, percentile, tempfile_dir};

const CORPUS: &str = include_str!("../../../../crates/state-store/tests/data/knowledge_corpus.json");
const WRITERS: usize = 64;
const QUERIES: usize = 300;

/// Words of the corpus, most frequent first, with Zipf cumulative weights.
struct Vocabulary {
    words: Vec<String>,
    cumulative: Vec<f64>,
}

impl Vocabulary {
    fn new() -> Vocabulary {
        let mut counts = std::collections::HashMap::<String, usize>::new();
        for word in CORPUS.split(|c: char| !c.is_ascii_alphabetic()).filter(|w| w.len() >= 3) {
            *counts.entry(word.to_ascii_lowercase()).or_default() += 1;
        }
        let mut words: Vec<(String, usize)> = counts.into_iter().collect();
        words.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let mut total = 0.0;
        let cumulative = (1..=words.len())
            .map(|rank| {
                total += 1.0 / rank as f64;
                total
            })
            .collect();
        Vocabulary { words: words.into_iter().map(|(w, _)| w).collect(), cumulative }
    }

    fn word(&self, rng: &mut Rng) -> &str {
        let target = rng.unit() * self.cumulative.last().copied().unwrap_or(1.0);
        let at = self.cumulative.partition_point(|c| *c < target).min(self.words.len() - 1);
        &self.words[at]
    }

    fn note(&self, rng: &mut Rng) -> Vec<String> {
        let len = 40 + rng.below(81);
        (0..len).map(|_| self.word(rng).to_owned()).collect()
    }
}

pub(crate) async fn engine_knowledge(sizes: &[usize]) -> Result<()> {
    println!("## Engine: knowledge_save and knowledge_recall\n");
    println!(
        "Synthetic notes of 40-120 Zipf-distributed words from the relevance corpus's vocabulary, saved by \
         {WRITERS} concurrent writers (each note and its index entries in one transaction, group-committed). \
         Recall: {QUERIES} queries of 3-6 words taken from random notes, one at a time, default budget \
         (2,000 tokens, 10 notes). Disk: the redb file after the saves, divided by the notes.\n"
    );
    println!(
        "| notes | saves/s | p50 save | p99 save | file size | bytes/note | text bytes/note | p50 recall | p99 recall | avg items |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let vocabulary = Arc::new(Vocabulary::new());
    for &size in sizes {
        let dir = tempfile_dir::Dir::new()?;
        let engine = open_engine(&dir)?;
        let next = Arc::new(AtomicUsize::new(0));
        let text_bytes = Arc::new(AtomicUsize::new(0));
        let started = Instant::now();
        let mut tasks = Vec::new();
        for w in 0..WRITERS {
            let (engine, next, vocabulary, text_bytes) =
                (engine.clone(), next.clone(), vocabulary.clone(), text_bytes.clone());
            tasks.push(tokio::spawn(async move {
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (w as u64 + 1));
                let mut latencies = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= size {
                        return latencies;
                    }
                    let words = vocabulary.note(&mut rng);
                    let keywords = words.iter().take(3).cloned().collect();
                    let content = words.join(" ");
                    text_bytes.fetch_add(content.len(), Ordering::Relaxed);
                    let t = Instant::now();
                    let request = KnowledgeSaveRequest {
                        id: format!("note-{i:07}"),
                        content,
                        keywords,
                        ..KnowledgeSaveRequest::default()
                    };
                    engine.knowledge_save(request).await.expect("save a note");
                    latencies.push(t.elapsed());
                }
            }));
        }
        let mut saves = Vec::new();
        for task in tasks {
            saves.extend(task.await?);
        }
        let elapsed = started.elapsed();
        saves.sort();
        let file = std::fs::metadata(dir.path().join("bench.redb"))?.len();

        let mut rng = Rng(42);
        let mut recalls: Vec<Duration> = Vec::with_capacity(QUERIES);
        let mut items = 0usize;
        for _ in 0..QUERIES {
            let words = vocabulary.note(&mut rng);
            let take = 3 + rng.below(4);
            let query = words[..take].join(" ");
            let t = Instant::now();
            let recalled =
                engine.knowledge_recall(KnowledgeRecallRequest { query, ..KnowledgeRecallRequest::default() }).await?;
            recalls.push(t.elapsed());
            items += recalled.items.len();
        }
        recalls.sort();
        println!(
            "| {size} | {:.0} | {} | {} | {:.1} MB | {} | {} | {} | {} | {:.1} |",
            size as f64 / elapsed.as_secs_f64(),
            ms(percentile(&saves, 0.50)),
            ms(percentile(&saves, 0.99)),
            file as f64 / 1e6,
            file / size as u64,
            text_bytes.load(Ordering::Relaxed) / size,
            ms(percentile(&recalls, 0.50)),
            ms(percentile(&recalls, 0.99)),
            items as f64 / QUERIES as f64,
        );
        engine.close().await;
    }
    println!();
    Ok(())
}
