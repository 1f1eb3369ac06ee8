//! `state-mcp`: wiring only. Parse arguments, set up logging, reach the store (join the
//! database's owner, starting it if needed; hold the database alone; or a state-http), serve
//! MCP on stdio. `state-mcp owner` is the owner itself.

// stdout belongs to the MCP protocol (and, in owner mode, to the readiness line).
#![deny(clippy::print_stdout)]

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use state_boot::flags::{self, GenerateArgs, LogArgs};
use state_boot::logging::{self, Sink};
use state_boot::reach::{self, SETTLE_FOR_SERVERS};
use state_boot::{OwnerArgs, ServerArgs, StoreArgs, ToolArgs};

#[global_allocator]
static ALLOCATOR: state_boot::Allocator = state_boot::Allocator;

/// Durable, atomic, shared state for AI agents, served over MCP on stdin/stdout.
///
/// An MCP client starts this process and talks to it over stdin/stdout. Every client that
/// starts it with the same --db reaches the same store: the first one starts the database's
/// owner (this binary in `owner` mode, detached), and every process on the database, this one
/// included, joins it over a private Unix socket. The owner outlives the client that started
/// it, is replaced by a new one if it dies, and exits after a few idle minutes.
#[derive(Debug, Parser)]
#[command(version, about, long_about, max_term_width = 100, after_help = EXAMPLES, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    tools: ToolArgs,
    #[command(flatten)]
    server: ServerArgs,
    #[command(flatten)]
    log: LogArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Hold a database and serve every process on it. Clients start an owner themselves when
    /// none is running; run one yourself to keep it up (for example under a service manager)
    Owner(OwnerArgs),
    /// Write shell completions (bash, zsh, fish, elvish, PowerShell) and the man page into DIR
    Generate(GenerateArgs),
}

const EXAMPLES: &str = "Examples:
  claude mcp add state -- state-mcp                      register with Claude Code
  claude mcp add state -- state-mcp --db ~/agents.redb   a specific database
  state-mcp --compat agentcheckpoint                     also serve agentcheckpoint's tools
  state-mcp --compat sidecar                             replace mcp-state-sidecar: same tool names
  state-mcp --tools kv,lease                             only key and lease tools
  state-mcp owner --db ~/agents.redb --idle 1h           run the owner in the foreground
  STATE_TOKEN=... state-mcp --server http://host:7478     serve a remote state-http over stdio";

fn command() -> clap::Command {
    // Only here, where --server is not global, can clap itself refuse it beside --standalone.
    let server = |arg: clap::Arg| arg.conflicts_with("standalone");
    flags::with_log_default(Cli::command(), "info,rmcp=warn").mut_arg("server", server)
}

fn main() -> ExitCode {
    let cli: Cli = flags::parse(command());
    let result = match &cli.command {
        Some(Command::Owner(args)) => return state_boot::owner::main("state-mcp", args),
        Some(Command::Generate(args)) => flags::generate(command(), &args.dir).map_err(anyhow::Error::from),
        None => serve(&cli),
    };
    state_boot::exit("state-mcp", result)
}

fn serve(cli: &Cli) -> anyhow::Result<()> {
    logging::init(&cli.log.log, "info", Sink::Stderr);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let api = reach::reach(&cli.store, &cli.server, "state-mcp", SETTLE_FOR_SERVERS).await?;
        let store = reach::target(&cli.store, &cli.server);
        let options = cli.tools.options();
        if options.permits(state_api::catalog::Operation::MemoryImport) {
            state_api::memory_file::import_from_env(&api).await?;
        }
        Ok(state_mcp::serve_stdio(api, options, &store).await?)
    })
}
