//! `state-mcp`: the state store as an MCP server over stdio.
//!
//! This crate only translates the protocol: tools are generated from the operation catalog in
//! `state-core`, calls go through the seam (`state_api::Api`: an engine in this process, or the
//! database's owner), and replies are rendered as MCP tool results in one place (`render`). The server is generic over any byte stream, so tests can
//! drive it through in-memory pipes as well as through the real binary.

// stdout belongs to the MCP protocol.
#![deny(clippy::print_stdout)]

mod docs;
mod legacy_json;
mod lines;
mod prompts;
mod render;
mod resources;
mod schema;
mod server;
mod service;
mod stdio;
mod subscriptions;
mod tools;

pub use server::StateServer;

use rmcp::ServiceExt;
use tokio::io::{AsyncRead, AsyncWrite};

/// Why serving stopped abnormally.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    #[error("the MCP client did not complete the handshake: {0}")]
    Handshake(String),
    #[error("the MCP session ended with an internal error: {0}")]
    Session(String),
}

/// Serves MCP on this process's stdin and stdout through `api` until the client disconnects;
/// `store` names what it serves, for a person who ran it at a terminal by mistake.
pub async fn serve_stdio(api: state_api::Api, options: state_api::Options, store: &str) -> Result<(), ServeError> {
    use std::io::IsTerminal;
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
    let (reader, writer) = stdio::streams();
    let served = serve(server, reader, writer).await;
    api.close().await;
    served?;
    tracing::info!("client disconnected");
    Ok(())
}

/// Serves MCP on a byte stream until the client disconnects (EOF).
pub async fn serve<R, W>(server: StateServer, reader: R, writer: W) -> Result<(), ServeError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let running = match service::McpService::new(server).serve(lines::LineTransport::new(reader, writer)).await {
        Ok(running) => running,
        // The client went away before saying anything (or a person pressed Ctrl-D at the
        // prompt): nothing was started, so that is a normal end, not a failure.
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
        Err(e) => return Err(ServeError::Handshake(e.to_string())),
    };
    running.waiting().await.map_err(|e| ServeError::Session(e.to_string()))?;
    Ok(())
}
