//! What a web browser may do here. A page on any site can make the browser send requests to
//! a server on loopback; these checks keep such a page from reading or changing the store:
//!
//! - `Host` must name this server (without `--auth`): a DNS-rebinding page, whose requests
//!   carry its own host name, is refused.
//! - `Origin`, when present, must be an allowed one; browsers send it on every cross-site
//!   request that can change anything, so a foreign page's write is refused before it runs.
//!   `Sec-Fetch-Site: cross-site` without an `Origin` is refused too.
//! - A body must be JSON, and a `Content-Type` that is not JSON is refused even without a
//!   body: the content types a page can send without a CORS preflight (forms, `text/plain`)
//!   never reach an operation.
//! - CORS headers go only to origins configured with `--allow-origin`.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use crate::Service;
use crate::problem::http_problem;

/// Which browser origins and host names the server answers.
#[derive(Debug, Clone, Default)]
pub struct BrowserPolicy {
    /// `Host` values this server answers to (`name` or `name:port`); checked on every route
    /// when the server has no tokens, and always on `/mcp`.
    pub allowed_hosts: Vec<String>,
    /// Origins allowed to call, with CORS (`scheme://host:port`, `:*` for any port, or
    /// `null`): only those configured. A request with any other `Origin` is refused, a
    /// loopback page's included: a page on another local port is still another site.
    pub allowed_origins: Vec<String>,
    /// `/mcp` also takes pages on loopback (MCP's own transport rules, which rmcp checks
    /// again, refusing every body that is not JSON).
    pub mcp_origins: Vec<String>,
}

/// A request a browser policy refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    status: StatusCode,
    code: &'static str,
    detail: String,
}

impl BrowserPolicy {
    /// Checks a request's headers; `check_host` is off when tokens protect the server.
    pub(crate) fn check(&self, headers: &HeaderMap, check_host: bool) -> Result<(), Refusal> {
        self.check_against(headers, check_host, &self.allowed_origins)
    }

    /// Checks a request's Host alone (without tokens): for files that hold no data.
    pub(crate) fn check_host(&self, headers: &HeaderMap, check_host: bool) -> Result<(), Refusal> {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
        if check_host && !host_allowed(host, &self.allowed_hosts) {
            return Err(Refusal {
                status: StatusCode::FORBIDDEN,
                code: "forbidden_host",
                detail: format!("this server does not answer to Host `{host}` (a DNS-rebinding guard)"),
            });
        }
        Ok(())
    }

    /// Checks a `/mcp` request's headers: its Host always, its Origin against MCP's list.
    pub(crate) fn check_mcp(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        self.check_against(headers, true, &self.mcp_origins)
    }

    fn check_against(&self, headers: &HeaderMap, check_host: bool, origins: &[String]) -> Result<(), Refusal> {
        let forbidden = |code, detail: String| Refusal { status: StatusCode::FORBIDDEN, code, detail };
        if check_host {
            let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
            if !host_allowed(host, &self.allowed_hosts) {
                return Err(forbidden(
                    "forbidden_host",
                    format!(
                        "this server does not answer to Host `{host}` (a DNS-rebinding guard); \
                         start it with --allow-host if clients use that name"
                    ),
                ));
            }
        }
        match headers.get(header::ORIGIN) {
            Some(origin) => {
                let origin = origin.to_str().unwrap_or("");
                if !same_origin(origin, headers) && !origin_allowed(origin, origins) {
                    return Err(forbidden(
                        "forbidden_origin",
                        format!(
                            "requests from pages at `{origin}` are refused; start the server with \
                             --allow-origin {origin} to let that site call it"
                        ),
                    ));
                }
            }
            None if headers.get("sec-fetch-site").is_some_and(|site| site == "cross-site") => {
                return Err(forbidden("forbidden_origin", "cross-site requests are refused".into()));
            }
            None => {}
        }
        check_content_type(headers)
    }
}

impl Refusal {
    fn into_response(self) -> Response {
        http_problem(self.status, self.code, &self.detail)
    }
}

/// A body must say it is JSON (`application/json` or `application/*+json`); so must any
/// request that names a content type at all.
fn check_content_type(headers: &HeaderMap) -> Result<(), Refusal> {
    let has_body =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).is_some_and(|length| length.trim() != "0")
            || headers.contains_key(header::TRANSFER_ENCODING);
    let unsupported =
        |detail: String| Refusal { status: StatusCode::UNSUPPORTED_MEDIA_TYPE, code: "unsupported_media_type", detail };
    match headers.get(header::CONTENT_TYPE) {
        Some(value) => {
            let text = value.to_str().unwrap_or("");
            if is_json(text) {
                Ok(())
            } else {
                Err(unsupported(format!(
                    "request bodies must be JSON: send `Content-Type: application/json`, not `{text}`"
                )))
            }
        }
        None if has_body => Err(unsupported(
            "request bodies must be JSON: send `Content-Type: application/json` (curl: --json or -H)".into(),
        )),
        None => Ok(()),
    }
}

fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// A host name without brackets, in lower case, and its port if given.
fn authority(text: &str) -> Option<(String, Option<u16>)> {
    let authority = axum::http::uri::Authority::try_from(text.trim()).ok()?;
    let host = authority.host().trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
    Some((host, authority.port_u16()))
}

/// Whether `host` (a `Host` header) is one of `allowed` (`name` matches any port, `name:port`
/// only that port).
pub(crate) fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let Some((name, port)) = authority(host) else { return false };
    allowed.iter().any(|pattern| {
        let pattern = pattern.trim();
        // An IPv6 literal without brackets (`::1`) has no port.
        let parsed = if pattern.matches(':').count() > 1 && !pattern.starts_with('[') {
            Some((pattern.to_ascii_lowercase(), None))
        } else {
            authority(pattern)
        };
        parsed.is_some_and(|(allowed_name, allowed_port)| {
            allowed_name == name && allowed_port.is_none_or(|p| Some(p) == port)
        })
    })
}

/// Scheme, host and port of an origin, the port defaulted from the scheme; `None` for `null`
/// or anything that is not an origin.
fn origin_parts(origin: &str) -> Option<(String, String, Option<u16>)> {
    let (scheme, rest) = origin.trim().split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let rest = rest.trim_end_matches('/');
    if rest.contains('/') {
        return None;
    }
    let (name, port) = authority(rest)?;
    let port = port.or(match scheme.as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    });
    Some((scheme, name, port))
}

/// Whether `origin` matches one of `allowed`: same scheme and host, and the same port (or
/// any, for a pattern ending in `:*`). `null` matches only a `null` pattern.
pub(crate) fn origin_allowed(origin: &str, allowed: &[String]) -> bool {
    let origin = origin.trim();
    if origin.eq_ignore_ascii_case("null") {
        return allowed.iter().any(|p| p.trim().eq_ignore_ascii_case("null"));
    }
    let Some((scheme, name, port)) = origin_parts(origin) else { return false };
    allowed.iter().any(|pattern| {
        let pattern = pattern.trim();
        match pattern.strip_suffix(":*") {
            Some(base) => origin_parts(base).is_some_and(|(s, n, _)| s == scheme && n == name),
            None => origin_parts(pattern).is_some_and(|(s, n, p)| s == scheme && n == name && p == port),
        }
    })
}

/// Whether `origin` is this server's own: the console's pages (served at `/`) calling the API.
/// A DNS-rebinding page is same-origin by this test too, under its own host name: the Host
/// check refuses it on a server without tokens, and it holds no token on one with them.
fn same_origin(origin: &str, headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else { return false };
    let origin = origin.trim();
    ["http://", "https://"]
        .iter()
        .any(|scheme| origin.strip_prefix(scheme).is_some_and(|rest| rest.eq_ignore_ascii_case(host)))
}

/// The middleware: refuses what the policy does not allow, before authentication or any
/// operation runs. `/mcp` is held to MCP's own rules (its Host list always, its origin list),
/// here as well as in rmcp: a request refused there must not have started anything here first
/// (a `subscriptions/listen` starts its watches before rmcp sees it).
pub(crate) async fn guard(State(service): State<Service>, request: Request, next: Next) -> Response {
    let page = matches!(*request.method(), axum::http::Method::GET | axum::http::Method::HEAD)
        && crate::console::is_page(request.uri().path());
    let checked = if page {
        // The console's files hold no data: a link to it from another site (a chat, a tracker)
        // opens it. Everything it then asks for is checked as any request is.
        service.browser.check_host(request.headers(), !service.authenticates())
    } else if request.uri().path().starts_with("/mcp") {
        service.browser.check_mcp(request.headers())
    } else {
        service.browser.check(request.headers(), !service.authenticates())
    };
    match checked {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            tracing::debug!(code = refusal.code, detail = %refusal.detail, "refused a request");
            refusal.into_response()
        }
    }
}

/// CORS for the configured origins only: preflights answered, answers readable, and the
/// headers this API uses allowed and exposed.
pub(crate) fn cors(origins: &[String]) -> Option<tower_http::cors::CorsLayer> {
    use axum::http::{HeaderName, Method};
    use tower_http::cors::{AllowOrigin, CorsLayer};
    if origins.is_empty() {
        return None;
    }
    let origins = origins.to_vec();
    let allow = AllowOrigin::predicate(move |origin, _| origin.to_str().is_ok_and(|o| origin_allowed(o, &origins)));
    let headers = [
        header::AUTHORIZATION,
        header::CONTENT_TYPE,
        header::IF_MATCH,
        header::IF_NONE_MATCH,
        HeaderName::from_static("idempotency-key"),
        HeaderName::from_static("last-event-id"),
        HeaderName::from_static("mcp-session-id"),
        HeaderName::from_static("mcp-protocol-version"),
        HeaderName::from_static("mcp-method"),
        HeaderName::from_static("mcp-name"),
    ];
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([Method::GET, Method::POST, Method::PUT, Method::DELETE])
            .allow_headers(headers)
            .expose_headers([header::ETAG, HeaderName::from_static("mcp-session-id")])
            .max_age(std::time::Duration::from_secs(600)),
    )
}

#[cfg(test)]
mod tests;
