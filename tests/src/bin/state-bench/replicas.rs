//! Scale-out: REST reads, writes and compare-and-set with 64 clients through one and two
//! `state-http` replicas on PostgreSQL, the same through one server on redb, and pgbench's
//! single-row upsert rate as the ceiling PostgreSQL itself sets on this machine, all in one run.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use state_e2e::HttpServer;

use crate::http::{HttpClient, Transport, Workload, load, pg_target, pgbench, send};
use crate::{ms, tempfile_dir, value_256};

const CLIENTS: usize = 64;

pub(crate) async fn run(server: &Path, duration: Duration) -> Result<()> {
    println!("## Replicas: state-http on PostgreSQL, one and two replicas, against redb ({CLIENTS} clients, REST)\n");
    let target = pg_target();
    let schema = format!("bench_{}", std::process::id());
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: HttpClient = Client::builder(TokioExecutor::new()).pool_max_idle_per_host(256).build(connector);

    let dir = tempfile_dir::Dir::new()?;
    let db = dir.path().join("replicas.redb").to_string_lossy().into_owned();
    let runtime_dir = dir.path().join("run").to_string_lossy().into_owned();
    let redb = HttpServer::start(server, &["--db", &db, "--owner-idle", "1s"], &[("STATE_RUNTIME_DIR", &runtime_dir)])?;
    let pg_args = ["--postgres", target.as_str(), "--postgres-schema", schema.as_str()];
    let first = HttpServer::start(server, &pg_args, &[]).context("a replica on PostgreSQL (is it running?)")?;
    let second = HttpServer::start(server, &pg_args, &[])?;

    let setups: [(&str, Vec<&HttpServer>); 3] = [
        ("redb, 1 server", vec![&redb]),
        ("PostgreSQL, 1 replica", vec![&first]),
        ("PostgreSQL, 2 replicas", vec![&first, &second]),
    ];
    for (_, servers) in &setups {
        seed(&client, servers[0]).await?;
    }
    let pg = pgbench(CLIENTS, duration).await;
    println!("| store | workload | ops/s | p50 | p99 (worst replica) |");
    println!("|---|---|---:|---:|---:|");
    let mut rates = Vec::new();
    for workload in [Workload::Read, Workload::Write, Workload::Cas] {
        for (name, servers) in &setups {
            let share = CLIENTS / servers.len();
            let runs = servers.iter().map(|s| {
                let base = format!("http://{}", s.addr);
                let client = client.clone();
                async move { load(&client, &base, Transport::Rest, workload, share, duration).await }
            });
            let results = futures_join_all(runs).await?;
            let rate: f64 = results.iter().map(|r| r.0).sum();
            let p50 = results.iter().map(|r| r.1).max().unwrap_or_default();
            let p99 = results.iter().map(|r| r.2).max().unwrap_or_default();
            println!("| {name} | {} | {rate:.0} | {} | {} |", workload.name(), ms(p50), ms(p99));
            rates.push((workload, *name, rate));
        }
    }
    println!();
    let rate = |w: Workload, s: &str| rates.iter().find(|r| r.0 == w && r.1 == s).map_or(0.0, |r| r.2);
    for workload in [Workload::Read, Workload::Write, Workload::Cas] {
        let (one, two, redb) = (
            rate(workload, "PostgreSQL, 1 replica"),
            rate(workload, "PostgreSQL, 2 replicas"),
            rate(workload, "redb, 1 server"),
        );
        println!(
            "- {}: 2 replicas / 1 = {:.2}×; PostgreSQL (1 replica) / redb = {:.2}×",
            workload.name(),
            two / one.max(1.0),
            one / redb.max(1.0)
        );
    }
    match pg {
        Ok(tps) => println!(
            "- pgbench single-row upserts, {CLIENTS} clients, same run: {tps:.0} tps; unconditional writes through 2 replicas are {:.2}× that\n",
            rate(Workload::Write, "PostgreSQL, 2 replicas") / tps
        ),
        Err(error) => println!("- pgbench reference not measured: {error:#}\n"),
    }
    drop((first, second, redb));
    let drop_schema = format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE");
    let _ = tokio::process::Command::new("psql").args([target.as_str(), "-q", "-c", &drop_schema]).output().await;
    Ok(())
}

/// The keys the read workload reads.
async fn seed(client: &HttpClient, server: &HttpServer) -> Result<()> {
    let base = format!("http://{}", server.addr);
    for i in 0..crate::http::READ_KEYS {
        let body = Bytes::from(value_256().to_string());
        send(client, "PUT", &format!("{base}/v1/kv/bench/r{i}"), &[], body).await?;
    }
    Ok(())
}

/// Runs the loads side by side (one per replica) and collects their results in order.
async fn futures_join_all<F, T>(futures: impl Iterator<Item = F>) -> Result<Vec<T>>
where
    F: std::future::Future<Output = Result<T>> + Send + 'static,
    T: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut results = Vec::new();
    for handle in handles {
        results.push(handle.await??);
    }
    Ok(results)
}
