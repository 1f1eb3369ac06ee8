//! `statectl`'s command line: the shared flags, `--json`, and the commands
//! ([`crate::commands`]).

use clap::{CommandFactory, Parser, Subcommand};
use state_boot::flags::{self, GenerateArgs, LogArgs};
use state_boot::reach::{self, ReachError, SETTLE_AT_A_PROMPT};
use state_boot::{OwnerArgs, ServerArgs, StoreArgs};

use crate::commands::Command;

/// Read and change the state store from the shell: keys, leases, semaphores, path
/// reservations, queues, workflow runs, sessions, checkpoints and knowledge.
///
/// By default statectl joins the owner of the local database (--db, STATE_DB; starting one
/// if none is running), so it works beside running agents. With --server it talks to a
/// state-http anywhere. Output is text for people; --json prints the result as JSON for
/// scripts, and the exit code says what happened.
#[derive(Debug, Parser)]
#[command(name = "statectl", version, about, long_about, max_term_width = 100, after_help = AFTER_HELP, after_long_help = AFTER_HELP)]
pub struct Cli {
    #[command(subcommand)]
    pub command: TopCommand,

    #[command(flatten)]
    pub store: StoreArgs,

    #[command(flatten)]
    pub server: ServerArgs,

    /// Print results as JSON
    #[arg(long, global = true)]
    pub json: bool,

    #[command(flatten)]
    pub log: LogArgs,
}

#[derive(Debug, Subcommand)]
pub enum TopCommand {
    #[command(flatten)]
    Store(Command),
    /// Hold a database and serve every process on it (started by clients when none runs)
    #[command(hide = true)]
    Owner(OwnerArgs),
    /// Write shell completions (bash, zsh, fish, elvish, PowerShell) and the man page into DIR
    Generate(GenerateArgs),
}

const AFTER_HELP: &str = "Examples:
  statectl put jobs/42 '{\"step\": 1}' --create-only
  statectl get jobs/42 --json | jq .version
  statectl put jobs/42 @state.json --if-version 3 || echo \"changed meanwhile\"
  echo '\"done\"' | statectl put jobs/42/status
  statectl ls jobs/ --values
  statectl watch jobs/ --json
  statectl lease acquire printer --holder me --ttl 30s
  statectl lease release printer --holder me --fencing-token 7
  statectl knowledge recall \"why is the build slow\"
  statectl export --history -o backup.jsonl
  statectl import backup.jsonl --dry-run
  statectl import --from agentcheckpoint ~/.hermes/checkpoints.db
  statectl import --from memory ~/memory.jsonl
  STATE_TOKEN=... statectl --server http://host:7478 health

Exit codes:
  0  success
  1  failure (storage, internal)
  2  usage error: bad flags or invalid input
  3  not found
  4  conflict: a version, compare or lease precondition did not hold
  5  fenced: the lease or claim token is no longer current
  6  unavailable: the store could not be reached, or a write's outcome is unknown
  7  forbidden: the token does not cover it";

impl Cli {
    /// The command draws on the whole terminal (the inspector), where a log line would tear
    /// its screen.
    pub fn owns_the_terminal(&self) -> bool {
        matches!(self.command, TopCommand::Store(Command::Tui { .. }))
    }

    /// The store the flags name: a state-http, the database alone, or its owner.
    pub(crate) async fn connect(&self) -> Result<state_api::Api, ReachError> {
        reach::reach(&self.store, &self.server, "statectl", SETTLE_AT_A_PROMPT).await
    }
}

/// The command line as statectl parses it: `--server`, `--token` and `--log` may come after
/// the command (`statectl get k --server URL`), and the log shows only what went wrong unless
/// asked.
pub fn command() -> clap::Command {
    let global = |arg: clap::Arg| arg.global(true);
    flags::with_log_default(Cli::command(), "warn")
        .mut_arg("server", global)
        .mut_arg("token", global)
        .mut_arg("log", global)
}
