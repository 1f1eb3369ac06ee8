//! The key-value verbs: reads of current values, of the past and of history, and the writes
//! (set, delete, txn) planned by `state_core::kv` against the batch's transaction.

use state_core::idempotency::Once;
use state_core::kv;
use state_core::ops::history::{HistoryRequest, HistoryResult};
use state_core::ops::kv::{
    BatchGetRequest, BatchGetResult, DeleteRequest, DeleteResult, GetRequest, GetResult, ListRequest, ListResult,
    SetRequest, SetResult,
};
use state_core::ops::txn::{TxnRequest, TxnResult};
use state_core::plan::ReadsFirst;

use super::{Engine, POINT_READ_KEYS, ReadCost, reads};
use crate::error::EngineError;

impl Engine {
    pub async fn get(&self, req: GetRequest) -> Result<GetResult, EngineError> {
        req.validate()?;
        // A read of the current value is one B-tree lookup; one in the past walks history.
        let cost = if req.version.is_none() && req.revision.is_none() { ReadCost::Point } else { ReadCost::Scan };
        if cost == ReadCost::Point {
            let backend = self.backend()?;
            // Before the read begins: a backend's future may start it at once.
            self.inner.visibility.settled().await;
            if let Some(read) = backend.get_now(&req.key) {
                let now = self.inner.clock.now();
                let (entry, revision) = read.await?;
                return Ok(reads::current(&req.key, entry, now, revision));
            }
        }
        self.read(cost, move |txn, now| reads::get(txn, &req, now)).await
    }

    pub async fn batch_get(&self, req: BatchGetRequest) -> Result<BatchGetResult, EngineError> {
        req.validate()?;
        let cost = if req.keys.len() <= POINT_READ_KEYS { ReadCost::Point } else { ReadCost::Scan };
        self.read(cost, move |txn, now| reads::batch_get(txn, &req, now)).await
    }

    pub async fn list(&self, req: ListRequest) -> Result<ListResult, EngineError> {
        req.validate()?;
        self.read(ReadCost::Scan, move |txn, now| reads::list(txn, &req, now)).await
    }

    pub async fn history(&self, req: HistoryRequest) -> Result<HistoryResult, EngineError> {
        req.validate()?;
        self.read(ReadCost::Scan, move |txn, _| reads::history(txn, &req)).await
    }

    pub async fn set(&self, req: SetRequest) -> Result<SetResult, EngineError> {
        req.validate(&self.inner.config.limits)?;
        self.plan_reading(Once::of(&req)?, req.reads_first(), move |view, ctx| kv::plan_set(view, &req, ctx)).await
    }

    pub async fn delete(&self, req: DeleteRequest) -> Result<DeleteResult, EngineError> {
        req.validate()?;
        self.plan_reading(Once::of(&req)?, req.reads_first(), move |view, ctx| kv::plan_delete(view, &req, ctx)).await
    }

    pub async fn txn(&self, req: TxnRequest) -> Result<TxnResult, EngineError> {
        req.validate(&self.inner.config.limits)?;
        self.plan_reading(Once::of(&req)?, req.reads_first(), move |view, ctx| kv::plan_txn(view, &req, ctx)).await
    }
}
