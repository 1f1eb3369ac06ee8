//! Every artifact kind, installed as a user would, with no network and no Rust on PATH, then
//! driven through an MCP handshake and a tool call. Packs the binaries the test build already
//! made (debug, stripped), so it checks the packaging, not the optimiser.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use state_e2e::{McpClient, ProtocolEra};

use super::{BINARIES, Package, package, target_dir};

/// PATH without cargo's or rustup's directories.
fn path_without_rust() -> String {
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':').filter(|dir| !dir.contains(".cargo") && !dir.contains("rustup")).collect::<Vec<_>>().join(":")
}

fn sh(program: &str, args: &[&str], dir: &Path, env: &[(&str, &str)]) -> String {
    let output = Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("PATH", path_without_rust())
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{program} {args:?} failed:\n{stdout}\n{stderr}");
    format!("{stdout}{stderr}")
}

/// A handshake and a write and read through the installed `state-mcp`.
fn serves(program: &Path, scratch: &Path) {
    serves_through(program, &[], &[], scratch);
}

/// The same, through a launcher (`uvx --from WHEEL state-mcp`) given `env`.
fn serves_through(program: &Path, launcher_args: &[&str], env: &[(&str, &str)], scratch: &Path) {
    let db = scratch.join(format!("{}.redb", scratch.file_name().unwrap_or_default().to_string_lossy()));
    let path = path_without_rust();
    let mut args = launcher_args.to_vec();
    args.extend(["--db", db.to_str().unwrap(), "--standalone"]);
    let mut env = env.to_vec();
    env.push(("PATH", path.as_str()));
    let mut client = McpClient::spawn_in(program, &args, &env, Some(scratch)).unwrap();
    client.handshake(ProtocolEra::Legacy).unwrap_or_else(|e| panic!("{}: {e}\n{}", program.display(), client.stderr()));
    let set = client.call("state_set", json!({"key": "installed", "value": true})).unwrap();
    assert_eq!(set.json()["version"], 1, "{}", set.text);
    client.shutdown().unwrap();
}

#[test]
fn every_artifact_installs_without_rust_or_network_and_serves_mcp() {
    let built = target_dir().join("debug");
    if BINARIES.iter().any(|b| !built.join(b).exists()) {
        assert!(std::env::var_os("STATE_REQUIRE_DIST").is_none(), "the binaries are not built in {}", built.display());
        eprintln!("SKIPPED: build the binaries first (cargo build --workspace)");
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("release");
    let target = super::host_target().unwrap();
    let release_targets = vec![target.clone()];
    let packed =
        package(&Package { binaries: built.clone(), target, runnable: built, out: out.clone(), release_targets })
            .unwrap();
    let names: Vec<String> =
        packed.artifacts.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    let sums = std::fs::read_to_string(out.join("SHA256SUMS")).unwrap();
    for name in &names {
        assert!(sums.contains(&format!("  {name}\n")), "{name} has a checksum");
    }

    // The install script, from a local directory, into a home of its own.
    let home = scratch.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let said = sh(
        "sh",
        &[out.join("install.sh").to_str().unwrap(), "--from", out.to_str().unwrap()],
        &home,
        &[("HOME", home.to_str().unwrap())],
    );
    assert!(said.contains("installed state-mcp, state-http and statectl"), "{said}");
    let local = home.join(".local");
    for binary in BINARIES {
        assert!(local.join("bin").join(binary).exists(), "{binary} installed");
        assert!(local.join("share/man/man1").join(format!("{binary}.1")).exists(), "{binary}'s man page");
        assert!(local.join("share/bash-completion/completions").join(binary).exists(), "{binary}'s completions");
    }
    serves(&local.join("bin/state-mcp"), &home);
    // A tampered archive is refused.
    let archive = out.join(names.iter().find(|n| n.ends_with(".tar.gz")).unwrap());
    let original = std::fs::read(&archive).unwrap();
    let mut tampered = original.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 0xff;
    std::fs::write(&archive, tampered).unwrap();
    let refused = Command::new("sh")
        .args([out.join("install.sh").to_str().unwrap(), "--from", out.to_str().unwrap(), "--prefix"])
        .arg(scratch.path().join("elsewhere"))
        .output()
        .unwrap();
    assert!(!refused.status.success(), "a tampered archive was installed");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("does not match its checksum"));
    std::fs::write(&archive, original).unwrap();

    // The wheel, with pip, offline.
    let wheel = out.join(names.iter().find(|n| n.ends_with(".whl")).unwrap());
    let venv = scratch.path().join("venv");
    sh("python3", &["-m", "venv", venv.to_str().unwrap()], scratch.path(), &[]);
    let pip = venv.join("bin/pip");
    sh(pip.to_str().unwrap(), &["install", "--no-index", "--quiet", wheel.to_str().unwrap()], scratch.path(), &[]);
    for binary in BINARIES {
        assert!(venv.join("bin").join(binary).exists(), "the wheel installed {binary}");
    }
    let wheel_place = scratch.path().join("wheel");
    std::fs::create_dir_all(&wheel_place).unwrap();
    serves(&venv.join("bin/state-mcp"), &wheel_place);
    // As MCP users run Python-packaged servers: uvx, and pipx, offline (both from tests/sdk).
    let sdk = std::env::var_os("STATE_SDK_DIR").map_or_else(|| crate::root().join("target/sdk"), PathBuf::from);
    let installers = sdk.join("venv/bin");
    if installers.join("uvx").exists() && installers.join("pipx").exists() {
        let uv = scratch.path().join("uv");
        std::fs::create_dir_all(&uv).unwrap();
        let (cache, tools) = (uv.join("cache"), uv.join("tools"));
        let env = [("UV_CACHE_DIR", cache.to_str().unwrap()), ("UV_TOOL_DIR", tools.to_str().unwrap())];
        let from = ["--offline", "--from", wheel.to_str().unwrap(), "state-mcp"];
        serves_through(&installers.join("uvx"), &from, &env, &uv);
        let pipx = scratch.path().join("pipx");
        let (home, bin) = (pipx.join("home"), pipx.join("bin"));
        let env = [("PIPX_HOME", home.to_str().unwrap()), ("PIPX_BIN_DIR", bin.to_str().unwrap())];
        let args = ["install", "--pip-args=--no-index", wheel.to_str().unwrap()];
        sh(installers.join("pipx").to_str().unwrap(), &args, scratch.path(), &env);
        serves(&bin.join("state-mcp"), &pipx);
    } else {
        assert!(std::env::var_os("STATE_REQUIRE_DIST").is_none(), "uvx and pipx are not in {}", installers.display());
        eprintln!("SKIPPED: uvx and pipx (bash tests/sdk/setup.sh installs them)");
    }

    // The npm packages, offline: the one npx runs, and the platform's binaries beside it.
    let project = scratch.path().join("npm-project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("package.json"), r#"{"name": "uses-state", "private": true}"#).unwrap();
    let tarballs: Vec<PathBuf> = names.iter().filter(|n| n.ends_with(".tgz")).map(|n| out.join(n)).collect();
    assert_eq!(tarballs.len(), 2, "{names:?}");
    // The launcher names exactly the platform packages of the release (issue 31: it named
    // linux-arm64, which was not in it, and npm went looking for it in the registry for
    // minutes): an install from the two tarballs, with a registry nobody answers at, asks it
    // nothing and finishes.
    let main = tarballs.iter().find(|t| t.file_name().unwrap().to_string_lossy().starts_with("state-mcp-0")).unwrap();
    let manifest = sh("tar", &["-xzOf", main.to_str().unwrap(), "package/package.json"], scratch.path(), &[]);
    let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    let optional: Vec<&String> = manifest["optionalDependencies"].as_object().unwrap().keys().collect();
    let platform = tarballs.iter().find(|t| t != &main).unwrap();
    let platform_manifest =
        sh("tar", &["-xzOf", platform.to_str().unwrap(), "package/package.json"], scratch.path(), &[]);
    let platform_name = serde_json::from_str::<serde_json::Value>(&platform_manifest).unwrap()["name"].clone();
    assert_eq!(optional, [platform_name.as_str().unwrap()], "{manifest}");
    let mut install = vec!["install", "--no-audit", "--no-fund", "--silent", "--fetch-retries=0"];
    install.extend(tarballs.iter().map(|t| t.to_str().unwrap()));
    let env = [
        ("npm_config_cache", scratch.path().join("npm-cache").to_str().unwrap().to_owned()),
        ("npm_config_registry", "http://127.0.0.1:9/".to_owned()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let started = std::time::Instant::now();
    sh("npm", &install, &project, &env);
    assert!(started.elapsed() < std::time::Duration::from_secs(60), "npm install took {:?}", started.elapsed());
    serves(&project.join("node_modules/.bin/state-mcp"), &project);
    let help = sh(project.join("node_modules/.bin/statectl").to_str().unwrap(), &["--help"], &project, &[]);
    assert!(help.contains("statectl"), "{help}");
}

#[test]
fn an_inner_build_does_not_inherit_the_xtask_packages_variables() {
    // Tests run with cargo's package variables set, as `cargo xtask` does.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let command = crate::cargo();
    let removed: Vec<String> =
        command.get_envs().filter(|(_, v)| v.is_none()).map(|(k, _)| k.to_string_lossy().into_owned()).collect();
    assert!(removed.iter().any(|k| k == "CARGO_MANIFEST_DIR"), "{removed:?}");
    assert!(removed.iter().any(|k| k == "CARGO_PKG_NAME"), "{removed:?}");
    assert!(!removed.iter().any(|k| k == "CARGO_HOME" || k == "CARGO_TARGET_DIR"), "{removed:?}");
}
