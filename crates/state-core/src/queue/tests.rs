use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use super::*;
use crate::ops::history::HistoryOp;
use crate::testing::Sim;

const VISIBILITY: u64 = 1_000;

fn terms(priority: u8, delay_millis: u64, max_attempts: u32) -> SendTerms {
    SendTerms { priority, delay_millis, ttl_millis: None, max_attempts }
}

fn send(sim: &mut Sim, body: Value, terms: SendTerms, dedupe: Option<&str>) -> QueueSendResult {
    let out = Outgoing { queue: "q", body: &body, sender: Some("s"), dedupe_key: dedupe, terms };
    sim.run(|v, ctx| plan_send(v, &out, ctx))
}

fn receive(sim: &mut Sim) -> QueueReceiveResult {
    sim.run(|v, ctx| plan_receive(v, "q", "c", VISIBILITY, ctx))
}

fn body_of(result: &QueueReceiveResult) -> Value {
    result.message.as_ref().map_or(Value::Null, |m| m.body.clone())
}

#[test]
fn higher_priority_first_then_oldest_first() {
    let mut sim = Sim::new();
    send(&mut sim, json!("low-1"), terms(0, 0, 5), None);
    send(&mut sim, json!("high"), terms(7, 0, 5), None);
    send(&mut sim, json!("low-2"), terms(0, 0, 5), None);
    let order: Vec<Value> = (0..3).map(|_| body_of(&receive(&mut sim))).collect();
    assert_eq!(order, [json!("high"), json!("low-1"), json!("low-2")]);
    assert_eq!(receive(&mut sim).status, ReceiveStatus::Empty);
}

#[test]
fn a_delayed_message_waits_and_an_unacked_one_comes_back_with_its_attempt_count() {
    let mut sim = Sim::new();
    send(&mut sim, json!("later"), terms(0, 500, 5), None);
    assert_eq!(receive(&mut sim).status, ReceiveStatus::Empty, "not before its delay");
    sim.advance(500);
    let first = receive(&mut sim);
    let first_message = first.message.unwrap();
    assert_eq!((first_message.attempts, first_message.consumer.as_deref()), (1, Some("c")));
    assert_eq!(receive(&mut sim).status, ReceiveStatus::Empty, "hidden while in flight");
    sim.advance(VISIBILITY);
    let again = receive(&mut sim).message.unwrap();
    assert_eq!((again.message_id.as_str(), again.attempts), (first_message.message_id.as_str(), 2));
    assert!(again.receipt > first_message.receipt);
    let stale = sim.run(|v, ctx| plan_ack(v, "q", &again.message_id, first_message.receipt.unwrap(), ctx));
    assert_eq!(stale.status, SettleStatus::Stale, "the first receiver's receipt no longer acks");
    let ok = sim.run(|v, ctx| plan_ack(v, "q", &again.message_id, again.receipt.unwrap(), ctx));
    assert_eq!(ok.status, SettleStatus::Ok);
    assert_eq!(receive(&mut sim).status, ReceiveStatus::Empty, "acked means gone");
    sim.advance(10 * VISIBILITY);
    assert_eq!(receive(&mut sim).status, ReceiveStatus::Empty, "for good");
}

#[test]
fn a_nack_shows_the_message_again_after_its_delay() {
    let mut sim = Sim::new();
    send(&mut sim, json!("retry me"), terms(0, 0, 5), None);
    let got = receive(&mut sim).message.unwrap();
    let nack = sim.run(|v, ctx| plan_nack(v, "q", &got.message_id, got.receipt.unwrap(), 300, ctx));
    assert_eq!(nack.status, SettleStatus::Ok);
    assert_eq!(receive(&mut sim).status, ReceiveStatus::Empty);
    sim.advance(300);
    assert_eq!(receive(&mut sim).message.unwrap().attempts, 2);
}

#[test]
fn past_its_attempts_a_message_moves_to_the_dead_letter_queue() {
    let mut sim = Sim::new();
    let sent = send(&mut sim, json!("poison"), terms(0, 0, 2), None);
    for _ in 0..2 {
        assert_eq!(receive(&mut sim).status, ReceiveStatus::Received);
        sim.advance(VISIBILITY);
    }
    let third = receive(&mut sim);
    assert_eq!((third.status, third.dead_lettered.clone()), (ReceiveStatus::Empty, vec![sent.message_id.clone()]));
    let dead = sim.run(|v, ctx| plan_receive(v, "q.dead", "ops", VISIBILITY, ctx));
    assert_eq!(body_of(&dead), json!("poison"), "it can be received from q.dead");
    let ops = sim.ops_of("q");
    assert_eq!(ops, vec![HistoryOp::Send, HistoryOp::Receive, HistoryOp::Receive, HistoryOp::DeadLetter]);
}

/// Dead letters cascaded (issue 31): a dead letter started over at 0 attempts with the same
/// limit, so received once from `q.dead` without an ack it moved on to `q.dead.dead`. They keep
/// the attempts they came with, are received from `q.dead` however often, and a redrive moves
/// them back, starting over.
#[test]
fn dead_letters_keep_their_attempts_never_cascade_and_can_be_redriven() {
    let mut sim = Sim::new();
    let sent = send(&mut sim, json!("poison"), terms(0, 0, 1), None);
    assert_eq!(receive(&mut sim).status, ReceiveStatus::Received);
    sim.advance(VISIBILITY);
    let peeked = sim.read(|v| peek(v, "q", 10, sim.now, 0));
    assert_eq!((peeked.visible, peeked.spent), (0, 1), "out of attempts, not receivable: spent");
    assert_eq!(receive(&mut sim).dead_lettered, vec![sent.message_id.clone()]);
    let receive_dead = |sim: &mut Sim| sim.run(|v, ctx| plan_receive(v, "q.dead", "ops", VISIBILITY, ctx));
    for attempt in 2..=4 {
        let dead = receive_dead(&mut sim);
        assert_eq!(dead.message.as_ref().map(|m| m.attempts), Some(attempt), "its attempts go on from where they were");
        assert!(dead.dead_lettered.is_empty());
        sim.advance(VISIBILITY);
    }
    let nothing_further = sim.read(|v| peek(v, "q.dead.dead", 10, sim.now, 0));
    assert_eq!(nothing_further.messages.len(), 0, "no dead letters of dead letters");

    let redriven = sim.run(|v, ctx| plan_redrive(v, "q", 100, Some("ops"), ctx));
    assert_eq!((redriven.moved.clone(), redriven.remaining), (vec![sent.message_id.clone()], 0));
    let back = receive(&mut sim).message.unwrap();
    assert_eq!((back.message_id, back.attempts, back.body), (sent.message_id, 1, json!("poison")), "a fresh start");
    assert_eq!(sim.run(|v, ctx| plan_redrive(v, "q", 100, None, ctx)).moved.len(), 0, "none left");
}

#[test]
fn a_redrive_moves_at_most_its_limit_and_says_how_many_are_left() {
    let mut sim = Sim::new();
    for n in 0..5 {
        send(&mut sim, json!(n), terms(0, 0, 1), None);
        receive(&mut sim);
    }
    sim.advance(VISIBILITY);
    assert_eq!(receive(&mut sim).dead_lettered.len(), 5);
    let first = sim.run(|v, ctx| plan_redrive(v, "q", 2, None, ctx));
    assert_eq!((first.moved.len(), first.remaining), (2, 3));
    let request = crate::ops::queue::QueueRedriveRequest {
        queue: "q.dead".into(),
        limit: None,
        agent_id: None,
        request_id: None,
    };
    assert!(request.validate().unwrap_err().to_string().contains("give the queue its letters go back to (`q`)"));
}

#[test]
fn a_dedupe_key_returns_the_message_still_queued_and_frees_once_it_is_acked() {
    let mut sim = Sim::new();
    let first = send(&mut sim, json!(1), terms(0, 0, 5), Some("build-42"));
    let again = send(&mut sim, json!(2), terms(0, 0, 5), Some("build-42"));
    assert_eq!((again.status, again.message_id.as_str()), (SendStatus::Duplicate, first.message_id.as_str()));
    let got = receive(&mut sim).message.unwrap();
    sim.run(|v, ctx| plan_ack(v, "q", &got.message_id, got.receipt.unwrap(), ctx));
    let after = send(&mut sim, json!(3), terms(0, 0, 5), Some("build-42"));
    assert_eq!(after.status, SendStatus::Sent, "a processed message no longer dedupes");
}

#[test]
fn a_message_with_a_ttl_is_dropped_when_it_runs_out_even_in_flight() {
    let mut sim = Sim::new();
    let out_terms = SendTerms { ttl_millis: Some(1_500), ..terms(0, 0, 5) };
    send(&mut sim, json!("short-lived"), out_terms, None);
    let got = receive(&mut sim).message.unwrap();
    sim.advance(1_500);
    let late = sim.run(|v, ctx| plan_ack(v, "q", &got.message_id, got.receipt.unwrap(), ctx));
    assert_eq!(late.status, SettleStatus::Stale, "gone with its TTL");
    assert_eq!(receive(&mut sim).status, ReceiveStatus::Empty);
}

/// Random sends, receives, acks, nacks and clock moves against a model of at-least-once
/// delivery: every message is acked at most once, nothing acked is received again, and every
/// message sent is, in the end, acked or dead-lettered.
#[test]
fn random_histories_lose_nothing_and_ack_nothing_twice() {
    for seed in 1..=30u64 {
        let mut rng = crate::testing::Rng::new(seed);
        let mut next = |n: u64| rng.below(n);
        let mut sim = Sim::new();
        let mut sent = BTreeSet::new();
        let mut acked = BTreeSet::new();
        let mut dead = BTreeSet::new();
        let mut holding: BTreeMap<String, u64> = BTreeMap::new();
        for step in 0..300 {
            match next(6) {
                0 | 1 => {
                    let r = send(&mut sim, json!(step), terms(next(10) as u8, next(3) * 200, 3), None);
                    sent.insert(r.message_id);
                }
                2 => {
                    let r = receive(&mut sim);
                    dead.extend(r.dead_lettered);
                    if let Some(m) = r.message {
                        assert!(!acked.contains(&m.message_id), "seed {seed}: acked message received again");
                        holding.insert(m.message_id, m.receipt.unwrap());
                    }
                }
                3 => {
                    if let Some((id, receipt)) = holding.pop_first() {
                        let r = sim.run(|v, ctx| plan_ack(v, "q", &id, receipt, ctx));
                        if r.status == SettleStatus::Ok {
                            assert!(acked.insert(id), "seed {seed}: acked twice");
                        }
                    }
                }
                4 => {
                    if let Some((id, receipt)) = holding.pop_last() {
                        sim.run(|v, ctx| plan_nack(v, "q", &id, receipt, next(2) * 300, ctx));
                    }
                }
                _ => sim.advance(next(1_500)),
            }
        }
        // Drain: receive and ack everything left.
        for _ in 0..10_000 {
            sim.advance(VISIBILITY);
            let r = receive(&mut sim);
            dead.extend(r.dead_lettered.clone());
            match r.message {
                Some(m) => {
                    let r = sim.run(|v, ctx| plan_ack(v, "q", &m.message_id, m.receipt.unwrap(), ctx));
                    assert_eq!(r.status, SettleStatus::Ok);
                    assert!(acked.insert(m.message_id), "seed {seed}: acked twice");
                }
                None if r.dead_lettered.is_empty() => break,
                None => {}
            }
        }
        let settled: BTreeSet<String> = acked.union(&dead).cloned().collect();
        assert_eq!(settled, sent, "seed {seed}: every message acked or dead-lettered");
        assert!(acked.is_disjoint(&dead), "seed {seed}");
    }
}

#[test]
fn a_queue_name_leaves_room_for_its_dead_letter_queue() {
    use crate::ops::queue::QueueSendRequest;
    let send = |queue: String| QueueSendRequest {
        queue,
        body: json!(1),
        priority: None,
        delay_seconds: None,
        dedupe_key: None,
        ttl_seconds: None,
        max_attempts: None,
        sender: None,
        request_id: None,
    };
    let room = crate::limits::MAX_KEY_BYTES - DEAD_LETTER_SUFFIX.len();
    assert!(send("q".repeat(room)).validate(&Default::default()).is_ok());
    let refused = send("q".repeat(room + 1)).validate(&Default::default()).unwrap_err().to_string();
    assert!(refused.contains(".dead"), "the refusal says why: {refused}");
}
