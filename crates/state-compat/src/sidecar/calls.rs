//! mcp-state-sidecar's tools over the seam. Its tokenless leases, lease-less claims and
//! overwritable steps are its own rules (`super::rules`); everything else is native.

use state_core::InvalidInput;
use state_core::limits::MAX_PAGE;
use state_core::ops::admin::{RESET_CONFIRMATION, ResetRequest};
use state_core::ops::health::HealthRequest;
use state_core::ops::history::{HistoryKind, HistoryOp, HistoryRequest};
use state_core::ops::kv::{DeleteRequest, GetRequest, SetRequest};
use state_core::ops::lease::AcquireRequest;
use state_core::ops::session::{SessionRestoreRequest, SessionSaveRequest};
use state_core::ops::workflow::{CheckpointStatus, CreateRunRequest, FoundStatus, RunRequest, RunStatusRequest};
use state_core::ops::{DeleteStatus, ReadStatus};

use super::rules::{ClaimWithoutLease, RecordStep, ReleaseByHolder, RenewByHolder};
use super::*;
use crate::seam::{Answer, Answered, Failure, Seam, all_keys, all_runs, get, native};

fn missing<E>(run_id: &str) -> Failure<E> {
    Failure::NotFound(format!("Workflow '{run_id}' not found"))
}

pub async fn state_set<S: Seam>(seam: &S, a: StateSetArgs, id: Option<String>) -> Answered<S::Error> {
    let request = SetRequest {
        ttl_seconds: a.ttl_seconds.map(|s| s as f64),
        agent_id: a.agent_id,
        request_id: id,
        ..SetRequest::new(a.key, a.value)
    };
    seam.call(native::SET, request).await?;
    Answer::shaped(&OkResult { ok: true })
}

pub async fn state_get<S: Seam>(seam: &S, a: KeyArgs, _: Option<String>) -> Answered<S::Error> {
    let got = seam.call(native::GET, get(a.key)).await?;
    let found = got.status == ReadStatus::Ok;
    Answer::shaped(&GetResult { key: got.key, value: got.value, found })
}

pub async fn state_delete<S: Seam>(seam: &S, a: KeyArgs, id: Option<String>) -> Answered<S::Error> {
    let request = DeleteRequest { key: a.key, request_id: id, ..DeleteRequest::default() };
    let deleted = seam.call(native::DELETE, request).await?;
    Answer::shaped(&OkResult { ok: deleted.status == DeleteStatus::Ok })
}

pub async fn state_list<S: Seam>(seam: &S, a: StateListArgs, _: Option<String>) -> Answered<S::Error> {
    let entries = all_keys(seam, a.prefix.as_deref().unwrap_or("")).await?;
    Answer::shaped(&KeysResult { keys: entries.into_iter().map(|e| e.key).collect() })
}

pub async fn workflow_create<S: Seam>(seam: &S, a: WorkflowCreateArgs, id: Option<String>) -> Answered<S::Error> {
    let request = CreateRunRequest {
        name: a.name,
        tags: a.tags.unwrap_or_default(),
        input: Value::Null,
        max_attempts: None,
        agent_id: None,
        request_id: id,
        ..CreateRunRequest::default()
    };
    let created = seam.call(native::WORKFLOW_CREATE, request).await?;
    Answer::shaped(&CreateResult { run_id: created.run_id, name: created.name, status: "created".into() })
}

pub async fn workflow_discover<S: Seam>(seam: &S, a: DiscoverArgs, _: Option<String>) -> Answered<S::Error> {
    Answer::shaped(&runs_newest_first(&all_runs(seam).await?, a.status.as_deref(), a.tags.as_ref()))
}

pub async fn workflow_list<S: Seam>(seam: &S, _: NoArgs, _: Option<String>) -> Answered<S::Error> {
    Answer::shaped(&runs_newest_first(&all_runs(seam).await?, None, None))
}

pub async fn workflow_claim<S: Seam>(seam: &S, a: ClaimArgs, id: Option<String>) -> Answered<S::Error> {
    let claimed = seam.apply(ClaimWithoutLease::new(a.run_id.clone(), a.agent_id.clone(), id)).await?;
    let current = seam
        .call(native::WORKFLOW_STATUS, RunStatusRequest { run_id: a.run_id.clone(), wait_seconds: None })
        .await?
        .run;
    Answer::shaped(&claim_result(&a.run_id, &a.agent_id, &claimed, current.as_ref()))
}

pub async fn workflow_checkpoint<S: Seam>(seam: &S, a: CheckpointArgs, id: Option<String>) -> Answered<S::Error> {
    let done = seam.apply(RecordStep::new(a.run_id.clone(), a.step, a.output, id)).await?;
    if done.status == CheckpointStatus::NotFound {
        return Err(missing(&a.run_id));
    }
    Answer::shaped(&CheckpointResultShape { ok: true, run_id: a.run_id, step: a.step })
}

pub async fn workflow_resume<S: Seam>(seam: &S, a: RunIdArgs, _: Option<String>) -> Answered<S::Error> {
    let resumed = seam.call(native::WORKFLOW_RESUME, RunRequest { run_id: a.run_id.clone() }).await?;
    match (&resumed.status, &resumed.run) {
        (FoundStatus::Ok, Some(run)) => Answer::shaped(&resume_context(&resumed, run)),
        _ => Err(missing(&a.run_id)),
    }
}

pub async fn workflow_status<S: Seam>(seam: &S, a: RunIdArgs, _: Option<String>) -> Answered<S::Error> {
    match seam
        .call(native::WORKFLOW_STATUS, RunStatusRequest { run_id: a.run_id.clone(), wait_seconds: None })
        .await?
        .run
    {
        Some(run) => Answer::shaped(&status_result(&run)),
        None => Err(missing(&a.run_id)),
    }
}

pub async fn lease_acquire<S: Seam>(seam: &S, a: LeaseArgs, id: Option<String>) -> Answered<S::Error> {
    let request = AcquireRequest {
        resource_id: a.resource_id,
        holder_id: a.holder_id,
        ttl_seconds: a.ttl_seconds as f64,
        request_id: id,
    };
    Answer::shaped(&lease_result(&seam.call(native::LEASE_ACQUIRE, request).await?))
}

pub async fn lease_release<S: Seam>(seam: &S, a: LeaseReleaseArgs, id: Option<String>) -> Answered<S::Error> {
    Answer::shaped(&release_result(&seam.apply(ReleaseByHolder::new(a.resource_id, a.holder_id, id)).await?))
}

pub async fn lease_renew<S: Seam>(seam: &S, a: LeaseArgs, id: Option<String>) -> Answered<S::Error> {
    let rule = RenewByHolder::new(a.resource_id, a.holder_id, a.ttl_seconds as f64, id).map_err(Failure::Invalid)?;
    Answer::shaped(&renew_result(&seam.apply(rule).await?))
}

pub async fn sidecar_health<S: Seam>(seam: &S, _: NoArgs, _: Option<String>) -> Answered<S::Error> {
    let health = seam.call(native::HEALTH, HealthRequest {}).await?;
    let workflow_count = all_runs(seam).await?.len() as u64;
    Answer::shaped(&HealthResult {
        status: "ok".into(),
        backend: health.backend,
        uptime_s: health.uptime_seconds as f64,
        key_count: health.keys.unwrap_or(0),
        workflow_count,
        version: health.server_version,
    })
}

pub async fn sidecar_reset<S: Seam>(seam: &S, _: NoArgs, id: Option<String>) -> Answered<S::Error> {
    // That server wiped on request without confirmation; its users' calls carry none.
    let request = ResetRequest { confirm: RESET_CONFIRMATION.into(), agent_id: None, request_id: id };
    let reset = seam.call(native::RESET, request).await?;
    Answer::shaped(&ResetResult { ok: true, cleared: reset.removed })
}

pub async fn session_save<S: Seam>(seam: &S, a: SessionSaveArgs, id: Option<String>) -> Answered<S::Error> {
    let request = SessionSaveRequest {
        session_id: a.session_id.clone(),
        context: Value::Object(a.context),
        agent_id: None,
        request_id: id,
    };
    seam.call(native::SESSION_SAVE, request).await?;
    Answer::shaped(&SessionSaveResult { ok: true, session_id: a.session_id })
}

pub async fn session_restore<S: Seam>(seam: &S, a: SessionIdArgs, _: Option<String>) -> Answered<S::Error> {
    let request = SessionRestoreRequest { session_id: a.session_id.clone(), version: None };
    let restored = seam.call(native::SESSION_RESTORE, request).await?;
    let found = restored.status == ReadStatus::Ok;
    Answer::shaped(&SessionRestoreResult { found, session_id: a.session_id, context: restored.context })
}

/// That server logged key writes only, newest first, each with the value it replaced. Our
/// history also holds deletes and expiries, so a few times `n` events are read to find `n`
/// writes (at most one page, 1000 events).
pub async fn history_log<S: Seam>(seam: &S, a: HistoryArgs, _: Option<String>) -> Answered<S::Error> {
    if a.n == 0 {
        return Err(Failure::Invalid(InvalidInput::OutOfRange { argument: "n", message: "must be 1 or more".into() }));
    }
    let request = HistoryRequest {
        kind: Some(HistoryKind::Kv),
        key: a.key,
        n: Some(MAX_PAGE.min(a.n * 4)),
        ..Default::default()
    };
    let events = seam.call(native::HISTORY, request).await?.events;
    let mut entries = Vec::new();
    for event in events.iter().rev().filter(|e| e.op == HistoryOp::Put).take(a.n) {
        let previous = if event.version > 1 {
            let at = GetRequest { key: event.key.clone(), version: Some(event.version - 1), revision: None };
            seam.call(native::GET, at).await.ok().and_then(|r| r.value)
        } else {
            None
        };
        entries.push(HistoryEntry::new(event, previous));
    }
    let total = entries.len();
    Answer::shaped(&HistoryLogResult { entries, total })
}
