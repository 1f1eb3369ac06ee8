//! Lease operations: exclusive, expiring ownership of a named resource, with fencing tokens.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Paged;
use crate::error::InvalidInput;
use crate::key::{validate_agent_id, validate_key, validate_prefix};
use crate::time::ttl_millis;

/// Take a lease, or learn who holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AcquireRequest {
    /// The resource to own, e.g. `db/migration`.
    pub resource_id: String,
    pub holder_id: String,
    /// Seconds until the lease expires unless renewed.
    pub ttl_seconds: f64,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl AcquireRequest {
    pub fn validate(&self) -> Result<u64, InvalidInput> {
        validate_key("resource_id", &self.resource_id)?;
        validate_agent_id("holder_id", &self.holder_id)?;
        ttl_millis("ttl_seconds", self.ttl_seconds)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AcquireStatus {
    Acquired,
    /// Another holder has it; `holder` and `expires_at` say who and until when.
    Held,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AcquireResult {
    pub status: AcquireStatus,
    pub resource_id: String,
    /// You when acquired; the current holder when held.
    pub holder: String,
    /// Fencing token (acquired only): larger than every token granted before, store-wide.
    /// Pass it to renew, release, and to writes guarded by this lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    pub expires_at: String,
    pub revision: u64,
}

/// Extend a lease you hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RenewRequest {
    pub resource_id: String,
    pub holder_id: String,
    /// The token from lease_acquire.
    pub token: u64,
    /// New lifetime in seconds, from now.
    pub ttl_seconds: f64,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl RenewRequest {
    pub fn validate(&self) -> Result<u64, InvalidInput> {
        validate_key("resource_id", &self.resource_id)?;
        validate_agent_id("holder_id", &self.holder_id)?;
        ttl_millis("ttl_seconds", self.ttl_seconds)
    }
}

/// Give a lease up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseRequest {
    pub resource_id: String,
    pub holder_id: String,
    pub token: u64,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl ReleaseRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        validate_key("resource_id", &self.resource_id)?;
        validate_agent_id("holder_id", &self.holder_id)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HoldStatus {
    Ok,
    /// You no longer hold it: it expired, was released, or another holder took it.
    Lost,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HoldResult {
    pub status: HoldStatus,
    pub resource_id: String,
    /// The new expiry (renew succeeded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// Who holds it now, when lost to another holder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    pub revision: u64,
}

/// Who holds a resource.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseGetRequest {
    pub resource_id: String,
}

impl LeaseGetRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        validate_key("resource_id", &self.resource_id)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LeaseState {
    Held,
    Free,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LeaseInfo {
    pub resource_id: String,
    pub holder: String,
    pub acquired_at: String,
    pub expires_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LeaseGetResult {
    pub status: LeaseState,
    pub resource_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acquired_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    pub revision: u64,
}

/// Leases currently held, by resource id.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseListRequest {
    /// Only resources starting with this.
    #[serde(default)]
    pub prefix: String,
    /// Page size, 1 to 1000 (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

impl LeaseListRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        validate_prefix("prefix", &self.prefix)?;
        self.validate_page()
    }
}

super::paged!(LeaseListRequest);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LeaseListResult {
    pub leases: Vec<LeaseInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    pub revision: u64,
}
