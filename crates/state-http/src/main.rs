//! `state-http`: wiring only. Parse arguments, set up logging, serve HTTP until SIGTERM or
//! SIGINT ([`state_http::run`]: become the database's owner, or join the one running).

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use state_boot::flags::{self, GenerateArgs, LogArgs};
use state_boot::logging;
use state_boot::{OwnerArgs, StoreArgs, ToolArgs};
use state_http::flags::{PostgresArgs, ServeArgs};

#[global_allocator]
static ALLOCATOR: state_boot::Allocator = state_boot::Allocator;

/// Durable, atomic, shared state for AI agents, over HTTP.
///
/// Serves the REST API (/v1, described at /openapi.json), MCP Streamable HTTP (/mcp, the tools
/// of state-mcp), /metrics and /healthz. On a database whose owner is already running it serves
/// through that owner; otherwise it becomes the owner itself, and state-mcp processes started
/// on the same database later join it.
#[derive(Debug, Parser)]
#[command(version, about, long_about, max_term_width = 100, after_help = EXAMPLES, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    postgres: PostgresArgs,
    #[command(flatten)]
    tools: ToolArgs,
    #[command(flatten)]
    log: LogArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Hold a database and serve every process on it (what a joined server starts if the
    /// owner it used stops)
    Owner(OwnerArgs),
    /// Write shell completions (bash, zsh, fish, elvish, PowerShell) and the man page into DIR
    Generate(GenerateArgs),
}

const EXAMPLES: &str = "Examples:
  state-http                                         serve ~/.local/share/state/state.redb on 127.0.0.1:7478
  state-http --db ~/agents.redb --listen 127.0.0.1:9000
  state-http --listen 0.0.0.0:7478 --auth tokens.toml  serve the network, with tokens
  state-http --postgres postgres://state@db/state    one of several replicas sharing PostgreSQL
  claude mcp add --transport http state http://127.0.0.1:7478/mcp
  curl -X PUT --json '{\"step\": 1}' http://127.0.0.1:7478/v1/kv/job/42";

fn command() -> clap::Command {
    flags::with_log_default(Cli::command(), "info,rmcp=warn")
}

fn main() -> ExitCode {
    let cli: Cli = flags::parse(command());
    let result = match &cli.command {
        Some(Command::Owner(args)) => return state_boot::owner::main("state-http", args),
        Some(Command::Generate(args)) => flags::generate(command(), &args.dir).map_err(anyhow::Error::from),
        None => serve(&cli),
    };
    state_boot::exit("state-http", result)
}

fn serve(cli: &Cli) -> anyhow::Result<()> {
    logging::init(&cli.log.log, "info", logging::stderr_and(cli.serve.log_file.as_deref())?);
    let tokens = state_http::run::tokens(&cli.serve)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    Ok(runtime.block_on(state_http::run::run(&cli.serve, &cli.store, &cli.postgres, &cli.tools, tokens))?)
}
