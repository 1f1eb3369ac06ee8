//! Store-wide administration.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::InvalidInput;
use crate::key::validate_agent_id;

/// The phrase that must be typed to wipe the store: hard to send by accident.
pub const RESET_CONFIRMATION: &str = "DELETE EVERYTHING";

/// Wipe every key, lease, run, session and all history. Irreversible.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResetRequest {
    /// Must be exactly "DELETE EVERYTHING".
    pub confirm: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl ResetRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        if self.confirm != RESET_CONFIRMATION {
            return Err(InvalidInput::Malformed {
                argument: "confirm".into(),
                message: format!(
                    "must be exactly \"{RESET_CONFIRMATION}\" to wipe the whole store; nothing was deleted"
                ),
            });
        }
        if let Some(agent) = &self.agent_id {
            validate_agent_id("agent_id", agent)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResetResult {
    pub status: super::OkStatus,
    /// Entries removed (keys, leases, runs, steps, sessions).
    pub removed: u64,
    /// The revision of the reset; revisions keep increasing across it.
    pub revision: u64,
}
