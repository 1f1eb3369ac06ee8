//! `state-http`: the store over HTTP. REST API v1 (`/v1`, described at `/openapi.json`), MCP
//! Streamable HTTP (`/mcp`, the same tools as `state-mcp`), bearer-token auth scoped to key
//! prefixes, `/metrics` and `/healthz`.
//!
//! Every route translates a protocol: arguments in, the seam's reply out. [`router`] builds
//! the whole application from an [`Api`], so tests mount it without a socket; [`serve`]
//! accepts connections under [`Limits`].

mod authn;
mod browser;
mod console;
pub mod flags;
mod holding;
mod listen;
mod mcp;
mod metrics;
pub mod oauth;
mod openapi;
mod problem;
mod quotas;
mod rest;
pub mod run;
mod sessions;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::response::IntoResponse;
use axum::routing::get;
use state_api::Api;
use state_api::auth::Tokens;
use tokio_util::sync::CancellationToken;

pub use browser::BrowserPolicy;
pub use listen::{Limits, serve};
pub use mcp::McpConfig;
pub use oauth::ResourceServer;
pub use quotas::QuotaLimits;
pub use sessions::SessionLimits;

/// The default address: loopback, on a port no well-known database or broker uses.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7478";

/// How often an idle watch stream gets a keep-alive comment: well inside the minute after
/// which common proxies and load balancers drop a silent connection.
pub const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct Service {
    pub(crate) api: Api,
    pub(crate) tokens: Option<Arc<Tokens>>,
    /// An OAuth issuer whose access tokens are taken too.
    pub(crate) oauth: Option<Arc<ResourceServer>>,
    pub(crate) metrics: Arc<metrics::Metrics>,
    /// Cancelled when the server stops: ends watch streams so the drain can finish.
    pub(crate) shutdown: CancellationToken,
    /// How often an idle watch stream gets a keep-alive comment.
    pub(crate) keep_alive: Duration,
    /// Which hosts and browser origins are answered.
    pub(crate) browser: Arc<BrowserPolicy>,
    /// Which operations are served (`--tools`, `--compat`): REST and `/mcp` alike.
    pub(crate) selection: Arc<state_api::Options>,
    /// What each caller holds at once.
    pub(crate) quotas: Arc<quotas::Quotas>,
}

/// How the application behaves.
#[derive(Debug, Clone)]
pub struct Config {
    /// Bearer tokens; `None` serves everyone (only allowed on loopback without `--insecure`).
    pub tokens: Option<Arc<Tokens>>,
    /// An OAuth issuer whose access tokens are taken (beside the tokens, if any).
    pub oauth: Option<Arc<ResourceServer>>,
    pub mcp: McpConfig,
    /// Host names and browser origins answered, on every route.
    pub browser: BrowserPolicy,
    /// Whether `/` serves the web console.
    pub console: bool,
    /// Largest request body, for REST and /mcp alike; larger ones get 413 and change nothing.
    pub max_body_bytes: usize,
    /// Longest time a REST request may take, its body included, on top of what its operation
    /// may wait on purpose (at most 55 s: a receive, an acquire, a run's end). Watches
    /// (`/v1/watch`, the `state_watch` long poll) wait longer by design and are exempt.
    pub request_timeout: Duration,
    /// How often an idle `/v1/watch` stream gets a keep-alive comment.
    pub keep_alive: Duration,
    /// What one caller (a token, or a peer without tokens) may hold at once.
    pub quotas: QuotaLimits,
}

impl Service {
    /// Whether callers must authenticate: a tokens file or an OAuth issuer is configured.
    pub(crate) fn authenticates(&self) -> bool {
        self.tokens.is_some() || self.oauth.is_some()
    }
}

/// The resource's metadata (RFC 9728), where an MCP client looks for how to sign in.
fn oauth_metadata(oauth: Option<&Arc<ResourceServer>>) -> Router<Service> {
    let Some(oauth) = oauth else { return Router::new() };
    let metadata = Arc::new(oauth.metadata());
    oauth.metadata_paths().iter().fold(Router::new(), |router, path| {
        let metadata = Arc::clone(&metadata);
        router.route(path, get(move || async move { axum::Json(Arc::clone(&metadata)).into_response() }))
    })
}

/// The whole application over `api`. `shutdown` ends MCP streams when the server stops.
pub fn router(api: Api, config: &Config, shutdown: CancellationToken) -> Router {
    let service = Service {
        api: api.clone(),
        tokens: config.tokens.clone(),
        oauth: config.oauth.clone(),
        metrics: Arc::new(metrics::Metrics::default()),
        shutdown: shutdown.clone(),
        keep_alive: config.keep_alive,
        browser: Arc::new(config.browser.clone()),
        selection: Arc::new(config.mcp.options.clone()),
        quotas: Arc::new(quotas::Quotas::new(config.quotas)),
    };
    let mcp_handler = state_mcp::StateServer::new(api, config.mcp.options.clone());
    let rest = rest::router(config.request_timeout).layer(DefaultBodyLimit::max(config.max_body_bytes));
    // The document depends only on the catalog: generate its schemas once, not per request.
    let document = Arc::new(openapi::document(&config.mcp.options));
    let app = Router::new()
        .merge(rest)
        .merge(console::router(config.console))
        .merge(rest::watch::router())
        .route("/openapi.json", get(move || async move { axum::Json(Arc::clone(&document)).into_response() }))
        .merge(oauth_metadata(config.oauth.as_ref()))
        .route("/healthz", get(metrics::healthz))
        .route("/metrics", get(metrics::metrics))
        .nest_service(
            "/mcp",
            tower::ServiceBuilder::new()
                .layer(middleware::from_fn(mcp::closed_session_answer))
                .layer(middleware::from_fn_with_state(config.request_timeout, mcp::body_in_time))
                .layer(middleware::from_fn(sessions::admit))
                .layer(middleware::from_fn_with_state((mcp_handler.clone(), service.quotas.clone()), mcp::listen_first))
                .service(mcp::service(&mcp_handler, &config.mcp, &config.browser, shutdown)),
        )
        // Inside authentication: a request counts against the caller it authenticated as.
        .layer(middleware::from_fn_with_state(service.clone(), quotas::admit))
        .layer(middleware::from_fn_with_state(service.clone(), authn::authenticate))
        // Before authentication: a foreign page is refused whatever it presents.
        .layer(middleware::from_fn_with_state(service.clone(), browser::guard));
    // Preflights are answered before the guard (their origin is one of the allowed ones).
    let app = match browser::cors(&config.browser.allowed_origins) {
        Some(cors) => app.layer(cors),
        None => app,
    };
    let max_body_bytes = config.max_body_bytes;
    app.layer(middleware::from_fn_with_state(service.clone(), metrics::record))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(config.max_body_bytes))
        .layer(middleware::from_fn(move |request, next| problem::too_large(max_body_bytes, request, next)))
        .with_state(service)
}
