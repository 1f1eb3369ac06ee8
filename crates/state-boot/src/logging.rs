//! Where a binary's log goes. Always stderr or a file, never stdout: a stdio MCP server's
//! stdout is the protocol, `statectl`'s is its output, an owner's carries its readiness line.
//! No colour codes: logs are read in files and MCP clients' panes as often as in terminals.

use std::io::IsTerminal;
use std::path::Path;

use state_api::CappedLog;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::writer::{BoxMakeWriter, MakeWriterExt};

/// Where the log lines go.
pub enum Sink {
    Stderr,
    /// stderr, and a size-capped file beside it (a server run in the background).
    StderrAndFile(CappedLog),
    /// Nowhere: a full-screen program owns the terminal, and a line would tear its screen.
    Nowhere,
    /// An owner's log file, and stderr too when stderr is a terminal: a detached owner's
    /// stderr is /dev/null, one run by hand shows its log.
    Owner(CappedLog),
}

/// Installs the process's log: lines `filter` selects (e.g. "info" or "state_api=debug";
/// `fallback` when it does not parse) go to `sink`.
pub fn init(filter: &str, fallback: &str, sink: Sink) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new(fallback));
    let writer = match sink {
        Sink::Stderr => BoxMakeWriter::new(std::io::stderr),
        Sink::StderrAndFile(log) => BoxMakeWriter::new(std::io::stderr.and(move || log.clone())),
        Sink::Nowhere => BoxMakeWriter::new(std::io::sink),
        Sink::Owner(log) => {
            let to_terminal = std::io::stderr().is_terminal();
            BoxMakeWriter::new((move || log.clone()).and(std::io::stderr.with_filter(move |_| to_terminal)))
        }
    };
    tracing_subscriber::fmt().with_writer(writer).with_ansi(false).with_env_filter(filter).init();
}

/// [`Sink::StderrAndFile`] for `path` (private, 0600; rotated to `path.1` past 1 MiB), or
/// [`Sink::Stderr`] without one.
pub fn stderr_and(path: Option<&Path>) -> std::io::Result<Sink> {
    match path {
        Some(path) => {
            let log = CappedLog::open(path, state_api::DEFAULT_LOG_CAP).map_err(|e| {
                std::io::Error::new(e.kind(), format!("cannot open the log file {}: {e}", path.display()))
            })?;
            Ok(Sink::StderrAndFile(log))
        }
        None => Ok(Sink::Stderr),
    }
}
