//! Sessions: versioned context snapshots an agent saves and restores by id.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Paged, present};
use crate::error::InvalidInput;
use crate::key::{validate_agent_id, validate_key, validate_prefix};
use crate::limits::Limits;

/// Save a snapshot; every save is kept as a new version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionSaveRequest {
    pub session_id: String,
    /// Any JSON: conversation state, plan, notes.
    pub context: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl SessionSaveRequest {
    pub fn validate(&self, limits: &Limits) -> Result<(), InvalidInput> {
        validate_key("session_id", &self.session_id)?;
        limits.check_value("context", &self.context)?;
        if let Some(agent) = &self.agent_id {
            validate_agent_id("agent_id", agent)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionSaveResult {
    pub status: super::OkStatus,
    pub session_id: String,
    /// 1 for the first save, +1 for each after.
    pub version: u64,
    pub revision: u64,
}

/// Restore the latest snapshot, or a given version.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionRestoreRequest {
    pub session_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub version: Option<u64>,
}

impl SessionRestoreRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        validate_key("session_id", &self.session_id)?;
        if self.version == Some(0) {
            return Err(InvalidInput::OutOfRange {
                argument: "version",
                message: "must be 1 or more (omit it for the latest)".into(),
            });
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionRestoreResult {
    pub status: super::ReadStatus,
    pub session_id: String,
    /// The version restored (0 when not found).
    pub version: u64,
    /// The newest version saved (0 when the session does not exist).
    pub latest_version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub context: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    pub revision: u64,
}

/// Sessions by id, a page at a time.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionListRequest {
    #[serde(default)]
    pub prefix: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

impl SessionListRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        validate_prefix("prefix", &self.prefix)?;
        self.validate_page()
    }
}

super::paged!(SessionListRequest);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionInfo {
    pub session_id: String,
    pub latest_version: u64,
    pub updated_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionListResult {
    pub sessions: Vec<SessionInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    pub revision: u64,
}
