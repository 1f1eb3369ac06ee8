//! What the ids under a prefix hold: the figure a storage quota is held to, and what an
//! operator asks before giving a team one.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::InvalidInput;
use crate::key::validate_prefix;

/// Measure the keys and bytes stored under an id prefix.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UsageRequest {
    /// "" measures the whole store.
    #[serde(default)]
    pub prefix: String,
}

impl UsageRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        validate_prefix("prefix", &self.prefix)
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct UsageResult {
    pub prefix: String,
    /// Live keys under the prefix.
    pub keys: u64,
    /// Leases, permits, path reservations, queue messages and sessions named under the prefix.
    pub records: u64,
    /// Id and JSON value bytes of those keys and records.
    pub bytes: u64,
}
