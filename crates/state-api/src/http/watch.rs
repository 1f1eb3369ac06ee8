//! A watch through a `state-http` server: `GET /v1/watch` as server-sent events. A broken
//! stream is reopened with `Last-Event-ID` set to the last revision delivered, so changes are
//! neither missed nor repeated across a server restart.

use state_store::backoff::Backoff;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::body::Incoming;
use hyper::header::{ACCEPT, AUTHORIZATION};
use serde_json::Value;
use state_core::ops::watch::{WatchBatch, WatchRequest};
use tokio::time::Instant;

use super::HttpRemote;
use crate::reply::{ApiError, ErrorCode};

/// Largest event accepted: a revision's changes with their values, well past the server's
/// largest request body.
const MAX_EVENT_BYTES: usize = 64 << 20;

/// A watch served by a `state-http`; see the module docs.
pub(crate) struct HttpWatch {
    remote: HttpRemote,
    request: WatchRequest,
    /// The last revision delivered, or the one the watch started after.
    position: u64,
    stream: Option<EventStream>,
    ended: bool,
}

impl HttpRemote {
    pub(crate) async fn watch(&self, request: WatchRequest) -> Result<HttpWatch, ApiError> {
        let mut watch = HttpWatch { remote: self.clone(), request, position: 0, stream: None, ended: false };
        let (stream, position) = watch.open(None).await?;
        watch.stream = Some(stream);
        watch.position = position;
        Ok(watch)
    }
}

impl HttpWatch {
    pub(crate) fn position(&self) -> u64 {
        self.position
    }

    pub(crate) async fn next(&mut self) -> Option<Result<WatchBatch, ApiError>> {
        while !self.ended {
            let stream = match &mut self.stream {
                Some(stream) => stream,
                None => match self.open(Some(self.position)).await {
                    Ok((stream, _)) => self.stream.insert(stream),
                    Err(error) => return self.end(Some(error)),
                },
            };
            let event = match stream.next().await {
                Ok(Some(event)) => event,
                Ok(None) | Err(_) => {
                    // The stream broke off (the server stopped, a proxy timed out): reopen it.
                    self.stream = None;
                    continue;
                }
            };
            match event.kind.as_deref() {
                None | Some("message") => match serde_json::from_str::<WatchBatch>(&event.data) {
                    Ok(batch) => {
                        self.position = batch.revision;
                        return Some(Ok(batch));
                    }
                    Err(e) => return self.end(Some(malformed(format!("a change it could not read ({e})")))),
                },
                Some("position") => {
                    if let Some(position) = event.id.and_then(|id| id.parse().ok()) {
                        self.position = position;
                    }
                }
                Some("problem") => {
                    self.stream = None;
                    match problem_error(&event.data) {
                        // The server is stopping: reopen on the one that follows it.
                        error if error.code == ErrorCode::Unavailable => {}
                        error => return self.end(Some(error)),
                    }
                }
                // Event types added later are for clients that know them.
                Some(_) => {}
            }
        }
        None
    }

    fn end(&mut self, error: Option<ApiError>) -> Option<Result<WatchBatch, ApiError>> {
        self.ended = true;
        self.stream = None;
        error.map(Err)
    }

    /// Opens the event stream, after `resume_after` when resuming, retrying an unreachable or
    /// restarting server until the settle timeout. Returns it with the revision it starts
    /// after.
    async fn open(&self, resume_after: Option<u64>) -> Result<(EventStream, u64), ApiError> {
        let remote = &self.remote;
        let deadline = Instant::now() + remote.settle_timeout;
        let mut backoff = Backoff::new(Duration::from_millis(20), Duration::from_secs(1));
        loop {
            let problem = match self.connect(resume_after).await {
                Ok(opened) => return Ok(opened),
                Err(Attempt::Refused(error)) => return Err(error),
                Err(Attempt::Retry(problem)) => problem,
            };
            tracing::debug!(%problem, "reopening a watch stream");
            if !backoff.pause_before(deadline).await {
                return Err(ApiError::new(
                    ErrorCode::Unavailable,
                    format!(
                        "cannot watch through {}: no stream within {:?} ({problem})",
                        remote.base, remote.settle_timeout
                    ),
                ));
            }
        }
    }

    async fn connect(&self, resume_after: Option<u64>) -> Result<(EventStream, u64), Attempt> {
        let remote = &self.remote;
        let url = format!("{}/v1/watch?{}", remote.base, query(&self.request));
        let mut request = Request::get(url).header(ACCEPT, "text/event-stream");
        if let Some(authorization) = &remote.authorization {
            request = request.header(AUTHORIZATION, authorization.clone());
        }
        if let Some(revision) = resume_after {
            request = request.header("last-event-id", revision.to_string());
        }
        let request = request
            .body(Full::new(Bytes::new()))
            .map_err(|e| Attempt::Refused(malformed(format!("cannot build the request: {e}"))))?;
        let response = remote.client.request(request).await.map_err(|e| Attempt::Retry(e.to_string()))?;
        let status = response.status();
        if !status.is_success() {
            let body = response.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            let fallback = match status.as_u16() {
                401 | 403 => ErrorCode::Forbidden,
                404 => ErrorCode::NotFound,
                410 => ErrorCode::Compacted,
                400..=499 => ErrorCode::InvalidArguments,
                _ => ErrorCode::Unavailable,
            };
            let error = match serde_json::from_slice::<Value>(&body) {
                Ok(problem) => problem_to_error(&problem, fallback),
                Err(_) => ApiError::new(fallback, format!("the server answered {status}")),
            };
            return Err(match error.code {
                ErrorCode::Unavailable => Attempt::Retry(error.message),
                _ => Attempt::Refused(error),
            });
        }
        let mut stream = EventStream { body: response.into_body(), buffer: BytesMut::new() };
        // The server opens every stream with the revision it starts after.
        loop {
            match stream.next().await {
                Ok(Some(Event { kind: Some(kind), id: Some(id), .. })) if kind == "position" => {
                    let position = id.parse().map_err(|_| Attempt::Retry(format!("a position of {id:?}")))?;
                    return Ok((stream, position));
                }
                Ok(Some(Event { kind: Some(kind), data, .. })) if kind == "problem" => {
                    let error = problem_error(&data);
                    return Err(match error.code {
                        ErrorCode::Unavailable => Attempt::Retry(error.message),
                        _ => Attempt::Refused(error),
                    });
                }
                Ok(Some(_)) => {}
                Ok(None) => return Err(Attempt::Retry("the stream ended before it started".into())),
                Err(problem) => return Err(Attempt::Retry(problem)),
            }
        }
    }
}

enum Attempt {
    Retry(String),
    Refused(ApiError),
}

/// One server-sent event.
#[derive(Debug, Default, PartialEq)]
struct Event {
    id: Option<String>,
    kind: Option<String>,
    data: String,
}

/// Reads server-sent events off a response body.
struct EventStream {
    body: Incoming,
    buffer: BytesMut,
}

impl EventStream {
    /// The next event; `None` when the stream ends.
    async fn next(&mut self) -> Result<Option<Event>, String> {
        loop {
            if let Some(event) = parse_event(&mut self.buffer) {
                return Ok(Some(event));
            }
            if self.buffer.len() > MAX_EVENT_BYTES {
                return Err(format!("an event longer than {MAX_EVENT_BYTES} bytes"));
            }
            match self.body.frame().await {
                None => return Ok(None),
                Some(Err(e)) => return Err(format!("the stream broke off: {e}")),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buffer.extend_from_slice(&data);
                    }
                }
            }
        }
    }
}

/// Takes one whole event off the front of `buffer`, skipping comments (keep-alives) and
/// blocks without data or an event name.
fn parse_event(buffer: &mut BytesMut) -> Option<Event> {
    loop {
        let end = find_blank_line(buffer)?;
        let block = buffer.split_to(end.0);
        buffer.advance(end.1);
        let mut event = Event::default();
        let mut data: Vec<&str> = Vec::new();
        let text = String::from_utf8_lossy(&block);
        for line in text.lines() {
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "id" => event.id = Some(value.to_owned()),
                "event" => event.kind = Some(value.to_owned()),
                "data" => data.push(value),
                // "" is a comment; "retry" and unknown fields are ignored.
                _ => {}
            }
        }
        event.data = data.join("\n");
        if !event.data.is_empty() || event.kind.is_some() {
            return Some(event);
        }
    }
}

/// Where the first event in `buffer` ends: (length of its block, length of the blank line).
fn find_blank_line(buffer: &[u8]) -> Option<(usize, usize)> {
    let mut at = 0;
    while at < buffer.len() {
        match buffer[at..] {
            [b'\n', b'\n', ..] => return Some((at, 2)),
            [b'\r', b'\n', b'\r', b'\n', ..] => return Some((at, 4)),
            _ => at += 1,
        }
    }
    None
}

/// The watch as query parameters (values percent-encoded).
fn query(request: &WatchRequest) -> String {
    let mut pairs = Vec::new();
    if let Some(kind) = request.kind.and_then(|k| serde_json::to_value(k).ok()) {
        pairs.push(("kind", kind.as_str().unwrap_or_default().to_owned()));
    }
    if let Some(key) = &request.key {
        pairs.push(("key", key.clone()));
    }
    if let Some(prefix) = &request.prefix {
        pairs.push(("prefix", prefix.clone()));
    }
    if let Some(revision) = request.after_revision {
        pairs.push(("from_revision", revision.to_string()));
    }
    if let Some(include) = request.include_values {
        pairs.push(("include_values", include.to_string()));
    }
    pairs.iter().map(|(name, value)| format!("{name}={}", percent_encode(value))).collect::<Vec<_>>().join("&")
}

fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(char::from(byte)),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// A `problem` event's data (a problem document) as the error it reports.
fn problem_error(data: &str) -> ApiError {
    match serde_json::from_str::<Value>(data) {
        Ok(problem) => problem_to_error(&problem, ErrorCode::Internal),
        Err(_) => malformed(format!("a problem it could not read: {data:?}")),
    }
}

/// A problem document (RFC 9457, with this server's `code` member) as an error; `fallback`
/// when its code is not one of the seam's (`unauthorized`, from HTTP itself).
fn problem_to_error(problem: &Value, fallback: ErrorCode) -> ApiError {
    let code = problem.get("code").cloned().and_then(|c| serde_json::from_value(c).ok());
    let detail = problem.get("detail").and_then(Value::as_str).unwrap_or("the server reported a problem");
    let number = |name: &str| problem.get(name).and_then(Value::as_u64);
    ApiError {
        argument: problem.get("argument").and_then(Value::as_str).map(str::to_owned),
        compacted_revision: number("compacted_revision"),
        resume_after: number("resume_after"),
        ..ApiError::new(code.unwrap_or(fallback), detail)
    }
}

fn malformed(what: String) -> ApiError {
    ApiError::new(ErrorCode::Internal, format!("the server's watch stream sent {what}"))
}

#[cfg(test)]
mod tests;
