//! Messages through a queue: a producer fills it, then workers receive and ack until it is
//! empty, each receive and ack its own durable write.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::json;
use state_core::ops::queue::{QueueAckRequest, QueueReceiveRequest, QueueSendRequest, ReceiveStatus};

use super::{open_engine, percentile, tempfile_dir};

pub(crate) async fn engine_queue(messages: u64, workers: &[usize]) -> Result<()> {
    println!("## Engine: a queue drained by workers (receive + ack, each durable)\n");
    println!("| workers | messages | sends/s | messages/s drained | p50 receive | p99 receive |");
    println!("|---:|---:|---:|---:|---:|---:|");
    for &n in workers {
        let dir = tempfile_dir::Dir::new()?;
        let engine = open_engine(&dir)?;
        let started = Instant::now();
        for i in 0..messages {
            let send = QueueSendRequest {
                queue: "jobs".into(),
                body: json!({"n": i, "payload": "x".repeat(200)}),
                priority: Some((i % 3) as u8),
                delay_seconds: None,
                dedupe_key: None,
                ttl_seconds: None,
                max_attempts: None,
                sender: None,
                request_id: None,
            };
            engine.queue_send(send).await?;
        }
        let sends = messages as f64 / started.elapsed().as_secs_f64();
        let done = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let mut tasks = Vec::new();
        for w in 0..n {
            let (engine, done) = (engine.clone(), done.clone());
            tasks.push(tokio::spawn(async move {
                let mut latencies = Vec::new();
                loop {
                    let t = Instant::now();
                    let receive = QueueReceiveRequest {
                        queue: "jobs".into(),
                        consumer_id: format!("w{w}"),
                        visibility_seconds: None,
                        wait_seconds: None,
                        request_id: None,
                    };
                    let got = engine.queue_receive(receive).await?;
                    latencies.push(t.elapsed());
                    let Some(message) = got.message else {
                        debug_assert_eq!(got.status, ReceiveStatus::Empty);
                        return anyhow::Ok(latencies);
                    };
                    let ack = QueueAckRequest {
                        queue: "jobs".into(),
                        message_id: message.message_id,
                        receipt: message.receipt.unwrap_or_default(),
                        request_id: None,
                    };
                    engine.queue_ack(ack).await?;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        let mut latencies: Vec<Duration> = Vec::new();
        for task in tasks {
            latencies.extend(task.await??);
        }
        let elapsed = started.elapsed();
        anyhow::ensure!(done.load(Ordering::Relaxed) == messages, "every message was acked once");
        latencies.sort();
        println!(
            "| {n} | {messages} | {sends:.0} | {:.0} | {} | {} |",
            messages as f64 / elapsed.as_secs_f64(),
            super::ms(percentile(&latencies, 0.5)),
            super::ms(percentile(&latencies, 0.99)),
        );
        engine.close().await;
    }
    println!();
    Ok(())
}
