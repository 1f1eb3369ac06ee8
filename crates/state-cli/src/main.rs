//! `statectl`: wiring only. Parse the command line, set up logging, run the command
//! ([`state_cli::run`]) and exit with the code of its outcome class.

use std::process::ExitCode;

use state_boot::flags;
use state_boot::logging::{self, Sink};
use state_cli::{Cli, TopCommand, exit};

#[global_allocator]
static ALLOCATOR: state_boot::Allocator = state_boot::Allocator;

fn main() -> ExitCode {
    let cli: Cli = flags::parse(state_cli::command());
    match &cli.command {
        TopCommand::Owner(args) => return state_boot::owner::main("statectl", args),
        TopCommand::Generate(args) => {
            return match flags::generate(state_cli::command(), &args.dir) {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => fail(&error.into(), exit::FAILURE),
            };
        }
        TopCommand::Store(_) => {}
    }
    let sink = if cli.owns_the_terminal() { Sink::Nowhere } else { Sink::Stderr };
    logging::init(&cli.log.log, "warn", sink);
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => return fail(&anyhow::Error::new(error).context("cannot start the async runtime"), exit::FAILURE),
    };
    match runtime.block_on(state_cli::run(&cli)) {
        Ok(code) => ExitCode::from(code),
        Err(error) => fail(&error, exit::USAGE),
    }
}

fn fail(error: &anyhow::Error, code: u8) -> ExitCode {
    eprintln!("statectl: {error:#}");
    ExitCode::from(code)
}
