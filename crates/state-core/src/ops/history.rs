//! Reading the change log.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::kv::page_size;
use super::present;
use crate::entry::{Event, EventKind};
use crate::error::InvalidInput;
use crate::key::{validate_key, validate_prefix};

pub const DEFAULT_HISTORY_LIMIT: usize = 50;

/// Which keys a history read covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyFilter {
    All,
    Exact(String),
    Prefix(String),
}

impl KeyFilter {
    pub fn matches(&self, key: &str) -> bool {
        match self {
            KeyFilter::All => true,
            KeyFilter::Exact(k) => k == key,
            KeyFilter::Prefix(p) => key.starts_with(p.as_str()),
        }
    }
}

/// Changes in revision order: the latest `n`, or the first `n` after `since_revision`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryRequest {
    /// Only this key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Only keys with this prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Only events after this revision (pass the last revision you have seen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_revision: Option<u64>,
    /// Most events to return, 1 to 1000 (default 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<usize>,
    /// Include values of puts (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_values: Option<bool>,
}

impl HistoryRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        if self.key.is_some() && self.prefix.is_some() {
            return Err(InvalidInput::MutuallyExclusive { first: "key", second: "prefix" });
        }
        if let Some(key) = &self.key {
            validate_key("key", key)?;
        }
        if let Some(prefix) = &self.prefix {
            validate_prefix("prefix", prefix)?;
        }
        self.limit()?;
        Ok(())
    }

    pub fn filter(&self) -> KeyFilter {
        match (&self.key, &self.prefix) {
            (Some(key), _) => KeyFilter::Exact(key.clone()),
            (None, Some(prefix)) if !prefix.is_empty() => KeyFilter::Prefix(prefix.clone()),
            _ => KeyFilter::All,
        }
    }

    pub fn limit(&self) -> Result<usize, InvalidInput> {
        page_size("n", self.n, DEFAULT_HISTORY_LIMIT)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HistoryOp {
    Put,
    Delete,
    Expired,
}

impl From<EventKind> for HistoryOp {
    fn from(kind: EventKind) -> HistoryOp {
        match kind {
            EventKind::Put => HistoryOp::Put,
            EventKind::Delete => HistoryOp::Delete,
            EventKind::Expired => HistoryOp::Expired,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HistoryEvent {
    pub revision: u64,
    pub key: String,
    pub op: HistoryOp,
    /// Version written (put) or removed (delete, expired).
    pub version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    pub time: String,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub value: Option<Value>,
}

impl HistoryEvent {
    pub fn new(event: Event, include_value: bool) -> HistoryEvent {
        HistoryEvent {
            revision: event.revision,
            key: event.key,
            op: event.kind.into(),
            version: event.version,
            agent_id: event.agent_id,
            time: event.time.to_rfc3339(),
            value: if include_value { event.value } else { None },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HistoryResult {
    /// Oldest first.
    pub events: Vec<HistoryEvent>,
    /// True if more matching events exist beyond this page.
    pub more: bool,
    /// Current store revision.
    pub revision: u64,
    /// History at or below this revision has been compacted away.
    pub compacted_revision: u64,
}
