//! Fuzz targets: each takes any bytes and must neither panic nor break an invariant a user
//! relies on. `cargo xtask fuzz` runs them under libFuzzer (the `fuzz/` project links them);
//! `cargo test` replays every saved input (the seeds in `fuzz/corpus/<target>` and each crash
//! ever found, kept in `fuzz/regressions/<target>`), so a crash once found stays a test.
//!
//! The targets reach the code hostile input meets first: the JSON-RPC lines of the stdio
//! server, the owner's wire protocol, REST requests (path, query, headers, body), tokens files,
//! list cursors, dump imports, and a model check that drives the engine against a map of what
//! it must hold, with crashes and a full disk injected.

// A fuzz target reports a broken invariant by panicking.
#![allow(clippy::unwrap_used)]

mod cursor;
mod engine_model;
mod harness;
mod import;
mod jsonrpc;
mod owner_wire;
mod rest;
mod tokens;

/// A target: any bytes in, a panic when an invariant breaks.
pub type Target = fn(&[u8]);

/// Every target, by the name its fuzzer binary and input directories carry.
pub const TARGETS: &[(&str, Target)] = &[
    ("jsonrpc_line", jsonrpc::line),
    ("owner_wire", owner_wire::frames),
    ("rest_request", rest::request),
    ("tokens_file", tokens::file),
    ("cursor", cursor::listing),
    ("dump_import", import::records),
    ("engine_model", engine_model::run),
];

/// The target named `name`.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}
