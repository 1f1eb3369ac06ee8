//! End-to-end tests of the `state-mcp` binary, driven over stdio exactly as an MCP client
//! drives it.

// A panic is how a test reports failure.
#![allow(clippy::unwrap_used)]

mod agentcheckpoint;
mod bad_input;
mod caxton;
mod coordination;
mod coordination_shared;
mod crash;
mod hostile;
mod knowledge;
mod kv;
mod memory;
mod protocol;
mod readme;
mod sdk;
mod shared;
mod sidecar;
mod surface;
mod watch;

use std::path::{Path, PathBuf};

use state_e2e::{McpClient, ProtocolEra, Wiring};

pub(crate) fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_state-mcp"))
}

/// How long owners started by tests wait for clients before exiting: short, so no test
/// leaves a process behind for long.
pub(crate) const TEST_OWNER_IDLE: &str = "2s";

/// A temporary directory holding a database and the private directory its owner's socket
/// lives in, so tests never meet each other's (or the user's) owners.
pub(crate) struct Place {
    pub(crate) db: PathBuf,
    pub(crate) runtime: PathBuf,
    _dir: tempfile::TempDir,
}

impl Place {
    pub(crate) fn new() -> Place {
        let dir = tempfile::tempdir().expect("temp dir");
        Place { db: dir.path().join("state.redb"), runtime: dir.path().join("run"), _dir: dir }
    }

    pub(crate) fn db_arg(&self) -> String {
        self.db.to_string_lossy().into_owned()
    }

    /// Starts `state-mcp --db <db> <extra>` without a handshake. It joins the database's
    /// owner, starting one (with the test idle time) if none answers.
    pub(crate) fn spawn(&self, extra: &[&str]) -> McpClient {
        self.spawn_in(extra, None)
    }

    /// [`Place::spawn`] with the server's working directory set to `dir`.
    pub(crate) fn spawn_in(&self, extra: &[&str], dir: Option<&Path>) -> McpClient {
        self.spawn_wired(extra, dir, Wiring::Pipes)
    }

    /// [`Place::spawn_in`] with `wiring` for the server's stdin and stdout.
    pub(crate) fn spawn_wired(&self, extra: &[&str], dir: Option<&Path>, wiring: Wiring) -> McpClient {
        let db = self.db_arg();
        let mut args = vec!["--db", db.as_str()];
        if !extra.contains(&"--owner-idle") {
            args.extend(["--owner-idle", TEST_OWNER_IDLE]);
        }
        args.extend_from_slice(extra);
        let runtime = self.runtime.to_string_lossy().into_owned();
        McpClient::spawn_wired(binary(), &args, &[("STATE_RUNTIME_DIR", runtime.as_str())], dir, wiring)
            .expect("spawn state-mcp")
    }

    /// Starts a client of this database and completes the handshake of `era`.
    pub(crate) fn start(&self, extra: &[&str], era: ProtocolEra) -> McpClient {
        let mut client = self.spawn(extra);
        client.handshake(era).expect("server starts and completes the handshake");
        client
    }
}

/// A server on a fresh database in its own temporary directory.
pub(crate) struct TestServer {
    pub(crate) client: McpClient,
    pub(crate) db: PathBuf,
    /// Keeps the database's directory (and its owner's socket directory) alive.
    _place: Place,
}

/// A stopped clock for a server in this process, at 2026-11-26T12:00:00Z.
pub(crate) fn manual_clock() -> state_api::ManualClock {
    state_api::ManualClock::new(state_core::UnixMillis(1_795_694_400_000))
}

/// The flags `state-mcp` serves by (less `--server` and subcommands).
#[derive(clap::Parser)]
struct Flags {
    #[command(flatten)]
    store: state_boot::StoreArgs,
    #[command(flatten)]
    tools: state_boot::ToolArgs,
}

impl TestServer {
    /// A server as `state-mcp --standalone <extra>` serves one, run in this process on one end
    /// of a socket pair: the same `state_mcp::serve` over the same flags, no process spawned.
    /// Tests of what a tool answers use it; tests of processes (owners, crashes, signals,
    /// stderr) spawn the binary.
    pub(crate) fn in_process(extra: &[&str]) -> TestServer {
        TestServer::in_process_with_clock(extra, std::sync::Arc::new(state_api::SystemClock))
    }

    /// [`TestServer::in_process`] keeping time by `clock`: a test moves a `ManualClock` past an
    /// expiry instead of waiting for it.
    pub(crate) fn in_process_with_clock(extra: &[&str], clock: std::sync::Arc<dyn state_api::Clock>) -> TestServer {
        use clap::Parser;
        let place = Place::new();
        let db = place.db_arg();
        let mut args = vec!["state-mcp", "--db", db.as_str()];
        args.extend_from_slice(extra);
        let flags = Flags::try_parse_from(args).expect("flags");
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().expect("socket pair");
        theirs.set_nonblocking(true).expect("non-blocking");
        let db = place.db.clone();
        let serving = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            runtime.block_on(async move {
                let settings = flags.store.engine.settings();
                let local = state_api::Local::open_standalone_with_clock(&db, settings, clock).expect("the store");
                let api = state_api::Api::local(local);
                let (reader, writer) = tokio::net::UnixStream::from_std(theirs).expect("socket").into_split();
                let server = state_mcp::StateServer::new(api.clone(), flags.tools.options());
                let _ = state_mcp::serve(server, reader, writer).await;
                api.close().await;
            });
        });
        let mut client = McpClient::in_process(ours, serving).expect("client");
        client.handshake(ProtocolEra::Legacy).expect("handshake");
        TestServer { client, db: place.db.clone(), _place: place }
    }

    pub(crate) fn start(extra: &[&str]) -> TestServer {
        TestServer::start_era(extra, ProtocolEra::Legacy)
    }

    pub(crate) fn start_era(extra: &[&str], era: ProtocolEra) -> TestServer {
        let place = Place::new();
        let client = place.start(extra, era);
        TestServer { client, db: place.db.clone(), _place: place }
    }
}
