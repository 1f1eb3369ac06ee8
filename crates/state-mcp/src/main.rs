//! `state-mcp`: wiring only. Parse arguments, set up logging, reach the store (join the
//! database's owner, starting it if needed; or hold the database alone), serve MCP on stdio.
//! `state-mcp owner` is the owner itself.

// stdout belongs to the MCP protocol (and, in owner mode, to the readiness line).
#![deny(clippy::print_stdout)]

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use state_api::cli::{OwnerArgs, StoreArgs, ToolArgs};
use state_api::owner;
use state_api::{Api, HttpConfig, Local};
use state_mcp::StateServer;
use tracing_subscriber::fmt::writer::MakeWriterExt;

/// Durable, atomic, shared state for AI agents, served over MCP on stdin/stdout.
///
/// An MCP client starts this process and talks to it over stdin/stdout. Every client that
/// starts it with the same --db reaches the same store: the first one starts the database's
/// owner (this binary in `owner` mode, detached), and every process on the database, this one
/// included, joins it over a private Unix socket. The owner outlives the client that started
/// it, is replaced by a new one if it dies, and exits after a few idle minutes.
#[derive(Debug, Parser)]
#[command(
    version,
    about,
    long_about,
    max_term_width = 100,
    after_help = EXAMPLES,
    after_long_help = EXAMPLES,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    #[command(flatten)]
    store: StoreArgs,

    #[command(flatten)]
    tools: ToolArgs,

    /// Serve a remote state-http instead of a local database, e.g. http://10.0.0.5:7478
    #[arg(long, env = "STATE_SERVER", value_name = "URL", conflicts_with = "standalone")]
    server: Option<String>,

    /// Bearer token for --server (prefer the environment: a command line is visible to others)
    #[arg(long, env = "STATE_TOKEN", value_name = "TOKEN", requires = "server", hide_env_values = true)]
    token: Option<String>,

    /// Log filter for stderr, e.g. "info" or "state_api=debug"
    #[arg(long, env = "STATE_LOG", default_value = "info,rmcp=warn")]
    log: String,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Hold a database and serve every process on it. Clients start an owner themselves when
    /// none is running; run one yourself to keep it up (for example under a service manager)
    Owner(OwnerArgs),
    /// Write shell completions (bash, zsh, fish, elvish, PowerShell) and the man page into DIR
    Generate(state_api::cli::GenerateArgs),
}

const EXAMPLES: &str = "Examples:
  claude mcp add state -- state-mcp                      register with Claude Code
  claude mcp add state -- state-mcp --db ~/agents.redb   a specific database
  state-mcp --compat agentcheckpoint                     also serve agentcheckpoint's tools
  state-mcp --compat sidecar                             replace mcp-state-sidecar: same tool names
  state-mcp --tools kv,lease                             only key and lease tools
  state-mcp owner --db ~/agents.redb --idle 1h           run the owner in the foreground
  STATE_TOKEN=... state-mcp --server http://host:7478     serve a remote state-http over stdio";

/// How long a call keeps trying to reach an owner (rejoining, starting a new one) before it
/// answers that the store is unavailable. Below the 60 s at which clients cut tool calls.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(20);

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Owner(args)) => run_owner(args),
        Some(Command::Generate(args)) => {
            use clap::CommandFactory;
            match state_api::cli::generate(Cli::command(), &args.dir) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail("state-mcp", e.into()),
            }
        }
        None => run_server(cli),
    }
}

fn fail(program: &str, error: anyhow::Error) -> ExitCode {
    eprintln!("{program}: error: {error:#}");
    ExitCode::FAILURE
}

fn run_server(cli: Cli) -> ExitCode {
    // stdout carries the protocol; logs go to stderr, without colour codes.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(&cli.log).unwrap_or_else(|_| "info".into()))
        .init();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => return fail("state-mcp", anyhow::Error::new(e).context("cannot start the async runtime")),
    };
    match runtime.block_on(serve(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail("state-mcp", e),
    }
}

async fn serve(cli: Cli) -> anyhow::Result<()> {
    let options = cli.tools.options();
    if let Some(url) = &cli.server {
        let config = HttpConfig { url: url.clone(), token: cli.token.clone(), settle_timeout: SETTLE_TIMEOUT };
        let api = Api::connect_http(config).await?;
        tracing::info!("serving MCP on stdio for the state-http server at {url}");
        return serve_mcp(api, options, url).await;
    }
    let db = cli.store.database.database()?;
    let api = if cli.store.standalone {
        let local = Local::open_standalone(&db, cli.store.engine.settings())?;
        tracing::info!(db = %db.display(), "holding the database in this process only (--standalone)");
        Api::local(local)
    } else {
        let client = format!("state-mcp {}", env!("CARGO_PKG_VERSION"));
        // The owner serves this process every operation: its resources read records whatever
        // tools it lists, and which tools a client may call is decided here (`StateServer`).
        let config = cli
            .store
            .join_config(&db, state_api::Options::everything(), client, SETTLE_TIMEOUT)
            .context("cannot find this program to start an owner with")?;
        let (api, joined) = Api::join(config).await?;
        joined.report(&db, cli.store.engine.settings());
        api
    };
    serve_mcp(api, options, &db.display().to_string()).await
}

/// Serves MCP on stdio through `api` until the client disconnects.
async fn serve_mcp(api: Api, options: state_api::Options, store: &str) -> anyhow::Result<()> {
    if std::io::stdin().is_terminal() {
        eprintln!(
            "state-mcp {}: an MCP server speaking JSON-RPC on stdin/stdout, for MCP clients to start.\n\
             store: {store}\n\
             connect a client, e.g.:  claude mcp add state -- state-mcp --db PATH\n\
             (Ctrl-D quits; `state-mcp --help` lists options)",
            env!("CARGO_PKG_VERSION"),
        );
    }
    let server = StateServer::new(api.clone(), options);
    let (reader, writer) = rmcp::transport::stdio_pipes();
    let served = state_mcp::serve(server, reader, writer).await;
    api.close().await;
    served?;
    tracing::info!("client disconnected");
    Ok(())
}

fn run_owner(args: OwnerArgs) -> ExitCode {
    match owner_main(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail("state-mcp owner", e),
    }
}

fn owner_main(args: OwnerArgs) -> anyhow::Result<()> {
    let filter = args.log.clone();
    owner::main(&args, |log| {
        // A detached owner has no terminal (its stderr is /dev/null); one run by hand shows its log.
        let to_terminal = std::io::stderr().is_terminal();
        let writer = (move || log.clone()).and(std::io::stderr.with_filter(move |_| to_terminal));
        let filter = tracing_subscriber::EnvFilter::try_new(&filter).unwrap_or_else(|_| "info".into());
        tracing_subscriber::fmt().with_writer(writer).with_ansi(false).with_env_filter(filter).init();
    })?;
    Ok(())
}
