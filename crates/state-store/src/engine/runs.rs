//! The workflow verbs: runs created, claimed, checkpointed, finished, signalled and listed, each
//! planned or read by `state_core::workflow`.

use state_core::idempotency::Once;
use state_core::ops::Paged;
use state_core::ops::history::HistoryKind;
use state_core::ops::workflow::RunStatusRequest;
use state_core::ops::workflow::{AwaitSignalRequest, AwaitSignalResult, SignalRequest, SignalResult};
use state_core::ops::workflow::{
    CancelRequest, CancelResult, CheckpointRequest, CheckpointResult, ClaimRequest, ClaimResult, CompleteRequest,
    CreateRunRequest, CreateRunResult, DiscoverRequest, FailRequest, FinishResult, HeartbeatRequest, HeartbeatResult,
    ListRunsRequest, ListRunsResult, ResumeResult, RunRequest, RunStatusResult,
};
use state_core::workflow::{self, Caller, ClaimArgs, Ending, RunFilter, StepRule};

use super::view::TxnView;
use super::{Engine, ReadCost};
use crate::error::EngineError;

impl Engine {
    pub async fn workflow_create(&self, req: CreateRunRequest) -> Result<CreateRunResult, EngineError> {
        req.validate(&self.inner.config.limits)?;
        self.plan(Once::of(&req)?, move |view, ctx| workflow::plan_create(view, &req, ctx)).await
    }

    pub async fn workflow_claim(&self, req: ClaimRequest) -> Result<ClaimResult, EngineError> {
        let ttl = req.validate()?;
        self.plan(Once::of(&req)?, move |view, ctx| {
            let args = ClaimArgs {
                agent_id: &req.agent_id,
                ttl_millis: Some(ttl),
                run_id: req.run_id.as_deref(),
                name: req.name.as_deref(),
                tags: &req.tags,
            };
            workflow::plan_claim(view, args, ctx)
        })
        .await
    }

    pub async fn workflow_checkpoint(&self, req: CheckpointRequest) -> Result<CheckpointResult, EngineError> {
        req.validate(&self.inner.config.limits)?;
        self.plan(Once::of(&req)?, move |view, ctx| {
            let caller = Caller { agent_id: Some(&req.agent_id), token: Some(req.token) };
            workflow::plan_checkpoint(view, &req.run_id, caller, req.step, &req.output, StepRule::Sequential, ctx)
        })
        .await
    }

    pub async fn workflow_heartbeat(&self, req: HeartbeatRequest) -> Result<HeartbeatResult, EngineError> {
        let ttl = req.validate()?;
        self.plan(Once::of(&req)?, move |view, ctx| {
            let caller = Caller { agent_id: Some(&req.agent_id), token: Some(req.token) };
            workflow::plan_heartbeat(view, &req.run_id, caller, Some(ttl), ctx)
        })
        .await
    }

    pub async fn workflow_complete(&self, req: CompleteRequest) -> Result<FinishResult, EngineError> {
        req.validate(&self.inner.config.limits)?;
        self.plan(Once::of(&req)?, move |view, ctx| {
            let caller = Caller { agent_id: Some(&req.agent_id), token: Some(req.token) };
            workflow::plan_finish(view, &req.run_id, caller, &Ending::Complete { result: req.result.clone() }, ctx)
        })
        .await
    }

    pub async fn workflow_fail(&self, req: FailRequest) -> Result<FinishResult, EngineError> {
        req.validate()?;
        self.plan(Once::of(&req)?, move |view, ctx| {
            let caller = Caller { agent_id: Some(&req.agent_id), token: Some(req.token) };
            let ending = Ending::Fail {
                error: req.error.clone(),
                retryable: req.retryable,
                retry_delay_millis: req.retry_delay_millis(),
            };
            workflow::plan_finish(view, &req.run_id, caller, &ending, ctx)
        })
        .await
    }

    pub async fn workflow_cancel(&self, req: CancelRequest) -> Result<CancelResult, EngineError> {
        req.validate()?;
        self.plan(Once::of(&req)?, move |view, ctx| {
            workflow::plan_cancel(view, &req.run_id, req.reason.as_deref(), req.agent_id.as_deref(), ctx)
        })
        .await
    }

    pub async fn workflow_signal(&self, req: SignalRequest) -> Result<SignalResult, EngineError> {
        req.validate(&self.inner.config.limits)?;
        self.plan(Once::of(&req)?, move |view, ctx| workflow::plan_signal(view, &req, ctx)).await
    }

    pub async fn workflow_await_signal(&self, req: AwaitSignalRequest) -> Result<AwaitSignalResult, EngineError> {
        req.validate()?;
        self.plan(Once::of(&req)?, move |view, ctx| {
            let caller = Caller { agent_id: Some(&req.agent_id), token: Some(req.token) };
            workflow::plan_await_signal(view, &req.run_id, caller, &req.name, req.after_signal_id.unwrap_or(0), ctx)
        })
        .await
    }

    /// A run's status; with a wait, once it finished (or the wait ran out), woken by the
    /// run's own changes.
    pub async fn workflow_status(&self, req: RunStatusRequest) -> Result<RunStatusResult, EngineError> {
        let wait = std::time::Duration::from_millis(req.validate()?);
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let run_id = req.run_id.clone();
            let answer = self
                .read(ReadCost::Point, move |txn, now| {
                    Ok(workflow::status(&TxnView(txn), &run_id, now, txn.revision()?)?)
                })
                .await?;
            let finished = answer.run.as_ref().is_none_or(|run| run.run_status.is_terminal());
            if finished || tokio::time::Instant::now() >= deadline {
                return Ok(answer);
            }
            self.wait_for_change(HistoryKind::Workflow, &req.run_id, answer.revision, None, deadline).await?;
        }
    }

    pub async fn workflow_resume(&self, req: RunRequest) -> Result<ResumeResult, EngineError> {
        req.validate()?;
        self.read(ReadCost::Scan, move |txn, now| {
            Ok(workflow::resume(&TxnView(txn), &req.run_id, now, txn.revision()?)?)
        })
        .await
    }

    pub async fn workflow_list(&self, req: ListRunsRequest) -> Result<ListRunsResult, EngineError> {
        req.validate()?;
        self.read(ReadCost::Scan, move |txn, now| {
            let (page, after) = (req.page_size()?, req.start_after()?);
            let filter = RunFilter { status: req.status, name: req.name.as_deref(), tags: &req.tags };
            Ok(workflow::list(&TxnView(txn), filter, after.as_deref(), page, now, txn.revision()?)?)
        })
        .await
    }

    /// Runs a worker could claim now.
    pub async fn workflow_discover(&self, req: DiscoverRequest) -> Result<ListRunsResult, EngineError> {
        self.workflow_list(req.into()).await
    }
}
