//! `state-mcp`: wiring only. Parse arguments, set up logging, open the store, serve stdio.

// stdout belongs to the MCP protocol.
#![deny(clippy::print_stdout)]

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use state_mcp::{GroupArg, Options, ProfileArg, StateServer};
use state_store::{Engine, EngineConfig, RedbBackend, SystemClock};

/// Durable, atomic, shared state for AI agents, served over MCP on stdin/stdout.
///
/// An MCP client starts this process and talks to it over stdin/stdout. Every client that
/// starts it with the same --db reaches the same store.
#[derive(Debug, Parser)]
#[command(version, about, long_about, max_term_width = 100, after_help = EXAMPLES, after_long_help = EXAMPLES)]
struct Args {
    /// Database file [default: $XDG_DATA_HOME/state/state.redb, i.e. ~/.local/share/state/state.redb]
    #[arg(long, env = "STATE_DB", value_name = "PATH")]
    db: Option<PathBuf>,

    /// Also expose the tools of a server this one replaces, with its names and result shapes
    #[arg(long, value_enum, value_delimiter = ',', value_name = "PROFILE")]
    compat: Vec<ProfileArg>,

    /// Expose only these tool groups (default: all), to keep a client's tool list short
    #[arg(long, value_enum, value_delimiter = ',', value_name = "GROUPS", env = "STATE_TOOLS")]
    tools: Vec<GroupArg>,

    /// Largest value accepted, in bytes of JSON
    #[arg(long, env = "STATE_MAX_VALUE_BYTES", default_value_t = state_core::limits::DEFAULT_MAX_VALUE_BYTES)]
    max_value_bytes: usize,

    /// Revisions of history to keep (older ones are compacted); 0 keeps all history
    #[arg(long, env = "STATE_HISTORY_RETENTION", default_value_t = state_store::DEFAULT_HISTORY_RETENTION)]
    history_retention: u64,

    /// Log filter for stderr, e.g. "info" or "state_store=debug"
    #[arg(long, env = "STATE_LOG", default_value = "info,rmcp=warn")]
    log: String,
}

const EXAMPLES: &str = "Examples:
  claude mcp add state -- state-mcp                      register with Claude Code
  claude mcp add state -- state-mcp --db ~/agents.redb   a specific database
  state-mcp --compat agentcheckpoint                     also serve agentcheckpoint's tools
  state-mcp --compat sidecar                             replace mcp-state-sidecar: same tool names
  state-mcp --tools kv,lease                             only key and lease tools";

fn main() -> ExitCode {
    let args = Args::parse();
    // stdout carries the protocol; logs go to stderr, without colour codes.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(&args.log).unwrap_or_else(|_| "info".into()))
        .init();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => return fail(anyhow::Error::new(e).context("cannot start the async runtime")),
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

fn fail(error: anyhow::Error) -> ExitCode {
    eprintln!("state-mcp: error: {error:#}");
    ExitCode::FAILURE
}

async fn run(args: Args) -> anyhow::Result<()> {
    let db = match args.db {
        Some(path) => path,
        None => dirs::data_dir()
            .context("no data directory is known for this user; pass --db PATH")?
            .join("state")
            .join("state.redb"),
    };
    let backend = RedbBackend::open(&db)?;
    let config = EngineConfig {
        limits: state_core::Limits { max_value_bytes: args.max_value_bytes },
        history_retention: (args.history_retention > 0).then_some(args.history_retention),
        sweep_interval: Duration::from_secs(1),
        ..EngineConfig::default()
    };
    let engine = Engine::new(Arc::new(backend), Arc::new(SystemClock), config)?;
    let maintenance = engine.start_maintenance();
    let health = engine.health().await?;
    tracing::info!(db = %db.display(), revision = health.revision, keys = health.keys, "state-mcp {} serving MCP on stdio", env!("CARGO_PKG_VERSION"));
    if std::io::stdin().is_terminal() {
        eprintln!(
            "state-mcp {}: an MCP server speaking JSON-RPC on stdin/stdout, for MCP clients to start.\n\
             database: {}\n\
             connect a client, e.g.:  claude mcp add state -- state-mcp --db {}\n\
             (Ctrl-D quits; `state-mcp --help` lists options)",
            env!("CARGO_PKG_VERSION"),
            db.display(),
            db.display(),
        );
    }
    let server = StateServer::new(engine.clone(), Options::new(&args.compat, &args.tools));
    let (reader, writer) = rmcp::transport::stdio_pipes();
    state_mcp::serve(server, reader, writer).await?;
    drop(maintenance);
    engine.close().await;
    tracing::info!("client disconnected; database closed");
    Ok(())
}
