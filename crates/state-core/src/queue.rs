//! Queue rules. A message is a system entry under its queue, keyed so that key order is
//! receive order (higher priority first, then oldest first); its record says when it is
//! visible, how often it was received, and the receipt of its current delivery. Receiving
//! takes the first visible message and hides it until `visible_at`; an ack with the current
//! receipt removes it; a nack shows it again. A message whose last attempt ran out moves to
//! `<queue>.dead` when a receive meets it, keeping the attempts it came with; a dead-letter
//! queue's messages move nowhere further, and a redrive returns them to their queue with their
//! attempts starting over. A message's TTL (if its sender gave one) is the entry's, swept like
//! any other.
//!
//! Delivery is at least once: a receiver that stalls past its visibility loses the message to
//! the next receiver, and its ack is refused (`stale`). Work that must happen once is made
//! idempotent by the receiver (a `request_id` on its writes, keyed by the message id).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::entry::{Action, Entry, live};
use crate::keyspace;
use crate::ops::queue::{
    DEAD_LETTER_SUFFIX, MAX_PRIORITY, Message, QueueListResult, QueuePeekResult, QueueReceiveResult,
    QueueRedriveResult, QueueSendResult, QueueSettleResult, QueueSummary, ReceiveStatus, SendStatus, SendTerms,
    SettleStatus,
};
use crate::plan::{Changes, Plan, Record, WriteContext};
use crate::time::UnixMillis;
use crate::view::{StateView, names_page};

/// Most expired-attempt messages one receive moves to the dead-letter queue, so a receive
/// stays a bounded write.
const DEAD_LETTERS_PER_RECEIVE: usize = 100;

/// What a message entry holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageRecord {
    pub body: Value,
    pub priority: u8,
    pub sent_at: UnixMillis,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender: Option<String>,
    pub max_attempts: u32,
    pub attempts: u32,
    pub visible_at: UnixMillis,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedupe_key: Option<String>,
}

impl MessageRecord {
    fn from_entry(entry: &Entry) -> Option<MessageRecord> {
        serde_json::from_value(entry.value.clone()).ok()
    }

    fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    fn message(&self, message_id: &str, with_receipt: bool) -> Message {
        Message {
            message_id: message_id.to_owned(),
            body: self.body.clone(),
            priority: self.priority,
            attempts: self.attempts,
            max_attempts: self.max_attempts,
            sent_at: self.sent_at.to_rfc3339(),
            sender: self.sender.clone(),
            receipt: if with_receipt { self.receipt } else { None },
            visible_at: self.visible_at.to_rfc3339(),
            consumer: self.consumer.clone(),
        }
    }
}

/// An id whose order is receive order: the inverted priority, then the send's revision.
fn message_id(priority: u8, seq: u64) -> String {
    format!("{}{seq:020}", MAX_PRIORITY.saturating_sub(priority))
}

/// The id a stored message key ends with.
fn id_of<'a>(queue: &str, key: &'a str) -> &'a str {
    let prefix_len = keyspace::message_prefix(queue).len();
    key.get(prefix_len..).unwrap_or("")
}

/// Live messages of `queue` in receive order, until `visit` says stop.
fn scan<V: StateView + ?Sized>(
    view: &V,
    queue: &str,
    now: UnixMillis,
    visit: &mut dyn FnMut(Entry, MessageRecord) -> bool,
) -> Result<(), V::Error> {
    view.scan(&keyspace::message_prefix(queue), None, &mut |entry| match live(Some(entry), now) {
        Some(entry) => match MessageRecord::from_entry(&entry) {
            Some(record) => visit(entry, record),
            None => true,
        },
        None => true,
    })
}

/// The queue's message carrying `dedupe_key`, if it is still in the queue.
fn deduplicated<V: StateView + ?Sized>(
    view: &V,
    queue: &str,
    dedupe_key: &str,
    now: UnixMillis,
) -> Result<Option<String>, V::Error> {
    let Some(index) = live(view.get(&keyspace::message_dedupe_key(queue, dedupe_key))?, now) else { return Ok(None) };
    let Some(id) = index.value.get("message_id").and_then(Value::as_str) else { return Ok(None) };
    let still_there = live(view.get(&keyspace::message_key(queue, id))?, now).is_some();
    Ok(still_there.then(|| id.to_owned()))
}

pub struct Outgoing<'a> {
    pub queue: &'a str,
    pub body: &'a Value,
    pub sender: Option<&'a str>,
    pub dedupe_key: Option<&'a str>,
    pub terms: SendTerms,
}

/// Puts a message on the queue, unless one with the same dedupe key is still there.
pub fn plan_send<V: StateView + ?Sized>(
    view: &V,
    out: &Outgoing<'_>,
    ctx: &WriteContext,
) -> Result<Plan<QueueSendResult>, V::Error> {
    if let Some(key) = out.dedupe_key
        && let Some(existing) = deduplicated(view, out.queue, key, ctx.now)?
    {
        return Ok(Plan::unchanged(QueueSendResult {
            status: SendStatus::Duplicate,
            queue: out.queue.to_owned(),
            message_id: existing,
            revision: ctx.revision,
        }));
    }
    let id = message_id(out.terms.priority, ctx.next_revision());
    let record = MessageRecord {
        body: out.body.clone(),
        priority: out.terms.priority,
        sent_at: ctx.now,
        sender: out.sender.map(str::to_owned),
        max_attempts: out.terms.max_attempts,
        attempts: 0,
        visible_at: ctx.now.plus_millis(out.terms.delay_millis),
        receipt: None,
        consumer: None,
        dedupe_key: out.dedupe_key.map(str::to_owned),
    };
    let mut changes = Changes::new(ctx, out.sender);
    let key = keyspace::message_key(out.queue, &id);
    let detail = json!({"message_id": id, "priority": record.priority, "sender": record.sender});
    let stored = view.get(&key)?;
    changes.write(
        stored.as_ref(),
        &key,
        record.to_value(),
        out.terms.ttl_millis,
        Record::Transition(Action::MessageSend, detail),
    );
    if let Some(dedupe) = out.dedupe_key {
        let index = keyspace::message_dedupe_key(out.queue, dedupe);
        let stored = view.get(&index)?;
        changes.write(stored.as_ref(), &index, json!({"message_id": id}), out.terms.ttl_millis, Record::Silent);
    }
    let revision = changes.revision();
    Ok(changes.finish(QueueSendResult {
        status: SendStatus::Sent,
        queue: out.queue.to_owned(),
        message_id: id,
        revision,
    }))
}

/// Hands the first visible message to `consumer` for `visibility_millis`, moving any message
/// met on the way whose attempts are spent to the dead-letter queue.
pub fn plan_receive<V: StateView + ?Sized>(
    view: &V,
    queue: &str,
    consumer: &str,
    visibility_millis: u64,
    ctx: &WriteContext,
) -> Result<Plan<QueueReceiveResult>, V::Error> {
    let now = ctx.now;
    let mut spent = Vec::new();
    let mut picked = None;
    // A dead-letter queue's messages are delivered however often: they move nowhere further.
    let dead_letters = queue.ends_with(DEAD_LETTER_SUFFIX);
    scan(view, queue, now, &mut |entry, record| {
        if record.visible_at > now {
            return true;
        }
        if !dead_letters && record.attempts >= record.max_attempts {
            spent.push((entry, record));
            return spent.len() < DEAD_LETTERS_PER_RECEIVE;
        }
        picked = Some((entry, record));
        false
    })?;
    if spent.is_empty() && picked.is_none() {
        return Ok(Plan::unchanged(QueueReceiveResult {
            status: ReceiveStatus::Empty,
            queue: queue.to_owned(),
            message: None,
            dead_lettered: Vec::new(),
            revision: ctx.revision,
        }));
    }
    let mut changes = Changes::new(ctx, Some(consumer));
    let dead_queue = format!("{queue}{DEAD_LETTER_SUFFIX}");
    let mut dead_lettered = Vec::new();
    for (entry, record) in spent {
        let id = id_of(queue, &entry.key).to_owned();
        let detail = json!({"message_id": id, "attempts": record.attempts, "to": dead_queue});
        changes.remove(&entry, Record::Transition(Action::MessageDeadLetter, detail));
        // It keeps the attempts it came with, for whoever looks at why it died.
        let moved = MessageRecord { visible_at: now, receipt: None, consumer: None, ..record };
        let key = keyspace::message_key(&dead_queue, &id);
        let detail = json!({"message_id": id, "dead_letter_of": queue});
        let stored = view.get(&key)?;
        changes.write(stored.as_ref(), &key, moved.to_value(), None, Record::Transition(Action::MessageSend, detail));
        dead_lettered.push(id);
    }
    let message = match picked {
        Some((entry, record)) => {
            let id = id_of(queue, &entry.key).to_owned();
            let receipt = ctx.next_revision();
            let delivered = MessageRecord {
                attempts: record.attempts + 1,
                visible_at: now.plus_millis(visibility_millis),
                receipt: Some(receipt),
                consumer: Some(consumer.to_owned()),
                ..record
            };
            let detail = json!({"message_id": id, "attempt": delivered.attempts, "receipt": receipt});
            // The entry keeps its own expiry: a message's TTL runs whether or not it is in flight.
            let ttl = entry.expires_at.map(|at| at.0.saturating_sub(now.0).max(1));
            changes.write(
                Some(&entry),
                &entry.key,
                delivered.to_value(),
                ttl,
                Record::Transition(Action::MessageReceive, detail),
            );
            Some(delivered.message(&id, true))
        }
        None => None,
    };
    let revision = changes.revision();
    let status = if message.is_some() { ReceiveStatus::Received } else { ReceiveStatus::Empty };
    Ok(changes.finish(QueueReceiveResult { status, queue: queue.to_owned(), message, dead_lettered, revision }))
}

/// The message `message_id` if `receipt` is its current delivery's.
fn delivered<V: StateView + ?Sized>(
    view: &V,
    queue: &str,
    message_id: &str,
    receipt: u64,
    now: UnixMillis,
) -> Result<Option<(Entry, MessageRecord)>, V::Error> {
    let Some(entry) = live(view.get(&keyspace::message_key(queue, message_id))?, now) else { return Ok(None) };
    Ok(MessageRecord::from_entry(&entry).filter(|r| r.receipt == Some(receipt)).map(|r| (entry, r)))
}

fn settled(status: SettleStatus, queue: &str, message_id: &str, revision: u64) -> QueueSettleResult {
    QueueSettleResult { status, queue: queue.to_owned(), message_id: message_id.to_owned(), revision }
}

/// Removes a delivered message for good.
pub fn plan_ack<V: StateView + ?Sized>(
    view: &V,
    queue: &str,
    message_id: &str,
    receipt: u64,
    ctx: &WriteContext,
) -> Result<Plan<QueueSettleResult>, V::Error> {
    let Some((entry, record)) = delivered(view, queue, message_id, receipt, ctx.now)? else {
        return Ok(Plan::unchanged(settled(SettleStatus::Stale, queue, message_id, ctx.revision)));
    };
    let mut changes = Changes::new(ctx, record.consumer.as_deref());
    changes
        .remove(&entry, Record::Transition(Action::MessageAck, json!({"message_id": message_id, "receipt": receipt})));
    if let Some(dedupe) = &record.dedupe_key {
        changes.drop_key(&keyspace::message_dedupe_key(queue, dedupe));
    }
    let revision = changes.revision();
    Ok(changes.finish(settled(SettleStatus::Ok, queue, message_id, revision)))
}

/// Shows a delivered message again after `delay_millis`; its attempts stand.
pub fn plan_nack<V: StateView + ?Sized>(
    view: &V,
    queue: &str,
    message_id: &str,
    receipt: u64,
    delay_millis: u64,
    ctx: &WriteContext,
) -> Result<Plan<QueueSettleResult>, V::Error> {
    let Some((entry, record)) = delivered(view, queue, message_id, receipt, ctx.now)? else {
        return Ok(Plan::unchanged(settled(SettleStatus::Stale, queue, message_id, ctx.revision)));
    };
    let consumer = record.consumer.clone();
    let returned =
        MessageRecord { visible_at: ctx.now.plus_millis(delay_millis), receipt: None, consumer: None, ..record };
    let mut changes = Changes::new(ctx, consumer.as_deref());
    let ttl = entry.expires_at.map(|at| at.0.saturating_sub(ctx.now.0).max(1));
    let detail = json!({"message_id": message_id, "receipt": receipt, "delay_ms": delay_millis});
    changes.write(Some(&entry), &entry.key, returned.to_value(), ttl, Record::Transition(Action::MessageNack, detail));
    let revision = changes.revision();
    Ok(changes.finish(settled(SettleStatus::Ok, queue, message_id, revision)))
}

/// Counts by state and the first `limit` messages in receive order, without receipts.
pub fn peek<V: StateView + ?Sized>(
    view: &V,
    queue: &str,
    limit: usize,
    now: UnixMillis,
    revision: u64,
) -> Result<QueuePeekResult, V::Error> {
    let mut counts = QueueSummary::default();
    let mut messages = Vec::new();
    let dead_letters = queue.ends_with(DEAD_LETTER_SUFFIX);
    scan(view, queue, now, &mut |entry, record| {
        counts.count(&record, now, dead_letters);
        if messages.len() < limit {
            messages.push(record.message(id_of(queue, &entry.key), false));
        }
        true
    })?;
    let QueueSummary { visible, in_flight, delayed, spent, .. } = counts;
    Ok(QueuePeekResult { queue: queue.to_owned(), visible, in_flight, delayed, spent, messages, revision })
}

impl QueueSummary {
    fn count(&mut self, record: &MessageRecord, now: UnixMillis, dead_letters: bool) {
        match (record.visible_at > now, record.receipt.is_some()) {
            // Its last attempt has run out: it is on its way to the dead letters, not receivable.
            (false, _) if !dead_letters && record.attempts >= record.max_attempts => self.spent += 1,
            (false, _) => self.visible += 1,
            (true, true) => self.in_flight += 1,
            (true, false) => self.delayed += 1,
        }
    }
}

/// Moves up to `limit` messages of `<queue>.dead` back to `queue`, oldest first, visible now and
/// with their attempts starting over; a message being received from the dead letters stays.
pub fn plan_redrive<V: StateView + ?Sized>(
    view: &V,
    queue: &str,
    limit: usize,
    agent_id: Option<&str>,
    ctx: &WriteContext,
) -> Result<Plan<QueueRedriveResult>, V::Error> {
    let now = ctx.now;
    let dead_queue = format!("{queue}{DEAD_LETTER_SUFFIX}");
    let (mut picked, mut remaining) = (Vec::new(), 0u64);
    scan(view, &dead_queue, now, &mut |entry, record| {
        if record.visible_at > now && record.receipt.is_some() {
            remaining += 1;
        } else if picked.len() < limit {
            picked.push((entry, record));
        } else {
            remaining += 1;
        }
        true
    })?;
    if picked.is_empty() {
        return Ok(Plan::unchanged(QueueRedriveResult {
            queue: queue.to_owned(),
            moved: Vec::new(),
            remaining,
            revision: ctx.revision,
        }));
    }
    let mut changes = Changes::new(ctx, agent_id);
    let mut moved = Vec::new();
    for (entry, record) in picked {
        let id = id_of(&dead_queue, &entry.key).to_owned();
        let ttl = entry.expires_at.map(|at| at.0.saturating_sub(now.0).max(1));
        changes.remove(&entry, Record::Transition(Action::MessageAck, json!({"message_id": id, "redriven_to": queue})));
        let back = MessageRecord { visible_at: now, receipt: None, consumer: None, attempts: 0, ..record };
        let key = keyspace::message_key(queue, &id);
        let detail = json!({"message_id": id, "redriven_from": dead_queue});
        let stored = view.get(&key)?;
        changes.write(stored.as_ref(), &key, back.to_value(), ttl, Record::Transition(Action::MessageSend, detail));
        moved.push(id);
    }
    let revision = changes.revision();
    Ok(changes.finish(QueueRedriveResult { queue: queue.to_owned(), moved, remaining, revision }))
}

/// A page of the queues whose name starts with `prefix` and that hold a message, with the
/// counts `peek` gives. Reading the counts reads every message of each queue listed.
pub fn list<V: StateView + ?Sized>(
    view: &V,
    prefix: &str,
    after: Option<&str>,
    page: usize,
    now: UnixMillis,
    revision: u64,
) -> Result<QueueListResult, V::Error> {
    let space = keyspace::prefix(keyspace::Space::Message);
    let (names, next_cursor) = names_page(
        view,
        &space,
        prefix,
        after,
        page,
        now,
        |counts: &mut QueueSummary, entry, record: MessageRecord| {
            let name = entry.key.get(space.len()..).and_then(|rest| rest.split('\u{2}').next()).unwrap_or("");
            let dead_letters = name.ends_with(DEAD_LETTER_SUFFIX);
            counts.count(&record, now, dead_letters);
        },
    )?;
    let queues = names.into_iter().map(|(queue, counts)| QueueSummary { queue, ..counts }).collect();
    Ok(QueueListResult { queues, next_cursor, revision })
}

/// When the next hidden message of `queue` shows: a waiting receive need not look before.
pub fn next_visible<V: StateView + ?Sized>(
    view: &V,
    queue: &str,
    now: UnixMillis,
) -> Result<Option<UnixMillis>, V::Error> {
    let mut soonest: Option<UnixMillis> = None;
    scan(view, queue, now, &mut |_, record| {
        if record.visible_at > now {
            soonest = Some(soonest.map_or(record.visible_at, |s| s.min(record.visible_at)));
        }
        true
    })?;
    Ok(soonest)
}

#[cfg(test)]
mod tests;
