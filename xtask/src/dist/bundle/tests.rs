//! The bundle as Claude Desktop gets it: packed by the official tool, unzipped, and started
//! with the command and arguments its manifest names for this machine, through a handshake
//! and a write.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use state_e2e::{McpClient, ProtocolEra};

use super::super::stand_ins::stand_in_binaries;
use super::super::{BINARIES, MACOS_TARGETS, Package, host_target, macho, package, target_dir};
use super::bundle;

/// `manifest.json`'s command and arguments for `platform`, with `${__dirname}` filled in as
/// a client does.
fn command_for(manifest: &Value, platform: &str, dir: &Path) -> (String, Vec<String>) {
    let config = &manifest["server"]["mcp_config"];
    let chosen = &config["platform_overrides"][platform];
    let pick = |field: &str| if chosen[field].is_null() { config[field].clone() } else { chosen[field].clone() };
    let fill = |text: &str| text.replace("${__dirname}", &dir.display().to_string());
    let command = fill(pick("command").as_str().unwrap());
    let args = pick("args").as_array().unwrap().iter().map(|a| fill(a.as_str().unwrap())).collect();
    (command, args)
}

#[test]
fn the_bundle_unpacks_and_serves_mcp_with_the_command_its_manifest_names() {
    let built = target_dir().join("debug");
    if BINARIES.iter().any(|b| !built.join(b).exists()) {
        assert!(std::env::var_os("STATE_REQUIRE_DIST").is_none(), "the binaries are not built");
        eprintln!("SKIPPED: build the binaries first (cargo build --workspace)");
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("release");
    let host = host_target().unwrap();
    let mut targets = vec![host.clone()];
    let mut packs = vec![(host.clone(), built.clone())];
    for target in MACOS_TARGETS {
        if let Some(stand_ins) = stand_in_binaries(scratch.path(), target) {
            targets.push(target.to_owned());
            packs.push((target.to_owned(), stand_ins));
        }
    }
    for (target, binaries) in packs {
        let release_targets = targets.clone();
        let runnable = built.clone();
        package(&Package { binaries, target, runnable, out: out.clone(), release_targets }).unwrap();
    }
    let version = super::super::workspace_version().unwrap();
    let bundle = bundle(&out, &version).unwrap();
    assert_eq!(bundle.file_name().unwrap().to_string_lossy(), format!("state-{version}.mcpb"));

    let unpacked = scratch.path().join("unpacked");
    let output = Command::new("unzip").arg("-q").arg(&bundle).arg("-d").arg(&unpacked).output().unwrap();
    assert!(output.status.success(), "unzip: {}", String::from_utf8_lossy(&output.stderr));
    let manifest: Value = serde_json::from_slice(&std::fs::read(unpacked.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["version"], json!(version));
    assert_eq!(manifest["server"]["type"], "binary");

    // This machine (Linux): the launcher, which starts the binary of this CPU.
    let (command, args) = command_for(&manifest, "linux", &unpacked);
    let home = scratch.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // The manifest names no database: state-mcp's default, under this (scratch) home.
    let data = home.join(".local/share");
    let env = [("HOME", home.to_str().unwrap()), ("XDG_DATA_HOME", data.to_str().unwrap())];
    let mut client = McpClient::spawn_in(Path::new(&command), &args, &env, Some(&home)).unwrap();
    client.handshake(ProtocolEra::Legacy).unwrap_or_else(|e| panic!("{command}: {e}\n{}", client.stderr()));
    let set = client.call("state_set", json!({"key": "bundled", "value": true})).unwrap();
    assert_eq!(set.json()["version"], 1, "{}", set.text);
    client.shutdown().unwrap();
    assert!(data.join("state/state.redb").exists(), "the default database, in the user's data directory");

    // macOS: one universal binary with both CPUs, each slice the one packed.
    if targets.len() == 3 {
        assert_eq!(manifest["compatibility"]["platforms"], json!(["darwin", "linux"]));
        let (command, _) = command_for(&manifest, "darwin", &unpacked);
        let universal = std::fs::read(&command).unwrap();
        let slices = macho::read_universal(&universal).unwrap();
        assert_eq!(slices.iter().map(|s| s.cpu).collect::<Vec<_>>(), ["arm64", "x86_64"]);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&command).unwrap().permissions().mode();
        assert_eq!(mode & 0o111, 0o111, "{command} is executable after unpacking ({mode:o})");
    }
}
