//! Watching: every change under a key or prefix after a revision, in order, as it happens.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::history::{HistoryEvent, HistoryKind, HistoryRequest, KeyFilter};
use super::kv::page_size;
use crate::error::InvalidInput;

/// How long `state_watch` waits by default, and at most: clients cut tool calls at 60 s.
pub const DEFAULT_WAIT_SECONDS: f64 = 25.0;
pub const MAX_WAIT_SECONDS: f64 = 55.0;
pub const DEFAULT_WATCH_EVENTS: usize = 100;

/// Wait for changes after a revision under a key or prefix (or of a lease, run or session).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WatchRequest {
    /// Only this kind of record, as history_log; kv with key/prefix, else everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<HistoryKind>,
    /// Only this key (or lease resource, run id, session id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Changes after this revision: pass the `revision` of your last read or watch. Absent:
    /// changes from now on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_revision: Option<u64>,
    /// Seconds to wait for a change (default 25, at most 55).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<f64>,
    /// Most events returned, 1 to 1000 (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub max_events: Option<usize>,
    /// Include values of puts (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_values: Option<bool>,
}

impl WatchRequest {
    /// A watch of `kind` (or kv) on one key, from now on.
    pub fn key(kind: Option<HistoryKind>, key: impl Into<String>) -> WatchRequest {
        WatchRequest { kind, key: Some(key.into()), ..WatchRequest::default() }
    }

    /// The same selection as a history read, so watch and `history_log` agree exactly.
    pub fn as_history(&self) -> HistoryRequest {
        HistoryRequest {
            kind: self.kind,
            key: self.key.clone(),
            prefix: self.prefix.clone(),
            since_revision: self.after_revision,
            n: None,
            include_values: self.include_values,
        }
    }

    pub fn validate(&self) -> Result<(), InvalidInput> {
        self.as_history().validate()?;
        self.wait_millis()?;
        self.limit()?;
        Ok(())
    }

    /// The stored keys this watch covers.
    pub fn filter(&self) -> KeyFilter {
        self.as_history().filter()
    }

    pub fn include_values(&self) -> bool {
        self.include_values.unwrap_or(true)
    }

    /// How long `state_watch` waits, in milliseconds.
    pub fn wait_millis(&self) -> Result<u64, InvalidInput> {
        let seconds = self.timeout_seconds.unwrap_or(DEFAULT_WAIT_SECONDS);
        if !(0.0..=MAX_WAIT_SECONDS).contains(&seconds) || seconds.is_nan() {
            return Err(InvalidInput::OutOfRange {
                argument: "timeout_seconds",
                message: format!(
                    "must be between 0 and {MAX_WAIT_SECONDS}: clients cut tool calls at 60 s, so wait again with the returned revision instead"
                ),
            });
        }
        Ok((seconds * 1000.0) as u64)
    }

    pub fn limit(&self) -> Result<usize, InvalidInput> {
        page_size("max_events", self.max_events, DEFAULT_WATCH_EVENTS)
    }
}

/// The changes of one revision that a watch covers. A watch delivers whole revisions, so
/// resuming after a revision never splits one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WatchBatch {
    pub revision: u64,
    pub events: Vec<HistoryEvent>,
}

/// What `state_watch` returns: the changes, and the revision to wait after next time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WatchResult {
    /// Oldest first; empty when nothing changed before the timeout.
    pub events: Vec<HistoryEvent>,
    /// Pass as `after_revision` next time.
    pub revision: u64,
    /// Nothing changed before the timeout.
    pub timed_out: bool,
}

#[cfg(test)]
mod tests;
