//! Moving a store's contents out and back in: `store_export` pages out every record as it is
//! stored; `store_import` writes such records into a store without overwriting what differs.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Paged;
use crate::error::InvalidInput;
use crate::key::{validate_agent_id, validate_key};
use crate::keyspace::{self, Space};
use crate::time::{UnixMillis, parse_rfc3339};

/// Most records one import call carries: one transaction, so a chunk is all or nothing.
pub const MAX_IMPORT_RECORDS: usize = 1000;
/// The import chunk clients send by default.
pub const DEFAULT_IMPORT_CHUNK: usize = 500;

/// One stored record exactly as a dump carries it. `key` is the stored key: user keys as
/// they are, the store's own records (leases, runs, sessions, checkpoints, notes) beginning
/// with U+0001. Times are RFC 3339 UTC with milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DumpedRecord {
    pub key: String,
    pub value: Value,
    pub version: u64,
    /// The source store's revisions; an import writes at its own revision instead.
    #[serde(default)]
    pub create_revision: u64,
    #[serde(default)]
    pub mod_revision: u64,
    pub updated_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

/// A page of every live record, in key order. Search-index records are left out (an import
/// rebuilds them) and so are idempotency records.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportRequest {
    /// Page size, 1 to 1000 (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<usize>,
    /// `next_cursor` from the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

super::paged!(ExportRequest);

impl ExportRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        self.validate_page()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExportResult {
    pub records: Vec<DumpedRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// The store revision the page was read at.
    pub revision: u64,
}

/// Write dumped records: absent ones are created with their version, time and writer; ones
/// already there with the same value and version are left alone; any other is a conflict,
/// reported and not written.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportRequest {
    /// At most 1000, applied in one transaction.
    pub records: Vec<DumpedRecord>,
    /// Decide every record, write none.
    #[serde(default)]
    pub dry_run: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl ImportRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        if self.records.len() > MAX_IMPORT_RECORDS {
            return Err(InvalidInput::OutOfRange {
                argument: "records",
                message: format!("holds {} records; send at most {MAX_IMPORT_RECORDS} per call", self.records.len()),
            });
        }
        if let Some(agent) = &self.agent_id {
            validate_agent_id("agent_id", agent)?;
        }
        for (i, record) in self.records.iter().enumerate() {
            check_record(record)
                .map_err(|message| InvalidInput::Malformed { argument: format!("records[{i}]"), message })?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ImportResult {
    /// Written (or, on a dry run, that would be).
    pub imported: u64,
    /// Already there with the same value and version.
    pub unchanged: u64,
    /// Past their expiry: left out.
    pub expired: u64,
    /// Present with another value or version: not written.
    pub conflicts: Vec<ImportConflict>,
    pub dry_run: bool,
    pub revision: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ImportConflict {
    pub key: String,
    /// The version stored here.
    pub current_version: u64,
    /// The version the dump carries.
    pub incoming_version: u64,
}

/// Whether a dump carries the record stored under `key`.
pub fn carried(key: &str) -> bool {
    !matches!(
        keyspace::classify(key).0,
        Space::Posting | Space::IndexStats | Space::IndexedTerms | Space::Request | Space::Store
    )
}

/// The largest version or revision a dump may carry: 2^53, the largest integer every JSON
/// reader keeps exactly.
pub const MAX_IMPORTED_NUMBER: u64 = 1 << 53;

/// Why a dumped record cannot be imported, if it cannot.
pub(crate) fn check_record(record: &DumpedRecord) -> Result<(), String> {
    if keyspace::is_system(&record.key) {
        let (space, id) = keyspace::classify(&record.key);
        if id.is_empty() || !carried(&record.key) || space == Space::Kv {
            return Err(format!("key {:?} is not a record a dump carries", record.key));
        }
        keyspace::check_shape(&record.key)?;
    } else {
        validate_key("key", &record.key).map_err(|e| e.to_string())?;
    }
    if record.version == 0 {
        return Err(format!("key {:?}: version must be 1 or more", record.key));
    }
    // Numbers a store reaches by writing, far from where adding one would wrap: a version or
    // revision near 2^64 would wrap the store's revision (fencing tokens going backwards) or a
    // key's version to 0.
    for (field, number) in [
        ("version", record.version),
        ("create_revision", record.create_revision),
        ("mod_revision", record.mod_revision),
    ] {
        if number > MAX_IMPORTED_NUMBER {
            return Err(format!(
                "key {:?}: `{field}` {number} is beyond {MAX_IMPORTED_NUMBER} (2^53), more than any store reaches",
                record.key
            ));
        }
    }
    time("updated_at", &record.updated_at)?;
    if let Some(expires_at) = &record.expires_at {
        time("expires_at", expires_at)?;
    }
    if let Some(agent) = &record.agent_id {
        validate_agent_id("agent_id", agent).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn time(field: &str, text: &str) -> Result<UnixMillis, String> {
    parse_rfc3339(text).ok_or_else(|| format!("`{field}` is not an RFC 3339 time: {text:?}"))
}
