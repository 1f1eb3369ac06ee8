//! MCP Streamable HTTP at `/mcp`: `state-mcp`'s own handler (one tool catalog, two
//! transports), with both protocol generations, the Origin and Host checks on, and the
//! request's principal reaching every tool call through the request parts rmcp passes on.

use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use state_api::Options;
use state_api::auth::{Caller, Principal};
use state_mcp::StateServer;

use axum::response::IntoResponse;

use crate::BrowserPolicy;
use crate::sessions::{BoundedSessions, SessionLimits};
use tokio_util::sync::CancellationToken;

/// What `/mcp` accepts.
#[derive(Debug, Clone)]
pub struct McpConfig {
    /// The tools served (`--compat`, `--tools`).
    pub options: Options,
    pub max_body_bytes: usize,
    /// Sessions of the 2025 protocol: how many may be open.
    pub sessions: SessionLimits,
    /// A session unused for this long ends (its client starts a new one).
    pub session_idle: Duration,
}

pub(crate) fn service(
    handler: &StateServer,
    config: &McpConfig,
    browser: &BrowserPolicy,
    shutdown: CancellationToken,
) -> StreamableHttpService<StateServer, BoundedSessions<LocalSessionManager>> {
    let settings = StreamableHttpServerConfig::default()
        .with_allowed_origins(browser.mcp_origins.clone())
        // An empty list would otherwise switch the check off: keep it on whatever is configured.
        .enforce_origin_validation()
        .with_allowed_hosts(browser.allowed_hosts.clone())
        .with_max_request_body_bytes(config.max_body_bytes)
        // A request answered with nothing before its response (every tool here) goes back as
        // plain JSON instead of a one-event stream: the spec allows either, and JSON costs the
        // client and the server less. rmcp still streams when a handler sends more first.
        .with_json_response(true)
        .with_cancellation_token(shutdown);
    // One handler, built once: each request (stateless) or session (legacy) gets a copy that
    // shares its tool definitions instead of generating every schema again, with its own
    // `resources/subscribe` subscriptions (which end with the session).
    let handler = handler.clone();
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(config.session_idle);
    let sessions = Arc::new(BoundedSessions::new(sessions, config.sessions));
    StreamableHttpService::new(move || Ok(handler.for_session()), sessions, settings)
}

/// A client ending its session (`DELETE /mcp`) hears 204: rmcp answers 202, which the official
/// Python SDK logs as a failed termination on every close.
pub(crate) async fn closed_session_answer(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let deleting = request.method() == axum::http::Method::DELETE;
    let mut response = next.run(request).await;
    if deleting && response.status() == axum::http::StatusCode::ACCEPTED {
        *response.status_mut() = axum::http::StatusCode::NO_CONTENT;
        *response.body_mut() = axum::body::Body::empty();
    }
    response
}

/// A request's body must arrive within the request timeout, as on REST: a client trickling a
/// body a byte a minute would otherwise hold its connection for as long as it liked. Read
/// here whole (the body limit outside bounds it), so the layers and rmcp after it see a
/// body that is all there.
pub(crate) async fn body_in_time(
    axum::extract::State(timeout): axum::extract::State<Duration>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    if request.method() != axum::http::Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let body = match tokio::time::timeout(timeout, axum::body::to_bytes(body, usize::MAX)).await {
        Ok(Ok(body)) => body,
        Ok(Err(_)) => return axum::http::StatusCode::PAYLOAD_TOO_LARGE.into_response(),
        Err(_) => {
            return crate::problem::http_problem(
                axum::http::StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                &format!("the request's body did not arrive within {timeout:?}"),
            );
        }
    };
    if let Some(wide) = state_core::numbers::first_wide_integer(&body) {
        // Answered as the JSON-RPC error stdio gives, to the request's id when it has one.
        let id = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("id").cloned())
            .unwrap_or(serde_json::Value::Null);
        let message = format!("Invalid params: {}", state_core::numbers::wide_integer_message(&wide));
        let error = serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": message}});
        return axum::Json(error).into_response();
    }
    next.run(axum::extract::Request::from_parts(parts, axum::body::Body::from(body))).await
}

/// rmcp acknowledges a `subscriptions/listen` before its handler runs, and a watch started
/// then misses a write the client makes on seeing the acknowledgment. The listen's resources
/// are followed here first (2026-07-28 requests name their method in `Mcp-Method`; others pass
/// untouched).
pub(crate) async fn listen_first(
    axum::extract::State((handler, quotas)): axum::extract::State<(StateServer, Arc<crate::quotas::Quotas>)>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let listening = request.method() == axum::http::Method::POST
        && request.headers().get("mcp-method").is_some_and(|method| method.as_bytes() == b"subscriptions/listen");
    if !listening {
        return next.run(request).await;
    }
    // A listen's stream counts against its caller's watch streams, as a /v1/watch does.
    let peer = request.extensions().get::<crate::quotas::Peer>().copied();
    let held = match quotas.watch(request.extensions().get::<Principal>(), peer) {
        Ok(held) => held,
        Err(refused) => return crate::quotas::too_many(refused),
    };
    let (mut parts, body) = request.into_parts();
    // The body limit outside bounds this read; over it, the answer is the limit's.
    let body = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(body) => body,
        Err(_) => return axum::http::StatusCode::PAYLOAD_TOO_LARGE.into_response(),
    };
    let caller = parts.extensions.get::<Caller>().cloned().unwrap_or_else(Caller::nobody);
    if let Some(refused) = handler.start_listen(&body, &caller, &mut parts.extensions).await {
        return axum::Json(refused).into_response();
    }
    let response = next.run(axum::extract::Request::from_parts(parts, axum::body::Body::from(body))).await;
    response.map(|body| crate::holding::holding(body, held))
}
