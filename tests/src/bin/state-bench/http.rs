//! `state-http` under load: REST and `/mcp` with 1, 8 and 64 concurrent clients, for reads,
//! unconditional writes and durable compare-and-set writes; and PostgreSQL's own single-row
//! upsert rate (pgbench, fsync on) on the same machine in the same run, as the reference.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use state_e2e::HttpServer;

use crate::{ms, percentile, tempfile_dir, value_256};

pub(crate) type HttpClient = Client<HttpConnector, Full<Bytes>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transport {
    Rest,
    Mcp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Workload {
    Read,
    Write,
    Cas,
}

impl Workload {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Workload::Read => "reads",
            Workload::Write => "unconditional writes",
            Workload::Cas => "durable compare-and-set",
        }
    }
}

const CLIENTS: [usize; 3] = [1, 8, 64];
pub(crate) const READ_KEYS: usize = 1000;

pub(crate) async fn run(server: &Path, duration: Duration) -> Result<()> {
    println!("## HTTP: REST and /mcp throughput (state-http, fresh database, keep-alive connections)\n");
    let dir = tempfile_dir::Dir::new()?;
    let db = dir.path().join("http.redb").to_string_lossy().into_owned();
    let runtime_dir = dir.path().join("run").to_string_lossy().into_owned();
    let server =
        HttpServer::start(server, &["--db", &db, "--owner-idle", "1s"], &[("STATE_RUNTIME_DIR", &runtime_dir)])?;
    let base = format!("http://{}", server.addr);
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: HttpClient = Client::builder(TokioExecutor::new()).pool_max_idle_per_host(256).build(connector);
    for i in 0..READ_KEYS {
        let body = Bytes::from(value_256().to_string());
        send(&client, "PUT", &format!("{base}/v1/kv/bench/r{i}"), &[], body).await?;
    }
    let pg = pgbench(64, duration).await;
    println!("Server CPU is state-http's own, per operation; the load generator shares the machine's cores.\n");
    println!(
        "For writes, the last column is group commit's work: writes per commit, and the time a commit (its fsync) took.\n"
    );
    println!(
        "| transport | workload | clients | ops/s | p50 | p99 | server CPU per op | writes per commit / commit time |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    let mut cas_rest_64 = None;
    let mut reads_rest_best: f64 = 0.0;
    for transport in [Transport::Rest, Transport::Mcp] {
        for workload in [Workload::Read, Workload::Write, Workload::Cas] {
            for clients in CLIENTS {
                let cpu_before = crate::process_cpu(server.pid())?;
                let writes_before = writes(&client, &base).await?;
                let (rate, p50, p99, ops) = load(&client, &base, transport, workload, clients, duration).await?;
                let cpu = crate::process_cpu(server.pid())? - cpu_before;
                let commits = writes(&client, &base).await?.since(&writes_before);
                let name = if transport == Transport::Rest { "REST" } else { "/mcp" };
                println!(
                    "| {name} | {} | {clients} | {rate:.0} | {} | {} | {:.1} µs | {commits} |",
                    workload.name(),
                    ms(p50),
                    ms(p99),
                    cpu.as_secs_f64() * 1e6 / ops.max(1) as f64
                );
                if transport == Transport::Rest && workload == Workload::Cas && clients == 64 {
                    cas_rest_64 = Some(rate);
                }
                if transport == Transport::Rest && workload == Workload::Read {
                    reads_rest_best = reads_rest_best.max(rate);
                }
            }
        }
    }
    println!();
    match pg {
        Ok(tps) => {
            println!("PostgreSQL reference, same run: pgbench single-row upserts, fsync on, 64 clients: {tps:.0} tps.");
            if let Some(cas) = cas_rest_64 {
                println!("- durable CAS over REST at 64 clients / pgbench upserts: {:.2}× (target ≥ 3×)", cas / tps);
            }
        }
        Err(error) => println!("PostgreSQL reference not measured: {error:#}"),
    }
    println!("- best REST reads/s: {reads_rest_best:.0} (target ≥ 50,000)\n");
    drop(server);
    Ok(())
}

/// The server's group-commit counters (from `/v1/health`).
#[derive(Debug, Clone, Copy, Default)]
struct Writes {
    requests: f64,
    commits: f64,
    commit_seconds: f64,
}

impl Writes {
    /// What happened between `before` and now, for a table cell.
    fn since(&self, before: &Writes) -> String {
        let commits = self.commits - before.commits;
        if commits < 1.0 {
            return "–".into();
        }
        let per_commit = (self.requests - before.requests) / commits;
        let commit_ms = (self.commit_seconds - before.commit_seconds) * 1000.0 / commits;
        format!("{per_commit:.1} / {commit_ms:.2} ms")
    }
}

async fn writes(client: &HttpClient, base: &str) -> Result<Writes> {
    let (_, _, body) = send(client, "GET", &format!("{base}/v1/health"), &[], Bytes::new()).await?;
    let health: Value = serde_json::from_str(&body)?;
    let number = |field: &str| health["writes"][field].as_f64().unwrap_or(0.0);
    Ok(Writes { requests: number("requests"), commits: number("commits"), commit_seconds: number("commit_seconds") })
}

/// `clients` tasks run `workload` for `duration`; every call must succeed.
pub(crate) async fn load(
    client: &HttpClient,
    base: &str,
    transport: Transport,
    workload: Workload,
    clients: usize,
    duration: Duration,
) -> Result<(f64, Duration, Duration, usize)> {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let stop = Arc::new(AtomicBool::new(false));
    let run = RUNS.fetch_add(1, Ordering::Relaxed);
    let tasks: Vec<_> = (0..clients)
        .map(|task| {
            let (client, base, stop) = (client.clone(), base.to_owned(), stop.clone());
            let key = format!("bench/run{run}/{task}");
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut version = 0u64;
                let mut n = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    version = call(&client, &base, transport, workload, &key, task, n, version).await?;
                    latencies.push(started.elapsed());
                    n += 1;
                }
                anyhow::Ok(latencies)
            })
        })
        .collect();
    let started = Instant::now();
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await??);
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort();
    Ok((all.len() as f64 / elapsed, percentile(&all, 0.5), percentile(&all, 0.99), all.len()))
}

/// One operation; returns the key's version after it (for compare-and-set chains).
#[allow(clippy::too_many_arguments)]
async fn call(
    client: &HttpClient,
    base: &str,
    transport: Transport,
    workload: Workload,
    key: &str,
    task: usize,
    n: usize,
    version: u64,
) -> Result<u64> {
    let read_key = format!("bench/r{}", (task * 7919 + n) % READ_KEYS);
    let write_key = format!("{key}/{n}");
    match transport {
        Transport::Rest => {
            let value = Bytes::from(value_256().to_string());
            let (status, headers, _) = match workload {
                Workload::Read => send(client, "GET", &format!("{base}/v1/kv/{read_key}"), &[], Bytes::new()).await?,
                Workload::Write => send(client, "PUT", &format!("{base}/v1/kv/{write_key}"), &[], value).await?,
                Workload::Cas => {
                    let precondition = if version == 0 {
                        ("if-none-match", "*".to_owned())
                    } else {
                        ("if-match", format!("\"{version}\""))
                    };
                    send(client, "PUT", &format!("{base}/v1/kv/{key}"), &[(precondition.0, &precondition.1)], value)
                        .await?
                }
            };
            anyhow::ensure!(status == 200, "{workload:?} answered {status}");
            Ok(headers.and_then(|etag| etag.trim_matches('"').parse().ok()).unwrap_or(version))
        }
        Transport::Mcp => {
            let (tool, args) = match workload {
                Workload::Read => ("state_get", json!({"key": read_key})),
                Workload::Write => ("state_set", json!({"key": write_key, "value": value_256()})),
                Workload::Cas => ("state_set", json!({"key": key, "value": value_256(), "expected_version": version})),
            };
            let body = json!({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {
                "name": tool, "arguments": args, "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {}}}});
            let headers = [
                ("accept", "application/json, text/event-stream"),
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
                ("mcp-name", tool),
            ];
            let (status, _, text) =
                send(client, "POST", &format!("{base}/mcp"), &headers, Bytes::from(body.to_string())).await?;
            anyhow::ensure!(status == 200, "/mcp answered {status}");
            let message: Value = text
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .find_map(|d| serde_json::from_str(d.trim()).ok())
                .or_else(|| serde_json::from_str(&text).ok())
                .context("no JSON-RPC message in the answer")?;
            let result = &message["result"]["structuredContent"];
            anyhow::ensure!(result["status"] == "ok", "{tool}: {message}");
            Ok(result["version"].as_u64().unwrap_or(version))
        }
    }
}

/// Sends a request; returns the status, the ETag, and the body.
pub(crate) async fn send(
    client: &HttpClient,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Bytes,
) -> Result<(u16, Option<String>, String)> {
    let mut request = Request::builder().method(method).uri(url).header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = client.request(request.body(Full::new(body))?).await?;
    let status = response.status().as_u16();
    let etag = response.headers().get("etag").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let bytes = response.into_body().collect().await?.to_bytes();
    Ok((status, etag, String::from_utf8_lossy(&bytes).into_owned()))
}

/// The PostgreSQL the benchmarks use: `STATE_BENCH_PG` (a connection string), or the local
/// one on 127.0.0.1:5432 as postgres.
pub(crate) fn pg_target() -> String {
    std::env::var("STATE_BENCH_PG").unwrap_or_else(|_| "host=127.0.0.1 user=postgres dbname=postgres".into())
}

/// pgbench's rate of single-row upserts (fsync on, synchronous commit) with 64 clients on the
/// local PostgreSQL, as `STATE_BENCH_PG` (a connection string) or 127.0.0.1:5432 as postgres.
/// pgbench's single-row upserts on the machine's PostgreSQL (fsync on), `clients` at once.
pub(crate) async fn pgbench(clients: usize, duration: Duration) -> Result<f64> {
    pgbench_at(&pg_target(), clients, duration).await
}

/// [`pgbench`] against the database `target` (a key=value connection string) names.
pub(crate) async fn pgbench_at(target: &str, clients: usize, duration: Duration) -> Result<f64> {
    let dir = tempfile_dir::Dir::new()?;
    let script = dir.path().join("upsert.sql");
    std::fs::write(
        &script,
        "\\set id random(1, 100000)\n\
         INSERT INTO state_bench (k, v) VALUES (:id, repeat('x', 236)) \
         ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v, version = state_bench.version + 1;\n",
    )?;
    let setup = "DROP TABLE IF EXISTS state_bench; \
                 CREATE TABLE state_bench (k bigint PRIMARY KEY, v text NOT NULL, version bigint NOT NULL DEFAULT 1);";
    let psql = tokio::process::Command::new("psql").args([target, "-q", "-c", setup]).output().await?;
    if !psql.status.success() {
        bail!("psql: {}", String::from_utf8_lossy(&psql.stderr).trim());
    }
    let seconds = duration.as_secs().max(3).to_string();
    let output = tokio::process::Command::new("pgbench")
        .args(["-n", "-c", &clients.to_string(), "-j", &clients.min(2).to_string(), "-T", &seconds, "-f"])
        .arg(&script)
        .arg(target)
        .output()
        .await?;
    let text = String::from_utf8_lossy(&output.stdout);
    let tps = text
        .lines()
        .find_map(|l| l.strip_prefix("tps = "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse::<f64>().ok())
        .with_context(|| format!("no tps in pgbench's output: {text}{}", String::from_utf8_lossy(&output.stderr)))?;
    let _ = tokio::process::Command::new("psql").args([target, "-q", "-c", "DROP TABLE state_bench;"]).output().await;
    Ok(tps)
}
