//! Request and result types of every operation: the product's public data model, shared by
//! the MCP tools, the REST routes and the CLI. Field docs become schema descriptions that
//! every MCP client pays for in context tokens, so they are short.

pub mod admin;
pub mod checkpoint;
pub mod health;
pub mod history;
pub mod knowledge;
pub mod kv;
pub mod lease;
pub mod once;
pub mod queue;
pub mod reservation;
pub mod semaphore;
pub mod session;
pub mod transfer;
pub mod txn;
pub mod usage;
pub mod watch;
pub mod workflow;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

once::mutating!(
    kv::SetRequest => "state_set",
    kv::DeleteRequest => "state_delete",
    txn::TxnRequest => "state_txn",
    lease::AcquireRequest => "lease_acquire",
    lease::RenewRequest => "lease_renew",
    lease::ReleaseRequest => "lease_release",
    semaphore::SemaphoreAcquireRequest => "semaphore_acquire",
    semaphore::SemaphoreRenewRequest => "semaphore_renew",
    semaphore::SemaphoreReleaseRequest => "semaphore_release",
    queue::QueueSendRequest => "queue_send",
    queue::QueueReceiveRequest => "queue_receive",
    queue::QueueAckRequest => "queue_ack",
    queue::QueueNackRequest => "queue_nack",
    queue::QueueRedriveRequest => "queue_redrive",
    reservation::ReserveRequest => "paths_reserve",
    reservation::ReservationRenewRequest => "paths_renew",
    reservation::ReservationReleaseRequest => "paths_release",
    workflow::CreateRunRequest => "workflow_create",
    workflow::ClaimRequest => "workflow_claim",
    workflow::CheckpointRequest => "workflow_checkpoint",
    workflow::HeartbeatRequest => "workflow_heartbeat",
    workflow::CompleteRequest => "workflow_complete",
    workflow::FailRequest => "workflow_fail",
    workflow::CancelRequest => "workflow_cancel",
    workflow::SignalRequest => "workflow_signal",
    workflow::AwaitSignalRequest => "workflow_await_signal",
    session::SessionSaveRequest => "session_save",
    admin::ResetRequest => "state_reset",
    checkpoint::CheckpointSaveRequest => "checkpoint_save",
    knowledge::KnowledgeSaveRequest => "knowledge_save",
    knowledge::KnowledgeDeleteRequest => "knowledge_delete",
    transfer::ImportRequest => "store_import",
);

/// A request that reads a page at a time: `limit` and an opaque `cursor`.
pub trait Paged {
    fn limit(&self) -> Option<usize>;
    fn cursor(&self) -> Option<&str>;

    /// The page size asked for, checked against the bounds.
    fn page_size(&self) -> Result<usize, crate::InvalidInput> {
        kv::page_size("limit", self.limit(), kv::DEFAULT_LIST_LIMIT)
    }

    /// The key the page starts after, decoded from the cursor.
    fn start_after(&self) -> Result<Option<String>, crate::InvalidInput> {
        self.cursor().map(|c| crate::cursor::decode("cursor", c)).transpose()
    }

    fn validate_page(&self) -> Result<(), crate::InvalidInput> {
        self.page_size()?;
        self.start_after().map(|_| ())
    }
}

/// Implements [`Paged`] for a request with `limit` and `cursor` fields.
macro_rules! paged {
    ($($request:ty),* $(,)?) => {
        $(impl $crate::ops::Paged for $request {
            fn limit(&self) -> Option<usize> {
                self.limit
            }
            fn cursor(&self) -> Option<&str> {
                self.cursor.as_deref()
            }
        })*
    };
}
pub(crate) use paged;

/// Names under a prefix, a page at a time: the listings of semaphores, queues and
/// reservation scopes, each name with what it holds now.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NameListRequest {
    /// Only names starting with this.
    #[serde(default)]
    pub prefix: String,
    /// Names per page, 1 to 1000 (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

impl NameListRequest {
    pub fn validate(&self) -> Result<(), crate::InvalidInput> {
        crate::key::validate_prefix("prefix", &self.prefix)?;
        self.validate_page()
    }
}

paged!(NameListRequest);

/// Keeps an explicit JSON `null` as `Some(Value::Null)`, so "the value null" and "no value"
/// stay distinct in optional value fields.
pub(crate) fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// Outcome of a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReadStatus {
    Ok,
    NotFound,
}

/// Outcome of a put. On `conflict`, `expected_version` did not match and the result carries
/// the current version and value. On `fenced`, the lease token was stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WriteStatus {
    Ok,
    Conflict,
    /// The write named a lease whose `token` is no longer current; nothing was written.
    Fenced,
}

/// Outcome of a delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeleteStatus {
    Ok,
    NotFound,
    Conflict,
    Fenced,
}

/// Marker for results that always succeed when they return at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OkStatus {
    Ok,
}
