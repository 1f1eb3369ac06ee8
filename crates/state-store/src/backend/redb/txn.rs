//! Read and write transactions over the tables: point reads, prefix scans and history in
//! pages, and writes that record what they call for the log and what they free.

use std::ops::RangeInclusive;
use std::sync::atomic::Ordering;

use redb::{Durability, ReadTransaction, ReadableTable, ReadableTableMetadata, WriteTransaction};
use state_core::keyspace;
use state_core::ops::history::KeyFilter;
use state_core::{Entry, Event, UnixMillis};

use super::logged::Calls;
use super::space::add_freed;
use super::unpublished::{HeldLog, Logged};
use super::wal::LogError;
use super::{
    ENTRIES, EVENTS, EXPIRY, KEY_EVENTS, Log, META, META_COMPACTED, META_REVISION, META_WAL_LSN, RECORDS, RedbBackend,
    log_error, meta_value, storage, table_for,
};
use super::{codec, failpoint};
use crate::backend::{Order, ReadTxn, Unpublished, WriteTxn};
use crate::error::StorageError;

pub(super) struct RedbRead(pub(super) ReadTransaction);

pub(super) struct RedbWrite<'a> {
    pub(super) txn: WriteTransaction,
    /// Sequence number for the next event of the revision being appended.
    pub(super) next_seq: Option<(u64, u32)>,
    pub(super) backend: &'a RedbBackend,
    /// Bytes of entries and events written, for the free-space check at commit.
    pub(super) written: u64,
    /// Bytes of the entries it overwrote or deleted, added to what the file has free
    /// ([`META_FREED`]) at commit.
    pub(super) freed: u64,
    /// The calls made, for the log record; `None` without a log, or while replaying one.
    pub(super) calls: Option<Calls>,
    /// The log, when this transaction carries logged batches not yet published (it was
    /// resumed after one).
    pub(super) held: Option<HeldLog<'a>>,
}

/// Read paths shared by read and write transactions: redb exposes the same `ReadableTable`
/// trait on both, so one implementation serves each.
macro_rules! read_methods {
    ($field:tt) => {
        fn revision(&self) -> Result<u64, StorageError> {
            meta_value(&self.$field.open_table(META).map_err(storage)?, META_REVISION)
        }

        fn compacted_revision(&self) -> Result<u64, StorageError> {
            meta_value(&self.$field.open_table(META).map_err(storage)?, META_COMPACTED)
        }

        fn get(&self, key: &str) -> Result<Option<Entry>, StorageError> {
            let table = self.$field.open_table(table_for(key)).map_err(storage)?;
            let guard = table.get(key).map_err(storage)?;
            guard.map(|g| codec::decode_entry(key, g.value())).transpose()
        }

        fn scan(
            &self,
            prefix: &str,
            after: Option<&str>,
            visit: &mut dyn FnMut(Entry) -> bool,
        ) -> Result<(), StorageError> {
            // System keys all sort before user keys, so "everything" is records, then entries.
            let mut go_on = true;
            if prefix.is_empty() || keyspace::is_system(prefix) {
                go_on = scan_table(&|| self.$field.open_table(RECORDS).map_err(storage), prefix, after, visit)?;
            }
            if go_on && !keyspace::is_system(prefix) {
                scan_table(&|| self.$field.open_table(ENTRIES).map_err(storage), prefix, after, visit)?;
            }
            Ok(())
        }

        fn key_count(&self) -> Result<u64, StorageError> {
            self.$field.open_table(ENTRIES).map_err(storage)?.len().map_err(storage)
        }

        fn expired_before(&self, now: UnixMillis, limit: usize) -> Result<Vec<Entry>, StorageError> {
            let expiry = self.$field.open_table(EXPIRY).map_err(storage)?;
            let mut keys = Vec::new();
            for item in expiry.range((0u64, "")..=(now.0, "\u{10FFFF}")).map_err(storage)? {
                let (k, _) = item.map_err(storage)?;
                let (at, key) = k.value();
                if at > now.0 || keys.len() >= limit {
                    break;
                }
                keys.push(key.to_owned());
            }
            drop(expiry);
            let mut entries = Vec::with_capacity(keys.len());
            for key in keys {
                match self.get(&key)? {
                    Some(entry) => entries.push(entry),
                    None => return Err(StorageError::Corrupt(format!("expiry index names missing key `{key}`"))),
                }
            }
            Ok(entries)
        }

        fn history(
            &self,
            keys: &KeyFilter,
            revisions: RangeInclusive<u64>,
            order: Order,
            visit: &mut dyn FnMut(Event) -> bool,
        ) -> Result<(), StorageError> {
            let events = self.$field.open_table(EVENTS).map_err(storage)?;
            match keys {
                KeyFilter::Exact(key) => {
                    let index = self.$field.open_table(KEY_EVENTS).map_err(storage)?;
                    key_history(&index, &events, key, revisions, order, visit)
                }
                filter => scan_history(&events, filter, revisions, order, visit),
            }
        }
    };
}

impl ReadTxn for RedbRead {
    read_methods!(0);
}

impl ReadTxn for RedbWrite<'_> {
    read_methods!(txn);
}

/// Entries read per chunk of a scan.
pub(super) const SCAN_CHUNK: usize = 64;

/// Visits one table's entries under `prefix`; returns false once `visit` asked to stop.
///
/// The table is read a chunk at a time and closed before the chunk is visited, so a visitor
/// may read other records (a write transaction refuses to open a table twice).
pub(super) fn scan_table<T: ReadableTable<&'static str, &'static [u8]>>(
    open: &dyn Fn() -> Result<T, StorageError>,
    prefix: &str,
    after: Option<&str>,
    visit: &mut dyn FnMut(Entry) -> bool,
) -> Result<bool, StorageError> {
    use std::ops::Bound;
    let mut cursor = after.map(str::to_owned);
    loop {
        let chunk = {
            let table = open()?;
            let start = match cursor.as_deref() {
                Some(after) if after >= prefix => Bound::Excluded(after),
                _ => Bound::Included(prefix),
            };
            let mut chunk = Vec::with_capacity(SCAN_CHUNK);
            for item in table.range::<&str>((start, Bound::Unbounded)).map_err(storage)? {
                let (key, value) = item.map_err(storage)?;
                let key = key.value();
                if !key.starts_with(prefix) || chunk.len() == SCAN_CHUNK {
                    break;
                }
                chunk.push(codec::decode_entry(key, value.value())?);
            }
            chunk
        };
        let complete = chunk.len() < SCAN_CHUNK;
        for entry in chunk {
            cursor = Some(entry.key.clone());
            if !visit(entry) {
                return Ok(false);
            }
        }
        if complete {
            return Ok(true);
        }
    }
}

/// A redb range walked forwards or backwards.
pub(super) fn ordered<'a, T: DoubleEndedIterator + 'a>(
    range: T,
    order: Order,
) -> Box<dyn Iterator<Item = T::Item> + 'a> {
    match order {
        Order::Ascending => Box::new(range),
        Order::Descending => Box::new(range.rev()),
    }
}

pub(super) fn key_history(
    index: &impl ReadableTable<(&'static str, u64, u32), u64>,
    events: &impl ReadableTable<(u64, u32), &'static [u8]>,
    key: &str,
    revisions: RangeInclusive<u64>,
    order: Order,
    visit: &mut dyn FnMut(Event) -> bool,
) -> Result<(), StorageError> {
    let range = index.range((key, *revisions.start(), 0)..=(key, *revisions.end(), u32::MAX)).map_err(storage)?;
    // Walking backwards, one revision's events are gathered and handed over in append order.
    let mut pending: Vec<Event> = Vec::new();
    for item in ordered(range, order) {
        let (k, _) = item.map_err(storage)?;
        let (_, revision, seq) = k.value();
        let bytes = events
            .get((revision, seq))
            .map_err(storage)?
            .ok_or_else(|| StorageError::Corrupt(format!("history index points at missing event {revision}.{seq}")))?;
        let event = codec::decode_event(revision, bytes.value())?;
        match order {
            Order::Ascending => {
                if !visit(event) {
                    return Ok(());
                }
            }
            Order::Descending => {
                if pending.last().is_some_and(|e| e.revision != revision)
                    && !flush(&mut pending, &KeyFilter::All, visit)
                {
                    return Ok(());
                }
                pending.push(event);
            }
        }
    }
    flush(&mut pending, &KeyFilter::All, visit);
    Ok(())
}

pub(super) fn scan_history(
    events: &impl ReadableTable<(u64, u32), &'static [u8]>,
    filter: &KeyFilter,
    revisions: RangeInclusive<u64>,
    order: Order,
    visit: &mut dyn FnMut(Event) -> bool,
) -> Result<(), StorageError> {
    let range = events.range((*revisions.start(), 0)..=(*revisions.end(), u32::MAX)).map_err(storage)?;
    // Walking backwards, one revision's events are gathered and handed over in append order,
    // so a reader replaying them sees each transaction as it happened.
    let mut pending: Vec<Event> = Vec::new();
    for item in ordered(range, order) {
        let (k, v) = item.map_err(storage)?;
        let (revision, _) = k.value();
        let event = codec::decode_event(revision, v.value())?;
        match order {
            Order::Ascending => {
                if filter.matches(&event.key) && !visit(event) {
                    return Ok(());
                }
            }
            Order::Descending => {
                if pending.last().is_some_and(|e| e.revision != revision) && !flush(&mut pending, filter, visit) {
                    return Ok(());
                }
                pending.push(event);
            }
        }
    }
    flush(&mut pending, filter, visit);
    Ok(())
}

/// Hands one revision's events (collected newest first) to `visit` in append order.
pub(super) fn flush(pending: &mut Vec<Event>, filter: &KeyFilter, visit: &mut dyn FnMut(Event) -> bool) -> bool {
    for event in pending.drain(..).rev() {
        if filter.matches(&event.key) && !visit(event) {
            return false;
        }
    }
    true
}

impl WriteTxn for RedbWrite<'_> {
    fn put(&mut self, entry: &Entry) -> Result<(), StorageError> {
        let mut entries = self.txn.open_table(table_for(&entry.key)).map_err(storage)?;
        let encoded = codec::encode_entry(entry);
        self.written += encoded.len() as u64;
        if let Some(calls) = &mut self.calls {
            calls.put(entry, &encoded);
        }
        let old_expiry = match entries.insert(entry.key.as_str(), encoded.as_slice()).map_err(storage)? {
            Some(old) => {
                self.freed += old.value().len() as u64;
                codec::entry_expiry(&entry.key, old.value())?
            }
            None => None,
        };
        drop(entries);
        if old_expiry != entry.expires_at {
            let mut expiry = self.txn.open_table(EXPIRY).map_err(storage)?;
            if let Some(at) = old_expiry {
                expiry.remove((at.0, entry.key.as_str())).map_err(storage)?;
            }
            if let Some(at) = entry.expires_at {
                expiry.insert((at.0, entry.key.as_str()), ()).map_err(storage)?;
            }
        }
        Ok(())
    }

    fn delete(&mut self, key: &str) -> Result<(), StorageError> {
        if let Some(calls) = &mut self.calls {
            calls.delete(key);
        }
        let mut entries = self.txn.open_table(table_for(key)).map_err(storage)?;
        let old_expiry = match entries.remove(key).map_err(storage)? {
            Some(old) => {
                self.freed += old.value().len() as u64;
                codec::entry_expiry(key, old.value())?
            }
            None => None,
        };
        drop(entries);
        if let Some(at) = old_expiry {
            self.txn.open_table(EXPIRY).map_err(storage)?.remove((at.0, key)).map_err(storage)?;
        }
        Ok(())
    }

    fn append(&mut self, event: &Event) -> Result<(), StorageError> {
        let seq = match self.next_seq {
            Some((revision, seq)) if revision == event.revision => seq,
            _ => 0,
        };
        self.next_seq = Some((event.revision, seq + 1));
        let encoded = codec::encode_event(event);
        self.written += encoded.len() as u64;
        if let Some(calls) = &mut self.calls {
            calls.append(event, &encoded);
        }
        self.txn
            .open_table(EVENTS)
            .map_err(storage)?
            .insert((event.revision, seq), encoded.as_slice())
            .map_err(storage)?;
        self.txn
            .open_table(KEY_EVENTS)
            .map_err(storage)?
            .insert((event.key.as_str(), event.revision, seq), event.version)
            .map_err(storage)?;
        Ok(())
    }

    fn set_revision(&mut self, revision: u64) -> Result<(), StorageError> {
        if let Some(calls) = &mut self.calls {
            calls.set_revision(revision);
        }
        self.txn.open_table(META).map_err(storage)?.insert(META_REVISION, revision).map_err(storage)?;
        Ok(())
    }

    fn clear(&mut self, compacted_through: u64) -> Result<u64, StorageError> {
        if let Some(calls) = &mut self.calls {
            calls.clear(compacted_through);
        }
        let mut removed = 0;
        for table in [ENTRIES, RECORDS] {
            removed += self.txn.open_table(table).map_err(storage)?.len().map_err(storage)?;
        }
        // Dropping and recreating a table frees its pages at once instead of row by row.
        for table in [ENTRIES, RECORDS] {
            self.txn.delete_table(table).map_err(storage)?;
            self.txn.open_table(table).map_err(storage)?;
        }
        self.txn.delete_table(EXPIRY).map_err(storage)?;
        self.txn.open_table(EXPIRY).map_err(storage)?;
        self.txn.delete_table(EVENTS).map_err(storage)?;
        self.txn.open_table(EVENTS).map_err(storage)?;
        self.txn.delete_table(KEY_EVENTS).map_err(storage)?;
        self.txn.open_table(KEY_EVENTS).map_err(storage)?;
        self.txn.open_table(META).map_err(storage)?.insert(META_COMPACTED, compacted_through).map_err(storage)?;
        self.next_seq = None;
        // Everything went: counted as all of it, so the next look walks the file.
        self.freed = u64::MAX;
        Ok(removed)
    }

    fn compact(&mut self, through: u64, limit: usize) -> Result<u64, StorageError> {
        if let Some(calls) = &mut self.calls {
            calls.compact(through, limit);
        }
        let mut compacted = meta_value(&self.txn.open_table(META).map_err(storage)?, META_COMPACTED)?;
        if through <= compacted {
            return Ok(compacted);
        }
        let mut doomed: Vec<(u64, u32, String)> = Vec::new();
        let mut stopped_early = false;
        let mut freed = 0u64;
        {
            let events = self.txn.open_table(EVENTS).map_err(storage)?;
            for item in events.range((compacted + 1, 0)..=(through, u32::MAX)).map_err(storage)? {
                let (k, v) = item.map_err(storage)?;
                let (revision, seq) = k.value();
                // Stop only between revisions, so a revision is never half compacted.
                if doomed.len() >= limit && doomed.last().is_some_and(|d| d.0 != revision) {
                    stopped_early = true;
                    break;
                }
                let key = codec::event_key(v.value())?;
                // The event, and its key again in the index.
                freed += (v.value().len() + 2 * key.len() + 24) as u64;
                doomed.push((revision, seq, key));
            }
        }
        {
            let mut events = self.txn.open_table(EVENTS).map_err(storage)?;
            let mut index = self.txn.open_table(KEY_EVENTS).map_err(storage)?;
            for (revision, seq, key) in &doomed {
                events.remove((*revision, *seq)).map_err(storage)?;
                index.remove((key.as_str(), *revision, *seq)).map_err(storage)?;
            }
        }
        compacted = match doomed.last() {
            Some(last) if stopped_early => last.0,
            _ => through,
        };
        self.txn.open_table(META).map_err(storage)?.insert(META_COMPACTED, compacted).map_err(storage)?;
        self.freed += freed;
        Ok(compacted)
    }

    fn commit(self: Box<Self>) -> Result<(), StorageError> {
        if let Some(mut logged) = self.commit_durably()? {
            // Durable either way: a failure to apply it now is recovered from the log.
            if let Err(error) = logged.publish() {
                tracing::warn!(%error, "a logged batch is applied when the database is reopened");
            }
            logged.finish();
        }
        Ok(())
    }

    fn commit_durably<'t>(self: Box<Self>) -> Result<Option<Box<dyn Unpublished + 't>>, StorageError>
    where
        Self: 't,
    {
        let RedbWrite { mut txn, backend, calls, held, written, freed, .. } = *self;
        let nothing_to_log = calls.as_ref().is_some_and(Calls::is_empty);
        let held = match held {
            // A batch that changed nothing, in a transaction that carries others: nothing to
            // log, nothing more to write.
            Some(held) if nothing_to_log && held.carrying() => {
                return Ok(Some(Box::new(Logged::new(txn, held, backend))));
            }
            held => held,
        };
        // The commit that publishes writes what every batch the transaction carries wrote.
        // Refused, the transaction is dropped, so nothing of this batch reaches the file (and
        // the batches it carried are redone on their own, see `HeldLog`).
        // Batches the transaction carries are counted already (in `undurable`).
        let counted = add_freed(&txn, freed);
        if let Err(refused) = counted.and_then(|()| backend.check_named()).and_then(|()| backend.check_space(written)) {
            // The transaction goes first, as below: the batches it carried are redone in a
            // transaction of their own, which waits for this one's write slot. Left to the
            // return, `held` (declared later) would be dropped first and wait for ever.
            drop(txn);
            drop(held);
            return Err(refused);
        }
        let (Some(calls), Some(log)) = (calls, &backend.log) else {
            txn.commit().map_err(|e| backend.noted(storage(e)))?;
            return Ok(None);
        };
        // Held until the batch is published: a reopen (which replays the log) must not run
        // between the append and the commit that applies it.
        let mut held = match held {
            Some(held) => held,
            None => HeldLog::lock(log, backend)?,
        };
        match append_batch(&mut txn, &mut held, calls, written, log) {
            Ok(()) => {
                backend.undurable.fetch_add(written, Ordering::Relaxed);
                failpoint::crash_at("wal-synced");
                Ok(Some(Box::new(Logged::new(txn, held, backend))))
            }
            Err(error) => {
                // The transaction goes first: batches it carried are redone in one of their own.
                drop(txn);
                drop(held);
                Err(error)
            }
        }
    }
}

/// Appends the batch's calls to the log, durably, and marks `txn` as applying them.
pub(super) fn append_batch(
    txn: &mut WriteTransaction,
    held: &mut HeldLog<'_>,
    calls: Calls,
    written: u64,
    log: &Log,
) -> Result<(), StorageError> {
    let Some(wal) = held.wal() else {
        return Err(StorageError::Io("the write-ahead log is being reopened; retry shortly".into()));
    };
    let lsn = wal.next_lsn();
    txn.open_table(META).map_err(storage)?.insert(META_WAL_LSN, lsn).map_err(storage)?;
    txn.set_durability(Durability::None).map_err(|e| StorageError::Other(e.to_string()))?;
    let payload = calls.into_bytes();
    // Durable once this returns; visible to readers only once published.
    if let Err(error) = wal.append(&payload) {
        // Not applied unless the log could not say: the transaction is dropped unapplied.
        return Err(match error {
            LogError::MaybeWritten(e) => StorageError::OutcomeUnknown(format!(
                "{}: the write reached the log but its sync failed, and it could not be taken back, so a \
                 restart may apply it: {e}",
                log.path.display()
            )),
            other => log_error(&log.path, other),
        });
    }
    held.carry(lsn, payload, written);
    Ok(())
}
