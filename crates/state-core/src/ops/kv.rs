//! Single-key and listing operations.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{DeleteStatus, Paged, ReadStatus, WriteStatus, present};
use crate::cursor;
use crate::entry::{Entry, Event, EventKind};
use crate::error::InvalidInput;
use crate::key::{validate_agent_id, validate_key, validate_prefix};
use crate::keyspace;
use crate::limits::{Limits, MAX_BATCH_KEYS, MAX_PAGE, check_count};
use crate::time::{UnixMillis, ttl_millis};

/// Read a key, now or as of an earlier version or revision.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetRequest {
    pub key: String,
    /// Read this past version (from history) instead of the current one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub version: Option<u64>,
    /// Read the key as it was at this store revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
}

impl GetRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        validate_key("key", &self.key)?;
        if self.version.is_some() && self.revision.is_some() {
            return Err(InvalidInput::MutuallyExclusive { first: "version", second: "revision" });
        }
        if self.version == Some(0) {
            return Err(InvalidInput::OutOfRange {
                argument: "version",
                message: "must be 1 or more: versions start at 1 (omit it to read the current value)".into(),
            });
        }
        Ok(())
    }
}

/// A key's value with its version metadata, or `not_found`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GetResult {
    pub status: ReadStatus,
    pub key: String,
    /// Version of the entry; 0 when not found.
    pub version: u64,
    /// Store revision this read reflects.
    pub revision: u64,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub value: Option<Value>,
    /// Revision of the write that produced this version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mod_revision: Option<u64>,
    /// Revision at which the key was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_revision: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

impl GetResult {
    pub fn found(entry: Entry, revision: u64) -> GetResult {
        GetResult {
            status: ReadStatus::Ok,
            key: entry.key,
            version: entry.version,
            revision,
            value: Some(entry.value),
            mod_revision: Some(entry.mod_revision),
            create_revision: Some(entry.create_revision),
            updated_at: Some(entry.updated_at.to_rfc3339()),
            expires_at: entry.expires_at.map(UnixMillis::to_rfc3339),
            agent_id: entry.agent_id,
        }
    }

    pub fn not_found(key: String, revision: u64) -> GetResult {
        GetResult {
            status: ReadStatus::NotFound,
            key,
            version: 0,
            revision,
            value: None,
            mod_revision: None,
            create_revision: None,
            updated_at: None,
            expires_at: None,
            agent_id: None,
        }
    }

    /// The key as a history event left it: a put shows its value, a delete or expiry shows
    /// that the key did not exist at that point.
    pub fn from_event(key: String, event: Option<Event>, revision: u64) -> GetResult {
        match event {
            Some(event) if event.kind == EventKind::Put => GetResult {
                status: ReadStatus::Ok,
                key,
                version: event.version,
                revision,
                value: event.value,
                mod_revision: Some(event.revision),
                create_revision: None,
                updated_at: Some(event.time.to_rfc3339()),
                expires_at: None,
                agent_id: event.agent_id,
            },
            _ => GetResult::not_found(key, revision),
        }
    }
}

/// Write a key, optionally only if its version matches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetRequest {
    pub key: String,
    /// Any JSON value.
    pub value: Value,
    /// Absent: write unconditionally. 0: create only. N: only if the current version is N.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_version: Option<u64>,
    /// Seconds until the key expires (fractions allowed). Each write sets or clears the TTL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<f64>,
    /// Who is writing; kept in history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Refuse the write (status fenced) unless `token` is this lease's current token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<String>,
    /// Your fencing token for `lease`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl SetRequest {
    pub fn validate(&self, limits: &Limits) -> Result<(), InvalidInput> {
        validate_key("key", &self.key)?;
        limits.check_value("value", &self.value)?;
        if let Some(ttl) = self.ttl_seconds {
            ttl_millis("ttl_seconds", ttl)?;
        }
        if let Some(agent) = &self.agent_id {
            validate_agent_id("agent_id", agent)?;
        }
        validate_fence(&self.lease, self.token)
    }

    /// A plain write: no guard, no TTL, no agent.
    pub fn new(key: impl Into<String>, value: Value) -> SetRequest {
        SetRequest {
            key: key.into(),
            value,
            expected_version: None,
            ttl_seconds: None,
            agent_id: None,
            lease: None,
            token: None,
            request_id: None,
        }
    }
}

/// `lease` and `token` come together, or not at all.
pub(crate) fn validate_fence(lease: &Option<String>, token: Option<u64>) -> Result<(), InvalidInput> {
    match (lease, token) {
        (Some(lease), Some(_)) => validate_key("lease", lease),
        (None, None) => Ok(()),
        (Some(_), None) => Err(InvalidInput::Malformed {
            argument: "token".into(),
            message: "is missing: a write guarded by `lease` needs the token lease_acquire returned".into(),
        }),
        (None, Some(_)) => Err(InvalidInput::Malformed {
            argument: "lease".into(),
            message: "is missing: `token` guards a write only together with the lease it came from".into(),
        }),
    }
}

/// The new version, or a conflict carrying the current version and value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SetResult {
    pub status: WriteStatus,
    pub key: String,
    /// On ok, the new version. On conflict, the current one (0: the key does not exist):
    /// retry with it as `expected_version`.
    pub version: u64,
    /// On ok, the revision of this write; on conflict, the current store revision.
    pub revision: u64,
    /// On conflict, the current value (absent when the key does not exist).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub value: Option<Value>,
    /// On conflict, the version that was expected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_version: Option<u64>,
    /// Why a write was fenced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Delete a key, optionally only if its version matches.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteRequest {
    pub key: String,
    /// Only delete if the current version is N (N >= 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub expected_version: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Refuse the delete (status fenced) unless `token` is this lease's current token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl DeleteRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        validate_key("key", &self.key)?;
        if self.expected_version == Some(0) {
            return Err(InvalidInput::OutOfRange {
                argument: "expected_version",
                message:
                    "must be 1 or more for a delete (0 would mean 'only if absent'); omit it to delete unconditionally"
                        .into(),
            });
        }
        if let Some(agent) = &self.agent_id {
            validate_agent_id("agent_id", agent)?;
        }
        validate_fence(&self.lease, self.token)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeleteResult {
    pub status: DeleteStatus,
    pub key: String,
    /// On ok, the version that was deleted; on conflict, the current one; 0 when not found.
    pub version: u64,
    /// On ok, the revision of this delete; otherwise the current store revision.
    pub revision: u64,
    /// On conflict, the current value.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub value: Option<Value>,
    /// Why a delete was fenced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// List keys under a prefix in key order, a page at a time.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListRequest {
    /// Only keys starting with this ("" = all).
    #[serde(default)]
    pub prefix: String,
    /// Page size, 1 to 1000 (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<usize>,
    /// `next_cursor` from the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Include each value (default false: keys and versions only).
    #[serde(default)]
    pub include_values: bool,
    /// One character, e.g. "/": keys holding it past the prefix are grouped into `prefixes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delimiter: Option<String>,
}

pub const DEFAULT_LIST_LIMIT: usize = 100;

super::paged!(ListRequest);

impl ListRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        validate_prefix("prefix", &self.prefix)?;
        if let Some(delimiter) = &self.delimiter {
            let mut chars = delimiter.chars();
            if !matches!((chars.next(), chars.next()), (Some(c), None) if !c.is_control()) {
                return Err(InvalidInput::Malformed {
                    argument: "delimiter".into(),
                    message: format!("must be one printable character, such as \"/\"; got {delimiter:?}"),
                });
            }
        }
        self.validate_page()
    }

    /// The folder `key` is listed in when a delimiter groups keys: the prefix and what follows
    /// it up to and including the first delimiter; `None` for a key listed by itself.
    pub fn folder_of<'k>(&self, key: &'k str) -> Option<&'k str> {
        let delimiter = self.delimiter.as_deref().filter(|d| !d.is_empty())?;
        let rest = key.strip_prefix(self.prefix.as_str())?;
        rest.find(delimiter).map(|at| &key[..self.prefix.len() + at + delimiter.len()])
    }

    /// The key the scan starts after. User prefixes are printable, so only the empty prefix User prefixes are printable, so only the empty prefix
    /// could reach the store's own records (leases, request records, index postings), which
    /// all sort before [`keyspace::USER_KEYS_AFTER`]: the scan starts past them, whatever
    /// key a crafted cursor names.
    pub fn scan_after(&self) -> Result<Option<String>, InvalidInput> {
        // A page that ended on a folder goes on after everything in it.
        let after = self.start_after()?.map(|key| match self.folder_of(&key) {
            Some(folder) if folder == key => past_folder(folder),
            _ => key,
        });
        if !self.prefix.is_empty() {
            return Ok(after);
        }
        let floor = keyspace::USER_KEYS_AFTER;
        Ok(Some(after.filter(|key| key.as_str() > floor).unwrap_or_else(|| floor.to_owned())))
    }
}

pub(crate) fn page_size(argument: &'static str, asked: Option<usize>, default: usize) -> Result<usize, InvalidInput> {
    match asked {
        None => Ok(default),
        Some(n) if (1..=MAX_PAGE).contains(&n) => Ok(n),
        Some(n) => Err(InvalidInput::OutOfRange {
            argument,
            message: format!("must be between 1 and {MAX_PAGE}; got {n} (use the cursor to page through more)"),
        }),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ListedEntry {
    pub key: String,
    pub version: u64,
    pub mod_revision: u64,
    pub updated_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub value: Option<Value>,
}

impl ListedEntry {
    pub fn new(entry: Entry, include_value: bool) -> ListedEntry {
        ListedEntry {
            key: entry.key,
            version: entry.version,
            mod_revision: entry.mod_revision,
            updated_at: entry.updated_at.to_rfc3339(),
            expires_at: entry.expires_at.map(UnixMillis::to_rfc3339),
            value: include_value.then_some(entry.value),
        }
    }
}

/// A key past every key in `folder`: keys are at most [`crate::limits::MAX_KEY_BYTES`] long
/// and U+10FFFF encodes as the greatest UTF-8 sequence, so no key starting with `folder`
/// sorts after it (byte order, as every backend sorts keys).
pub fn past_folder(folder: &str) -> String {
    let mut key = String::with_capacity(folder.len() + crate::limits::MAX_KEY_BYTES + 4);
    key.push_str(folder);
    key.extend(std::iter::repeat_n('\u{10FFFF}', crate::limits::MAX_KEY_BYTES / 4 + 1));
    key
}

/// One line of a listing: a key, or a folder of keys grouped by the delimiter.
#[derive(Debug, Clone, PartialEq)]
pub enum Listed {
    Entry(Entry),
    Folder(String),
}

impl Listed {
    fn name(&self) -> &str {
        match self {
            Listed::Entry(entry) => &entry.key,
            Listed::Folder(folder) => folder,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ListResult {
    pub entries: Vec<ListedEntry>,
    /// With a delimiter: this page's folders (list one as a prefix to see inside).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefixes: Vec<String>,
    /// Pass as `cursor` to get the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Store revision this listing reflects.
    pub revision: u64,
}

impl ListResult {
    /// Builds a page from up to `page_size + 1` live entries: the extra one only proves that
    /// another page exists.
    pub fn page(mut items: Vec<Listed>, page_size: usize, include_values: bool, revision: u64) -> ListResult {
        let next_cursor = if items.len() > page_size {
            items.truncate(page_size);
            items.last().map(|last| cursor::encode(last.name()))
        } else {
            None
        };
        let mut result = ListResult { entries: Vec::new(), prefixes: Vec::new(), next_cursor, revision };
        for item in items {
            match item {
                Listed::Entry(entry) => result.entries.push(ListedEntry::new(entry, include_values)),
                Listed::Folder(folder) => result.prefixes.push(folder),
            }
        }
        result
    }
}

/// Read several keys from one consistent snapshot.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchGetRequest {
    /// 1 to 1000 keys.
    pub keys: Vec<String>,
}

impl BatchGetRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        if self.keys.is_empty() {
            return Err(InvalidInput::Malformed {
                argument: "keys".into(),
                message: "is empty: give at least one key".into(),
            });
        }
        check_count("keys", self.keys.len(), MAX_BATCH_KEYS)?;
        for (i, key) in self.keys.iter().enumerate() {
            validate_key(&format!("keys[{i}]"), key)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BatchGetResult {
    /// Store revision of the snapshot all entries were read from.
    pub revision: u64,
    /// One result per requested key, in request order.
    pub entries: Vec<GetResult>,
}

#[cfg(test)]
mod tests;
