//! `cargo xtask`: the project's automation, in Rust so it runs wherever cargo does.
//!
//!   cargo xtask ci      format check, clippy with warnings denied, the whole test suite
//!   cargo xtask dist    release builds of every binary, packed with SHA-256 checksums
//!   cargo xtask bench   release benchmarks of the engine and the MCP server
//!   cargo xtask fuzz    coverage-guided fuzzing of every fuzz target

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

mod dist;
mod fuzz;
mod image;
#[cfg(test)]
mod tidy;

fn main() -> std::process::ExitCode {
    match run_task() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            // One line that says what failed; the failing command's own output is above it.
            eprintln!("xtask: error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run_task() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (task, rest) = args.split_first().map_or(("help", &[][..]), |(t, r)| (t.as_str(), r));
    match task {
        "ci" => ci(),
        "dist" => dist::dist(rest),
        "image" => image::image(rest),
        "bench" => bench(rest),
        "fuzz" => fuzz::fuzz(rest),
        "stress" => stress(rest),
        "soak" => soak(rest),
        "help" | "--help" | "-h" => {
            println!("{}", USAGE);
            Ok(())
        }
        other => bail!("unknown task `{other}`\n\n{USAGE}"),
    }
}

const USAGE: &str = "usage: cargo xtask <task>

tasks:
  ci      cargo fmt --check, cargo clippy -D warnings (also for aarch64-apple-darwin),
          doctests, 10 s of each fuzz target, cargo nextest run (all tests)
  dist    what a release ships, into dist/: per platform the archive (binaries, man pages,
          completions), a Python wheel and npm packages; the MCP bundle, server.json,
          install.sh and SHA256SUMS (--target TRIPLE, repeatable, default this machine's;
          --macos for both macOS targets; --profile NAME, default dist; --no-build to pack
          binaries already built; --out DIR)
  image   the container image of state-http from dist/'s archive, checked to serve (needs a
          Docker daemon): --base IMAGE (default debian:bookworm-slim), --tag NAME, --port N
  bench   release benchmarks (engine, MCP stdio, state-http with a pgbench reference);
          extra arguments go to state-bench, e.g. `cargo xtask bench -- --seconds 5`
  stress  linearizability of many recorded histories (12 clients, the owner killed twice in
          each): --seeds N (default 50), --ops N per client (default 60)
  soak    mixed load on release builds (stdio and REST writers, watchers, leases, workflow
          workers) sampling memory, files and threads: --minutes N (default 30)
  fuzz    coverage-guided fuzzing (libFuzzer) of every target, each for the time given:
          --minutes N | --seconds N (default 1 minute each), --target NAME (repeatable)";

/// The workspace root (xtask lives one level below it).
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

pub(crate) fn cargo() -> Command {
    cargo_tool(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// `program` (cargo, or a cargo plugin run directly) in the workspace root, without the
/// variables that describe the xtask package.
pub(crate) fn cargo_tool(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut command = Command::new(program);
    command.current_dir(root());
    // `cargo xtask` is `cargo run`, which describes the xtask package to it in CARGO_* variables.
    // A build inheriting them differs from a plain one (ring's build script tracks
    // CARGO_MANIFEST_DIR), so each would rebuild what the other built.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_PKG_") || PACKAGE_VARIABLES.contains(&name.as_ref()) {
            command.env_remove(name.as_ref());
        }
    }
    command
}

/// What cargo sets for the package it runs, beside `CARGO_PKG_*`.
const PACKAGE_VARIABLES: [&str; 7] = [
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_MANIFEST_LINKS",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_NAME",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_RUSTC_CURRENT_DIR",
];

pub(crate) fn run(mut command: Command) -> Result<()> {
    eprintln!("$ {}", describe(&command));
    let status = command.status().with_context(|| format!("cannot run {}", describe(&command)))?;
    if !status.success() {
        bail!("`{}` failed with {status}", describe(&command));
    }
    Ok(())
}

fn describe(command: &Command) -> String {
    std::iter::once(command.get_program().to_string_lossy().into_owned())
        .chain(command.get_args().map(|a| a.to_string_lossy().into_owned()))
        .collect::<Vec<_>>()
        .join(" ")
}

fn ci() -> Result<()> {
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--check"]);
    run(fmt)?;
    let mut clippy = cargo();
    clippy.args(["clippy", "--workspace", "--all-targets", "--locked", "--", "-D", "warnings"]);
    run(clippy)?;
    macos_lint()?;
    // nextest does not run doctests. They run first, so that the last line a CI run prints
    // is nextest's summary of the whole suite.
    let mut doc = cargo();
    doc.args(["test", "--workspace", "--doc", "--locked"]);
    run(doc)?;
    // A short run of every fuzz target: instrumented builds stay working, and the seeds and
    // past crashes pass under the fuzzer too (`cargo xtask fuzz --minutes N` for long runs).
    fuzz::fuzz(&["--seconds".into(), "10".into()])?;
    let conformance = install_conformance_suite()?;
    let mut test = cargo();
    test.args(["nextest", "run", "--workspace", "--locked"]);
    if conformance {
        test.env("STATE_CONFORMANCE_REQUIRED", "1");
    }
    run(test)
}

/// The product crates, linted for Apple silicon: they must build for macOS, so a Linux-only
/// call cannot come back unnoticed. zig compiles the C dependencies for the target (and with
/// the cross toolchain in place, the Mach-O tests of `dist` run too). Only what ships is
/// checked: the tests and benchmarks run on Linux.
fn macos_lint() -> Result<()> {
    let target = dist::MACOS_TARGETS[0];
    let mut clippy = cargo_tool("cargo-zigbuild");
    clippy.envs(dist::cross_env(target)?);
    clippy.args(["clippy", "--locked", "--target", target]);
    for package in SHIPPED {
        clippy.args(["-p", package]);
    }
    clippy.args(["--", "-D", "warnings"]);
    run(clippy)
}

/// The crates the release's binaries are built from.
const SHIPPED: [&str; 10] = [
    "state-core",
    "state-os",
    "state-text",
    "state-compat",
    "state-store",
    "state-api",
    "state-boot",
    "state-mcp",
    "state-http",
    "state-cli",
];

/// Installs the pinned MCP conformance suite (tools/conformance) so its test runs. Without npm
/// the test skips, saying so; with npm a failed install fails CI rather than skipping.
fn install_conformance_suite() -> Result<bool> {
    let dir = root().join("tools").join("conformance");
    if Command::new("npm").arg("--version").output().is_err() {
        eprintln!("xtask: npm not found; the MCP conformance suite will be skipped");
        return Ok(false);
    }
    let mut npm = Command::new("npm");
    npm.args(["ci", "--no-audit", "--no-fund", "--loglevel=error"]).current_dir(&dir);
    run(npm)?;
    Ok(true)
}

/// The linearizability test, on many seeds: `STATE_STRESS_SEEDS` and `STATE_STRESS_OPS` set
/// how many histories and how long; CI runs the same test on two short ones.
fn stress(args: &[String]) -> Result<()> {
    let (mut seeds, mut ops) = ("50".to_owned(), "60".to_owned());
    let mut args = args.iter().filter(|a| *a != "--");
    while let Some(arg) = args.next() {
        let value = args.next().with_context(|| format!("{arg} needs a value"))?;
        match arg.as_str() {
            "--seeds" => seeds = value.clone(),
            "--ops" => ops = value.clone(),
            other => bail!("unknown argument `{other}`; stress takes --seeds N and --ops N"),
        }
    }
    let mut test = cargo();
    test.args(["nextest", "run", "--locked", "--profile", "stress", "-p", "state-http", "--no-capture"])
        .args(["-E", "test(/histories_of_twelve/)"])
        .env("STATE_STRESS_SEEDS", seeds)
        .env("STATE_STRESS_OPS", ops);
    run(test)
}

/// A long soak on release builds; the samples go to target/soak.csv.
fn soak(args: &[String]) -> Result<()> {
    let mut minutes = "30".to_owned();
    let mut args = args.iter().filter(|a| *a != "--");
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--minutes" => minutes = args.next().context("--minutes needs a value")?.clone(),
            other => bail!("unknown argument `{other}`; soak takes --minutes N"),
        }
    }
    let mut build = cargo();
    build.args(["build", "--release", "--locked", "-p", "state-mcp", "-p", "state-http", "-p", "state-e2e"]);
    run(build)?;
    let release = root().join("target").join("release");
    let mut soak = Command::new(release.join("state-soak"));
    soak.arg("--server").arg(release.join("state-mcp"));
    soak.arg("--http-server").arg(release.join("state-http"));
    soak.args(["--minutes", &minutes, "--csv"]).arg(root().join("target").join("soak.csv"));
    run(soak)
}

fn bench(extra: &[String]) -> Result<()> {
    let mut build = cargo();
    build.args([
        "build",
        "--release",
        "--locked",
        "-p",
        "state-mcp",
        "-p",
        "state-http",
        "-p",
        "state-cli",
        "-p",
        "state-e2e",
    ]);
    run(build)?;
    let release = root().join("target").join("release");
    let mut bench = Command::new(release.join("state-bench"));
    bench.arg("--server").arg(release.join("state-mcp"));
    bench.arg("--http-server").arg(release.join("state-http"));
    bench.arg("--statectl").arg(release.join("statectl"));
    bench.args(extra.iter().filter(|a| *a != "--"));
    run(bench)
}
