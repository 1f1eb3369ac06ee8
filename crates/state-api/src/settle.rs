//! What the seam's remote clients share: idempotency keys of their own, and the answer to a
//! call they could not settle.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::catalog::Operation;
use serde_json::Value;

use crate::reply::{ApiError, ErrorCode, Reply};

/// Idempotency keys unique across processes: this process's id and start time, then a count.
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
