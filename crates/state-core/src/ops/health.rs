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
    /// Stored keys (including expired ones not yet swept). Absent for a token that does not
    /// cover the whole store, as are the file's size, the owner and the write figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<u64>,
    /// Size of the database on disk, when it is a file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database_bytes: Option<u64>,
    pub uptime_seconds: u64,
    /// History at or below this revision has been compacted away.
    pub compacted_revision: u64,
    /// Version of the server software.
    pub server_version: String,
    /// The process that holds the database and serves every client of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<OwnerInfo>,
    /// Group commit since the engine started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes: Option<WriteStats>,
    /// Change streams open on this engine now: every client's watches and subscriptions (an
    /// owner's count includes the processes joined to it; a PostgreSQL replica's, its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watchers: Option<u64>,
    /// Servers running on this store now, where several may (PostgreSQL replicas, counted by
    /// their connections' `application_name`; absent when the URL sets one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u64>,
    /// The calling token's own quota, where it has one: its rate and what was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<TokenQuota>,
    /// The calling token's storage quota and what it last measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<TokenStorage>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TokenStorage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_keys: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    pub keys: u64,
    pub bytes: u64,
    pub writes_refused: u64,
}

/// A token's write quota as this server holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TokenQuota {
    pub writes_per_second: f64,
    pub write_burst: f64,
    /// Writes refused for the rate since this server started.
    pub writes_refused: u64,
}

/// How the engine's writes have been batched and committed since it started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WriteStats {
    /// Write transactions run.
    pub batches: u64,
    /// Write requests they carried.
    pub requests: u64,
    /// Transactions that changed something and committed (one fsync each).
    pub commits: u64,
    pub largest_batch: u64,
    /// Seconds spent committing (mostly fsync).
    pub commit_seconds: f64,
    /// Batches retried after a transient storage failure.
    pub retries: u64,
}

/// The process that holds a database: an owner shared by every process on it, or one
/// process alone (standalone).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OwnerInfo {
    pub pid: u32,
    /// `owner` (shared) or `standalone`.
    pub mode: String,
    /// Processes connected to the owner now.
    pub clients: u64,
    /// Where the owner logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_file: Option<String>,
}
