//! REST requests as a client may send them: a method and target, header lines, a blank line,
//! a body. Whatever arrives, the server answers with a status that is not a server error (a
//! 5xx here is a bug: the store is in memory and healthy), on a server with tokens and on one
//! without.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use state_api::auth::Tokens;
use state_http::{BrowserPolicy, Config, McpConfig, SessionLimits};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

const TOKENS: &str = r#"
[[token]]
name = "scoped"
secret = "scoped-secret-0123456789"
prefixes = ["a/"]
rights = ["write"]
"#;

fn routers() -> &'static [Router; 2] {
    static ROUTERS: OnceLock<[Router; 2]> = OnceLock::new();
    ROUTERS.get_or_init(|| {
        let api = crate::harness::api().clone();
        let config = |tokens: Option<Arc<Tokens>>| Config {
            tokens,
            oauth: None,
            mcp: McpConfig {
                options: state_api::Options::everything(),
                max_body_bytes: 1024 * 1024,
                sessions: SessionLimits { total: 64, per_token: 8 },
                session_idle: Duration::from_secs(60),
            },
            browser: BrowserPolicy {
                allowed_hosts: vec!["localhost".into(), "127.0.0.1".into()],
                allowed_origins: vec!["https://app.example.com".into()],
                mcp_origins: vec!["http://localhost:*".into()],
            },
            console: true,
            max_body_bytes: 1024 * 1024,
            request_timeout: Duration::from_secs(5),
            keep_alive: Duration::from_secs(15),
            quotas: state_http::QuotaLimits { requests: 64, watches: 8 },
        };
        let tokens = Arc::new(Tokens::parse(TOKENS).unwrap());
        crate::harness::runtime().block_on(async {
            [
                state_http::router(api.clone(), &config(None), CancellationToken::new()),
                state_http::router(api, &config(Some(tokens)), CancellationToken::new()),
            ]
        })
    })
}

/// The request the bytes spell, if they spell one.
fn parse(data: &[u8]) -> Option<(Request<Body>, bool)> {
    let (with_tokens, data) = data.split_first().map(|(b, rest)| (b % 2 == 1, rest))?;
    let text = crate::harness::text(data);
    let (head, body) = text.split_once("\n\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let mut first = lines.next()?.splitn(2, ' ');
    let method = first.next()?;
    let target = first.next().unwrap_or("/");
    let mut request = Request::builder().method(method).uri(target);
    let mut has_host = false;
    for line in lines {
        let (name, value) = line.split_once(':')?;
        has_host |= name.trim().eq_ignore_ascii_case("host");
        request = request.header(name.trim(), value.trim());
    }
    if !has_host {
        request = request.header("host", "127.0.0.1:7478");
    }
    let request = request.body(Body::from(body.to_owned())).ok()?;
    Some((request, with_tokens))
}

pub(crate) fn request(data: &[u8]) {
    let Some((request, with_tokens)) = parse(data) else { return };
    let router = routers()[usize::from(with_tokens)].clone();
    let described = format!("{} {}", request.method(), request.uri());
    // A long poll may wait for its own timeout: only those may go unanswered for a while.
    let may_wait = crate::harness::text(data).contains("watch");
    crate::harness::runtime().block_on(async {
        let answered = tokio::time::timeout(Duration::from_secs(10), async {
            let response = router.oneshot(request).await.unwrap();
            let status = response.status();
            // Event streams (watches) go on for as long as they are read: their head is enough.
            let streaming =
                response.headers().get("content-type").is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"));
            if !streaming {
                let _ = response.into_body().collect().await;
            }
            status
        })
        .await;
        let Ok(status) = answered else {
            assert!(may_wait, "{described} was not answered within 10 s");
            return;
        };
        assert!(!status.is_server_error() || status == StatusCode::SERVICE_UNAVAILABLE, "{described} got {status}");
    });
}
