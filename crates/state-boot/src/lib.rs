//! `state-boot`: what every state binary does before its own work, written once. The flags
//! they share ([`flags`]: `--db`, `--standalone`, `--server`, `--token`, `--log`, `--tools`,
//! `--compat`, the `owner` and `generate` subcommands), installing the log ([`logging`]),
//! reaching the store ([`reach`]: a `state-http`, the database alone, or its owner, started
//! when none answers) and the `owner` mode ([`owner`]). A binary's `main.rs` is left with
//! its own flags and the one thing it serves. Linking this crate also picks the binaries'
//! allocator (mimalloc).

pub mod flags;
pub mod logging;
pub mod owner;
pub mod reach;

pub use flags::{OwnerArgs, ServerArgs, StoreArgs, ToolArgs};

/// The allocator of every state binary (and of the tests that link this crate, so they run
/// what ships). glibc's malloc, with its per-thread arenas and consolidation, was a sixth of
/// `state-http`'s CPU under 64 writing clients; mimalloc took 10% off each request's CPU and
/// raised that load's rate by a fifth (docs/BENCHMARKS.md, issue 20).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
pub use reach::{ReachError, reach};

/// The exit of a binary's `main`: success, or `program: error: ...` on stderr (the whole
/// chain of causes, `{:#}`) and failure.
pub fn exit<E: std::fmt::Display>(program: &str, result: Result<(), E>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{program}: error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
