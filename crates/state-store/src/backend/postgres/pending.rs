//! A write transaction's entry writes, held until something needs them in the database.
//!
//! The planner reads a key, decides, writes it, and moves on to the next command; sending each
//! write at once would cost a round trip per write. Instead the transaction answers reads of
//! the keys it wrote from here, and sends all writes in a few statements (one per kind, rows
//! as parallel arrays) before a scan, a history read, or the commit. Each write carries the
//! guard of the first time the transaction saw its key, so the statement checks the database
//! still holds what the plan was decided on.

use std::collections::BTreeMap;

use state_core::Entry;
use tokio_postgres::types::ToSql;

use crate::error::StorageError;

/// What the database must still hold for a buffered write to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Guard {
    /// The key at this version, as the transaction read it.
    Version(u64),
    /// No row, as the transaction read it.
    Absent,
    /// Never read by the transaction (or guards are off): write whatever is there.
    Blind,
}

#[derive(Debug)]
struct Write {
    guard: Guard,
    /// The entry to leave, or `None` to leave no row.
    entry: Option<Entry>,
}

#[derive(Debug, Default)]
pub(super) struct Pending(BTreeMap<String, Write>);

impl Pending {
    /// The buffered state of `key`: `Some(None)` if the transaction deleted it.
    pub(super) fn get(&self, key: &str) -> Option<Option<&Entry>> {
        self.0.get(key).map(|w| w.entry.as_ref())
    }

    /// Buffers the key's new state; a key written before keeps its first guard, which is
    /// what the database holds until the flush.
    pub(super) fn write(&mut self, key: &str, entry: Option<Entry>, guard: Guard) {
        match self.0.get_mut(key) {
            Some(write) => write.entry = entry,
            None => {
                self.0.insert(key.to_owned(), Write { guard, entry });
            }
        }
    }

    /// Whether every buffered write carries a guard (none was written without being read).
    pub(super) fn all_guarded(&self) -> bool {
        self.0.values().all(|write| write.guard != Guard::Blind)
    }

    /// Empties the buffer into one batch of rows per statement kind.
    pub(super) fn take(&mut self) -> Result<Statements, StorageError> {
        let mut statements = Statements::default();
        for (key, write) in std::mem::take(&mut self.0) {
            match (write.guard, write.entry) {
                (Guard::Version(expected), Some(entry)) => {
                    statements.updates.push(&entry)?;
                    statements.expected.push(signed(expected)?);
                }
                (Guard::Absent, Some(entry)) => statements.inserts.push(&entry)?,
                (Guard::Blind, Some(entry)) => statements.upserts.push(&entry)?,
                (Guard::Version(expected), None) => {
                    statements.guarded_deletes.push(key);
                    statements.deleted_versions.push(signed(expected)?);
                }
                // Created and deleted again inside the transaction: nothing to send.
                (Guard::Absent, None) => {}
                (Guard::Blind, None) => statements.deletes.push(key),
            }
        }
        Ok(statements)
    }
}

/// Rows of one kind of entry write, as the parallel arrays `unnest` takes.
#[derive(Debug, Default)]
pub(super) struct EntryRows {
    pub(super) key: Vec<String>,
    pub(super) system: Vec<bool>,
    pub(super) value: Vec<String>,
    pub(super) version: Vec<i64>,
    pub(super) create_revision: Vec<i64>,
    pub(super) mod_revision: Vec<i64>,
    pub(super) updated_at: Vec<i64>,
    pub(super) expires_at: Vec<Option<i64>>,
    pub(super) agent_id: Vec<Option<String>>,
}

impl EntryRows {
    fn push(&mut self, entry: &Entry) -> Result<(), StorageError> {
        self.key.push(entry.key.clone());
        self.system.push(state_core::keyspace::is_system(&entry.key));
        self.value.push(entry.value.to_string());
        self.version.push(signed(entry.version)?);
        self.create_revision.push(signed(entry.create_revision)?);
        self.mod_revision.push(signed(entry.mod_revision)?);
        self.updated_at.push(signed(entry.updated_at.0)?);
        self.expires_at.push(entry.expires_at.map(|at| signed(at.0)).transpose()?);
        self.agent_id.push(entry.agent_id.clone());
        Ok(())
    }

    pub(super) fn len(&self) -> usize {
        self.key.len()
    }

    /// The arrays as statement parameters $1..$9, in the order of `schema::Sql`'s entry arrays.
    pub(super) fn params(&self) -> [&(dyn ToSql + Sync); 9] {
        [
            &self.key,
            &self.system,
            &self.value,
            &self.version,
            &self.create_revision,
            &self.mod_revision,
            &self.updated_at,
            &self.expires_at,
            &self.agent_id,
        ]
    }
}

/// Everything a flush sends.
#[derive(Debug, Default)]
pub(super) struct Statements {
    /// Rows that must be at `expected` (same order).
    pub(super) updates: EntryRows,
    pub(super) expected: Vec<i64>,
    /// Rows that must not exist.
    pub(super) inserts: EntryRows,
    pub(super) upserts: EntryRows,
    /// Keys that must be at `deleted_versions` (same order).
    pub(super) guarded_deletes: Vec<String>,
    pub(super) deleted_versions: Vec<i64>,
    pub(super) deletes: Vec<String>,
}

impl Statements {
    pub(super) fn is_empty(&self) -> bool {
        self.updates.len() + self.inserts.len() + self.upserts.len() == 0
            && self.guarded_deletes.is_empty()
            && self.deletes.is_empty()
    }

    /// Each key's state once these have applied, so later guards start from there.
    pub(super) fn written(&self) -> impl Iterator<Item = (&str, Option<u64>)> {
        let puts = [&self.updates, &self.inserts, &self.upserts]
            .into_iter()
            .flat_map(|rows| rows.key.iter().zip(&rows.version).map(|(k, v)| (k.as_str(), u64::try_from(*v).ok())));
        let deletes = self.guarded_deletes.iter().chain(&self.deletes).map(|k| (k.as_str(), None));
        puts.chain(deletes)
    }
}

pub(super) fn signed(n: u64) -> Result<i64, StorageError> {
    i64::try_from(n).map_err(|_| StorageError::Other(format!("{n} does not fit PostgreSQL's bigint")))
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use state_core::{Entry, UnixMillis};

    use super::{Guard, Pending};

    fn entry(key: &str, version: u64) -> Entry {
        Entry {
            key: key.into(),
            value: json!(version),
            version,
            create_revision: 1,
            mod_revision: version,
            updated_at: UnixMillis(0),
            expires_at: None,
            agent_id: None,
        }
    }

    #[test]
    fn a_key_written_twice_keeps_the_guard_of_what_the_database_holds() {
        let mut pending = Pending::default();
        pending.write("k", Some(entry("k", 4)), Guard::Version(3));
        // The second write saw the buffered version 4, but the database still holds 3.
        pending.write("k", Some(entry("k", 5)), Guard::Version(4));
        assert_eq!(pending.get("k").flatten().map(|e| e.version), Some(5));
        let rows = pending.take().unwrap();
        assert_eq!(
            (rows.updates.key.clone(), rows.expected.clone(), rows.updates.version.clone()),
            (vec!["k".to_owned()], vec![3], vec![5])
        );
        assert!(pending.get("k").is_none(), "taking empties the buffer");
    }

    #[test]
    fn each_guard_and_outcome_goes_to_its_own_statement() {
        let mut pending = Pending::default();
        pending.write("created", Some(entry("created", 1)), Guard::Absent);
        pending.write("blind", Some(entry("blind", 1)), Guard::Blind);
        pending.write("gone", None, Guard::Version(7));
        pending.write("blind-gone", None, Guard::Blind);
        pending.write("fleeting", Some(entry("fleeting", 1)), Guard::Absent);
        pending.write("fleeting", None, Guard::Absent);
        assert_eq!(pending.get("gone"), Some(None), "a buffered delete reads as absent");
        let rows = pending.take().unwrap();
        assert_eq!(rows.inserts.key, ["created"]);
        assert_eq!(rows.upserts.key, ["blind"]);
        assert_eq!((rows.guarded_deletes.clone(), rows.deleted_versions.clone()), (vec!["gone".to_owned()], vec![7]));
        assert_eq!(rows.deletes, ["blind-gone"]);
        assert!(rows.updates.key.is_empty(), "created and deleted inside the batch: nothing to send");
        let written: Vec<_> = rows.written().collect();
        assert!(written.contains(&("created", Some(1))) && written.contains(&("gone", None)), "{written:?}");
        assert!(!written.iter().any(|(k, _)| *k == "fleeting"));
    }
}
