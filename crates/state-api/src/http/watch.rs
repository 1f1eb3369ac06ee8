//! A watch through a `state-http` server: `GET /v1/watch` as server-sent events, one
//! [`WatchSource`] of the resuming watcher. A broken stream is reopened with `Last-Event-ID`
//! set to the last revision delivered, so changes are neither missed nor repeated across a
//! server restart.

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

use super::{HttpRemote, problem_to_error};
use crate::reply::{ApiError, ErrorCode};
use crate::resume::{Happening, Resuming, WatchSource};

/// Largest event accepted: a revision's changes with their values, well past the server's
/// largest request body.
const MAX_EVENT_BYTES: usize = 64 << 20;

impl HttpRemote {
    pub(crate) async fn watch(&self, request: WatchRequest) -> Result<Resuming<HttpRemote>, ApiError> {
        Resuming::start(self.clone(), request).await
    }
}

impl WatchSource for HttpRemote {
    type Stream = EventStream;

    async fn open(&self, request: &WatchRequest, resume_after: Option<u64>) -> Result<(EventStream, u64), ApiError> {
        self.open_stream(request, resume_after).await
    }

    async fn next(&self, stream: &mut EventStream, _position: u64) -> Happening {
        let event = match stream.next().await {
            Ok(Some(event)) => event,
            // The server stopped, a proxy timed out.
            Ok(None) | Err(_) => return Happening::Broke,
        };
        match event.kind.as_deref() {
            None | Some("message") => match serde_json::from_str::<WatchBatch>(&event.data) {
                Ok(batch) => Happening::Batch(batch),
                Err(e) => Happening::Ended(Some(malformed(format!("a change it could not read ({e})")))),
            },
            Some("position") => match event.id.and_then(|id| id.parse().ok()) {
                Some(position) => Happening::Position(position),
                None => Happening::Nothing,
            },
            Some("problem") => Happening::Ended(Some(problem_error(&event.data))),
            // Event types added later are for clients that know them.
            Some(_) => Happening::Nothing,
        }
    }
}

impl HttpRemote {
    /// Opens the event stream, after `resume_after` when resuming, retrying an unreachable or
    /// restarting server until the settle timeout. Returns it with the revision it starts
    /// after.
    async fn open_stream(
        &self,
        request: &WatchRequest,
        resume_after: Option<u64>,
    ) -> Result<(EventStream, u64), ApiError> {
        let remote = self;
        let deadline = Instant::now() + remote.settle_timeout;
        let mut backoff = Backoff::new(Duration::from_millis(20), Duration::from_secs(1));
        loop {
            let problem = match self.try_stream(request, resume_after).await {
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

    async fn try_stream(
        &self,
        request: &WatchRequest,
        resume_after: Option<u64>,
    ) -> Result<(EventStream, u64), Attempt> {
        let remote = self;
        let url = format!("{}/v1/watch?{}", remote.base, query(request));
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
            return Err(match super::refusal(status, &body) {
                Ok(error) => Attempt::Refused(error),
                Err(reason) => Attempt::Retry(reason),
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
pub(crate) struct EventStream {
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

fn malformed(what: String) -> ApiError {
    ApiError::new(ErrorCode::Internal, format!("the server's watch stream sent {what}"))
}

#[cfg(test)]
mod tests;
