//! The official MCP SDKs as clients: the Python SDK calls every tool of every profile and
//! checks each structured result against the tool's outputSchema (`tests/sdk/every_tool.py`);
//! the TypeScript SDK drives the sidecar profile's workflow and lease tools and discovers a
//! group through `state_tools` (`tests/sdk/sidecar.mjs`), and calls the memory profile's nine
//! tools (`tests/sdk/memory.mjs`).
//!
//! The SDKs are installed by `tests/sdk/setup.sh` into `target/sdk` (or STATE_SDK_DIR); the
//! tests are skipped, saying so, when they are missing, unless STATE_REQUIRE_SDKS is set (CI
//! installs them and sets it).

use std::path::PathBuf;
use std::process::Command;

use state_e2e::sdk::{self, run};

use crate::binary;

fn script(name: &str) -> PathBuf {
    sdk::repository().join("tests/sdk").join(name)
}

#[test]
fn the_python_sdk_accepts_every_result_of_every_profile() {
    let Some(sdk) = sdk::dir() else { return };
    let scratch = tempfile::tempdir().unwrap();
    let out =
        run(Command::new(sdk.join("venv/bin/python")).arg(script("every_tool.py")).arg(binary()).arg(scratch.path()));
    for profile in ["native", "default", "agentcheckpoint", "sidecar", "caxton", "sage", "goldfish", "memory"] {
        assert!(out.contains(&format!("{profile}: ")), "{profile} was not run: {out}");
    }
    assert!(out.lines().last().unwrap_or("").ends_with("results checked"), "{out}");
}

#[test]
fn the_typescript_sdk_drives_the_sidecar_profile_and_discovers_a_group() {
    let Some(sdk) = sdk::dir() else { return };
    let scratch = tempfile::tempdir().unwrap();
    // Node resolves packages from the script's own directory: run a copy beside them.
    let copy = sdk.join("node/sidecar.mjs");
    std::fs::copy(script("sidecar.mjs"), &copy).unwrap();
    let out = run(Command::new("node").arg(&copy).arg(binary()).arg(scratch.path()));
    assert!(out.lines().last().unwrap_or("").ends_with("1 list changes seen"), "{out}");
}

#[test]
fn the_typescript_sdk_accepts_every_memory_tool_and_result() {
    let Some(sdk) = sdk::dir() else { return };
    let scratch = tempfile::tempdir().unwrap();
    let copy = sdk.join("node/memory.mjs");
    std::fs::copy(script("memory.mjs"), &copy).unwrap();
    let out = run(Command::new("node").arg(&copy).arg(binary()).arg(scratch.path()));
    assert!(out.lines().last().unwrap_or("").ends_with("9 memory tools called"), "{out}");
}
