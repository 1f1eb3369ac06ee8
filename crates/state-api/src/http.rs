//! A client of a remote `state-http`: the seam's third implementation. Each call is
//! `POST <server>/v1/call/<profile>/<name>` with the arguments as JSON and the answer is a
//! [`Reply`]. A mutating call carries an idempotency key, so a call whose answer was lost (a
//! server restart, a dropped connection) is resent until it settles, and applied once.

use state_store::backoff::Backoff;
use std::time::Duration;

use crate::catalog::Operation;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use tokio::time::Instant;

use crate::reply::{ApiError, ErrorCode, Reply};
use crate::settle::{self, RequestIds, Unreached};

/// How to reach a server.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// `http://host:port`, optionally with a path the server is mounted under.
    pub url: String,
    /// A bearer token from the server's tokens file.
    pub token: Option<String>,
    /// How long a call keeps retrying an unreachable server before answering unavailable.
    pub settle_timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    #[error("`{url}` is not a server URL: {reason}")]
    Url { url: String, reason: String },
    #[error("the token cannot be sent in a header: it must be printable ASCII")]
    Token,
    #[error("the server at {url} answered the first call with: {message}")]
    Refused { url: String, message: String, outcome: crate::reply::Outcome },
    #[error("cannot reach a server at {url}: {message}")]
    Unreachable { url: String, message: String },
}

#[derive(Clone)]
pub(crate) struct HttpRemote {
    client: Client<HttpConnector, Full<Bytes>>,
    /// The URL without a trailing `/`.
    base: String,
    authorization: Option<HeaderValue>,
    settle_timeout: Duration,
    request_ids: std::sync::Arc<RequestIds>,
}

impl HttpRemote {
    /// Checks the URL and the token with a first call (`state_health`).
    pub(crate) async fn connect(config: HttpConfig) -> Result<HttpRemote, HttpError> {
        let base = config.url.trim_end_matches('/').to_owned();
        let bad = |reason: &str| HttpError::Url { url: config.url.clone(), reason: reason.into() };
        let uri: hyper::Uri = base.parse().map_err(|_| bad("it does not parse as a URL"))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => {
                return Err(bad("https is not supported by this client yet; reach the server over http on a trusted \
                     network, or through a local TLS-terminating proxy"));
            }
            _ => return Err(bad("it needs a scheme, such as http://127.0.0.1:7478")),
        }
        let authorization = match &config.token {
            Some(token) => Some(HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| HttpError::Token)?),
            None => None,
        };
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(5)));
        let client = Client::builder(TokioExecutor::new()).build(connector);
        let remote = HttpRemote {
            client,
            base,
            authorization,
            settle_timeout: config.settle_timeout,
            request_ids: std::sync::Arc::new(RequestIds::new()),
        };
        // The first contact is not retried: nothing listening there is a wrong address more
        // often than a server restarting, and a person at a prompt should hear so at once.
        let url = remote.call_url(Operation::StateHealth);
        let empty = Bytes::from_static(b"{}");
        let first = tokio::time::timeout(config.settle_timeout, remote.send(&url, &empty, None));
        match first.await {
            Ok(Ok(health)) => {
                if let Err(error) = health.body {
                    return Err(HttpError::Refused {
                        url: config.url,
                        message: error.message,
                        outcome: health.outcome,
                    });
                }
            }
            Ok(Err(Failure { reason, .. })) => {
                return Err(HttpError::Unreachable { url: config.url, message: reason });
            }
            Err(_) => {
                let message = format!("{} has not answered for {:?}", remote.base, config.settle_timeout);
                return Err(HttpError::Unreachable { url: config.url, message });
            }
        }
        Ok(remote)
    }

    pub(crate) async fn call_with_id(&self, op: Operation, args: Value, request_id: Option<String>) -> Reply {
        let request_id = self.request_ids.for_call(op, &args, request_id);
        let url = self.call_url(op);
        let body = match serde_json::to_vec(&args) {
            Ok(body) => Bytes::from(body),
            Err(e) => return Reply::error(ApiError::new(ErrorCode::Internal, format!("cannot encode a call: {e}"))),
        };
        let deadline = Instant::now() + self.settle_timeout;
        // A server that has not answered one request in this long is stuck or unreachable
        // mid-way; the caller hears so instead of waiting forever.
        let answer_within = self.settle_timeout + settle::own_wait(op, &args);
        let mut backoff = Backoff::new(Duration::from_millis(20), Duration::from_secs(1));
        let mut sent = false;
        loop {
            let answer = tokio::time::timeout(answer_within, self.send(&url, &body, request_id.as_deref())).await;
            let problem = match answer {
                Ok(Ok(reply)) => return reply,
                Ok(Err(Failure { sent: went_out, reason })) => {
                    sent |= went_out;
                    reason
                }
                Err(_) => {
                    let why = Unreached {
                        transient: true,
                        reason: format!("{} has not answered for {answer_within:?}", self.base),
                        lost: "it was sent to the server, which has not answered",
                    };
                    return settle::unsettled(op, request_id.as_deref(), true, &why);
                }
            };
            tracing::debug!(op = op.name(), %problem, "retrying a call to the server");
            if !backoff.pause_before(deadline).await {
                let why = Unreached {
                    transient: true,
                    reason: format!("no answer from {} within {:?} ({problem})", self.base, self.settle_timeout),
                    lost: "it was sent to the server, whose answer was lost",
                };
                return settle::unsettled(op, request_id.as_deref(), sent, &why);
            }
        }
    }

    /// The seam route of `op` on this server.
    fn call_url(&self, op: Operation) -> String {
        let spec = op.spec();
        format!("{}/v1/call/{}/{}", self.base, spec.profile.name(), spec.name)
    }

    async fn send(&self, url: &str, body: &Bytes, request_id: Option<&str>) -> Result<Reply, Failure> {
        let mut request = Request::post(url).header(CONTENT_TYPE, "application/json");
        if let Some(authorization) = &self.authorization {
            request = request.header(AUTHORIZATION, authorization.clone());
        }
        if let Some(key) = request_id {
            request = request.header("idempotency-key", key);
        }
        let request = request
            .body(Full::new(body.clone()))
            .map_err(|e| Failure { sent: false, reason: format!("cannot build the request: {e}") })?;
        let response = self.client.request(request).await.map_err(|e| Failure {
            // A refused connection carried nothing; any other failure may have.
            sent: !e.is_connect(),
            reason: e.to_string(),
        })?;
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| Failure { sent: true, reason: format!("the answer broke off: {e}") })?
            .to_bytes();
        if let Ok(reply) = serde_json::from_slice::<Reply>(&bytes) {
            return Ok(reply);
        }
        // Not a reply: a problem document from HTTP itself (no token, a body too large), or
        // something in between (a proxy) answering for the server.
        let problem: Option<Value> = serde_json::from_slice(&bytes).ok();
        let detail = problem.as_ref().and_then(|p| p.get("detail")).and_then(Value::as_str);
        let message = match detail {
            Some(detail) => format!("the server answered {status}: {detail}"),
            None => format!("the server answered {status} without a reply"),
        };
        match status.as_u16() {
            401 | 403 => Ok(Reply::error(ApiError::new(ErrorCode::Forbidden, message))),
            413 => Ok(Reply::error(ApiError::new(ErrorCode::InvalidInput, message))),
            // The server stopped waiting for its own answer: the call may have been applied.
            408 => Ok(Reply::error(ApiError::new(
                ErrorCode::OutcomeUnknown,
                format!("{message}: the server's request timeout ended it, applied or not"),
            ))),
            400..=499 => Ok(Reply::error(ApiError::new(ErrorCode::InvalidArguments, message))),
            // A gateway without its server behind it, or a server starting up: try again.
            _ => Err(Failure { sent: true, reason: message }),
        }
    }
}

struct Failure {
    sent: bool,
    reason: String,
}

mod watch;

pub(crate) use watch::HttpWatch;
