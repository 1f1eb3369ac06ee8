//! One tenant against another (issue 30): team-a writes one key after another and its latency
//! is measured alone, then while team-b, with its own token on the same `state-http`, runs each
//! attack the probe found: the widest path reservations the limits allow, refused over and over;
//! every watch stream and request its share allows, trickled; and, for comparison, plain heavy
//! writing. The figures are team-a's p50 and p99 in each case, and their ratio to the baseline.

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde_json::json;
use state_e2e::{HttpClient, HttpServer};

use crate::{ms, percentile, tempfile_dir};

const TOKENS: &str = r#"
[[token]]
name = "team-a"
secret = "team-a-secret-0123456789"
prefixes = ["team-a/"]
rights = ["read", "write"]

[[token]]
name = "team-b"
secret = "team-b-secret-0123456789"
prefixes = ["team-b/"]
rights = ["read", "write"]
"#;
/// team-b's quota in the second half: a rate a team of agents can live with, far below what
/// 64 writers without pause would take.
const TEAM_B_QUOTA: &str = "writes_per_second = 200\n";
const TEAM_A: &str = "team-a-secret-0123456789";
const TEAM_B: &str = "team-b-secret-0123456789";

/// A pattern of about 215 bytes (the limit is 256) that any other of its scope overlaps.
fn wide(tag: &str) -> String {
    format!("{}/**/{tag}-{}", "d".repeat(100), "x".repeat(100))
}

pub(crate) fn run(server: &Path, duration: Duration) -> Result<()> {
    println!("## One tenant against another (state-http with two tokens)\n");
    println!(
        "team-a writes one key after another; team-b, alone on its own token, runs what the probe of issue 30 \
         did. Latencies are team-a's, each over {duration:?}.\n"
    );
    let dir = tempfile_dir::Dir::new()?;
    println!("| team-b meanwhile | p50 | p99 | p99 / alone | team-a writes |");
    println!("|---|---:|---:|---:|---:|");
    let unlimited = serve(server, &dir, "open", TOKENS)?;
    compare(
        &unlimited,
        duration,
        "nothing",
        &[
            ("3 loops of a 32-pattern exclusive reservation against 2,048 wide shared patterns", reserve_storm),
            ("64 watch streams and 256 trickled requests (its whole share)", stream_flood),
            ("64 writers without pause (heavy, not hostile)", write_flood),
        ],
    )?;
    drop(unlimited);

    // The same, with team-b held to its quota: its refused writes are answered 429 before they
    // reach the store.
    let limited_tokens =
        TOKENS.replace("prefixes = [\"team-b/\"]\n", &format!("prefixes = [\"team-b/\"]\n{TEAM_B_QUOTA}"));
    anyhow::ensure!(limited_tokens != TOKENS, "team-b's entry was not found to give it a quota");
    let limited = serve(server, &dir, "quota", &limited_tokens)?;
    compare(
        &limited,
        duration,
        &format!("nothing (team-b's token: `{}`)", TEAM_B_QUOTA.trim()),
        &[
            ("the same reservation storm, at its quota (refusals ignored)", reserve_storm),
            ("64 writers without pause, at its quota (refusals ignored: a request flood)", write_flood),
            ("64 writers waiting as each refusal's Retry-After says", polite_write_flood),
        ],
    )?;
    println!();
    Ok(())
}

/// team-a alone on `server`, then under each attack: one table row each.
fn compare(server: &HttpServer, duration: Duration, alone_label: &str, attacks: &[(&str, Attack)]) -> Result<()> {
    let victim = server.client().with_token(TEAM_A);
    let alone = measure(&victim, duration, || Ok(Vec::new()))?;
    report(alone_label, &alone, &alone);
    for (name, attack) in attacks {
        let result = under_attack(server, duration, *attack)?;
        report(name, &result, &alone);
    }
    Ok(())
}

/// A state-http on a fresh database of its own, with `tokens`, and team-b's reservations
/// prefilled.
fn serve(server: &Path, dir: &tempfile_dir::Dir, name: &str, tokens: &str) -> Result<HttpServer> {
    let tokens_file = dir.path().join(format!("{name}.toml"));
    std::fs::write(&tokens_file, tokens)?;
    let db = dir.path().join(format!("{name}.redb")).to_string_lossy().into_owned();
    let runtime = dir.path().join(format!("{name}-run")).to_string_lossy().into_owned();
    let tokens_file = tokens_file.to_string_lossy().into_owned();
    let server = HttpServer::start(
        server,
        &["--db", &db, "--auth", &tokens_file, "--owner-idle", "1s"],
        &[("STATE_RUNTIME_DIR", &runtime)],
    )?;
    prefill_reservations(&server.client().with_token(TEAM_B))?;
    Ok(server)
}

fn under_attack(server: &HttpServer, duration: Duration, attack: Attack) -> Result<Measured> {
    let (victim, attacker) = (server.client().with_token(TEAM_A), server.client().with_token(TEAM_B));
    measure(&victim, duration, || {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = attack(server, &attacker, &stop);
        // The attack takes hold before team-a is measured.
        std::thread::sleep(Duration::from_millis(500));
        Ok(vec![(stop, threads)])
    })
}

/// Starts an attack by team-b, which runs until told to stop.
type Attack = fn(&HttpServer, &HttpClient, &Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<()>>;

struct Measured {
    sorted: Vec<Duration>,
}

fn report(name: &str, measured: &Measured, alone: &Measured) {
    let (p50, p99) = (percentile(&measured.sorted, 0.5), percentile(&measured.sorted, 0.99));
    let ratio = p99.as_secs_f64() / percentile(&alone.sorted, 0.99).as_secs_f64().max(1e-9);
    println!("| {name} | {} | {} | {ratio:.2}x | {} |", ms(p50), ms(p99), measured.sorted.len());
}

type Running = Vec<(Arc<AtomicBool>, Vec<std::thread::JoinHandle<()>>)>;

/// team-a's write latencies over `duration`, with whatever `start` sets going meanwhile.
fn measure(victim: &HttpClient, duration: Duration, start: impl FnOnce() -> Result<Running>) -> Result<Measured> {
    let running = start()?;
    let mut sorted = Vec::new();
    let until = Instant::now() + duration;
    let mut n = 0u64;
    while Instant::now() < until {
        let began = Instant::now();
        let response = victim.request("PUT", &format!("/v1/kv/team-a/k{}", n % 100), &[], Some(b"1"))?;
        if response.status != 200 {
            bail!("team-a's write was refused: {} {}", response.status, response.text());
        }
        sorted.push(began.elapsed());
        n += 1;
    }
    for (stop, threads) in running {
        stop.store(true, Ordering::SeqCst);
        for thread in threads {
            let _ = thread.join();
        }
    }
    sorted.sort();
    Ok(Measured { sorted })
}

/// 64 shared reservations of 32 wide patterns each, by 8 holders: the 2,048 patterns a scope
/// holds at most.
fn prefill_reservations(attacker: &HttpClient) -> Result<()> {
    for holder in 0..8 {
        for n in 0..8 {
            let patterns: Vec<String> = (0..32).map(|i| wide(&format!("h{holder}-{n}-{i}"))).collect();
            let body = json!({"scope": "team-b/repo", "holder_id": format!("h{holder}"), "patterns": patterns,
                "exclusive": false, "ttl_seconds": 3600});
            let response = attacker.json("POST", "/v1/paths:reserve", &body)?;
            if response.status != 200 {
                bail!("prefilling reservations: {} {}", response.status, response.text());
            }
        }
    }
    Ok(())
}

fn reserve_storm(_: &HttpServer, attacker: &HttpClient, stop: &Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<()>> {
    (0..3)
        .map(|t| {
            let (attacker, stop) = (attacker.clone(), stop.clone());
            std::thread::spawn(move || {
                let patterns: Vec<String> = (0..32).map(|i| format!("{}/**/*{t}{i}*", "d".repeat(100))).collect();
                let body = json!({"scope": "team-b/repo", "holder_id": "attacker", "patterns": patterns,
                    "exclusive": true, "ttl_seconds": 60});
                while !stop.load(Ordering::SeqCst) {
                    let _ = attacker.json("POST", "/v1/paths:reserve", &body);
                }
            })
        })
        .collect()
}

fn stream_flood(
    server: &HttpServer,
    attacker: &HttpClient,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<()>> {
    let (addr, attacker, stop) = (server.addr, attacker.clone(), stop.clone());
    vec![std::thread::spawn(move || {
        let watches: Vec<_> = (0..64).filter_map(|_| attacker.stream("/v1/watch?prefix=team-b/", &[]).ok()).collect();
        let trickles: Vec<TcpStream> = (0..256)
            .filter_map(|_| {
                let mut socket = TcpStream::connect(addr).ok()?;
                let head = format!(
                    "POST /v1/call/native/state_get HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TEAM_B}\r\n\
                     Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
                );
                socket.write_all(head.as_bytes()).ok()?;
                Some(socket)
            })
            .collect();
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
        }
        drop((watches, trickles));
    })]
}

fn write_flood(_: &HttpServer, attacker: &HttpClient, stop: &Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<()>> {
    writers(attacker, stop, false)
}

fn polite_write_flood(
    _: &HttpServer,
    attacker: &HttpClient,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<()>> {
    writers(attacker, stop, true)
}

/// 64 writers without pause; `polite` ones wait as a 429's Retry-After says (in steps, so
/// they stop when told).
fn writers(attacker: &HttpClient, stop: &Arc<AtomicBool>, polite: bool) -> Vec<std::thread::JoinHandle<()>> {
    let written = Arc::new(AtomicU64::new(0));
    (0..64)
        .map(|t| {
            let (attacker, stop, written) = (attacker.clone(), stop.clone(), written.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let n = written.fetch_add(1, Ordering::Relaxed);
                    let answer = attacker.request("PUT", &format!("/v1/kv/team-b/w{t}-{}", n % 1000), &[], Some(b"2"));
                    let wait = match answer {
                        Ok(response) if polite && response.status == 429 => {
                            response.header("retry-after").and_then(|s| s.parse::<u64>().ok()).unwrap_or(1)
                        }
                        _ => 0,
                    };
                    let until = Instant::now() + Duration::from_secs(wait);
                    while Instant::now() < until && !stop.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
            })
        })
        .collect()
}
