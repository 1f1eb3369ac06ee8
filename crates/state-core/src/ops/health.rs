//! Server and store health.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::OkStatus;

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HealthRequest {}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HealthResult {
    pub status: OkStatus,
    /// Storage backend, e.g. "redb".
    pub backend: String,
    /// Current store revision.
    pub revision: u64,
    /// Stored keys (including expired ones not yet swept).
    pub keys: u64,
    /// Size of the database on disk, when it is a file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database_bytes: Option<u64>,
    pub uptime_seconds: u64,
    /// History at or below this revision has been compacted away.
    pub compacted_revision: u64,
    /// Version of the server software.
    pub server_version: String,
}
