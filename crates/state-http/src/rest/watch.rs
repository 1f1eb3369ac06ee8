//! `GET /v1/watch`: a watch as server-sent events, and the long poll's seam route. Both wait
//! longer than a REST request may take, so they sit outside the request timeout.
//!
//! A stream opens with a `position` event (its id is the revision the watch starts after),
//! then sends one event per revision with changes: its id is that revision and its data the
//! revision's events. A reconnecting client sends the last id it saw as `Last-Event-ID` and
//! resumes exactly after it. A watch that cannot go on ends with a `problem` event holding a
//! problem document (`watch_lagged` names the revision to resume after; `unavailable` means
//! the server is stopping). Idle streams get a comment every keep-alive interval so proxies
//! and clients can tell a quiet stream from a dead one.

use std::convert::Infallible;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::Stream;
use serde_json::{Map, Value, json};
use state_api::auth::Caller;
use state_api::catalog::Operation;
use state_api::{ApiError, ErrorCode, Outcome, Reply, Watcher};
use state_core::ops::watch::{WatchBatch, WatchRequest};
use tokio_util::sync::CancellationToken;

use super::params::QueryTypes;
use crate::Service;
use crate::problem::{self, OnConflict};

/// The query parameters `/v1/watch` takes; `from_revision` is the watch's `after_revision`.
const PARAMETERS: [&str; 5] = ["key", "prefix", "kind", "from_revision", "include_values"];

/// The routes that wait on changes.
pub(crate) fn router() -> Router<Service> {
    // A static segment wins over the seam route's `{profile}/{name}`, so only the long poll
    // escapes the request timeout.
    Router::new().route("/v1/watch", get(watch)).route(
        "/v1/call/native/state_watch",
        post(|state, caller, headers, body| super::run_call(state, caller, Operation::StateWatch, headers, body)),
    )
}

async fn watch(
    State(service): State<Service>,
    caller: Option<axum::Extension<Caller>>,
    peer: Option<axum::Extension<crate::quotas::Peer>>,
    Query(query): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = super::not_served(&service, Operation::StateWatch) {
        return refused;
    }
    let request = match request(&query, &headers) {
        Ok(request) => request,
        Err(error) => return problem::problem(StatusCode::BAD_REQUEST, &error),
    };
    let caller = crate::authn::caller(caller);
    let held = match service.quotas.watch(caller.token(), peer.map(|p| p.0)) {
        Ok(held) => held,
        Err(refused) => return crate::quotas::too_many(refused),
    };
    let watcher = match service.api.watch(&caller, request).await {
        Ok(watcher) => watcher,
        Err(mut error) => {
            // This route calls the watch's starting point `from_revision`: say it so.
            error.message = error.message.replace("`after_revision`", "`from_revision`");
            if error.argument.as_deref() == Some("after_revision") {
                error.argument = Some("from_revision".into());
            }
            return problem::reply(Reply::error(error), OnConflict::Conflict);
        }
    };
    let keep_alive = KeepAlive::new().interval(service.keep_alive).text("keep-alive");
    let stream = Sse::new(events(watcher, service.shutdown.clone())).keep_alive(keep_alive).into_response();
    // The stream counts against the caller's watches until it ends.
    let mut response = stream.map(|body| crate::holding::holding(body, held));
    // Proxies that buffer responses would hold events back until the buffer fills.
    response.headers_mut().insert("x-accel-buffering", HeaderValue::from_static("no"));
    response.extensions_mut().insert(Outcome::Ok);
    response
}

/// The watch a request asks for: its query parameters, and `Last-Event-ID` (which wins over
/// `from_revision`, so a reconnecting EventSource resumes where it was).
fn request(query: &[(String, String)], headers: &HeaderMap) -> Result<WatchRequest, ApiError> {
    let invalid = |message: String| ApiError::new(ErrorCode::InvalidArguments, message);
    // The watch's argument types come from its schema: read them once.
    static TYPES: std::sync::LazyLock<QueryTypes> = std::sync::LazyLock::new(|| QueryTypes::of(Operation::StateWatch));
    let types = &*TYPES;
    let mut args = Map::new();
    for (name, text) in query {
        if !PARAMETERS.contains(&name.as_str()) {
            return Err(invalid(format!(
                "unknown query parameter `{name}`; /v1/watch takes {}",
                PARAMETERS.join(", ")
            )));
        }
        let field = if name == "from_revision" { "after_revision" } else { name.as_str() };
        args.insert(field.to_owned(), types.value_of(field, name, text).map_err(invalid)?);
    }
    if let Some(last) = headers.get("last-event-id") {
        let revision = last
            .to_str()
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
            .ok_or_else(|| invalid("Last-Event-ID must be a revision (a whole number) this server sent".into()))?;
        args.insert("after_revision".into(), json!(revision));
    }
    serde_json::from_value(Value::Object(args)).map_err(|e| invalid(format!("bad watch parameters: {e}")))
}

/// The event stream of one watch: its position, then its changes, ending with a problem
/// when the watch cannot go on or the server stops.
fn events(watcher: Watcher, shutdown: CancellationToken) -> impl Stream<Item = Result<Event, Infallible>> {
    let opening = Event::default()
        .event("position")
        .id(watcher.position().to_string())
        .data(json!({"revision": watcher.position()}).to_string());
    let changes = futures_util::stream::unfold(Some((watcher, shutdown)), |state| async move {
        let (mut watcher, shutdown) = state?;
        let next = tokio::select! {
            () = shutdown.cancelled() => Err(ApiError::new(
                ErrorCode::Unavailable,
                "the server is stopping; reconnect with Last-Event-ID to resume",
            )),
            next = watcher.next() => next.unwrap_or_else(|| Err(ApiError::new(
                ErrorCode::Unavailable,
                "the store closed; reconnect with Last-Event-ID to resume",
            ))),
        };
        match next {
            Ok(batch) => Some((Ok(change(&batch)), Some((watcher, shutdown)))),
            Err(error) => Some((Ok(problem_event(&error)), None)),
        }
    });
    futures_util::StreamExt::chain(futures_util::stream::once(async { Ok(opening) }), changes)
}

fn change(batch: &WatchBatch) -> Event {
    match serde_json::to_string(batch) {
        Ok(data) => Event::default().id(batch.revision.to_string()).data(data),
        Err(e) => problem_event(&ApiError::new(ErrorCode::Internal, format!("cannot encode a change: {e}"))),
    }
}

fn problem_event(error: &ApiError) -> Event {
    let status = problem::status(error.code.outcome(), Some(error.code), OnConflict::Conflict);
    Event::default().event("problem").data(Value::Object(problem::document(status, error)).to_string())
}
