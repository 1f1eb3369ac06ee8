//! The official MCP conformance suite (npm `@modelcontextprotocol/conformance`, pinned in
//! tools/conformance) against /mcp, on both protocol revisions. Scenarios that need the suite's
//! own fixture server are listed, with reasons, in tools/conformance/expected-failures.yml;
//! the suite fails the run on any other failure.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Place;

/// Set by `cargo xtask ci` once it has installed the suite, so that CI can never skip it.
const REQUIRED: &str = "STATE_CONFORMANCE_REQUIRED";

fn suite() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/conformance")
}

#[test]
fn the_official_mcp_conformance_suite_passes_on_both_revisions() {
    let dir = suite();
    let bin = dir.join("node_modules/.bin");
    if !bin.join("conformance").exists() {
        assert!(
            std::env::var_os(REQUIRED).is_none(),
            "the conformance suite is required but not installed in {}",
            dir.display()
        );
        eprintln!("SKIPPED: the MCP conformance suite is not installed (cd tools/conformance && npm ci)");
        return;
    }
    let place = Place::new();
    let server = place.in_process(&[]);
    let url = format!("http://{}/mcp", server.addr);
    // The suite needs node 22, which it brings as a package; put it first on the PATH.
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    for revision in ["2025-11-25", "2026-07-28"] {
        let output = Command::new(bin.join("conformance"))
            .args(["server", "--url", &url, "--requirements", revision])
            .args(["--expected-failures", "expected-failures.yml"])
            .current_dir(&dir)
            .env("PATH", &path)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        let report = String::from_utf8_lossy(&output.stdout);
        let summary: Vec<&str> = report.lines().filter(|l| l.starts_with("Total") || l.contains("Baseline")).collect();
        eprintln!("conformance {revision}: {}", summary.join("; "));
        assert!(
            output.status.success(),
            "conformance {revision} failed:\n{report}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
