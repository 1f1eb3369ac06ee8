//! A look at a database and its write-ahead log without changing either, for `statectl doctor`:
//! whether the file is a database of this store and what it says of itself, and whether its log
//! holds what the database needs, judged as an open would judge it (`identity.rs`).

use std::path::{Path, PathBuf};

use redb::{DatabaseError, ReadableDatabase};

use super::identity::{self, Stored};
use super::wal::{self, LogFile, Tail, Wal};
use super::{META, META_FORMAT, STORE_FORMAT, storage};

/// What the database file is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseState {
    /// It opened read-only: its format, revision and whether its log may hold writes it lacks.
    Readable { format: u64, revision: u64, log_open: bool },
    /// Another process holds it (an owner, which opened it).
    Held,
    /// It was not closed cleanly: the next open repairs it (and replays its log).
    NeedsRepair,
    /// The file is empty: made, but never filled in (the next open does).
    Empty,
    /// It is not a database this store can open: the reason.
    Unusable(String),
}

/// What the log beside it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogState {
    /// None there, and none needed.
    Absent,
    /// Sound: its size, and how many batches an open would replay (`None` when the database
    /// could not be read to tell).
    Sound { bytes: u64, to_replay: Option<u64> },
    /// An open would refuse it: why.
    Refused(String),
    /// Not looked at: why.
    NotChecked(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspection {
    pub database: DatabaseState,
    pub log_path: PathBuf,
    pub log: LogState,
}

/// Looks at the database at `db` and its log, changing neither.
pub fn inspect(db: &Path) -> Inspection {
    let log_path = wal::log_path(db);
    if std::fs::metadata(db).is_ok_and(|m| m.len() == 0) {
        let log = inspect_log(&log_path, None);
        return Inspection { database: DatabaseState::Empty, log_path, log };
    }
    let opened = redb::Builder::new().open_read_only(db);
    let (database, stored) = match opened {
        Ok(readonly) => match read_facts(&readonly) {
            Ok((format, stored)) => {
                (DatabaseState::Readable { format, revision: stored.revision, log_open: stored.log_open }, Some(stored))
            }
            Err(why) => (DatabaseState::Unusable(why), None),
        },
        Err(DatabaseError::DatabaseAlreadyOpen) => (DatabaseState::Held, None),
        Err(DatabaseError::RepairAborted) => (DatabaseState::NeedsRepair, None),
        Err(error) => (DatabaseState::Unusable(error.to_string()), None),
    };
    let log = match (&database, stored) {
        (DatabaseState::Held, _) => LogState::NotChecked("the process holding the database writes it".into()),
        (DatabaseState::Unusable(_), _) => LogState::NotChecked("the database itself cannot be opened".into()),
        (_, stored) => inspect_log(&log_path, stored.as_ref()),
    };
    Inspection { database, log_path, log }
}

fn read_facts(db: &redb::ReadOnlyDatabase) -> Result<(u64, Stored), String> {
    let txn = db.begin_read().map_err(|e| e.to_string())?;
    let meta = txn.open_table(META).map_err(|e| e.to_string())?;
    let format = meta.get(META_FORMAT).map_err(|e| storage(e).to_string())?.map_or(0, |g| g.value());
    if format > STORE_FORMAT {
        return Err(format!("its store format {format} is newer than this build understands ({STORE_FORMAT})"));
    }
    drop(meta);
    drop(txn);
    let stored = Stored::read(db).map_err(|e| e.to_string())?;
    Ok((format, stored))
}

fn inspect_log(path: &Path, stored: Option<&Stored>) -> LogState {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return match stored {
                Some(stored) if stored.log_open => {
                    LogState::Refused(identity::Distrust::Missing.describe(path, stored))
                }
                _ => LogState::Absent,
            };
        }
        Err(error) => return LogState::Refused(format!("{} cannot be read: {error}", path.display())),
    };
    let bytes = file.metadata().map_or(0, |m| m.len());
    let applied = stored.map_or(0, |s| s.applied);
    let store = stored.and_then(|s| s.store).unwrap_or(0);
    let (wal, records) = match Wal::open(Box::new(file) as Box<dyn LogFile>, path, applied + 1, store) {
        Ok(opened) => opened,
        Err(wal::LogError::Corrupt(why)) => return LogState::Refused(why),
        Err(wal::LogError::Io(e) | wal::LogError::MaybeWritten(e)) => {
            return LogState::Refused(format!("{} cannot be read: {e}", path.display()));
        }
    };
    let Some(stored) = stored else {
        // The database could not be read (it needs the repair its next open makes): the log's
        // own soundness is all that can be judged.
        let unknown = Stored::default();
        return match wal.tail() {
            Tail::Clean => LogState::Sound { bytes, to_replay: None },
            Tail::CutShort { len } => LogState::Refused(identity::Distrust::CutShort { len }.describe(path, &unknown)),
            Tail::Damaged { offset, following } => {
                LogState::Refused(identity::Distrust::Damaged { offset, following }.describe(path, &unknown))
            }
        };
    };
    match identity::judge(stored, wal.found(), wal.tail(), !records.is_empty()) {
        Some(distrust) => LogState::Refused(distrust.describe(path, stored)),
        None => {
            let to_replay = records.iter().filter(|r| r.lsn > stored.applied).count() as u64;
            LogState::Sound { bytes, to_replay: Some(to_replay) }
        }
    }
}
