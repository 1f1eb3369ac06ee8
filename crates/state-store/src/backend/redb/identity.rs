//! Which write-ahead log belongs to which database, and whether the one found beside it holds
//! every write the database needs.
//!
//! A database carries an identity, made once at random and kept in its `meta` table, and every
//! log header names the database it was written for. The database also records, in each of its
//! durable commits, the epoch of the log that continues it and whether that log may hold
//! acknowledged writes the file lacks (`log_open`: set by the commit that finishes an open,
//! cleared by the last commit of a clean close). Opening compares what it finds with that
//! record, so a log that was deleted, cut short, swapped with another database's or replaced
//! by an older copy is refused by name instead of silently losing what it held.

use std::path::{Path, PathBuf};

use redb::ReadableDatabase;

use super::wal::{Found, Tail};
use super::{META, META_REVISION, META_WAL_LSN, NAMES, storage};
use crate::error::StorageError;

pub(super) const META_STORE_ID: &str = "store_id";
pub(super) const META_LOG_EPOCH: &str = "log_epoch";
pub(super) const META_LOG_OPEN: &str = "log_open";
/// The database's path when it was last opened, for messages about a log left behind.
pub(super) const NAME_LAST_PATH: &str = "path";

/// What a database's last durable commit says about itself and its log.
#[derive(Debug, Clone, Default)]
pub(super) struct Stored {
    /// The last log record the file holds.
    pub applied: u64,
    pub revision: u64,
    /// `None` in a database made before identities, or in a backup (which gets its own).
    pub store: Option<u64>,
    /// The epoch of the log that continues the file, if recorded.
    pub log_epoch: Option<u64>,
    /// Whether that log may hold acknowledged writes the file lacks.
    pub log_open: bool,
    pub last_path: Option<PathBuf>,
}

impl Stored {
    pub(super) fn read(db: &impl ReadableDatabase) -> Result<Stored, StorageError> {
        let txn = db.begin_read().map_err(storage)?;
        let meta = txn.open_table(META).map_err(storage)?;
        let get = |name: &str| -> Result<Option<u64>, StorageError> {
            Ok(meta.get(name).map_err(storage)?.map(|g| g.value()))
        };
        let last_path = match txn.open_table(NAMES) {
            Ok(names) => names.get(NAME_LAST_PATH).map_err(storage)?.map(|g| PathBuf::from(g.value())),
            Err(redb::TableError::TableDoesNotExist(_)) => None,
            Err(e) => return Err(storage(e)),
        };
        Ok(Stored {
            applied: get(META_WAL_LSN)?.unwrap_or(0),
            revision: get(META_REVISION)?.unwrap_or(0),
            store: get(META_STORE_ID)?,
            log_epoch: get(META_LOG_EPOCH)?,
            log_open: get(META_LOG_OPEN)? == Some(1),
            last_path,
        })
    }
}

/// Why the log found beside a database cannot be trusted with its acknowledged writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Distrust {
    /// The database was not closed cleanly and no log is there (or an empty one).
    Missing,
    /// The log names another database, and holds records.
    Foreign { theirs: Option<u64> },
    /// This database's log, but an older epoch than the one it continued with.
    Stale { found: u64, expected: u64 },
    /// The file ends inside the log where records should go on.
    CutShort { len: u64 },
    /// Damage in the middle of the log, with acknowledged records after it.
    Damaged { offset: u64, following: u64 },
}

/// Judges the log found at open against what the database recorded. `None`: it may be
/// replayed (or started over) as it is.
pub(super) fn judge(stored: &Stored, found: Option<Found>, tail: Tail, has_records: bool) -> Option<Distrust> {
    let Some(found) = found else {
        return stored.log_open.then_some(Distrust::Missing);
    };
    // A log from before identities is this database's if the commit that gave the database its
    // identity named the epoch after it: a crash came between that commit and the new header.
    let ours = found.store == stored.store
        || (found.store.is_none() && stored.log_epoch == Some(found.epoch + 1) && stored.store.is_some());
    if !ours {
        // One that holds nothing can be taken over: nobody's writes are in it.
        return (has_records || stored.log_open).then_some(Distrust::Foreign { theirs: found.store });
    }
    // Damage before acknowledged records matters however the store was closed.
    if let Tail::Damaged { offset, following } = tail {
        return Some(Distrust::Damaged { offset, following });
    }
    if !stored.log_open {
        return None;
    }
    // A checkpoint records the next epoch durably before it writes that header, so the log may
    // be one epoch behind the record, never more.
    if let Some(expected) = stored.log_epoch
        && found.epoch + 1 < expected
    {
        return Some(Distrust::Stale { found: found.epoch, expected });
    }
    match tail {
        Tail::CutShort { len } => Some(Distrust::CutShort { len }),
        Tail::Damaged { offset, following } => Some(Distrust::Damaged { offset, following }),
        Tail::Clean => None,
    }
}

impl Distrust {
    /// What happened, in words, for the refusal.
    pub(super) fn describe(&self, log: &Path, stored: &Stored) -> String {
        let log = log.display();
        let elsewhere = stored
            .last_path
            .as_ref()
            .map(|p| super::wal::log_path(p))
            .filter(|p| p.display().to_string() != log.to_string())
            .map(|p| format!(" (it was last opened with its log at {})", p.display()))
            .unwrap_or_default();
        match self {
            Distrust::Missing => format!(
                "it was not closed cleanly, and its write-ahead log {log} is missing or empty{elsewhere}: writes \
                 acknowledged after its last checkpoint (revision {}) were only in that log",
                stored.revision
            ),
            Distrust::Foreign { theirs } => format!(
                "the write-ahead log {log} belongs to another database ({}), not to this one ({}){elsewhere}",
                theirs.map_or_else(|| "one older than store identities".to_owned(), |id| format!("store {id:016x}")),
                stored.store.map_or_else(|| "no identity yet".to_owned(), |id| format!("store {id:016x}"))
            ),
            Distrust::Stale { found, expected } => format!(
                "the write-ahead log {log} is an older copy of this database's log (epoch {found}, where the \
                 database continued with epoch {expected}): the writes of the newer one are not in it"
            ),
            Distrust::CutShort { len } => format!(
                "the write-ahead log {log} was cut short ({len} bytes, where its records should go on): \
                 acknowledged writes at its end are gone"
            ),
            Distrust::Damaged { offset, following } => format!(
                "the write-ahead log {log} is damaged at offset {offset}, and {following} acknowledged write \
                 batches follow the damage: opening without them loses them (the writes before the damage are \
                 kept). Restoring the last backup loses what came after it instead"
            ),
        }
    }
}
