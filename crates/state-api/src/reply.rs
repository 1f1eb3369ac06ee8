//! What every call answers: an outcome class beside a JSON body.
//!
//! The class is what a frontend maps to its own envelope (an HTTP status, a CLI exit code,
//! `isError` on an MCP tool result); the body is the operation's result, or an [`ApiError`]
//! that says what went wrong and what to do about it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The class of an outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Outcome {
    /// Done as asked.
    Ok,
    /// A precondition did not hold (a version, a compare, a lease held by another holder);
    /// nothing changed and the body says what is current.
    Conflict,
    /// What the call names does not exist (or no longer does: compacted history).
    NotFound,
    /// The caller's lease or claim token is no longer current; nothing changed.
    Fenced,
    /// The caller's credentials do not cover what the call touches; nothing was read or changed.
    Forbidden,
    /// The request cannot be carried out as given; nothing changed.
    Invalid,
    /// The caller is past a quota of its own (writes per second); nothing changed, and the
    /// error says when to retry.
    Limited,
    /// The store cannot answer now (shutting down, storage failing, owner unreachable).
    Unavailable,
    /// A bug in this software.
    Internal,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Conflict => "conflict",
            Outcome::NotFound => "not_found",
            Outcome::Fenced => "fenced",
            Outcome::Forbidden => "forbidden",
            Outcome::Invalid => "invalid",
            Outcome::Limited => "limited",
            Outcome::Unavailable => "unavailable",
            Outcome::Internal => "internal",
        }
    }
}

/// What went wrong, precisely enough for a program to react and for a person or a model to
/// read. Serializable, so it crosses the owner's wire unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub code: ErrorCode,
    /// A complete sentence: what failed and how to fix or check it.
    pub message: String,
    /// The argument at fault, for input errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument: Option<String>,
    /// For `compacted`: history at or below this revision is gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compacted_revision: Option<u64>,
    /// For `watch_lagged`: watch again after this revision; nothing after it was lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_after: Option<u64>,
    /// For `quota_exceeded`: milliseconds until the call would be accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

/// Machine-readable error codes. Stable: they appear in HTTP problem types and CLI output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorCode {
    /// The arguments do not fit the operation's schema.
    InvalidArguments,
    /// The arguments fit but break a rule (key too long, value too large, ...).
    InvalidInput,
    /// The operation is not enabled for this connection (`--tools`, `--compat`).
    NotEnabled,
    /// The caller's token does not grant what the call touches.
    Forbidden,
    /// The caller's token is past its quota (writes per second); retry after the time given.
    QuotaExceeded,
    /// A compatibility tool's subject does not exist (those servers raised an error for it).
    NotFound,
    /// The history asked for was compacted away.
    Compacted,
    /// The store is closed or shutting down, or its owner cannot be reached.
    Unavailable,
    /// A write was sent but no answer came back and it could not be settled by retrying.
    OutcomeUnknown,
    /// The storage layer failed; nothing of the failed write was applied.
    Storage,
    /// A watch fell too far behind the changes and was ended; resume after `resume_after`.
    WatchLagged,
    /// A bug: a result that could not be encoded, an impossible state.
    Internal,
}

impl ErrorCode {
    /// The class every error of this code belongs to.
    pub fn outcome(self) -> Outcome {
        match self {
            ErrorCode::InvalidArguments | ErrorCode::InvalidInput | ErrorCode::NotEnabled => Outcome::Invalid,
            ErrorCode::NotFound | ErrorCode::Compacted => Outcome::NotFound,
            ErrorCode::Forbidden => Outcome::Forbidden,
            ErrorCode::QuotaExceeded => Outcome::Limited,
            ErrorCode::Unavailable | ErrorCode::OutcomeUnknown | ErrorCode::Storage | ErrorCode::WatchLagged => {
                Outcome::Unavailable
            }
            ErrorCode::Internal => Outcome::Internal,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::InvalidArguments => "invalid_arguments",
            ErrorCode::InvalidInput => "invalid_input",
            ErrorCode::NotEnabled => "not_enabled",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::QuotaExceeded => "quota_exceeded",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Compacted => "compacted",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::OutcomeUnknown => "outcome_unknown",
            ErrorCode::Storage => "storage",
            ErrorCode::WatchLagged => "watch_lagged",
            ErrorCode::Internal => "internal",
        }
    }
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
            argument: None,
            compacted_revision: None,
            resume_after: None,
            retry_after_ms: None,
        }
    }
}

/// The answer to one call. As JSON (over HTTP): `{"outcome": "...", "result": ...}` or
/// `{"outcome": "...", "error": {...}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub outcome: Outcome,
    pub body: Result<Value, ApiError>,
}

impl Reply {
    /// A result, classed by what it says.
    pub fn result(outcome: Outcome, body: Value) -> Reply {
        Reply { outcome, body: Ok(body) }
    }

    /// A failure, classed by its code.
    pub fn error(error: ApiError) -> Reply {
        Reply { outcome: error.code.outcome(), body: Err(error) }
    }

    /// The body as JSON: the result, or `{"error": {...}}`.
    pub fn to_json(&self) -> Value {
        match &self.body {
            Ok(value) => value.clone(),
            Err(error) => serde_json::json!({ "error": error }),
        }
    }
}

#[derive(Deserialize)]
struct ReplyJson {
    outcome: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<ApiError>,
}

/// [`ReplyJson`] borrowing a reply's body, so encoding one copies nothing.
#[derive(Serialize)]
struct ReplyJsonRef<'a> {
    outcome: Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a ApiError>,
}

impl Serialize for Reply {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (result, error) = match &self.body {
            Ok(value) => (Some(value), None),
            Err(error) => (None, Some(error)),
        };
        ReplyJsonRef { outcome: self.outcome, result, error }.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Reply {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Reply, D::Error> {
        let json = ReplyJson::deserialize(deserializer)?;
        let body = match json.error {
            Some(error) => Err(error),
            None => Ok(json.result.unwrap_or(Value::Null)),
        };
        Ok(Reply { outcome: json.outcome, body })
    }
}

#[cfg(test)]
mod tests;
