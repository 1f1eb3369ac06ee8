//! Claims through a DAG of runs: each run depends on up to two earlier ones, and workers claim
//! whatever is ready (highest priority, then oldest) and complete it at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::json;
use state_core::ops::workflow::{ClaimRequest, ClaimStatus, CompleteRequest, CreateRunRequest};

use super::{ms, open_engine, percentile, tempfile_dir};

pub(crate) async fn engine_dag(runs: u64, workers: usize) -> Result<()> {
    println!("## Engine: a DAG of runs claimed in dependency order ({workers} workers)\n");
    let dir = tempfile_dir::Dir::new()?;
    let engine = open_engine(&dir)?;
    let mut ids: Vec<String> = Vec::new();
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    for i in 0..runs {
        let depends_on =
            if i == 0 { Vec::new() } else { (0..next(3)).map(|_| ids[next(i) as usize].clone()).collect() };
        let req = CreateRunRequest {
            name: "dag".into(),
            input: json!(i),
            depends_on,
            priority: Some(next(10) as u8),
            ..CreateRunRequest::default()
        };
        ids.push(engine.workflow_create(req).await?.run_id);
    }
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (engine, done) = (engine.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let agent = format!("w{w}");
            let mut latencies = Vec::new();
            while done.load(Ordering::Relaxed) < runs {
                let t = Instant::now();
                let claim = ClaimRequest {
                    agent_id: agent.clone(),
                    lease_ttl_seconds: Some(60.0),
                    run_id: None,
                    tags: Default::default(),
                    name: None,
                    request_id: None,
                };
                let claimed = engine.workflow_claim(claim).await?;
                latencies.push(t.elapsed());
                if claimed.status != ClaimStatus::Claimed {
                    // Nothing ready: another worker's completion will make something ready.
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    continue;
                }
                let complete = CompleteRequest {
                    run_id: claimed.run_id.unwrap_or_default(),
                    agent_id: agent.clone(),
                    token: claimed.token.unwrap_or_default(),
                    result: json!(null),
                    request_id: None,
                };
                engine.workflow_complete(complete).await?;
                done.fetch_add(1, Ordering::Relaxed);
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut latencies: Vec<Duration> = Vec::new();
    for task in tasks {
        latencies.extend(task.await??);
    }
    let elapsed = started.elapsed();
    latencies.sort();
    println!("| runs | workers | runs completed/s | claims tried | p50 claim | p99 claim |");
    println!("|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {runs} | {workers} | {:.0} | {} | {} | {} |\n",
        runs as f64 / elapsed.as_secs_f64(),
        latencies.len(),
        ms(percentile(&latencies, 0.5)),
        ms(percentile(&latencies, 0.99)),
    );
    engine.close().await;
    Ok(())
}
