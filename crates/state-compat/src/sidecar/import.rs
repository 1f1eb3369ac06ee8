//! The sidecar's workflow runs as this store's records, for `statectl import --from sidecar`.
//!
//! The sidecar's claims have no lease and no token, so none can be carried over: a run it
//! had claimed (or was running) comes back pending, with its holder, its attempt counted and
//! its steps kept, so its worker (or another) claims it again, gets a fencing token, and
//! resumes after the last step. Finished runs keep their status.

use std::collections::BTreeMap;

use serde_json::Value;

use state_core::keyspace;
use state_core::ops::transfer::DumpedRecord;
use state_core::ops::workflow::{DEFAULT_MAX_ATTEMPTS, RunStatus};
use state_core::time::UnixMillis;
use state_core::workflow::{RunRecord, StepRecord};

/// A row of the sidecar's `workflows` table with its `step_outputs`.
#[derive(Debug, Clone, PartialEq)]
pub struct SidecarRun {
    pub run_id: String,
    pub name: String,
    /// created, claimed, running, completed, failed, …
    pub status: String,
    pub tags: BTreeMap<String, String>,
    pub agent_id: Option<String>,
    pub created_at: UnixMillis,
    pub updated_at: UnixMillis,
    /// Step number and output, in step order.
    pub steps: Vec<(u64, Value)>,
}

fn status(sidecar: &str) -> RunStatus {
    match sidecar {
        "completed" | "done" => RunStatus::Completed,
        "failed" | "error" => RunStatus::Failed,
        "cancelled" | "canceled" => RunStatus::Cancelled,
        _ => RunStatus::Pending,
    }
}

/// The run, its steps and (when pending) its place in the queue, as dump records.
pub fn run_records(run: &SidecarRun) -> Vec<DumpedRecord> {
    let status = status(&run.status);
    let claimed = run.agent_id.is_some();
    let last_step = run.steps.iter().map(|(step, _)| *step).max().unwrap_or(0);
    let attempt = u32::from(claimed);
    let record = |key: String, value: Value| DumpedRecord {
        key,
        value,
        version: 1,
        create_revision: 0,
        mod_revision: 0,
        updated_at: run.updated_at.to_rfc3339(),
        expires_at: None,
        agent_id: run.agent_id.clone(),
    };
    let stored = RunRecord {
        name: run.name.clone(),
        tags: run.tags.clone(),
        input: Value::Null,
        status,
        attempt,
        max_attempts: DEFAULT_MAX_ATTEMPTS.max(attempt + 1),
        holder: run.agent_id.clone(),
        token: None,
        last_step,
        result: None,
        error: None,
        created_at: run.created_at,
        updated_at: run.updated_at,
        // That server had no dependencies, priorities, delays, dedupe keys or signals.
        depends_on: Vec::new(),
        priority: 0,
        not_before: None,
        dedupe_key: None,
        awaiting: None,
        concurrency: None,
    };
    let mut records =
        vec![record(keyspace::run_key(&run.run_id), serde_json::to_value(&stored).unwrap_or(Value::Null))];
    for (step, output) in &run.steps {
        let step_record = StepRecord {
            output: output.clone(),
            agent_id: run.agent_id.clone(),
            attempt: attempt.max(1),
            at: run.updated_at,
        };
        records.push(record(
            keyspace::step_key(&run.run_id, *step),
            serde_json::to_value(&step_record).unwrap_or(Value::Null),
        ));
    }
    if status == RunStatus::Pending {
        records.push(record(keyspace::queue_key(&run.run_id), Value::Null));
    }
    records
}
