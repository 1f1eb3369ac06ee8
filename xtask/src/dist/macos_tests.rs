//! The macOS artifacts, installed here as a Mac would install them: pip resolving a wheel for
//! a Mac's platform, npm installing for `--os darwin`, install.sh on a machine that says it is
//! a Mac. The binaries are stand-ins linked by zig (`stand_ins.rs`); the packaging, the tags
//! and what lands where are the real thing. What this cannot show is a Mac running them: the
//! README says what was and was not run on one.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::stand_ins::stand_in_binaries;
use super::{BINARIES, MACOS_TARGETS, Package, macho, package, target_dir};

fn run_ok(command: &mut Command) -> String {
    let output = command.output().unwrap_or_else(|e| panic!("{command:?}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{command:?} failed:\n{text}");
    text
}

/// A release of both macOS targets from stand-ins, in `out`; the stand-ins' directories.
fn macos_release(scratch: &Path, out: &Path) -> Option<Vec<PathBuf>> {
    release_of(scratch, out, &MACOS_TARGETS)
}

/// A release of `targets` from stand-ins, in `out`; the stand-ins' directories, in order.
fn release_of(scratch: &Path, out: &Path, targets: &[&str]) -> Option<Vec<PathBuf>> {
    let runnable = target_dir().join("debug");
    if BINARIES.iter().any(|b| !runnable.join(b).exists()) {
        assert!(std::env::var_os("STATE_REQUIRE_DIST").is_none(), "the binaries are not built");
        eprintln!("SKIPPED: build the binaries first (cargo build --workspace)");
        return None;
    }
    let mut built = Vec::new();
    for target in targets {
        let binaries = stand_in_binaries(scratch, target)?;
        let release_targets = targets.iter().map(|t| (*t).to_owned()).collect();
        package(&Package {
            binaries: binaries.clone(),
            target: (*target).to_owned(),
            runnable: runnable.clone(),
            out: out.to_owned(),
            release_targets,
        })
        .unwrap();
        built.push(binaries);
    }
    Some(built)
}

fn assert_is(file: &Path, stand_in: &Path, cpu: &str) {
    let bytes = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    assert_eq!(bytes, std::fs::read(stand_in).unwrap(), "{} is not the packed binary", file.display());
    assert_eq!(macho::read(&bytes).unwrap().cpu, cpu, "{}", file.display());
}

#[test]
fn pip_on_a_mac_picks_the_wheel_of_its_cpu_and_places_its_binaries() {
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("release");
    let Some(built) = macos_release(scratch.path(), &out) else { return };
    let version = super::workspace_version().unwrap();
    for (tag, _) in [("macosx_11_0_arm64", 0), ("macosx_10_12_x86_64", 1)] {
        let wheel = out.join(format!("state_mcp-{version}-py3-none-{tag}.whl"));
        assert!(wheel.exists(), "{} was not written", wheel.display());
    }
    let venv = scratch.path().join("venv");
    run_ok(Command::new("python3").args(["-m", "venv"]).arg(&venv));
    // A Mac on macOS 14 of each CPU: pip's own resolution, offline, from the release alone.
    for (platform, cpu, stand_ins) in
        [("macosx_14_0_arm64", "arm64", &built[0]), ("macosx_14_0_x86_64", "x86_64", &built[1])]
    {
        let into = scratch.path().join(platform);
        run_ok(
            Command::new(venv.join("bin/pip"))
                .args(["install", "--quiet", "--no-index", "--only-binary=:all:", "--platform", platform])
                .arg("--find-links")
                .arg(&out)
                .arg("--target")
                .arg(&into)
                .arg("state-mcp"),
        );
        for binary in BINARIES {
            assert_is(&into.join("bin").join(binary), &stand_ins.join(binary), cpu);
        }
    }
    // An Intel Mac older than the release's floor, and Linux, find nothing to install.
    for platform in ["macosx_10_11_x86_64", "manylinux_2_28_x86_64"] {
        let refused = Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "--no-index", "--only-binary=:all:", "--platform", platform])
            .arg("--find-links")
            .arg(&out)
            .arg("--target")
            .arg(scratch.path().join("nowhere"))
            .arg("state-mcp")
            .output()
            .unwrap();
        assert!(!refused.status.success(), "pip installed a macOS wheel for {platform}");
    }
}

#[test]
fn npm_for_darwin_installs_the_package_of_its_cpu_and_the_launcher_knows_it() {
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("release");
    let Some(_) = macos_release(scratch.path(), &out) else { return };
    let version = super::workspace_version().unwrap();
    let main = out.join(format!("state-mcp-{version}.tgz"));
    let platforms = run_ok(Command::new("tar").arg("-xzOf").arg(&main).arg("package/platforms.json"));
    let platforms: serde_json::Value = serde_json::from_str(&platforms).unwrap();
    assert_eq!(
        platforms,
        serde_json::json!({"darwin arm64": "@state-mcp/darwin-arm64", "darwin x64": "@state-mcp/darwin-x64"})
    );
    // A project that depends on the launcher and, optionally, on one platform package, both
    // from the release's tarballs: npm judges the optional one by its os and cpu, as it does
    // when `npm install state-mcp` finds them in a registry (offline, the tarballs stand in).
    let npm = |project: &Path, platform_args: &[&str], npm_cpu: &str, release: &Path| {
        std::fs::create_dir_all(project).unwrap();
        let manifest = serde_json::json!({
            "name": "uses-state", "private": true,
            "dependencies": {"state-mcp": format!("file:{}", release.join(format!("state-mcp-{version}.tgz")).display())},
            "optionalDependencies": {format!("@state-mcp/darwin-{npm_cpu}"): format!(
                "file:{}", release.join(format!("state-mcp-darwin-{npm_cpu}-{version}.tgz")).display()
            )},
        });
        std::fs::write(project.join("package.json"), manifest.to_string()).unwrap();
        let output = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--loglevel=error", "--fetch-retries=0"])
            .args(platform_args)
            .env("npm_config_cache", scratch.path().join("npm-cache"))
            .env("npm_config_registry", "http://127.0.0.1:9/")
            .current_dir(project)
            .output()
            .unwrap();
        assert!(output.status.success(), "npm install: {}", String::from_utf8_lossy(&output.stderr));
        project.join(format!("node_modules/@state-mcp/darwin-{npm_cpu}/bin"))
    };
    // Each CPU from a release of that CPU alone (offline, npm could not look up the other's
    // manifest), installed for a Mac of that CPU.
    for (target, cpu, npm_cpu) in [(MACOS_TARGETS[0], "arm64", "arm64"), (MACOS_TARGETS[1], "x86_64", "x64")] {
        let alone = scratch.path().join(format!("release-{npm_cpu}"));
        let built = release_of(&scratch.path().join(npm_cpu), &alone, &[target]).unwrap();
        let project = scratch.path().join(format!("project-{npm_cpu}"));
        let placed = npm(&project, &["--os", "darwin", "--cpu", npm_cpu], npm_cpu, &alone);
        for binary in BINARIES {
            assert_is(&placed.join(binary), &built[0].join(binary), cpu);
        }
        // The launcher npx runs is there too.
        assert!(project.join("node_modules/.bin/state-mcp").exists());
        // On this Linux machine, npm leaves the Mac package out: its os and cpu are set.
        let here = npm(&scratch.path().join(format!("linux-{npm_cpu}")), &[], npm_cpu, &alone);
        assert!(!here.exists(), "npm installed a darwin package on Linux");
    }
}

/// A `uname` (and `sysctl`) that answer as a Mac does, first on PATH.
fn pretend_to_be_a_mac(dir: &Path, machine: &str, translated: bool) -> String {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).unwrap();
    let uname = format!("#!/bin/sh\ncase \"$1\" in -s) echo Darwin ;; -m) echo {machine} ;; *) echo Darwin ;; esac\n");
    let sysctl = format!("#!/bin/sh\necho {}\n", u8::from(translated));
    for (name, script) in [("uname", uname), ("sysctl", sysctl)] {
        std::fs::write(dir.join(name), script).unwrap();
        std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default())
}

#[test]
fn install_sh_on_a_mac_installs_the_archive_of_its_cpu() {
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("release");
    let Some(built) = macos_release(scratch.path(), &out) else { return };
    // Apple silicon, an Intel Mac, and a shell under Rosetta on Apple silicon.
    for (name, machine, translated, cpu, stand_ins) in [
        ("apple-silicon", "arm64", false, "arm64", &built[0]),
        ("intel", "x86_64", false, "x86_64", &built[1]),
        ("rosetta", "x86_64", true, "arm64", &built[0]),
    ] {
        let path = pretend_to_be_a_mac(&scratch.path().join(format!("{name}-tools")), machine, translated);
        let prefix = scratch.path().join(name);
        let said = run_ok(
            Command::new("sh")
                .arg(out.join("install.sh"))
                .arg("--from")
                .arg(&out)
                .arg("--prefix")
                .arg(&prefix)
                .env("PATH", path),
        );
        assert!(said.contains("apple-darwin"), "{said}");
        for binary in BINARIES {
            assert_is(&prefix.join("bin").join(binary), &stand_ins.join(binary), cpu);
            assert!(prefix.join("share/man/man1").join(format!("{binary}.1")).exists());
        }
    }
}
