//! `cargo xtask dist`: what a release ships, built from this checkout.
//!
//! - `state-<version>-<target>.tar.gz`: `bin/` (state-mcp, state-http, statectl), `share/` (man
//!   pages and bash, zsh and fish completions of all three), README, CHANGELOG, licences;
//! - `state_mcp-<version>-py3-none-<platform>.whl`: the same binaries as a Python wheel's
//!   scripts (`pip install`, `pipx`, `uvx`);
//! - `state-mcp-<version>.tgz` and `state-mcp-<platform>-<version>.tgz`: npm packages, the
//!   first running the binary of the second (`npx state-mcp`);
//! - `install.sh`, which installs an archive after checking it, and `SHA256SUMS` of it all.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::{cargo, root, run};

/// Every binary the product ships.
pub(crate) const BINARIES: [&str; 3] = ["state-mcp", "state-http", "statectl"];

/// What to package, and where.
pub(crate) struct Package {
    /// Where the built binaries are (`target/<profile>`).
    pub(crate) binaries: PathBuf,
    pub(crate) out: PathBuf,
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
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--profile" => profile = rest.next().context("--profile needs a cargo profile")?.clone(),
            "--no-build" => build = false,
            "--out" => out = PathBuf::from(rest.next().context("--out needs a directory")?),
            other => bail!("unknown argument `{other}` (dist takes --profile NAME, --no-build, --out DIR)"),
        }
    }
    if build {
        let mut command = cargo();
        command.args(["build", "--profile", &profile, "--locked"]);
        for bin in BINARIES {
            command.args(["--bin", bin]);
        }
        run(command)?;
    }
    let dir = match profile.as_str() {
        "dev" | "test" => "debug",
        "bench" => "release",
        other => other,
    };
    let binaries = target_dir().join(dir);
    let packed = package(&Package { binaries, out: out.clone() })?;
    eprintln!();
    for (binary, size) in &packed.binary_sizes {
        eprintln!("{binary:<48} {:>6.1} MB", *size as f64 / 1e6);
    }
    for path in &packed.artifacts {
        let size = fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        eprintln!("{:<48} {:>6.1} MB", path.file_name().unwrap_or_default().to_string_lossy(), size as f64 / 1e6);
    }
    eprintln!("\nin {}; verify with: cd {} && sha256sum -c SHA256SUMS", out.display(), out.display());
    Ok(())
}

/// Where cargo puts what it builds.
pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from)
}

/// Packs the binaries in `package.binaries` into every artifact kind; the paths written.
pub(crate) fn package(package: &Package) -> Result<Packed> {
    let version = workspace_version()?;
    let target = host_target()?;
    let out = &package.out;
    fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let scratch = out.join(".stage");
    if scratch.exists() {
        fs::remove_dir_all(&scratch)?;
    }

    // The binaries, stripped (a `dist` build is already; a debug one shrinks several-fold).
    let bin = scratch.join("bin");
    fs::create_dir_all(&bin)?;
    let mut binary_sizes = Vec::new();
    for name in BINARIES {
        let built = package.binaries.join(name);
        fs::copy(&built, bin.join(name)).with_context(|| format!("{} is not built", built.display()))?;
        strip(&bin.join(name));
        binary_sizes.push((name, fs::metadata(bin.join(name))?.len()));
    }

    let mut written = vec![archive(&scratch, &bin, &version, &target, out)?];
    written.push(wheel(&bin, &version, out)?);
    written.extend(npm(&scratch, &bin, &version, out)?);
    let installer = out.join("install.sh");
    fs::copy(root().join("packaging/install.sh"), &installer)?;
    written.push(installer);
    fs::remove_dir_all(&scratch)?;

    let mut sums = String::new();
    for path in &written {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        sums.push_str(&format!("{:x}  {name}\n", Sha256::digest(fs::read(path)?)));
    }
    fs::write(out.join("SHA256SUMS"), sums)?;
    Ok(Packed { artifacts: written, binary_sizes })
}

fn strip(binary: &Path) {
    match Command::new("strip").arg("--strip-debug").arg(binary).status() {
        Ok(status) if status.success() => {}
        // Without binutils the binary ships as built: larger, not wrong.
        _ => eprintln!("note: could not strip {}", binary.display()),
    }
}

/// `state-<version>-<target>.tar.gz`.
fn archive(scratch: &Path, bin: &Path, version: &str, target: &str, out: &Path) -> Result<PathBuf> {
    let name = format!("state-{version}-{target}");
    let stage = scratch.join(&name);
    fs::create_dir_all(stage.join("bin"))?;
    let generated = scratch.join("generated");
    for binary in BINARIES {
        fs::copy(bin.join(binary), stage.join("bin").join(binary))?;
        let generate = Command::new(bin.join(binary)).arg("generate").arg("--dir").arg(generated.join(binary)).output();
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

/// The wheel, tagged for the oldest glibc the binaries run on.
fn wheel(bin: &Path, version: &str, out: &Path) -> Result<PathBuf> {
    let mut glibc = (2, 17);
    for binary in BINARIES {
        glibc = glibc.max(glibc_needed(&bin.join(binary))?);
    }
    let arch = std::env::consts::ARCH;
    let platform = format!("manylinux_{}_{}_{arch}", glibc.0, glibc.1);
    let mut python = Command::new("python3");
    python
        .arg(root().join("packaging/wheel.py"))
        .args(["--version", version, "--platform", &platform])
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

/// npm's platform name for this machine (`linux-x64`).
fn npm_platform() -> Result<String> {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => bail!("no npm package for {other} yet"),
    };
    Ok(format!("{}-{arch}", std::env::consts::OS))
}

/// The platform package (the binaries) and the package `npx state-mcp` runs.
fn npm(scratch: &Path, bin: &Path, version: &str, out: &Path) -> Result<Vec<PathBuf>> {
    let platform = npm_platform()?;
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
    let mut bins = serde_json::Map::new();
    for binary in BINARIES {
        let script = format!("#!/usr/bin/env node\n\"use strict\";\nrequire(\"../run.js\").run(\"{binary}\");\n");
        fs::write(main.join("bin").join(format!("{binary}.js")), script)?;
        bins.insert(binary.to_owned(), json!(format!("bin/{binary}.js")));
    }
    let manifest = json!({
        "name": "state-mcp", "version": version, "description": description,
        "license": "MIT OR Apache-2.0", "bin": bins, "files": ["bin/", "run.js"],
        "engines": {"node": ">=18"},
        "optionalDependencies": {"@state-mcp/linux-x64": version, "@state-mcp/linux-arm64": version},
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

fn workspace_version() -> Result<String> {
    let manifest = fs::read_to_string(root().join("Cargo.toml"))?;
    let in_package = manifest.split("[workspace.package]").nth(1).context("no [workspace.package] table")?;
    let line = in_package.lines().find(|l| l.trim_start().starts_with("version")).context("no workspace version")?;
    let version = line.split('"').nth(1).context("malformed version line")?;
    Ok(version.to_owned())
}

fn host_target() -> Result<String> {
    let output = Command::new("rustc").arg("-vV").output().context("running rustc -vV")?;
    let text = String::from_utf8_lossy(&output.stdout);
    match text.lines().find_map(|l| l.strip_prefix("host: ")) {
        Some(host) => Ok(host.trim().to_owned()),
        None => bail!("rustc -vV did not report a host target"),
    }
}

#[cfg(test)]
mod tests;
