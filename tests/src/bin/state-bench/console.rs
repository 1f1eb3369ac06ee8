//! The web console on a large store: 100,000 keys (ten teams of ten agents with 1,000 keys
//! each) and 10,000 runs, the first 500 of them one dependency graph in every state (done,
//! failed, running, ready, waiting). state-http serves that database, and
//! `tests/sdk/console_bench.py` opens each view in Debian's headless Chromium several times,
//! each in a fresh browser context, reading from the page's Performance timeline when the view
//! was drawn and when the frame showing it was painted.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::{Value, json};
use state_core::ops::workflow::{ClaimRequest, ClaimStatus, CompleteRequest, CreateRunRequest, FailRequest};
use state_e2e::HttpServer;
use state_store::Engine;

use crate::{Rng, open_engine, tempfile_dir, write_keys};

const TEAMS: usize = 10;
const AGENTS: usize = 10;
const KEYS_PER_AGENT: usize = 1000;
const RUNS: usize = 10_000;
const GRAPH: usize = 500;
/// What a person waits for at most: the target the first view is measured against.
const TARGET_MS: f64 = 300.0;

pub(crate) fn run(server: &Path, runtime: &tokio::runtime::Runtime, loads: usize, hold: bool) -> Result<()> {
    let keys = TEAMS * AGENTS * KEYS_PER_AGENT;
    println!("## Web console: each view's first draw on {keys} keys and {RUNS} runs (headless Chromium)\n");
    let Some(sdk) = state_e2e::sdk::dir() else {
        println!("(skipped: the SDKs are not installed; bash tests/sdk/setup.sh)\n");
        return Ok(());
    };
    let Some(chromium) = ["chromium", "chromium-browser"].iter().find_map(|name| which(name)) else {
        println!("(skipped: chromium is not installed; apt-get install chromium)\n");
        return Ok(());
    };
    let dir = tempfile_dir::Dir::new()?;
    let started = Instant::now();
    runtime.block_on(populate(&dir))?;
    println!("(populated in {:.1} s)\n", started.elapsed().as_secs_f64());

    let db = dir.path().join("bench.redb").to_string_lossy().into_owned();
    let runtime_dir = dir.path().join("run").to_string_lossy().into_owned();
    let server = HttpServer::start(server, &["--db", &db], &[("STATE_RUNTIME_DIR", &runtime_dir)])?;
    let views =
        ["overview", "keys", "keys?prefix=team-03%2Fagent-07%2F", "runs", "runs?status=failed", "leases", "queues"];
    let output = Command::new(sdk.join("venv/bin/python"))
        .arg(state_e2e::sdk::repository().join("tests/sdk/console_bench.py"))
        .env("STATE_URL", format!("http://{}", server.addr))
        .env("CHROMIUM", &chromium)
        .env("VIEWS", views.join(" "))
        .env("LOADS", loads.to_string())
        .output()
        .context("running tests/sdk/console_bench.py")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    anyhow::ensure!(
        output.status.success() && stdout.trim_end().ends_with("console bench: done"),
        "the console benchmark failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    println!("Median of {loads} loads, each in a fresh browser context (no cache, a new sign-in and watch),");
    println!("from the start of navigation; the target is the painted frame within {TARGET_MS:.0} ms.\n");
    println!(
        "| view | drawn | painted | slowest painted | slowest API answer | transferred | requests | within target |"
    );
    println!("|---|---:|---:|---:|---|---:|---:|---|");
    for line in stdout.lines().filter(|l| l.starts_with('{')) {
        let row: Value = serde_json::from_str(line)?;
        let errors = row["errors"].as_array().map_or(0, Vec::len);
        anyhow::ensure!(errors == 0, "the view {} showed errors: {}", row["view"], row["errors"]);
        let painted = row["painted_median_ms"].as_f64().unwrap_or(f64::NAN);
        println!(
            "| `#/{}` | {:.0} ms | {painted:.0} ms | {:.0} ms | {:.0} ms `{}` | {:.1} KB | {} | {} |",
            row["view"].as_str().unwrap_or("?").replace("overview", ""),
            row["drawn_median_ms"].as_f64().unwrap_or(f64::NAN),
            row["painted_max_ms"].as_f64().unwrap_or(f64::NAN),
            row["slowest_request_ms"].as_f64().unwrap_or(f64::NAN),
            row["slowest_request"].as_str().unwrap_or(""),
            row["bytes"].as_f64().unwrap_or(0.0) / 1000.0,
            row["requests"],
            if painted <= TARGET_MS { "yes" } else { "**no**" },
        );
    }
    println!();
    if hold {
        println!("(the store is served at http://{} until this is interrupted)", server.addr);
        loop {
            std::thread::park();
        }
    }
    Ok(())
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    let out = Command::new("which").arg(name).output().ok()?;
    out.status.success().then(|| std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

async fn populate(dir: &tempfile_dir::Dir) -> Result<()> {
    let engine = open_engine(dir)?;
    write_keys(&engine, TEAMS * AGENTS * KEYS_PER_AGENT, |i| {
        let (team, agent, n) = (i / (AGENTS * KEYS_PER_AGENT), i / KEYS_PER_AGENT % AGENTS, i % KEYS_PER_AGENT);
        (format!("team-{team:02}/agent-{agent:02}/key-{n:04}"), json!({"n": i, "note": "x".repeat(40)}))
    })
    .await?;
    graph(&engine).await?;
    // The other runs are independent and pending, created concurrently after the graph (runs
    // list in creation order, so the graph is the runs view's first page).
    let writers = 64;
    let mut tasks = Vec::new();
    for w in 0..writers {
        let engine = engine.clone();
        tasks.push(tokio::spawn(async move {
            for i in (w..RUNS - GRAPH).step_by(writers) {
                let req = CreateRunRequest {
                    name: format!("task-{}", i % 37),
                    input: json!(i),
                    tags: [("team".to_owned(), format!("team-{:02}", i % TEAMS))].into(),
                    ..CreateRunRequest::default()
                };
                engine.workflow_create(req).await?;
            }
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    engine.close().await;
    Ok(())
}

/// 500 runs, each depending on up to two earlier ones; then some are completed, some failed
/// and some left running, so the graph shows every state.
async fn graph(engine: &Engine) -> Result<()> {
    let mut ids: Vec<String> = Vec::new();
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut next = |n: usize| rng.below(n);
    for i in 0..GRAPH {
        let depends_on = if i < 8 { Vec::new() } else { (0..1 + next(2)).map(|_| ids[next(i)].clone()).collect() };
        let req = CreateRunRequest { name: format!("step-{i}"), input: json!(i), depends_on, ..Default::default() };
        ids.push(engine.workflow_create(req).await?.run_id);
    }
    for round in 0..80 {
        let claim = ClaimRequest {
            agent_id: format!("agent-{}", round % 6),
            lease_ttl_seconds: Some(3600.0),
            run_id: None,
            tags: Default::default(),
            name: None,
            request_id: None,
        };
        let claimed = engine.workflow_claim(claim).await?;
        if claimed.status != ClaimStatus::Claimed {
            break;
        }
        let (run_id, token) = (claimed.run_id.unwrap_or_default(), claimed.token.unwrap_or_default());
        let agent_id = format!("agent-{}", round % 6);
        match round % 8 {
            // Left running: claimed and held.
            7 => {}
            3 => {
                let error = "the build broke".to_owned();
                let fail = FailRequest {
                    run_id,
                    agent_id,
                    token,
                    error,
                    retryable: false,
                    retry_delay_seconds: None,
                    request_id: None,
                };
                engine.workflow_fail(fail).await?;
            }
            _ => {
                let done = CompleteRequest { run_id, agent_id, token, result: json!("ok"), request_id: None };
                engine.workflow_complete(done).await?;
            }
        }
    }
    Ok(())
}
