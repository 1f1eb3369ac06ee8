//! The full-text index, kept as records in the store itself: one posting per (term,
//! document) holding the term's frequency and the document's length, a statistics record per
//! corpus, and the term list each document was indexed under. A plan that saves or deletes a
//! document updates all of them beside the document, in the same transaction, so the index
//! can never disagree with what is stored, even after a crash. Recall reads the postings of
//! the query's terms only and ranks with BM25 (`state_text::bm25`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::{Value, json};
use state_text::bm25;

use crate::keyspace::{self, Corpus};
use crate::plan::{Changes, Record};
use crate::view::StateView;

/// A document as the index sees it: each term with its (weighted) frequency.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Document {
    pub terms: BTreeMap<String, u64>,
    /// Sum of the frequencies: the length BM25 normalises by.
    pub length: u64,
}

impl Document {
    /// The document made of `fields`, each counted `weight` times (a keyword field weighs
    /// more than body text, so a note is found first by what it says it is about).
    pub fn of(fields: &[(&str, u64)]) -> Document {
        let mut document = Document::default();
        for (text, weight) in fields {
            for term in state_text::terms(text) {
                *document.terms.entry(term).or_default() += weight;
                document.length += weight;
            }
        }
        document
    }

    fn encode(&self) -> Value {
        json!({ "terms": self.terms, "length": self.length })
    }

    fn decode(value: &Value) -> Document {
        let terms = value
            .get("terms")
            .and_then(Value::as_object)
            .map(|terms| terms.iter().map(|(t, f)| (t.clone(), f.as_u64().unwrap_or(1))).collect())
            .unwrap_or_default();
        Document { terms, length: value.get("length").and_then(Value::as_u64).unwrap_or(0) }
    }
}

fn stats<V: StateView + ?Sized>(view: &V, corpus: Corpus) -> Result<bm25::Corpus, V::Error> {
    let stored = view.get(&keyspace::index_stats_key(corpus))?;
    let field = |name| stored.as_ref().and_then(|e| e.value.get(name)).and_then(Value::as_u64).unwrap_or(0);
    Ok(bm25::Corpus { documents: field("documents"), total_length: field("length") })
}

/// Makes the index hold `document` under `id` (`None`: hold nothing for `id`), replacing
/// whatever it held for `id` before.
pub(crate) fn index<V: StateView + ?Sized>(
    view: &V,
    changes: &mut Changes<'_>,
    corpus: Corpus,
    id: &str,
    document: Option<&Document>,
) -> Result<(), V::Error> {
    let terms_key = keyspace::indexed_terms_key(corpus, id);
    let old = view.get(&terms_key)?.map(|entry| Document::decode(&entry.value));
    let mut totals = stats(view, corpus)?;
    if let Some(old) = &old {
        for term in old.terms.keys() {
            if document.is_none_or(|new| !new.terms.contains_key(term)) {
                changes.drop_key(&keyspace::posting_key(corpus, term, id));
            }
        }
        totals.documents = totals.documents.saturating_sub(1);
        totals.total_length = totals.total_length.saturating_sub(old.length);
    }
    match document {
        Some(new) => {
            for (term, frequency) in &new.terms {
                let posting = json!([frequency, new.length]);
                changes.write(None, &keyspace::posting_key(corpus, term, id), posting, None, Record::Silent);
            }
            changes.write(None, &terms_key, new.encode(), None, Record::Silent);
            totals.documents += 1;
            totals.total_length += new.length;
        }
        None if old.is_some() => changes.drop_key(&terms_key),
        None => return Ok(()),
    }
    let totals = json!({ "documents": totals.documents, "length": totals.total_length });
    changes.write(None, &keyspace::index_stats_key(corpus), totals, None, Record::Silent);
    Ok(())
}

/// The documents of `corpus` matching any term of `query`, best first (ties by id), with
/// their BM25 scores.
pub fn search<V: StateView + ?Sized>(view: &V, corpus: Corpus, query: &str) -> Result<Vec<(String, f64)>, V::Error> {
    let totals = stats(view, corpus)?;
    let terms: BTreeSet<String> = state_text::terms(query).into_iter().collect();
    let mut scores: HashMap<String, f64> = HashMap::new();
    if totals.documents == 0 {
        return Ok(Vec::new());
    }
    let mut postings: Vec<(String, u64, u64)> = Vec::new();
    for term in &terms {
        let prefix = keyspace::postings_prefix(corpus, term);
        postings.clear();
        view.scan(&prefix, None, &mut |entry| {
            let pair = entry.value.as_array();
            let number = |i: usize| pair.and_then(|p| p.get(i)).and_then(Value::as_u64).unwrap_or(1);
            let id = entry.key.get(prefix.len()..).unwrap_or_default().to_owned();
            postings.push((id, number(0), number(1)));
            true
        })?;
        let idf = totals.idf(postings.len() as u64);
        for (id, frequency, length) in postings.drain(..) {
            *scores.entry(id).or_default() += totals.score(idf, frequency, length);
        }
    }
    let mut ranked: Vec<(String, f64)> = scores.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(ranked)
}
