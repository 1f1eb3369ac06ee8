use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::expire::plan_expire;
use crate::ops::history::HistoryOp;
use crate::testing::Sim;

const TTL: Option<u64> = Some(1_000);

fn create(sim: &mut Sim, name: &str, tags: &[(&str, &str)], max_attempts: u32) -> String {
    let req = CreateRunRequest {
        request_id: None,
        name: name.into(),
        tags: tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        input: json!({"job": name}),
        max_attempts: Some(max_attempts),
        agent_id: None,
        ..CreateRunRequest::default()
    };
    sim.run(|v, ctx| plan_create(v, &req, ctx)).run_id
}

fn claim(sim: &mut Sim, agent: &str, run_id: Option<&str>, tags: &[(&str, &str)]) -> ClaimResult {
    let tags: BTreeMap<String, String> = tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    sim.run(|v, ctx| {
        plan_claim(v, ClaimArgs { agent_id: agent, ttl_millis: TTL, run_id, name: None, tags: &tags }, ctx)
    })
}

fn as_holder(agent: &str, token: u64) -> Caller<'_> {
    Caller { agent_id: Some(agent), token: Some(token) }
}

fn checkpoint(sim: &mut Sim, run: &str, caller: Caller<'_>, step: u64, output: serde_json::Value) -> CheckpointResult {
    sim.run(|v, ctx| plan_checkpoint(v, run, caller, step, &output, StepRule::Sequential, ctx))
}

fn status(sim: &Sim, run: &str) -> RunSummary {
    sim.read(|v| super::status(v, run, sim.now, 0)).run.expect("run exists")
}

fn sweep(sim: &mut Sim) -> usize {
    let now = sim.now;
    let due: Vec<_> = sim.view.entries.values().filter(|e| e.is_expired(now)).cloned().collect();
    sim.run(|v, ctx| plan_expire(v, &due, ctx))
}

#[test]
fn run_ids_sort_by_creation() {
    let mut sim = Sim::new();
    let a = create(&mut sim, "x", &[], 3);
    sim.advance(1);
    let b = create(&mut sim, "x", &[], 3);
    let c = create(&mut sim, "x", &[], 3);
    assert!(a < b && b < c, "{a} {b} {c}");
    assert_eq!(a.len(), 26);
    assert_eq!(run_id(UnixMillis(0), 0), "00000000000000000000000000");
}

#[test]
fn create_then_claim_the_oldest_matching_run() {
    let mut sim = Sim::new();
    let cpu = create(&mut sim, "render", &[("queue", "cpu")], 3);
    let gpu = create(&mut sim, "render", &[("queue", "gpu")], 3);
    assert_eq!(status(&sim, &cpu).run_status, RunStatus::Pending);

    let got = claim(&mut sim, "w1", None, &[("queue", "gpu")]);
    assert_eq!((got.status, got.run_id.as_deref()), (ClaimStatus::Claimed, Some(gpu.as_str())));
    assert_eq!((got.attempt, got.last_step, got.input.clone()), (Some(1), Some(0), Some(json!({"job": "render"}))));
    assert_eq!(got.token, Some(got.revision), "the claim's token is the revision that granted it");

    let any = claim(&mut sim, "w2", None, &[]);
    assert_eq!(any.run_id.as_deref(), Some(cpu.as_str()), "oldest first, skipping runs already held");
    let none = claim(&mut sim, "w3", None, &[]);
    assert_eq!(none.status, ClaimStatus::NoneAvailable);

    let held = claim(&mut sim, "w3", Some(&gpu), &[]);
    assert_eq!((held.status, held.holder.as_deref()), (ClaimStatus::Held, Some("w1")));
    let missing = claim(&mut sim, "w3", Some("nope"), &[]);
    assert_eq!(missing.status, ClaimStatus::NotFound);
    assert_eq!(sim.ops_of(&gpu), vec![HistoryOp::Create, HistoryOp::Claim]);
}

#[test]
fn steps_advance_by_one_and_are_immutable() {
    let mut sim = Sim::new();
    let run = create(&mut sim, "etl", &[], 3);
    let token = claim(&mut sim, "w1", None, &[]).token.unwrap();
    let me = as_holder("w1", token);

    assert_eq!(checkpoint(&mut sim, &run, me, 1, json!("a")).status, CheckpointStatus::Ok);
    let resend = checkpoint(&mut sim, &run, me, 1, json!("a"));
    assert_eq!((resend.status, resend.last_step), (CheckpointStatus::Duplicate, 1));
    let rewrite = checkpoint(&mut sim, &run, me, 1, json!("changed"));
    assert_eq!(rewrite.status, CheckpointStatus::Conflict);
    let skip = checkpoint(&mut sim, &run, me, 3, json!("c"));
    assert_eq!(skip.status, CheckpointStatus::Conflict);
    assert!(skip.message.unwrap().contains("next step is 2"));
    let next = checkpoint(&mut sim, &run, me, 2, json!("b"));
    assert_eq!((next.status, next.last_step), (CheckpointStatus::Ok, 2));

    let resumed = sim.read(|v| resume(v, &run, sim.now, 0));
    let steps: Vec<_> = resumed.steps.iter().map(|s| (s.step, s.output.clone(), s.attempt)).collect();
    assert_eq!(steps, vec![(1, Some(json!("a")), 1), (2, Some(json!("b")), 1)]);
}

#[test]
fn only_the_current_holder_with_its_token_may_write() {
    let mut sim = Sim::new();
    let run = create(&mut sim, "etl", &[], 3);
    let token = claim(&mut sim, "w1", None, &[]).token.unwrap();
    for (caller, why) in [(as_holder("w2", token), "another agent"), (as_holder("w1", token + 1), "a wrong token")] {
        let refused = checkpoint(&mut sim, &run, caller, 1, json!(1));
        assert_eq!(refused.status, CheckpointStatus::Fenced, "{why}");
    }
    let missing = checkpoint(&mut sim, "nope", as_holder("w1", token), 1, json!(1));
    assert_eq!(missing.status, CheckpointStatus::NotFound);
}

#[test]
fn a_claim_lapses_exactly_at_its_expiry_and_the_run_is_reclaimed() {
    let mut sim = Sim::new();
    let run = create(&mut sim, "etl", &[], 3);
    let old = claim(&mut sim, "w1", None, &[]).token.unwrap();
    assert_eq!(checkpoint(&mut sim, &run, as_holder("w1", old), 1, json!("one")).status, CheckpointStatus::Ok);

    sim.advance(999);
    assert_eq!(status(&sim, &run).run_status, RunStatus::Running);
    assert_eq!(claim(&mut sim, "w2", None, &[]).status, ClaimStatus::NoneAvailable, "still held 1 ms before expiry");

    sim.advance(1);
    assert_eq!(status(&sim, &run).run_status, RunStatus::Pending, "claimable the instant the claim expires");
    let late = checkpoint(&mut sim, &run, as_holder("w1", old), 2, json!("two"));
    assert_eq!(late.status, CheckpointStatus::Fenced, "a worker past its lease is fenced even before anyone reclaims");

    let new = claim(&mut sim, "w2", None, &[]);
    assert_eq!((new.status, new.attempt, new.last_step), (ClaimStatus::Claimed, Some(2), Some(1)));
    assert!(new.token.unwrap() > old);
    let stale = checkpoint(&mut sim, &run, as_holder("w1", old), 2, json!("stale"));
    assert_eq!(stale.status, CheckpointStatus::Fenced);
    assert!(stale.message.unwrap().contains("held by `w2`"));
    assert_eq!(
        checkpoint(&mut sim, &run, as_holder("w2", new.token.unwrap()), 2, json!("two")).status,
        CheckpointStatus::Ok
    );
    assert_eq!(
        sim.ops_of(&run),
        vec![
            HistoryOp::Create,
            HistoryOp::Claim,
            HistoryOp::Checkpoint,
            HistoryOp::ClaimExpired,
            HistoryOp::Reclaim,
            HistoryOp::Checkpoint
        ]
    );
}

#[test]
fn the_sweeper_requeues_lapsed_runs_and_fails_exhausted_ones() {
    let mut sim = Sim::new();
    let twice = create(&mut sim, "a", &[], 2);
    claim(&mut sim, "w1", Some(&twice), &[]);
    sim.advance(1_000);
    assert_eq!(sweep(&mut sim), 1);
    assert_eq!(status(&sim, &twice).run_status, RunStatus::Pending);
    assert_eq!(sim.ops_of(&twice).last(), Some(&HistoryOp::ClaimExpired));

    claim(&mut sim, "w2", Some(&twice), &[]);
    sim.advance(999);
    assert_eq!(sweep(&mut sim), 0);
    sim.advance(1);
    assert_eq!(status(&sim, &twice).run_status, RunStatus::Failed, "the last attempt's lapse fails the run");
    assert!(status(&sim, &twice).error.unwrap().contains("no attempts remain"));
    sweep(&mut sim);
    assert_eq!(status(&sim, &twice).run_status, RunStatus::Failed);
    assert_eq!(claim(&mut sim, "w3", Some(&twice), &[]).status, ClaimStatus::Finished);
    assert_eq!(claim(&mut sim, "w3", None, &[]).status, ClaimStatus::NoneAvailable);
    assert!(sim.read(|v| v.get(&keyspace::queue_key(&twice))).is_none(), "failed runs leave the queue");
}

#[test]
fn heartbeats_keep_a_claim_alive() {
    let mut sim = Sim::new();
    let run = create(&mut sim, "a", &[], 3);
    let token = claim(&mut sim, "w1", None, &[]).token.unwrap();
    for _ in 0..5 {
        sim.advance(900);
        let beat = sim.run(|v, ctx| plan_heartbeat(v, &run, as_holder("w1", token), TTL, ctx));
        assert_eq!(beat.status, HolderStatus::Ok);
    }
    assert_eq!(status(&sim, &run).run_status, RunStatus::Running);
    sim.advance(1_000);
    let late = sim.run(|v, ctx| plan_heartbeat(v, &run, as_holder("w1", token), TTL, ctx));
    assert_eq!(late.status, HolderStatus::Fenced);
}

#[test]
fn the_same_worker_claiming_again_keeps_its_token() {
    let mut sim = Sim::new();
    let run = create(&mut sim, "a", &[], 3);
    let first = claim(&mut sim, "w1", None, &[]);
    sim.advance(500);
    let again = claim(&mut sim, "w1", Some(&run), &[]);
    assert_eq!((again.status, again.token, again.attempt), (ClaimStatus::Claimed, first.token, Some(1)));
}

#[test]
fn completion_happens_once() {
    let mut sim = Sim::new();
    let run = create(&mut sim, "a", &[], 3);
    let token = claim(&mut sim, "w1", None, &[]).token.unwrap();
    let done = Ending::Complete { result: json!({"rows": 10}) };
    let first = sim.run(|v, ctx| plan_finish(v, &run, as_holder("w1", token), &done, ctx));
    assert_eq!((first.status, first.run_status), (HolderStatus::Ok, Some(RunStatus::Completed)));
    let events = sim.events.len();
    let repeat = sim.run(|v, ctx| plan_finish(v, &run, as_holder("w1", token), &done, ctx));
    assert_eq!(repeat.status, HolderStatus::Ok, "a repeated completion is answered");
    assert_eq!(sim.events.len(), events, "and changes nothing");
    let other = sim.run(|v, ctx| plan_finish(v, &run, as_holder("w2", token), &done, ctx));
    assert_eq!(other.status, HolderStatus::Fenced);
    assert_eq!(claim(&mut sim, "w2", Some(&run), &[]).status, ClaimStatus::Finished);
    assert_eq!(sim.read(|v| resume(v, &run, sim.now, 0)).result, Some(json!({"rows": 10})));
    assert!(sim.read(|v| v.get(&keyspace::claim_key(&run))).is_none());
}

#[test]
fn failures_retry_until_attempts_run_out() {
    let mut sim = Sim::new();
    let run = create(&mut sim, "a", &[], 2);
    let fail = |retryable| Ending::Fail { error: "boom".into(), retryable, retry_delay_millis: 0 };
    let t1 = claim(&mut sim, "w1", None, &[]).token.unwrap();
    let retry = sim.run(|v, ctx| plan_finish(v, &run, as_holder("w1", t1), &fail(true), ctx));
    assert_eq!((retry.run_status, retry.attempt), (Some(RunStatus::Pending), Some(1)));
    let t2 = claim(&mut sim, "w2", None, &[]);
    assert_eq!(t2.attempt, Some(2));
    let last = sim.run(|v, ctx| plan_finish(v, &run, as_holder("w2", t2.token.unwrap()), &fail(true), ctx));
    assert_eq!(last.run_status, Some(RunStatus::Failed), "retryable, but no attempts remain");

    let fatal_run = create(&mut sim, "b", &[], 5);
    let t = claim(&mut sim, "w1", None, &[]).token.unwrap();
    let fatal = sim.run(|v, ctx| plan_finish(v, &fatal_run, as_holder("w1", t), &fail(false), ctx));
    assert_eq!(fatal.run_status, Some(RunStatus::Failed));
    assert_eq!(status(&sim, &fatal_run).error.as_deref(), Some("boom"));
    assert_eq!(
        sim.ops_of(&run),
        vec![HistoryOp::Create, HistoryOp::Claim, HistoryOp::Retry, HistoryOp::Reclaim, HistoryOp::Fail]
    );
}

#[test]
fn cancel_stops_a_run_and_fences_its_worker() {
    let mut sim = Sim::new();
    let run = create(&mut sim, "a", &[], 3);
    let token = claim(&mut sim, "w1", None, &[]).token.unwrap();
    let cancelled = sim.run(|v, ctx| plan_cancel(v, &run, Some("no longer needed"), None, ctx));
    assert_eq!((cancelled.status, cancelled.run_status), (CancelStatus::Ok, Some(RunStatus::Cancelled)));
    assert_eq!(checkpoint(&mut sim, &run, as_holder("w1", token), 1, json!(1)).status, CheckpointStatus::Fenced);
    let again = sim.run(|v, ctx| plan_cancel(v, &run, None, None, ctx));
    assert_eq!(again.status, CancelStatus::Finished);
}

#[test]
fn listing_filters_and_pages() {
    let mut sim = Sim::new();
    let ids: Vec<String> = (0..5)
        .map(|i| create(&mut sim, if i % 2 == 0 { "even" } else { "odd" }, &[("i", &i.to_string())], 3))
        .collect();
    claim(&mut sim, "w", Some(&ids[0]), &[]);
    let no_tags = BTreeMap::new();
    let all = RunFilter { status: None, name: None, tags: &no_tags };
    let page = sim.read(|v| list(v, all, None, 2, sim.now, 0));
    assert_eq!(page.runs.iter().map(|r| r.run_id.clone()).collect::<Vec<_>>(), ids[..2].to_vec());
    let after = crate::cursor::decode("cursor", page.next_cursor.as_deref().unwrap()).unwrap();
    let rest = sim.read(|v| list(v, all, Some(&after), 10, sim.now, 0));
    assert_eq!(rest.runs.len(), 3);
    let pending_even = RunFilter { status: Some(ListStatus::Pending), name: Some("even"), tags: &no_tags };
    let found = sim.read(|v| list(v, pending_even, None, 10, sim.now, 0));
    assert_eq!(found.runs.iter().map(|r| r.run_id.clone()).collect::<Vec<_>>(), vec![ids[2].clone(), ids[4].clone()]);
}

#[test]
fn profiles_without_tokens_may_checkpoint_freely() {
    let mut sim = Sim::new();
    let run = create(&mut sim, "a", &[], 3);
    let anyone = Caller { agent_id: None, token: None };
    let write = |sim: &mut Sim, step, out| {
        sim.run(|v, ctx| plan_checkpoint(v, &run, anyone, step, &json!(out), StepRule::Overwrite, ctx))
    };
    assert_eq!(write(&mut sim, 3, "c").status, CheckpointStatus::Ok);
    assert_eq!(write(&mut sim, 3, "c2").status, CheckpointStatus::Ok, "that server overwrote re-sent steps");
    let resumed = sim.read(|v| resume(v, &run, sim.now, 0));
    assert_eq!((resumed.run.unwrap().last_step, resumed.steps[0].output.clone()), (3, Some(json!("c2"))));
}

mod properties {
    use std::collections::{BTreeMap, BTreeSet};

    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Op {
        Claim { worker: usize },
        Checkpoint { worker: usize },
        Heartbeat { worker: usize },
        Complete { worker: usize },
        Fail { worker: usize, retryable: bool },
        Advance(u64),
        Sweep,
    }

    fn op() -> impl Strategy<Value = Op> {
        let w = 0..3usize;
        prop_oneof![
            3 => w.clone().prop_map(|worker| Op::Claim { worker }),
            5 => w.clone().prop_map(|worker| Op::Checkpoint { worker }),
            2 => w.clone().prop_map(|worker| Op::Heartbeat { worker }),
            1 => w.clone().prop_map(|worker| Op::Complete { worker }),
            1 => (w, any::<bool>()).prop_map(|(worker, retryable)| Op::Fail { worker, retryable }),
            2 => (0..1500u64).prop_map(Op::Advance),
            1 => Just(Op::Sweep),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
        #[test]
        fn runs_have_one_holder_keep_their_steps_and_complete_once(ops in proptest::collection::vec(op(), 1..100)) {
            let mut sim = Sim::new();
            let runs: Vec<String> = (0..2).map(|_| create(&mut sim, "job", &[], 4)).collect();
            // Per worker: the run it believes it holds, its token, and until when.
            let mut holding: BTreeMap<usize, (String, u64, UnixMillis)> = BTreeMap::new();
            let mut accepted: BTreeMap<(String, u64), serde_json::Value> = BTreeMap::new();
            let mut completed: BTreeSet<String> = BTreeSet::new();
            for op in ops {
                match op {
                    Op::Claim { worker } => {
                        let agent = format!("w{worker}");
                        let got = claim(&mut sim, &agent, None, &[]);
                        if got.status == ClaimStatus::Claimed {
                            let run = got.run_id.clone().unwrap();
                            for (other, (held, _, until)) in &holding {
                                prop_assert!(*other == worker || *held != run || *until <= sim.now,
                                    "w{worker} claimed {run} while w{other} holds it until {until:?}");
                            }
                            prop_assert_eq!(got.last_step.unwrap(), accepted.keys().filter(|(r, _)| *r == run).count() as u64,
                                "a reclaimed run resumes after its last accepted step");
                            holding.insert(worker, (run, got.token.unwrap(), sim.now.plus_millis(1_000)));
                        }
                    }
                    Op::Checkpoint { worker } => {
                        let Some((run, token, _)) = holding.get(&worker).cloned() else { continue };
                        let next = accepted.keys().filter(|(r, _)| *r == run).count() as u64 + 1;
                        let output = json!({"by": worker, "at": sim.now.0});
                        let got = checkpoint(&mut sim, &run, as_holder(&format!("w{worker}"), token), next, output.clone());
                        match got.status {
                            CheckpointStatus::Ok => {
                                prop_assert!(holding[&worker].2 > sim.now, "accepted a step from a lapsed claim");
                                accepted.insert((run, next), output);
                            }
                            _ => { holding.remove(&worker); }
                        }
                    }
                    Op::Heartbeat { worker } => {
                        let Some((run, token, _)) = holding.get(&worker).cloned() else { continue };
                        let got = sim.run(|v, ctx| plan_heartbeat(v, &run, as_holder(&format!("w{worker}"), token), TTL, ctx));
                        if got.status == HolderStatus::Ok {
                            holding.insert(worker, (run, token, sim.now.plus_millis(1_000)));
                        } else {
                            holding.remove(&worker);
                        }
                    }
                    Op::Complete { worker } => {
                        let Some((run, token, _)) = holding.remove(&worker) else { continue };
                        let before = sim.events.iter().filter(|e| e.action == Some(Action::RunComplete)).count();
                        let got = sim.run(|v, ctx| plan_finish(v, &run, as_holder(&format!("w{worker}"), token), &Ending::Complete { result: json!(null) }, ctx));
                        let after = sim.events.iter().filter(|e| e.action == Some(Action::RunComplete)).count();
                        if after > before {
                            prop_assert!(completed.insert(run.clone()), "{run} completed twice");
                        }
                        let _ = got;
                    }
                    Op::Fail { worker, retryable } => {
                        let Some((run, token, _)) = holding.remove(&worker) else { continue };
                        sim.run(|v, ctx| plan_finish(v, &run, as_holder(&format!("w{worker}"), token), &Ending::Fail { error: "x".into(), retryable, retry_delay_millis: 0 }, ctx));
                    }
                    Op::Advance(ms) => sim.advance(ms),
                    Op::Sweep => { sweep(&mut sim); }
                }
            }
            // No accepted step is ever lost or changed.
            for run in &runs {
                let resumed = sim.read(|v| resume(v, run, sim.now, 0));
                let stored: BTreeMap<u64, serde_json::Value> = resumed.steps.into_iter().map(|s| (s.step, s.output.unwrap_or_default())).collect();
                for ((r, step), output) in &accepted {
                    if r == run {
                        prop_assert_eq!(stored.get(step), Some(output), "step {} of {} lost", step, run);
                    }
                }
            }
        }
    }
}

fn create_with(sim: &mut Sim, name: &str, extra: CreateRunRequest) -> CreateRunResult {
    let req = CreateRunRequest { name: name.into(), max_attempts: extra.max_attempts.or(Some(1)), ..extra };
    sim.run(|v, ctx| plan_create(v, &req, ctx))
}

/// Finishes a run claimed by worker "w".
fn finish(sim: &mut Sim, claimed: &ClaimResult, ending: Ending) {
    let run = claimed.run_id.clone().unwrap();
    let caller = as_holder("w", claimed.token.unwrap());
    sim.run(|v, ctx| plan_finish(v, &run, caller, &ending, ctx));
}

#[test]
fn a_run_is_claimable_only_once_every_dependency_completed() {
    let mut sim = Sim::new();
    let a = create_with(&mut sim, "a", CreateRunRequest::default()).run_id;
    let b = create_with(&mut sim, "b", CreateRunRequest::default()).run_id;
    let c =
        create_with(&mut sim, "c", CreateRunRequest { depends_on: vec![a.clone(), b.clone()], ..Default::default() })
            .run_id;
    let waiting = claim(&mut sim, "w", Some(&c), &[]);
    assert_eq!(waiting.status, ClaimStatus::Waiting, "named, it says why it cannot be claimed");
    assert_eq!(status(&sim, &c).waiting_on, vec![a.clone(), b.clone()]);

    let first = claim(&mut sim, "w", None, &[]);
    assert_eq!(first.run_id.as_deref(), Some(a.as_str()), "c is skipped while it waits");
    finish(&mut sim, &first, Ending::Complete { result: json!(1) });
    assert_eq!(status(&sim, &c).waiting_on, vec![b.clone()]);
    assert_eq!(status(&sim, &c).depends_on, vec![a.clone(), b.clone()], "the graph keeps its finished edges");
    let second = claim(&mut sim, "w", None, &[]);
    assert_eq!(second.run_id.as_deref(), Some(b.as_str()));
    finish(&mut sim, &second, Ending::Complete { result: json!(2) });
    let third = claim(&mut sim, "w", None, &[]);
    assert_eq!(third.run_id.as_deref(), Some(c.as_str()), "claimable once both completed");
}

#[test]
fn a_failed_dependency_blocks_its_dependents_visibly() {
    let mut sim = Sim::new();
    let a = create_with(&mut sim, "a", CreateRunRequest::default()).run_id;
    let b = create_with(&mut sim, "b", CreateRunRequest { depends_on: vec![a.clone()], ..Default::default() }).run_id;
    let claimed = claim(&mut sim, "w", Some(&a), &[]);
    finish(&mut sim, &claimed, Ending::Fail { error: "broke".into(), retryable: false, retry_delay_millis: 0 });
    let blocked = status(&sim, &b);
    assert_eq!(blocked.blocked_by, Some(format!("dependency {a} is failed")));
    assert_eq!(claim(&mut sim, "w", None, &[]).status, ClaimStatus::NoneAvailable);
    let missing =
        create_with(&mut sim, "c", CreateRunRequest { depends_on: vec!["nope".into()], ..Default::default() });
    assert_eq!(status(&sim, &missing.run_id).blocked_by.as_deref(), Some("dependency nope does not exist"));
}

fn indexed(sim: &Sim, space: Space) -> usize {
    sim.view.entries.keys().filter(|k| k.starts_with(&keyspace::prefix(space))).count()
}

/// Claims read the claim order from its front; a run that waits must not be in it, or every
/// claim would reread every waiting run.
#[test]
fn runs_wait_outside_the_claim_order_until_their_last_dependency_completes() {
    let mut sim = Sim::new();
    let a = create_with(&mut sim, "a", CreateRunRequest::default()).run_id;
    let b = create_with(&mut sim, "b", CreateRunRequest::default()).run_id;
    let after_a = || CreateRunRequest { depends_on: vec![a.clone()], priority: Some(3), ..Default::default() };
    for i in 0..20 {
        create_with(&mut sim, &format!("after-a-{i}"), after_a());
    }
    let both = CreateRunRequest { depends_on: vec![a.clone(), b.clone()], ..Default::default() };
    let last = create_with(&mut sim, "after-both", both).run_id;
    assert_eq!(indexed(&sim, Space::Queue) + indexed(&sim, Space::PriorityQueue), 2, "only a and b are queued");
    assert_eq!(indexed(&sim, Space::Dependent), 22, "each waiting run is noted under each dependency");

    let first = claim(&mut sim, "w", Some(&a), &[]);
    finish(&mut sim, &first, Ending::Complete { result: json!(null) });
    assert_eq!(indexed(&sim, Space::PriorityQueue), 20, "a's completion enqueued what waited only on a");
    assert_eq!(indexed(&sim, Space::Queue), 1, "b stays; after-both still waits on it");
    assert_eq!(indexed(&sim, Space::Dependent), 1);
    let second = claim(&mut sim, "w", Some(&b), &[]);
    finish(&mut sim, &second, Ending::Complete { result: json!(null) });
    assert_eq!((indexed(&sim, Space::Queue), indexed(&sim, Space::Dependent)), (1, 0));
    assert_eq!(claim(&mut sim, "w", Some(&last), &[]).status, ClaimStatus::Claimed);
}

/// Completing a run that a thousand others wait on must not make one write of the single
/// writer read and write all of them: it releases a bounded number, and the sweeper the rest.
#[test]
fn a_run_many_wait_on_releases_them_a_bounded_number_per_write() {
    let mut sim = Sim::new();
    let gate = create_with(&mut sim, "gate", CreateRunRequest::default()).run_id;
    let waiting = RELEASES_PER_WRITE * 2 + 10;
    for i in 0..waiting {
        create_with(
            &mut sim,
            &format!("w{i}"),
            CreateRunRequest { depends_on: vec![gate.clone()], ..Default::default() },
        );
    }
    let claimed = claim(&mut sim, "w", Some(&gate), &[]);
    let before = sim.view.entries.len();
    finish(&mut sim, &claimed, Ending::Complete { result: json!(null) });
    assert_eq!(indexed(&sim, Space::Queue), RELEASES_PER_WRITE, "the completion released its share");
    assert_eq!(indexed(&sim, Space::Release), 1, "and left word that more wait");
    assert!(sim.view.entries.len() <= before + 2, "notes dropped as runs were enqueued");
    let mut passes = 0;
    while sim.run(plan_release_pending) > 0 {
        passes += 1;
        assert!(passes < 10, "the sweeper ends");
    }
    assert_eq!(passes, 2, "two more bounded writes");
    assert_eq!(indexed(&sim, Space::Queue), waiting);
    assert_eq!((indexed(&sim, Space::Dependent), indexed(&sim, Space::Release)), (0, 0));

    // A failed dependency's notes are dropped the same way, enqueueing nothing.
    let doomed = create_with(&mut sim, "doomed", CreateRunRequest::default()).run_id;
    for i in 0..RELEASES_PER_WRITE + 1 {
        create_with(
            &mut sim,
            &format!("v{i}"),
            CreateRunRequest { depends_on: vec![doomed.clone()], ..Default::default() },
        );
    }
    let claimed = claim(&mut sim, "w", Some(&doomed), &[]);
    finish(&mut sim, &claimed, Ending::Fail { error: "no".into(), retryable: false, retry_delay_millis: 0 });
    let passes = (0..10).take_while(|_| sim.run(plan_release_pending) > 0).count();
    assert!(passes < 10, "the sweeper ends");
    assert_eq!((indexed(&sim, Space::Dependent), indexed(&sim, Space::Release)), (0, 0));
    assert_eq!(indexed(&sim, Space::Queue), waiting, "none of them queued");
}

#[test]
fn runs_behind_a_dependency_that_fails_or_is_cancelled_never_enter_the_claim_order() {
    let mut sim = Sim::new();
    let failing = create_with(&mut sim, "failing", CreateRunRequest::default()).run_id;
    let cancelled = create_with(&mut sim, "cancelled", CreateRunRequest::default()).run_id;
    let done = create_with(&mut sim, "done", CreateRunRequest::default()).run_id;
    let on = |deps: Vec<String>| CreateRunRequest { depends_on: deps, ..Default::default() };
    let behind_failing = create_with(&mut sim, "x", on(vec![failing.clone(), done.clone()])).run_id;
    let behind_cancelled = create_with(&mut sim, "y", on(vec![cancelled.clone()])).run_id;
    let claimed = claim(&mut sim, "w", Some(&failing), &[]);
    finish(&mut sim, &claimed, Ending::Fail { error: "broke".into(), retryable: false, retry_delay_millis: 0 });
    sim.run(|view, ctx| plan_cancel(view, &cancelled, Some("not needed"), None, ctx));
    let claimed = claim(&mut sim, "w", Some(&done), &[]);
    finish(&mut sim, &claimed, Ending::Complete { result: json!(null) });
    assert_eq!(indexed(&sim, Space::Queue) + indexed(&sim, Space::Dependent), 0, "nothing left to claim or free");
    assert_eq!(status(&sim, &behind_failing).blocked_by, Some(format!("dependency {failing} is failed")));
    assert_eq!(status(&sim, &behind_cancelled).blocked_by, Some(format!("dependency {cancelled} is cancelled")));
    assert_eq!(claim(&mut sim, "w", None, &[]).status, ClaimStatus::NoneAvailable);
}

#[test]
fn higher_priority_runs_are_claimed_first_and_delayed_ones_wait() {
    let mut sim = Sim::new();
    let low = create_with(&mut sim, "low", CreateRunRequest::default()).run_id;
    let later = create_with(
        &mut sim,
        "later",
        CreateRunRequest { priority: Some(9), delay_seconds: Some(1.0), ..Default::default() },
    )
    .run_id;
    let high = create_with(&mut sim, "high", CreateRunRequest { priority: Some(5), ..Default::default() }).run_id;
    assert_eq!(claim(&mut sim, "w", None, &[]).run_id.as_deref(), Some(high.as_str()));
    assert_eq!(claim(&mut sim, "w", None, &[]).run_id.as_deref(), Some(low.as_str()), "the delayed one is not due");
    assert!(status(&sim, &later).not_before.is_some());
    sim.advance(1_000);
    assert_eq!(claim(&mut sim, "w", None, &[]).run_id.as_deref(), Some(later.as_str()));
}

#[test]
fn a_dedupe_key_returns_the_unfinished_run_and_frees_once_it_finished() {
    let mut sim = Sim::new();
    let keyed = || CreateRunRequest { dedupe_key: Some("nightly-2026-11-26".into()), ..Default::default() };
    let first = create_with(&mut sim, "nightly", keyed());
    let again = create_with(&mut sim, "nightly", keyed());
    assert_eq!((again.status, again.run_id.as_str()), (CreateStatus::Duplicate, first.run_id.as_str()));
    let claimed = claim(&mut sim, "w", Some(&first.run_id), &[]);
    finish(&mut sim, &claimed, Ending::Complete { result: json!("done") });
    let after = create_with(&mut sim, "nightly", keyed());
    assert_eq!(after.status, CreateStatus::Ok, "a finished run no longer dedupes");
    assert_ne!(after.run_id, first.run_id);
    // Another name (another tenant's, say) never meets this name's dedupe keys.
    let theirs = create_with(&mut sim, "team-b/nightly", keyed());
    assert_eq!(theirs.status, CreateStatus::Ok, "same key, other name: its own run");
}

/// A random DAG of 50 runs drained by claims in a random interleaving: a run is only ever
/// claimed once every run it depends on completed.
#[test]
fn random_dags_are_claimed_in_dependency_order() {
    for seed in 1..=20u64 {
        let mut rng = crate::testing::Rng::new(seed);
        let mut next = |n: u64| rng.below(n);
        let mut sim = Sim::new();
        let mut ids: Vec<String> = Vec::new();
        let mut deps: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for i in 0..50 {
            let parents: Vec<String> =
                if i == 0 { Vec::new() } else { (0..next(3)).map(|_| ids[next(i) as usize].clone()).collect() };
            let priority = Some(next(10) as u8);
            let id = create_with(
                &mut sim,
                "dag",
                CreateRunRequest { depends_on: parents.clone(), priority, ..Default::default() },
            )
            .run_id;
            deps.insert(id.clone(), parents);
            ids.push(id);
        }
        let mut completed = std::collections::BTreeSet::new();
        let mut held: Vec<ClaimResult> = Vec::new();
        while completed.len() < ids.len() {
            if held.len() < 8 {
                let got = claim(&mut sim, "w", None, &[]);
                if got.status == ClaimStatus::Claimed {
                    let run = got.run_id.clone().unwrap();
                    assert!(
                        deps[&run].iter().all(|d| completed.contains(d)),
                        "seed {seed}: {run} claimed before its dependencies"
                    );
                    held.push(got);
                    continue;
                }
            }
            assert!(!held.is_empty(), "seed {seed}: nothing claimable and nothing running: stuck");
            let done = held.remove(next(held.len() as u64) as usize);
            finish(&mut sim, &done, Ending::Complete { result: json!(null) });
            completed.insert(done.run_id.unwrap());
        }
    }
}

#[test]
fn a_retry_with_a_backoff_is_not_claimable_before_it() {
    let mut sim = Sim::new();
    let run = create_with(&mut sim, "flaky", CreateRunRequest { max_attempts: Some(3), ..Default::default() }).run_id;
    let claimed = claim(&mut sim, "w", None, &[]);
    finish(&mut sim, &claimed, Ending::Fail { error: "timeout".into(), retryable: true, retry_delay_millis: 2_000 });
    assert_eq!(claim(&mut sim, "w", None, &[]).status, ClaimStatus::NoneAvailable, "backing off");
    assert_eq!(claim(&mut sim, "w", Some(&run), &[]).status, ClaimStatus::Waiting);
    sim.advance(2_000);
    let again = claim(&mut sim, "w", None, &[]);
    assert_eq!((again.status, again.attempt), (ClaimStatus::Claimed, Some(2)));
}

fn signal(sim: &mut Sim, run: &str, name: &str, value: serde_json::Value) -> SignalResult {
    let req =
        SignalRequest { run_id: run.into(), name: name.into(), value, sender: Some("human".into()), request_id: None };
    sim.run(|v, ctx| plan_signal(v, &req, ctx))
}

#[test]
fn a_parked_run_is_claimable_again_once_its_signal_arrives_without_spending_an_attempt() {
    let mut sim = Sim::new();
    let run = create_with(&mut sim, "deploy", CreateRunRequest { max_attempts: Some(1), ..Default::default() }).run_id;
    let first = claim(&mut sim, "w", None, &[]);
    let token = first.token.unwrap();
    let parked = sim.run(|v, ctx| plan_await_signal(v, &run, as_holder("w", token), "approved", 0, ctx));
    assert_eq!(parked.status, AwaitStatus::Waiting);
    let summary = status(&sim, &run);
    assert_eq!((summary.run_status, summary.awaiting_signal.as_deref()), (RunStatus::Pending, Some("approved")));
    assert_eq!(claim(&mut sim, "w", None, &[]).status, ClaimStatus::NoneAvailable, "parked: not claimable");
    assert_eq!(claim(&mut sim, "w", Some(&run), &[]).status, ClaimStatus::Waiting);

    signal(&mut sim, &run, "other", json!(1));
    assert_eq!(claim(&mut sim, "w", None, &[]).status, ClaimStatus::NoneAvailable, "another name does not wake it");
    let sent = signal(&mut sim, &run, "approved", json!({"by": "ana"}));
    assert_eq!(sent.status, SignalStatus::Ok);
    let resumed = claim(&mut sim, "w2", None, &[]);
    assert_eq!((resumed.status, resumed.attempt), (ClaimStatus::Claimed, Some(1)), "waiting is not failing");
    let names: Vec<_> = resumed.signals.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["other", "approved"], "the worker sees every signal, oldest first");
    assert_eq!(resumed.signals[1].value, json!({"by": "ana"}));
    assert!(status(&sim, &run).awaiting_signal.is_none());
}

#[test]
fn awaiting_a_signal_that_already_came_answers_at_once_and_keeps_the_claim() {
    let mut sim = Sim::new();
    let run = create_with(&mut sim, "job", CreateRunRequest::default()).run_id;
    let claimed = claim(&mut sim, "w", None, &[]);
    let token = claimed.token.unwrap();
    let sent = signal(&mut sim, &run, "go", json!(true));
    let at_once = sim.run(|v, ctx| plan_await_signal(v, &run, as_holder("w", token), "go", 0, ctx));
    assert_eq!((at_once.status, at_once.signal.map(|s| s.signal_id)), (AwaitStatus::Signaled, sent.signal_id));
    let beat = sim.run(|v, ctx| plan_heartbeat(v, &run, as_holder("w", token), TTL, ctx));
    assert_eq!((beat.status, beat.signals.len()), (HolderStatus::Ok, 1), "still held; signals on heartbeat too");
    let later = sim.run(|v, ctx| plan_await_signal(v, &run, as_holder("w", token), "go", sent.signal_id.unwrap(), ctx));
    assert_eq!(later.status, AwaitStatus::Waiting, "after_signal_id skips the ones already handled");
    let stale = sim.run(|v, ctx| plan_await_signal(v, &run, as_holder("w", token), "go", 0, ctx));
    assert_eq!(stale.status, AwaitStatus::Fenced, "parking ended the claim");
}

#[test]
fn a_finished_run_takes_no_signals() {
    let mut sim = Sim::new();
    let run = create_with(&mut sim, "job", CreateRunRequest::default()).run_id;
    let claimed = claim(&mut sim, "w", None, &[]);
    finish(&mut sim, &claimed, Ending::Complete { result: json!(1) });
    assert_eq!(signal(&mut sim, &run, "late", json!(1)).status, SignalStatus::Finished);
    assert_eq!(signal(&mut sim, &"0".repeat(26), "x", json!(1)).status, SignalStatus::NotFound);
}

#[test]
fn runs_sharing_a_concurrency_key_run_at_most_its_limit_at_once() {
    let mut sim = Sim::new();
    let gpu =
        || CreateRunRequest { concurrency_key: Some("gpu".into()), concurrency_limit: Some(2), ..Default::default() };
    let runs: Vec<String> = (0..3).map(|i| create_with(&mut sim, &format!("train-{i}"), gpu()).run_id).collect();
    let cpu = create_with(&mut sim, "etl", CreateRunRequest::default()).run_id;
    let first = claim(&mut sim, "w", None, &[]);
    let second = claim(&mut sim, "w", None, &[]);
    assert_eq!((first.run_id.as_deref(), second.run_id.as_deref()), (Some(runs[0].as_str()), Some(runs[1].as_str())));
    let third = claim(&mut sim, "w", None, &[]);
    assert_eq!(third.run_id.as_deref(), Some(cpu.as_str()), "the third gpu run waits; others go on");
    assert_eq!(claim(&mut sim, "w", Some(&runs[2]), &[]).status, ClaimStatus::Waiting, "named, it waits too");
    finish(&mut sim, &first, Ending::Complete { result: json!(null) });
    assert_eq!(claim(&mut sim, "w", None, &[]).run_id.as_deref(), Some(runs[2].as_str()), "a slot freed");
}

#[test]
fn a_finished_run_leaves_the_claim_order_whatever_its_priority() {
    let mut sim = Sim::new();
    create_with(&mut sim, "urgent", CreateRunRequest { priority: Some(7), ..Default::default() });
    create_with(&mut sim, "plain", CreateRunRequest::default());
    for _ in 0..2 {
        let claimed = claim(&mut sim, "w", None, &[]);
        finish(&mut sim, &claimed, Ending::Complete { result: json!(null) });
    }
    assert_eq!((indexed(&sim, Space::PriorityQueue), indexed(&sim, Space::Queue)), (0, 0), "both indexes emptied");
}

#[test]
fn a_signal_is_small_because_every_claim_and_heartbeat_carries_them_all() {
    let signal = |value: serde_json::Value| SignalRequest {
        run_id: "r".into(),
        name: "approved".into(),
        value,
        sender: None,
        request_id: None,
    };
    let limits = crate::limits::Limits::default();
    assert!(signal(json!({"by": "ana"})).validate(&limits).is_ok());
    let big = json!("x".repeat(crate::ops::workflow::MAX_SIGNAL_VALUE_BYTES));
    assert!(signal(big).validate(&limits).is_err(), "a value past 64 KiB is refused");
}

/// `workflow_discover` said "runs a worker could claim now" and listed runs no claim could take
/// (issue 31): waiting on a dependency, blocked on a missing one, held back by a concurrency
/// limit, delayed, parked on a signal. Each now has a state a list can ask for, with its
/// reason, and `claimable` is exactly what a claim takes.
#[test]
fn a_pending_run_says_whether_a_claim_could_take_it_and_why_not() {
    let mut sim = Sim::new();
    let create_with = |sim: &mut Sim, name: &str, tweak: &dyn Fn(&mut CreateRunRequest)| {
        let mut req = CreateRunRequest { name: name.into(), max_attempts: Some(3), ..CreateRunRequest::default() };
        tweak(&mut req);
        sim.run(|v, ctx| plan_create(v, &req, ctx)).run_id
    };
    let first = create_with(&mut sim, "first", &|_| {});
    let waiting = create_with(&mut sim, "after-first", &|r| r.depends_on = vec![first.clone()]);
    let blocked =
        create_with(&mut sim, "after-nothing", &|r| r.depends_on = vec!["01NOSUCHRUN0000000000000000".into()]);
    let delayed = create_with(&mut sim, "later", &|r| r.delay_seconds = Some(3600.0));
    let limited_a = create_with(&mut sim, "one-at-a-time", &|r| r.concurrency_key = Some("gpu".into()));
    let limited_b = create_with(&mut sim, "one-at-a-time", &|r| r.concurrency_key = Some("gpu".into()));
    let parked = create_with(&mut sim, "approval", &|_| {});
    let token = claim(&mut sim, "w", Some(&parked), &[]).token.unwrap();
    let awaited = sim.run(|v, ctx| plan_await_signal(v, &parked, as_holder("w", token), "approved", 0, ctx));
    assert_eq!(awaited.status, AwaitStatus::Waiting);
    assert_eq!(claim(&mut sim, "w", Some(&limited_a), &[]).status, ClaimStatus::Claimed);

    let no_tags = BTreeMap::new();
    let listed = |sim: &Sim, status| {
        let filter = RunFilter { status: Some(status), name: None, tags: &no_tags };
        sim.read(|v| list(v, filter, None, 100, sim.now, 0)).runs
    };
    let ids = |runs: &[RunSummary]| runs.iter().map(|r| r.run_id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&listed(&sim, ListStatus::Claimable)), [first.as_str()], "only what a claim could take");
    let waits = listed(&sim, ListStatus::Waiting);
    assert_eq!(ids(&waits), [waiting.as_str(), limited_b.as_str()]);
    assert_eq!(waits[0].waiting_on, [first.as_str()]);
    assert!(waits[1].limited_by.as_deref().is_some_and(|l| l.contains("`gpu`")), "{:?}", waits[1]);
    let blocks = listed(&sim, ListStatus::Blocked);
    assert_eq!(ids(&blocks), [blocked.as_str()]);
    assert!(blocks[0].blocked_by.as_deref().is_some_and(|b| b.contains("does not exist")));
    let delays = listed(&sim, ListStatus::Delayed);
    assert_eq!(ids(&delays), [delayed.as_str()]);
    assert!(delays[0].not_before.is_some());
    let parks = listed(&sim, ListStatus::Parked);
    assert_eq!(ids(&parks), [parked.as_str()]);
    assert_eq!(parks[0].awaiting_signal.as_deref(), Some("approved"));
    assert_eq!(listed(&sim, ListStatus::Pending).len(), 6, "pending is all of them, as before");
    // And a claim of the next run takes exactly the one listed as claimable.
    assert_eq!(claim(&mut sim, "w2", None, &[]).run_id.as_deref(), Some(first.as_str()));
    assert_eq!(claim(&mut sim, "w3", None, &[]).status, ClaimStatus::NoneAvailable);
}
