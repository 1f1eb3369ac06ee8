//! The rules of that server ours lack, stated with the core's planners: it issued no lease or
//! claim tokens, so a holder is known by its id alone; its claims had no lease; and any
//! caller could record a step, a re-sent step replacing the output. The engine applies these
//! as it applies any plan (`Engine::apply`).

use serde::Serialize;
use serde_json::Value;
use state_core::idempotency::{Mutating, Once};
use state_core::lease::{self, Holder};
use state_core::ops::lease::{HoldResult, ReleaseRequest, RenewRequest};
use state_core::ops::workflow::{CheckpointRequest, CheckpointResult, ClaimRequest, ClaimResult};
use state_core::plan::{Plan, Rule, WriteContext};
use state_core::workflow::{self, Caller, ClaimArgs, StepRule};
use state_core::{InvalidInput, Limits, StateView};

/// Renews a lease its holder id holds, whatever token it was granted under.
#[derive(Debug, Serialize)]
pub struct RenewByHolder {
    resource_id: String,
    holder_id: String,
    ttl_millis: u64,
    request_id: Option<String>,
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
        let RenewRequest { resource_id, holder_id, request_id, .. } = request;
        Ok(RenewByHolder { resource_id, holder_id, ttl_millis, request_id })
    }
}

impl Mutating for RenewByHolder {
    const KIND: &'static str = "sidecar/lease_renew";

    fn request_id(&self) -> Option<&str> {
        self.request_id.as_deref()
    }
}

impl Rule for RenewByHolder {
    type Output = HoldResult;

    fn admit(&self, _: &Limits) -> Result<Option<Once>, InvalidInput> {
        Once::of(self)
    }

    fn plan<V: StateView + ?Sized>(&self, view: &V, ctx: &WriteContext) -> Result<Plan<HoldResult>, V::Error> {
        let holder = Holder { holder_id: &self.holder_id, token: None };
        lease::plan_renew(view, &self.resource_id, holder, Some(self.ttl_millis), ctx)
    }
}

/// Releases a lease its holder id holds, whatever token it was granted under.
#[derive(Debug, Serialize)]
pub struct ReleaseByHolder {
    resource_id: String,
    holder_id: String,
    request_id: Option<String>,
}

impl ReleaseByHolder {
    pub fn new(resource_id: String, holder_id: String, request_id: Option<String>) -> ReleaseByHolder {
        ReleaseByHolder { resource_id, holder_id, request_id }
    }
}

impl Mutating for ReleaseByHolder {
    const KIND: &'static str = "sidecar/lease_release";

    fn request_id(&self) -> Option<&str> {
        self.request_id.as_deref()
    }
}

impl Rule for ReleaseByHolder {
    type Output = HoldResult;

    fn admit(&self, _: &Limits) -> Result<Option<Once>, InvalidInput> {
        let request = ReleaseRequest {
            resource_id: self.resource_id.clone(),
            holder_id: self.holder_id.clone(),
            token: 0,
            request_id: None,
        };
        request.validate()?;
        Once::of(self)
    }

    fn plan<V: StateView + ?Sized>(&self, view: &V, ctx: &WriteContext) -> Result<Plan<HoldResult>, V::Error> {
        lease::plan_release(view, &self.resource_id, Holder { holder_id: &self.holder_id, token: None }, ctx)
    }
}

/// Claims one run with a claim that never lapses.
#[derive(Debug, Serialize)]
pub struct ClaimWithoutLease {
    run_id: String,
    agent_id: String,
    request_id: Option<String>,
}

impl ClaimWithoutLease {
    pub fn new(run_id: String, agent_id: String, request_id: Option<String>) -> ClaimWithoutLease {
        ClaimWithoutLease { run_id, agent_id, request_id }
    }
}

impl Mutating for ClaimWithoutLease {
    const KIND: &'static str = "sidecar/workflow_claim";

    fn request_id(&self) -> Option<&str> {
        self.request_id.as_deref()
    }
}

impl Rule for ClaimWithoutLease {
    type Output = ClaimResult;

    fn admit(&self, _: &Limits) -> Result<Option<Once>, InvalidInput> {
        let request = ClaimRequest {
            agent_id: self.agent_id.clone(),
            lease_ttl_seconds: None,
            run_id: Some(self.run_id.clone()),
            tags: Default::default(),
            name: None,
            request_id: None,
        };
        request.validate()?;
        Once::of(self)
    }

    fn plan<V: StateView + ?Sized>(&self, view: &V, ctx: &WriteContext) -> Result<Plan<ClaimResult>, V::Error> {
        let no_tags = Default::default();
        let args = ClaimArgs {
            agent_id: &self.agent_id,
            ttl_millis: None,
            run_id: Some(&self.run_id),
            name: None,
            tags: &no_tags,
        };
        workflow::plan_claim(view, args, ctx)
    }
}

/// Records a step from anyone, replacing a re-sent step's output.
#[derive(Debug, Serialize)]
pub struct RecordStep {
    run_id: String,
    step: u64,
    output: Value,
    request_id: Option<String>,
}

impl RecordStep {
    pub fn new(run_id: String, step: u64, output: Value, request_id: Option<String>) -> RecordStep {
        RecordStep { run_id, step, output, request_id }
    }
}

impl Mutating for RecordStep {
    const KIND: &'static str = "sidecar/workflow_checkpoint";

    fn request_id(&self) -> Option<&str> {
        self.request_id.as_deref()
    }
}

impl Rule for RecordStep {
    type Output = CheckpointResult;

    fn admit(&self, limits: &Limits) -> Result<Option<Once>, InvalidInput> {
        let request = CheckpointRequest {
            run_id: self.run_id.clone(),
            agent_id: "-".into(),
            token: 0,
            step: self.step,
            output: self.output.clone(),
            request_id: None,
        };
        request.validate(limits)?;
        Once::of(self)
    }

    fn plan<V: StateView + ?Sized>(&self, view: &V, ctx: &WriteContext) -> Result<Plan<CheckpointResult>, V::Error> {
        let anyone = Caller { agent_id: None, token: None };
        workflow::plan_checkpoint(view, &self.run_id, anyone, self.step, &self.output, StepRule::Overwrite, ctx)
    }
}
