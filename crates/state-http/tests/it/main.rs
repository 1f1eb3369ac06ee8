//! End-to-end tests of the `state-http` binary, spawned on a free port and driven with a real
//! HTTP client: every route, preconditions, problem documents, the auth matrix, MCP over HTTP,
//! limits, shutdown, and other processes sharing the database.

// A panic is how a test reports failure.
#![allow(clippy::unwrap_used)]

mod audit;
mod auth;
mod browser;
mod conformance;
mod console;
mod disk_full;
mod hostile;
mod in_process;
mod lifecycle;
mod linearizable;
mod mcp;
mod oauth;
mod openapi;
mod postgres_tls;
mod python;
mod quotas;
mod readme;
mod replicas;
mod routes;
mod seam;
mod soak;
mod space;
mod storage;
mod watch;

use std::path::{Path, PathBuf};

use serde_json::Value;
use state_e2e::{HttpResponse, HttpServer};

pub(crate) fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_state-http"))
}

/// `state-mcp`, built beside this binary by a workspace build.
pub(crate) fn state_mcp() -> PathBuf {
    let path = binary().with_file_name("state-mcp");
    assert!(path.exists(), "{} is missing: build the workspace's binaries (cargo build --workspace)", path.display());
    path
}

pub(crate) const TEAM_A: &str = "team-a-secret-0123456789";
pub(crate) const READER: &str = "reader-secret-0123456789";
pub(crate) const ADMIN: &str = "admin-secret-0123456789ab";
pub(crate) const TEAM_B: &str = "team-b-secret-0123456789";

/// A tokens file: `team-a` reads and writes under team-a/ (`team-b` under team-b/), `reader`
/// only reads under team-a/, `admin` does anything anywhere.
pub(crate) const TOKENS: &str = r#"
[[token]]
name = "team-a"
secret = "team-a-secret-0123456789"
prefixes = ["team-a/"]
rights = ["read", "write"]

[[token]]
name = "team-b"
secret = "team-b-secret-0123456789"
prefixes = ["team-b/"]
rights = ["read", "write"]

[[token]]
name = "reader"
secret = "reader-secret-0123456789"
prefixes = ["team-a/"]
rights = ["read"]

[[token]]
name = "admin"
secret = "admin-secret-0123456789ab"
prefixes = [""]
rights = ["admin"]
"#;

/// A database, its owner's socket directory, and a tokens file, in a temporary directory.
pub(crate) struct Place {
    pub(crate) db: PathBuf,
    pub(crate) runtime: PathBuf,
    pub(crate) tokens: PathBuf,
    _dir: tempfile::TempDir,
}

impl Place {
    pub(crate) fn new() -> Place {
        let dir = tempfile::tempdir().unwrap();
        let tokens = dir.path().join("tokens.toml");
        std::fs::write(&tokens, TOKENS).unwrap();
        Place { db: dir.path().join("s.redb"), runtime: dir.path().join("run"), tokens, _dir: dir }
    }

    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        vec![("STATE_RUNTIME_DIR", self.runtime.to_string_lossy().into_owned())]
    }

    /// Starts `state-http --db <db> <extra>`.
    pub(crate) fn serve(&self, extra: &[&str]) -> HttpServer {
        self.serve_with_env(extra, &[])
    }

    /// Starts `state-http --db <db> <extra>` with these variables added to its environment.
    pub(crate) fn serve_with_env(&self, extra: &[&str], more_env: &[(&str, &str)]) -> HttpServer {
        let db = self.db.to_string_lossy().into_owned();
        let mut args = vec!["--db", db.as_str(), "--owner-idle", "2s"];
        args.extend_from_slice(extra);
        let env = self.env();
        let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        env.extend_from_slice(more_env);
        HttpServer::start(binary(), &args, &env).unwrap()
    }

    /// Starts a server that requires the test tokens.
    pub(crate) fn serve_with_auth(&self) -> HttpServer {
        let tokens = self.tokens.to_string_lossy().into_owned();
        self.serve(&["--auth", tokens.as_str()])
    }
}

/// Asserts a status, showing the body when it differs.
pub(crate) fn expect(response: &HttpResponse, status: u16) -> Value {
    assert_eq!(response.status, status, "{}", response.text());
    response.json()
}

/// Asserts a problem document with this status and code.
pub(crate) fn problem(response: &HttpResponse, status: u16, code: &str) -> Value {
    let body = expect(response, status);
    assert_eq!(response.header("content-type"), Some("application/problem+json"), "{}", response.text());
    assert_eq!((body["status"].as_u64(), body["code"].as_str()), (Some(u64::from(status)), Some(code)), "{body}");
    assert!(body["type"].as_str().is_some_and(|t| t.ends_with(code)) && body["detail"].is_string(), "{body}");
    body
}
