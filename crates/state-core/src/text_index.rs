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

/// How many documents contain `term` (0 when none does).
fn document_frequency<V: StateView + ?Sized>(view: &V, corpus: Corpus, term: &str) -> Result<u64, V::Error> {
    Ok(view.get(&keyspace::term_stats_key(corpus, term))?.and_then(|e| e.value.as_u64()).unwrap_or(0))
}

/// Adds `delta` (+1 or -1) to a term's document count, dropping the record at zero.
fn count_term<V: StateView + ?Sized>(
    view: &V,
    changes: &mut Changes<'_>,
    corpus: Corpus,
    term: &str,
    delta: i64,
) -> Result<(), V::Error> {
    let key = keyspace::term_stats_key(corpus, term);
    let count = document_frequency(view, corpus, term)?.saturating_add_signed(delta);
    if count == 0 {
        changes.drop_key(&key);
    } else {
        changes.write(None, &key, json!(count), None, Record::Silent);
    }
    Ok(())
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
                count_term(view, changes, corpus, term, -1)?;
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
                if old.as_ref().is_none_or(|old| !old.terms.contains_key(term)) {
                    count_term(view, changes, corpus, term, 1)?;
                }
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

/// A posting's term frequency and document length.
fn posting(value: &Value) -> (u64, u64) {
    let pair = value.as_array();
    let number = |i: usize| pair.and_then(|p| p.get(i)).and_then(Value::as_u64).unwrap_or(1);
    (number(0), number(1))
}

/// A term is common when more than this share of documents (1/20 = 5%), and at least
/// `COMMON_MIN` of them, contain it.
const COMMON_SHARE: u64 = 20;
const COMMON_MIN: u64 = 2000;

struct QueryTerm {
    term: String,
    documents: u64,
    idf: f64,
}

/// The documents of `corpus` matching `query`, best first (ties by id), with their BM25
/// scores: every match when `best` is `None`, else the `best` highest.
///
/// With `best`, common terms are not scanned: the postings of the rarer query terms name the
/// candidates, and each common term's posting is then looked up for the most promising
/// candidates only, stopping once no remaining candidate can enter the best, even if it
/// contained every common term (each term adds less than `idf * (k1 + 1)`). A document that
/// contains only common query terms is not found this way (the "continue" strategy of Moffat
/// and Zobel); when every query term is common, the rarest is scanned to name candidates.
pub fn search<V: StateView + ?Sized>(
    view: &V,
    corpus: Corpus,
    query: &str,
    best: Option<usize>,
) -> Result<Vec<(String, f64)>, V::Error> {
    let totals = stats(view, corpus)?;
    if totals.documents == 0 {
        return Ok(Vec::new());
    }
    let unique: BTreeSet<String> = state_text::terms(query).into_iter().collect();
    let mut terms = Vec::new();
    for term in unique {
        let documents = document_frequency(view, corpus, &term)?;
        if documents > 0 {
            terms.push(QueryTerm { idf: totals.idf(documents), term, documents });
        }
    }
    terms.sort_by_key(|t| t.documents);
    let common = match best {
        Some(_) => COMMON_MIN.max(totals.documents / COMMON_SHARE),
        None => u64::MAX,
    };
    let scanned_count = terms.partition_point(|t| t.documents <= common).max(terms.len().min(1));
    let (scanned, probed) = terms.split_at(scanned_count);

    let mut scores: HashMap<String, f64> = HashMap::new();
    for term in scanned {
        let prefix = keyspace::postings_prefix(corpus, &term.term);
        view.scan(&prefix, None, &mut |entry| {
            let (frequency, length) = posting(&entry.value);
            let id = entry.key.get(prefix.len()..).unwrap_or_default().to_owned();
            *scores.entry(id).or_default() += totals.score(term.idf, frequency, length);
            true
        })?;
    }
    let mut ranked: Vec<(String, f64)> = scores.into_iter().collect();
    let order = |a: &(String, f64), b: &(String, f64)| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0));
    ranked.sort_by(order);
    let Some(best) = best else { return Ok(ranked) };
    if probed.is_empty() {
        ranked.truncate(best);
        return Ok(ranked);
    }
    let ceiling: f64 = probed.iter().map(|t| t.idf * (bm25::K1 + 1.0)).sum();
    let mut top: Vec<(String, f64)> = Vec::with_capacity(best + 1);
    for (id, partial) in ranked {
        if top.len() == best && top.last().is_some_and(|last| partial + ceiling <= last.1) {
            break;
        }
        let mut score = partial;
        for term in probed {
            if let Some(entry) = view.get(&keyspace::posting_key(corpus, &term.term, &id))? {
                let (frequency, length) = posting(&entry.value);
                score += totals.score(term.idf, frequency, length);
            }
        }
        let item = (id, score);
        let at = top.partition_point(|other| order(other, &item).is_lt());
        top.insert(at, item);
        top.truncate(best);
    }
    Ok(top)
}
