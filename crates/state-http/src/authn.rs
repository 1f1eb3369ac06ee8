//! Authentication: a bearer token becomes a [`Principal`] in the request's extensions, which
//! the seam checks every call against (REST routes and MCP tools alike). Tokens are compared
//! in constant time (in `state_api::auth`) and never logged.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use state_api::auth::Caller;

use crate::Service;
use crate::problem::http_problem;

/// Paths anyone may read: probes, the API's description, and the console's files (which hold
/// no data: the console asks for a token before it reads any).
const PUBLIC: [&str; 5] = ["/healthz", "/openapi.json", "/", "/console/app.js", "/console/style.css"];

/// The caller a handler acts for: the one authentication put in the request, or, where it put
/// none (a path anyone may read), a caller whose every call is refused.
pub(crate) fn caller(found: Option<axum::Extension<Caller>>) -> Caller {
    found.map_or_else(Caller::nobody, |found| found.0)
}

pub(crate) async fn authenticate(State(service): State<Service>, mut request: Request, next: Next) -> Response {
    let Some(tokens) = service.tokens.as_deref() else {
        // Without tokens the server serves loopback only (or `--insecure`): its callers are
        // the machine's own, with every right, as a local process has.
        request.extensions_mut().insert(Caller::LocalUser);
        return next.run(request).await;
    };
    if PUBLIC.contains(&request.uri().path()) {
        return next.run(request).await;
    }
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim);
    // Asking who one is without a token is how the console learns it needs one: answered,
    // not refused (with no principal, `/v1/whoami` says a token is required).
    if presented.is_none() && request.uri().path() == "/v1/whoami" {
        return next.run(request).await;
    }
    let principal = presented.and_then(|secret| tokens.authenticate(secret)).cloned();
    match principal {
        Some(principal) => {
            request.extensions_mut().insert(Caller::Token(principal.clone()));
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        None => {
            let detail = if presented.is_some() {
                "the bearer token is not one this server knows"
            } else {
                "this server requires a token: send `Authorization: Bearer <token>`"
            };
            let mut response = http_problem(StatusCode::UNAUTHORIZED, "unauthenticated", detail);
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"state\""));
            response
        }
    }
}
