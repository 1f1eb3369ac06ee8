//! `state-boot`: what every state binary does before its own work, written once. The flags
//! they share ([`flags`]: `--db`, `--standalone`, `--server`, `--token`, `--log`, `--tools`,
//! `--compat`, the `owner` and `generate` subcommands), installing the log ([`logging`]),
//! reaching the store ([`reach`]: a `state-http`, the database alone, or its owner, started
//! when none answers) and the `owner` mode ([`owner`]). A binary's `main.rs` is left with
//! its own flags and the one thing it serves, and the binaries' allocator ([`Allocator`]).

pub mod flags;
pub mod logging;
pub mod owner;
pub mod reach;

pub use flags::{OwnerArgs, ServerArgs, StoreArgs, ToolArgs};

/// The allocator every state binary declares in its `main.rs` (libraries, tests in process and
/// the fuzzers keep the system's). glibc's malloc, with its per-thread arenas and
/// consolidation, was a sixth of `state-http`'s CPU under 64 writing clients; mimalloc took a
/// fifth of the instructions off each MCP call and raised that load's rate by a fifth
/// (docs/BENCHMARKS.md, issue 20).
pub use mimalloc::MiMalloc as Allocator;
pub use reach::{ReachError, reach};

/// The exit of a binary's `main`: success, or `program: error: ...` on stderr (the whole
/// chain of causes, `{:#}`) and failure.
/// An error with its causes (the alternate form, `{:#}`), unless its own message already ends
/// with them: errors that name their cause in their message would otherwise say it twice
/// (`cannot listen on …: Address already in use: Address already in use`).
fn without_repeats<E: std::fmt::Display>(error: &E) -> String {
    let (top, full) = (format!("{error}"), format!("{error:#}"));
    match full.strip_prefix(top.as_str()) {
        Some(causes) if top.ends_with(causes.trim_start_matches(": ")) => top,
        _ => full,
    }
}

pub fn exit<E: std::fmt::Display>(program: &str, result: Result<(), E>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{program}: error: {}", without_repeats(&error));
            std::process::ExitCode::FAILURE
        }
    }
}
