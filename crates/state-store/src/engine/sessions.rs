//! The session verbs: saving a session's context as a new version, restoring one, listing them.

use state_core::idempotency::Once;
use state_core::ops::Paged;
use state_core::ops::session::{
    SessionListRequest, SessionListResult, SessionRestoreRequest, SessionRestoreResult, SessionSaveRequest,
    SessionSaveResult,
};
use state_core::plan::ReadsFirst;

use super::view::TxnView;
use super::{Engine, ReadCost};
use crate::error::EngineError;

impl Engine {
    pub async fn session_save(&self, req: SessionSaveRequest) -> Result<SessionSaveResult, EngineError> {
        req.validate(&self.inner.config.limits)?;
        self.plan_reading(Once::of(&req)?, req.reads_first(), move |view, ctx| {
            state_core::session::plan_save(view, &req.session_id, &req.context, req.agent_id.as_deref(), ctx)
        })
        .await
    }

    pub async fn session_restore(&self, req: SessionRestoreRequest) -> Result<SessionRestoreResult, EngineError> {
        req.validate()?;
        self.read(ReadCost::Point, move |txn, _| {
            Ok(state_core::session::restore(&TxnView(txn), &req.session_id, req.version, txn.revision()?)?)
        })
        .await
    }

    pub async fn session_list(&self, req: SessionListRequest) -> Result<SessionListResult, EngineError> {
        req.validate()?;
        self.read(ReadCost::Scan, move |txn, _| {
            let (page, after) = (req.page_size()?, req.start_after()?);
            Ok(state_core::session::list(&TxnView(txn), &req.prefix, after.as_deref(), page, txn.revision()?)?)
        })
        .await
    }
}
