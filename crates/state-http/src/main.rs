//! `state-http`: wiring only. Parse arguments, set up logging, reach the store (become the
//! database's owner, or join the one that is running), serve HTTP until SIGTERM or SIGINT.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use state_api::auth::Tokens;
use state_api::cli::{OwnerArgs, StoreArgs, ToolArgs, parse_duration};
use state_api::owner::{self, Owner, OwnerConfig};
use state_api::{Api, Local};
use state_http::{BrowserPolicy, Config, DEFAULT_LISTEN, Limits, McpConfig, SessionLimits};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::fmt::writer::MakeWriterExt;

/// Durable, atomic, shared state for AI agents, over HTTP.
///
/// Serves the REST API (/v1, described at /openapi.json), MCP Streamable HTTP (/mcp, the tools
/// of state-mcp), /metrics and /healthz. On a database whose owner is already running it serves
/// through that owner; otherwise it becomes the owner itself, and state-mcp processes started
/// on the same database later join it.
#[derive(Debug, Parser)]
#[command(
    version,
    about,
    long_about,
    max_term_width = 100,
    after_help = EXAMPLES,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    /// Address to listen on; a non-loopback one needs --auth (or --insecure)
    #[arg(long, env = "STATE_HTTP_LISTEN", value_name = "ADDR", default_value = DEFAULT_LISTEN)]
    listen: SocketAddr,

    #[command(flatten)]
    store: StoreArgs,

    #[command(flatten)]
    postgres: PostgresArgs,

    /// Bearer tokens, their key prefixes and rights (TOML; see the README for the format)
    #[arg(long, env = "STATE_HTTP_AUTH", value_name = "FILE")]
    auth: Option<PathBuf>,

    /// Serve a non-loopback address without --auth: anyone who can reach it can read and write
    #[arg(long)]
    insecure: bool,

    #[command(flatten)]
    tools: ToolArgs,

    /// Let pages at this browser Origin call the server, with CORS (e.g. https://app.example.com;
    /// `:*` for any port); repeatable. Requests from any other page are refused (pages on
    /// loopback may use /mcp)
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    allow_origin: Vec<String>,

    /// Also answer to this Host (a name clients use for this server); repeatable. Without
    /// --auth, requests naming any other host are refused (DNS-rebinding protection)
    #[arg(long = "allow-host", value_name = "HOST")]
    allow_host: Vec<String>,

    /// Largest request body; larger ones get 413 and change nothing
    #[arg(long, value_name = "BYTES", default_value_t = 8 * 1024 * 1024)]
    max_body_bytes: usize,

    /// Connections open at once; at the cap the one idle longest is closed for a newcomer, and
    /// when all are busy a newcomer is answered 503
    #[arg(long, value_name = "N", default_value_t = 1024)]
    max_connections: usize,

    /// Longest a REST request may take, reading its body included
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    request_timeout: Duration,

    /// Time a new connection has to send its request headers, from the moment it opens
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    header_timeout: Duration,

    /// Time a connection may sit idle between requests before it is closed
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    idle_timeout: Duration,

    /// Time a connection with a request in flight may go without a byte moving (its client
    /// stopped reading) before it is closed; keep it above 55s, the longest long poll
    #[arg(long, value_name = "DURATION", default_value = "75s", value_parser = parse_duration)]
    stall_timeout: Duration,

    /// How often an idle watch stream (GET /v1/watch) gets a keep-alive comment
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = parse_duration)]
    keep_alive: Duration,

    /// MCP sessions (the 2025 protocol's) open at once; more are answered 503
    #[arg(long, value_name = "N", default_value_t = 1024)]
    max_mcp_sessions: usize,

    /// MCP sessions one token (or, without --auth, everyone) may hold; opening one more closes
    /// the one it used least recently
    #[arg(long, value_name = "N", default_value_t = 128)]
    max_mcp_sessions_per_token: usize,

    /// An MCP session unused this long ends; its client opens a new one
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    mcp_session_idle: Duration,

    /// Log filter, e.g. "info" or "state_http=debug"
    #[arg(long, env = "STATE_LOG", default_value = "info,rmcp=warn")]
    log: String,

    /// Also write the log to this file (private, 0600; kept under 1 MiB by rotating it to
    /// FILE.1), for a server run under a service manager or in the background
    #[arg(long, env = "STATE_HTTP_LOG_FILE", value_name = "FILE")]
    log_file: Option<PathBuf>,
}

/// Keeping the store in PostgreSQL instead of a local file, so several servers can share it.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "PostgreSQL (replicas sharing one store)")]
struct PostgresArgs {
    /// Keep the store in this PostgreSQL database instead of --db; any number of state-http
    /// replicas may serve it at once (e.g. postgres://state@10.0.0.5/state)
    #[arg(long, env = "STATE_POSTGRES_URL", value_name = "URL", conflicts_with = "standalone")]
    postgres: Option<String>,

    /// Schema holding the store's tables (created if missing); one database can hold several stores
    #[arg(long, env = "STATE_POSTGRES_SCHEMA", value_name = "NAME", default_value = "state", requires = "postgres")]
    postgres_schema: String,

    /// Connections to PostgreSQL per replica (one more listens for other replicas' commits)
    #[arg(long, value_name = "N", default_value_t = 16, requires = "postgres")]
    postgres_pool: usize,

    /// Learn of other replicas' commits by polling this often instead of LISTEN/NOTIFY (for
    /// PostgreSQL-compatible engines without it)
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "postgres")]
    postgres_poll: Option<Duration>,

    /// Check PostgreSQL's certificate against this CA bundle (PEM) and its host name, and
    /// never connect unencrypted; without it `sslmode` in the URL decides, as in libpq
    #[arg(long, env = "STATE_POSTGRES_TLS_CA", value_name = "FILE", requires = "postgres")]
    postgres_tls_ca: Option<PathBuf>,

    /// Test only: drop the guards against concurrent writers, so tests can show they matter
    #[arg(long, hide = true, requires = "postgres")]
    test_only_unguarded: bool,
}

impl PostgresArgs {
    fn options(&self) -> Option<state_api::PostgresOptions> {
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

#[derive(Debug, Subcommand)]
enum Command {
    /// Hold a database and serve every process on it (what a joined server starts if the
    /// owner it used stops)
    Owner(OwnerArgs),
    /// Write shell completions (bash, zsh, fish, elvish, PowerShell) and the man page into DIR
    Generate(state_api::cli::GenerateArgs),
}

const EXAMPLES: &str = "Examples:
  state-http                                         serve ~/.local/share/state/state.redb on 127.0.0.1:7478
  state-http --db ~/agents.redb --listen 127.0.0.1:9000
  state-http --listen 0.0.0.0:7478 --auth tokens.toml  serve the network, with tokens
  state-http --postgres postgres://state@db/state    one of several replicas sharing PostgreSQL
  claude mcp add --transport http state http://127.0.0.1:7478/mcp
  curl -X PUT --json '{\"step\": 1}' http://127.0.0.1:7478/v1/kv/job/42";

/// How long a joined server keeps trying to reach an owner before answering unavailable.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(20);

/// The hosted owner never idles out: it lives as long as the HTTP server.
const FOREVER: Duration = Duration::MAX;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Owner(args)) => owner_main(args),
        Some(Command::Generate(args)) => {
            use clap::CommandFactory;
            state_api::cli::generate(Cli::command(), &args.dir).map_err(anyhow::Error::from)
        }
        None => server_main(cli),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("state-http: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn server_main(cli: Cli) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_new(&cli.log).unwrap_or_else(|_| "info".into());
    let logging = tracing_subscriber::fmt().with_ansi(false).with_env_filter(filter);
    match &cli.log_file {
        Some(path) => {
            let log = state_api::CappedLog::open(path, state_api::DEFAULT_LOG_CAP)
                .with_context(|| format!("cannot open the log file {}", path.display()))?;
            logging.with_writer(std::io::stderr.and(move || log.clone())).init();
        }
        None => logging.with_writer(std::io::stderr).init(),
    }
    if !cli.listen.ip().is_loopback() && cli.auth.is_none() && !cli.insecure {
        bail!(
            "refusing to serve {} without --auth: anyone who can reach it could read and change everything. \
             Give --auth FILE (see the README), listen on 127.0.0.1, or pass --insecure if this network is trusted",
            cli.listen
        );
    }
    let tokens = match &cli.auth {
        Some(path) => Some(Arc::new(load_tokens(path)?)),
        None => None,
    };
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the runtime")?;
    runtime.block_on(serve(cli, tokens))
}

fn load_tokens(path: &std::path::Path) -> anyhow::Result<Tokens> {
    use std::os::unix::fs::PermissionsExt;
    let tokens = Tokens::load(path)?;
    if std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o077 != 0) {
        tracing::warn!(file = %path.display(), "the tokens file is readable by other users; `chmod 600` it");
    }
    Ok(tokens)
}

async fn serve(cli: Cli, tokens: Option<Arc<Tokens>>) -> anyhow::Result<()> {
    let listener =
        tokio::net::TcpListener::bind(cli.listen).await.with_context(|| format!("cannot listen on {}", cli.listen))?;
    let (api, hosted, store) = match cli.postgres.options() {
        Some(options) => {
            let shown = format!("PostgreSQL schema {}", options.schema);
            let settings = cli.store.engine.settings();
            let local = tokio::task::spawn_blocking(move || state_api::Local::open_postgres(options, settings))
                .await
                .context("opening the PostgreSQL store panicked")??;
            tracing::info!("serving the store in PostgreSQL as one of its replicas");
            (Api::local(local), None, shown)
        }
        None => {
            let db = cli.store.database.database()?;
            let (api, hosted) = reach_store(&cli, &db).await?;
            (api, hosted, format!("database {}", db.display()))
        }
    };
    let config = Config {
        tokens: tokens.clone(),
        mcp: McpConfig {
            options: cli.tools.options(),
            max_body_bytes: cli.max_body_bytes,
            sessions: SessionLimits { total: cli.max_mcp_sessions, per_token: cli.max_mcp_sessions_per_token },
            session_idle: cli.mcp_session_idle,
        },
        browser: BrowserPolicy {
            allowed_hosts: allowed_hosts(cli.listen, &cli.allow_host),
            allowed_origins: cli.allow_origin.clone(),
            mcp_origins: mcp_origins(&cli.allow_origin),
        },
        max_body_bytes: cli.max_body_bytes,
        request_timeout: cli.request_timeout,
        keep_alive: cli.keep_alive,
    };
    let stopping = CancellationToken::new();
    let app = state_http::router(api.clone(), &config, stopping.child_token());
    let limits = Limits {
        max_connections: cli.max_connections,
        header_timeout: cli.header_timeout,
        idle_timeout: cli.idle_timeout,
        stall_timeout: cli.stall_timeout,
        drain_timeout: Duration::from_secs(10),
    };
    let auth = tokens.map_or_else(|| "none (loopback only)".to_owned(), |t| format!("{} token(s)", t.len()));
    tracing::info!(
        "state-http {} listening on http://{} (REST /v1, MCP /mcp, /openapi.json, /metrics); {store}; auth: {auth}",
        env!("CARGO_PKG_VERSION"),
        listener.local_addr().unwrap_or(cli.listen),
    );
    let shutdown = {
        let stopping = stopping.clone();
        async move {
            owner::stop_signal().await;
            tracing::info!("stopping: finishing requests in flight");
            stopping.cancel();
        }
    };
    state_http::serve(listener, app, &limits, shutdown).await;
    // Requests are done; now the engine: a hosted owner lets queued writes commit and releases
    // the database (clients joined to it rejoin a new owner); a joined one leaves its owner.
    match hosted {
        Some((stop, owning)) => {
            let _ = stop.send(());
            let _ = owning.await;
        }
        None => api.close().await,
    }
    tracing::info!("stopped");
    Ok(())
}

type Hosted = (tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<state_api::owner::OwnerExit>);

/// Becomes the database's owner (serving the processes that join it), or joins the owner that
/// holds it, or with --standalone holds it alone.
async fn reach_store(cli: &Cli, db: &std::path::Path) -> anyhow::Result<(Api, Option<Hosted>)> {
    let store = &cli.store;
    if store.standalone {
        let local = Local::open_standalone(db, store.engine.settings())?;
        tracing::info!(db = %db.display(), "holding the database in this process only (--standalone)");
        return Ok((Api::local(local), None));
    }
    let config = OwnerConfig {
        db: db.to_owned(),
        runtime_dir: store.database.runtime_dir.clone(),
        idle: FOREVER,
        settings: store.engine.settings(),
        log_file: None,
    };
    match Owner::start(config).await {
        Ok(owner) => {
            tracing::info!(db = %db.display(), "this process owns the database; state-mcp processes on it join here");
            let api = owner.api();
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let owning = tokio::spawn(owner.serve(async move { drop(stopped.await) }));
            Ok((api, Some((stop, owning))))
        }
        Err(error) if error.holder_role().is_some() => {
            let client = format!("state-http {}", env!("CARGO_PKG_VERSION"));
            let join = store
                .join_config(db, state_api::Options::everything(), client, SETTLE_TIMEOUT)
                .context("cannot find this program to start an owner with")?;
            let (api, joined) = Api::join(join).await?;
            joined.report(db, store.engine.settings());
            Ok((api, None))
        }
        Err(error) => Err(error.into()),
    }
}

fn mcp_origins(extra: &[String]) -> Vec<String> {
    let mut origins: Vec<String> =
        ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"].iter().map(|s| (*s).to_owned()).collect();
    origins.extend(extra.iter().cloned());
    origins
}

fn allowed_hosts(listen: SocketAddr, extra: &[String]) -> Vec<String> {
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"].iter().map(|s| (*s).to_owned()).collect();
    if !listen.ip().is_loopback() && !listen.ip().is_unspecified() {
        hosts.push(listen.ip().to_string());
    }
    hosts.extend(extra.iter().cloned());
    hosts
}

fn owner_main(args: OwnerArgs) -> anyhow::Result<()> {
    let filter = args.log.clone();
    owner::main(&args, |log| {
        let to_terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let writer = (move || log.clone()).and(std::io::stderr.with_filter(move |_| to_terminal));
        let filter = tracing_subscriber::EnvFilter::try_new(&filter).unwrap_or_else(|_| "info".into());
        tracing_subscriber::fmt().with_writer(writer).with_ansi(false).with_env_filter(filter).init();
    })?;
    Ok(())
}
