//! The stdio transport: one JSON-RPC message per line, answering what JSON-RPC 2.0 says a
//! server answers. rmcp's own line transport drops a line that is not JSON (no answer at all,
//! so the client waits forever), and routes a standard method whose params do not fit its
//! schema to "method not found". Here a line that does not parse gets -32700, a request of a
//! known method with unfitting params gets -32602, and a message that is not a request,
//! response or notification gets -32600. Writing goes through rmcp's framed writer.

use rmcp::RoleServer;
use rmcp::model::{CallToolRequest, ClientRequest, ErrorCode, ErrorData, JsonRpcMessage, JsonRpcRequest, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader, Empty};

/// The longest line read; longer ones are answered -32600 and skipped (rmcp's bound).
pub(crate) const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// The methods a client may call on a server, by the protocol (both eras). A request of one
/// of them that rmcp could not type had params that do not fit.
const STANDARD_METHODS: [&str; 18] = [
    "initialize",
    "ping",
    "server/discover",
    "completion/complete",
    "logging/setLevel",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "subscriptions/listen",
    "tools/call",
    "tools/list",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
];

pub(crate) struct LineTransport<R, W: AsyncWrite + Send + Unpin + 'static> {
    read: BufReader<R>,
    line: Vec<u8>,
    /// Dropping the rest of a line that was too long.
    discarding: bool,
    write: AsyncRwTransport<RoleServer, Empty, W>,
}

impl<R, W> LineTransport<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    pub(crate) fn new(read: R, write: W) -> Self {
        LineTransport {
            read: BufReader::new(read),
            line: Vec::new(),
            discarding: false,
            write: AsyncRwTransport::new(tokio::io::empty(), write),
        }
    }

    /// The next whole line into `self.line`, never holding more than [`MAX_LINE_BYTES`].
    /// Cancel-safe: `receive` is polled in a `select!`, so a partial line stays in
    /// `self.line` (and a discard in progress in `self.discarding`) for the next call.
    async fn read_line(&mut self) -> std::io::Result<Line> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                return Ok(Line::Eof);
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            let outcome = if self.discarding {
                if newline.is_some() {
                    self.discarding = false;
                }
                None
            } else if self.line.len() + take > MAX_LINE_BYTES {
                self.line.clear();
                self.discarding = newline.is_none();
                Some(Line::TooLong)
            } else {
                self.line.extend_from_slice(&available[..take]);
                newline.map(|_| Line::Whole)
            };
            self.read.consume(take);
            if let Some(outcome) = outcome {
                return Ok(outcome);
            }
        }
    }

    async fn answer(&mut self, id: Option<RequestId>, error: ErrorData) -> bool {
        self.write.send(TxJsonRpcMessage::<RoleServer>::error(error, id)).await.is_ok()
    }
}

enum Line {
    Whole,
    TooLong,
    Eof,
}

/// What one line holds.
enum Parsed {
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Answer this error (to this id, or with a null id when none can be known).
    Refuse(Option<RequestId>, ErrorData),
    /// Nothing to do: blank, or a notification that does not fit (no one to answer).
    Skip,
}

fn parse(line: &[u8]) -> Parsed {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Parsed::Skip;
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(e) => {
            return Parsed::Refuse(None, ErrorData::new(ErrorCode::PARSE_ERROR, format!("Parse error: {e}"), None));
        }
    };
    // An id that is there but neither a string nor an integer rmcp can hold (an object, an
    // array, a fraction, a bool, null, 2^64): the sender waits for an answer it would never get
    // if this were taken for a notification. The answer's id is null, as none can be echoed.
    if let Some(raw) = value.get("id")
        && RequestId::deserialize(raw).is_err()
    {
        let shown: String = raw.to_string().chars().take(40).collect();
        let message = format!("Invalid request: `id` must be a string or an integer from -2^63 to 2^63-1, not {shown}");
        return Parsed::Refuse(None, ErrorData::invalid_request(message, None));
    }
    if let Some(wide) = state_core::numbers::first_wide_integer(line) {
        let id = value.get("id").and_then(|id| RequestId::deserialize(id).ok());
        let message = format!("Invalid params: {}", state_core::numbers::wide_integer_message(&wide));
        return Parsed::Refuse(id, ErrorData::invalid_params(message, None));
    }
    if let Some(call) = tool_call(&value) {
        return Parsed::Message(Box::new(call));
    }
    let id = value.get("id").and_then(|id| RequestId::deserialize(id).ok());
    let method = value.get("method").and_then(Value::as_str).map(str::to_owned);
    match RxJsonRpcMessage::<RoleServer>::deserialize(&value) {
        Ok(RxJsonRpcMessage::<RoleServer>::Request(request)) => {
            if let ClientRequest::CustomRequest(custom) = &request.request
                && STANDARD_METHODS.contains(&custom.method.as_str())
            {
                return Parsed::Refuse(Some(request.id), invalid_params(&custom.method, &value));
            }
            Parsed::Message(Box::new(RxJsonRpcMessage::<RoleServer>::Request(request)))
        }
        Ok(message) => Parsed::Message(Box::new(message)),
        Err(e) => match (id, method) {
            (Some(id), Some(method)) if STANDARD_METHODS.contains(&method.as_str()) => {
                Parsed::Refuse(Some(id), invalid_params(&method, &value))
            }
            (Some(id), _) => Parsed::Refuse(Some(id), invalid_request(&e)),
            // A notification (no id) that does not fit has no one to answer.
            (None, Some(_)) => Parsed::Skip,
            (None, None) => Parsed::Refuse(None, invalid_request(&e)),
        },
    }
}

/// A `tools/call` request (nearly every message of a session), read straight into its type.
/// rmcp reads a request by trying each of its twenty request types in turn, building an error
/// for each one that does not fit, through two layers of buffering: a third of a joined
/// `state_get`'s instructions. Whatever does not fit here takes that general path, and is
/// answered as before.
fn tool_call(message: &Value) -> Option<RxJsonRpcMessage<RoleServer>> {
    let fields = message.as_object()?;
    // The shape rmcp checks first: a request has a method and an id, and no result or error.
    let shaped = fields.contains_key("id") && !fields.contains_key("result") && !fields.contains_key("error");
    if !shaped || fields.get("method")?.as_str()? != "tools/call" {
        return None;
    }
    let JsonRpcRequest { jsonrpc, id, request } = JsonRpcRequest::<CallToolRequest>::deserialize(message).ok()?;
    Some(JsonRpcMessage::Request(JsonRpcRequest { jsonrpc, id, request: ClientRequest::CallToolRequest(request) }))
}

fn invalid_params(method: &str, message: &Value) -> ErrorData {
    let detail = match (method, message.get("params")) {
        ("tools/call", Some(params)) => {
            rmcp::model::CallToolRequestParams::deserialize(params).err().map(|e| format!(": {e}"))
        }
        _ => None,
    };
    ErrorData::invalid_params(
        format!("Invalid params for `{method}`{}", detail.unwrap_or_default()),
        Some(json!({"method": method})),
    )
}

fn invalid_request(error: &serde_json::Error) -> ErrorData {
    ErrorData::invalid_request(format!("Invalid request: not a JSON-RPC 2.0 request or notification ({error})"), None)
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.write.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            match self.read_line().await {
                Ok(Line::Whole) => {}
                Ok(Line::TooLong) => {
                    let message = format!("Invalid request: a line is longer than {MAX_LINE_BYTES} bytes");
                    if !self.answer(None, ErrorData::invalid_request(message, None)).await {
                        return None;
                    }
                    continue;
                }
                Ok(Line::Eof) => return None,
                Err(error) => {
                    tracing::error!(%error, "cannot read stdin");
                    return None;
                }
            }
            let parsed = parse(&self.line);
            self.line.clear();
            match parsed {
                Parsed::Message(message) => return Some(*message),
                Parsed::Skip => {}
                Parsed::Refuse(id, error) => {
                    tracing::debug!(code = error.code.0, message = %error.message, "refused a message");
                    if !self.answer(id, error).await {
                        return None;
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.write.close().await
    }
}

#[cfg(test)]
mod tests;
