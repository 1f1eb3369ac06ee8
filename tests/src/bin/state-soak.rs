//! `state-soak`: every kind of client on one store for minutes, the servers' memory, open
//! files and threads sampled throughout (see `state_e2e::soak`). `cargo xtask soak` runs it.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Parser;

#[derive(Debug, Parser)]
struct Args {
    /// The state-mcp binary
    #[arg(long)]
    server: PathBuf,
    /// The state-http binary
    #[arg(long)]
    http_server: PathBuf,
    /// How long to run
    #[arg(long, default_value_t = 30.0)]
    minutes: f64,
    /// Seconds between samples
    #[arg(long, default_value_t = 10)]
    every: u64,
    /// Where to write the samples as CSV
    #[arg(long)]
    csv: Option<PathBuf>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let dir = std::env::temp_dir().join(format!("state-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let config = state_e2e::soak::SoakConfig {
        state_mcp: args.server,
        state_http: args.http_server,
        dir: dir.clone(),
        duration: Duration::from_secs_f64(args.minutes * 60.0),
        every: Duration::from_secs(args.every.max(1)),
    };
    eprintln!("soaking for {:.1} minutes in {}", args.minutes, dir.display());
    let report = state_e2e::soak::run(&config)?;
    let csv = state_e2e::soak::csv(&report);
    if let Some(path) = &args.csv {
        std::fs::write(path, &csv)?;
    }
    print!("{csv}");
    let rises = report.rises();
    println!(
        "soak: {} operations ({} failed) in {:.1} minutes; {} samples",
        report.operations,
        report.errors,
        args.minutes,
        report.samples.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
    if !rises.is_empty() {
        bail!("not flat after warm-up:\n  {}", rises.join("\n  "));
    }
    println!("soak: memory, open files and threads stayed flat after warm-up");
    Ok(())
}
