//! `statectl`: the state store from the shell. The binary is wiring (`main.rs`); this is its
//! body, a library so that tests reach every command in process: the command line
//! ([`cli`]), each command's operation ([`commands`]), running one ([`run`]), and the
//! inspector ([`tui`]). Like a binary, it reports with `anyhow`: its errors end in a message
//! and an exit code, never in a caller's match.

/// `println!`, except that a reader that went away (`statectl ls | head`) ends the program
/// quietly, as it ends `cat`, instead of a panic and a backtrace.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(error) = writeln!(std::io::stdout().lock(), $($arg)*) {
            crate::stdout_failed(&error)
        }
    }};
}

pub mod cli;
pub mod commands;
mod doctor;
pub mod exit;
mod foreign;
mod input;
mod memory_graph;
mod output;
pub mod run;
mod transfer;
mod tui;

pub use cli::{Cli, TopCommand, command};
pub use run::run;

/// stdout could not be written: a closed pipe is the reader's choice (exit 0); anything else is
/// a failure.
pub(crate) fn stdout_failed(error: &std::io::Error) -> ! {
    if error.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(i32::from(exit::OK));
    }
    eprintln!("statectl: cannot write to standard output: {error}");
    std::process::exit(i32::from(exit::FAILURE));
}
