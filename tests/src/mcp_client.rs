use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};

/// How long any single response may take before the harness gives up. Generous: CI machines
/// are shared; a healthy server answers in microseconds.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// Which generation of the MCP protocol the client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolEra {
    /// 2025-11-25: `initialize` handshake, then requests.
    Legacy,
    /// 2026-07-28: no handshake; every request carries version and capabilities in `_meta`.
    Modern,
}

/// What a spawned server's stdin and stdout are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wiring {
    /// Pipes, as Python's and Rust's process APIs make.
    Pipes,
    /// A Unix socket pair each, as Node's (libuv) makes: the TypeScript SDK and the clients
    /// built on it.
    Sockets,
}

/// A tool result as a client sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub is_error: bool,
    /// `structuredContent`, when the tool returns one.
    pub structured: Option<Value>,
    /// The first text content block.
    pub text: String,
}

impl ToolResult {
    /// The structured result, or the text parsed as JSON for tools that only return text.
    pub fn json(&self) -> Value {
        self.structured.clone().unwrap_or_else(|| serde_json::from_str(&self.text).unwrap_or(Value::Null))
    }
}

pub struct McpClient {
    server: Server,
    stdin: Option<Box<dyn Write + Send>>,
    /// Read on the caller's thread: a reader thread would add a wake-up to every round trip.
    stdout: BufReader<Box<dyn Read + Send>>,
    line: String,
    watchdog: Arc<Watchdog>,
    /// Responses read while waiting for another id (pipelined requests answer out of order).
    stash: VecDeque<Value>,
    /// Notifications read while waiting for a response, for [`McpClient::wait_notification`].
    notifications: VecDeque<Value>,
    stderr: Arc<Mutex<String>>,
    /// Ends when the server's stderr reaches EOF; joined after exit so `stderr()` is complete.
    stderr_reader: Option<thread::JoinHandle<()>>,
    next_id: u64,
    era: ProtocolEra,
}

/// What serves the client: a spawned process, or a server in this process on a socket.
enum Server {
    Process(Child),
    InProcess { socket: UnixStream, serving: Option<thread::JoinHandle<()>> },
}

impl McpClient {
    /// A client of a server running in this process, on the other end of `socket`, which
    /// `serving` serves until the socket closes. Does not perform any handshake.
    pub fn in_process(socket: UnixStream, serving: thread::JoinHandle<()>) -> Result<McpClient> {
        let reader: Box<dyn Read + Send> = Box::new(socket.try_clone()?);
        let writer: Box<dyn Write + Send> = Box::new(socket.try_clone()?);
        let cut = socket.try_clone()?;
        let watchdog = Watchdog::start(Box::new(move || {
            let _ = cut.shutdown(std::net::Shutdown::Both);
        }));
        Ok(McpClient {
            server: Server::InProcess { socket, serving: Some(serving) },
            stdin: Some(writer),
            stdout: BufReader::new(reader),
            line: String::new(),
            watchdog,
            stash: VecDeque::new(),
            notifications: VecDeque::new(),
            stderr: Arc::new(Mutex::new(String::new())),
            stderr_reader: None,
            next_id: 1,
            era: ProtocolEra::Legacy,
        })
    }

    /// Starts `program args...` with piped stdio. Does not perform any handshake.
    pub fn spawn(program: &Path, args: &[&str]) -> Result<McpClient> {
        McpClient::spawn_with_env(program, args, &[])
    }

    pub fn spawn_with_env(program: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<McpClient> {
        McpClient::spawn_in(program, args, env, None)
    }

    /// [`McpClient::spawn_with_env`] with the server's working directory set to `dir`.
    pub fn spawn_in(program: &Path, args: &[&str], env: &[(&str, &str)], dir: Option<&Path>) -> Result<McpClient> {
        McpClient::spawn_wired(program, args, env, dir, Wiring::Pipes)
    }

    /// Starts `program args...` with `wiring` for its stdin and stdout. Does not perform any
    /// handshake.
    pub fn spawn_wired(
        program: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        dir: Option<&Path>,
        wiring: Wiring,
    ) -> Result<McpClient> {
        let mut command = Command::new(program);
        command.args(args).stderr(Stdio::piped());
        // The client's ends of the socket pairs, when the server gets sockets.
        let mut ours = None;
        match wiring {
            Wiring::Pipes => {
                command.stdin(Stdio::piped()).stdout(Stdio::piped());
            }
            Wiring::Sockets => {
                let (write, their_stdin) = UnixStream::pair()?;
                let (read, their_stdout) = UnixStream::pair()?;
                command.stdin(std::os::fd::OwnedFd::from(their_stdin)).stdout(std::os::fd::OwnedFd::from(their_stdout));
                ours = Some((write, read));
            }
        }
        if let Some(dir) = dir {
            command.current_dir(dir);
        }
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command.spawn().with_context(|| format!("cannot start {}", program.display()))?;
        // Dropped here, the server's ends of the socket pairs live on in the child alone.
        drop(command);
        let (stdin, stdout): (Box<dyn Write + Send>, Box<dyn Read + Send>) = match ours {
            Some((write, read)) => (Box::new(write), Box::new(read)),
            None => (
                Box::new(child.stdin.take().context("child stdin")?),
                Box::new(child.stdout.take().context("child stdout")?),
            ),
        };
        let stderr = child.stderr.take().context("child stderr")?;
        let pid = child.id().to_string();
        let watchdog = Watchdog::start(Box::new(move || {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
        }));
        let captured = Arc::new(Mutex::new(String::new()));
        let sink = captured.clone();
        let stderr_reader = thread::spawn(move || {
            let mut buf = [0u8; 4096];
            let mut stderr = stderr;
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut text) = sink.lock() {
                    text.push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            }
        });
        Ok(McpClient {
            stdin: Some(stdin),
            server: Server::Process(child),
            stdout: BufReader::new(stdout),
            line: String::new(),
            watchdog,
            stash: VecDeque::new(),
            notifications: VecDeque::new(),
            stderr: captured,
            stderr_reader: Some(stderr_reader),
            next_id: 1,
            era: ProtocolEra::Legacy,
        })
    }

    /// Starts the server and completes the handshake of `era`.
    pub fn start(program: &Path, args: &[&str], era: ProtocolEra) -> Result<McpClient> {
        let mut client = McpClient::spawn(program, args)?;
        client.handshake(era)?;
        Ok(client)
    }

    pub fn handshake(&mut self, era: ProtocolEra) -> Result<Value> {
        self.era = era;
        match era {
            ProtocolEra::Legacy => {
                let init = self.request(
                    "initialize",
                    json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "state-e2e", "version": "1"}}),
                )?;
                self.notify("notifications/initialized", json!({}))?;
                result_of(init)
            }
            ProtocolEra::Modern => result_of(self.request("server/discover", json!({}))?),
        }
    }

    /// The server's process id.
    ///
    /// # Panics
    /// For a server in this process, which has none of its own.
    pub fn pid(&self) -> u32 {
        match &self.server {
            Server::Process(child) => child.id(),
            Server::InProcess { .. } => panic!("a server in this process has no pid of its own"),
        }
    }

    /// After the process exits: waits until everything it wrote to stderr has been read.
    fn drain_stderr(&mut self) {
        if let Some(reader) = self.stderr_reader.take() {
            let _ = reader.join();
        }
    }

    /// Everything the server wrote to stderr so far (all of it, once the process has exited).
    pub fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn with_meta(&self, mut params: Value) -> Value {
        if self.era == ProtocolEra::Modern
            && let Some(object) = params.as_object_mut()
        {
            object.insert(
                "_meta".into(),
                json!({
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "state-e2e", "version": "1"},
                }),
            );
        }
        params
    }

    /// Writes one raw line (anything, even invalid JSON) to the server's stdin.
    pub fn send_raw(&mut self, line: &str) -> Result<()> {
        let stdin = self.stdin.as_mut().context("stdin already closed")?;
        stdin.write_all(line.as_bytes())?;
        stdin.write_all(b"\n")?;
        stdin.flush()?;
        Ok(())
    }

    pub fn notify(&mut self, method: &str, params: Value) -> Result<()> {
        let params = self.with_meta(params);
        self.send_raw(&json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string())
    }

    /// Sends a request without waiting; returns its id.
    pub fn send_request(&mut self, method: &str, params: Value) -> Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        let params = self.with_meta(params);
        self.send_raw(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string())?;
        Ok(id)
    }

    /// Waits for the response with `id`, keeping others for later.
    pub fn wait_response(&mut self, id: u64) -> Result<Value> {
        if let Some(pos) = self.stash.iter().position(|m| m["id"] == json!(id)) {
            return self.stash.remove(pos).context("stashed response");
        }
        loop {
            let message = self.next_message(RESPONSE_TIMEOUT)?;
            if message["id"] == json!(id) {
                return Ok(message);
            }
            self.keep(message);
        }
    }

    /// Keeps a message nobody is waiting for yet: a response for `wait_response`, a
    /// notification for `wait_notification`.
    fn keep(&mut self, message: Value) {
        if message.get("id").is_some() {
            self.stash.push_back(message);
        } else {
            self.notifications.push_back(message);
        }
    }

    /// Waits for a notification with this method, keeping other messages for later.
    pub fn wait_notification(&mut self, method: &str, timeout: Duration) -> Result<Value> {
        if let Some(pos) = self.notifications.iter().position(|m| m["method"] == method) {
            return self.notifications.remove(pos).context("kept notification");
        }
        loop {
            let message = self.next_message(timeout)?;
            if message.get("id").is_none() && message["method"] == method {
                return Ok(message);
            }
            self.keep(message);
        }
    }

    /// Waits for any response (not a notification); for pipelined clients.
    pub fn next_response(&mut self, timeout: Duration) -> Result<Value> {
        if let Some(message) = self.stash.pop_front() {
            return Ok(message);
        }
        loop {
            let message = self.next_message(timeout)?;
            if message.get("id").is_some() {
                return Ok(message);
            }
            self.notifications.push_back(message);
        }
    }

    /// The next message of any kind, including error responses that carry no id.
    pub fn next_message(&mut self, timeout: Duration) -> Result<Value> {
        self.line.clear();
        self.watchdog.arm(timeout);
        let read = self.stdout.read_line(&mut self.line);
        self.watchdog.disarm();
        if self.watchdog.fired() {
            bail!("no response within {timeout:?}; the server was killed. stderr:\n{}", self.stderr());
        }
        match read {
            Ok(0) => bail!("server closed stdout; stderr:\n{}", self.stderr()),
            Ok(_) => serde_json::from_str(self.line.trim_end())
                .map_err(|e| anyhow!("server wrote a non-JSON line to stdout ({e}): {:?}", self.line)),
            Err(e) => bail!("reading server stdout failed: {e}; stderr:\n{}", self.stderr()),
        }
    }

    /// Sends a request and returns the whole JSON-RPC response (result or error).
    pub fn request(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.send_request(method, params)?;
        self.wait_response(id)
    }

    /// Calls a tool and returns its result; a JSON-RPC error is an `Err`.
    pub fn call(&mut self, tool: &str, arguments: Value) -> Result<ToolResult> {
        let response = self.request("tools/call", json!({"name": tool, "arguments": arguments}))?;
        tool_result(result_of(response)?)
    }

    /// Closes stdin (the client going away) and waits for the server to exit.
    pub fn shutdown(&mut self) -> Result<ExitStatus> {
        drop(self.stdin.take());
        if let Server::InProcess { socket, .. } = &self.server {
            socket.shutdown(std::net::Shutdown::Write)?;
        }
        self.wait_exit(RESPONSE_TIMEOUT)
            .with_context(|| format!("server did not exit after stdin closed; stderr:\n{}", self.stderr()))
    }

    /// SIGKILL: the process gets no chance to clean up.
    pub fn kill(mut self) -> Result<()> {
        match &mut self.server {
            Server::Process(child) => {
                child.kill()?;
                child.wait()?;
            }
            Server::InProcess { socket, .. } => socket.shutdown(std::net::Shutdown::Both)?,
        }
        Ok(())
    }

    /// Waits for the process to exit on its own (for servers expected to refuse to start).
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<ExitStatus> {
        let server = &mut self.server;
        let exited = crate::wait::within(timeout, || -> Option<Result<ExitStatus>> {
            let clean = || std::os::unix::process::ExitStatusExt::from_raw(0);
            match server {
                Server::Process(child) => child.try_wait().map_err(Into::into).transpose(),
                Server::InProcess { serving, .. } => match serving.take_if(|s| s.is_finished()) {
                    Some(serving) => Some(
                        serving.join().map(|()| clean()).map_err(|_| anyhow!("the server in this process panicked")),
                    ),
                    None if serving.is_none() => Some(Ok(clean())),
                    None => None,
                },
            }
        });
        let Some(status) = exited else { bail!("process still running after {timeout:?}") };
        let status = status?;
        self.drain_stderr();
        Ok(status)
    }
}

/// Kills a server that does not answer in time, so a blocked read on its stdout ends (EOF)
/// instead of hanging the test forever. Checks a few times a second; costs nothing per call.
struct Watchdog {
    /// Milliseconds since the epoch after which the pending read has waited too long; 0 = idle.
    deadline: AtomicU64,
    fired: AtomicBool,
    done: AtomicBool,
}

impl Watchdog {
    /// Watches reads; `cut` ends a pending one (kills the process, or closes the socket).
    fn start(cut: Box<dyn Fn() + Send>) -> Arc<Watchdog> {
        let dog = Arc::new(Watchdog {
            deadline: AtomicU64::new(0),
            fired: AtomicBool::new(false),
            done: AtomicBool::new(false),
        });
        let watcher = dog.clone();
        thread::spawn(move || {
            while !watcher.done.load(Ordering::Relaxed) {
                // A timer by nature: it looks at the pending read's deadline a few times a second.
                thread::sleep(Duration::from_millis(100));
                let deadline = watcher.deadline.load(Ordering::Relaxed);
                if deadline != 0 && epoch_millis() > deadline {
                    watcher.fired.store(true, Ordering::Relaxed);
                    cut();
                    return;
                }
            }
        });
        dog
    }

    fn arm(&self, timeout: Duration) {
        self.deadline.store(epoch_millis() + timeout.as_millis() as u64, Ordering::Relaxed);
    }

    fn disarm(&self) {
        self.deadline.store(0, Ordering::Relaxed);
    }

    fn fired(&self) -> bool {
        self.fired.load(Ordering::Relaxed)
    }
}

fn epoch_millis() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl Drop for McpClient {
    fn drop(&mut self) {
        self.watchdog.done.store(true, Ordering::Relaxed);
        match &mut self.server {
            Server::Process(child) => {
                if matches!(child.try_wait(), Ok(None)) {
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
            Server::InProcess { socket, serving } => {
                let _ = socket.shutdown(std::net::Shutdown::Both);
                if let Some(serving) = serving.take() {
                    let _ = serving.join();
                }
            }
        }
    }
}

/// The `result` of a JSON-RPC response, or its error as an `Err`.
pub fn result_of(response: Value) -> Result<Value> {
    if let Some(error) = response.get("error") {
        bail!("JSON-RPC error: {error}");
    }
    response.get("result").cloned().context("response has neither result nor error")
}

pub fn tool_result(result: Value) -> Result<ToolResult> {
    Ok(ToolResult {
        is_error: result["isError"].as_bool().unwrap_or(false),
        structured: result.get("structuredContent").cloned(),
        text: result["content"][0]["text"].as_str().context("tool result has no text content")?.to_owned(),
    })
}
