//! A spawned `state-http` and a plain HTTP/1.1 client for it: the bytes curl would send, over
//! a fresh connection per request, so tests see exactly what a client sees.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::Value;

const TIMEOUT: Duration = Duration::from_secs(30);

/// A `state-http` process, started on a free loopback port.
pub struct HttpServer {
    child: Child,
    pub addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
}

impl HttpServer {
    /// Starts `program args...` with `--listen 127.0.0.1:0` (unless `args` name a listen
    /// address) and waits for the line that says where it listens.
    pub fn start(program: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<HttpServer> {
        let mut command = Command::new(program);
        if !args.contains(&"--listen") {
            command.args(["--listen", "127.0.0.1:0"]);
        }
        command.args(args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command.spawn().with_context(|| format!("cannot start {}", program.display()))?;
        let stderr = child.stderr.take().context("stderr")?;
        let captured = Arc::new(Mutex::new(String::new()));
        let (found, address) = mpsc::channel();
        let sink = captured.clone();
        thread::spawn(move || {
            let mut found = Some(found);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("listening on http://").nth(1)
                    && let Some(tx) = found.take()
                {
                    let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_owned());
                }
                if let Ok(mut text) = sink.lock() {
                    text.push_str(&line);
                    text.push('\n');
                }
            }
        });
        match address.recv_timeout(TIMEOUT) {
            Ok(address) => {
                let addr = address.parse().with_context(|| format!("listen address {address:?}"))?;
                Ok(HttpServer { child, addr, stderr: captured })
            }
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                let stderr = captured.lock().map(|s| s.clone()).unwrap_or_default();
                bail!("state-http did not start listening; stderr:\n{stderr}")
            }
        }
    }

    pub fn client(&self) -> HttpClient {
        HttpClient { addr: self.addr, headers: Vec::new() }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// SIGKILL: the process dies at once, mid-request, as in a crash.
    pub fn kill(&mut self) -> Result<ExitStatus> {
        self.child.kill()?;
        Ok(self.child.wait()?)
    }

    /// SIGTERM, then waits (bounded) for the process to exit.
    pub fn terminate(&mut self) -> Result<ExitStatus> {
        let status = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status()?;
        anyhow::ensure!(status.success(), "kill -TERM failed");
        match crate::wait::within(TIMEOUT, || self.child.try_wait().transpose()) {
            Some(status) => Ok(status?),
            None => bail!("state-http did not stop after SIGTERM; stderr:\n{}", self.stderr()),
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs a program expected to refuse to start; returns its exit status and stderr.
pub fn run_to_exit(program: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<(ExitStatus, String)> {
    let mut command = Command::new(program);
    command.args(args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn()?;
    let Some(status) = crate::wait::within(TIMEOUT, || child.try_wait().transpose()) else {
        let _ = child.kill();
        bail!("{} kept running; it was expected to exit", program.display());
    };
    let status = status?;
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        pipe.read_to_string(&mut stderr)?;
    }
    Ok((status, stderr))
}

/// One HTTP exchange's answer.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON (`Null` if it is not).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The JSON of each `data:` line of a server-sent-events body.
    pub fn events(&self) -> Vec<Value> {
        self.text()
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str(data.trim()).ok())
            .collect()
    }
}

/// A client of one server; headers given here go with every request.
#[derive(Debug, Clone)]
pub struct HttpClient {
    addr: SocketAddr,
    headers: Vec<(String, String)>,
}

impl HttpClient {
    pub fn new(addr: SocketAddr) -> HttpClient {
        HttpClient { addr, headers: Vec::new() }
    }

    /// A client that sends `Authorization: Bearer <token>`.
    pub fn with_token(&self, token: &str) -> HttpClient {
        self.with_header("Authorization", &format!("Bearer {token}"))
    }

    pub fn with_header(&self, name: &str, value: &str) -> HttpClient {
        let mut client = self.clone();
        client.headers.push((name.to_owned(), value.to_owned()));
        client
    }

    pub fn get(&self, path: &str) -> Result<HttpResponse> {
        self.request("GET", path, &[], None)
    }

    pub fn json(&self, method: &str, path: &str, body: &Value) -> Result<HttpResponse> {
        self.request(method, path, &[("Content-Type", "application/json")], Some(body.to_string().as_bytes()))
    }

    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Result<HttpResponse> {
        let mut stream = TcpStream::connect_timeout(&self.addr, TIMEOUT)?;
        stream.set_read_timeout(Some(TIMEOUT))?;
        stream.set_write_timeout(Some(TIMEOUT))?;
        let body = body.unwrap_or_default();
        let head = self.head(method, path, &[&[("Connection", "close")], headers].concat(), Some(body.len()));
        stream.write_all(head.as_bytes())?;
        stream.write_all(body)?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).context("reading the response")?;
        parse(&raw)
    }
}

impl HttpClient {
    /// A request's head: this client's headers, then `headers`, a Host unless given, and the
    /// body's length when there is one.
    fn head(&self, method: &str, path: &str, headers: &[(&str, &str)], body_len: Option<usize>) -> String {
        let mut head = format!("{method} {path} HTTP/1.1\r\n");
        let all: Vec<(&str, &str)> =
            self.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).chain(headers.iter().copied()).collect();
        if !all.iter().any(|(name, _)| name.eq_ignore_ascii_case("host")) {
            head.push_str(&format!("Host: {}\r\n", self.addr));
        }
        for (name, value) in &all {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if let Some(length) = body_len {
            // Bodies are JSON here, as the server requires, unless a test says otherwise.
            if length > 0 && !all.iter().any(|(name, _)| name.eq_ignore_ascii_case("content-type")) {
                head.push_str("Content-Type: application/json\r\n");
            }
            head.push_str(&format!("Content-Length: {length}\r\n"));
        }
        head.push_str("\r\n");
        head
    }
}

fn parse(raw: &[u8]) -> Result<HttpResponse> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").context("no end of headers in the response")?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.split("\r\n");
    let status_line = lines.next().context("empty response")?;
    let status: u16 = status_line.split_whitespace().nth(1).context("status line")?.parse()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    let chunked =
        headers.iter().any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked"));
    if chunked {
        body = dechunk(&body)?;
    }
    Ok(HttpResponse { status, headers, body })
}

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let Some(line_end) = data.windows(2).position(|w| w == b"\r\n") else { return Ok(out) };
        let size_text = String::from_utf8_lossy(&data[..line_end]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .with_context(|| format!("bad chunk size {size_text:?}"))?;
        data = &data[line_end + 2..];
        if size == 0 || data.len() < size {
            out.extend_from_slice(&data[..size.min(data.len())]);
            return Ok(out);
        }
        out.extend_from_slice(&data[..size]);
        data = data.get(size + 2..).unwrap_or_default();
    }
}

/// One server-sent event; a comment (a keep-alive) has only `comment`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SseEvent {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
    pub comment: Option<String>,
}

impl SseEvent {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or(Value::Null)
    }
}

/// An open `text/event-stream` response, read event by event as the server sends them.
pub struct SseStream {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    reader: BufReader<TcpStream>,
    /// Bytes of the body read so far but not yet made into events.
    pending: Vec<u8>,
    chunked: bool,
    ended: bool,
}

impl HttpClient {
    /// Opens a GET whose answer is an event stream. A non-200 answer comes back as an error
    /// holding its body.
    pub fn stream(&self, path: &str, headers: &[(&str, &str)]) -> Result<SseStream> {
        self.stream_request("GET", path, headers, None)
    }

    /// Sends a request whose answer is an event stream (an MCP POST answered with SSE, say).
    pub fn stream_request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Result<SseStream> {
        let mut stream = TcpStream::connect_timeout(&self.addr, TIMEOUT)?;
        stream.set_read_timeout(Some(TIMEOUT))?;
        let mut headers = headers.to_vec();
        if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("accept")) {
            headers.push(("Accept", "text/event-stream"));
        }
        stream.write_all(self.head(method, path, &headers, body.map(<[u8]>::len)).as_bytes())?;
        if let Some(body) = body {
            stream.write_all(body)?;
        }
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let status: u16 = line.split_whitespace().nth(1).context("status line")?.parse()?;
        let mut headers = Vec::new();
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            let trimmed = line.trim_end();
            if trimmed.is_empty() {
                break;
            }
            if let Some((k, v)) = trimmed.split_once(':') {
                headers.push((k.trim().to_owned(), v.trim().to_owned()));
            }
        }
        let chunked = headers
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked"));
        let mut sse = SseStream { status, headers, reader, pending: Vec::new(), chunked, ended: false };
        if status != 200 {
            // The connection stays open after a sized body: read just that much.
            let length = sse.header("content-length").and_then(|n| n.parse::<usize>().ok());
            let body = match length {
                Some(length) => {
                    let mut body = vec![0u8; length];
                    sse.reader.read_exact(&mut body)?;
                    body
                }
                None => {
                    while sse.read_more()? {}
                    std::mem::take(&mut sse.pending)
                }
            };
            bail!("{status} {}", String::from_utf8_lossy(&body));
        }
        Ok(sse)
    }
}

impl SseStream {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Gives up waiting for an event after `timeout` (an error from [`SseStream::next_event`]).
    pub fn set_timeout(&mut self, timeout: Duration) -> Result<()> {
        self.reader.get_ref().set_read_timeout(Some(timeout))?;
        Ok(())
    }

    /// The next event or comment; `None` when the server ended the stream.
    pub fn next_event(&mut self) -> Result<Option<SseEvent>> {
        loop {
            if let Some(end) = self.pending.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.pending.drain(..end + 2).collect();
                let mut event = SseEvent::default();
                let mut data = Vec::new();
                for line in String::from_utf8_lossy(&block).lines().filter(|line| !line.is_empty()) {
                    let (field, value) = line.split_once(':').unwrap_or((line, ""));
                    let value = value.strip_prefix(' ').unwrap_or(value).to_owned();
                    match field {
                        "" => event.comment = Some(value),
                        "id" => event.id = Some(value),
                        "event" => event.event = Some(value),
                        "data" => data.push(value),
                        _ => {}
                    }
                }
                event.data = data.join("\n");
                if event.comment.is_some() || !event.data.is_empty() || event.event.is_some() {
                    return Ok(Some(event));
                }
                continue;
            }
            if !self.read_more()? {
                return Ok(None);
            }
        }
    }

    /// Reads the next piece of the body into `pending`; false at its end.
    fn read_more(&mut self) -> Result<bool> {
        if self.ended {
            return Ok(false);
        }
        if !self.chunked {
            let mut buffer = [0u8; 8192];
            let n = self.reader.read(&mut buffer)?;
            self.pending.extend_from_slice(&buffer[..n]);
            self.ended = n == 0;
            return Ok(n > 0);
        }
        let mut size = String::new();
        if self.reader.read_line(&mut size)? == 0 {
            self.ended = true;
            return Ok(false);
        }
        let size = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
            .with_context(|| format!("bad chunk size {size:?}"))?;
        if size == 0 {
            self.ended = true;
            return Ok(false);
        }
        let mut chunk = vec![0u8; size + 2];
        self.reader.read_exact(&mut chunk)?;
        self.pending.extend_from_slice(&chunk[..size]);
        Ok(true)
    }
}
