//! Export and import rules: which stored records a dump carries, how a dumped record is
//! checked, and the plan that writes a chunk of them without overwriting what differs.
//!
//! A dump carries every live record the store keeps (user keys, leases, runs and their
//! steps, sessions, checkpoints, notes) except what the store derives: the search index is
//! rebuilt by the import, in the same plan as the document it indexes, and idempotency
//! records belong to the requests of the store that answered them.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::checkpoint;
use crate::entry::{Action, Entry};
use crate::keyspace::{self, Corpus, Space};
use crate::knowledge;
use crate::ops::checkpoint::CheckpointSaveRequest;
use crate::ops::transfer::{DumpedRecord, ImportConflict, ImportResult, carried};
use crate::plan::{Changes, Mutation, Plan, Record, WriteContext};
use crate::text_index::{self, Document};
use crate::time::{UnixMillis, parse_rfc3339};
use crate::view::{StateView, scan_page};

/// A stored entry as a dump line.
pub fn dump(entry: &Entry) -> DumpedRecord {
    DumpedRecord {
        key: entry.key.clone(),
        value: entry.value.clone(),
        version: entry.version,
        create_revision: entry.create_revision,
        mod_revision: entry.mod_revision,
        updated_at: entry.updated_at.to_rfc3339(),
        expires_at: entry.expires_at.map(UnixMillis::to_rfc3339),
        agent_id: entry.agent_id.clone(),
    }
}

/// One page of the records a dump carries, in key order, after the key `after`.
pub fn export_page<V: StateView + ?Sized>(
    view: &V,
    after: Option<&str>,
    page: usize,
    now: UnixMillis,
) -> Result<(Vec<DumpedRecord>, Option<String>), V::Error> {
    let pick = |entry: Entry| Ok((carried(&entry.key) && !entry.is_expired(now)).then(|| dump(&entry)));
    scan_page(view, "", after, page, pick, |record| &record.key)
}

/// The records of a session saved once with `context` (its head and version 1), for an import
/// from a server that keeps only a session's latest context.
pub fn session_records(session_id: &str, context: Value, updated_at: String) -> Vec<DumpedRecord> {
    let record = |key: String| DumpedRecord {
        key,
        value: context.clone(),
        version: 1,
        create_revision: 0,
        mod_revision: 0,
        updated_at: updated_at.clone(),
        expires_at: None,
        agent_id: None,
    };
    vec![record(keyspace::session_key(session_id)), record(keyspace::session_version_key(session_id, 1))]
}

/// A dumped record made ready to write, with its search terms computed (off the writer).
#[derive(Debug, Clone)]
pub struct PreparedRecord {
    entry: Entry,
    document: Option<(Corpus, Document)>,
}

/// Parses times and computes search terms. Records must have passed `check_record`
/// (`ImportRequest::validate`); an unparsable time would read as the epoch.
pub fn prepare(records: Vec<DumpedRecord>) -> Vec<PreparedRecord> {
    records
        .into_iter()
        .map(|record| {
            let document = document(&record.key, &record.value);
            let entry = Entry {
                updated_at: parse_rfc3339(&record.updated_at).unwrap_or_default(),
                expires_at: record.expires_at.as_deref().and_then(parse_rfc3339),
                key: record.key,
                value: record.value,
                version: record.version,
                create_revision: record.create_revision,
                mod_revision: record.mod_revision,
                agent_id: record.agent_id,
            };
            PreparedRecord { entry, document }
        })
        .collect()
}

/// What the search index holds for a note or a checkpoint.
fn document(key: &str, value: &Value) -> Option<(Corpus, Document)> {
    match keyspace::classify(key) {
        (Space::Note, id) => Some((Corpus::Knowledge, knowledge::stored_document(id, value)?)),
        (Space::Checkpoint, _) => {
            let fields: CheckpointSaveRequest = serde_json::from_value(value.clone()).ok()?;
            Some((Corpus::Checkpoints, checkpoint::document(&fields)))
        }
        _ => None,
    }
}

/// How an imported record shows in history: a user key by its value, a note or checkpoint as
/// saved, any other record as imported.
fn record_of(entry: &Entry) -> Record {
    match keyspace::classify(&entry.key).0 {
        Space::Kv => Record::Value,
        Space::Note => Record::Transition(Action::KnowledgeSave, json!({ "imported": true })),
        Space::Checkpoint => Record::Transition(Action::CheckpointSave, json!({ "imported": true })),
        _ => Record::Transition(Action::Import, entry.value.clone()),
    }
}

/// The batch's view plus what this plan wrote so far: importing a note updates index
/// statistics the next note of the chunk must see.
struct Pending<'v, V: ?Sized> {
    base: &'v V,
    written: HashMap<String, Option<Entry>>,
}

impl<V: StateView + ?Sized> StateView for Pending<'_, V> {
    type Error = V::Error;

    fn get(&self, key: &str) -> Result<Option<Entry>, V::Error> {
        match self.written.get(key) {
            Some(entry) => Ok(entry.clone()),
            None => self.base.get(key),
        }
    }

    /// Import plans only look records up; a scan sees the batch as it was.
    fn scan(&self, prefix: &str, after: Option<&str>, visit: &mut dyn FnMut(Entry) -> bool) -> Result<(), V::Error> {
        self.base.scan(prefix, after, visit)
    }
}

/// Writes a chunk of records in one plan. Each record absent here (or expired) is created
/// with its dumped version, update time, expiry and writer; one present with the same value
/// and version is unchanged; one present otherwise is a conflict and is not written.
///
/// The plan commits at a revision above every revision the records carry, so fencing tokens
/// granted here later are larger than any imported lease or claim holds.
pub fn plan_import<V: StateView + ?Sized>(
    view: &V,
    records: &[PreparedRecord],
    dry_run: bool,
    ctx: &WriteContext,
) -> Result<Plan<ImportResult>, V::Error> {
    let carried_revision = records.iter().map(|r| r.entry.mod_revision.max(r.entry.create_revision)).max();
    let at = WriteContext { now: ctx.now, revision: ctx.revision.max(carried_revision.unwrap_or(0)) };
    let mut changes = Changes::new(&at, None);
    let mut pending = Pending { base: view, written: HashMap::new() };
    let mut result =
        ImportResult { imported: 0, unchanged: 0, expired: 0, conflicts: Vec::new(), dry_run, revision: ctx.revision };
    for record in records {
        let incoming = &record.entry;
        if incoming.is_expired(ctx.now) {
            result.expired += 1;
            continue;
        }
        let stored = pending.get(&incoming.key)?;
        match stored.as_ref().filter(|e| !e.is_expired(ctx.now)) {
            Some(current) if current.value == incoming.value && current.version == incoming.version => {
                result.unchanged += 1;
                continue;
            }
            Some(current) => {
                result.conflicts.push(ImportConflict {
                    key: incoming.key.clone(),
                    current_version: current.version,
                    incoming_version: incoming.version,
                });
                continue;
            }
            None => {}
        }
        result.imported += 1;
        let before = changes.mutations().len();
        changes.restore(stored.as_ref(), incoming.clone(), record_of(incoming));
        if let Some((corpus, document)) = &record.document {
            let id = keyspace::classify(&incoming.key).1;
            text_index::index(&pending, &mut changes, *corpus, id, Some(document))?;
        }
        for mutation in &changes.mutations()[before..] {
            match mutation {
                Mutation::Put(entry) => pending.written.insert(entry.key.clone(), Some(entry.clone())),
                Mutation::Delete(key) => pending.written.insert(key.clone(), None),
            };
        }
    }
    if dry_run || result.imported == 0 {
        return Ok(Plan::unchanged(result));
    }
    result.revision = at.next_revision();
    Ok(changes.finish(result))
}

#[cfg(test)]
mod tests;
