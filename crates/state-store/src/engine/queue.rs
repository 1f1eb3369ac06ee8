//! Queues: the engine verbs over `state_core::queue`. A receive that finds nothing visible may
//! wait, bounded, watching the queue and waking when a message arrives or a hidden one is due.

use std::time::Duration;

use state_core::idempotency::Once;
use state_core::ops::history::HistoryKind;
use state_core::ops::queue::{
    QueueAckRequest, QueueListResult, QueueNackRequest, QueuePeekRequest, QueuePeekResult, QueueReceiveRequest,
    QueueReceiveResult, QueueRedriveRequest, QueueRedriveResult, QueueSendRequest, QueueSendResult, QueueSettleResult,
    ReceiveStatus,
};
use state_core::ops::{NameListRequest, Paged};
use state_core::queue::{self, Outgoing};
use tokio::time::Instant;

use super::view::TxnView;
use super::{Engine, ReadCost};
use crate::error::EngineError;

impl Engine {
    pub async fn queue_send(&self, req: QueueSendRequest) -> Result<QueueSendResult, EngineError> {
        let terms = req.validate(&self.inner.config.limits)?;
        self.plan(Once::of(&req)?, move |view, ctx| {
            let out = Outgoing {
                queue: &req.queue,
                body: &req.body,
                sender: req.sender.as_deref(),
                dedupe_key: req.dedupe_key.as_deref(),
                terms,
            };
            queue::plan_send(view, &out, ctx)
        })
        .await
    }

    pub async fn queue_receive(&self, req: QueueReceiveRequest) -> Result<QueueReceiveResult, EngineError> {
        let (visibility, wait) = req.validate()?;
        let deadline = Instant::now() + Duration::from_millis(wait);
        loop {
            let (name, consumer) = (req.queue.clone(), req.consumer_id.clone());
            let result = self
                .plan(Once::of(&req)?, move |view, ctx| queue::plan_receive(view, &name, &consumer, visibility, ctx))
                .await?;
            // A receive that moved dead letters changed the store: its answer is recorded under
            // its request id, so it is the answer, not a reason to look again.
            let changed = result.status != ReceiveStatus::Empty || !result.dead_lettered.is_empty();
            if changed || Instant::now() >= deadline {
                return Ok(result);
            }
            self.wait_for_messages(&req.queue, result.revision, deadline).await?;
        }
    }

    /// Returns once `queue` changed after `revision`, a hidden message may be due, or the
    /// deadline passed.
    async fn wait_for_messages(&self, name: &str, revision: u64, deadline: Instant) -> Result<(), EngineError> {
        let owned = name.to_owned();
        let due = self
            .read(ReadCost::Scan, move |txn, now| {
                let at = queue::next_visible(&TxnView(txn), &owned, now)?;
                Ok(at.map(|at| Duration::from_millis(at.0.saturating_sub(now.0))))
            })
            .await?;
        self.wait_for_change(HistoryKind::Queue, name, revision, due, deadline).await
    }

    pub async fn queue_ack(&self, req: QueueAckRequest) -> Result<QueueSettleResult, EngineError> {
        req.validate()?;
        self.plan(Once::of(&req)?, move |view, ctx| {
            queue::plan_ack(view, &req.queue, &req.message_id, req.receipt, ctx)
        })
        .await
    }

    pub async fn queue_nack(&self, req: QueueNackRequest) -> Result<QueueSettleResult, EngineError> {
        let delay = req.validate()?;
        self.plan(Once::of(&req)?, move |view, ctx| {
            queue::plan_nack(view, &req.queue, &req.message_id, req.receipt, delay, ctx)
        })
        .await
    }

    pub async fn queue_redrive(&self, req: QueueRedriveRequest) -> Result<QueueRedriveResult, EngineError> {
        let limit = req.validate()?;
        self.plan(Once::of(&req)?, move |view, ctx| {
            queue::plan_redrive(view, &req.queue, limit, req.agent_id.as_deref(), ctx)
        })
        .await
    }

    pub async fn queue_peek(&self, req: QueuePeekRequest) -> Result<QueuePeekResult, EngineError> {
        let limit = req.validate()?;
        self.read(ReadCost::Scan, move |txn, now| {
            Ok(queue::peek(&TxnView(txn), &req.queue, limit, now, txn.revision()?)?)
        })
        .await
    }

    pub async fn queue_list(&self, req: NameListRequest) -> Result<QueueListResult, EngineError> {
        req.validate()?;
        self.read(ReadCost::Scan, move |txn, now| {
            let (page, after) = (req.page_size()?, req.start_after()?);
            Ok(queue::list(&TxnView(txn), &req.prefix, after.as_deref(), page, now, txn.revision()?)?)
        })
        .await
    }
}
