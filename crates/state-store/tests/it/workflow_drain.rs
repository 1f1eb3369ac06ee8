//! 16 workers drain 500 runs through the real engine (group commit path) while some of them
//! "crash" mid-run: they stop heartbeating, their claims lapse, and other workers reclaim
//! and finish the runs. Afterwards the crashed workers wake up and try to write with their
//! stale tokens. Every run must end completed exactly once, every reclaimed run must resume
//! from its last accepted step, and every stale write must be refused as fenced.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use state_core::ops::history::{HistoryKind, HistoryOp, HistoryRequest};
use state_core::ops::workflow::*;
use tokio::sync::Mutex;

use crate::support::Store;

const RUNS: usize = 500;
const WORKERS: usize = 16;
const STEPS: u64 = 3;
/// Per mille chance that a worker "crashes" before a step.
const CRASH_PER_MILLE: u64 = 30;

fn output(run: &str, step: u64) -> Value {
    json!(format!("{run}/{step}"))
}

struct Rng(u64);

impl Rng {
    fn per_mille(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % 1000
    }
}

/// A worker that stopped mid-run, with everything it needs to try writing later.
struct Zombie {
    run_id: String,
    agent: String,
    token: u64,
    next_step: u64,
}

#[derive(Default)]
struct Tally {
    completed: Mutex<BTreeSet<String>>,
    zombies: Mutex<Vec<Zombie>>,
    resumed_after_crash: AtomicU64,
    lost_claims: AtomicU64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_workers_drain_runs_through_crashes() {
    let store = Arc::new(Store::new(&crate::support::redb_file));
    let mut runs = BTreeSet::new();
    for i in 0..RUNS {
        let req = CreateRunRequest {
            request_id: None,
            name: "drain".into(),
            tags: Default::default(),
            input: json!(i),
            max_attempts: Some(50),
            agent_id: None,
            ..CreateRunRequest::default()
        };
        runs.insert(store.engine.workflow_create(req).await.unwrap().run_id);
    }
    let tally = Arc::new(Tally::default());
    let done = Arc::new(AtomicBool::new(false));

    // Time moves only here: 50 ms of store time per 2 ms of real time, with a sweep each tick.
    let driver = {
        let (store, done) = (store.clone(), done.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                // The pace of the store's clock against the workers' real time.
                tokio::time::sleep(Duration::from_millis(2)).await;
                store.clock.advance_millis(50);
                store.engine.expire_due(1000).await.unwrap();
            }
        })
    };

    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let (store, tally, done) = (store.clone(), tally.clone(), done.clone());
        workers.push(tokio::spawn(async move { work(w, &store, &tally, &done).await }));
    }
    let drained = async || tally.completed.lock().await.len() >= RUNS;
    crate::support::until("every run to be completed", Duration::from_secs(120), drained).await;
    done.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.await.unwrap();
    }
    driver.await.unwrap();

    // Every run completed exactly once, with exactly its steps.
    assert_eq!(*tally.completed.lock().await, runs);
    for run in &runs {
        let resumed = store.engine.workflow_resume(RunRequest { run_id: run.clone() }).await.unwrap();
        assert_eq!(resumed.run.as_ref().unwrap().run_status, RunStatus::Completed);
        let steps: Vec<_> = resumed.steps.iter().map(|s| (s.step, s.output.clone().unwrap())).collect();
        let expected: Vec<_> = (1..=STEPS).map(|n| (n, output(run, n))).collect();
        assert_eq!(steps, expected, "{run}: accepted steps lost or changed");
        let history = store
            .engine
            .history(HistoryRequest {
                kind: Some(HistoryKind::Workflow),
                key: Some(run.clone()),
                n: Some(1000),
                ..Default::default()
            })
            .await
            .unwrap();
        let completions = history.events.iter().filter(|e| e.op == HistoryOp::Complete).count();
        assert_eq!(completions, 1, "{run} completed {completions} times");
    }

    // The crashed workers wake up: every write with their stale tokens is refused.
    let zombies = std::mem::take(&mut *tally.zombies.lock().await);
    assert!(!zombies.is_empty(), "no worker crashed: the test proved nothing about reclaiming");
    for z in &zombies {
        let late = CheckpointRequest {
            request_id: None,
            run_id: z.run_id.clone(),
            agent_id: z.agent.clone(),
            token: z.token,
            step: z.next_step,
            output: json!("stale"),
        };
        assert_eq!(store.engine.workflow_checkpoint(late).await.unwrap().status, CheckpointStatus::Fenced);
        let finish = CompleteRequest {
            request_id: None,
            run_id: z.run_id.clone(),
            agent_id: z.agent.clone(),
            token: z.token,
            result: json!("stale"),
        };
        assert_eq!(store.engine.workflow_complete(finish).await.unwrap().status, HolderStatus::Fenced);
    }
    assert!(tally.resumed_after_crash.load(Ordering::Relaxed) > 0, "no reclaimed run resumed mid-way");
    let stats = store.engine.batch_stats();
    assert!(stats.largest > 1, "writes went through group commit: {stats:?}");
    eprintln!(
        "drained {RUNS} runs: {} crashes, {} resumed mid-way, {} claims lost to slowness, batches {:.1} avg / {} max",
        zombies.len(),
        tally.resumed_after_crash.load(Ordering::Relaxed),
        tally.lost_claims.load(Ordering::Relaxed),
        stats.average(),
        stats.largest
    );
}

async fn work(w: usize, store: &Store, tally: &Tally, done: &AtomicBool) {
    let agent = format!("worker-{w}");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (w as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D));
    while !done.load(Ordering::Relaxed) {
        let claim = ClaimRequest {
            request_id: None,
            agent_id: agent.clone(),
            lease_ttl_seconds: Some(1.0),
            run_id: None,
            tags: Default::default(),
            name: None,
        };
        let claimed = store.engine.workflow_claim(claim).await.unwrap();
        if claimed.status != ClaimStatus::Claimed {
            // Nothing claimable until the driver moves time on: a worker polls, as real ones do.
            tokio::time::sleep(Duration::from_millis(1)).await;
            continue;
        }
        let run_id = claimed.run_id.unwrap();
        let token = claimed.token.unwrap();
        // Resume: the run must continue exactly after its last accepted step.
        let resumed = store.engine.workflow_resume(RunRequest { run_id: run_id.clone() }).await.unwrap();
        let last = claimed.last_step.unwrap();
        let recorded: Vec<_> = resumed.steps.iter().map(|s| (s.step, s.output.clone().unwrap())).collect();
        assert_eq!(
            recorded,
            (1..=last).map(|n| (n, output(&run_id, n))).collect::<Vec<_>>(),
            "{run_id} resumed wrongly"
        );
        if last > 0 {
            tally.resumed_after_crash.fetch_add(1, Ordering::Relaxed);
        }
        let mut abandoned = false;
        for step in last + 1..=STEPS {
            if rng.per_mille() < CRASH_PER_MILLE {
                tally.zombies.lock().await.push(Zombie {
                    run_id: run_id.clone(),
                    agent: agent.clone(),
                    token,
                    next_step: step,
                });
                abandoned = true;
                break;
            }
            let beat = HeartbeatRequest {
                request_id: None,
                run_id: run_id.clone(),
                agent_id: agent.clone(),
                token,
                lease_ttl_seconds: Some(1.0),
            };
            let checkpoint = CheckpointRequest {
                request_id: None,
                run_id: run_id.clone(),
                agent_id: agent.clone(),
                token,
                step,
                output: output(&run_id, step),
            };
            let accepted = store.engine.workflow_heartbeat(beat).await.unwrap().status == HolderStatus::Ok
                && store.engine.workflow_checkpoint(checkpoint).await.unwrap().status == CheckpointStatus::Ok;
            if !accepted {
                // This worker was too slow and lost its claim: someone else will finish.
                tally.lost_claims.fetch_add(1, Ordering::Relaxed);
                abandoned = true;
                break;
            }
        }
        if abandoned {
            continue;
        }
        let finish = CompleteRequest {
            request_id: None,
            run_id: run_id.clone(),
            agent_id: agent.clone(),
            token,
            result: json!(w),
        };
        match store.engine.workflow_complete(finish).await.unwrap().status {
            HolderStatus::Ok => {
                let fresh = tally.completed.lock().await.insert(run_id.clone());
                assert!(fresh, "{run_id} completed twice");
            }
            _ => {
                tally.lost_claims.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
