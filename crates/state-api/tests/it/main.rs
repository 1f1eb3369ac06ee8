//! The owner and its clients in one test process: refusals, the socket's life cycle, idle
//! exit, per-connection tool choices, and rejoining a replacement owner. The same behaviour
//! across real processes (SIGKILL included) is tested in `state-mcp`'s end-to-end tests.

// A panic is how a test reports failure.
#![allow(clippy::unwrap_used)]

mod owner;
mod watch;
