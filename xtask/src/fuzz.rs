//! `cargo xtask fuzz`: builds the libFuzzer binaries of `fuzz/` with coverage instrumentation
//! (on stable Rust: LLVM's sancov pass, no sanitizer) and runs each target for a while from
//! its seeds. A crash fails the run, and its input is copied to `fuzz/regressions/<target>/`,
//! where `cargo test` replays it from then on.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::{cargo, root, run};

/// The targets, as `crates/state-fuzz` names them (its tests check the list is whole).
const TARGETS: [&str; 7] =
    ["jsonrpc_line", "owner_wire", "rest_request", "tokens_file", "cursor", "dump_import", "engine_model"];

const RUSTFLAGS: &str = "-Cpasses=sancov-module \
    -Cllvm-args=-sanitizer-coverage-level=4 \
    -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
    -Cllvm-args=-sanitizer-coverage-pc-table \
    -Cllvm-args=-sanitizer-coverage-trace-compares \
    -Cllvm-args=-sanitizer-coverage-stack-depth \
    --cfg fuzzing";

/// Runs this short or shorter (per target) are built with the `fuzz-short` profile.
const SHORT_RUN: Duration = Duration::from_secs(30);

const USAGE: &str = "usage: cargo xtask fuzz [--minutes N | --seconds N] [--target NAME]...";

struct Options {
    each: Duration,
    targets: Vec<String>,
}

fn options(args: &[String]) -> Result<Options> {
    let mut each = Duration::from_secs(60);
    let mut targets = Vec::new();
    let mut args = args.iter().filter(|a| *a != "--");
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--minutes" => each = Duration::from_secs_f64(value()?.parse::<f64>().context("--minutes")? * 60.0),
            "--seconds" => each = Duration::from_secs(value()?.parse().context("--seconds")?),
            "--target" => {
                let name = value()?;
                if !TARGETS.contains(&name.as_str()) {
                    bail!("no fuzz target `{name}`; the targets are {}", TARGETS.join(", "));
                }
                targets.push(name.clone());
            }
            other => bail!("unknown argument `{other}`\n{USAGE}"),
        }
    }
    if targets.is_empty() {
        targets = TARGETS.iter().map(|t| (*t).to_owned()).collect();
    }
    Ok(Options { each, targets })
}

pub(crate) fn fuzz(args: &[String]) -> Result<()> {
    let options = options(args)?;
    let dir = root().join("fuzz");
    let target_dir = dir.join("target");
    // With an explicit target, RUSTFLAGS reach the fuzzed code but not build scripts (which
    // would not link against libFuzzer's instrumentation hooks).
    let host = host_triple()?;
    // A short run only needs a working instrumented build and the corpus replayed.
    let profile = if options.each <= SHORT_RUN { "fuzz-short" } else { "release" };
    let mut build = cargo();
    build
        .args(["build", "--profile", profile, "--bins", "--locked", "--target", &host, "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target_dir)
        .env("RUSTFLAGS", RUSTFLAGS)
        .env_remove("CARGO_ENCODED_RUSTFLAGS");
    run(build)?;
    let mut rows = Vec::new();
    for target in &options.targets {
        rows.push(fuzz_one(&dir, &target_dir.join(&host), profile, target, options.each)?);
    }
    eprintln!("\n{:<14} {:>9} {:>14} {:>10} {:>8}", "target", "seconds", "executions", "exec/s", "corpus");
    for row in &rows {
        eprintln!(
            "{:<14} {:>9} {:>14} {:>10} {:>8}",
            row.target, row.seconds, row.executions, row.per_second, row.corpus
        );
    }
    let total: u64 = rows.iter().map(|r| r.executions).sum();
    eprintln!("xtask fuzz: {} target(s), {total} executions, no crash", rows.len());
    Ok(())
}

/// The triple rustc builds for by default, e.g. `x86_64-unknown-linux-gnu`.
fn host_triple() -> Result<String> {
    let output = Command::new("rustc").arg("-vV").output().context("cannot run rustc -vV")?;
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .map(str::to_owned)
        .context("rustc -vV names no host")
}

struct Row {
    target: String,
    seconds: u64,
    executions: u64,
    per_second: u64,
    corpus: usize,
}

fn fuzz_one(dir: &Path, target_dir: &Path, profile: &str, target: &str, each: Duration) -> Result<Row> {
    let binary = target_dir.join(profile).join(target);
    let work = target_dir.join("corpus").join(target);
    let artifacts = target_dir.join("artifacts").join(target);
    // Crashes of an earlier run are in the regressions already (or were dismissed).
    let _ = std::fs::remove_dir_all(&artifacts);
    for made in [&work, &artifacts] {
        std::fs::create_dir_all(made).with_context(|| format!("cannot create {}", made.display()))?;
    }
    let seeds = dir.join("corpus").join(target);
    let regressions = dir.join("regressions").join(target);
    let log = target_dir.join(format!("{target}.log"));
    let mut command = Command::new(&binary);
    command.arg(&work).arg(&seeds);
    if regressions.is_dir() {
        command.arg(&regressions);
    }
    command
        .arg(format!("-max_total_time={}", each.as_secs().max(1)))
        .arg("-print_final_stats=1")
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .arg("-timeout=60")
        .arg("-rss_limit_mb=4096")
        .arg("-max_len=4096")
        .stdout(std::fs::File::create(&log)?)
        .stderr(std::fs::File::create(log.with_extension("err"))?);
    eprintln!("$ {} ({:?})", binary.display(), each);
    let status = command.status().with_context(|| format!("cannot run {}", binary.display()))?;
    let output = std::fs::read_to_string(log.with_extension("err")).unwrap_or_default();
    if !status.success() {
        let kept = keep_crashes(&artifacts, &regressions)?;
        let tail: Vec<&str> = output.lines().rev().take(30).collect::<Vec<_>>().into_iter().rev().collect();
        bail!(
            "fuzz target `{target}` failed ({status}):\n{}\n\nthe input(s) are now in {}: {}\n\
             replay with `cargo test -p state-fuzz {target}`; commit them with the fix",
            tail.join("\n"),
            regressions.display(),
            kept.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        );
    }
    let stat = |name: &str| -> u64 {
        output
            .lines()
            .find_map(|line| line.strip_prefix(&format!("stat::{name}:")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let corpus = std::fs::read_dir(&work).map(|d| d.count()).unwrap_or(0);
    Ok(Row {
        target: target.to_owned(),
        seconds: each.as_secs(),
        executions: stat("number_of_executed_units"),
        per_second: stat("average_exec_per_sec"),
        corpus,
    })
}

/// Copies crash inputs into the regression directory; returns where they went.
fn keep_crashes(artifacts: &Path, regressions: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(regressions)?;
    let mut kept = Vec::new();
    for entry in std::fs::read_dir(artifacts)? {
        let path = entry?.path();
        if let Some(name) = path.file_name() {
            let to = regressions.join(name);
            std::fs::copy(&path, &to)?;
            kept.push(to);
        }
    }
    Ok(kept)
}
