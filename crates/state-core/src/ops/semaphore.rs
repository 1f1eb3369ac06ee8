//! Semaphore operations: up to `capacity` holders of a named resource at once, each permit
//! with its own fencing token and expiry, like a lease on one of its slots.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::InvalidInput;
use crate::key::{validate_agent_id, validate_key};
use crate::time::{seconds_within, ttl_millis};

/// The most permits a semaphore may have: holders are listed in every refusal, so the list
/// stays readable.
pub const MAX_CAPACITY: u32 = 1000;

/// The longest an acquire may wait for a permit, in seconds: clients cut tool calls at 60 s.
pub const MAX_WAIT_SECONDS: f64 = 55.0;

/// Take one permit of a semaphore, or learn who holds them all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SemaphoreAcquireRequest {
    /// The resource, e.g. `build-slots`.
    pub name: String,
    pub holder_id: String,
    /// How many holders at once, 1 to 1000. Every holder must agree on it.
    #[schemars(range(min = 1, max = 1000))]
    pub capacity: u32,
    /// Seconds until the permit expires unless renewed.
    pub ttl_seconds: f64,
    /// Seconds to wait for a permit when all are held (default 0, at most 55).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_seconds: Option<f64>,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl SemaphoreAcquireRequest {
    /// The permit's lifetime and how long to wait for one, in milliseconds.
    pub fn validate(&self) -> Result<(u64, u64), InvalidInput> {
        validate_key("name", &self.name)?;
        validate_agent_id("holder_id", &self.holder_id)?;
        if !(1..=MAX_CAPACITY).contains(&self.capacity) {
            return Err(InvalidInput::OutOfRange {
                argument: "capacity",
                message: format!("must be 1 to {MAX_CAPACITY}; got {}", self.capacity),
            });
        }
        let ttl = ttl_millis("ttl_seconds", self.ttl_seconds)?;
        Ok((ttl, seconds_within("wait_seconds", self.wait_seconds, 0.0, MAX_WAIT_SECONDS)?))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SemaphoreStatus {
    Acquired,
    /// Every permit is held; `holders` says by whom and until when.
    Full,
    /// The live holders agreed on another capacity; `capacity` is theirs.
    CapacityMismatch,
}

/// One live permit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PermitInfo {
    pub holder: String,
    pub acquired_at: String,
    pub expires_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SemaphoreAcquireResult {
    pub status: SemaphoreStatus,
    pub name: String,
    /// The capacity in force: the live holders', or yours when there are none.
    pub capacity: u32,
    /// Fencing token of your permit (acquired only): larger than every token granted before,
    /// store-wide. Pass it to renew and release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    /// When your permit expires (acquired only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// Every live permit, yours included.
    pub holders: Vec<PermitInfo>,
    pub revision: u64,
}

/// Extend a permit you hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SemaphoreRenewRequest {
    pub name: String,
    pub holder_id: String,
    /// The token from semaphore_acquire.
    pub token: u64,
    /// New lifetime in seconds, from now.
    pub ttl_seconds: f64,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl SemaphoreRenewRequest {
    pub fn validate(&self) -> Result<u64, InvalidInput> {
        validate_key("name", &self.name)?;
        validate_agent_id("holder_id", &self.holder_id)?;
        ttl_millis("ttl_seconds", self.ttl_seconds)
    }
}

/// Give a permit back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SemaphoreReleaseRequest {
    pub name: String,
    pub holder_id: String,
    pub token: u64,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl SemaphoreReleaseRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        validate_key("name", &self.name)?;
        validate_agent_id("holder_id", &self.holder_id)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PermitStatus {
    Ok,
    /// You hold no permit with that token: it expired, was released, or was granted again.
    Lost,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PermitResult {
    pub status: PermitStatus,
    pub name: String,
    /// The new expiry (renew succeeded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    pub revision: u64,
}

/// Who holds a semaphore's permits.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SemaphoreGetRequest {
    pub name: String,
}

impl SemaphoreGetRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        validate_key("name", &self.name)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SemaphoreGetResult {
    pub name: String,
    /// The live holders' capacity; absent when no permit is held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<u32>,
    /// Permits free now (absent with no holders: then every permit is free).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available: Option<u32>,
    pub holders: Vec<PermitInfo>,
    pub revision: u64,
}

/// A semaphore with a permit held.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SemaphoreSummary {
    pub name: String,
    pub capacity: u32,
    pub available: u32,
    pub holders: Vec<PermitInfo>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SemaphoreListResult {
    pub semaphores: Vec<SemaphoreSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    pub revision: u64,
}
