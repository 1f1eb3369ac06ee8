//! `state-<version>.mcpb`: the MCP Bundle Claude Desktop installs in one click. It holds
//! `state-mcp` for every platform the release built (one universal binary for both Mac CPUs;
//! Linux's per CPU behind a launcher that picks by `uname -m`), and a manifest naming which
//! one a client starts on each platform. The official `mcpb` tool checks the manifest and
//! packs the zip.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};
use serde_json::json;

use super::{is_macos, macho};
use crate::root;

/// Where `package` leaves each target's `state-mcp` until the bundle is made.
fn kept(out: &Path) -> PathBuf {
    out.join(".bundle")
}

/// Keeps `bin/state-mcp` of `target` for the bundle.
pub(super) fn keep_for_bundle(bin: &Path, target: &str, out: &Path) -> Result<()> {
    let dir = kept(out).join(target);
    fs::create_dir_all(&dir)?;
    fs::copy(bin.join("state-mcp"), dir.join("state-mcp"))?;
    Ok(())
}

/// Linux's entry: the bundle's one command for Linux, whichever the CPU.
const LINUX_LAUNCHER: &str = r#"#!/bin/sh
# Starts the state-mcp of this machine's CPU, with the arguments the client gave.
here="$(cd "$(dirname "$0")" && pwd)"
case "$(uname -m)" in
    x86_64|amd64) cpu=x86_64 ;;
    aarch64|arm64) cpu=aarch64 ;;
    *) echo "state-mcp: this bundle has no build for $(uname -m)" >&2; exit 1 ;;
esac
[ -x "$here/$cpu/state-mcp" ] || { echo "state-mcp: this bundle has no build for $cpu Linux" >&2; exit 1; }
exec "$here/$cpu/state-mcp" "$@"
"#;

/// Packs the bundle from what `package` kept; its path.
pub(super) fn bundle(out: &Path, version: &str) -> Result<PathBuf> {
    let kept = kept(out);
    let mut targets: Vec<String> = fs::read_dir(&kept)
        .with_context(|| format!("no binaries were packaged into {}", out.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    targets.sort();
    let stage = out.join(".bundle-stage");
    if stage.exists() {
        fs::remove_dir_all(&stage)?;
    }
    let server = stage.join("server");
    let mut platforms = Vec::new();
    let mut overrides = serde_json::Map::new();
    let mut linux_command = None;

    let macs: Vec<&String> = targets.iter().filter(|t| is_macos(t)).collect();
    if !macs.is_empty() {
        let slices: Vec<Vec<u8>> =
            macs.iter().map(|t| fs::read(kept.join(t).join("state-mcp"))).collect::<Result<_, _>>()?;
        let binary = if let [only] = slices.as_slice() {
            only.clone()
        } else {
            let universal = macho::universal(&slices.iter().map(Vec::as_slice).collect::<Vec<_>>())?;
            // Read back: each slice whole, of the CPU it came from.
            let read: Vec<&str> = macho::read_universal(&universal)?.iter().map(|s| s.cpu).collect();
            let expected: Vec<&str> = macs.iter().map(|t| macho::cpu_of(t)).collect::<Result<_>>()?;
            ensure!(read == expected, "the universal binary holds {read:?}, not {expected:?}");
            universal
        };
        fs::create_dir_all(server.join("darwin"))?;
        write_executable(&server.join("darwin/state-mcp"), &binary)?;
        platforms.push("darwin");
        overrides.insert("darwin".into(), json!({"command": "${__dirname}/server/darwin/state-mcp"}));
    }
    for target in targets.iter().filter(|t| t.contains("-linux-")) {
        let cpu = target.split('-').next().unwrap_or_default();
        fs::create_dir_all(server.join("linux").join(cpu))?;
        write_executable(
            &server.join("linux").join(cpu).join("state-mcp"),
            &fs::read(kept.join(target).join("state-mcp"))?,
        )?;
        if linux_command.is_none() {
            write_executable(&server.join("linux/state-mcp"), LINUX_LAUNCHER.as_bytes())?;
            linux_command = Some("${__dirname}/server/linux/state-mcp");
            platforms.push("linux");
        }
    }
    ensure!(!platforms.is_empty(), "no Linux or macOS binaries to bundle in {}", kept.display());
    // The base command is Linux's where there is one; macOS's comes from its override.
    let (command, entry_point) = match linux_command {
        Some(command) => (command, "server/linux/state-mcp"),
        None => ("${__dirname}/server/darwin/state-mcp", "server/darwin/state-mcp"),
    };
    if linux_command.is_none() {
        overrides.remove("darwin");
    }
    let mut mcp_config = json!({"command": command, "args": [], "env": {}});
    if !overrides.is_empty() {
        mcp_config["platform_overrides"] = serde_json::Value::Object(overrides);
    }
    let manifest = json!({
        "manifest_version": "0.3",
        "name": "state",
        "display_name": "state",
        "version": version,
        "description": "Durable, atomic, shared state for AI agents: versions, transactions, leases, watches",
        "long_description": "Every agent on the machine reaches one store through this server: values with versions, \
            writes that apply only if nobody changed the value since it was read, multi-key transactions, leases \
            with fencing tokens, runs that outlive their workers, checkpoints and notes. Every acknowledged write \
            is on disk before the agent hears of it. The database is state/state.redb in your data directory \
            (~/Library/Application Support on macOS, ~/.local/share on Linux) unless STATE_DB says otherwise; \
            Claude Code, Cursor and other clients that run state-mcp share it.",
        "author": {"name": "The state developers"},
        "license": "MIT OR Apache-2.0",
        "keywords": ["state", "memory", "coordination", "transactions", "agents"],
        "server": {"type": "binary", "entry_point": entry_point, "mcp_config": mcp_config},
        "compatibility": {"platforms": platforms},
        "tools_generated": true,
    });
    fs::write(stage.join("manifest.json"), serde_json::to_string_pretty(&manifest)?)?;
    for doc in ["README.md", "LICENSE-MIT", "LICENSE-APACHE"] {
        fs::copy(root().join(doc), stage.join(doc))?;
    }

    let mcpb = mcpb_tool()?;
    let validated = Command::new(&mcpb).arg("validate").arg(stage.join("manifest.json")).output()?;
    if !validated.status.success() {
        bail!("mcpb validate refused the manifest: {}{}", text(&validated.stdout), text(&validated.stderr));
    }
    let bundle = out.join(format!("state-{version}.mcpb"));
    let packed = Command::new(&mcpb).arg("pack").arg(&stage).arg(&bundle).output()?;
    if !packed.status.success() {
        bail!("mcpb pack failed: {}{}", text(&packed.stdout), text(&packed.stderr));
    }
    fs::remove_dir_all(&stage)?;
    fs::remove_dir_all(&kept)?;
    Ok(bundle)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn write_executable(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::write(path, bytes)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))?;
    Ok(())
}

/// The official `mcpb` tool, pinned in tests/sdk/package-lock.json and installed (once) under
/// target/sdk by tests/sdk/setup.sh.
pub(crate) fn mcpb_tool() -> Result<PathBuf> {
    let sdk = std::env::var_os("STATE_SDK_DIR").map_or_else(|| root().join("target/sdk"), PathBuf::from);
    let mcpb = sdk.join("node/node_modules/.bin/mcpb");
    if !mcpb.exists() {
        let status = Command::new("bash").arg(root().join("tests/sdk/setup.sh")).arg(&sdk).status()?;
        ensure!(status.success(), "tests/sdk/setup.sh could not install the mcpb tool");
    }
    ensure!(mcpb.exists(), "{} is missing after tests/sdk/setup.sh", mcpb.display());
    Ok(mcpb)
}

#[cfg(test)]
mod tests;
