//! `state-http`'s own flags (the shared ones, `--db` and `--tools` among them, are
//! `state_boot`'s), and what they make: the application's [`Config`] and the listener's
//! [`Limits`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use state_api::auth::Tokens;
use state_boot::ToolArgs;
use state_boot::flags::parse_duration;

use crate::{BrowserPolicy, Config, DEFAULT_LISTEN, Limits, McpConfig, QuotaLimits, ResourceServer, SessionLimits};

/// How the server listens and what it allows.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on; a non-loopback one needs --auth or --oauth (or --insecure)
    #[arg(long, env = "STATE_HTTP_LISTEN", value_name = "ADDR", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,

    /// Bearer tokens, their key prefixes and rights (TOML; see docs/http.md for the format)
    #[arg(long, env = "STATE_HTTP_AUTH", value_name = "FILE")]
    pub auth: Option<PathBuf>,

    /// Take the access tokens of an OAuth 2.1 issuer (your identity provider): its address, this
    /// server as a resource, and grants from claims to prefixes and rights (TOML; see
    /// docs/oauth.md). Works beside --auth
    #[arg(long, env = "STATE_HTTP_OAUTH", value_name = "FILE")]
    pub oauth: Option<PathBuf>,

    /// Serve a non-loopback address without --auth: anyone who can reach it can read and write
    #[arg(long)]
    pub insecure: bool,

    /// Let pages at this browser Origin call the server, with CORS (e.g. https://app.example.com;
    /// `:*` for any port); repeatable. Requests from any other page are refused (pages on
    /// loopback may use /mcp)
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,

    /// Also answer to this Host (a name clients use for this server); repeatable. Without
    /// --auth, requests naming any other host are refused (DNS-rebinding protection)
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_host: Vec<String>,

    /// Serve no web console at / (the API, /mcp and /metrics stay)
    #[arg(long, env = "STATE_HTTP_NO_CONSOLE")]
    pub no_console: bool,

    /// Largest request body; larger ones get 413 and change nothing
    #[arg(long, value_name = "BYTES", default_value_t = 8 * 1024 * 1024)]
    pub max_body_bytes: usize,

    /// Connections open at once; at the cap the one idle longest is closed for a newcomer, and
    /// when all are busy a newcomer is answered 503
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_connections: usize,

    /// Longest a REST request may take, reading its body included
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub request_timeout: Duration,

    /// Time a new connection has to send its request headers, from the moment it opens
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub header_timeout: Duration,

    /// Time a connection may sit idle between requests before it is closed
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub idle_timeout: Duration,

    /// Time a connection with a request in flight may go without a byte moving (its client
    /// stopped reading) before it is closed; keep it above 55s, the longest long poll
    #[arg(long, value_name = "DURATION", default_value = "75s", value_parser = parse_duration)]
    pub stall_timeout: Duration,

    /// How often an idle watch stream (GET /v1/watch) gets a keep-alive comment
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = parse_duration)]
    pub keep_alive: Duration,

    /// MCP sessions (the 2025 protocol's) open at once; more are answered 503
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_mcp_sessions: usize,

    /// MCP sessions one token (or, without --auth, everyone) may hold; opening one more closes
    /// the one it used least recently
    #[arg(long, value_name = "N", default_value_t = 128)]
    pub max_mcp_sessions_per_token: usize,

    /// An MCP session unused this long ends; its client opens a new one
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    pub mcp_session_idle: Duration,

    /// Requests one caller (a token; without --auth, a peer address) may have in flight at
    /// once, streams included; more are answered 429, so no caller can take every connection
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_requests_per_caller: usize,

    /// /v1/watch streams one caller may hold open at once; more are answered 429
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub max_watches_per_caller: usize,

    /// Changes per second each token may make (REST and /mcp together), for tokens whose entry
    /// in the --auth file (or grant in the --oauth file) sets no `writes_per_second`; more are
    /// answered 429 with Retry-After
    #[arg(long, value_name = "N")]
    pub writes_per_second_per_token: Option<f64>,

    /// Also write the log to this file (private, 0600; kept under 1 MiB by rotating it to
    /// FILE.1), for a server run under a service manager or in the background
    #[arg(long, env = "STATE_HTTP_LOG_FILE", value_name = "FILE")]
    pub log_file: Option<PathBuf>,
}

impl ServeArgs {
    /// The application these flags describe, serving `tools` to `tokens`.
    pub fn config(&self, tools: &ToolArgs, tokens: Option<Arc<Tokens>>, oauth: Option<Arc<ResourceServer>>) -> Config {
        Config {
            tokens,
            oauth,
            mcp: McpConfig {
                options: tools.options(),
                max_body_bytes: self.max_body_bytes,
                sessions: SessionLimits { total: self.max_mcp_sessions, per_token: self.max_mcp_sessions_per_token },
                session_idle: self.mcp_session_idle,
            },
            browser: BrowserPolicy {
                allowed_hosts: allowed_hosts(self.listen, &self.allow_host),
                allowed_origins: self.allow_origin.clone(),
                mcp_origins: mcp_origins(&self.allow_origin),
            },
            console: !self.no_console,
            max_body_bytes: self.max_body_bytes,
            request_timeout: self.request_timeout,
            keep_alive: self.keep_alive,
            quotas: QuotaLimits { requests: self.max_requests_per_caller, watches: self.max_watches_per_caller },
        }
    }

    /// What the listener allows each connection.
    pub fn limits(&self) -> Limits {
        Limits {
            max_connections: self.max_connections,
            header_timeout: self.header_timeout,
            idle_timeout: self.idle_timeout,
            stall_timeout: self.stall_timeout,
            drain_timeout: Duration::from_secs(10),
        }
    }
}

/// Keeping the store in PostgreSQL instead of a local file, so several servers can share it.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "PostgreSQL (replicas sharing one store)")]
pub struct PostgresArgs {
    /// Keep the store in this PostgreSQL database instead of --db; any number of state-http
    /// replicas may serve it at once (e.g. postgres://state@10.0.0.5/state)
    #[arg(long, env = "STATE_POSTGRES_URL", value_name = "URL", conflicts_with = "standalone")]
    pub postgres: Option<String>,

    /// Schema holding the store's tables (created if missing); one database can hold several stores
    #[arg(long, env = "STATE_POSTGRES_SCHEMA", value_name = "NAME", default_value = "state", requires = "postgres")]
    pub postgres_schema: String,

    /// Connections to PostgreSQL per replica (one more listens for other replicas' commits)
    #[arg(long, value_name = "N", default_value_t = 16, requires = "postgres")]
    pub postgres_pool: usize,

    /// Learn of other replicas' commits by polling this often instead of LISTEN/NOTIFY (for
    /// PostgreSQL-compatible engines without it)
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "postgres")]
    pub postgres_poll: Option<Duration>,

    /// Check PostgreSQL's certificate against this CA bundle (PEM) and its host name, and
    /// never connect unencrypted; without it `sslmode` in the URL decides, as in libpq
    #[arg(long, env = "STATE_POSTGRES_TLS_CA", value_name = "FILE", requires = "postgres")]
    pub postgres_tls_ca: Option<PathBuf>,

    /// Test only: drop the guards against concurrent writers, so tests can show they matter
    #[arg(long, hide = true, requires = "postgres")]
    pub test_only_unguarded: bool,
}

impl PostgresArgs {
    pub fn options(&self) -> Option<state_api::PostgresOptions> {
        let url = self.postgres.clone()?;
        Some(state_api::PostgresOptions {
            schema: self.postgres_schema.clone(),
            pool_size: self.postgres_pool,
            follow: self.postgres_poll.map_or(state_api::FollowMode::Notify, state_api::FollowMode::Poll),
            unguarded: self.test_only_unguarded,
            tls_ca: self.postgres_tls_ca.clone(),
            ..state_api::PostgresOptions::new(url)
        })
    }
}

/// Pages on loopback may use /mcp (a local agent UI), and those `--allow-origin` names.
fn mcp_origins(extra: &[String]) -> Vec<String> {
    let mut origins: Vec<String> =
        ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"].iter().map(|s| (*s).to_owned()).collect();
    origins.extend(extra.iter().cloned());
    origins
}

/// The names this server answers to: loopback's, the address it listens on, and those
/// `--allow-host` names.
fn allowed_hosts(listen: SocketAddr, extra: &[String]) -> Vec<String> {
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"].iter().map(|s| (*s).to_owned()).collect();
    if !listen.ip().is_loopback() && !listen.ip().is_unspecified() {
        hosts.push(listen.ip().to_string());
    }
    hosts.extend(extra.iter().cloned());
    hosts
}
