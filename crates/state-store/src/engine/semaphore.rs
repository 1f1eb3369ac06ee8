//! Semaphores: the engine verbs over `state_core::semaphore`. An acquire that finds every
//! permit held may wait, bounded, for one: it watches the semaphore's permits and tries again
//! when one is released or expires.

use std::time::Duration;

use state_core::idempotency::Once;
use state_core::ops::history::HistoryKind;
use state_core::ops::semaphore::{
    PermitResult, SemaphoreAcquireRequest, SemaphoreAcquireResult, SemaphoreGetRequest, SemaphoreGetResult,
    SemaphoreListResult, SemaphoreReleaseRequest, SemaphoreRenewRequest, SemaphoreStatus,
};
use state_core::ops::{NameListRequest, Paged};
use state_core::plan::ReadsFirst;
use state_core::semaphore;
use tokio::time::Instant;

use super::view::TxnView;
use super::{Engine, ReadCost};
use crate::error::EngineError;

impl Engine {
    pub async fn semaphore_acquire(&self, req: SemaphoreAcquireRequest) -> Result<SemaphoreAcquireResult, EngineError> {
        let (ttl, wait) = req.validate()?;
        let deadline = Instant::now() + Duration::from_millis(wait);
        loop {
            let (name, holder, capacity) = (req.name.clone(), req.holder_id.clone(), req.capacity);
            let result = self
                .plan(Once::of(&req)?, move |view, ctx| {
                    semaphore::plan_acquire(view, &name, &holder, capacity, ttl, ctx)
                })
                .await?;
            if result.status != SemaphoreStatus::Full || Instant::now() >= deadline {
                return Ok(result);
            }
            self.wait_for_permits(&req.name, result.revision, deadline).await?;
        }
    }

    /// Returns once the permits of `name` changed after `revision`, one may have expired, or
    /// the deadline passed.
    async fn wait_for_permits(&self, name: &str, revision: u64, deadline: Instant) -> Result<(), EngineError> {
        let owned = name.to_owned();
        let soonest = self
            .read(ReadCost::Scan, move |txn, now| {
                let expiry = semaphore::next_expiry(&TxnView(txn), &owned, now)?;
                Ok(expiry.map(|at| Duration::from_millis(at.0.saturating_sub(now.0))))
            })
            .await?;
        self.wait_for_change(HistoryKind::Semaphore, name, revision, soonest, deadline).await
    }

    pub async fn semaphore_renew(&self, req: SemaphoreRenewRequest) -> Result<PermitResult, EngineError> {
        let ttl = req.validate()?;
        self.plan_reading(Once::of(&req)?, req.reads_first(), move |view, ctx| {
            semaphore::plan_renew(view, &req.name, &req.holder_id, req.token, ttl, ctx)
        })
        .await
    }

    pub async fn semaphore_release(&self, req: SemaphoreReleaseRequest) -> Result<PermitResult, EngineError> {
        req.validate()?;
        self.plan_reading(Once::of(&req)?, req.reads_first(), move |view, ctx| {
            semaphore::plan_release(view, &req.name, &req.holder_id, req.token, ctx)
        })
        .await
    }

    pub async fn semaphore_get(&self, req: SemaphoreGetRequest) -> Result<SemaphoreGetResult, EngineError> {
        req.validate()?;
        self.read(ReadCost::Scan, move |txn, now| Ok(semaphore::get(&TxnView(txn), &req.name, now, txn.revision()?)?))
            .await
    }

    pub async fn semaphore_list(&self, req: NameListRequest) -> Result<SemaphoreListResult, EngineError> {
        req.validate()?;
        self.read(ReadCost::Scan, move |txn, now| {
            let (page, after) = (req.page_size()?, req.start_after()?);
            Ok(semaphore::list(&TxnView(txn), &req.prefix, after.as_deref(), page, now, txn.revision()?)?)
        })
        .await
    }
}
