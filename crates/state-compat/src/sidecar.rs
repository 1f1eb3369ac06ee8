//! The `mcp-state-sidecar` server's tools: its argument shapes (no tokens, integer TTLs,
//! flat workflow statuses) and its result models, field for field. Timestamps are epoch
//! seconds as floats, as that server reported them.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use state_core::ops::history::HistoryEvent;
use state_core::ops::lease::{AcquireResult, AcquireStatus, HoldResult, HoldStatus};
use state_core::ops::workflow::{ClaimResult, ClaimStatus, ResumeResult, RunStatus, RunSummary};
use state_core::time::{UnixMillis, parse_rfc3339};

pub mod calls;
pub mod rules;

fn seconds(at: UnixMillis) -> f64 {
    at.0 as f64 / 1000.0
}

/// One of our RFC 3339 instants as that server's epoch seconds. Native results carry their
/// instants as text with millisecond precision, so nothing is lost; text that is not one
/// (never written by us) reads as the epoch.
fn stamp_seconds(stamp: &str) -> f64 {
    parse_rfc3339(stamp).map_or(0.0, seconds)
}

/// The status names that server used: created, claimed, running, done, failed.
pub fn status_name(run: &RunSummary) -> &'static str {
    match run.run_status {
        RunStatus::Pending => "created",
        RunStatus::Running if run.last_step == 0 => "claimed",
        RunStatus::Running => "running",
        RunStatus::Completed => "done",
        RunStatus::Failed | RunStatus::Cancelled => "failed",
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StateSetArgs {
    pub key: String,
    pub value: Value,
    #[serde(default)]
    #[schemars(range(min = 1, max = 315_360_000))]
    pub ttl_seconds: Option<u64>,
    #[serde(default)]
    pub agent_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct KeyArgs {
    pub key: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StateListArgs {
    #[serde(default)]
    pub prefix: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct OkResult {
    pub ok: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct GetResult {
    pub key: String,
    pub value: Option<Value>,
    pub found: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct KeysResult {
    pub keys: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct WorkflowCreateArgs {
    pub name: String,
    #[serde(default)]
    pub tags: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct CreateResult {
    pub run_id: String,
    pub name: String,
    pub status: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct DiscoverArgs {
    #[serde(default)]
    pub tags: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub status: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct NoArgs {}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WorkflowMeta {
    pub run_id: String,
    pub name: String,
    pub status: String,
    pub tags: BTreeMap<String, String>,
    pub agent_id: Option<String>,
    pub last_step: u64,
    pub created_at: f64,
    pub updated_at: f64,
}

impl WorkflowMeta {
    pub fn new(run: &RunSummary) -> WorkflowMeta {
        WorkflowMeta {
            run_id: run.run_id.clone(),
            name: run.name.clone(),
            status: status_name(run).to_owned(),
            tags: run.tags.clone(),
            agent_id: run.holder.clone(),
            last_step: run.last_step,
            created_at: stamp_seconds(&run.created_at),
            updated_at: stamp_seconds(&run.updated_at),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RunsResult {
    pub runs: Vec<WorkflowMeta>,
}

/// That server listed runs newest first, filtered by its status names and by tags.
pub fn runs_newest_first(
    runs: &[RunSummary],
    status: Option<&str>,
    tags: Option<&BTreeMap<String, String>>,
) -> RunsResult {
    let mut metas: Vec<WorkflowMeta> = runs
        .iter()
        .filter(|r| status.is_none_or(|s| s == status_name(r)))
        .filter(|r| tags.is_none_or(|t| t.iter().all(|(k, v)| r.tags.get(k) == Some(v))))
        .map(WorkflowMeta::new)
        .collect();
    metas.reverse();
    RunsResult { runs: metas }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ClaimArgs {
    pub run_id: String,
    pub agent_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ClaimResultShape {
    pub claimed: bool,
    pub run_id: String,
    pub agent_id: Option<String>,
    pub reason: Option<String>,
}

pub fn claim_result(
    run_id: &str,
    agent_id: &str,
    result: &ClaimResult,
    current: Option<&RunSummary>,
) -> ClaimResultShape {
    let refused = |reason: String| ClaimResultShape {
        claimed: false,
        run_id: run_id.to_owned(),
        agent_id: None,
        reason: Some(reason),
    };
    match result.status {
        ClaimStatus::Claimed => ClaimResultShape {
            claimed: true,
            run_id: run_id.to_owned(),
            agent_id: Some(agent_id.to_owned()),
            reason: None,
        },
        ClaimStatus::NotFound => refused(format!("Workflow '{run_id}' not found")),
        _ => {
            let (status, agent) = current.map_or(("unknown", None), |r| (status_name(r), r.holder.clone()));
            refused(format!("Workflow is in status '{status}' (agent: {})", agent.as_deref().unwrap_or("None")))
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct CheckpointArgs {
    pub run_id: String,
    #[schemars(range(min = 1))]
    pub step: u64,
    pub output: Value,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct CheckpointResultShape {
    pub ok: bool,
    pub run_id: String,
    pub step: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RunIdArgs {
    pub run_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ResumeContext {
    pub run_id: String,
    pub last_step: u64,
    /// Step number (as a string) to its output.
    pub step_outputs: Map<String, Value>,
    pub meta: WorkflowMeta,
}

pub fn resume_context(resumed: &ResumeResult, run: &RunSummary) -> ResumeContext {
    let step_outputs =
        resumed.steps.iter().map(|s| (s.step.to_string(), s.output.clone().unwrap_or(Value::Null))).collect();
    ResumeContext { run_id: run.run_id.clone(), last_step: run.last_step, step_outputs, meta: WorkflowMeta::new(run) }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StatusResult {
    pub run_id: String,
    pub status: String,
    pub last_step: u64,
    pub agent_id: Option<String>,
    pub created_at: f64,
    pub updated_at: f64,
}

pub fn status_result(run: &RunSummary) -> StatusResult {
    let meta = WorkflowMeta::new(run);
    StatusResult {
        run_id: meta.run_id,
        status: meta.status,
        last_step: meta.last_step,
        agent_id: meta.agent_id,
        created_at: meta.created_at,
        updated_at: meta.updated_at,
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct LeaseArgs {
    pub resource_id: String,
    pub holder_id: String,
    #[schemars(range(min = 1, max = 315_360_000))]
    pub ttl_seconds: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct LeaseReleaseArgs {
    pub resource_id: String,
    pub holder_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct LeaseResult {
    pub acquired: bool,
    pub resource_id: String,
    pub holder: Option<String>,
    pub expires_at: Option<f64>,
    pub reason: Option<String>,
}

pub fn lease_result(result: &AcquireResult) -> LeaseResult {
    match result.status {
        AcquireStatus::Acquired => LeaseResult {
            acquired: true,
            resource_id: result.resource_id.clone(),
            holder: Some(result.holder.clone()),
            expires_at: Some(stamp_seconds(&result.expires_at)),
            reason: None,
        },
        AcquireStatus::Held => LeaseResult {
            acquired: false,
            resource_id: result.resource_id.clone(),
            holder: Some(result.holder.clone()),
            expires_at: None,
            reason: Some(format!("Held by '{}'", result.holder)),
        },
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ReleaseResult {
    pub released: bool,
    pub resource_id: String,
}

pub fn release_result(result: &HoldResult) -> ReleaseResult {
    ReleaseResult { released: result.status == HoldStatus::Ok, resource_id: result.resource_id.clone() }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RenewResult {
    pub renewed: bool,
    pub resource_id: String,
    pub expires_at: Option<f64>,
}

pub fn renew_result(result: &HoldResult) -> RenewResult {
    RenewResult {
        renewed: result.status == HoldStatus::Ok,
        resource_id: result.resource_id.clone(),
        expires_at: result.expires_at.as_deref().map(stamp_seconds),
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HealthResult {
    pub status: String,
    pub backend: String,
    pub uptime_s: f64,
    pub key_count: u64,
    pub workflow_count: u64,
    pub version: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ResetResult {
    pub ok: bool,
    pub cleared: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SessionSaveArgs {
    pub session_id: String,
    pub context: Map<String, Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SessionIdArgs {
    pub session_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SessionSaveResult {
    pub ok: bool,
    pub session_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SessionRestoreResult {
    pub found: bool,
    pub session_id: String,
    pub context: Option<Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HistoryArgs {
    #[serde(default)]
    pub key: Option<String>,
    #[serde(default = "ten")]
    #[schemars(range(min = 1))]
    pub n: usize,
}

fn ten() -> usize {
    10
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HistoryEntry {
    pub id: u64,
    pub key: String,
    pub new_value: Option<Value>,
    pub previous_value: Option<Value>,
    pub agent_id: Option<String>,
    pub written_at: f64,
}

impl HistoryEntry {
    /// One write, as that server logged it; `previous` is the value it replaced, if any.
    pub fn new(event: &HistoryEvent, previous: Option<Value>) -> HistoryEntry {
        HistoryEntry {
            id: event.revision,
            key: event.key.clone(),
            new_value: event.value.clone(),
            previous_value: previous,
            agent_id: event.agent_id.clone(),
            written_at: stamp_seconds(&event.time),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HistoryLogResult {
    pub entries: Vec<HistoryEntry>,
    pub total: usize,
}

mod import;
pub use import::{SidecarRun, run_records};

#[cfg(test)]
mod tests;
