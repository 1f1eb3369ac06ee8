//! `state-bench`: throughput and latency of the engine, the MCP stdio server and state-http.
//!
//! Run it through `cargo xtask bench` (release builds). It prints a markdown report; the
//! figures recorded in docs/BENCHMARKS.md come from it. Ratios within one run are what to
//! compare: the machines this runs on are shared and noisy.

mod console;
mod dag;
mod delay;
mod floor;
mod http;
mod knowledge;
mod lone;
mod queue;
mod replicas;
mod tenants;
mod tui;
mod watch;

/// The shipped binaries' allocator, so the engine's figures are theirs.
#[global_allocator]
static ALLOCATOR: state_boot::Allocator = state_boot::Allocator;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use serde_json::{Value, json};
use state_core::ops::WriteStatus;
use state_core::ops::kv::{GetRequest, SetRequest};
use state_e2e::{McpClient, ProtocolEra, Wiring};
use state_store::{Engine, EngineConfig, RedbBackend, SystemClock};

#[derive(Debug, Parser)]
#[command(about = "Benchmarks the state engine and the state-mcp stdio server")]
struct Args {
    /// The state-mcp binary to measure (MCP sections are skipped without it)
    #[arg(long)]
    server: Option<PathBuf>,
    /// The state-http binary to measure (HTTP sections are skipped without it)
    #[arg(long)]
    http_server: Option<PathBuf>,
    /// Seconds each throughput measurement runs
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Concurrent writers for the durable write measurement
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64,256")]
    writers: Vec<usize>,
    /// Sequential MCP calls to time
    #[arg(long, default_value_t = 10_000)]
    calls: usize,
    /// Corpus sizes for the knowledge section
    #[arg(long, value_delimiter = ',', default_value = "10000,100000")]
    notes: Vec<usize>,
    /// The statectl binary, for the inspector section (skipped without it)
    #[arg(long)]
    statectl: Option<PathBuf>,
    /// Keys in the store the inspector opens
    #[arg(long, default_value_t = 100_000)]
    tui_keys: usize,
    /// Runs in the DAG of the dag section
    #[arg(long, default_value_t = 2_000)]
    dag_runs: u64,
    /// Messages sent, then drained, in the queue section
    #[arg(long, default_value_t = 5_000)]
    queue_messages: u64,
    /// Writes of 1 MB in the stalled-watcher section
    #[arg(long, default_value_t = 1000)]
    stalled_writes: usize,
    /// Page loads per view in the console section
    #[arg(long, default_value_t = 5)]
    console_loads: usize,
    /// After the console section, keep its server and store until interrupted, to look at a
    /// large store in a browser (the address is printed)
    #[arg(long)]
    console_hold: bool,
    /// In the replicas section, also run the writes with PostgreSQL this far away each way
    /// (through a delaying proxy); 0 skips them
    #[arg(long, default_value_t = 1.0)]
    pg_delay_ms: f64,
    /// Only run sections whose name contains this (engine, queue, dag, knowledge, mcp, http, stalled, replicas,
    /// tenants, tui, console)
    #[arg(long)]
    only: Option<String>,
    /// Internal: echo on this Unix socket (the other end of the round-trip floor)
    #[arg(long, hide = true)]
    echo_socket: Option<PathBuf>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if let Some(path) = &args.echo_socket {
        return floor::echo(path);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let wants = |section: &str| args.only.as_deref().is_none_or(|o| section.contains(o));
    let duration = Duration::from_secs_f64(args.seconds);
    println!("# state-bench\n");
    if wants("engine") {
        runtime.block_on(engine_writes(&args.writers, duration))?;
        runtime.block_on(engine_reads(duration))?;
        runtime.block_on(engine_cas(duration))?;
        runtime.block_on(engine_workflows(duration))?;
        runtime.block_on(watch::engine_fanout(duration))?;
        runtime.block_on(watch::engine_stuck_watcher(duration))?;
    }
    if wants("queue") {
        runtime.block_on(queue::engine_queue(args.queue_messages, &[1, 8]))?;
    }
    if wants("dag") {
        runtime.block_on(dag::engine_dag(args.dag_runs, 8))?;
    }
    if wants("knowledge") {
        runtime.block_on(knowledge::engine_knowledge(&args.notes))?;
    }
    if wants("mcp") {
        match &args.server {
            Some(server) => {
                mcp_cold_start(server)?;
                mcp_round_trips(server, args.calls)?;
                mcp_shared_counter(server, 8, duration)?;
                watch::mcp_wakeup(server, 200)?;
            }
            None => println!("(MCP sections skipped: pass --server PATH)\n"),
        }
    }
    if wants("http") {
        match &args.http_server {
            Some(server) => runtime.block_on(http::run(server, duration))?,
            None => println!("(HTTP sections skipped: pass --http-server PATH)\n"),
        }
    }
    if wants("stalled") {
        match &args.http_server {
            Some(server) => watch::http_stalled_watcher(server, args.stalled_writes)?,
            None => println!("(stalled watcher section skipped: pass --http-server PATH)\n"),
        }
    }
    if wants("tenants") {
        match &args.http_server {
            Some(server) => tenants::run(server, duration.max(Duration::from_secs(5)))?,
            None => println!("(tenant section skipped: pass --http-server PATH)\n"),
        }
    }
    if wants("replicas") {
        match &args.http_server {
            Some(server) => {
                runtime.block_on(replicas::run(server, duration, Duration::from_secs_f64(args.pg_delay_ms / 1000.0)))?
            }
            None => println!("(replica sections skipped: pass --http-server PATH)\n"),
        }
    }
    if wants("console") {
        match &args.http_server {
            Some(server) => console::run(server, &runtime, args.console_loads, args.console_hold)?,
            None => println!("(console section skipped: pass --http-server PATH)\n"),
        }
    }
    if wants("tui") {
        match &args.statectl {
            Some(statectl) => tui::inspector(statectl, args.tui_keys, &runtime)?,
            None => println!("(inspector section skipped: pass --statectl PATH)\n"),
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

/// Durable writes by `n` concurrent writers on a fresh database for `duration`.
struct WriteRun {
    per_second: f64,
    batches: u64,
    commands: u64,
    largest: u64,
    /// Publications to readers: batches staged in one transaction share one.
    publications: u64,
    latencies: Vec<Duration>,
}

async fn durable_writes(n: usize, duration: Duration) -> Result<WriteRun> {
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
    engine.close().await;
    latencies.sort();
    Ok(WriteRun {
        per_second: latencies.len() as f64 / elapsed.as_secs_f64(),
        batches: stats.batches - before.batches,
        commands: stats.commands - before.commands,
        largest: stats.largest,
        publications: stats.publications - before.publications,
        latencies,
    })
}

async fn engine_writes(writers: &[usize], duration: Duration) -> Result<()> {
    println!("## Engine: durable writes (group commit, one log append and sync per batch, 256-byte values)\n");
    println!(
        "| concurrent writers | acked writes/s | commits | avg batch | largest batch | batches per publication | p50 ack | p99 ack |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &n in writers {
        let run = durable_writes(n, duration).await?;
        println!(
            "| {n} | {:.0} | {} | {:.1} | {} | {:.1} | {} | {} |",
            run.per_second,
            run.batches,
            run.commands as f64 / run.batches.max(1) as f64,
            run.largest,
            run.batches as f64 / run.publications.max(1) as f64,
            ms(percentile(&run.latencies, 0.50)),
            ms(percentile(&run.latencies, 0.99)),
        );
    }
    println!();
    beside_pgbench(writers, duration).await?;
    lone::lone_puts().await?;
    Ok(())
}

/// Ours against the same machine's PostgreSQL (single-row upserts, fsync on), taking turns
/// A B B A so both see the same neighbours: on a shared machine, rates drift by a third within
/// minutes, and a ratio of two runs minutes apart says more about the drift than about either.
async fn beside_pgbench(writers: &[usize], duration: Duration) -> Result<()> {
    let turn = duration.max(Duration::from_secs(3));
    let sizes: Vec<usize> = writers.iter().copied().filter(|n| *n == 1 || *n == 64).collect();
    if sizes.is_empty() {
        return Ok(());
    }
    println!("### Beside PostgreSQL, taking turns (ours, pgbench, pgbench, ours; {} s each)\n", turn.as_secs());
    println!("| writers | ours, acked writes/s (each turn) | pgbench tps (each turn) | ratio of means | target |");
    println!("|---:|---|---|---:|---:|");
    for n in sizes {
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        let mut failed = None;
        for turn_is_ours in [true, false, false, true] {
            if turn_is_ours {
                ours.push(durable_writes(n, turn).await?.per_second);
            } else {
                match http::pgbench(n, turn).await {
                    Ok(tps) => theirs.push(tps),
                    Err(error) => failed = Some(error),
                }
            }
        }
        let list = |rates: &[f64]| rates.iter().map(|r| format!("{r:.0}")).collect::<Vec<_>>().join(", ");
        let mean = |rates: &[f64]| rates.iter().sum::<f64>() / rates.len().max(1) as f64;
        let target = if n == 1 { 2 } else { 3 };
        match failed {
            None => println!(
                "| {n} | {} | {} | {:.2}× | {target}× |",
                list(&ours),
                list(&theirs),
                mean(&ours) / mean(&theirs)
            ),
            Some(error) => println!("| {n} | {} | not measured: {error:#} | | {target}× |", list(&ours)),
        }
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
                request_id: None,
                name: "bench".into(),
                tags: Default::default(),
                input: json!(i),
                max_attempts: None,
                agent_id: None,
                ..CreateRunRequest::default()
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
                    request_id: None,
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
                        request_id: None,
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
                let req =
                    CompleteRequest { request_id: None, run_id, agent_id: agent.clone(), token, result: json!(null) };
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

/// How a measured `state-mcp` reaches its database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `--standalone`: the engine in the process the client talks to.
    InProcess,
    /// Joined to an owner process over its socket.
    Joined,
    /// Joined, with a socket pair for stdin and one for stdout, as Node's clients start servers.
    JoinedOnSockets,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::InProcess => "in-process (--standalone)",
            Mode::Joined => "joined (through the owner)",
            Mode::JoinedOnSockets => "joined, stdio on socket pairs (Node's clients)",
        }
    }
}

/// A database in a temporary directory, with a private socket directory for its owner.
struct Place {
    dir: tempfile_dir::Dir,
}

impl Place {
    fn new() -> Result<Place> {
        Ok(Place { dir: tempfile_dir::Dir::new()? })
    }

    fn spawn(&self, server: &Path, mode: Mode) -> Result<McpClient> {
        let db = self.dir.path().join("bench.redb").to_string_lossy().into_owned();
        let runtime = self.dir.path().join("run").to_string_lossy().into_owned();
        let mut args = vec!["--db", db.as_str(), "--owner-idle", "1s"];
        if mode == Mode::InProcess {
            args.push("--standalone");
        }
        let wiring = if mode == Mode::JoinedOnSockets { Wiring::Sockets } else { Wiring::Pipes };
        McpClient::spawn_wired(server, &args, &[("STATE_RUNTIME_DIR", runtime.as_str())], None, wiring)
    }

    fn start(&self, server: &Path, mode: Mode) -> Result<McpClient> {
        let mut client = self.spawn(server, mode)?;
        client.handshake(ProtocolEra::Legacy)?;
        Ok(client)
    }
}

/// The owner's pid, as health reports it.
fn owner_pid(client: &mut McpClient) -> Result<u32> {
    let health = client.call("state_health", json!({}))?.json();
    health["owner"]["pid"].as_u64().map(|p| p as u32).context("health names no owner")
}

/// Stops an owner and waits (bounded) for it to go, so it does not disturb later sections.
fn stop_owner(pid: u32) {
    let _ = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn mcp_cold_start(server: &Path) -> Result<()> {
    println!("## MCP stdio: cold start (spawn to first tool result; 20 runs each)\n");
    println!("| how the process reaches the database | min | median | p90 |");
    println!("|---|---:|---:|---:|");
    for case in
        ["in-process (--standalone), fresh database", "joins a running owner", "starts the owner, fresh database"]
    {
        let mut times = Vec::new();
        for _ in 0..20 {
            let place = Place::new()?;
            let mode = if case.starts_with("in-process") { Mode::InProcess } else { Mode::Joined };
            // An owner that is already running, started (and left) by another client.
            let mut other = None;
            if case.starts_with("joins") {
                let mut first = place.start(server, Mode::Joined)?;
                let pid = owner_pid(&mut first)?;
                other = Some((first, pid));
            }
            let started = Instant::now();
            let mut client = place.start(server, mode)?;
            let result = client.call("state_get", json!({"key": "k"}))?;
            times.push(started.elapsed());
            anyhow::ensure!(!result.is_error, "cold start call failed: {}", result.text);
            let owner = if mode == Mode::Joined { Some(owner_pid(&mut client)?) } else { None };
            client.shutdown()?;
            if let Some((mut first, _)) = other {
                first.shutdown()?;
            }
            if let Some(pid) = owner {
                stop_owner(pid);
            }
        }
        times.sort();
        println!("| {case} | {} | {} | {} |", ms(times[0]), ms(percentile(&times, 0.5)), ms(percentile(&times, 0.9)));
    }
    println!();
    Ok(())
}

fn mcp_round_trips(server: &Path, calls: usize) -> Result<()> {
    println!("## MCP stdio: sequential round trips (one client, one call at a time)\n");
    println!(
        "The modes run side by side and take turns in batches of 250 calls, so all see the same machine. \
         Server CPU counts every server process: the one the client talks to and, when joined, the owner.\n"
    );
    println!("| tool | mode | calls | calls/s | mean round trip | server CPU per call |");
    println!("|---|---|---:|---:|---:|---:|");
    struct Side {
        mode: Mode,
        client: McpClient,
        owner: Option<u32>,
        _place: Place,
    }
    let mut sides = Vec::new();
    for mode in [Mode::InProcess, Mode::Joined, Mode::JoinedOnSockets] {
        let place = Place::new()?;
        let mut client = place.start(server, mode)?;
        let owner = if mode == Mode::InProcess { None } else { Some(owner_pid(&mut client)?) };
        client.call("state_set", json!({"key": "bench/k", "value": value_256()}))?;
        sides.push(Side { mode, client, owner, _place: place });
    }
    let server_cpu = |side: &Side| -> Result<Duration> {
        Ok(process_cpu(side.client.pid())? + side.owner.map_or(Ok(Duration::ZERO), process_cpu)?)
    };
    let mut ratios = Vec::new();
    let mut next_id = 0u64;
    // `request_id` rows show what recording an idempotency key costs (joiners record one for
    // every write they forward, so the joined `state_set` row includes it already).
    for (label, tool, with_id, n) in [
        ("state_get", "state_get", false, calls),
        ("state_set", "state_set", false, calls.min(2_000)),
        ("state_set + request_id", "state_set", true, calls.min(2_000)),
    ] {
        let mut args = || {
            next_id += 1;
            match (tool, with_id) {
                ("state_get", _) => json!({"key": "bench/k"}),
                (_, false) => json!({"key": "bench/k", "value": value_256()}),
                (_, true) => json!({"key": "bench/k", "value": value_256(), "request_id": format!("bench-{next_id}")}),
            }
        };
        let batch = 250.min(n);
        let mut spent = [(Duration::ZERO, Duration::ZERO); 3];
        for side in &mut sides {
            for _ in 0..batch {
                side.client.call(tool, args())?; // warm-up
            }
        }
        for _ in 0..n / batch {
            for (i, side) in sides.iter_mut().enumerate() {
                let cpu_before = server_cpu(side)?;
                let started = Instant::now();
                for _ in 0..batch {
                    let r = side.client.call(tool, args())?;
                    anyhow::ensure!(!r.is_error, "{tool} failed: {}", r.text);
                }
                spent[i].0 += started.elapsed();
                spent[i].1 += server_cpu(side)? - cpu_before;
            }
        }
        let done = (n / batch * batch) as f64;
        for (side, (elapsed, cpu)) in sides.iter().zip(spent) {
            println!(
                "| {label} | {} | {done} | {:.0} | {:.1} µs | {:.1} µs |",
                side.mode.name(),
                done / elapsed.as_secs_f64(),
                elapsed.as_secs_f64() * 1e6 / done,
                cpu.as_secs_f64() * 1e6 / done
            );
        }
        ratios.push((label, spent[1].0.as_secs_f64() / spent[0].0.as_secs_f64()));
    }
    println!();
    for (tool, ratio) in ratios {
        println!("- `{tool}` joined / in-process round trip: {ratio:.2}×");
    }
    let hop = floor::socket_round_trip(u32::try_from(calls.max(1000))?)?;
    println!(
        "- floor of the hop, same run: a bare Unix-socket round trip of {} bytes between two processes \
         (blocking reads, no parsing) costs {:.1} µs of CPU, both sides together ({:.0} round trips/s)",
        floor::MESSAGE_BYTES,
        hop.cpu.as_secs_f64() * 1e6,
        hop.per_second
    );
    println!();
    for mut side in sides {
        side.client.shutdown()?;
        if let Some(pid) = side.owner {
            stop_owner(pid);
        }
    }
    Ok(())
}

/// `processes` state-mcp processes, each driven by its own client thread, compare-and-set one
/// counter for `duration`; the final count must equal the successes.
fn mcp_shared_counter(server: &Path, processes: usize, duration: Duration) -> Result<()> {
    println!("## MCP stdio: {processes} processes on one database, compare-and-set on one counter\n");
    let place = Place::new()?;
    let mut setup = place.start(server, Mode::Joined)?;
    setup.call("state_set", json!({"key": "counter", "value": 0, "expected_version": 0}))?;
    let owner = owner_pid(&mut setup)?;
    let cpu_before = process_cpu(owner)?;
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..processes)
        .map(|_| -> Result<_> {
            let mut client = place.start(server, Mode::Joined)?;
            let stop = stop.clone();
            Ok(std::thread::spawn(move || -> Result<(u64, u64)> {
                let (mut ok, mut conflicts) = (0u64, 0u64);
                while !stop.load(Ordering::Relaxed) {
                    let got = client.call("state_get", json!({"key": "counter"}))?.json();
                    let (n, version) = (got["value"].as_u64().unwrap_or(0), got["version"].as_u64().unwrap_or(0));
                    let set = client
                        .call("state_set", json!({"key": "counter", "value": n + 1, "expected_version": version}))?;
                    anyhow::ensure!(!set.is_error, "{}", set.text);
                    match set.json()["status"].as_str() {
                        Some("ok") => ok += 1,
                        _ => conflicts += 1,
                    }
                }
                client.shutdown()?;
                Ok((ok, conflicts))
            }))
        })
        .collect::<Result<_>>()?;
    let started = Instant::now();
    std::thread::sleep(duration);
    stop.store(true, Ordering::Relaxed);
    let (mut ok, mut conflicts) = (0, 0);
    for worker in workers {
        let (o, c) = worker.join().map_err(|_| anyhow::anyhow!("a worker panicked"))??;
        ok += o;
        conflicts += c;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let owner_cpu = process_cpu(owner)? - cpu_before;
    let count = setup.call("state_get", json!({"key": "counter"}))?.json()["value"].as_u64().unwrap_or(0);
    anyhow::ensure!(count == ok, "lost updates: counter {count}, successful compare-and-sets {ok}");
    println!("| processes | successful CAS/s | conflicts/s | final count = successes | owner CPU per CAS attempt |");
    println!("|---:|---:|---:|---:|---:|");
    println!(
        "| {processes} | {:.0} | {:.0} | {count} = {ok} | {:.1} µs |\n",
        ok as f64 / elapsed,
        conflicts as f64 / elapsed,
        owner_cpu.as_secs_f64() * 1e6 / (ok + conflicts).max(1) as f64
    );
    setup.shutdown()?;
    stop_owner(owner);
    Ok(())
}

/// CPU time a process's live threads have used, in nanoseconds from
/// /proc/<pid>/task/*/schedstat (Linux): precise, unlike the 10 ms ticks of /proc/<pid>/stat.
fn process_cpu(pid: u32) -> Result<Duration> {
    let mut nanos = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).context("reading /proc (Linux only)")? {
        let stat = std::fs::read_to_string(task?.path().join("schedstat")).unwrap_or_default();
        nanos += stat.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0);
    }
    Ok(Duration::from_nanos(nanos))
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

/// A small deterministic generator (xorshift64*), so every run measures the same workload.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Writes keys `0..count` (named and valued by `entry`) with 64 concurrent writers, so group
/// commit fills a large store in seconds.
pub(crate) async fn write_keys(engine: &Engine, count: usize, entry: fn(usize) -> (String, Value)) -> Result<()> {
    let writers = 64;
    let mut tasks = Vec::new();
    for w in 0..writers {
        let engine = engine.clone();
        tasks.push(tokio::spawn(async move {
            for i in (w..count).step_by(writers) {
                let (key, value) = entry(i);
                engine.set(SetRequest::new(key, value)).await?;
            }
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(())
}
