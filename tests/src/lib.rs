//! End-to-end harness for the `state` binaries.
//!
//! [`McpClient`] spawns a stdio MCP server as a child process and speaks newline-delimited
//! JSON-RPC to it: the same bytes a real MCP client sends. Tests that need a binary live in
//! that binary's crate (Cargo only gives a package's own tests its binary's path) and use this
//! harness as a dev-dependency; the `state-bench` binary uses it too. [`HttpServer`] starts a
//! `state-http` on a free port and [`HttpClient`] speaks plain HTTP/1.1 to it.

mod http;
mod mcp_client;
pub mod readme;
pub mod sdk;
pub mod soak;
pub mod wait;

pub use http::{HttpClient, HttpResponse, HttpServer, SseEvent, SseStream, run_to_exit};
pub use mcp_client::{McpClient, ProtocolEra, ToolResult, Wiring, result_of, tool_result};
