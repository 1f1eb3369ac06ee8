//! The rules of that server ours lack, stated with the core's planners: it issued no lease or
//! claim tokens, so a holder is known by its id alone; its claims had no lease; and any
//! caller could record a step, a re-sent step replacing the output. Each wraps the native
//! request of the same shape (checked by that request's own validation, token left at 0) and
//! the engine applies it as it applies any plan (`Engine::apply`).

use serde::Serialize;
use serde_json::Value;
use state_core::idempotency::{Mutating, Once};
use state_core::lease::{self, Holder};
use state_core::ops::lease::{HoldResult, ReleaseRequest, RenewRequest};
use state_core::ops::workflow::{CheckpointRequest, CheckpointResult, ClaimRequest, ClaimResult};
use state_core::plan::{Plan, Rule, WriteContext};
use state_core::workflow::{self, Caller, ClaimArgs, StepRule};
use state_core::{InvalidInput, Limits, StateView};

/// Each rule's idempotency kind, and its id: the wrapped request's.
macro_rules! retried_as {
    ($($rule:ty => $kind:literal),* $(,)?) => {
        $(impl Mutating for $rule {
            const KIND: &'static str = $kind;
            fn request_id(&self) -> Option<&str> {
                self.request.request_id.as_deref()
            }
        })*
    };
}

retried_as!(
    RenewByHolder => "sidecar/lease_renew",
    ReleaseByHolder => "sidecar/lease_release",
    ClaimWithoutLease => "sidecar/workflow_claim",
    RecordStep => "sidecar/workflow_checkpoint",
);

/// Renews a lease its holder id holds, whatever token it was granted under.
#[derive(Debug, Serialize)]
pub struct RenewByHolder {
    request: RenewRequest,
    ttl_millis: u64,
}

impl RenewByHolder {
    pub fn new(
        resource_id: String,
        holder_id: String,
        ttl_seconds: f64,
        request_id: Option<String>,
    ) -> Result<RenewByHolder, InvalidInput> {
        let request = RenewRequest { resource_id, holder_id, token: 0, ttl_seconds, request_id };
        let ttl_millis = request.validate()?;
        Ok(RenewByHolder { request, ttl_millis })
    }
}

impl Rule for RenewByHolder {
    type Output = HoldResult;

    fn admit(&self, _: &Limits) -> Result<Option<Once>, InvalidInput> {
        Once::of(self)
    }

    fn plan<V: StateView + ?Sized>(&self, view: &V, ctx: &WriteContext) -> Result<Plan<HoldResult>, V::Error> {
        let holder = Holder { holder_id: &self.request.holder_id, token: None };
        lease::plan_renew(view, &self.request.resource_id, holder, Some(self.ttl_millis), ctx)
    }
}

/// Releases a lease its holder id holds, whatever token it was granted under.
#[derive(Debug, Serialize)]
pub struct ReleaseByHolder {
    request: ReleaseRequest,
}

impl ReleaseByHolder {
    pub fn new(resource_id: String, holder_id: String, request_id: Option<String>) -> ReleaseByHolder {
        ReleaseByHolder { request: ReleaseRequest { resource_id, holder_id, token: 0, request_id } }
    }
}

impl Rule for ReleaseByHolder {
    type Output = HoldResult;

    fn admit(&self, _: &Limits) -> Result<Option<Once>, InvalidInput> {
        self.request.validate()?;
        Once::of(self)
    }

    fn plan<V: StateView + ?Sized>(&self, view: &V, ctx: &WriteContext) -> Result<Plan<HoldResult>, V::Error> {
        let holder = Holder { holder_id: &self.request.holder_id, token: None };
        lease::plan_release(view, &self.request.resource_id, holder, ctx)
    }
}

/// Claims one run with a claim that never lapses.
#[derive(Debug, Serialize)]
pub struct ClaimWithoutLease {
    request: ClaimRequest,
}

impl ClaimWithoutLease {
    pub fn new(run_id: String, agent_id: String, request_id: Option<String>) -> ClaimWithoutLease {
        let request = ClaimRequest {
            agent_id,
            lease_ttl_seconds: None,
            run_id: Some(run_id),
            tags: Default::default(),
            name: None,
            request_id,
        };
        ClaimWithoutLease { request }
    }
}

impl Rule for ClaimWithoutLease {
    type Output = ClaimResult;

    fn admit(&self, _: &Limits) -> Result<Option<Once>, InvalidInput> {
        self.request.validate()?;
        Once::of(self)
    }

    fn plan<V: StateView + ?Sized>(&self, view: &V, ctx: &WriteContext) -> Result<Plan<ClaimResult>, V::Error> {
        let args = ClaimArgs {
            agent_id: &self.request.agent_id,
            ttl_millis: None,
            run_id: self.request.run_id.as_deref(),
            name: None,
            tags: &self.request.tags,
        };
        workflow::plan_claim(view, args, ctx)
    }
}

/// Records a step from anyone, replacing a re-sent step's output.
#[derive(Debug, Serialize)]
pub struct RecordStep {
    request: CheckpointRequest,
}

impl RecordStep {
    pub fn new(run_id: String, step: u64, output: Value, request_id: Option<String>) -> RecordStep {
        RecordStep { request: CheckpointRequest { run_id, agent_id: "-".into(), token: 0, step, output, request_id } }
    }
}

impl Rule for RecordStep {
    type Output = CheckpointResult;

    fn admit(&self, limits: &Limits) -> Result<Option<Once>, InvalidInput> {
        self.request.validate(limits)?;
        Once::of(self)
    }

    fn plan<V: StateView + ?Sized>(&self, view: &V, ctx: &WriteContext) -> Result<Plan<CheckpointResult>, V::Error> {
        let anyone = Caller { agent_id: None, token: None };
        let CheckpointRequest { run_id, step, output, .. } = &self.request;
        workflow::plan_checkpoint(view, run_id, anyone, *step, output, StepRule::Overwrite, ctx)
    }
}
