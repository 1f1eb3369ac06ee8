//! The one place seam outcomes become HTTP: a status code per outcome class, and RFC 9457
//! problem documents (`application/problem+json`) for everything that is not a success.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use state_api::{ApiError, ErrorCode, Outcome, Reply};

pub(crate) const PROBLEM_JSON: &str = "application/problem+json";

/// How a route answers a conflict: a failed `If-Match` is 412, a lease held by another 409,
/// and a transaction whose compares failed is an ordinary 200 (its failure branch ran).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnConflict {
    Conflict,
    PreconditionFailed,
    Ok,
}

/// The status an outcome gets.
pub(crate) fn status(outcome: Outcome, code: Option<ErrorCode>, on_conflict: OnConflict) -> StatusCode {
    match (outcome, code) {
        (Outcome::Ok, _) => StatusCode::OK,
        (Outcome::Conflict, _) => match on_conflict {
            OnConflict::Conflict => StatusCode::CONFLICT,
            OnConflict::PreconditionFailed => StatusCode::PRECONDITION_FAILED,
            OnConflict::Ok => StatusCode::OK,
        },
        (Outcome::NotFound, Some(ErrorCode::Compacted)) => StatusCode::GONE,
        (Outcome::NotFound, _) => StatusCode::NOT_FOUND,
        (Outcome::Fenced, _) => StatusCode::CONFLICT,
        (Outcome::Forbidden, _) => StatusCode::FORBIDDEN,
        (Outcome::Invalid, _) => StatusCode::BAD_REQUEST,
        (Outcome::Limited, _) => StatusCode::TOO_MANY_REQUESTS,
        (Outcome::Unavailable, _) => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// A reply as an HTTP response: the result on success, a problem document otherwise (a
/// result that is a conflict or a not-found rides along as its `result` member, so the
/// caller can retry without another read).
pub(crate) fn reply(reply: Reply, on_conflict: OnConflict) -> Response {
    let code = reply.body.as_ref().err().map(|e| e.code);
    let status = status(reply.outcome, code, on_conflict);
    let mut response = match reply.body {
        Ok(result) if status.is_success() => (status, axum::Json(result)).into_response(),
        Ok(result) => problem_for_result(status, reply.outcome, result),
        Err(error) => problem(status, &error),
    };
    response.extensions_mut().insert(reply.outcome);
    response
}

/// A problem document from an error.
pub(crate) fn problem(status: StatusCode, error: &ApiError) -> Response {
    let mut response = problem_response(status, document(status, error));
    // Whole seconds, rounded up: a client that waits as told is not refused again.
    if let Some(millis) = error.retry_after_ms
        && let Ok(value) = HeaderValue::from_str(&millis.div_ceil(1000).max(1).to_string())
    {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// An error's problem document, for a response or an event stream.
pub(crate) fn document(status: StatusCode, error: &ApiError) -> Map<String, Value> {
    let mut body = base(status, error.code.name(), &error.message);
    if let Some(argument) = &error.argument {
        body.insert("argument".into(), json!(argument));
    }
    if let Some(compacted) = error.compacted_revision {
        body.insert("compacted_revision".into(), json!(compacted));
    }
    if let Some(resume_after) = error.resume_after {
        body.insert("resume_after".into(), json!(resume_after));
    }
    if let Some(millis) = error.retry_after_ms {
        body.insert("retry_after_ms".into(), json!(millis));
    }
    body
}

/// A problem document for a result whose outcome is not a success (a conflict, a fence, a
/// not-found): the result itself is carried in `result`.
fn problem_for_result(status: StatusCode, outcome: Outcome, result: Value) -> Response {
    let detail = result
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| default_detail(outcome).to_owned());
    let mut body = base(status, outcome.name(), &detail);
    body.insert("result".into(), result);
    problem_response(status, body)
}

fn default_detail(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Conflict => "the precondition did not hold; `result` carries the current state to retry from",
        Outcome::NotFound => "it does not exist",
        Outcome::Fenced => "the lease or claim token is no longer current; nothing was changed",
        _ => "the request did not succeed",
    }
}

/// A problem that arises in HTTP itself (no token, a bad header).
pub(crate) fn http_problem(status: StatusCode, code: &str, detail: &str) -> Response {
    problem_response(status, base(status, code, detail))
}

fn base(status: StatusCode, code: &str, detail: &str) -> Map<String, Value> {
    let mut body = Map::new();
    body.insert("type".into(), json!(format!("urn:state:problem:{code}")));
    body.insert("title".into(), json!(status.canonical_reason().unwrap_or("Error")));
    body.insert("status".into(), json!(status.as_u16()));
    body.insert("detail".into(), json!(detail));
    body.insert("code".into(), json!(code));
    body
}

fn problem_response(status: StatusCode, body: Map<String, Value>) -> Response {
    let mut response = (status, axum::Json(Value::Object(body))).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
    response
}

/// A body over `--max-body-bytes`, refused by the body limit before any handler ran (as plain
/// text), answered like every other refusal: a problem document.
pub(crate) async fn too_large(
    max_body_bytes: usize,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let response = next.run(request).await;
    let is_problem =
        response.headers().get(header::CONTENT_TYPE).is_some_and(|t| t.as_bytes() == PROBLEM_JSON.as_bytes());
    if response.status() != StatusCode::PAYLOAD_TOO_LARGE || is_problem {
        return response;
    }
    let detail = format!(
        "the request body is larger than this server accepts ({max_body_bytes} bytes, --max-body-bytes); nothing was changed"
    );
    http_problem(StatusCode::PAYLOAD_TOO_LARGE, "too_large", &detail)
}
