//! `cargo xtask dist`: what a release ships, built from this checkout.
//!
//! - `state-<version>-<target>.tar.gz`: `bin/` (state-mcp, state-http, statectl), `share/` (man
//!   pages and bash, zsh and fish completions of all three), README, CHANGELOG, licences;
//! - `state_mcp-<version>-py3-none-<platform>.whl`: the same binaries as a Python wheel's
//!   scripts (`pip install`, `pipx`, `uvx`);
//! - `state-mcp-<version>.tgz` and `state-mcp-<platform>-<version>.tgz`: npm packages, the
//!   first running the binary of the second (`npx state-mcp`);
//! - `state-<version>.mcpb`: an MCP Bundle (Claude Desktop's one-click install) holding
//!   `state-mcp` for every platform built, checked and packed by the official `mcpb` tool;
//! - `server.json`, the MCP Registry's entry: the wheel, the npm package, the container image
//!   and the bundle (`packaging/registry/publisher.json` says under which names);
//! - `state_client-<version>-py3-none-any.whl` and `langgraph_checkpoint_state-…whl`: the
//!   Python client and the LangGraph checkpointer and store (`clients/python`);
//! - `install.sh`, which installs an archive after checking it, and `SHA256SUMS` of it all.
//!
//! Linux and macOS targets are built here alike: cross builds link with zig (cargo-zigbuild),
//! macOS ones against the stand-in SDK in `packaging/macos-sdk`, and every macOS binary is
//! read back (`macho.rs`) to check its CPU, its libraries and the oldest macOS it declares.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::{cargo, root, run};

mod bundle;
pub(crate) mod macho;
mod python;
pub(crate) mod registry;

/// Every binary the product ships.
pub(crate) const BINARIES: [&str; 3] = ["state-mcp", "state-http", "statectl"];

/// What to package, and where.
pub(crate) struct Package {
    /// Where the built binaries are (`target/<profile>` or `target/<triple>/<profile>`).
    pub(crate) binaries: PathBuf,
    /// The target they were built for (`x86_64-unknown-linux-gnu`).
    pub(crate) target: String,
    /// Binaries this machine can run, of the same version, to write man pages and
    /// completions with (the packaged ones themselves unless cross-compiled).
    pub(crate) runnable: PathBuf,
    pub(crate) out: PathBuf,
    /// Every target of the release: the npm launcher offers exactly their packages.
    pub(crate) release_targets: Vec<String>,
}

/// What was written.
pub(crate) struct Packed {
    pub(crate) artifacts: Vec<PathBuf>,
    /// Each binary as shipped, in bytes.
    pub(crate) binary_sizes: Vec<(&'static str, u64)>,
}

pub(crate) fn dist(args: &[String]) -> Result<()> {
    let mut profile = "dist".to_owned();
    let mut build = true;
    let mut out = root().join("dist");
    let host = host_target()?;
    let mut targets = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--profile" => profile = rest.next().context("--profile needs a cargo profile")?.clone(),
            "--no-build" => build = false,
            "--out" => out = PathBuf::from(rest.next().context("--out needs a directory")?),
            "--target" => targets.push(rest.next().context("--target needs a target triple")?.clone()),
            "--macos" => targets.extend(MACOS_TARGETS.map(str::to_owned)),
            other => bail!(
                "unknown argument `{other}` (dist takes --profile NAME, --target TRIPLE (repeatable), --macos \
                 (both macOS targets), --no-build, --out DIR)"
            ),
        }
    }
    if targets.is_empty() {
        targets.push(host.clone());
    }
    targets.dedup();
    let dir = match profile.as_str() {
        "dev" | "test" => "debug",
        "bench" => "release",
        other => other,
    };
    // The host's binaries come first: they write every target's man pages and completions.
    if build {
        build_for(&profile, None)?;
    }
    let runnable = target_dir().join(dir);
    let mut artifacts = Vec::new();
    for target in &targets {
        // A GNU/Linux release is linked against the same old glibc whichever machine builds
        // it, the host's included: both Linux wheels then carry one baseline tag
        // (manylinux_2_28), and the binaries run on the systems that tag promises.
        let binaries = if *target == host && !target.ends_with("-linux-gnu") {
            runnable.clone()
        } else {
            if build {
                build_for(&profile, Some(target))?;
            }
            target_dir().join(target).join(dir)
        };
        let packed = package(&Package {
            binaries,
            target: target.clone(),
            runnable: runnable.clone(),
            out: out.clone(),
            release_targets: targets.clone(),
        })?;
        eprintln!();
        for (binary, size) in &packed.binary_sizes {
            eprintln!("{target} {binary:<12} {:>6.1} MB", *size as f64 / 1e6);
        }
        artifacts.extend(packed.artifacts);
    }
    let version = workspace_version()?;
    let bundled = bundle::bundle(&out, &version)?;
    artifacts.push(registry::server_json(&out, &version, &bundled, &registry::Publisher::load()?)?);
    artifacts.push(bundled);
    artifacts.extend(python::wheels(&out, &version)?);
    write_sums(&out)?;
    for path in &artifacts {
        let size = fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        eprintln!("{:<56} {:>6.1} MB", path.file_name().unwrap_or_default().to_string_lossy(), size as f64 / 1e6);
    }
    eprintln!("\nin {}; verify with: cd {} && sha256sum -c SHA256SUMS", out.display(), out.display());
    Ok(())
}

/// The two macOS targets: Apple silicon and Intel Macs.
pub(crate) const MACOS_TARGETS: [&str; 2] = ["aarch64-apple-darwin", "x86_64-apple-darwin"];

pub(crate) fn is_macos(target: &str) -> bool {
    target.ends_with("-apple-darwin")
}

/// Builds the three binaries, for this machine or (`target`) another, with zig as the linker.
fn build_for(profile: &str, target: Option<&str>) -> Result<()> {
    let mut command = cargo();
    match target {
        None => {
            command.args(["build", "--profile", profile, "--locked"]);
        }
        Some(target) => {
            // zigbuild's `<triple>.<glibc>` pins the oldest glibc the binaries need.
            let pinned = if target.ends_with("-gnu") { format!("{target}.{CROSS_GLIBC}") } else { target.to_owned() };
            command.args(["zigbuild", "--profile", profile, "--locked", "--target", &pinned]);
            command.envs(cross_env(target)?);
        }
    }
    for bin in BINARIES {
        command.args(["--bin", bin]);
    }
    run(command)
}

/// The oldest glibc a cross-built binary asks for.
const CROSS_GLIBC: &str = "2.28";

/// The cross toolchain's pins: what the macOS links were checked with.
const CARGO_ZIGBUILD: &str = "0.24.1";
const ZIGLANG: &str = "0.17.1";

/// What a cross build for `target` runs with: a PATH that finds zig, and for macOS the oldest
/// macOS to declare and the stand-in SDK whose frameworks the binaries link.
pub(crate) fn cross_env(target: &str) -> Result<Vec<(String, String)>> {
    let mut env = vec![("PATH".to_owned(), cross_toolchain(target)?)];
    if is_macos(target) {
        let (major, minor) = macho::min_macos_of(target)?;
        env.push(("MACOSX_DEPLOYMENT_TARGET".to_owned(), format!("{major}.{minor}")));
        env.push(("SDKROOT".to_owned(), root().join("packaging/macos-sdk").display().to_string()));
    }
    Ok(env)
}

/// Makes sure a cross build can run (the target's standard library, cargo-zigbuild, zig from
/// PyPI in a venv under target/cross); the PATH to run it with.
fn cross_toolchain(target: &str) -> Result<String> {
    let installed = Command::new("rustup").args(["target", "list", "--installed"]).output();
    if !installed.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).lines().any(|l| l == target)) {
        let mut rustup = Command::new("rustup");
        rustup.args(["target", "add", target]);
        run(rustup)?;
    }
    if !cargo().args(["zigbuild", "--version"]).output().is_ok_and(|o| o.status.success()) {
        let mut install = cargo();
        install.args(["install", "cargo-zigbuild", "--version", CARGO_ZIGBUILD, "--locked"]);
        run(install)?;
    }
    let venv = target_dir().join("cross/venv");
    if !venv.join("bin/python3").exists() {
        let mut create = Command::new("python3");
        create.arg("-m").arg("venv").arg(&venv);
        run(create)?;
    }
    let has_zig = Command::new(venv.join("bin/python3")).args(["-m", "ziglang", "version"]).output();
    if !has_zig.is_ok_and(|o| o.status.success()) {
        let mut pip = Command::new(venv.join("bin/pip"));
        pip.args(["install", "--quiet", &format!("ziglang=={ZIGLANG}")]);
        run(pip)?;
    }
    // cargo-zigbuild runs `python3 -m ziglang`: the venv's python first.
    Ok(format!("{}:{}", venv.join("bin").display(), std::env::var("PATH").unwrap_or_default()))
}

/// Where cargo puts what it builds.
pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from)
}

/// Packs the binaries in `package.binaries` into every artifact kind; the paths written.
pub(crate) fn package(package: &Package) -> Result<Packed> {
    let version = workspace_version()?;
    let target = package.target.as_str();
    let out = &package.out;
    fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let scratch = out.join(".stage");
    if scratch.exists() {
        fs::remove_dir_all(&scratch)?;
    }

    // The binaries, stripped (a `dist` build is already; a debug one shrinks several-fold).
    // macOS ones are read back: the CPU, the libraries, the oldest macOS (for the wheel's tag).
    let bin = scratch.join("bin");
    fs::create_dir_all(&bin)?;
    let mut binary_sizes = Vec::new();
    let mut min_macos = (0, 0);
    for name in BINARIES {
        let built = package.binaries.join(name);
        fs::copy(&built, bin.join(name)).with_context(|| format!("{} is not built", built.display()))?;
        if is_macos(target) {
            let found = macho::check_release_binary(&bin.join(name), target)?;
            let libraries: Vec<&str> =
                found.libraries.iter().map(|l| l.rsplit('/').next().unwrap_or(l.as_str())).collect();
            eprintln!(
                "{target} {name}: Mach-O {}, macOS {}.{} or later, {} signed pages match, {} debugging and {} \
                 local symbols, loads {}",
                found.cpu,
                found.min_macos.0,
                found.min_macos.1,
                found.signature.as_ref().map_or(0, |s| s.pages),
                found.debug_symbols,
                found.local_symbols,
                libraries.join(", ")
            );
            min_macos = min_macos.max(found.min_macos);
        } else {
            strip(&bin.join(name));
        }
        binary_sizes.push((name, fs::metadata(bin.join(name))?.len()));
    }

    let mut written = vec![archive(&scratch, &bin, &package.runnable, &version, target, out)?];
    let platform = if is_macos(target) {
        // pip takes a macosx_<major>_<minor> wheel on that macOS and every later one.
        format!("macosx_{}_{}_{}", min_macos.0, min_macos.1, macho::cpu_of(target)?)
    } else {
        manylinux_platform(&bin, target)?
    };
    written.push(wheel(&bin, &version, &platform, out)?);
    bundle::keep_for_bundle(&bin, target, out)?;
    written.extend(npm(&scratch, &bin, &version, target, &package.release_targets, out)?);
    let installer = out.join("install.sh");
    fs::copy(root().join("packaging/install.sh"), &installer)?;
    written.push(installer);
    fs::remove_dir_all(&scratch)?;
    write_sums(out)?;
    Ok(Packed { artifacts: written, binary_sizes })
}

/// `SHA256SUMS` of every artifact in `out` (all targets packed there so far).
fn write_sums(out: &Path) -> Result<()> {
    let mut names: Vec<String> = fs::read_dir(out)?
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.path().is_file())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name != "SHA256SUMS" && !name.starts_with('.'))
        .collect();
    names.sort();
    let mut sums = String::new();
    for name in names {
        sums.push_str(&format!("{:x}  {name}\n", Sha256::digest(fs::read(out.join(&name))?)));
    }
    fs::write(out.join("SHA256SUMS"), sums)?;
    Ok(())
}

fn strip(binary: &Path) {
    // binutils' strip reads only this machine's architecture; a cross build is stripped by cargo.
    match Command::new("strip").arg("--strip-debug").arg(binary).stderr(std::process::Stdio::null()).status() {
        Ok(status) if status.success() => {}
        // Without binutils the binary ships as built: larger, not wrong.
        _ => eprintln!("note: could not strip {}", binary.display()),
    }
}

/// `state-<version>-<target>.tar.gz`.
fn archive(scratch: &Path, bin: &Path, runnable: &Path, version: &str, target: &str, out: &Path) -> Result<PathBuf> {
    let name = format!("state-{version}-{target}");
    let stage = scratch.join(&name);
    fs::create_dir_all(stage.join("bin"))?;
    let generated = scratch.join("generated");
    for binary in BINARIES {
        fs::copy(bin.join(binary), stage.join("bin").join(binary))?;
        let program = if runnable.join(binary).exists() { runnable.join(binary) } else { bin.join(binary) };
        let generate = Command::new(program).arg("generate").arg("--dir").arg(generated.join(binary)).output();
        let generate = generate.with_context(|| format!("cannot run {binary} generate"))?;
        if !generate.status.success() {
            bail!("{binary} generate failed: {}", String::from_utf8_lossy(&generate.stderr));
        }
        let from = generated.join(binary);
        let share = stage.join("share");
        place(&from.join(format!("{binary}.1")), &share.join("man/man1"))?;
        place_as(&from.join(format!("{binary}.bash")), &share.join("bash-completion/completions").join(binary))?;
        place(&from.join(format!("_{binary}")), &share.join("zsh/site-functions"))?;
        place(&from.join(format!("{binary}.fish")), &share.join("fish/vendor_completions.d"))?;
    }
    for doc in ["README.md", "CHANGELOG.md", "LICENSE-MIT", "LICENSE-APACHE"] {
        fs::copy(root().join(doc), stage.join(doc)).with_context(|| format!("{doc} is missing"))?;
    }
    let archive = out.join(format!("{name}.tar.gz"));
    let mut tar = Command::new("tar");
    tar.arg("-czf").arg(&archive).arg("-C").arg(scratch).arg(&name);
    run(tar)?;
    Ok(archive)
}

fn place(file: &Path, dir: &Path) -> Result<()> {
    place_as(file, &dir.join(file.file_name().unwrap_or_default()))
}

fn place_as(file: &Path, to: &Path) -> Result<()> {
    if let Some(dir) = to.parent() {
        fs::create_dir_all(dir)?;
    }
    fs::copy(file, to).with_context(|| format!("{} was not generated", file.display()))?;
    Ok(())
}

/// A Linux wheel's platform tag: the oldest glibc the binaries run on.
fn manylinux_platform(bin: &Path, target: &str) -> Result<String> {
    let mut glibc = (2, 17);
    for binary in BINARIES {
        glibc = glibc.max(glibc_needed(&bin.join(binary))?);
    }
    let arch = target.split('-').next().unwrap_or(std::env::consts::ARCH);
    Ok(format!("manylinux_{}_{}_{arch}", glibc.0, glibc.1))
}

/// The wheel, tagged with `platform` (`manylinux_2_28_x86_64`, `macosx_11_0_arm64`).
fn wheel(bin: &Path, version: &str, platform: &str, out: &Path) -> Result<PathBuf> {
    let mut python = Command::new("python3");
    python
        .arg(root().join("packaging/wheel.py"))
        .args(["--version", version, "--platform", platform])
        .arg("--bin")
        .arg(bin)
        .arg("--readme")
        .arg(root().join("README.md"))
        .arg("--license")
        .arg(root().join("LICENSE-MIT"))
        .arg("--license")
        .arg(root().join("LICENSE-APACHE"))
        .arg("--out")
        .arg(out);
    let output = python.output().context("cannot run python3 to build the wheel")?;
    if !output.status.success() {
        bail!("building the wheel failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()))
}

/// The newest `GLIBC_2.N` symbol version a binary refers to.
fn glibc_needed(binary: &Path) -> Result<(u32, u32)> {
    let bytes = fs::read(binary)?;
    let mut newest = (2, 17);
    let marker = b"GLIBC_2.";
    let mut at = 0;
    while let Some(found) = bytes[at..].windows(marker.len()).position(|w| w == marker) {
        let start = at + found + marker.len();
        let digits: String = bytes[start..].iter().take_while(|b| b.is_ascii_digit()).map(|b| char::from(*b)).collect();
        if let Ok(minor) = digits.parse::<u32>() {
            newest = newest.max((2, minor));
        }
        at = start;
    }
    Ok(newest)
}

/// npm's platform name for a target (`linux-x64`, `darwin-arm64`): `process.platform` and
/// `process.arch` of the machines it runs on.
pub(crate) fn npm_platform(target: &str) -> Result<String> {
    let arch = match target.split('-').next().unwrap_or_default() {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => bail!("no npm package for {other} yet"),
    };
    let os = if target.contains("-linux-") {
        "linux"
    } else if is_macos(target) {
        "darwin"
    } else {
        bail!("no npm package for {target} yet")
    };
    Ok(format!("{os}-{arch}"))
}

/// The platform package (the binaries) and the package `npx state-mcp` runs, whose optional
/// dependencies are exactly the platform packages of this release (`release_targets`): an
/// install never looks for one the release does not hold, in a registry or anywhere else.
fn npm(
    scratch: &Path,
    bin: &Path,
    version: &str,
    target: &str,
    release_targets: &[String],
    out: &Path,
) -> Result<Vec<PathBuf>> {
    let platform = npm_platform(target)?;
    let (os, cpu) = platform.split_once('-').unwrap_or(("linux", "x64"));
    let platform_name = format!("@state-mcp/{platform}");
    let description = "Durable, atomic, shared state for AI agents: an MCP server, an HTTP API and a CLI";

    let binaries = scratch.join("npm-platform");
    fs::create_dir_all(binaries.join("bin"))?;
    for binary in BINARIES {
        fs::copy(bin.join(binary), binaries.join("bin").join(binary))?;
    }
    let manifest = json!({
        "name": platform_name, "version": version,
        "description": format!("The {platform} binaries of state-mcp"),
        "license": "MIT OR Apache-2.0", "os": [os], "cpu": [cpu], "files": ["bin/"],
        "preferUnplugged": true,
    });
    fs::write(binaries.join("package.json"), serde_json::to_string_pretty(&manifest)?)?;
    fs::copy(root().join("LICENSE-MIT"), binaries.join("LICENSE-MIT"))?;

    let main = scratch.join("npm-main");
    fs::create_dir_all(main.join("bin"))?;
    fs::copy(root().join("packaging/npm/run.js"), main.join("run.js"))?;
    // Which package holds the binaries for each `process.platform process.arch`, as the
    // launcher looks them up: only the platforms released.
    let mut platforms = serde_json::Map::new();
    let mut optional = serde_json::Map::new();
    for released in release_targets {
        let name = npm_platform(released)?;
        let (os, cpu) = name.split_once('-').unwrap_or(("linux", "x64"));
        platforms.insert(format!("{os} {cpu}"), json!(format!("@state-mcp/{name}")));
        optional.insert(format!("@state-mcp/{name}"), json!(version));
    }
    fs::write(main.join("platforms.json"), serde_json::to_string_pretty(&platforms)?)?;
    let mut bins = serde_json::Map::new();
    for binary in BINARIES {
        let script = format!("#!/usr/bin/env node\n\"use strict\";\nrequire(\"../run.js\").run(\"{binary}\");\n");
        fs::write(main.join("bin").join(format!("{binary}.js")), script)?;
        bins.insert(binary.to_owned(), json!(format!("bin/{binary}.js")));
    }
    let manifest = json!({
        "name": "state-mcp", "version": version, "description": description,
        "license": "MIT OR Apache-2.0", "bin": bins, "files": ["bin/", "run.js", "platforms.json"],
        "engines": {"node": ">=18"},
        "optionalDependencies": optional,
    });
    fs::write(main.join("package.json"), serde_json::to_string_pretty(&manifest)?)?;
    fs::copy(root().join("README.md"), main.join("README.md"))?;
    fs::copy(root().join("LICENSE-MIT"), main.join("LICENSE-MIT"))?;

    let mut packed = Vec::new();
    for dir in [binaries, main] {
        let output = Command::new("npm")
            .args(["pack", "--silent", "--pack-destination"])
            .arg(out)
            .current_dir(&dir)
            .output()
            .context("cannot run npm pack")?;
        if !output.status.success() {
            bail!("npm pack in {} failed: {}", dir.display(), String::from_utf8_lossy(&output.stderr));
        }
        let name = String::from_utf8_lossy(&output.stdout).trim().lines().last().unwrap_or_default().to_owned();
        packed.push(out.join(name));
    }
    Ok(packed)
}

pub(crate) fn workspace_version() -> Result<String> {
    let manifest = fs::read_to_string(root().join("Cargo.toml"))?;
    let in_package = manifest.split("[workspace.package]").nth(1).context("no [workspace.package] table")?;
    let line = in_package.lines().find(|l| l.trim_start().starts_with("version")).context("no workspace version")?;
    let version = line.split('"').nth(1).context("malformed version line")?;
    Ok(version.to_owned())
}

pub(crate) fn host_target() -> Result<String> {
    let output = Command::new("rustc").arg("-vV").output().context("running rustc -vV")?;
    let text = String::from_utf8_lossy(&output.stdout);
    match text.lines().find_map(|l| l.strip_prefix("host: ")) {
        Some(host) => Ok(host.trim().to_owned()),
        None => bail!("rustc -vV did not report a host target"),
    }
}

#[cfg(test)]
mod macos_tests;
#[cfg(test)]
mod stand_ins;
#[cfg(test)]
mod tests;
