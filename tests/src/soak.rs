//! A soak: every kind of client on one store for a long while, and the servers' resident
//! memory, open files and threads sampled throughout. After warm-up the samples must stay
//! flat: a leak of memory, descriptors or tasks shows as a rising line.
//!
//! The load: stdio `state-mcp` processes joined to the owner writing keys (some with TTLs,
//! so expiry sweeps run), REST writers through a joined `state-http`, SSE watchers that
//! reconnect every few seconds, a lease holder acquiring, renewing and releasing, and workflow
//! workers creating, claiming, checkpointing and completing runs. `cargo xtask soak` runs it
//! for minutes on release builds; a test runs it for one minute.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::{HttpServer, McpClient, ProtocolEra};

/// What to soak and for how long.
pub struct SoakConfig {
    pub state_mcp: PathBuf,
    pub state_http: PathBuf,
    /// A directory for the database and the owner's socket.
    pub dir: PathBuf,
    pub duration: Duration,
    /// How often the servers are sampled.
    pub every: Duration,
}

/// One sample of one process.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    pub rss_bytes: u64,
    pub open_files: u64,
    pub threads: u64,
}

/// The servers at one moment: the owner, the joined `state-http`, and the sum over the stdio
/// servers.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub at: Duration,
    pub owner: Usage,
    pub http: Usage,
    pub stdio: Usage,
    /// Operations completed so far, all clients together.
    pub operations: u64,
    /// The database file's size.
    pub database_bytes: u64,
}

pub struct SoakReport {
    pub samples: Vec<Sample>,
    pub operations: u64,
    pub errors: u64,
}

impl SoakReport {
    /// Whether memory, files and threads stayed flat after warm-up: the last third of the run
    /// never rises past the middle third by more than a margin. Returns what rose, if anything.
    pub fn rises(&self) -> Vec<String> {
        let n = self.samples.len();
        if n < 6 {
            return vec![format!("only {n} samples: run longer")];
        }
        let (middle, last) = (&self.samples[n / 3..2 * n / 3], &self.samples[2 * n / 3..]);
        let mut rises = Vec::new();
        type Pick = fn(&Sample) -> Usage;
        type Field = fn(Usage) -> u64;
        let processes: [(&str, Pick); 3] =
            [("owner", |s| s.owner), ("state-http", |s| s.http), ("stdio servers", |s| s.stdio)];
        for (name, pick) in processes {
            // The owner's page cache (256 MiB) is still filling in a run of minutes: its memory
            // climbs with the pages the load touches, a few MB a second here, and levels off
            // only once the cache is full (about 5 minutes into `cargo xtask soak`, whose
            // figures show it). Short runs give it a fifth, or 32 MB.
            let (share, floor) = if name == "owner" { (5, 32 << 20) } else { (10, 16 << 20) };
            let peak =
                |samples: &[Sample], field: fn(Usage) -> u64| samples.iter().map(|s| field(pick(s))).max().unwrap_or(0);
            let checks: [(&str, Field, u64); 3] = [
                ("resident memory", |u| u.rss_bytes, 0),
                ("open files", |u| u.open_files, 8),
                ("threads", |u| u.threads, 4),
            ];
            for (what, field, slack) in checks {
                let (before, after) = (peak(middle, field), peak(last, field));
                // Memory may wander with the allocator: a tenth, or 16 MB, whichever is more.
                let margin = if slack == 0 { (before / share).max(floor) } else { slack };
                if after > before + margin {
                    rises.push(format!("{name}: {what} rose from {before} to {after}"));
                }
            }
        }
        rises
    }
}

/// Reads a process's resident memory, open descriptors and threads from /proc.
pub fn usage(pid: u32) -> Usage {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let open_files = std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count() as u64).unwrap_or(0);
    Usage { rss_bytes: field("VmRSS:") * 1024, open_files, threads: field("Threads:") }
}

fn add(a: Usage, b: Usage) -> Usage {
    Usage {
        rss_bytes: a.rss_bytes + b.rss_bytes,
        open_files: a.open_files + b.open_files,
        threads: a.threads + b.threads,
    }
}

struct Counters {
    operations: AtomicU64,
    errors: AtomicU64,
    stop: AtomicBool,
}

impl Counters {
    fn done(&self, ok: bool) {
        self.operations.fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn running(&self) -> bool {
        !self.stop.load(Ordering::Relaxed)
    }
}

fn stdio(config: &SoakConfig, db: &Path) -> Result<McpClient> {
    let (db, runtime) = (db.to_string_lossy().into_owned(), config.dir.join("run").to_string_lossy().into_owned());
    let args = ["--db", db.as_str(), "--owner-idle", "30s", "--history-retention", "20000"];
    let mut client = McpClient::spawn_with_env(&config.state_mcp, &args, &[("STATE_RUNTIME_DIR", runtime.as_str())])?;
    client.handshake(ProtocolEra::Legacy)?;
    Ok(client)
}

/// Runs the soak and returns its samples.
pub fn run(config: &SoakConfig) -> Result<SoakReport> {
    let db = config.dir.join("soak.redb");
    let counters =
        Arc::new(Counters { operations: AtomicU64::new(0), errors: AtomicU64::new(0), stop: AtomicBool::new(false) });
    let mut writers = Vec::new();
    for _ in 0..4 {
        writers.push(stdio(config, &db)?);
    }
    let runtime = config.dir.join("run").to_string_lossy().into_owned();
    let db_arg = db.to_string_lossy().into_owned();
    let server = HttpServer::start(&config.state_http, &["--db", &db_arg], &[("STATE_RUNTIME_DIR", runtime.as_str())])?;
    let owner_pid = {
        let health = writers[0].call("state_health", json!({}))?.json();
        health["owner"]["pid"].as_u64().context("health names no owner")? as u32
    };
    if owner_pid == server.pid() {
        bail!("state-http became the owner; the soak wants it joined");
    }
    let stdio_pids: Vec<u32> = writers.iter().map(McpClient::pid).collect();
    let mut threads = Vec::new();

    for (n, mut client) in writers.into_iter().enumerate() {
        let counters = counters.clone();
        threads.push(thread::spawn(move || {
            let mut i = 0u64;
            while counters.running() {
                i += 1;
                let key = format!("soak/stdio{n}/{}", i % 500);
                let mut args = json!({"key": key, "value": {"n": i, "pad": "x".repeat(200)}});
                if i.is_multiple_of(5) {
                    args["ttl_seconds"] = json!(2);
                }
                let ok = client.call("state_set", args).is_ok_and(|r| !r.is_error);
                counters.done(ok);
            }
            let _ = client.shutdown();
        }));
    }
    for n in 0..2 {
        let (counters, http) = (counters.clone(), server.client());
        threads.push(thread::spawn(move || {
            let mut i = 0u64;
            while counters.running() {
                i += 1;
                let ok = http
                    .json("PUT", &format!("/v1/kv/soak/rest{n}/{}", i % 500), &json!({"n": i}))
                    .is_ok_and(|r| r.status == 200);
                counters.done(ok);
            }
        }));
    }
    for _ in 0..2 {
        let (counters, http) = (counters.clone(), server.client());
        threads.push(thread::spawn(move || {
            while counters.running() {
                // A watcher that reconnects every few seconds: streams and connections come
                // and go for the whole run.
                let Ok(mut stream) = http.stream("/v1/watch?prefix=soak/", &[]) else {
                    counters.done(false);
                    thread::sleep(Duration::from_millis(100));
                    continue;
                };
                let until = Instant::now() + Duration::from_secs(3);
                while Instant::now() < until && counters.running() {
                    let ok = stream.next_event().is_ok_and(|e| e.is_some());
                    counters.done(ok);
                    if !ok {
                        break;
                    }
                }
            }
        }));
    }
    {
        let mut client = stdio(config, &db)?;
        let counters = counters.clone();
        let pid = client.pid();
        threads.push(thread::spawn(move || {
            let mut i = 0u64;
            while counters.running() {
                i += 1;
                let resource = format!("soak/lock{}", i % 8);
                let acquired = client
                    .call("lease_acquire", json!({"resource_id": resource, "holder_id": "soak", "ttl_seconds": 5}));
                let token = acquired.ok().filter(|r| !r.is_error).and_then(|r| r.json()["token"].as_u64());
                counters.done(token.is_some());
                if let Some(token) = token {
                    let renewed = client.call(
                        "lease_renew",
                        json!({"resource_id": resource, "holder_id": "soak", "token": token, "ttl_seconds": 5}),
                    );
                    counters.done(renewed.is_ok_and(|r| !r.is_error));
                    let released = client
                        .call("lease_release", json!({"resource_id": resource, "holder_id": "soak", "token": token}));
                    counters.done(released.is_ok_and(|r| !r.is_error));
                }
            }
            let _ = client.shutdown();
        }));
        let _ = pid;
    }
    for worker in 0..2 {
        let (counters, http) = (counters.clone(), server.client());
        threads.push(thread::spawn(move || {
            let agent = format!("soak-worker-{worker}");
            while counters.running() {
                let created =
                    http.json("POST", "/v1/workflows", &json!({"name": "soak/job", "tags": {"w": worker.to_string()}}));
                counters.done(created.is_ok_and(|r| r.status == 200));
                let claimed = http.json(
                    "POST",
                    "/v1/workflows:claim",
                    &json!({"agent_id": agent, "name": "soak/job", "lease_ttl_seconds": 30}),
                );
                let Some(claim) = claimed.ok().filter(|r| r.status == 200).map(|r| r.json()) else {
                    counters.done(false);
                    continue;
                };
                let (Some(run), Some(token)) = (claim["run_id"].as_str(), claim["token"].as_u64()) else {
                    // Another worker took it first.
                    counters.done(true);
                    continue;
                };
                let step = http.json(
                    "POST",
                    &format!("/v1/workflows/{run}/checkpoint"),
                    &json!({"agent_id": agent, "token": token, "step": 1, "output": {"ok": true}}),
                );
                counters.done(step.is_ok_and(|r| r.status == 200));
                let done = http.json(
                    "POST",
                    &format!("/v1/workflows/{run}/complete"),
                    &json!({"agent_id": agent, "token": token, "result": {"done": true}}),
                );
                counters.done(done.is_ok_and(|r| r.status == 200));
            }
        }));
    }

    let started = Instant::now();
    let mut samples = Vec::new();
    while started.elapsed() < config.duration {
        // A sample every `every`: the soak measures over time.
        thread::sleep(config.every.min(config.duration.saturating_sub(started.elapsed())));
        let stdio = stdio_pids.iter().map(|pid| usage(*pid)).fold(Usage::default(), add);
        samples.push(Sample {
            at: started.elapsed(),
            owner: usage(owner_pid),
            http: usage(server.pid()),
            stdio,
            operations: counters.operations.load(Ordering::Relaxed),
            database_bytes: std::fs::metadata(&db).map_or(0, |m| m.len()),
        });
    }
    counters.stop.store(true, Ordering::SeqCst);
    for thread in threads {
        let _ = thread.join();
    }
    Ok(SoakReport {
        samples,
        operations: counters.operations.load(Ordering::Relaxed),
        errors: counters.errors.load(Ordering::Relaxed),
    })
}

/// The samples as CSV: seconds, then each process's memory (MB), files and threads.
pub fn csv(report: &SoakReport) -> String {
    let mut out = String::from(
        "seconds,operations,database_mb,owner_rss_mb,owner_files,owner_threads,http_rss_mb,http_files,http_threads,stdio_rss_mb,stdio_files,stdio_threads\n",
    );
    for s in &report.samples {
        let mb = |b: u64| b as f64 / 1e6;
        out.push_str(&format!(
            "{:.0},{},{:.1},{:.1},{},{},{:.1},{},{},{:.1},{},{}\n",
            s.at.as_secs_f64(),
            s.operations,
            mb(s.database_bytes),
            mb(s.owner.rss_bytes),
            s.owner.open_files,
            s.owner.threads,
            mb(s.http.rss_bytes),
            s.http.open_files,
            s.http.threads,
            mb(s.stdio.rss_bytes),
            s.stdio.open_files,
            s.stdio.threads
        ));
    }
    out
}
