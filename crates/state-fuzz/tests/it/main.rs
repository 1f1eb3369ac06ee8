//! Every saved fuzz input, replayed: the seeds each target starts from, and every crash a
//! fuzzer ever found (kept in `fuzz/regressions/<target>/` once fixed), so none comes back.

// A panic is how a test reports failure.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The files under `fuzz/<kind>/<target>`, sorted.
fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = fuzz_dir().join(kind).join(target);
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries.map(|e| e.unwrap().path()).filter(|p| p.is_file()).collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    files
}

fn replay(target: &str) {
    let run = state_fuzz::target(target).unwrap();
    let seeds = inputs("corpus", target);
    assert!(!seeds.is_empty(), "fuzz/corpus/{target} has no seed inputs");
    for input in seeds.iter().chain(&inputs("regressions", target)) {
        let data = std::fs::read(input).unwrap();
        let outcome = std::panic::catch_unwind(|| run(&data));
        assert!(outcome.is_ok(), "{target} failed on {}", input.display());
    }
}

#[test]
fn every_target_has_a_test_here() {
    let tested = ["jsonrpc_line", "owner_wire", "rest_request", "tokens_file", "cursor", "dump_import", "engine_model"];
    let targets: Vec<&str> = state_fuzz::TARGETS.iter().map(|(name, _)| *name).collect();
    assert_eq!(targets, tested);
}

#[test]
fn jsonrpc_line() {
    replay("jsonrpc_line");
}

#[test]
fn owner_wire() {
    replay("owner_wire");
}

#[test]
fn rest_request() {
    replay("rest_request");
}

#[test]
fn tokens_file() {
    replay("tokens_file");
}

#[test]
fn cursor() {
    replay("cursor");
}

#[test]
fn dump_import() {
    replay("dump_import");
}

#[test]
fn engine_model() {
    replay("engine_model");
}
