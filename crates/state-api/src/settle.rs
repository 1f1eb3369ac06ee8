//! What the seam's remote clients share: the one loop that settles a call (sends it until it
//! is answered or its deadline passes, resending a write under one idempotency key), the
//! [`Transport`] each client plugs into it, and the answer to a call it could not settle.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use state_store::backoff::Backoff;
use tokio::time::Instant;

use crate::catalog::Operation;
use crate::reply::{ApiError, ErrorCode, Reply};

/// One way of carrying a call to the store: the owner's socket ([`crate::remote`]) or a
/// `state-http` ([`crate::http`]). The settle loop ([`settle`]) decides when to try again and
/// what to answer when no attempt gets through; a transport only makes attempts.
pub(crate) trait Transport: Sync {
    /// A call as it goes on the wire, encoded once however often it is sent.
    type Encoded: Send + Sync;
    /// The first pause before trying again after a lost attempt (doubling up to a second).
    const FIRST_PAUSE: Duration;
    fn request_ids(&self) -> &RequestIds;
    /// How long a call keeps trying before it is answered as unsettled.
    fn settle_timeout(&self) -> Duration;
    /// `by`: who the call's changes are recorded as made by, where the transport carries it
    /// (the owner's socket does; a `state-http` records its own authenticated caller).
    fn encode(
        &self,
        op: Operation,
        args: &Value,
        request_id: Option<&str>,
        by: Option<&str>,
    ) -> Result<Self::Encoded, ApiError>;
    /// Sends `call` once and waits up to `answer_within` for its answer; reaching the store
    /// (joining an owner, say) may take until `deadline`.
    fn attempt(
        &self,
        op: Operation,
        call: &Self::Encoded,
        deadline: Instant,
        answer_within: Duration,
    ) -> impl Future<Output = Attempt> + Send;
    /// Why a call is unsettled once attempts lost on the way ran out of time (`reason`: the
    /// last one's).
    fn gave_up(&self, reason: String) -> Unreached;
}

/// What one attempt came to.
pub(crate) enum Attempt {
    Answered(Reply),
    /// Lost on the way (a connection broke, a gateway answered for its server); worth trying
    /// again. `sent`: it may have reached the store.
    Lost {
        sent: bool,
        reason: String,
    },
    /// No attempt can get through before the deadline, or the store took the call and has not
    /// answered in time: settled as unreached now.
    Unreached {
        sent: bool,
        why: Unreached,
    },
}

/// Runs `op` through `transport` until it is answered, or answers why it could not be: a
/// mutating call carries an idempotency key (its `request_id` argument, else `request_id`,
/// else a fresh one) so that resending it applies it once.
pub(crate) async fn settle<T: Transport>(
    transport: &T,
    op: Operation,
    args: Value,
    request_id: Option<String>,
    by: Option<&str>,
) -> Reply {
    let request_id = transport.request_ids().for_call(op, &args, request_id);
    let call = match transport.encode(op, &args, request_id.as_deref(), by) {
        Ok(call) => call,
        Err(error) => return Reply::error(error),
    };
    let deadline = Instant::now() + transport.settle_timeout();
    // A live store answers in milliseconds (a long poll once its wait is over); one that has
    // not after this long is stopped or stuck, and the caller hears so.
    let answer_within = transport.settle_timeout() + own_wait(op, &args);
    let mut backoff = Backoff::new(T::FIRST_PAUSE, Duration::from_secs(1));
    let mut sent = false;
    loop {
        match transport.attempt(op, &call, deadline, answer_within).await {
            Attempt::Answered(reply) => return reply,
            Attempt::Unreached { sent: went_out, why } => {
                return unsettled(op, request_id.as_deref(), sent || went_out, &why);
            }
            Attempt::Lost { sent: went_out, reason } => {
                sent |= went_out;
                tracing::debug!(op = op.name(), %reason, "a call was lost on the way; trying again");
                if !backoff.pause_before(deadline).await {
                    return unsettled(op, request_id.as_deref(), sent, &transport.gave_up(reason));
                }
            }
        }
    }
}

/// Idempotency keys unique across processes: this process's id and start time, then a count.
#[derive(Debug)]
pub(crate) struct RequestIds {
    prefix: String,
    next: AtomicU64,
}

impl RequestIds {
    pub(crate) fn new() -> RequestIds {
        let started = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        RequestIds {
            prefix: format!("j{:x}.{:x}", std::process::id(), started & 0xffff_ffff_ffff),
            next: AtomicU64::new(1),
        }
    }

    /// The key a call goes out with: a mutating call's own `request_id` argument, else
    /// `given`, else a fresh one. Reads need none.
    pub(crate) fn for_call(&self, op: Operation, args: &Value, given: Option<String>) -> Option<String> {
        op.is_mutating().then(|| {
            args.get("request_id")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or(given)
                .unwrap_or_else(|| format!("{}.{}", self.prefix, self.next.fetch_add(1, Ordering::Relaxed)))
        })
    }
}

/// Why a call could not be brought to the store before its deadline.
pub(crate) struct Unreached {
    /// Trying again later may work (as opposed to a setup the user must fix).
    pub(crate) transient: bool,
    pub(crate) reason: String,
    /// What happened to a call that went out, e.g. "it reached the store's owner, which
    /// stopped before answering".
    pub(crate) lost: &'static str,
}

/// The answer to a call that could not be settled: not applied, or (a write that went out)
/// of unknown outcome, with how to find out.
pub(crate) fn unsettled(op: Operation, request_id: Option<&str>, sent: bool, why: &Unreached) -> Reply {
    let name = op.name();
    let reason = &why.reason;
    if !why.transient {
        return Reply::error(ApiError::new(ErrorCode::Unavailable, format!("`{name}` was not run: {reason}")));
    }
    // The caller resends the id it chose, whatever scope the seam filed it under.
    let request_id = request_id.map(state_core::idempotency::unscoped);
    let message = match (request_id, sent) {
        (Some(key), true) => format!(
            "the outcome of `{name}` is unknown: {}, and {reason}. It may or may not have been applied. \
             Check the state it changes (state_get shows a key's version, workflow_status a run's), or retry with \
             request_id \"{key}\", which returns the first result if it was applied and applies it once if not.",
            why.lost
        ),
        (Some(_), false) => format!("`{name}` was not applied: {reason}. Retry in a moment."),
        (None, _) => format!("`{name}` could not be run: {reason}. Retry in a moment."),
    };
    let code = if sent && request_id.is_some() { ErrorCode::OutcomeUnknown } else { ErrorCode::Unavailable };
    Reply::error(ApiError::new(code, message))
}

/// The longest `op` may wait before answering on purpose (a long poll, a bounded wait for a
/// permit, a message or a run's end): what a server's request timeout must allow on top.
pub fn longest_own_wait(op: Operation) -> Duration {
    use state_core::ops::watch::MAX_WAIT_SECONDS;
    match op {
        Operation::StateWatch | Operation::SemaphoreAcquire | Operation::QueueReceive | Operation::WorkflowStatus => {
            Duration::from_secs_f64(MAX_WAIT_SECONDS)
        }
        _ => Duration::ZERO,
    }
}

/// How long `op` itself may wait before answering: a long poll's own timeout.
pub(crate) fn own_wait(op: Operation, args: &Value) -> Duration {
    use state_core::ops::watch::{DEFAULT_WAIT_SECONDS, MAX_WAIT_SECONDS};
    let seconds = match op {
        Operation::StateWatch => args.get("timeout_seconds").and_then(Value::as_f64).unwrap_or(DEFAULT_WAIT_SECONDS),
        Operation::SemaphoreAcquire | Operation::QueueReceive | Operation::WorkflowStatus => {
            args.get("wait_seconds").and_then(Value::as_f64).unwrap_or(0.0)
        }
        _ => return Duration::ZERO,
    };
    if !seconds.is_finite() {
        return Duration::ZERO;
    }
    Duration::from_secs_f64(seconds.clamp(0.0, MAX_WAIT_SECONDS)).min(longest_own_wait(op))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The waits above are a list beside the catalog: an operation that may wait on purpose
    /// (it takes `wait_seconds` or `timeout_seconds`) and is missing from it would be given up on
    /// as unanswered while it waits. Every such operation, of every profile, is on the list,
    /// and nothing else is.
    #[test]
    fn every_operation_that_may_wait_is_given_its_wait() {
        for op in Operation::all() {
            let schema = op.spec().input_schema();
            let properties = schema.get("properties").and_then(Value::as_object);
            let waits = properties.is_some_and(|p| p.contains_key("wait_seconds") || p.contains_key("timeout_seconds"));
            assert_eq!(!longest_own_wait(op).is_zero(), waits, "{}: its wait and its arguments disagree", op.id());
            if waits {
                let asked = serde_json::json!({"wait_seconds": 5.0, "timeout_seconds": 5.0});
                assert_eq!(own_wait(op, &asked), Duration::from_secs(5), "{}", op.id());
            }
        }
    }
}
