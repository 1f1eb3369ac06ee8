//! Authentication: a bearer token (a tokens file's secret, or an OAuth issuer's access token)
//! becomes a [`Principal`] in the request's extensions, which the seam checks every call
//! against (REST routes and MCP tools alike). Secrets are compared in constant time (in
//! `state_api::auth`) and no token is ever logged.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use state_api::auth::{Caller, Principal};

use crate::Service;
use crate::oauth::{self, Refusal};
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
    if !service.authenticates() {
        // Without tokens the server serves loopback only (or `--insecure`): its callers are
        // the machine's own, with every right, as a local process has.
        request.extensions_mut().insert(Caller::LocalUser);
        return next.run(request).await;
    }
    let path = request.uri().path();
    if PUBLIC.contains(&path) || oauth::is_metadata_path(path) {
        return next.run(request).await;
    }
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim)
        .map(str::to_owned);
    // Asking who one is without a token is how the console learns it needs one: answered,
    // not refused (with no principal, `/v1/whoami` says a token is required).
    if presented.is_none() && request.uri().path() == "/v1/whoami" {
        return next.run(request).await;
    }
    match principal(&service, presented.as_deref()).await {
        Ok(principal) => {
            request.extensions_mut().insert(Caller::Token(principal.clone()));
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        Err(refusal) => refused(&service, presented.is_some(), refusal.as_ref()),
    }
}

/// The principal a presented token stands for: a tokens file's entry first (its secrets are
/// never JWTs), then the OAuth issuer's verdict. `Err(None)`: no token, or one no one knows.
async fn principal(service: &Service, presented: Option<&str>) -> Result<Principal, Option<Refusal>> {
    let Some(secret) = presented else { return Err(None) };
    if secret.len() > oauth::MAX_TOKEN_BYTES {
        return Err(Some(Refusal::Invalid(format!(
            "the bearer token is longer than {} bytes",
            oauth::MAX_TOKEN_BYTES
        ))));
    }
    if let Some(principal) = service.tokens.as_deref().and_then(|tokens| tokens.authenticate(secret)) {
        return Ok(principal.clone());
    }
    match &service.oauth {
        Some(oauth) => oauth.authenticate(secret).await.map_err(Some),
        None => Err(None),
    }
}

fn refused(service: &Service, presented: bool, refusal: Option<&Refusal>) -> Response {
    let (status, code, detail) = match refusal {
        Some(Refusal::Invalid(why)) => (StatusCode::UNAUTHORIZED, "unauthenticated", why.as_str()),
        Some(Refusal::NoGrant) => (
            StatusCode::FORBIDDEN,
            "forbidden",
            "the token is good, but no grant of this server covers its subject, scopes or groups",
        ),
        Some(Refusal::IssuerUnreachable(why)) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable", why.as_str()),
        None if presented => {
            (StatusCode::UNAUTHORIZED, "unauthenticated", "the bearer token is not one this server knows")
        }
        None => (
            StatusCode::UNAUTHORIZED,
            "unauthenticated",
            "this server requires a token: send `Authorization: Bearer <token>`",
        ),
    };
    let mut response = http_problem(status, code, detail);
    let challenge = match &service.oauth {
        // An MCP client follows `resource_metadata` to the issuer and signs its user in.
        Some(oauth) => oauth.challenge(refusal),
        None => HeaderValue::from_static("Bearer realm=\"state\""),
    };
    if status != StatusCode::SERVICE_UNAVAILABLE {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, challenge);
    }
    response
}
