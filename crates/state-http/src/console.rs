//! The web console: three files compiled into the binary and served at `/` on the server's own
//! origin, under a Content-Security-Policy that allows this origin's scripts, styles and
//! connections and nothing else (no inline script, no other site, no framing). The console
//! calls the REST API like any client: same tokens (a bearer header it asks for, never a
//! cookie), same authorization; `/v1/whoami` tells it which token it holds.

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;
use state_api::auth::Principal;

use crate::Service;

/// The console's files, as served.
pub(crate) const ASSETS: [(&str, &str, &[u8]); 3] = [
    ("/", "text/html; charset=utf-8", include_bytes!("../console/index.html")),
    ("/console/app.js", "text/javascript; charset=utf-8", include_bytes!("../console/app.js")),
    ("/console/style.css", "text/css; charset=utf-8", include_bytes!("../console/style.css")),
];

/// Whether `path` is one of the console's files.
pub(crate) fn is_page(path: &str) -> bool {
    ASSETS.iter().any(|(asset, _, _)| *asset == path)
}

/// What a console page may load and reach: this origin only.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// `/v1/whoami`, and the console's files unless `serve_files` is false (`--no-console`).
pub(crate) fn router(serve_files: bool) -> Router<Service> {
    let mut router = Router::new().route("/v1/whoami", get(whoami));
    for (path, content_type, body) in ASSETS.into_iter().filter(|_| serve_files) {
        router = router.route(path, get(move || async move { asset(content_type, body) }));
    }
    router
}

fn asset(content_type: &'static str, body: &'static [u8]) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // A new binary serves a new console at once.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// The caller's token: its name, the prefixes it reaches and its right; on a server without
/// tokens, a local caller with every right; asked without a token on a server that has them,
/// `token_required` (and nothing else).
async fn whoami(State(service): State<Service>, request: Request) -> Response {
    let answer = match (request.extensions().get::<Principal>(), service.authenticates()) {
        (Some(principal), _) => json!({
            "name": principal.name,
            "prefixes": principal.prefixes(),
            "right": principal.right().name(),
            "token_required": true,
        }),
        (None, true) => json!({"name": null, "prefixes": [], "right": null, "token_required": true}),
        (None, false) => json!({"name": null, "prefixes": [""], "right": "admin", "token_required": false}),
    };
    axum::Json(answer).into_response()
}

#[cfg(test)]
mod tests;
