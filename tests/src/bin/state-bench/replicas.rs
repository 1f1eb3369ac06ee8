//! Scale-out: REST reads, writes and compare-and-set with 64 clients through one, two and
//! four `state-http` replicas on PostgreSQL and through one server on redb, and pgbench's
//! single-row upsert rate as the ceiling PostgreSQL itself sets on this machine, all in one
//! run. Then the writes again with PostgreSQL behind a network that adds `--pg-delay-ms`
//! each way (a delaying proxy, `delay.rs`), where a lock held across round trips shows at
//! once; pgbench goes through the same proxy.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use state_e2e::HttpServer;

use crate::delay::{DelayProxy, reroute};
use crate::http::{HttpClient, Transport, Workload, load, pg_target, pgbench_at, send};
use crate::{ms, tempfile_dir, value_256};

const CLIENTS: usize = 64;
const REPLICAS: [usize; 3] = [1, 2, 4];

pub(crate) async fn run(server: &Path, duration: Duration, delay: Duration) -> Result<()> {
    println!("## Replicas: state-http on PostgreSQL, {REPLICAS:?} replicas, against redb ({CLIENTS} clients, REST)\n");
    let target = pg_target();
    let schema = format!("bench_{}", std::process::id());
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: HttpClient = Client::builder(TokioExecutor::new()).pool_max_idle_per_host(256).build(connector);

    let dir = tempfile_dir::Dir::new()?;
    let db = dir.path().join("replicas.redb").to_string_lossy().into_owned();
    let runtime_dir = dir.path().join("run").to_string_lossy().into_owned();
    let redb = HttpServer::start(server, &["--db", &db, "--owner-idle", "1s"], &[("STATE_RUNTIME_DIR", &runtime_dir)])?;
    let replicas = start_replicas(server, &target, &schema, REPLICAS[REPLICAS.len() - 1])
        .context("replicas on PostgreSQL (is it running?)")?;

    let mut setups: Vec<(String, Vec<&HttpServer>)> = vec![("redb, 1 server".into(), vec![&redb])];
    for n in REPLICAS {
        setups.push((replicas_name(n), replicas.iter().take(n).collect()));
    }
    for (_, servers) in &setups {
        seed(&client, servers[0]).await?;
    }
    let pg = pgbench_at(&target, CLIENTS, duration).await;
    println!("| store | workload | ops/s | p50 | p99 (worst replica) |");
    println!("|---|---|---:|---:|---:|");
    let mut rates = Vec::new();
    for workload in [Workload::Read, Workload::Write, Workload::Cas] {
        for (name, servers) in &setups {
            let (rate, p50, p99) = measure(&client, servers, workload, duration).await?;
            println!("| {name} | {} | {rate:.0} | {} | {} |", workload.name(), ms(p50), ms(p99));
            rates.push((workload, name.clone(), rate));
        }
    }
    println!();
    let rate = |w: Workload, s: &str| rates.iter().find(|r| r.0 == w && r.1 == s).map_or(0.0, |r| r.2);
    let one = replicas_name(1);
    for workload in [Workload::Read, Workload::Write, Workload::Cas] {
        let base = rate(workload, &one).max(1.0);
        let scaled: Vec<String> = REPLICAS[1..]
            .iter()
            .map(|&n| format!("{n} replicas / 1 = {:.2}×", rate(workload, &replicas_name(n)) / base))
            .collect();
        println!(
            "- {}: {}; PostgreSQL (1 replica) / redb = {:.2}×",
            workload.name(),
            scaled.join(", "),
            base / rate(workload, "redb, 1 server").max(1.0)
        );
    }
    match &pg {
        Ok(tps) => println!(
            "- pgbench single-row upserts, {CLIENTS} clients, same run: {tps:.0} tps; unconditional writes through 1, 2 and 4 replicas are {}\n",
            REPLICAS.map(|n| format!("{:.2}×", rate(Workload::Write, &replicas_name(n)) / tps)).join(", ")
        ),
        Err(error) => println!("- pgbench reference not measured: {error:#}\n"),
    }
    let direct: Vec<(usize, f64)> = REPLICAS.iter().map(|&n| (n, rate(Workload::Write, &replicas_name(n)))).collect();
    drop(replicas);
    if !delay.is_zero() {
        behind_a_network(server, &client, &target, &schema, duration, delay, &direct, pg.ok()).await?;
    }
    drop(redb);
    let drop_schema = format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE");
    let _ = tokio::process::Command::new("psql").args([target.as_str(), "-q", "-c", &drop_schema]).output().await;
    Ok(())
}

/// The writes again with every connection to PostgreSQL (the replicas' and pgbench's) held
/// `delay` each way, beside the rates measured without it.
#[allow(clippy::too_many_arguments)]
async fn behind_a_network(
    server: &Path,
    client: &HttpClient,
    target: &str,
    schema: &str,
    duration: Duration,
    delay: Duration,
    direct: &[(usize, f64)],
    direct_pgbench: Option<f64>,
) -> Result<()> {
    let millis = delay.as_secs_f64() * 1000.0;
    println!("### Writes with PostgreSQL {millis} ms away each way ({CLIENTS} clients)\n");
    let (pg_addr, _) = reroute(target, "127.0.0.1:0".parse()?)?;
    let proxy = DelayProxy::start(pg_addr, delay).await?;
    let (_, via_proxy) = reroute(target, proxy.addr)?;
    let replicas = start_replicas(server, &via_proxy, schema, REPLICAS[REPLICAS.len() - 1])?;
    let pg = pgbench_at(&via_proxy, CLIENTS, duration).await;
    println!(
        "| replicas | writes/s, direct | writes/s, {millis} ms away | delayed / direct | p50 | p99 | requests per batch |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for &(n, direct_rate) in direct {
        let servers: Vec<&HttpServer> = replicas.iter().take(n).collect();
        let before = batching(client, &servers).await?;
        let (rate, p50, p99) = measure(client, &servers, Workload::Write, duration).await?;
        let after = batching(client, &servers).await?;
        let per_batch = (after.0 - before.0) / (after.1 - before.1).max(1.0);
        println!(
            "| {n} | {direct_rate:.0} | {rate:.0} | {:.2}× | {} | {} | {per_batch:.1} |",
            rate / direct_rate.max(1.0),
            ms(p50),
            ms(p99)
        );
    }
    match (pg, direct_pgbench) {
        (Ok(tps), Some(direct)) => {
            println!("\n- pgbench, {CLIENTS} clients: {direct:.0} tps direct, {tps:.0} tps {millis} ms away\n")
        }
        (Ok(tps), None) => println!("\n- pgbench, {CLIENTS} clients, {millis} ms away: {tps:.0} tps\n"),
        (Err(error), _) => println!("\n- pgbench through the delay not measured: {error:#}\n"),
    }
    Ok(())
}

/// Write requests and write batches so far, summed over `servers` (their health).
async fn batching(client: &HttpClient, servers: &[&HttpServer]) -> Result<(f64, f64)> {
    let mut sums = (0.0, 0.0);
    for server in servers {
        let (_, _, body) = send(client, "GET", &format!("http://{}/v1/health", server.addr), &[], Bytes::new()).await?;
        let health: serde_json::Value = serde_json::from_str(&body)?;
        sums.0 += health["writes"]["requests"].as_f64().unwrap_or(0.0);
        sums.1 += health["writes"]["batches"].as_f64().unwrap_or(0.0);
    }
    Ok(sums)
}

fn replicas_name(n: usize) -> String {
    match n {
        1 => "PostgreSQL, 1 replica".into(),
        n => format!("PostgreSQL, {n} replicas"),
    }
}

fn start_replicas(server: &Path, target: &str, schema: &str, n: usize) -> Result<Vec<HttpServer>> {
    let args = ["--postgres", target, "--postgres-schema", schema];
    (0..n).map(|_| HttpServer::start(server, &args, &[])).collect()
}

/// `workload` from [`CLIENTS`] clients shared evenly among `servers`: the summed rate and
/// the worst server's p50 and p99.
async fn measure(
    client: &HttpClient,
    servers: &[&HttpServer],
    workload: Workload,
    duration: Duration,
) -> Result<(f64, Duration, Duration)> {
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
    Ok((rate, p50, p99))
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
