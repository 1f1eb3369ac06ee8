//! Opening a database whose write-ahead log was refused (missing after a crash, cut short,
//! another database's, an older copy), once the user accepts losing the writes only that log
//! held. What `statectl recover` runs; the store's refusal names it.

use std::path::{Path, PathBuf};

use state_store::{OpenError, RedbBackend};

/// What a recovery found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovery {
    /// The database opens as it is: there was nothing to recover.
    NotNeeded,
    /// The log was refused for this reason, and nothing was changed (`accept_lost_writes` was
    /// not given).
    WouldLose { why: String, log: PathBuf },
    /// The database was opened without the writes the log lacked, and closed cleanly: it opens
    /// on its own from now on.
    Recovered { why: String },
}

/// Opens the database at `db` alone (an owner or any other process holding it is refused by
/// its lock), and, only if its log was refused and `accept_lost_writes` says so, opens it
/// without the writes that log lacks.
pub fn recover_database(db: &Path, accept_lost_writes: bool) -> Result<Recovery, OpenError> {
    let why = match RedbBackend::open_as(db, "recovery") {
        Ok(_) => return Ok(Recovery::NotNeeded),
        Err(OpenError::LogDistrusted { why, log, .. }) if !accept_lost_writes => {
            return Ok(Recovery::WouldLose { why, log });
        }
        Err(OpenError::LogDistrusted { why, .. }) => why,
        Err(other) => return Err(other),
    };
    drop(RedbBackend::open_accepting_log_loss(db)?);
    Ok(Recovery::Recovered { why })
}
