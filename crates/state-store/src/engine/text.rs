//! Checkpoints and knowledge: the engine verbs over `state_core::checkpoint` and
//! `state_core::knowledge`. Token counting and term analysis happen before a write is
//! queued, on the blocking pool, so the single writer only applies the plan.

use state_core::checkpoint::{self, SearchFilter};
use state_core::idempotency::Once;
use state_core::knowledge::{self, Recall};
use state_core::ops::Paged;
use state_core::ops::checkpoint::{
    CheckpointRestoreRequest, CheckpointRestoreResult, CheckpointSaveRequest, CheckpointSaveResult,
    CheckpointSearchRequest, CheckpointSearchResult, CheckpointTimelineRequest, CheckpointTimelineResult,
};
use state_core::ops::knowledge::{
    KnowledgeDeleteRequest, KnowledgeDeleteResult, KnowledgeListRequest, KnowledgeListResult, KnowledgeRecallRequest,
    KnowledgeRecallResult, KnowledgeSaveRequest, KnowledgeSaveResult,
};
use state_core::time::parse_since;

use super::view::TxnView;
use super::{Engine, ReadCost};
use crate::error::EngineError;

/// Runs CPU-bound preparation off the async workers.
pub(super) async fn off_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, EngineError> {
    tokio::task::spawn_blocking(f).await.map_err(|_| EngineError::Closed)
}

impl Engine {
    pub async fn checkpoint_save(&self, req: CheckpointSaveRequest) -> Result<CheckpointSaveResult, EngineError> {
        req.validate()?;
        let once = Once::of(&req)?;
        let prepared = checkpoint::prepare(req);
        self.plan(once, move |view, ctx| checkpoint::plan_save(view, &prepared, ctx)).await
    }

    pub async fn checkpoint_restore(
        &self,
        req: CheckpointRestoreRequest,
    ) -> Result<CheckpointRestoreResult, EngineError> {
        req.validate()?;
        self.read(ReadCost::Scan, move |txn, _| Ok(checkpoint::restore(&TxnView(txn), &req, txn.revision()?)?)).await
    }

    pub async fn checkpoint_search(&self, req: CheckpointSearchRequest) -> Result<CheckpointSearchResult, EngineError> {
        req.validate()?;
        let limit = req.limit.unwrap_or(state_core::ops::checkpoint::DEFAULT_SEARCH_LIMIT);
        self.read(ReadCost::Scan, move |txn, now| {
            let since = req.since.as_deref().map(|s| parse_since("since", s, now)).transpose()?;
            let filter = SearchFilter { since, workspace: req.workspace.as_deref(), limit };
            Ok(checkpoint::search(&TxnView(txn), &req.query, filter, txn.revision()?)?)
        })
        .await
    }

    pub async fn checkpoint_timeline(
        &self,
        req: CheckpointTimelineRequest,
    ) -> Result<CheckpointTimelineResult, EngineError> {
        req.validate()?;
        let span = req.span_millis()?;
        self.read(ReadCost::Scan, move |txn, now| {
            let format = req.format.unwrap_or_default();
            let workspace = req.workspace.as_deref();
            Ok(checkpoint::timeline(&TxnView(txn), span, format, workspace, now, txn.revision()?)?)
        })
        .await
    }

    pub async fn knowledge_save(&self, req: KnowledgeSaveRequest) -> Result<KnowledgeSaveResult, EngineError> {
        req.validate()?;
        let once = Once::of(&req)?;
        let prepared = off_thread(move || knowledge::prepare(req)).await?;
        self.plan(once, move |view, ctx| knowledge::plan_save(view, &prepared, ctx)).await
    }

    pub async fn knowledge_recall(&self, req: KnowledgeRecallRequest) -> Result<KnowledgeRecallResult, EngineError> {
        req.validate()?;
        let (budget, limit) = (req.budget()?, req.item_limit()?);
        self.read(ReadCost::Scan, move |txn, now| {
            let ask = Recall { query: &req.query, scope: req.scope.as_deref(), budget, limit };
            Ok(knowledge::recall(&TxnView(txn), ask, now, txn.revision()?)?)
        })
        .await
    }

    pub async fn knowledge_list(&self, req: KnowledgeListRequest) -> Result<KnowledgeListResult, EngineError> {
        req.validate()?;
        self.read(ReadCost::Scan, move |txn, now| {
            let (page, after) = (req.page_size()?, req.start_after()?);
            let (prefix, scope) = (&req.prefix, req.scope.as_deref());
            Ok(knowledge::list(&TxnView(txn), prefix, scope, after.as_deref(), page, now, txn.revision()?)?)
        })
        .await
    }

    pub async fn knowledge_delete(&self, req: KnowledgeDeleteRequest) -> Result<KnowledgeDeleteResult, EngineError> {
        req.validate()?;
        self.plan(Once::of(&req)?, move |view, ctx| knowledge::plan_delete(view, &req, ctx)).await
    }
}
