//! Reading the change log.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::kv::page_size;
use super::present;
use crate::entry::{Action, Event, EventKind};
use crate::error::InvalidInput;
use crate::key::{validate_key, validate_prefix};
use crate::keyspace::{self, Space};

pub const DEFAULT_HISTORY_LIMIT: usize = 50;

/// Which stored keys a history read covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyFilter {
    All,
    /// Every user key, none of the store's own records.
    UserKeys,
    Exact(String),
    Prefix(String),
}

impl KeyFilter {
    pub fn matches(&self, key: &str) -> bool {
        match self {
            KeyFilter::All => true,
            KeyFilter::UserKeys => keyspace::classify(key).0 == Space::Kv,
            KeyFilter::Exact(k) => k == key,
            KeyFilter::Prefix(p) => key.starts_with(p.as_str()),
        }
    }
}

/// What a history event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HistoryKind {
    Kv,
    Lease,
    Semaphore,
    /// Path reservations, by scope.
    Reservation,
    /// Queue messages, by queue.
    Queue,
    Workflow,
    Session,
    Store,
    Checkpoint,
    Knowledge,
}

impl HistoryKind {
    fn of(space: Space) -> HistoryKind {
        match space {
            Space::Kv => HistoryKind::Kv,
            Space::Lease => HistoryKind::Lease,
            Space::Permit => HistoryKind::Semaphore,
            Space::Reservation => HistoryKind::Reservation,
            Space::Message | Space::MessageDedupe => HistoryKind::Queue,
            Space::Claim
            | Space::Run
            | Space::Step
            | Space::Queue
            | Space::PriorityQueue
            | Space::RunDedupe
            | Space::Dependent
            | Space::Release
            | Space::Signal => HistoryKind::Workflow,
            Space::Session | Space::SessionVersion => HistoryKind::Session,
            Space::Checkpoint | Space::CheckpointSession | Space::CheckpointLatest => HistoryKind::Checkpoint,
            Space::Note => HistoryKind::Knowledge,
            Space::Posting | Space::IndexStats | Space::IndexedTerms => HistoryKind::Store,
            // Request records leave no events; if one ever did, it would be store bookkeeping.
            Space::Store | Space::Request => HistoryKind::Store,
        }
    }

    /// The space whose keys hold this kind's events.
    fn space(self) -> Space {
        match self {
            HistoryKind::Kv => Space::Kv,
            HistoryKind::Lease => Space::Lease,
            HistoryKind::Semaphore => Space::Permit,
            HistoryKind::Reservation => Space::Reservation,
            HistoryKind::Queue => Space::Message,
            HistoryKind::Workflow => Space::Run,
            HistoryKind::Session => Space::Session,
            HistoryKind::Store => Space::Store,
            HistoryKind::Checkpoint => Space::Checkpoint,
            HistoryKind::Knowledge => Space::Note,
        }
    }
}

/// Changes in revision order: the latest `n`, or the first `n` after `since_revision`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryRequest {
    /// Only this kind of record (kv, lease, semaphore, reservation, queue, workflow, session, store, checkpoint, knowledge). With `key` or `prefix`
    /// and no kind, kv is meant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<HistoryKind>,
    /// Only this key (or lease resource, run id, session id, per `kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Only keys (or ids) with this prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Only events after this revision (pass the last revision you have seen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_revision: Option<u64>,
    /// Most events to return, 1 to 1000 (default 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub n: Option<usize>,
    /// Include values of puts (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_values: Option<bool>,
}

impl HistoryRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        if self.key.is_some() && self.prefix.is_some() {
            return Err(InvalidInput::MutuallyExclusive { first: "key", second: "prefix" });
        }
        if self.kind == Some(HistoryKind::Store) && (self.key.is_some() || self.prefix.is_some()) {
            return Err(InvalidInput::Malformed {
                argument: "kind".into(),
                message: "store events have no key: omit `key` and `prefix`".into(),
            });
        }
        if let Some(key) = &self.key {
            validate_key("key", key)?;
        }
        if let Some(prefix) = &self.prefix {
            validate_prefix("prefix", prefix)?;
        }
        self.limit()?;
        Ok(())
    }

    /// The stored keys this request covers.
    pub fn filter(&self) -> KeyFilter {
        let kind = match (self.kind, &self.key, &self.prefix) {
            (None, None, None) => return KeyFilter::All,
            (None, _, _) => HistoryKind::Kv,
            (Some(kind), _, _) => kind,
        };
        if kind == HistoryKind::Store {
            return KeyFilter::Exact(keyspace::RESET_KEY.to_owned());
        }
        let space = kind.space();
        match (&self.key, &self.prefix) {
            // A semaphore's events are its permits', one key per holder; a scope's are its
            // reservations'.
            (Some(name), _) if kind == HistoryKind::Semaphore => KeyFilter::Prefix(keyspace::permit_prefix(name)),
            (Some(scope), _) if kind == HistoryKind::Reservation => {
                KeyFilter::Prefix(keyspace::reservation_prefix(scope))
            }
            (Some(queue), _) if kind == HistoryKind::Queue => KeyFilter::Prefix(keyspace::message_prefix(queue)),
            (Some(key), _) => KeyFilter::Exact(keyspace::key(space, key)),
            (None, Some(prefix)) if !(prefix.is_empty() && space == Space::Kv) => {
                KeyFilter::Prefix(keyspace::key(space, prefix))
            }
            _ if space == Space::Kv => KeyFilter::UserKeys,
            _ => KeyFilter::Prefix(keyspace::prefix(space)),
        }
    }

    pub fn limit(&self) -> Result<usize, InvalidInput> {
        page_size("n", self.n, DEFAULT_HISTORY_LIMIT)
    }
}

/// What happened: put/delete/expired for keys; the transition for leases, runs, sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HistoryOp {
    Put,
    Delete,
    Expired,
    Grant,
    Renew,
    Release,
    Expire,
    Create,
    Claim,
    Reclaim,
    Heartbeat,
    Checkpoint,
    Complete,
    Fail,
    Retry,
    Cancel,
    ClaimExpired,
    Save,
    Reset,
    /// Written by an import, as it was in the store it came from.
    Import,
    Send,
    Receive,
    Ack,
    Nack,
    DeadLetter,
    Signal,
    /// A run parked until a signal arrives.
    AwaitSignal,
}

impl HistoryOp {
    pub fn of(kind: EventKind, action: Option<Action>) -> HistoryOp {
        match action {
            Some(Action::LeaseGrant) => HistoryOp::Grant,
            Some(Action::LeaseRenew) => HistoryOp::Renew,
            Some(Action::LeaseRelease) => HistoryOp::Release,
            Some(Action::LeaseExpire) => HistoryOp::Expire,
            Some(Action::RunCreate) => HistoryOp::Create,
            Some(Action::RunClaim) => HistoryOp::Claim,
            Some(Action::RunReclaim) => HistoryOp::Reclaim,
            Some(Action::RunHeartbeat) => HistoryOp::Heartbeat,
            Some(Action::RunCheckpoint) => HistoryOp::Checkpoint,
            Some(Action::RunComplete) => HistoryOp::Complete,
            Some(Action::RunFail) => HistoryOp::Fail,
            Some(Action::RunRetry) => HistoryOp::Retry,
            Some(Action::RunCancel) => HistoryOp::Cancel,
            Some(Action::RunClaimExpire) => HistoryOp::ClaimExpired,
            Some(Action::SessionSave | Action::CheckpointSave | Action::KnowledgeSave) => HistoryOp::Save,
            Some(Action::KnowledgeDelete) => HistoryOp::Delete,
            Some(Action::StoreReset) => HistoryOp::Reset,
            Some(Action::Import) => HistoryOp::Import,
            Some(Action::MessageSend) => HistoryOp::Send,
            Some(Action::MessageReceive) => HistoryOp::Receive,
            Some(Action::MessageAck) => HistoryOp::Ack,
            Some(Action::MessageNack) => HistoryOp::Nack,
            Some(Action::MessageDeadLetter) => HistoryOp::DeadLetter,
            Some(Action::RunSignal) => HistoryOp::Signal,
            Some(Action::RunAwaitSignal) => HistoryOp::AwaitSignal,
            None => match kind {
                EventKind::Put => HistoryOp::Put,
                EventKind::Delete => HistoryOp::Delete,
                EventKind::Expired => HistoryOp::Expired,
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HistoryEvent {
    pub revision: u64,
    pub kind: HistoryKind,
    /// The key, or the lease resource, run id or session id.
    pub key: String,
    pub op: HistoryOp,
    /// Version written (put) or removed (delete, expired) of the record.
    pub version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    pub time: String,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub value: Option<Value>,
    /// The token whose call made the change (absent: a local process, or the store itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

impl HistoryEvent {
    pub fn new(mut event: Event, include_value: bool) -> HistoryEvent {
        let value = if include_value { event.value.take() } else { None };
        let agent_id = event.agent_id.take();
        let by = event.by.take();
        HistoryEvent::with(&event, agent_id, by, value)
    }

    /// [`HistoryEvent::new`] for an event shared with others (one commit fanned out to many
    /// watchers): copies the value only when it is wanted.
    pub fn copied(event: &Event, include_value: bool) -> HistoryEvent {
        let value = if include_value { event.value.clone() } else { None };
        HistoryEvent::with(event, event.agent_id.clone(), event.by.clone(), value)
    }

    fn with(event: &Event, agent_id: Option<String>, by: Option<String>, value: Option<Value>) -> HistoryEvent {
        let (space, id) = keyspace::classify(&event.key);
        HistoryEvent {
            revision: event.revision,
            kind: HistoryKind::of(space),
            key: id.to_owned(),
            op: HistoryOp::of(event.kind, event.action),
            version: event.version,
            agent_id,
            time: event.time.to_rfc3339(),
            value,
            by,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HistoryResult {
    /// Oldest first.
    pub events: Vec<HistoryEvent>,
    /// True if more matching events exist beyond this page.
    pub more: bool,
    /// Current store revision.
    pub revision: u64,
    /// History at or below this revision has been compacted away.
    pub compacted_revision: u64,
}
