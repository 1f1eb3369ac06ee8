//! Path reservations: the engine verbs over `state_core::reservation`.

use state_core::idempotency::Once;
use state_core::ops::reservation::{
    PathCheckRequest, PathCheckResult, ReservationListRequest, ReservationListResult, ReservationReleaseRequest,
    ReservationRenewRequest, ReservationResult, ReserveRequest, ReserveResult, ScopeListResult,
};
use state_core::ops::{NameListRequest, Paged};
use state_core::plan::ReadsFirst;
use state_core::reservation::{self, Wanted};

use super::view::TxnView;
use super::{Engine, ReadCost};
use crate::error::EngineError;

impl Engine {
    pub async fn paths_reserve(&self, req: ReserveRequest) -> Result<ReserveResult, EngineError> {
        let (globs, ttl_millis) = req.validate()?;
        self.plan(Once::of(&req)?, move |view, ctx| {
            let wanted = Wanted {
                scope: &req.scope,
                holder_id: &req.holder_id,
                patterns: &req.patterns,
                globs: &globs,
                exclusive: req.exclusive.unwrap_or(true),
                reason: req.reason.as_deref(),
                ttl_millis,
            };
            reservation::plan_reserve(view, &wanted, ctx)
        })
        .await
    }

    pub async fn paths_renew(&self, req: ReservationRenewRequest) -> Result<ReservationResult, EngineError> {
        let ttl = req.validate()?;
        self.plan_reading(Once::of(&req)?, req.reads_first(), move |view, ctx| {
            reservation::plan_renew(view, &req.scope, &req.holder_id, req.reservation_id, ttl, ctx)
        })
        .await
    }

    pub async fn paths_release(&self, req: ReservationReleaseRequest) -> Result<ReservationResult, EngineError> {
        req.validate()?;
        self.plan_reading(Once::of(&req)?, req.reads_first(), move |view, ctx| {
            reservation::plan_release(view, &req.scope, &req.holder_id, req.reservation_id, ctx)
        })
        .await
    }

    pub async fn paths_list(&self, req: ReservationListRequest) -> Result<ReservationListResult, EngineError> {
        req.validate()?;
        self.read(ReadCost::Scan, move |txn, now| {
            Ok(reservation::list(&TxnView(txn), &req.scope, req.holder_id.as_deref(), now, txn.revision()?)?)
        })
        .await
    }

    pub async fn paths_check(&self, req: PathCheckRequest) -> Result<PathCheckResult, EngineError> {
        req.validate()?;
        self.read(ReadCost::Scan, move |txn, now| {
            Ok(reservation::check(&TxnView(txn), &req.scope, &req.holder_id, &req.path, now, txn.revision()?)?)
        })
        .await
    }

    pub async fn paths_scopes(&self, req: NameListRequest) -> Result<ScopeListResult, EngineError> {
        req.validate()?;
        self.read(ReadCost::Scan, move |txn, now| {
            let (page, after) = (req.page_size()?, req.start_after()?);
            Ok(reservation::list_scopes(&TxnView(txn), &req.prefix, after.as_deref(), page, now, txn.revision()?)?)
        })
        .await
    }
}
