//! The registry-installed clients the tests drive the binaries with: the official MCP SDKs,
//! LangGraph and its conformance suite, in a Python venv and node_modules that
//! `tests/sdk/setup.sh` installs into `target/sdk` (or STATE_SDK_DIR).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the SDKs are installed, or None (after saying the test is skipped) when they are not,
/// unless STATE_REQUIRE_SDKS is set (CI installs them and sets it): then missing SDKs fail.
pub fn dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("STATE_SDK_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => repository().join("target/sdk"),
    };
    let installed = dir.join(".installed").is_file();
    if !installed {
        assert!(std::env::var_os("STATE_REQUIRE_SDKS").is_none(), "the SDKs are not installed in {}", dir.display());
        eprintln!("SKIPPED: the SDKs are not installed (bash tests/sdk/setup.sh)");
    }
    installed.then_some(dir)
}

/// The repository's root directory.
pub fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs a client script to success and returns its standard output (its last line is its
/// verdict); a failure shows both streams.
pub fn run(command: &mut Command) -> String {
    let output = command.output().unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{command:?} failed\n{stdout}\n--- stderr ---\n{stderr}");
    stdout
}
