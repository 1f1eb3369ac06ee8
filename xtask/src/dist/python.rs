//! The pure-Python packages of `clients/python` as wheels of the release: the client and the
//! LangGraph checkpointer and store, built by `packaging/pure_wheel.py` from their
//! pyproject.toml with the standard library alone (no package index is reached).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::root;

/// The packages, in the order a user installs them (the checkpointer needs the client).
pub(crate) const PACKAGES: [&str; 2] = ["state-client", "langgraph-checkpoint-state"];

/// Writes one wheel per package into `out`; their paths.
pub(crate) fn wheels(out: &Path, version: &str) -> Result<Vec<PathBuf>> {
    let mut python = Command::new("python3");
    python.arg(root().join("packaging/pure_wheel.py")).args(["--version", version, "--out"]).arg(out);
    for license in ["LICENSE-MIT", "LICENSE-APACHE"] {
        python.arg("--license").arg(root().join(license));
    }
    for package in PACKAGES {
        python.arg(root().join("clients/python").join(package));
    }
    let output = python.output().context("cannot run python3 to build the Python packages' wheels")?;
    if !output.status.success() {
        bail!("building the Python packages' wheels failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    Ok(String::from_utf8_lossy(&output.stdout).lines().map(PathBuf::from).collect())
}

#[cfg(test)]
mod tests;
