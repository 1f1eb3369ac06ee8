use std::collections::BTreeMap;

use super::*;
use crate::ops::history::HistoryOp;
use crate::testing::{Sim, T0};

const TTL: u64 = 1_000;

fn acquire(sim: &mut Sim, holder: &str, capacity: u32) -> SemaphoreAcquireResult {
    sim.run(|v, ctx| plan_acquire(v, "slots", holder, capacity, TTL, ctx))
}

fn holders(result: &SemaphoreAcquireResult) -> Vec<&str> {
    result.holders.iter().map(|h| h.holder.as_str()).collect()
}

#[test]
fn grants_up_to_the_capacity_then_names_every_holder() {
    let mut sim = Sim::new();
    let a = acquire(&mut sim, "a", 2);
    let b = acquire(&mut sim, "b", 2);
    assert_eq!((a.status, b.status), (SemaphoreStatus::Acquired, SemaphoreStatus::Acquired));
    assert!(b.token > a.token, "each grant carries a larger token");
    assert_eq!(holders(&b), ["a", "b"]);

    let c = acquire(&mut sim, "c", 2);
    assert_eq!((c.status, c.token, c.capacity), (SemaphoreStatus::Full, None, 2));
    assert_eq!(holders(&c), ["a", "b"], "a refusal says who holds the permits");
    assert_eq!(c.holders[0].expires_at, T0.plus_millis(TTL).to_rfc3339());

    let got = sim.read(|v| get(v, "slots", sim.now, sim.view.revision));
    assert_eq!((got.capacity, got.available, got.holders.len()), (Some(2), Some(0), 2));
}

#[test]
fn a_holder_acquiring_again_renews_its_own_permit_with_the_same_token() {
    let mut sim = Sim::new();
    let first = acquire(&mut sim, "a", 1);
    sim.advance(600);
    let again = acquire(&mut sim, "a", 1);
    assert_eq!((again.status, again.token), (SemaphoreStatus::Acquired, first.token));
    assert_eq!(again.expires_at, Some(sim.now.plus_millis(TTL).to_rfc3339()));
    assert_eq!(holders(&again), ["a"], "still one permit, not two");
    assert_eq!(sim.ops_of("slots"), vec![HistoryOp::Grant, HistoryOp::Renew]);
}

#[test]
fn release_frees_a_permit_at_once_and_a_stale_token_changes_nothing() {
    let mut sim = Sim::new();
    let a = acquire(&mut sim, "a", 1).token.unwrap();
    let wrong = sim.run(|v, ctx| plan_release(v, "slots", "a", a + 1, ctx));
    assert_eq!(wrong.status, PermitStatus::Lost);
    let other = sim.run(|v, ctx| plan_release(v, "slots", "b", a, ctx));
    assert_eq!(other.status, PermitStatus::Lost, "another holder cannot release it with a's token");
    assert_eq!(acquire(&mut sim, "b", 1).status, SemaphoreStatus::Full);

    let released = sim.run(|v, ctx| plan_release(v, "slots", "a", a, ctx));
    assert_eq!(released.status, PermitStatus::Ok);
    assert_eq!(acquire(&mut sim, "b", 1).status, SemaphoreStatus::Acquired);
    let again = sim.run(|v, ctx| plan_release(v, "slots", "a", a, ctx));
    assert_eq!(again.status, PermitStatus::Lost, "releasing twice finds nothing the second time");
}

#[test]
fn a_permit_expires_at_the_exact_boundary_unless_renewed() {
    let mut sim = Sim::new();
    let a = acquire(&mut sim, "a", 1).token.unwrap();
    sim.advance(TTL - 1);
    assert_eq!(acquire(&mut sim, "b", 1).status, SemaphoreStatus::Full, "1 ms before expiry a still holds it");
    let renewed = sim.run(|v, ctx| plan_renew(v, "slots", "a", a, TTL, ctx));
    assert_eq!(renewed.expires_at, Some(sim.now.plus_millis(TTL).to_rfc3339()));
    sim.advance(TTL);
    let b = acquire(&mut sim, "b", 1);
    assert_eq!(b.status, SemaphoreStatus::Acquired, "free the instant the renewed permit expires");
    let late = sim.run(|v, ctx| plan_renew(v, "slots", "a", a, TTL, ctx));
    assert_eq!(late.status, PermitStatus::Lost, "an expired permit cannot be renewed");
}

#[test]
fn holders_must_agree_on_the_capacity_while_any_permit_is_live() {
    let mut sim = Sim::new();
    acquire(&mut sim, "a", 2);
    let b = acquire(&mut sim, "b", 3);
    assert_eq!((b.status, b.capacity), (SemaphoreStatus::CapacityMismatch, 2));
    sim.advance(TTL);
    let b = acquire(&mut sim, "b", 3);
    assert_eq!((b.status, b.capacity), (SemaphoreStatus::Acquired, 3), "with no live permit the next acquire sets it");
    let again = acquire(&mut sim, "b", 5);
    assert_eq!((again.status, again.capacity), (SemaphoreStatus::CapacityMismatch, 3), "its own holder too");
    assert_eq!(acquire(&mut sim, "b", 3).status, SemaphoreStatus::Acquired, "on the same terms it renews");
}

#[test]
fn semaphores_with_names_that_extend_each_other_are_apart() {
    let mut sim = Sim::new();
    sim.run(|v, ctx| plan_acquire(v, "build", "a", 1, TTL, ctx));
    let other = sim.run(|v, ctx| plan_acquire(v, "build2", "b", 1, TTL, ctx));
    assert_eq!(other.status, SemaphoreStatus::Acquired);
    let got = sim.read(|v| get(v, "build", sim.now, 0));
    assert_eq!(got.holders.len(), 1);
}

/// A model of one semaphore: holder -> (token, expires at).
#[derive(Default)]
struct Model {
    permits: BTreeMap<String, (u64, UnixMillis)>,
}

impl Model {
    fn live(&mut self, now: UnixMillis) -> usize {
        self.permits.retain(|_, (_, expires)| *expires > now);
        self.permits.len()
    }
}

/// Random acquires, renews, releases and clock moves by six holders against a semaphore of
/// three permits: every answer matches the model and no more than three permits are ever live.
#[test]
fn random_histories_match_a_model_and_never_exceed_the_capacity() {
    const CAPACITY: u32 = 3;
    for seed in 1..=40u64 {
        let mut rng = crate::testing::Rng::new(seed);
        let mut next = |n: u64| rng.below(n);
        let mut sim = Sim::new();
        let mut model = Model::default();
        let mut tokens: BTreeMap<String, u64> = BTreeMap::new();
        let mut highest = 0;
        for step in 0..300 {
            let holder = format!("h{}", next(6));
            match next(4) {
                0 | 1 => {
                    let got = acquire(&mut sim, &holder, CAPACITY);
                    let live = model.live(sim.now);
                    match model.permits.get(&holder).copied() {
                        Some((token, _)) => {
                            assert_eq!(
                                (got.status, got.token),
                                (SemaphoreStatus::Acquired, Some(token)),
                                "seed {seed} step {step}"
                            );
                            model.permits.insert(holder.clone(), (token, sim.now.plus_millis(TTL)));
                        }
                        None if live < CAPACITY as usize => {
                            assert_eq!(got.status, SemaphoreStatus::Acquired, "seed {seed} step {step}");
                            let token = got.token.unwrap();
                            assert!(token > highest, "tokens only grow");
                            highest = token;
                            model.permits.insert(holder.clone(), (token, sim.now.plus_millis(TTL)));
                            tokens.insert(holder.clone(), token);
                        }
                        None => assert_eq!(got.status, SemaphoreStatus::Full, "seed {seed} step {step}"),
                    }
                }
                2 => {
                    let token = tokens.get(&holder).copied().unwrap_or(0);
                    let got = sim.run(|v, ctx| plan_release(v, "slots", &holder, token, ctx));
                    model.live(sim.now);
                    let holds = model.permits.get(&holder).is_some_and(|(t, _)| *t == token);
                    assert_eq!(got.status == PermitStatus::Ok, holds, "seed {seed} step {step}");
                    if holds {
                        model.permits.remove(&holder);
                    }
                }
                _ => sim.advance(next(400)),
            }
            let live = sim.read(|v| get(v, "slots", sim.now, 0)).holders.len();
            assert_eq!(live, model.live(sim.now), "seed {seed} step {step}");
            assert!(live <= CAPACITY as usize);
        }
    }
}
