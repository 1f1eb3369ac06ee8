//! The storage trait every backend implements. It speaks in domain records (entries, events),
//! not bytes; the engine above it owns ordering, batching and the rules.
//!
//! Every backend must pass the conformance suite in `tests/it/conformance.rs`.

pub mod redb;

use std::ops::RangeInclusive;

use state_core::ops::history::KeyFilter;
use state_core::{Entry, Event, UnixMillis};

use crate::error::StorageError;

pub trait Backend: Send + Sync + 'static {
    /// Short name shown in health output, e.g. "redb".
    fn kind(&self) -> &'static str;
    /// A consistent snapshot for reading.
    fn begin_read(&self) -> Result<Box<dyn ReadTxn + '_>, StorageError>;
    /// The single write transaction. The engine never holds two at once.
    fn begin_write(&self) -> Result<Box<dyn WriteTxn + '_>, StorageError>;
    /// Bytes the database occupies, if it lives in a file.
    fn size_on_disk(&self) -> Option<u64>;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Ascending,
    Descending,
}

pub trait ReadTxn {
    /// The last committed revision (0 for a new store).
    fn revision(&self) -> Result<u64, StorageError>;
    /// History at or below this revision has been removed.
    fn compacted_revision(&self) -> Result<u64, StorageError>;
    /// The stored entry, expired or not: the caller decides visibility.
    fn get(&self, key: &str) -> Result<Option<Entry>, StorageError>;
    /// Visits entries whose key starts with `prefix`, in key order, beginning after `after`,
    /// until `visit` returns false.
    fn scan(&self, prefix: &str, after: Option<&str>, visit: &mut dyn FnMut(Entry) -> bool)
    -> Result<(), StorageError>;
    /// Number of user keys stored (expired ones not yet swept included; the store's own
    /// records, see `state_core::keyspace`, excluded).
    fn key_count(&self) -> Result<u64, StorageError>;
    /// Up to `limit` entries whose expiry is at or before `now`, soonest first.
    fn expired_before(&self, now: UnixMillis, limit: usize) -> Result<Vec<Entry>, StorageError>;
    /// Visits events matching `keys` whose revision lies in `revisions`, in revision order
    /// (events of one revision in the order they were appended), until `visit` returns false.
    fn history(
        &self,
        keys: &KeyFilter,
        revisions: RangeInclusive<u64>,
        order: Order,
        visit: &mut dyn FnMut(Event) -> bool,
    ) -> Result<(), StorageError>;
}

pub trait WriteTxn: ReadTxn {
    /// Inserts or replaces an entry, keeping any expiry index in step.
    fn put(&mut self, entry: &Entry) -> Result<(), StorageError>;
    fn delete(&mut self, key: &str) -> Result<(), StorageError>;
    /// Appends an event. Events arrive in revision order.
    fn append(&mut self, event: &Event) -> Result<(), StorageError>;
    fn set_revision(&mut self, revision: u64) -> Result<(), StorageError>;
    /// Removes every entry and all history, marking history through `compacted_through` as
    /// compacted. The revision counter is kept: revisions never go backwards. Returns how many
    /// entries were removed.
    fn clear(&mut self, compacted_through: u64) -> Result<u64, StorageError>;
    /// Removes history through revision `through`, whole revisions at a time, stopping once
    /// about `limit` events are gone. Returns the new compacted revision.
    fn compact(&mut self, through: u64, limit: usize) -> Result<u64, StorageError>;
    /// Makes everything durable; only then may the engine acknowledge.
    fn commit(self: Box<Self>) -> Result<(), StorageError>;
}
