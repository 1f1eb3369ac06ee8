//! `state-bench`: throughput and latency of the engine and of the MCP stdio server.
//!
//! Run it through `cargo xtask bench` (release builds). It prints a markdown report; the
//! figures recorded in docs/BENCHMARKS.md come from it. Ratios within one run are what to
//! compare: the machines this runs on are shared and noisy.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use serde_json::{Value, json};
use state_core::ops::WriteStatus;
use state_core::ops::kv::{GetRequest, SetRequest};
use state_e2e::{McpClient, ProtocolEra};
use state_store::{Engine, EngineConfig, RedbBackend, SystemClock};

#[derive(Debug, Parser)]
#[command(about = "Benchmarks the state engine and the state-mcp stdio server")]
struct Args {
    /// The state-mcp binary to measure (MCP sections are skipped without it)
    #[arg(long)]
    server: Option<PathBuf>,
    /// Seconds each throughput measurement runs
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Concurrent writers for the durable write measurement
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64,256")]
    writers: Vec<usize>,
    /// Sequential MCP calls to time
    #[arg(long, default_value_t = 10_000)]
    calls: usize,
    /// Only run sections whose name contains this (engine, mcp)
    #[arg(long)]
    only: Option<String>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let wants = |section: &str| args.only.as_deref().is_none_or(|o| section.contains(o));
    let duration = Duration::from_secs_f64(args.seconds);
    println!("# state-bench\n");
    if wants("engine") {
        runtime.block_on(engine_writes(&args.writers, duration))?;
        runtime.block_on(engine_reads(duration))?;
        runtime.block_on(engine_cas(duration))?;
        runtime.block_on(engine_workflows(duration))?;
    }
    if wants("mcp") {
        match &args.server {
            Some(server) => {
                mcp_cold_start(server)?;
                mcp_round_trips(server, args.calls)?;
            }
            None => println!("(MCP sections skipped: pass --server PATH)\n"),
        }
    }
    Ok(())
}

fn value_256() -> Value {
    json!({"payload": "x".repeat(236)})
}

fn open_engine(dir: &tempfile_dir::Dir) -> Result<Engine> {
    let backend = RedbBackend::open(&dir.path().join("bench.redb"))?;
    Ok(Engine::new(Arc::new(backend), Arc::new(SystemClock), EngineConfig::default())?)
}

async fn engine_writes(writers: &[usize], duration: Duration) -> Result<()> {
    println!("## Engine: durable writes (group commit, fsync per batch, 256-byte values)\n");
    println!("| concurrent writers | acked writes/s | commits | avg batch | largest batch | p50 ack | p99 ack |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for &n in writers {
        let dir = tempfile_dir::Dir::new()?;
        let engine = open_engine(&dir)?;
        let before = engine.batch_stats();
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let mut tasks = Vec::new();
        for w in 0..n {
            let (engine, stop) = (engine.clone(), stop.clone());
            tasks.push(tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    let req = SetRequest::new(format!("w{w}/k{i}"), value_256());
                    engine.set(req).await.expect("durable write");
                    latencies.push(t.elapsed());
                    i += 1;
                }
                latencies
            }));
        }
        tokio::time::sleep(duration).await;
        stop.store(true, Ordering::Relaxed);
        let mut latencies = Vec::new();
        for task in tasks {
            latencies.extend(task.await?);
        }
        let elapsed = started.elapsed();
        let stats = engine.batch_stats();
        let (batches, commands) = (stats.batches - before.batches, stats.commands - before.commands);
        latencies.sort();
        println!(
            "| {n} | {:.0} | {batches} | {:.1} | {} | {} | {} |",
            latencies.len() as f64 / elapsed.as_secs_f64(),
            commands as f64 / batches.max(1) as f64,
            stats.largest,
            ms(percentile(&latencies, 0.50)),
            ms(percentile(&latencies, 0.99)),
        );
        engine.close().await;
    }
    println!();
    Ok(())
}

async fn engine_reads(duration: Duration) -> Result<()> {
    println!("## Engine: reads (10,000 keys, snapshot per read)\n");
    let dir = tempfile_dir::Dir::new()?;
    let engine = open_engine(&dir)?;
    let keys = 10_000u64;
    let mut loads = Vec::new();
    for i in 0..keys {
        let engine = engine.clone();
        loads.push(tokio::spawn(async move {
            let req = SetRequest::new(format!("k{i}"), value_256());
            engine.set(req).await
        }));
        if loads.len() >= 512 {
            for l in loads.drain(..) {
                l.await??;
            }
        }
    }
    for l in loads {
        l.await??;
    }
    println!("| concurrent readers | reads/s |");
    println!("|---:|---:|");
    for readers in [1usize, 16] {
        let done = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let mut tasks = Vec::new();
        for r in 0..readers {
            let (engine, done, stop) = (engine.clone(), done.clone(), stop.clone());
            tasks.push(tokio::spawn(async move {
                let mut i = r as u64 * 7919;
                while !stop.load(Ordering::Relaxed) {
                    i = (i * 6364136223846793005 + 1442695040888963407) % keys;
                    let got = engine
                        .get(GetRequest { key: format!("k{i}"), version: None, revision: None })
                        .await
                        .expect("read");
                    assert_eq!(got.version, 1);
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        tokio::time::sleep(duration).await;
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            t.await?;
        }
        println!("| {readers} | {:.0} |", done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64());
    }
    println!();
    engine.close().await;
    Ok(())
}

async fn engine_cas(duration: Duration) -> Result<()> {
    println!("## Engine: compare-and-set (read, then write with expected_version)\n");
    println!("| workers | keys | successful CAS/s | conflicts/s |");
    println!("|---:|---:|---:|---:|");
    for (workers, keys) in [(64usize, 64usize), (16, 1)] {
        let dir = tempfile_dir::Dir::new()?;
        let engine = open_engine(&dir)?;
        let ok = Arc::new(AtomicU64::new(0));
        let conflicts = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let mut tasks = Vec::new();
        for w in 0..workers {
            let (engine, ok, conflicts, stop) = (engine.clone(), ok.clone(), conflicts.clone(), stop.clone());
            let key = format!("counter{}", w % keys);
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let seen =
                        engine.get(GetRequest { key: key.clone(), version: None, revision: None }).await.expect("read");
                    let n = seen.value.as_ref().and_then(|v| v.as_u64()).unwrap_or(0);
                    let req = SetRequest {
                        expected_version: Some(seen.version),
                        ..SetRequest::new(key.clone(), json!(n + 1))
                    };
                    match engine.set(req).await.expect("cas").status {
                        WriteStatus::Ok => ok.fetch_add(1, Ordering::Relaxed),
                        WriteStatus::Conflict | WriteStatus::Fenced => conflicts.fetch_add(1, Ordering::Relaxed),
                    };
                }
            }));
        }
        tokio::time::sleep(duration).await;
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            t.await?;
        }
        let secs = started.elapsed().as_secs_f64();
        let total: u64 = {
            let mut sum = 0;
            for k in 0..keys {
                let got = engine.get(GetRequest { key: format!("counter{k}"), version: None, revision: None }).await?;
                sum += got.value.and_then(|v| v.as_u64()).unwrap_or(0);
            }
            sum
        };
        anyhow::ensure!(total == ok.load(Ordering::Relaxed), "lost update: counters sum to {total}");
        println!(
            "| {workers} | {keys} | {:.0} | {:.0} |",
            ok.load(Ordering::Relaxed) as f64 / secs,
            conflicts.load(Ordering::Relaxed) as f64 / secs
        );
        engine.close().await;
    }
    println!();
    Ok(())
}

/// 16 workers drain a queue of runs: claim the oldest, checkpoint each step, complete.
async fn engine_workflows(duration: Duration) -> Result<()> {
    use state_core::ops::workflow::{
        CheckpointRequest, CheckpointStatus, ClaimRequest, ClaimStatus, CompleteRequest, CreateRunRequest,
    };
    const WORKERS: usize = 16;
    const STEPS: u64 = 4;
    println!("## Engine: workflow runs ({WORKERS} workers: claim, {STEPS} checkpoints, complete)\n");
    let dir = tempfile_dir::Dir::new()?;
    let engine = open_engine(&dir)?;
    // Enough queued work that the workers never run dry during the measurement.
    let runs = 20_000usize;
    let mut creates = Vec::new();
    for i in 0..runs {
        let engine = engine.clone();
        creates.push(tokio::spawn(async move {
            let req = CreateRunRequest {
                name: "bench".into(),
                tags: Default::default(),
                input: json!(i),
                max_attempts: None,
                agent_id: None,
            };
            engine.workflow_create(req).await
        }));
        if creates.len() >= 512 {
            for c in creates.drain(..) {
                c.await??;
            }
        }
    }
    for c in creates {
        c.await??;
    }
    let claims = Arc::new(AtomicU64::new(0));
    let checkpoints = Arc::new(AtomicU64::new(0));
    let completed = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let before = engine.batch_stats();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..WORKERS {
        let (engine, claims, checkpoints, stop) = (engine.clone(), claims.clone(), checkpoints.clone(), stop.clone());
        let completed = completed.clone();
        tasks.push(tokio::spawn(async move {
            let agent = format!("w{w}");
            while !stop.load(Ordering::Relaxed) {
                let req = ClaimRequest {
                    agent_id: agent.clone(),
                    lease_ttl_seconds: Some(60.0),
                    run_id: None,
                    tags: Default::default(),
                    name: None,
                };
                let claimed = engine.workflow_claim(req).await.expect("claim");
                if claimed.status != ClaimStatus::Claimed {
                    break;
                }
                claims.fetch_add(1, Ordering::Relaxed);
                let (run_id, token) = (claimed.run_id.unwrap_or_default(), claimed.token.unwrap_or_default());
                for step in 1..=STEPS {
                    let req = CheckpointRequest {
                        run_id: run_id.clone(),
                        agent_id: agent.clone(),
                        token,
                        step,
                        output: json!({"step": step}),
                    };
                    let done = engine.workflow_checkpoint(req).await.expect("checkpoint");
                    assert_eq!(done.status, CheckpointStatus::Ok);
                    checkpoints.fetch_add(1, Ordering::Relaxed);
                }
                let req = CompleteRequest { run_id, agent_id: agent.clone(), token, result: json!(null) };
                engine.workflow_complete(req).await.expect("complete");
                completed.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await?;
    }
    let secs = started.elapsed().as_secs_f64();
    let stats = engine.batch_stats();
    let batches = stats.batches - before.batches;
    println!("| claims/s | checkpoints/s | runs completed/s | all writes/s | avg batch |");
    println!("|---:|---:|---:|---:|---:|");
    let (c, k) = (claims.load(Ordering::Relaxed) as f64, checkpoints.load(Ordering::Relaxed) as f64);
    println!(
        "| {:.0} | {:.0} | {:.0} | {:.0} | {:.1} |\n",
        c / secs,
        k / secs,
        completed.load(Ordering::Relaxed) as f64 / secs,
        (stats.commands - before.commands) as f64 / secs,
        (stats.commands - before.commands) as f64 / batches.max(1) as f64
    );
    engine.close().await;
    Ok(())
}

fn mcp_cold_start(server: &std::path::Path) -> Result<()> {
    println!("## MCP stdio: cold start (spawn to first tool result, fresh database)\n");
    let mut times = Vec::new();
    for _ in 0..20 {
        let dir = tempfile_dir::Dir::new()?;
        let db = dir.path().join("cold.redb");
        let started = Instant::now();
        let mut client = McpClient::start(server, &["--db", &db.to_string_lossy()], ProtocolEra::Legacy)?;
        let result = client.call("state_get", json!({"key": "k"}))?;
        times.push(started.elapsed());
        anyhow::ensure!(!result.is_error, "cold start call failed: {}", result.text);
        client.shutdown()?;
    }
    times.sort();
    println!("| runs | min | median | p90 |");
    println!("|---:|---:|---:|---:|");
    println!(
        "| {} | {} | {} | {} |\n",
        times.len(),
        ms(times[0]),
        ms(percentile(&times, 0.5)),
        ms(percentile(&times, 0.9))
    );
    Ok(())
}

fn mcp_round_trips(server: &std::path::Path, calls: usize) -> Result<()> {
    println!("## MCP stdio: sequential round trips (one client, one call at a time)\n");
    println!("| tool | calls | calls/s | mean round trip | server CPU per call |");
    println!("|---|---:|---:|---:|---:|");
    let dir = tempfile_dir::Dir::new()?;
    let db = dir.path().join("rt.redb");
    let mut client = McpClient::start(server, &["--db", &db.to_string_lossy()], ProtocolEra::Legacy)?;
    client.call("state_set", json!({"key": "bench/k", "value": value_256()}))?;
    for (tool, args, n) in [
        ("state_get", json!({"key": "bench/k"}), calls),
        ("state_set", json!({"key": "bench/k", "value": value_256()}), calls.min(2_000)),
    ] {
        for _ in 0..n / 10 {
            client.call(tool, args.clone())?; // warm-up
        }
        let cpu_before = process_cpu(client.pid())?;
        let started = Instant::now();
        for _ in 0..n {
            let r = client.call(tool, args.clone())?;
            anyhow::ensure!(!r.is_error, "{tool} failed: {}", r.text);
        }
        let elapsed = started.elapsed();
        let cpu = process_cpu(client.pid())? - cpu_before;
        println!(
            "| {tool} | {n} | {:.0} | {:.1} µs | {:.1} µs |",
            n as f64 / elapsed.as_secs_f64(),
            elapsed.as_secs_f64() * 1e6 / n as f64,
            cpu.as_secs_f64() * 1e6 / n as f64
        );
    }
    client.shutdown()?;
    println!();
    Ok(())
}

/// User + system CPU time of a process, from /proc (Linux).
fn process_cpu(pid: u32) -> Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).context("reading /proc (Linux only)")?;
    let after_name = stat.rsplit_once(')').context("malformed /proc stat")?.1;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: u64 =
        fields.get(11).context("utime")?.parse::<u64>()? + fields.get(12).context("stime")?.parse::<u64>()?;
    // USER_HZ is 100 on every Linux configuration we run on.
    Ok(Duration::from_millis(ticks * 10))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// A temporary directory removed on drop, without pulling a crate into the harness for it.
mod tempfile_dir {
    use std::path::{Path, PathBuf};

    pub(crate) struct Dir(PathBuf);

    impl Dir {
        pub(crate) fn new() -> std::io::Result<Dir> {
            use std::sync::atomic::{AtomicU64, Ordering};
            static NEXT: AtomicU64 = AtomicU64::new(0);
            let path = std::env::temp_dir().join(format!(
                "state-bench-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&path)?;
            Ok(Dir(path))
        }

        pub(crate) fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
