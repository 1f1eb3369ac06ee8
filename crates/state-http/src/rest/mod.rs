//! REST API v1: each route assembles its operation's arguments from the path, the query string,
//! the body and the HTTP precondition headers, calls the seam, and maps the reply. No rule is
//! decided here: versions are compared by the engine, scopes checked by the seam.

mod params;
pub(crate) mod routes;
pub(crate) mod watch;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, on, post};
use bytes::Bytes;
use serde_json::{Map, Value};
use state_api::auth::Caller;
use state_api::catalog::Operation;
use state_api::{ApiError, ErrorCode, Outcome};
use tower_http::timeout::TimeoutLayer;

use self::params::QueryTypes;
use self::routes::{Body, Flavor, Route};
use crate::problem::{self, OnConflict};
use crate::{Service, authn};

/// The idempotency key of a mutating request, as HTTP spells it.
const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// The REST routes and the seam route, on `service`.
/// The REST routes; each may take `request_timeout`, plus what its operation may wait on
/// purpose (a receive's `wait_seconds`), before it is answered 408.
pub(crate) fn router(request_timeout: Duration) -> Router<Service> {
    let timeout =
        |allowed: Duration| TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, request_timeout + allowed);
    let mut router = Router::new();
    for route in routes::routes() {
        let filter = MethodFilter::try_from(route.method.clone()).unwrap_or(MethodFilter::GET);
        let (path, op) = (route.path, route.op);
        let prepared = Arc::new(Prepared { types: QueryTypes::of(route.op), route });
        let handler = on(filter, move |state, principal, path, query, headers, body| {
            handle(prepared.clone(), state, principal, path, query, headers, body)
        });
        router = router.route(path, handler.layer(timeout(state_api::longest_own_wait(op))));
    }
    // Any operation may come through the seam route, so it allows the longest wait of all.
    let longest = Operation::all().map(state_api::longest_own_wait).max().unwrap_or_default();
    router.route("/v1/call/{profile}/{name}", post(call).layer(timeout(longest)))
}

struct Prepared {
    route: Route,
    types: QueryTypes,
}

async fn handle(
    prepared: Arc<Prepared>,
    State(service): State<Service>,
    caller: Option<axum::Extension<Caller>>,
    Path(path): Path<HashMap<String, String>>,
    Query(query): Query<Vec<(String, String)>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let route = &prepared.route;
    if let Some(refused) = not_served(&service, route.op) {
        return refused;
    }
    let parsed =
        arguments(&prepared, path, &query, &headers, &body).and_then(|args| Ok((args, idempotency_key(&headers)?)));
    let (args, request_id) = match parsed {
        Ok(parsed) => parsed,
        Err(error) => return problem::problem(StatusCode::BAD_REQUEST, &error),
    };
    let reply = service.api.call_with(&authn::caller(caller), request_id, route.op, Value::Object(args)).await;
    let version = reply.body.as_ref().ok().and_then(|r| r.get("version")).and_then(Value::as_u64);
    match route.flavor {
        Flavor::Plain(on_conflict) => problem::reply(reply, on_conflict),
        Flavor::KvRead => {
            let unchanged = reply.outcome == Outcome::Ok
                && version.is_some_and(|v| if_none_match(&headers).is_some_and(|tags| tags.contains(&v)));
            if unchanged {
                let mut response = StatusCode::NOT_MODIFIED.into_response();
                set_etag(&mut response, version);
                response.extensions_mut().insert(Outcome::Ok);
                return response;
            }
            let mut response = problem::reply(reply, OnConflict::PreconditionFailed);
            if response.status().is_success() {
                set_etag(&mut response, version);
            }
            response
        }
        Flavor::KvWrite => {
            let outcome = reply.outcome;
            let mut response = problem::reply(reply, OnConflict::PreconditionFailed);
            // After a write, the new version; after a conflict, the current one.
            if matches!(outcome, Outcome::Ok | Outcome::Conflict) && version.is_some_and(|v| v > 0) {
                set_etag(&mut response, version);
            }
            response
        }
    }
}

/// A 404 for an operation this server was started without (`--tools`, `--compat`): REST
/// serves what `/mcp` serves.
pub(crate) fn not_served(service: &Service, op: Operation) -> Option<Response> {
    if service.selection.covers(op) {
        return None;
    }
    let detail =
        format!("`{}` is not served here: this server was started without its tools (--tools, --compat)", op.id());
    Some(problem::http_problem(StatusCode::NOT_FOUND, "not_enabled", &detail))
}

/// The operation's arguments: body, then query string, then path (which wins), then the
/// precondition and idempotency headers.
fn arguments(
    prepared: &Prepared,
    path: HashMap<String, String>,
    query: &[(String, String)],
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Map<String, Value>, ApiError> {
    let route = &prepared.route;
    let invalid = |message: String| ApiError::new(ErrorCode::InvalidArguments, message);
    if let Some(wide) = state_core::numbers::first_wide_integer(body) {
        return Err(invalid(state_core::numbers::wide_integer_message(&wide)));
    }
    let mut args = match route.body {
        Body::Args if body.is_empty() => Map::new(),
        Body::Args => match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return Err(invalid("the request body must be a JSON object of arguments".into())),
            Err(e) => return Err(invalid(format!("the request body is not JSON: {e}"))),
        },
        Body::Field(field) => {
            let value = serde_json::from_slice::<Value>(body).map_err(|e| {
                invalid(format!("the request body must be the {field} as JSON ({e}); a string is sent quoted"))
            })?;
            Map::from_iter([(field.to_owned(), value)])
        }
        Body::None => Map::new(),
    };
    for (name, text) in query {
        args.insert(name.clone(), prepared.types.value(name, text).map_err(invalid)?);
    }
    for (name, value) in path {
        args.insert(name, Value::String(value));
    }
    if route.flavor == Flavor::KvWrite
        && let Some(expected) = expected_version(headers)?
    {
        args.insert("expected_version".into(), Value::from(expected));
    }
    Ok(args)
}

/// The `Idempotency-Key` header: the seam makes it a mutating call's `request_id` (unless the
/// arguments carry one) and ignores it on reads.
fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(key) = headers.get(IDEMPOTENCY_KEY) else { return Ok(None) };
    let key = key
        .to_str()
        .map_err(|_| ApiError::new(ErrorCode::InvalidArguments, "Idempotency-Key must be printable ASCII"))?;
    Ok(Some(key.to_owned()))
}

/// `If-Match: "N"` means version N; `If-None-Match: *` means create only.
fn expected_version(headers: &HeaderMap) -> Result<Option<u64>, ApiError> {
    let invalid = |message: &str| ApiError::new(ErrorCode::InvalidArguments, message);
    let if_match = headers.get(header::IF_MATCH).map(|v| v.to_str().unwrap_or(""));
    let if_none = headers.get(header::IF_NONE_MATCH).map(|v| v.to_str().unwrap_or(""));
    match (if_match, if_none) {
        (Some(_), Some(_)) => Err(invalid("send If-Match or If-None-Match, not both")),
        (None, Some("*")) => Ok(Some(0)),
        (None, Some(_)) => Err(invalid("on a write, If-None-Match takes only `*` (create only)")),
        (Some("*"), None) => {
            Err(invalid("If-Match: * (any existing version) is not supported; send the version you read as its ETag"))
        }
        (Some(tag), None) => match entity_tags(tag).as_deref() {
            Some([version]) => Ok(Some(*version)),
            _ => Err(invalid("If-Match takes one ETag, the version you read, such as \"3\"")),
        },
        (None, None) => Ok(None),
    }
}

fn if_none_match(headers: &HeaderMap) -> Option<Vec<u64>> {
    entity_tags(headers.get(header::IF_NONE_MATCH)?.to_str().ok()?)
}

/// Versions from a list of entity tags (`"3"`, `W/"3"`, `"3", "4"`).
fn entity_tags(text: &str) -> Option<Vec<u64>> {
    text.split(',').map(|tag| tag.trim().trim_start_matches("W/").trim_matches('"').parse().ok()).collect()
}

fn set_etag(response: &mut Response, version: Option<u64>) {
    if let Some(tag) = version.and_then(|v| HeaderValue::from_str(&format!("\"{v}\"")).ok()) {
        response.headers_mut().insert(header::ETAG, tag);
    }
}

/// `POST /v1/call/{profile}/{name}`: the seam itself over HTTP, for every operation of the
/// catalog (compatibility profiles included). `state-mcp --server` and scripts use it; the
/// answer is `{outcome, result}` or `{outcome, error}`.
async fn call(
    service: State<Service>,
    caller: Option<axum::Extension<Caller>>,
    Path((profile, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(op) = Operation::from_id(&format!("{profile}/{name}")) else {
        let detail = format!("no operation `{profile}/{name}`: operations are named like native/state_get");
        return problem::http_problem(StatusCode::NOT_FOUND, "unknown_operation", &detail);
    };
    run_call(service, caller, op, headers, body).await
}

/// The seam route for `op`: the body is its arguments, the answer a [`state_api::Reply`].
async fn run_call(
    State(service): State<Service>,
    caller: Option<axum::Extension<Caller>>,
    op: Operation,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = not_served(&service, op) {
        return refused;
    }
    if let Some(wide) = state_core::numbers::first_wide_integer(&body) {
        let error = ApiError::new(ErrorCode::InvalidArguments, state_core::numbers::wide_integer_message(&wide));
        return problem::problem(StatusCode::BAD_REQUEST, &error);
    }
    let args = if body.is_empty() {
        Value::Object(Map::new())
    } else {
        match serde_json::from_slice(&body) {
            Ok(args) => args,
            Err(e) => {
                let error = ApiError::new(ErrorCode::InvalidArguments, format!("the request body is not JSON: {e}"));
                return problem::problem(StatusCode::BAD_REQUEST, &error);
            }
        }
    };
    let request_id = match idempotency_key(&headers) {
        Ok(key) => key,
        Err(error) => return problem::problem(StatusCode::BAD_REQUEST, &error),
    };
    let reply = service.api.call_with(&authn::caller(caller), request_id, op, args).await;
    let status = match &reply.body {
        Ok(_) => StatusCode::OK,
        Err(error) => problem::status(reply.outcome, Some(error.code), OnConflict::Conflict),
    };
    let outcome = reply.outcome;
    let mut response = (status, axum::Json(reply)).into_response();
    response.extensions_mut().insert(outcome);
    response
}

#[cfg(test)]
mod tests;
