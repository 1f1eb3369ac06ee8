//! The owner and its clients in one test process: refusals, the socket's life cycle, idle
//! exit, per-connection tool choices, rejoining a replacement owner, watches through it, and
//! the HTTP client facing a server that never answers. The same behaviour
//! across real processes (SIGKILL included) is tested in `state-mcp`'s end-to-end tests.

// A panic is how a test reports failure.
#![allow(clippy::unwrap_used)]

mod http;
mod owner;
mod schemas;
mod watch;
