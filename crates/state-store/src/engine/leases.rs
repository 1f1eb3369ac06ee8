//! The lease verbs: acquire, renew and release planned by `state_core::lease`, and reads of
//! who holds what.

use state_core::idempotency::Once;
use state_core::lease::{self, Holder};
use state_core::ops::Paged;
use state_core::ops::lease::{
    AcquireRequest, AcquireResult, HoldResult, LeaseGetRequest, LeaseGetResult, LeaseListRequest, LeaseListResult,
    ReleaseRequest, RenewRequest,
};
use state_core::plan::ReadsFirst;

use super::view::TxnView;
use super::{Engine, ReadCost};
use crate::error::EngineError;

impl Engine {
    pub async fn lease_acquire(&self, req: AcquireRequest) -> Result<AcquireResult, EngineError> {
        let ttl = req.validate()?;
        self.plan_reading(Once::of(&req)?, req.reads_first(), move |view, ctx| {
            lease::plan_acquire(view, &req.resource_id, &req.holder_id, Some(ttl), ctx)
        })
        .await
    }

    pub async fn lease_renew(&self, req: RenewRequest) -> Result<HoldResult, EngineError> {
        let ttl = req.validate()?;
        self.plan_reading(Once::of(&req)?, req.reads_first(), move |view, ctx| {
            let holder = Holder { holder_id: &req.holder_id, token: Some(req.token) };
            lease::plan_renew(view, &req.resource_id, holder, Some(ttl), ctx)
        })
        .await
    }

    pub async fn lease_release(&self, req: ReleaseRequest) -> Result<HoldResult, EngineError> {
        req.validate()?;
        self.plan_reading(Once::of(&req)?, req.reads_first(), move |view, ctx| {
            lease::plan_release(
                view,
                &req.resource_id,
                Holder { holder_id: &req.holder_id, token: Some(req.token) },
                ctx,
            )
        })
        .await
    }

    pub async fn lease_get(&self, req: LeaseGetRequest) -> Result<LeaseGetResult, EngineError> {
        req.validate()?;
        self.read(ReadCost::Point, move |txn, now| {
            Ok(lease::get(&TxnView(txn), &req.resource_id, now, txn.revision()?)?)
        })
        .await
    }

    pub async fn lease_list(&self, req: LeaseListRequest) -> Result<LeaseListResult, EngineError> {
        req.validate()?;
        self.read(ReadCost::Scan, move |txn, now| {
            let (page, after) = (req.page_size()?, req.start_after()?);
            Ok(lease::list(&TxnView(txn), &req.prefix, after.as_deref(), page, now, txn.revision()?)?)
        })
        .await
    }
}
