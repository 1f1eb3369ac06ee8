//! Read operations, run on a snapshot. Reads never enter the write queue; because writes are
//! answered only after they commit, a client always reads its own acknowledged writes.

use state_core::UnixMillis;
use state_core::entry::{Entry, Event, EventKind, live};
use state_core::error::InvalidInput;
use state_core::limits::{MAX_PAGE_VALUE_BYTES, json_len};
use state_core::ops::Paged;
use state_core::ops::history::{HistoryEvent, HistoryRequest, HistoryResult, KeyFilter};
use state_core::ops::kv::{
    BatchGetRequest, BatchGetResult, GetRequest, GetResult, ListRequest, ListResult, Listed, past_folder,
};

use crate::backend::{Order, ReadTxn};
use crate::error::EngineError;

pub(super) fn get(txn: &dyn ReadTxn, req: &GetRequest, now: UnixMillis) -> Result<GetResult, EngineError> {
    match (req.version, req.revision) {
        (Some(version), _) => get_version(txn, &req.key, version, txn.revision()?),
        (None, Some(at)) => get_at_revision(txn, &req.key, at, txn.revision()?),
        (None, None) => {
            // The key before the revision: a backend whose snapshot begins with its first read
            // (the PostgreSQL one) sends both in one round trip. Both come from one snapshot.
            let entry = txn.get(&req.key)?;
            Ok(current(&req.key, entry, now, txn.revision()?))
        }
    }
}

/// A key's current value as a read answers it: hidden once expired.
pub(super) fn current(key: &str, entry: Option<Entry>, now: UnixMillis, revision: u64) -> GetResult {
    match live(entry, now) {
        Some(entry) => GetResult::found(entry, revision),
        None => GetResult::not_found(key.to_owned(), revision),
    }
}

/// The value a key had at `version`, in the most recent lifetime of the key that reached it.
fn get_version(txn: &dyn ReadTxn, key: &str, version: u64, revision: u64) -> Result<GetResult, EngineError> {
    if let Some(entry) = txn.get(key)?.filter(|e| e.version == version) {
        return Ok(GetResult::found(entry, revision));
    }
    let compacted = txn.compacted_revision()?;
    let mut found = None;
    let mut highest_seen = 0;
    txn.history(&KeyFilter::Exact(key.to_owned()), compacted + 1..=revision, Order::Descending, &mut |event| {
        highest_seen = highest_seen.max(event.version);
        if event.kind == EventKind::Put && event.version == version {
            found = Some(event);
            return false;
        }
        true
    })?;
    match found {
        Some(event) => Ok(GetResult::from_event(key.to_owned(), Some(event), revision)),
        None if compacted > 0 && version < highest_seen => {
            Err(EngineError::Compacted { requested: version, compacted_revision: compacted })
        }
        None => Ok(GetResult::not_found(key.to_owned(), revision)),
    }
}

/// The key as it stood right after revision `at` committed (etcd's read at a revision).
fn get_at_revision(txn: &dyn ReadTxn, key: &str, at: u64, revision: u64) -> Result<GetResult, EngineError> {
    if at > revision {
        return Err(InvalidInput::OutOfRange {
            argument: "revision",
            message: format!("is {at}, ahead of the store's current revision {revision}"),
        }
        .into());
    }
    let compacted = txn.compacted_revision()?;
    if compacted > 0 && at <= compacted {
        return Err(EngineError::Compacted { requested: at, compacted_revision: compacted });
    }
    let mut last_at_or_before: Option<Event> = None;
    let mut first_after: Option<Event> = None;
    txn.history(&KeyFilter::Exact(key.to_owned()), compacted + 1..=revision, Order::Descending, &mut |event| {
        if event.revision <= at {
            last_at_or_before = Some(event);
            false
        } else {
            first_after = Some(event);
            true
        }
    })?;
    if last_at_or_before.is_some() {
        return Ok(GetResult::from_event(key.to_owned(), last_at_or_before, revision));
    }
    // The key did not change in (compacted, at]: its state then is what it was before.
    match first_after {
        // Its next change created it, so it did not exist at `at`.
        Some(next) if next.kind == EventKind::Put && next.version == 1 => {
            Ok(GetResult::not_found(key.to_owned(), revision))
        }
        // It existed, but the write that set its value has been compacted away.
        Some(_) if compacted > 0 => Err(EngineError::Compacted { requested: at, compacted_revision: compacted }),
        Some(_) => Ok(GetResult::not_found(key.to_owned(), revision)),
        // It has not changed since `at` at all: the stored entry (if any) is the answer.
        None => Ok(match txn.get(key)? {
            Some(entry) if entry.mod_revision <= at => GetResult::found(entry, revision),
            _ => GetResult::not_found(key.to_owned(), revision),
        }),
    }
}

pub(super) fn batch_get(
    txn: &dyn ReadTxn,
    req: &BatchGetRequest,
    now: UnixMillis,
) -> Result<BatchGetResult, EngineError> {
    let stored = req.keys.iter().map(|key| txn.get(key)).collect::<Result<Vec<_>, _>>()?;
    let revision = txn.revision()?;
    let entries = req.keys.iter().zip(stored).map(|(key, entry)| current(key, entry, now, revision)).collect();
    Ok(BatchGetResult { revision, entries })
}

pub(super) fn list(txn: &dyn ReadTxn, req: &ListRequest, now: UnixMillis) -> Result<ListResult, EngineError> {
    let revision = txn.revision()?;
    let page = req.page_size()?;
    let mut after = req.scan_after()?;
    let mut items = Vec::with_capacity(page.min(256) + 1);
    // With values, a page also ends once it carries enough bytes; the item after it, read
    // only to know there is more, is dropped by `ListResult::page`.
    let mut value_bytes = 0;
    let mut page_len = page;
    // A folder (keys grouped by the delimiter) is listed at its first live key, and the scan
    // starts again past everything in it: a folder of a million keys costs one seek.
    loop {
        let mut skip_to = None;
        txn.scan(&req.prefix, after.as_deref(), &mut |entry| {
            if entry.is_expired(now) {
                return true;
            }
            let item = match req.folder_of(&entry.key) {
                Some(folder) => {
                    skip_to = Some(past_folder(folder));
                    Listed::Folder(folder.to_owned())
                }
                None => Listed::Entry(entry),
            };
            if items.len() == page_len {
                items.push(item);
                skip_to = None;
                return false;
            }
            if let (true, Listed::Entry(entry)) = (req.include_values, &item) {
                value_bytes += json_len(&entry.value);
                if value_bytes >= MAX_PAGE_VALUE_BYTES {
                    page_len = items.len() + 1;
                }
            }
            items.push(item);
            skip_to.is_none()
        })?;
        match skip_to {
            Some(next) if items.len() <= page_len => after = Some(next),
            _ => break,
        }
    }
    Ok(ListResult::page(items, page_len, req.include_values, revision))
}

/// History pages never split a revision: a transaction's events arrive together, so paging
/// with `since_revision` can never skip part of one. A page may exceed `n` to finish one.
pub(super) fn history(txn: &dyn ReadTxn, req: &HistoryRequest) -> Result<HistoryResult, EngineError> {
    let revision = txn.revision()?;
    let compacted = txn.compacted_revision()?;
    let limit = req.limit()?;
    let filter = req.filter();
    let include_values = req.include_values.unwrap_or(true);
    let mut events: Vec<Event> = Vec::new();
    let mut more = false;
    let mut value_bytes = 0;
    let mut collect = |event: Event| {
        let full = events.len() >= limit || value_bytes >= MAX_PAGE_VALUE_BYTES;
        if full && events.last().is_some_and(|last| last.revision != event.revision) {
            more = true;
            return false;
        }
        if include_values {
            value_bytes += event.value.as_ref().map_or(0, json_len);
        }
        events.push(event);
        true
    };
    match req.since_revision {
        Some(since) if since < compacted => {
            return Err(EngineError::Compacted { requested: since + 1, compacted_revision: compacted });
        }
        Some(since) if since >= revision => {}
        Some(since) => txn.history(&filter, since + 1..=revision, Order::Ascending, &mut collect)?,
        None => {
            txn.history(&filter, compacted + 1..=revision, Order::Descending, &mut collect)?;
            // Descending delivery keeps each revision's events in append order; a stable sort
            // puts revisions oldest first without disturbing that.
            events.sort_by_key(|e| e.revision);
        }
    }
    Ok(HistoryResult {
        events: events.into_iter().map(|e| HistoryEvent::new(e, include_values)).collect(),
        more,
        revision,
        compacted_revision: compacted,
    })
}
