//! Path reservations: agents editing one repository claim path patterns, exclusive or shared,
//! for a while. A conflicting claim is refused (not warned about), naming who holds what.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::InvalidInput;
use crate::glob::Glob;
use crate::key::{validate_agent_id, validate_key};
use crate::time::ttl_millis;

/// Most patterns in one reservation.
pub const MAX_PATTERNS: usize = 32;
/// Most live reservations in one scope: what one request is checked against, in the writer,
/// grows with them, so a scope has a ceiling like a semaphore's capacity.
pub const MAX_RESERVATIONS_PER_SCOPE: usize = 500;
/// Most patterns the live reservations of one scope hold together: a request is checked against
/// each, so this bounds what one request costs the writer.
pub const MAX_PATTERNS_PER_SCOPE: usize = 2048;
/// Most live reservations one holder keeps in one scope.
pub const MAX_RESERVATIONS_PER_HOLDER: usize = 50;
/// Most reservations a refusal names (`more_conflicts` says when others are in the way too).
pub const MAX_CONFLICTS_LISTED: usize = 10;
/// Most pattern pairs named per reservation in the way (`overlapping_total` counts them all).
pub const MAX_PAIRS_LISTED: usize = 10;
/// Most reservations a path check names in `blocking` and in `yours`, each.
pub const MAX_COVERING_LISTED: usize = 20;

/// Reserve path patterns in a scope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReserveRequest {
    /// What the paths are relative to, e.g. the repository's path or URL.
    pub scope: String,
    pub holder_id: String,
    /// Relative paths or globs: `*` within a directory, `**` across them (`a/**/b` is `a/b`
    /// too), `?` one character; `dir/` is everything under dir.
    pub patterns: Vec<String>,
    /// Exclusive (default): no one else may reserve an overlapping path. Shared: others may
    /// too, unless theirs is exclusive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusive: Option<bool>,
    /// Seconds until the reservation expires unless renewed.
    pub ttl_seconds: f64,
    /// Why, shown to whoever it blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// The most bytes of a reservation's reason.
pub const MAX_REASON_BYTES: usize = 1024;

impl ReserveRequest {
    /// The patterns, read, and the lifetime in milliseconds.
    pub fn validate(&self) -> Result<(Vec<Glob>, u64), InvalidInput> {
        validate_key("scope", &self.scope)?;
        validate_agent_id("holder_id", &self.holder_id)?;
        if self.patterns.is_empty() || self.patterns.len() > MAX_PATTERNS {
            return Err(InvalidInput::OutOfRange {
                argument: "patterns",
                message: format!("must hold 1 to {MAX_PATTERNS} paths or patterns; got {}", self.patterns.len()),
            });
        }
        let globs = self
            .patterns
            .iter()
            .map(|p| {
                Glob::parse(p).map_err(|message| InvalidInput::Malformed {
                    argument: "patterns".into(),
                    message: format!("`{p}` {message}"),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if self.reason.as_ref().is_some_and(|r| r.len() > MAX_REASON_BYTES) {
            return Err(InvalidInput::OutOfRange {
                argument: "reason",
                message: format!("must be at most {MAX_REASON_BYTES} bytes"),
            });
        }
        Ok((globs, ttl_millis("ttl_seconds", self.ttl_seconds)?))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReserveStatus {
    Granted,
    /// Another holder's reservation overlaps; `conflicts` says whose, and nothing was reserved.
    Conflict,
    /// The scope holds the most live reservations (500) or patterns (2048) it may, or you hold
    /// the most you may in it (50); `limit` says which. Release some, or let them expire.
    LimitReached,
}

/// A live reservation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReservationInfo {
    /// Its id, also its fencing token: larger than every token granted before, store-wide.
    pub reservation_id: u64,
    pub holder: String,
    pub patterns: Vec<String>,
    pub exclusive: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub acquired_at: String,
    pub expires_at: String,
}

/// One reservation in the way, and which of your patterns meet which of its.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReservationConflict {
    #[serde(flatten)]
    pub reservation: ReservationInfo,
    /// Pairs of [your pattern, its pattern] that some path matches both of (the first 10).
    pub overlapping: Vec<[String; 2]>,
    /// How many pairs overlap in all.
    #[serde(default)]
    pub overlapping_total: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReserveResult {
    pub status: ReserveStatus,
    pub scope: String,
    /// The new reservation (granted only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<ReservationInfo>,
    /// What stands in the way (conflict only): the first 10 reservations found.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<ReservationConflict>,
    /// Other reservations may be in the way too, past those listed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub more_conflicts: bool,
    /// Which ceiling was reached (limit_reached only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
    pub revision: u64,
}

/// Extend a reservation you hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReservationRenewRequest {
    pub scope: String,
    pub holder_id: String,
    pub reservation_id: u64,
    /// New lifetime in seconds, from now.
    pub ttl_seconds: f64,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl ReservationRenewRequest {
    pub fn validate(&self) -> Result<u64, InvalidInput> {
        validate_key("scope", &self.scope)?;
        validate_agent_id("holder_id", &self.holder_id)?;
        ttl_millis("ttl_seconds", self.ttl_seconds)
    }
}

/// Give reservations back: one by id, or every one you hold in the scope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReservationReleaseRequest {
    pub scope: String,
    pub holder_id: String,
    /// Absent: all of yours in the scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_id: Option<u64>,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl ReservationReleaseRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        validate_key("scope", &self.scope)?;
        validate_agent_id("holder_id", &self.holder_id)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReservationStatus {
    Ok,
    /// You hold no such reservation: it expired or was released.
    Lost,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReservationResult {
    pub status: ReservationStatus,
    pub scope: String,
    /// The reservations renewed or released.
    pub reservation_ids: Vec<u64>,
    /// The new expiry (renew).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    pub revision: u64,
}

/// Live reservations of a scope.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReservationListRequest {
    pub scope: String,
    /// Only this holder's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder_id: Option<String>,
}

impl ReservationListRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        validate_key("scope", &self.scope)?;
        self.holder_id.as_deref().map_or(Ok(()), |h| validate_agent_id("holder_id", h))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReservationListResult {
    pub scope: String,
    pub reservations: Vec<ReservationInfo>,
    pub revision: u64,
}

/// May this holder write this path now?
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PathCheckRequest {
    pub scope: String,
    pub holder_id: String,
    /// A path, not a pattern.
    pub path: String,
}

impl PathCheckRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        validate_key("scope", &self.scope)?;
        validate_agent_id("holder_id", &self.holder_id)?;
        validate_key("path", &self.path)?;
        crate::glob::check_relative(&self.path).map_err(|message| InvalidInput::Malformed {
            argument: "path".into(),
            message: format!("`{}` {message}", self.path),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PathCheckResult {
    /// False when another holder's exclusive reservation covers the path.
    pub allowed: bool,
    pub path: String,
    /// Other holders' exclusive reservations covering the path (the first 20).
    pub blocking: Vec<ReservationInfo>,
    /// Your reservations covering the path (the first 20).
    pub yours: Vec<ReservationInfo>,
    /// More reservations cover the path than are listed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    pub revision: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ScopeReservations {
    pub scope: String,
    pub reservations: Vec<ReservationInfo>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ScopeListResult {
    pub scopes: Vec<ScopeReservations>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    pub revision: u64,
}
