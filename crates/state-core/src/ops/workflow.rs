//! Workflow runs: create, claim under a lease, checkpoint steps, finish, and resume after a
//! worker dies.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Paged, present};
use crate::error::InvalidInput;
use crate::key::{validate_agent_id, validate_key};
use crate::limits::Limits;
use crate::time::{MAX_TTL_SECONDS, seconds_within, ttl_millis};

pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
pub const MAX_ATTEMPTS_LIMIT: u32 = 1000;
pub const DEFAULT_CLAIM_TTL_SECONDS: f64 = 60.0;

/// Where a run is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Waiting for a worker (new, retried, or its last worker's claim expired).
    Pending,
    /// Claimed by a worker whose lease is live.
    Running,
    Completed,
    Failed,
    Cancelled,
}

/// Where a pending run stands: claimable now, or why not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PendingState {
    /// A claim could take it now.
    Claimable,
    /// Until its dependencies complete (`waiting_on`), or while its concurrency key runs as
    /// many as its limit (`limited_by`).
    Waiting,
    /// Not before `not_before`.
    Delayed,
    /// For good: a dependency failed, was cancelled or does not exist (`blocked_by`).
    Blocked,
    /// Until a signal named `awaiting_signal` arrives.
    Parked,
}

/// What `workflow_list` filters on: a run's status, or, for pending runs, where they stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ListStatus {
    Pending,
    Running,
    Completed,
    Failed,
    Cancelled,
    /// Pending runs a claim could take now.
    Claimable,
    /// Pending runs waiting on dependencies or a concurrency limit.
    Waiting,
    /// Pending runs whose delay has not passed.
    Delayed,
    /// Pending runs blocked for good by a dependency.
    Blocked,
    /// Pending runs parked until a signal.
    Parked,
}

impl ListStatus {
    /// Whether a run of `status`, standing at `state` when pending, is one this lists.
    pub fn admits(self, status: RunStatus, state: Option<PendingState>) -> bool {
        let wanted_state = match self {
            ListStatus::Pending => return status == RunStatus::Pending,
            ListStatus::Running => return status == RunStatus::Running,
            ListStatus::Completed => return status == RunStatus::Completed,
            ListStatus::Failed => return status == RunStatus::Failed,
            ListStatus::Cancelled => return status == RunStatus::Cancelled,
            ListStatus::Claimable => PendingState::Claimable,
            ListStatus::Waiting => PendingState::Waiting,
            ListStatus::Delayed => PendingState::Delayed,
            ListStatus::Blocked => PendingState::Blocked,
            ListStatus::Parked => PendingState::Parked,
        };
        status == RunStatus::Pending && state == Some(wanted_state)
    }

    /// Whether a run's pending state must be worked out to decide.
    pub fn needs_state(self) -> bool {
        !matches!(
            self,
            ListStatus::Pending
                | ListStatus::Running
                | ListStatus::Completed
                | ListStatus::Failed
                | ListStatus::Cancelled
        )
    }
}

impl RunStatus {
    pub fn is_terminal(self) -> bool {
        matches!(self, RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Pending => "pending",
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }
}

fn validate_tags(tags: &BTreeMap<String, String>) -> Result<(), InvalidInput> {
    for (name, value) in tags {
        validate_key("tags", name)?;
        validate_agent_id(&format!("tags.{name}"), value)?;
    }
    Ok(())
}

/// Register a run for some worker to pick up.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRunRequest {
    /// What kind of work, e.g. `nightly-report`.
    pub name: String,
    /// Labels workers filter on, e.g. {"queue": "gpu"}.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// Anything the worker needs to start.
    #[serde(default)]
    pub input: Value,
    /// Claims allowed before the run fails for good (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub max_attempts: Option<u32>,
    /// Runs that must complete before this one can be claimed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// 0 to 9 (default 0); claim takes higher first, then older.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 9))]
    pub priority: Option<u8>,
    /// Seconds before it can be claimed (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_seconds: Option<f64>,
    /// While a run with this key is unfinished, creating another returns it instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedupe_key: Option<String>,
    /// Runs sharing this key (e.g. `model=gpt` or `tenant/acme`) run at most
    /// `concurrency_limit` at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_key: Option<String>,
    /// With concurrency_key: how many may run at once (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub concurrency_limit: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// Most runs one run may depend on.
pub const MAX_DEPENDENCIES: usize = 100;
/// Highest run priority.
pub const MAX_RUN_PRIORITY: u8 = 9;

impl CreateRunRequest {
    /// The delay before the run can be claimed, in milliseconds.
    pub fn delay_millis(&self) -> u64 {
        seconds_within("delay_seconds", self.delay_seconds, 0.0, MAX_TTL_SECONDS).unwrap_or(0)
    }

    pub fn validate(&self, limits: &Limits) -> Result<(), InvalidInput> {
        validate_key("name", &self.name)?;
        validate_tags(&self.tags)?;
        limits.check_value("input", &self.input)?;
        if self.depends_on.len() > MAX_DEPENDENCIES {
            return Err(InvalidInput::TooMany {
                argument: "depends_on".into(),
                len: self.depends_on.len(),
                max: MAX_DEPENDENCIES,
            });
        }
        for run_id in &self.depends_on {
            validate_key("depends_on", run_id)?;
        }
        if self.priority.is_some_and(|p| p > MAX_RUN_PRIORITY) {
            return Err(InvalidInput::OutOfRange {
                argument: "priority",
                message: format!("must be 0 to {MAX_RUN_PRIORITY}"),
            });
        }
        seconds_within("delay_seconds", self.delay_seconds, 0.0, MAX_TTL_SECONDS)?;
        if let Some(key) = &self.dedupe_key {
            validate_key("dedupe_key", key)?;
        }
        if let Some(key) = &self.concurrency_key {
            validate_key("concurrency_key", key)?;
        }
        match (self.concurrency_key.is_some(), self.concurrency_limit) {
            (false, Some(_)) => {
                return Err(InvalidInput::Malformed {
                    argument: "concurrency_limit".into(),
                    message: "needs a concurrency_key: the runs the limit applies to".into(),
                });
            }
            (_, Some(0)) => {
                return Err(InvalidInput::OutOfRange {
                    argument: "concurrency_limit",
                    message: "must be 1 or more".into(),
                });
            }
            _ => {}
        }
        if let Some(n) = self.max_attempts
            && !(1..=MAX_ATTEMPTS_LIMIT).contains(&n)
        {
            return Err(InvalidInput::OutOfRange {
                argument: "max_attempts",
                message: format!("must be between 1 and {MAX_ATTEMPTS_LIMIT}; got {n}"),
            });
        }
        if let Some(agent) = &self.agent_id {
            validate_agent_id("agent_id", agent)?;
        }
        Ok(())
    }

    pub fn max_attempts(&self) -> u32 {
        self.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CreateStatus {
    Ok,
    /// An unfinished run with the same dedupe_key exists: this is it.
    Duplicate,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CreateRunResult {
    pub status: CreateStatus,
    /// Time-ordered: sorting run ids sorts runs by creation.
    pub run_id: String,
    pub name: String,
    pub revision: u64,
}

/// Claim a given run, or the oldest claimable run matching the filters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    pub agent_id: String,
    /// Seconds the claim lasts unless renewed by workflow_heartbeat (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_ttl_seconds: Option<f64>,
    /// Claim this run; omit to take the oldest claimable run matching `tags` and `name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// Only runs carrying all of these tags.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// Only runs with this name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl ClaimRequest {
    pub fn validate(&self) -> Result<u64, InvalidInput> {
        validate_agent_id("agent_id", &self.agent_id)?;
        if let Some(run_id) = &self.run_id {
            validate_key("run_id", run_id)?;
        }
        if let Some(name) = &self.name {
            validate_key("name", name)?;
        }
        validate_tags(&self.tags)?;
        ttl_millis("lease_ttl_seconds", self.lease_ttl_seconds.unwrap_or(DEFAULT_CLAIM_TTL_SECONDS))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClaimStatus {
    /// Yours: do the work, checkpoint each step with `token`.
    Claimed,
    /// Nothing matching is claimable now.
    NoneAvailable,
    /// Another worker holds a live claim on this run.
    Held,
    /// The run is finished (or out of attempts) and will not be claimable again.
    Finished,
    NotFound,
    /// The run waits on unfinished dependencies or its delay; `run_status` says it is pending.
    Waiting,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClaimResult {
    pub status: ClaimStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Fencing token for checkpoint, heartbeat, complete and fail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    /// 1 for the first claim, +1 for each reclaim after a worker failed or vanished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Steps already accepted: continue from last_step + 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_step: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub input: Option<Value>,
    /// When the claim lapses unless renewed (claimed), or the other worker's (held).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_expires_at: Option<String>,
    /// The other worker (held).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// The run's status (finished).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_status: Option<RunStatus>,
    /// Every signal the run was sent, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signals: Vec<Signal>,
    pub revision: u64,
}

/// Record a finished step. Only the current holder with its current token may.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointRequest {
    pub run_id: String,
    pub agent_id: String,
    pub token: u64,
    /// Steps count from 1 and advance by one. Re-sending a recorded step with the same output is harmless.
    #[schemars(range(min = 1))]
    pub step: u64,
    #[serde(default)]
    pub output: Value,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl CheckpointRequest {
    pub fn validate(&self, limits: &Limits) -> Result<(), InvalidInput> {
        validate_key("run_id", &self.run_id)?;
        validate_agent_id("agent_id", &self.agent_id)?;
        validate_step(self.step)?;
        limits.check_value("output", &self.output).map(|_| ())
    }
}

pub fn validate_step(step: u64) -> Result<(), InvalidInput> {
    if step == 0 {
        return Err(InvalidInput::OutOfRange {
            argument: "step",
            message: "must be 1 or more: steps are numbered from 1".into(),
        });
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointStatus {
    Ok,
    /// This step was already recorded with this output: nothing changed.
    Duplicate,
    /// The step was recorded with a different output, or is not the next step.
    Conflict,
    /// You no longer hold the run (claim expired, run reclaimed or finished).
    Fenced,
    NotFound,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckpointResult {
    pub status: CheckpointStatus,
    pub run_id: String,
    pub step: u64,
    /// The highest step recorded.
    pub last_step: u64,
    /// Every signal the run was sent, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signals: Vec<Signal>,
    pub revision: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Renew your claim on a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatRequest {
    pub run_id: String,
    pub agent_id: String,
    pub token: u64,
    /// New claim lifetime in seconds from now (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_ttl_seconds: Option<f64>,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl HeartbeatRequest {
    pub fn validate(&self) -> Result<u64, InvalidInput> {
        validate_key("run_id", &self.run_id)?;
        validate_agent_id("agent_id", &self.agent_id)?;
        ttl_millis("lease_ttl_seconds", self.lease_ttl_seconds.unwrap_or(DEFAULT_CLAIM_TTL_SECONDS))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HolderStatus {
    Ok,
    /// You no longer hold the run: claim expired, reclaimed by another worker, or finished.
    Fenced,
    NotFound,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HeartbeatResult {
    pub status: HolderStatus,
    pub run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_expires_at: Option<String>,
    /// Every signal the run was sent, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signals: Vec<Signal>,
    pub revision: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Finish a run you hold, with its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteRequest {
    pub run_id: String,
    pub agent_id: String,
    pub token: u64,
    #[serde(default)]
    pub result: Value,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl CompleteRequest {
    pub fn validate(&self, limits: &Limits) -> Result<(), InvalidInput> {
        validate_key("run_id", &self.run_id)?;
        validate_agent_id("agent_id", &self.agent_id)?;
        limits.check_value("result", &self.result).map(|_| ())
    }
}

/// Report that the attempt failed. Retryable failures return the run to the queue until
/// max_attempts is reached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FailRequest {
    pub run_id: String,
    pub agent_id: String,
    pub token: u64,
    pub error: String,
    /// Default true: try again (another claim) while attempts remain.
    #[serde(default = "yes")]
    pub retryable: bool,
    /// Seconds before the retry can be claimed (a backoff; default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_delay_seconds: Option<f64>,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

fn yes() -> bool {
    true
}

impl FailRequest {
    /// The retry's delay in milliseconds.
    pub fn retry_delay_millis(&self) -> u64 {
        seconds_within("retry_delay_seconds", self.retry_delay_seconds, 0.0, MAX_TTL_SECONDS).unwrap_or(0)
    }

    pub fn validate(&self) -> Result<(), InvalidInput> {
        validate_key("run_id", &self.run_id)?;
        validate_agent_id("agent_id", &self.agent_id)?;
        seconds_within("retry_delay_seconds", self.retry_delay_seconds, 0.0, MAX_TTL_SECONDS)?;
        if self.error.len() > 64 * 1024 {
            return Err(InvalidInput::OutOfRange { argument: "error", message: "is over 64 KiB: summarise it".into() });
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FinishResult {
    pub status: HolderStatus,
    pub run_id: String,
    /// The run's status afterwards (pending when a failure will be retried).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_status: Option<RunStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    pub revision: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Stop a run that has not finished. Its worker's later writes are refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    pub run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl CancelRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        validate_key("run_id", &self.run_id)?;
        if let Some(agent) = &self.agent_id {
            validate_agent_id("agent_id", agent)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CancelStatus {
    Ok,
    /// The run had already finished.
    Finished,
    NotFound,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CancelResult {
    pub status: CancelStatus,
    pub run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_status: Option<RunStatus>,
    pub revision: u64,
}

/// The largest signal value, in bytes of JSON: a run's signals (at most 100) come back whole
/// with every claim, heartbeat and resume, so they stay approvals and short answers; a large
/// result belongs in a key the signal names.
pub const MAX_SIGNAL_VALUE_BYTES: usize = 64 * 1024;

/// One run, by id.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    pub run_id: String,
}

impl RunRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        validate_key("run_id", &self.run_id)
    }
}

/// The most a caller may wait for a run to finish in one call: clients cut tool calls at 60 s.
pub const MAX_STATUS_WAIT_SECONDS: f64 = 55.0;

/// One run's status, waiting (bounded) for it to finish if asked.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunStatusRequest {
    pub run_id: String,
    /// Wait up to this long (at most 55) for the run to finish; the answer is its status then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_seconds: Option<f64>,
}

impl RunStatusRequest {
    /// The wait, in milliseconds.
    pub fn validate(&self) -> Result<u64, InvalidInput> {
        validate_key("run_id", &self.run_id)?;
        crate::time::seconds_within("wait_seconds", self.wait_seconds, 0.0, MAX_STATUS_WAIT_SECONDS)
    }
}

/// A run without its step outputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunSummary {
    pub run_id: String,
    pub name: String,
    pub run_status: RunStatus,
    pub tags: BTreeMap<String, String>,
    pub attempt: u32,
    pub max_attempts: u32,
    pub last_step: u64,
    /// The worker holding a live claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_expires_at: Option<String>,
    /// The latest failure, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: u8,
    /// Every run it was created to depend on, finished or not: the edges of the dependency
    /// graph (`waiting_on` says which still hold it back).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// Dependencies not completed yet: it cannot be claimed before they are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting_on: Vec<String>,
    /// A dependency failed or was cancelled: this run will never be claimable (cancel it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_by: Option<String>,
    /// Not claimable before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<String>,
    /// Parked until a signal of this name arrives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub awaiting_signal: Option<String>,
    /// Its concurrency key runs as many as its limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limited_by: Option<String>,
    /// For a pending run: claimable now, or why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<PendingState>,
    pub created_at: String,
    pub updated_at: String,
}

fn is_zero(n: &u8) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FoundStatus {
    Ok,
    NotFound,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunStatusResult {
    pub status: FoundStatus,
    pub run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunSummary>,
    /// What the run completed with, once it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    pub revision: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepOutput {
    pub step: u64,
    #[serde(deserialize_with = "present")]
    pub output: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// The attempt that recorded it.
    pub attempt: u32,
    pub at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResumeResult {
    pub status: FoundStatus,
    pub run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub input: Option<Value>,
    /// Every accepted step, in order.
    #[serde(default)]
    pub steps: Vec<StepOutput>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub result: Option<Value>,
    /// Every signal the run was sent, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signals: Vec<Signal>,
    pub revision: u64,
}

/// Runs filtered by status, name and tags, oldest first, a page at a time.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListRunsRequest {
    /// A status, or for pending runs where they stand: `claimable`, `waiting`, `delayed`,
    /// `blocked`, `parked`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ListStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Only runs carrying all of these tags.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// Page size, 1 to 1000 (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

impl ListRunsRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        if let Some(name) = &self.name {
            validate_key("name", name)?;
        }
        validate_tags(&self.tags)?;
        self.validate_page()
    }
}

super::paged!(ListRunsRequest);

/// Runs a worker could claim now, filtered by name and tags, oldest first.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiscoverRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

impl From<DiscoverRequest> for ListRunsRequest {
    fn from(d: DiscoverRequest) -> ListRunsRequest {
        ListRunsRequest {
            status: Some(ListStatus::Claimable),
            name: d.name,
            tags: d.tags,
            limit: d.limit,
            cursor: d.cursor,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ListRunsResult {
    pub runs: Vec<RunSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    pub revision: u64,
}

/// A signal sent to a run: a human's approval, another agent's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Signal {
    /// Increasing: act on the ids above the last one you handled.
    pub signal_id: u64,
    pub name: String,
    pub value: Value,
    pub sent_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender: Option<String>,
}

/// Send a run a signal. It is kept with the run and shown to its worker on claim, heartbeat,
/// checkpoint and resume; a run parked waiting for it becomes claimable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SignalRequest {
    pub run_id: String,
    /// E.g. `approved`.
    pub name: String,
    #[serde(default)]
    pub value: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender: Option<String>,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// Most signals one run keeps.
pub const MAX_SIGNALS: usize = 100;

impl SignalRequest {
    pub fn validate(&self, limits: &Limits) -> Result<(), InvalidInput> {
        validate_key("run_id", &self.run_id)?;
        validate_key("name", &self.name)?;
        // Every signal comes back whole on every claim, heartbeat and resume: a small value.
        let small = Limits { max_value_bytes: MAX_SIGNAL_VALUE_BYTES.min(limits.max_value_bytes) };
        small.check_value("value", &self.value)?;
        if let Some(sender) = &self.sender {
            validate_agent_id("sender", sender)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SignalStatus {
    Ok,
    NotFound,
    /// The run finished: nobody would read it.
    Finished,
    /// The run holds MAX_SIGNALS signals already.
    Full,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SignalResult {
    pub status: SignalStatus,
    pub run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal_id: Option<u64>,
    pub revision: u64,
}

/// Park a run you hold until a named signal arrives: your claim ends, and the run is claimable
/// again (by anyone, without spending an attempt) once the signal is there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AwaitSignalRequest {
    pub run_id: String,
    pub agent_id: String,
    pub token: u64,
    /// The signal's name.
    pub name: String,
    /// Only a signal with a larger id counts (default 0: any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_signal_id: Option<u64>,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl AwaitSignalRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        validate_key("run_id", &self.run_id)?;
        validate_agent_id("agent_id", &self.agent_id)?;
        validate_key("name", &self.name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AwaitStatus {
    /// The signal is already there: `signal`; keep working, your claim stands.
    Signaled,
    /// Parked: your claim ended; the run waits for the signal.
    Waiting,
    /// You do not hold the run (or its token is stale): nothing changed.
    Fenced,
    NotFound,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AwaitSignalResult {
    pub status: AwaitStatus,
    pub run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<Signal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub revision: u64,
}
