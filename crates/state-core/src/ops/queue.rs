//! Queue operations: named mailboxes between agents. A message is delivered at least once: a
//! receive hides it for `visibility_seconds` and hands out a receipt; an ack with that receipt
//! removes it; a nack, or the visibility running out, shows it again with its attempt count;
//! past `max_attempts` it moves to the queue's dead-letter queue (`<queue>.dead`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::InvalidInput;
use crate::key::{validate_agent_id, validate_key};
use crate::limits::Limits;
use crate::time::{MAX_TTL_SECONDS, seconds_within, ttl_millis};

/// Highest priority: receive takes higher priorities first, oldest first within one.
pub const MAX_PRIORITY: u8 = 9;
/// Attempts before a message is dead-lettered, unless its sender says otherwise.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;
/// How long a received message stays hidden, unless the receiver says otherwise.
pub const DEFAULT_VISIBILITY_SECONDS: f64 = 30.0;
/// The longest a receive may wait for a message: clients cut tool calls at 60 s.
pub const MAX_WAIT_SECONDS: f64 = 55.0;
/// The suffix of a queue's dead-letter queue.
pub const DEAD_LETTER_SUFFIX: &str = ".dead";

/// Put a message on a queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueSendRequest {
    /// The queue, e.g. `inbox/reviewer` (an agent's inbox by convention).
    pub queue: String,
    /// Any JSON.
    pub body: Value,
    /// 0 to 9 (default 0); higher is received first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 9))]
    pub priority: Option<u8>,
    /// Seconds before it can be received (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_seconds: Option<f64>,
    /// While a message with this key is in the queue, sending another returns it instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedupe_key: Option<String>,
    /// Seconds until it is dropped unless acknowledged (default: kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<f64>,
    /// Receives before it moves to `<queue>.dead` (default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub max_attempts: Option<u32>,
    /// Who sent it, shown to the receiver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender: Option<String>,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// A send, checked: what the planner needs in milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct SendTerms {
    pub priority: u8,
    pub delay_millis: u64,
    pub ttl_millis: Option<u64>,
    pub max_attempts: u32,
}

impl QueueSendRequest {
    pub fn validate(&self, limits: &Limits) -> Result<SendTerms, InvalidInput> {
        validate_queue(&self.queue)?;
        // Its dead letters go to `<queue>.dead`, which must be a name too.
        let room = crate::limits::MAX_KEY_BYTES - DEAD_LETTER_SUFFIX.len();
        if self.queue.len() > room {
            return Err(InvalidInput::OutOfRange {
                argument: "queue",
                message: format!(
                    "is {} bytes long; a queue is at most {room} bytes, so that its dead-letter queue `<queue>{DEAD_LETTER_SUFFIX}` fits the {}-byte name limit",
                    self.queue.len(),
                    crate::limits::MAX_KEY_BYTES
                ),
            });
        }
        limits.check_value("body", &self.body)?;
        if let Some(key) = &self.dedupe_key {
            validate_key("dedupe_key", key)?;
        }
        if let Some(sender) = &self.sender {
            validate_agent_id("sender", sender)?;
        }
        let priority = self.priority.unwrap_or(0);
        if priority > MAX_PRIORITY {
            return Err(InvalidInput::OutOfRange {
                argument: "priority",
                message: format!("must be 0 to {MAX_PRIORITY}; got {priority}"),
            });
        }
        let max_attempts = self.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS);
        if max_attempts == 0 || max_attempts > 1000 {
            return Err(InvalidInput::OutOfRange { argument: "max_attempts", message: "must be 1 to 1000".into() });
        }
        Ok(SendTerms {
            priority,
            delay_millis: seconds_within("delay_seconds", self.delay_seconds, 0.0, MAX_TTL_SECONDS)?,
            ttl_millis: self.ttl_seconds.map(|t| ttl_millis("ttl_seconds", t)).transpose()?,
            max_attempts,
        })
    }
}

fn validate_queue(queue: &str) -> Result<(), InvalidInput> {
    validate_key("queue", queue)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SendStatus {
    Sent,
    /// A message with the same dedupe_key is still in the queue: this is it.
    Duplicate,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QueueSendResult {
    pub status: SendStatus,
    pub queue: String,
    /// Opaque; pass it to ack and nack.
    pub message_id: String,
    pub revision: u64,
}

/// Take the next visible message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueReceiveRequest {
    pub queue: String,
    /// Who receives it (recorded, and shown in peek).
    pub consumer_id: String,
    /// Seconds it stays hidden from other receivers unless acked (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visibility_seconds: Option<f64>,
    /// Seconds to wait for a message when none is visible (default 0, at most 55).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_seconds: Option<f64>,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl QueueReceiveRequest {
    /// Visibility and wait, in milliseconds.
    pub fn validate(&self) -> Result<(u64, u64), InvalidInput> {
        validate_queue(&self.queue)?;
        validate_agent_id("consumer_id", &self.consumer_id)?;
        let visibility =
            ttl_millis("visibility_seconds", self.visibility_seconds.unwrap_or(DEFAULT_VISIBILITY_SECONDS))?;
        Ok((visibility, seconds_within("wait_seconds", self.wait_seconds, 0.0, MAX_WAIT_SECONDS)?))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReceiveStatus {
    Received,
    /// No message is visible now.
    Empty,
}

/// A message as a receiver sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Message {
    pub message_id: String,
    pub body: Value,
    pub priority: u8,
    /// Receives so far, this one included.
    pub attempts: u32,
    pub max_attempts: u32,
    pub sent_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender: Option<String>,
    /// Pass to ack or nack; a later receive of the same message makes it stale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<u64>,
    /// When it shows again unless acked (received), or can first be received (peek).
    pub visible_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QueueReceiveResult {
    pub status: ReceiveStatus,
    pub queue: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// Messages moved to the dead-letter queue by this receive (past their max_attempts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dead_lettered: Vec<String>,
    pub revision: u64,
}

/// Acknowledge a received message: it is done and leaves the queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueAckRequest {
    pub queue: String,
    pub message_id: String,
    /// The receipt from queue_receive.
    pub receipt: u64,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl QueueAckRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        validate_queue(&self.queue)?;
        validate_key("message_id", &self.message_id)
    }
}

/// Give a received message back: it shows again, now or after a delay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueNackRequest {
    pub queue: String,
    pub message_id: String,
    /// The receipt from queue_receive.
    pub receipt: u64,
    /// Seconds before it shows again (default 0): a retry backoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_seconds: Option<f64>,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl QueueNackRequest {
    /// The delay in milliseconds.
    pub fn validate(&self) -> Result<u64, InvalidInput> {
        validate_queue(&self.queue)?;
        validate_key("message_id", &self.message_id)?;
        seconds_within("delay_seconds", self.delay_seconds, 0.0, MAX_TTL_SECONDS)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SettleStatus {
    Ok,
    /// The receipt is not the message's current one (its visibility ran out and it was
    /// received again, or it is gone): nothing changed.
    Stale,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QueueSettleResult {
    pub status: SettleStatus,
    pub queue: String,
    pub message_id: String,
    pub revision: u64,
}

/// Move dead letters back: messages of `<queue>.dead` return to `queue`, visible now, their
/// attempts starting over.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueRedriveRequest {
    /// The queue whose dead letters go back to it (not the `.dead` one).
    pub queue: String,
    /// Most messages moved, 1 to 1000 (default 100), oldest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl QueueRedriveRequest {
    /// How many may move.
    pub fn validate(&self) -> Result<usize, InvalidInput> {
        validate_queue(&self.queue)?;
        if self.queue.ends_with(DEAD_LETTER_SUFFIX) {
            return Err(InvalidInput::Malformed {
                argument: "queue".into(),
                message: format!(
                    "names a dead-letter queue; give the queue its letters go back to (`{}`)",
                    self.queue.trim_end_matches(DEAD_LETTER_SUFFIX)
                ),
            });
        }
        if let Some(agent) = &self.agent_id {
            crate::key::validate_agent_id("agent_id", agent)?;
        }
        crate::ops::kv::page_size("limit", self.limit, 100)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QueueRedriveResult {
    pub queue: String,
    /// The messages moved back, by id.
    pub moved: Vec<String>,
    /// Dead letters left after this (call again for more).
    pub remaining: u64,
    pub revision: u64,
}

/// Look at a queue without receiving.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueuePeekRequest {
    pub queue: String,
    /// Most messages listed, 1 to 1000 (default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<usize>,
}

impl QueuePeekRequest {
    pub fn validate(&self) -> Result<usize, InvalidInput> {
        validate_queue(&self.queue)?;
        crate::ops::kv::page_size("limit", self.limit, 20)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QueuePeekResult {
    pub queue: String,
    /// Receivable now.
    pub visible: u64,
    /// Received and not yet acked or timed out.
    pub in_flight: u64,
    /// Sent with a delay, or nacked with one, not yet due.
    pub delayed: u64,
    /// Out of attempts: the next receive moves them to `<queue>.dead`.
    #[serde(default)]
    pub spent: u64,
    /// The first messages in receive order, without receipts.
    pub messages: Vec<Message>,
    pub revision: u64,
}

/// A queue's counts, as `queue_peek` gives them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct QueueSummary {
    pub queue: String,
    pub visible: u64,
    pub in_flight: u64,
    pub delayed: u64,
    /// Out of attempts, on their way to `<queue>.dead`.
    #[serde(default)]
    pub spent: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QueueListResult {
    pub queues: Vec<QueueSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    pub revision: u64,
}
