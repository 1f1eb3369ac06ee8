//! End-to-end tests of the `state-mcp` binary, driven over stdio exactly as an MCP client
//! drives it.

// A panic is how a test reports failure.
#![allow(clippy::unwrap_used)]

mod agentcheckpoint;
mod bad_input;
mod caxton;
mod coordination;
mod crash;
mod exclusive;
mod kv;
mod protocol;
mod sidecar;

use std::path::{Path, PathBuf};

use state_e2e::{McpClient, ProtocolEra};

pub(crate) fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_state-mcp"))
}

/// A server on a fresh database in its own temporary directory.
pub(crate) struct TestServer {
    pub(crate) client: McpClient,
    pub(crate) db: PathBuf,
    _dir: tempfile::TempDir,
}

impl TestServer {
    pub(crate) fn start(extra: &[&str]) -> TestServer {
        TestServer::start_era(extra, ProtocolEra::Legacy)
    }

    pub(crate) fn start_era(extra: &[&str], era: ProtocolEra) -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("state.redb");
        let db_arg = db.to_string_lossy().into_owned();
        let mut args = vec!["--db", db_arg.as_str()];
        args.extend_from_slice(extra);
        let client = McpClient::start(binary(), &args, era).expect("server starts and completes the handshake");
        TestServer { client, db, _dir: dir }
    }
}
