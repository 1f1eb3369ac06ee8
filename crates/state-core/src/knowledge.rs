//! Knowledge rules: a note is an entry (its version is the note's version) indexed for
//! search in the same plan; recall ranks by BM25 and packs the best notes into a token budget
//! that the formatted context, headers included, never exceeds.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::entry::{Action, Entry};
use crate::keyspace::{self, Corpus, Space};
use crate::ops::knowledge::{
    KnowledgeDeleteRequest, KnowledgeDeleteResult, KnowledgeListResult, KnowledgeRecallResult, KnowledgeSaveRequest,
    KnowledgeSaveResult, NoteInfo, RecalledNote,
};
use crate::ops::{DeleteStatus, WriteStatus};
use crate::plan::{Changes, Plan, Record, WriteContext};
use crate::text_index::{self, Document};
use crate::time::UnixMillis;
use crate::view::{StateView, scan_page};

/// How much more a keyword counts than a word of the body, and a word of the id.
const KEYWORD_WEIGHT: u64 = 3;
const ID_WEIGHT: u64 = 2;
/// How many of the best matches recall considers for the budget.
const RECALL_CANDIDATES: usize = 100;

/// What a note stores besides its id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct StoredNote {
    content: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    keywords: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    scope: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    source: Option<String>,
    tokens: usize,
}

impl StoredNote {
    fn of(entry: &Entry) -> Option<StoredNote> {
        serde_json::from_value(entry.value.clone()).ok()
    }
}

/// A note with the work that does not need the store done: its token count and index terms.
/// Computing them before the write queue keeps the single writer free of tokenizing.
#[derive(Debug, Clone)]
pub struct PreparedNote {
    request: KnowledgeSaveRequest,
    tokens: usize,
    document: Document,
}

pub fn prepare(request: KnowledgeSaveRequest) -> PreparedNote {
    let tokens = state_text::count_tokens(&request.content);
    let document = document(&request.id, &request.content, &request.keywords);
    PreparedNote { request, tokens, document }
}

/// What the search index holds for a note: keywords and the id's words weigh more than the body.
fn document(id: &str, content: &str, keywords: &[String]) -> Document {
    Document::of(&[(content, 1), (&keywords.join(" "), KEYWORD_WEIGHT), (id, ID_WEIGHT)])
}

/// The index document of a stored note's value, if it is one.
pub(crate) fn stored_document(id: &str, value: &Value) -> Option<Document> {
    let note: StoredNote = serde_json::from_value(value.clone()).ok()?;
    Some(document(id, &note.content, &note.keywords))
}

pub fn plan_save<V: StateView + ?Sized>(
    view: &V,
    note: &PreparedNote,
    ctx: &WriteContext,
) -> Result<Plan<KnowledgeSaveResult>, V::Error> {
    let request = &note.request;
    let key = keyspace::note_key(&request.id);
    let stored = view.get(&key)?;
    let current = stored.as_ref().filter(|e| !e.is_expired(ctx.now)).map_or(0, |e| e.version);
    if let Err(mismatch) = crate::occ::check_expected(current, request.expected_version) {
        return Ok(Plan::unchanged(KnowledgeSaveResult {
            status: WriteStatus::Conflict,
            id: request.id.clone(),
            version: 0,
            current_version: Some(mismatch.current),
            tokens: note.tokens,
            revision: ctx.revision,
        }));
    }
    let value = serde_json::to_value(StoredNote {
        content: request.content.clone(),
        keywords: request.keywords.clone(),
        scope: request.scope.clone(),
        source: request.source.clone(),
        tokens: note.tokens,
    })
    .unwrap_or(Value::Null);
    let mut changes = Changes::new(ctx, request.agent_id.as_deref());
    let detail = json!({ "tokens": note.tokens, "scope": request.scope });
    let entry = changes.write(stored.as_ref(), &key, value, None, Record::Transition(Action::KnowledgeSave, detail));
    text_index::index(view, &mut changes, Corpus::Knowledge, &request.id, Some(&note.document))?;
    let revision = changes.revision();
    Ok(changes.finish(KnowledgeSaveResult {
        status: WriteStatus::Ok,
        id: request.id.clone(),
        version: entry.version,
        current_version: None,
        tokens: note.tokens,
        revision,
    }))
}

pub fn plan_delete<V: StateView + ?Sized>(
    view: &V,
    request: &KnowledgeDeleteRequest,
    ctx: &WriteContext,
) -> Result<Plan<KnowledgeDeleteResult>, V::Error> {
    let key = keyspace::note_key(&request.id);
    let stored = view.get(&key)?.filter(|e| !e.is_expired(ctx.now));
    let result = |status, current_version, revision| KnowledgeDeleteResult {
        status,
        id: request.id.clone(),
        current_version,
        revision,
    };
    let Some(stored) = stored else {
        return Ok(Plan::unchanged(result(DeleteStatus::NotFound, None, ctx.revision)));
    };
    if crate::occ::check_expected(stored.version, request.expected_version).is_err() {
        return Ok(Plan::unchanged(result(DeleteStatus::Conflict, Some(stored.version), ctx.revision)));
    }
    let mut changes = Changes::new(ctx, request.agent_id.as_deref());
    changes.remove(&stored, Record::Transition(Action::KnowledgeDelete, json!({})));
    text_index::index(view, &mut changes, Corpus::Knowledge, &request.id, None)?;
    let revision = changes.revision();
    Ok(changes.finish(result(DeleteStatus::Ok, None, revision)))
}

/// The context's first line.
pub const RECALL_HEADER: &str = "📚 Recalled Knowledge\n";

fn block(id: &str, note: &StoredNote) -> String {
    let source = note.source.as_deref().map(|s| format!("_Source: {s}_\n")).unwrap_or_default();
    format!("\n## {id}\n{}\n{source}", note.content.trim_end())
}

/// What recall is asked: the query, the scope filter and the limits.
#[derive(Debug, Clone, Copy)]
pub struct Recall<'a> {
    pub query: &'a str,
    pub scope: Option<&'a str>,
    pub budget: usize,
    pub limit: usize,
}

pub fn recall<V: StateView + ?Sized>(
    view: &V,
    ask: Recall<'_>,
    now: UnixMillis,
    revision: u64,
) -> Result<KnowledgeRecallResult, V::Error> {
    // Without a scope filter, the best few are all recall can use (the rest would not fit or
    // exceed the limit); a scope filter may skip any number, so it ranks every match.
    let best = ask.scope.is_none().then(|| (ask.limit * 3).max(30));
    let ranked = text_index::search(view, Corpus::Knowledge, ask.query, best)?;
    let mut picked: Vec<(RecalledNote, String)> = Vec::new();
    let mut used = state_text::count_tokens(RECALL_HEADER);
    let mut omitted = 0;
    let fits_at_all = used <= ask.budget;
    for (id, score) in ranked.into_iter().take(RECALL_CANDIDATES) {
        let Some(entry) = view.get(&keyspace::note_key(&id))?.filter(|e| !e.is_expired(now)) else { continue };
        let Some(note) = StoredNote::of(&entry) else { continue };
        if let (Some(wanted), Some(scope)) = (ask.scope, note.scope.as_deref())
            && wanted != scope
        {
            continue;
        }
        let text = block(&id, &note);
        let cost = state_text::count_tokens(&text);
        if !fits_at_all || picked.len() == ask.limit || used + cost > ask.budget {
            omitted += 1;
            continue;
        }
        used += cost;
        let item = RecalledNote {
            id,
            content: note.content,
            keywords: note.keywords,
            scope: note.scope,
            source: note.source,
            tokens: note.tokens,
            score,
            version: entry.version,
        };
        picked.push((item, text));
    }
    // Counting pieces apart can differ from counting them joined where a merge spans the
    // seam; the exact count of the joined text decides, dropping the last items if needed.
    let (formatted, context_tokens) = loop {
        let formatted = if picked.is_empty() {
            String::new()
        } else {
            std::iter::once(RECALL_HEADER).chain(picked.iter().map(|(_, text)| text.as_str())).collect()
        };
        let tokens = state_text::count_tokens(&formatted);
        if tokens <= ask.budget || picked.is_empty() {
            break (formatted, tokens);
        }
        picked.pop();
        omitted += 1;
    };
    let items: Vec<RecalledNote> = picked.into_iter().map(|(item, _)| item).collect();
    Ok(KnowledgeRecallResult {
        total_tokens: items.iter().map(|i| i.tokens).sum(),
        items,
        context_tokens,
        budget: ask.budget,
        omitted,
        tokenizer: state_text::TOKENIZER.to_owned(),
        formatted_context: formatted,
        revision,
    })
}

pub fn list<V: StateView + ?Sized>(
    view: &V,
    prefix: &str,
    scope: Option<&str>,
    after: Option<&str>,
    page: usize,
    now: UnixMillis,
    revision: u64,
) -> Result<KnowledgeListResult, V::Error> {
    let space = keyspace::prefix(Space::Note);
    let after_key = after.map(keyspace::note_key);
    let (notes, next_cursor) = scan_page(
        view,
        &format!("{space}{prefix}"),
        after_key.as_deref(),
        page,
        |entry| {
            if entry.is_expired(now) {
                return Ok(None);
            }
            let Some(note) = StoredNote::of(&entry) else { return Ok(None) };
            if scope.is_some() && note.scope.as_deref() != scope {
                return Ok(None);
            }
            Ok(Some(NoteInfo {
                id: keyspace::classify(&entry.key).1.to_owned(),
                keywords: note.keywords,
                scope: note.scope,
                source: note.source,
                tokens: note.tokens,
                version: entry.version,
                updated_at: entry.updated_at.to_rfc3339(),
            }))
        },
        |note: &NoteInfo| &note.id,
    )?;
    Ok(KnowledgeListResult { notes, next_cursor, revision })
}

#[cfg(test)]
mod tests;
