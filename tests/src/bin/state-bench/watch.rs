//! Watch: how soon a commit reaches 100 watchers, what a watcher that never reads costs
//! writers, and how soon `state_watch` in one process answers a write made by another.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::json;
use state_core::ops::kv::SetRequest;
use state_core::ops::watch::WatchRequest;
use state_store::{Engine, EngineError};

use crate::{Mode, Place, ms, open_engine, owner_pid, percentile, stop_owner, tempfile_dir, value_256};

const WATCHERS: usize = 100;

/// One writer commits to `w/` one write at a time while 100 watchers of `w/` record when each
/// revision reaches them.
pub(crate) async fn engine_fanout(duration: Duration) -> Result<()> {
    println!("## Engine: commit-to-delivery with {WATCHERS} watchers on one prefix\n");
    println!(
        "One writer, one durable write at a time (each its own commit and fsync); every watcher \
         receives every revision. \"After ack\" is when a watcher had the change relative to the \
         moment the writer's call returned (negative: before it).\n"
    );
    let dir = tempfile_dir::Dir::new()?;
    let engine = open_engine(&dir)?;
    let mut watchers = Vec::new();
    for _ in 0..WATCHERS {
        let mut watch = engine.watch(WatchRequest { prefix: Some("w/".into()), ..WatchRequest::default() }).await?;
        watchers.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            while let Some(batch) = watch.next().await {
                match batch {
                    Ok(batch) => seen.push((batch.revision, Instant::now())),
                    Err(error) => return Err(error),
                }
            }
            Ok(seen)
        }));
    }
    let mut writes = Vec::new();
    let started = Instant::now();
    let mut i = 0u64;
    while started.elapsed() < duration {
        let sent = Instant::now();
        let result = engine.set(SetRequest::new(format!("w/{}", i % 64), value_256())).await?;
        writes.push((result.revision, sent, Instant::now()));
        i += 1;
    }
    // Closing the engine ends every watch once it has drained what was committed.
    engine.close().await;
    let by_revision: std::collections::HashMap<u64, (Instant, Instant)> =
        writes.iter().map(|(revision, sent, acked)| (*revision, (*sent, *acked))).collect();
    let (mut from_send, mut after_ack, mut last_watcher) = (Vec::new(), Vec::new(), Vec::new());
    let mut slowest: std::collections::HashMap<u64, Duration> = std::collections::HashMap::new();
    for watcher in watchers {
        let seen = watcher.await?.context("a watcher ended with an error")?;
        anyhow::ensure!(seen.len() == writes.len(), "a watcher saw {} of {} revisions", seen.len(), writes.len());
        for (revision, at) in seen {
            let (sent, acked) = by_revision[&revision];
            let latency = at - sent;
            from_send.push(latency);
            after_ack.push(at.duration_since(acked).as_secs_f64() - acked.duration_since(at).as_secs_f64());
            let worst = slowest.entry(revision).or_default();
            *worst = (*worst).max(latency);
        }
    }
    last_watcher.extend(slowest.into_values());
    let mut acks: Vec<Duration> = writes.iter().map(|(_, sent, acked)| *acked - *sent).collect();
    for list in [&mut from_send, &mut last_watcher, &mut acks] {
        list.sort();
    }
    after_ack.sort_by(f64::total_cmp);
    let signed = |p: f64| {
        let value = after_ack[((after_ack.len() - 1) as f64 * p).round() as usize];
        format!("{:.3} ms", value * 1000.0)
    };
    println!("| writes | deliveries | measure | p50 | p99 |");
    println!("|---:|---:|---|---:|---:|");
    let (n, d) = (writes.len(), from_send.len());
    println!(
        "| {n} | {d} | write sent → writer's ack | {} | {} |",
        ms(percentile(&acks, 0.5)),
        ms(percentile(&acks, 0.99))
    );
    println!(
        "| {n} | {d} | write sent → delivered (each watcher) | {} | {} |",
        ms(percentile(&from_send, 0.5)),
        ms(percentile(&from_send, 0.99))
    );
    println!(
        "| {n} | {d} | write sent → delivered to all {WATCHERS} | {} | {} |",
        ms(percentile(&last_watcher, 0.5)),
        ms(percentile(&last_watcher, 0.99))
    );
    println!("| {n} | {d} | delivered after the writer's ack | {} | {} |\n", signed(0.5), signed(0.99));
    Ok(())
}

/// 16 writers for `duration`, alone and beside a watcher of everything that never reads, each
/// run on a fresh database, in the order A B B A A B B A so a drift of the machine cancels out.
pub(crate) async fn engine_stuck_watcher(duration: Duration) -> Result<()> {
    println!("## Engine: writes beside a watcher that never reads\n");
    println!(
        "16 concurrent writers, each run on a fresh database; the two cases alternate A B B A A B B A. \
         The watcher's buffer is bounded (4096 commits): once it is full that watcher alone is ended.\n"
    );
    println!("| run | watcher | acked writes/s | how the watcher ended |");
    println!("|---:|---|---:|---|");
    let mut rates = [Vec::new(), Vec::new()];
    for (run, stuck) in [false, true, true, false, false, true, true, false].into_iter().enumerate() {
        let dir = tempfile_dir::Dir::new()?;
        let engine = open_engine(&dir)?;
        let mut watch = if stuck { Some(engine.watch(WatchRequest::default()).await?) } else { None };
        let rate = write_rate(&engine, 16, duration).await?;
        let ended = match watch.as_mut() {
            None => "-".to_owned(),
            Some(watch) => match watch.next().await {
                Some(Err(EngineError::WatchLagged { resume_after })) => {
                    format!("watch_lagged, resume after revision {resume_after}")
                }
                Some(Ok(_)) => "still attached (buffer not yet full)".to_owned(),
                Some(Err(error)) => format!("error: {error}"),
                None => "closed".to_owned(),
            },
        };
        rates[usize::from(stuck)].push(rate);
        println!("| {} | {} | {rate:.0} | {ended} |", run + 1, if stuck { "never reads" } else { "none" });
        engine.close().await;
    }
    let mean = |list: &[f64]| list.iter().sum::<f64>() / list.len() as f64;
    let (alone, beside) = (mean(&rates[0]), mean(&rates[1]));
    println!("\nMean: {alone:.0} writes/s alone, {beside:.0} beside the stuck watcher ({:.2}×).", beside / alone);

    let dir = tempfile_dir::Dir::new()?;
    let engine = open_engine(&dir)?;
    // The runs above may commit fewer times than the buffer holds; commit one write at a time
    // past it to show how a watcher that never reads is ended.
    let mut watch = engine.watch(WatchRequest::default()).await?;
    let buffer = state_store::EngineConfig::default().watch_buffer;
    for i in 0..buffer + 100 {
        engine.set(SetRequest::new(format!("lag/{}", i % 64), value_256())).await?;
    }
    let ended = match watch.next().await {
        Some(Err(EngineError::WatchLagged { resume_after })) => {
            format!("watch_lagged, resume after revision {resume_after}")
        }
        other => format!("not ended: {other:?}"),
    };
    println!("Then {} single commits past a fresh watcher that never reads: {ended}.\n", buffer + 100);
    engine.close().await;
    Ok(())
}

async fn write_rate(engine: &Engine, writers: usize, duration: Duration) -> Result<f64> {
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let (engine, stop) = (engine.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut done = 0u64;
            while !stop.load(Ordering::Relaxed) {
                engine.set(SetRequest::new(format!("s{w}/{}", done % 256), value_256())).await?;
                done += 1;
            }
            Ok::<u64, EngineError>(done)
        }));
    }
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    for task in tasks {
        total += task.await??;
    }
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

/// Two `state-mcp` processes joined to one owner: one waits in `state_watch`, the other
/// writes the key. Measured from the write being sent to the waiter holding its answer.
pub(crate) fn mcp_wakeup(server: &Path, rounds: usize) -> Result<()> {
    println!("## MCP stdio: state_watch wake-up across processes\n");
    println!(
        "Two state-mcp processes joined to one owner. One long-polls `state_watch` on a key; the \
         other writes it. Each on its own thread; {rounds} rounds.\n"
    );
    let place = Place::new()?;
    let mut writer = place.start(server, Mode::Joined)?;
    let owner = owner_pid(&mut writer)?;
    let mut waiter = place.start(server, Mode::Joined)?;
    let mut revision = writer.call("state_set", json!({"key": "wake", "value": 0}))?.json()["revision"].clone();
    let (ask, asked) = mpsc::channel::<serde_json::Value>();
    let (posted, waiting) = mpsc::channel::<()>();
    let (answer, answered) = mpsc::channel::<Result<(Instant, serde_json::Value)>>();
    let waiting_thread = std::thread::spawn(move || {
        for after in asked {
            let args = json!({"key": "wake", "after_revision": after, "timeout_seconds": 20});
            let outcome = waiter.send_request("tools/call", json!({"name": "state_watch", "arguments": args}));
            let _ = posted.send(());
            let outcome = outcome.and_then(|id| waiter.wait_response(id)).map(|response| (Instant::now(), response));
            if answer.send(outcome).is_err() {
                break;
            }
        }
        waiter
    });
    let (mut woken, mut acked) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        ask.send(revision.clone())?;
        waiting.recv()?;
        // Let the request reach the owner, so the answer comes from a waiting watch.
        std::thread::sleep(Duration::from_millis(5));
        let sent = Instant::now();
        let written = writer.call("state_set", json!({"key": "wake", "value": round}))?;
        acked.push(sent.elapsed());
        let (at, response) = answered.recv()??;
        let result = &response["result"]["structuredContent"];
        anyhow::ensure!(result["timed_out"] == false, "state_watch timed out: {response}");
        revision = written.json()["revision"].clone();
        anyhow::ensure!(result["revision"] == revision, "state_watch answered {result}, expected {revision}");
        woken.push(at - sent);
    }
    drop(ask);
    let mut waiter = waiting_thread.join().map_err(|_| anyhow::anyhow!("the waiting thread panicked"))?;
    woken.sort();
    acked.sort();
    println!("| measure | p50 | p99 | max |");
    println!("|---|---:|---:|---:|");
    for (name, list) in [("write sent → writer's ack", &acked), ("write sent → waiter's state_watch answer", &woken)]
    {
        let max = list.last().copied().unwrap_or_default();
        println!("| {name} | {} | {} | {} |", ms(percentile(list, 0.5)), ms(percentile(list, 0.99)), ms(max));
    }
    println!();
    writer.shutdown()?;
    waiter.shutdown()?;
    stop_owner(owner);
    Ok(())
}

/// What a watcher that stops reading costs a server: the same writes of 1 MB values to two
/// `state-http` servers, one with an SSE watcher that never reads; each server's resident
/// memory is sampled throughout and the peaks compared.
pub(crate) fn http_stalled_watcher(server: &Path, writes: usize) -> Result<()> {
    use std::io::Write;
    println!("## state-http: a watcher that stops reading, {writes} writes of 1 MB\n");
    let value = format!("\"{}\"", "x".repeat(1_000_000));
    let mut rows = Vec::new();
    for stalled in [false, true] {
        let dir = tempfile_dir::Dir::new()?;
        let db = dir.path().join("bench.redb").to_string_lossy().into_owned();
        let runtime = dir.path().join("run").to_string_lossy().into_owned();
        let http = state_e2e::HttpServer::start(server, &["--db", &db], &[("STATE_RUNTIME_DIR", runtime.as_str())])?;
        // A client that asks for the stream and then never reads a byte of it.
        let _watcher = match stalled {
            true => {
                let mut socket = std::net::TcpStream::connect(http.addr)?;
                write!(
                    socket,
                    "GET /v1/watch?prefix=big/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n"
                )?;
                Some(socket)
            }
            false => None,
        };
        let pid = http.pid();
        let start = state_e2e::soak::usage(pid).rss_bytes;
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut peak = 0;
                while !stop.load(Ordering::Relaxed) {
                    peak = peak.max(state_e2e::soak::usage(pid).rss_bytes);
                    std::thread::sleep(Duration::from_millis(50));
                }
                peak
            })
        };
        let client = http.client();
        let started = Instant::now();
        for i in 0..writes {
            let response = client.request("PUT", &format!("/v1/kv/big/{}", i % 100), &[], Some(value.as_bytes()))?;
            anyhow::ensure!(response.status == 200, "write {i}: {}", response.status);
        }
        let took = started.elapsed();
        let end = state_e2e::soak::usage(pid).rss_bytes;
        stop.store(true, Ordering::Relaxed);
        let peak = sampler.join().map_err(|_| anyhow::anyhow!("the sampler panicked"))?;
        rows.push((stalled, start, peak, end, took));
    }
    println!("| watcher | RSS before | peak RSS | RSS after | writes took |");
    println!("|---|---:|---:|---:|---:|");
    let mb = |b: u64| format!("{:.0} MB", b as f64 / 1e6);
    for (stalled, start, peak, end, took) in &rows {
        let who = if *stalled { "one that stopped reading" } else { "none" };
        println!("| {who} | {} | {} | {} | {:.1} s |", mb(*start), mb(*peak), mb(*end), took.as_secs_f64());
    }
    let grow = |row: &(bool, u64, u64, u64, Duration)| row.2.saturating_sub(row.1) as i64;
    println!(
        "\nWhat the stalled watcher cost at the peak: {:.1} MB (its budget: --watch-buffer-bytes, 64 MiB).\n",
        (grow(&rows[1]) - grow(&rows[0])) as f64 / 1e6
    );
    Ok(())
}
