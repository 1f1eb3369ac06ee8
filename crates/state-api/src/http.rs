//! A client of a remote `state-http`: the seam's third implementation. Each call is
//! `POST <server>/v1/call/<profile>/<name>` with the arguments as JSON and the answer is a
//! [`Reply`]. A mutating call carries an idempotency key, so a call whose answer was lost (a
//! server restart, a dropped connection) is resent until it settles, and applied once.

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
use crate::settle::{self, Attempt, RequestIds, Transport, Unreached};

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
        settle::settle(self, op, args, request_id, None).await
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
        refusal(status, &bytes).map(Reply::error).map_err(|reason| Failure { sent: true, reason })
    }
}

/// A response that is not a reply, as the error it reports: a problem document from HTTP
/// itself (no token, a body too large, an unknown route) or from something in between (a
/// proxy) answering for the server. The document's `code` decides where it is one of the
/// seam's, else the status. `Err` (saying why) where trying again may get through: a gateway
/// without its server behind it, a server starting up or stopping.
pub(crate) fn refusal(status: hyper::StatusCode, body: &[u8]) -> Result<ApiError, String> {
    let by_status = match status.as_u16() {
        401 | 403 => ErrorCode::Forbidden,
        // The server stopped waiting for its own answer: the call may have been applied.
        408 => ErrorCode::OutcomeUnknown,
        410 => ErrorCode::Compacted,
        413 => ErrorCode::InvalidInput,
        400..=499 => ErrorCode::InvalidArguments,
        _ => ErrorCode::Unavailable,
    };
    let mut error = match serde_json::from_slice::<Value>(body) {
        Ok(problem) if problem.is_object() => {
            let seams_own = problem.get("code").cloned().and_then(|c| serde_json::from_value::<ErrorCode>(c).ok());
            let mut error = problem_to_error(&problem, by_status);
            if seams_own.is_none() {
                error.message = format!("the server answered {status}: {}", error.message);
            }
            error
        }
        _ => ApiError::new(by_status, format!("the server answered {status} without a reply")),
    };
    if status.as_u16() == 408 {
        error.message = format!("{}: the server's request timeout ended it, applied or not", error.message);
    }
    match error.code {
        ErrorCode::Unavailable if error.message.starts_with("the server answered") => Err(error.message),
        ErrorCode::Unavailable => Err(format!("the server answered {status}: {}", error.message)),
        _ => Ok(error),
    }
}

/// A problem document (RFC 9457, with this server's `code` member) as an error; `fallback`
/// when its code is not one of the seam's (`unauthenticated`, `too_large`: from HTTP itself).
pub(crate) fn problem_to_error(problem: &Value, fallback: ErrorCode) -> ApiError {
    let code = problem.get("code").cloned().and_then(|c| serde_json::from_value(c).ok());
    let detail = problem.get("detail").and_then(Value::as_str).unwrap_or("the server reported a problem");
    let number = |name: &str| problem.get(name).and_then(Value::as_u64);
    ApiError {
        argument: problem.get("argument").and_then(Value::as_str).map(str::to_owned),
        compacted_revision: number("compacted_revision"),
        resume_after: number("resume_after"),
        retry_after_ms: number("retry_after_ms"),
        ..ApiError::new(code.unwrap_or(fallback), detail)
    }
}

struct Failure {
    sent: bool,
    reason: String,
}

/// A call to a server: its route, its body and its idempotency key.
pub(crate) struct Encoded {
    url: String,
    body: Bytes,
    request_id: Option<String>,
}

impl Transport for HttpRemote {
    type Encoded = Encoded;
    const FIRST_PAUSE: Duration = Duration::from_millis(20);

    fn request_ids(&self) -> &RequestIds {
        &self.request_ids
    }

    fn settle_timeout(&self) -> Duration {
        self.settle_timeout
    }

    fn encode(
        &self,
        op: Operation,
        args: &Value,
        request_id: Option<&str>,
        _by: Option<&str>,
    ) -> Result<Encoded, ApiError> {
        let body = serde_json::to_vec(args)
            .map_err(|e| ApiError::new(ErrorCode::Internal, format!("cannot encode a call: {e}")))?;
        Ok(Encoded { url: self.call_url(op), body: Bytes::from(body), request_id: request_id.map(str::to_owned) })
    }

    async fn attempt(&self, _op: Operation, call: &Encoded, _deadline: Instant, answer_within: Duration) -> Attempt {
        let answer = tokio::time::timeout(answer_within, self.send(&call.url, &call.body, call.request_id.as_deref()));
        match answer.await {
            Ok(Ok(reply)) => Attempt::Answered(reply),
            Ok(Err(Failure { sent, reason })) => Attempt::Lost { sent, reason },
            Err(_) => Attempt::Unreached {
                sent: true,
                why: Unreached {
                    transient: true,
                    reason: format!("{} has not answered for {answer_within:?}", self.base),
                    lost: "it was sent to the server, which has not answered",
                },
            },
        }
    }

    fn gave_up(&self, reason: String) -> Unreached {
        Unreached {
            transient: true,
            reason: format!("no answer from {} within {:?} ({reason})", self.base, self.settle_timeout),
            lost: "it was sent to the server, whose answer was lost",
        }
    }
}

mod watch;

#[cfg(test)]
mod tests;
