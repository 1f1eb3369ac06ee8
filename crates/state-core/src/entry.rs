//! What the store keeps: current entries and the history of changes.

use serde_json::Value;

use crate::time::UnixMillis;

/// The current state of one key.
///
/// `version` counts writes since the key was (re)created, starting at 1; `create_revision` and
/// `mod_revision` are the store revisions of its creation and of its last write (etcd's model).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub key: String,
    pub value: Value,
    pub version: u64,
    pub create_revision: u64,
    pub mod_revision: u64,
    pub updated_at: UnixMillis,
    pub expires_at: Option<UnixMillis>,
    pub agent_id: Option<String>,
}

impl Entry {
    /// A key is invisible from the instant its TTL runs out, whether or not it was swept yet.
    pub fn is_expired(&self, now: UnixMillis) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }
}

/// Drops an entry whose TTL has run out, so callers only ever see live state.
pub fn live(entry: Option<Entry>, now: UnixMillis) -> Option<Entry> {
    entry.filter(|e| !e.is_expired(now))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    Put,
    Delete,
    /// The key's TTL ran out; recorded when the sweeper (or a later write) removed it.
    Expired,
}

impl EventKind {
    /// A stable one-byte code for storage.
    pub fn code(self) -> u8 {
        match self {
            EventKind::Put => 0,
            EventKind::Delete => 1,
            EventKind::Expired => 2,
        }
    }

    pub fn from_code(code: u8) -> Option<EventKind> {
        match code {
            0 => Some(EventKind::Put),
            1 => Some(EventKind::Delete),
            2 => Some(EventKind::Expired),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Put => "put",
            EventKind::Delete => "delete",
            EventKind::Expired => "expired",
        }
    }
}

/// The domain transition behind a change to a system record (a lease, a run, a session).
/// User key changes carry none: their `EventKind` says it all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    LeaseGrant,
    LeaseRenew,
    LeaseRelease,
    LeaseExpire,
    RunCreate,
    RunClaim,
    RunReclaim,
    RunHeartbeat,
    RunCheckpoint,
    RunComplete,
    RunFail,
    RunRetry,
    RunCancel,
    RunClaimExpire,
    SessionSave,
    StoreReset,
    CheckpointSave,
    KnowledgeSave,
    KnowledgeDelete,
    /// A record written by an import, as it was in the store it was exported from.
    Import,
    MessageSend,
    MessageReceive,
    MessageAck,
    MessageNack,
    /// Moved to the queue's dead-letter queue after its last attempt.
    MessageDeadLetter,
    RunSignal,
    RunAwaitSignal,
}

impl Action {
    pub const ALL: [Action; 27] = [
        Action::LeaseGrant,
        Action::LeaseRenew,
        Action::LeaseRelease,
        Action::LeaseExpire,
        Action::RunCreate,
        Action::RunClaim,
        Action::RunReclaim,
        Action::RunHeartbeat,
        Action::RunCheckpoint,
        Action::RunComplete,
        Action::RunFail,
        Action::RunRetry,
        Action::RunCancel,
        Action::RunClaimExpire,
        Action::SessionSave,
        Action::StoreReset,
        Action::CheckpointSave,
        Action::KnowledgeSave,
        Action::KnowledgeDelete,
        Action::Import,
        // Codes are positions: new actions go last.
        Action::MessageSend,
        Action::MessageReceive,
        Action::MessageAck,
        Action::MessageNack,
        Action::MessageDeadLetter,
        Action::RunSignal,
        Action::RunAwaitSignal,
    ];

    /// A stable one-byte code for storage; 0 means "no action".
    pub fn code(self) -> u8 {
        Action::ALL.iter().position(|a| *a == self).map_or(0, |i| i as u8 + 1)
    }

    pub fn from_code(code: u8) -> Option<Action> {
        code.checked_sub(1).and_then(|i| Action::ALL.get(usize::from(i)).copied())
    }
}

/// One change in the history log. Events of one transaction share its revision.
///
/// For a put, `version` and `value` are the new ones; for a delete or an expiry, `version` is
/// the version that was removed and `value` is `None`. Changes to system records carry the
/// `action` they performed, and `value` holds that transition's details instead.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub revision: u64,
    pub key: String,
    pub kind: EventKind,
    pub action: Option<Action>,
    pub version: u64,
    pub agent_id: Option<String>,
    pub time: UnixMillis,
    pub value: Option<Value>,
    /// Who made the change: the token (its name, or an OAuth subject) whose call it was.
    /// `None` for a process of the machine's own user and for what the store does itself
    /// (expiry). Unlike `agent_id`, which a caller states, this is what authentication found.
    pub by: Option<String>,
}
