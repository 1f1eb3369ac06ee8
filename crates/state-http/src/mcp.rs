//! MCP Streamable HTTP at `/mcp`: `state-mcp`'s own handler (one tool catalog, two
//! transports), with both protocol generations, the Origin and Host checks on, and the
//! request's principal reaching every tool call through the request parts rmcp passes on.

use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use state_api::{Api, Options};
use state_mcp::StateServer;

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
    api: Api,
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
    let handler = StateServer::new(api, config.options.clone());
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
