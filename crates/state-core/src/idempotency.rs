//! Idempotency keys: a mutating request may carry a `request_id`, and a retry with the same id
//! returns the first result instead of applying twice.
//!
//! The record of a request is an entry in the store's own keyspace, written by the same plan
//! (so in the same transaction) as the change it answers, and it expires after a window. Only
//! requests that changed something are recorded: a refused or conflicting request changed
//! nothing, so evaluating its retry afresh cannot apply anything twice.
//!
//! A process that forwards requests to a database's owner gives every mutating request an id,
//! so it can resend requests that were in flight when the owner died without double-applying
//! them.

use serde_json::{Value, json};

pub use crate::ops::once::{MAX_REQUEST_ID_BYTES, Mutating, Once, fingerprint, scoped, unscoped, validate_request_id};

use crate::entry::Entry;
use crate::error::InvalidInput;
use crate::keyspace;
use crate::plan::{Mutation, WriteContext};
use crate::time::UnixMillis;
use crate::view::StateView;

/// How long a request's record is kept by default: long enough for any client retry loop.
pub const DEFAULT_WINDOW_MILLIS: u64 = 10 * 60 * 1000;

/// What a request's id says before it is planned.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    /// No live record: plan the request.
    New,
    /// Already applied: answer with this result and change nothing.
    Replay(Value),
    /// The id was used for a different request: refuse, change nothing.
    Reused(InvalidInput),
}

/// Looks the request's id up in the store as of `now`.
pub fn seen<V: StateView + ?Sized>(view: &V, once: &Once, now: UnixMillis) -> Result<Seen, V::Error> {
    let Some(record) = view.get(&keyspace::request_key(&once.request_id))? else { return Ok(Seen::New) };
    if record.is_expired(now) {
        return Ok(Seen::New);
    }
    let same_kind = record.value.get("kind").and_then(Value::as_str) == Some(once.kind);
    let same_request = record.value.get("fingerprint").and_then(Value::as_str) == Some(&hex(once.fingerprint));
    if !(same_kind && same_request) {
        let kind = record.value.get("kind").and_then(Value::as_str).unwrap_or("another request");
        return Ok(Seen::Reused(InvalidInput::Malformed {
            argument: "request_id".into(),
            message: format!(
                "`{}` was already used for a different request ({kind}, other arguments): a retry must resend \
                 exactly the same request; use a new id for a new request",
                unscoped(&once.request_id)
            ),
        }));
    }
    Ok(Seen::Replay(record.value.get("result").cloned().unwrap_or(Value::Null)))
}

/// The record that makes a retry of `once` return `result`, to be written by the same plan
/// as the change itself. It expires `window_millis` after `ctx.now`.
pub fn record(once: &Once, result: Value, ctx: &WriteContext, window_millis: u64) -> Mutation {
    let revision = ctx.next_revision();
    Mutation::Put(Entry {
        key: keyspace::request_key(&once.request_id),
        value: json!({"kind": once.kind, "fingerprint": hex(once.fingerprint), "result": result}),
        version: 1,
        create_revision: revision,
        mod_revision: revision,
        updated_at: ctx.now,
        expires_at: Some(ctx.now.plus_millis(window_millis.max(1))),
        agent_id: None,
    })
}

fn hex(fingerprint: u64) -> String {
    format!("{fingerprint:016x}")
}

#[cfg(test)]
mod tests;
