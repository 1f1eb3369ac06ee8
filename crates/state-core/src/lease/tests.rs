use serde_json::json;

use super::*;
use crate::kv::plan_set;
use crate::ops::WriteStatus;
use crate::ops::history::HistoryOp;
use crate::ops::kv::SetRequest;
use crate::testing::{Sim, T0};

const TTL: Option<u64> = Some(1_000);

fn acquire(sim: &mut Sim, resource: &str, holder: &str) -> AcquireResult {
    sim.run(|v, ctx| plan_acquire(v, resource, holder, TTL, ctx))
}

fn by(holder: &str, token: u64) -> Holder<'_> {
    Holder { holder_id: holder, token: Some(token) }
}

#[test]
fn grant_hold_and_expire_at_the_exact_boundary() {
    let mut sim = Sim::new();
    let a = acquire(&mut sim, "db", "a");
    assert_eq!((a.status, a.token, a.revision), (AcquireStatus::Acquired, Some(1), 1));
    assert_eq!(a.expires_at, T0.plus_millis(1_000).to_rfc3339());

    sim.advance(999);
    let b = acquire(&mut sim, "db", "b");
    assert_eq!(
        (b.status, b.holder.as_str(), b.token),
        (AcquireStatus::Held, "a", None),
        "1 ms before expiry a still holds it"
    );
    assert_eq!(b.expires_at, a.expires_at);

    sim.advance(1);
    let b = acquire(&mut sim, "db", "b");
    assert_eq!((b.status, b.holder.as_str()), (AcquireStatus::Acquired, "b"), "free the instant it expires");
    assert!(b.token > a.token, "a new grant always carries a larger token");
    assert_eq!(sim.ops_of("db"), vec![HistoryOp::Grant, HistoryOp::Expire, HistoryOp::Grant]);
}

#[test]
fn the_holder_acquiring_again_extends_with_the_same_token() {
    let mut sim = Sim::new();
    let first = acquire(&mut sim, "db", "a");
    sim.advance(500);
    let again = acquire(&mut sim, "db", "a");
    assert_eq!((again.status, again.token), (AcquireStatus::Acquired, first.token));
    assert_eq!(again.expires_at, sim.now.plus_millis(1_000).to_rfc3339());
    assert_eq!(sim.ops_of("db"), vec![HistoryOp::Grant, HistoryOp::Renew]);
}

#[test]
fn renew_needs_the_holder_and_the_current_token() {
    let mut sim = Sim::new();
    let token = acquire(&mut sim, "db", "a").token.unwrap();
    sim.advance(900);
    let ok = sim.run(|v, ctx| plan_renew(v, "db", by("a", token), TTL, ctx));
    assert_eq!((ok.status, ok.expires_at), (HoldStatus::Ok, Some(sim.now.plus_millis(1_000).to_rfc3339())));

    let wrong_token = sim.run(|v, ctx| plan_renew(v, "db", by("a", token + 7), TTL, ctx));
    assert_eq!((wrong_token.status, wrong_token.holder.as_deref()), (HoldStatus::Lost, Some("a")));
    let wrong_holder = sim.run(|v, ctx| plan_renew(v, "db", by("b", token), TTL, ctx));
    assert_eq!(wrong_holder.status, HoldStatus::Lost);

    sim.advance(1_000);
    let expired = sim.run(|v, ctx| plan_renew(v, "db", by("a", token), TTL, ctx));
    assert_eq!((expired.status, expired.holder), (HoldStatus::Lost, None), "renewing after expiry is too late");
    // A holder without tokens (a compatibility profile) is matched on its id alone.
    let token = acquire(&mut sim, "db", "a").token.unwrap();
    let untokened = sim.run(|v, ctx| plan_renew(v, "db", Holder { holder_id: "a", token: None }, TTL, ctx));
    assert_eq!(untokened.status, HoldStatus::Ok);
    assert!(token > 1);
}

#[test]
fn release_frees_the_resource_at_once() {
    let mut sim = Sim::new();
    let token = acquire(&mut sim, "db", "a").token.unwrap();
    let stale = sim.run(|v, ctx| plan_release(v, "db", by("a", token - 1), ctx));
    assert_eq!(stale.status, HoldStatus::Lost);
    let released = sim.run(|v, ctx| plan_release(v, "db", by("a", token), ctx));
    assert_eq!(released.status, HoldStatus::Ok);
    let twice = sim.run(|v, ctx| plan_release(v, "db", by("a", token), ctx));
    assert_eq!(twice.status, HoldStatus::Lost);
    let b = acquire(&mut sim, "db", "b");
    assert_eq!(b.status, AcquireStatus::Acquired);
    assert!(b.token.unwrap() > token);
    assert_eq!(sim.ops_of("db"), vec![HistoryOp::Grant, HistoryOp::Release, HistoryOp::Grant]);
}

#[test]
fn fences_refuse_stale_tokens() {
    let mut sim = Sim::new();
    let old = acquire(&mut sim, "job", "a").token.unwrap();
    let fence = |sim: &Sim, token| sim.read(|v| check_fence(v, "job", token, sim.now));
    assert_eq!(fence(&sim, old), Ok(()));
    assert_eq!(fence(&sim, old + 1), Err(Fenced::Superseded { holder: "a".into() }));
    sim.advance(1_000);
    assert_eq!(fence(&sim, old), Err(Fenced::NotHeld), "an expired lease fences its holder");
    let new = acquire(&mut sim, "job", "b").token.unwrap();
    assert_eq!(fence(&sim, old), Err(Fenced::Superseded { holder: "b".into() }));
    assert_eq!(fence(&sim, new), Ok(()));

    // A write guarded by the old token is refused; one with the new token lands.
    let guarded =
        |token| SetRequest { lease: Some("job".into()), token: Some(token), ..SetRequest::new("out", json!(1)) };
    let refused = sim.run(|v, ctx| plan_set(v, &guarded(old), ctx));
    assert_eq!(refused.status, WriteStatus::Fenced);
    assert!(
        refused.message.as_deref().is_some_and(|m| m.contains("stale") && m.contains("`b`")),
        "{:?}",
        refused.message
    );
    assert!(sim.read(|v| v.get("out")).is_none(), "nothing was written");
    let written = sim.run(|v, ctx| plan_set(v, &guarded(new), ctx));
    assert_eq!(written.status, WriteStatus::Ok);
}

#[test]
fn reads_show_holders_but_not_tokens() {
    let mut sim = Sim::new();
    acquire(&mut sim, "a/1", "x");
    acquire(&mut sim, "a/2", "y");
    acquire(&mut sim, "b/1", "z");
    let got = sim.read(|v| get(v, "a/1", sim.now, 3));
    assert_eq!((got.status, got.holder.as_deref()), (LeaseState::Held, Some("x")));
    let page = sim.read(|v| list(v, "a/", None, 1, sim.now, 3));
    assert_eq!(page.leases.iter().map(|l| l.resource_id.as_str()).collect::<Vec<_>>(), vec!["a/1"]);
    let after = crate::cursor::decode("cursor", page.next_cursor.as_deref().unwrap()).unwrap();
    let rest = sim.read(|v| list(v, "a/", Some(&after), 10, sim.now, 3));
    assert_eq!(rest.leases.iter().map(|l| l.resource_id.as_str()).collect::<Vec<_>>(), vec!["a/2"]);
    assert_eq!(rest.next_cursor, None);
    sim.advance(1_000);
    assert_eq!(sim.read(|v| get(v, "a/1", sim.now, 3)).status, LeaseState::Free);
    assert!(sim.read(|v| list(v, "", None, 10, sim.now, 3)).leases.is_empty());
    assert!(!serde_json::to_string(&got).unwrap().contains("token"));
}

mod properties {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::expire::plan_expire;

    #[derive(Debug, Clone)]
    enum Op {
        Acquire { resource: usize, holder: usize, ttl: u64 },
        Renew { resource: usize, holder: usize, ttl: u64 },
        Release { resource: usize, holder: usize },
        Advance(u64),
        Sweep,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..2usize, 0..3usize, 1..1500u64).prop_map(|(resource, holder, ttl)| Op::Acquire { resource, holder, ttl }),
            3 => (0..2usize, 0..3usize, 1..1500u64).prop_map(|(resource, holder, ttl)| Op::Renew { resource, holder, ttl }),
            2 => (0..2usize, 0..3usize).prop_map(|(resource, holder)| Op::Release { resource, holder }),
            3 => (0..1200u64).prop_map(Op::Advance),
            1 => Just(Op::Sweep),
        ]
    }

    /// What each holder believes: the token it was granted and until when it holds it.
    type Beliefs = BTreeMap<(usize, usize), (u64, UnixMillis)>;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
        #[test]
        fn one_holder_at_a_time_and_tokens_only_grow(ops in proptest::collection::vec(op(), 1..80)) {
            let mut sim = Sim::new();
            let mut beliefs: Beliefs = BTreeMap::new();
            let mut last_grant = 0u64;
            for op in ops {
                match op {
                    Op::Acquire { resource, holder, ttl } => {
                        let r = format!("r{resource}");
                        let h = format!("h{holder}");
                        let got = sim.run(|v, ctx| plan_acquire(v, &r, &h, Some(ttl), ctx));
                        if got.status == AcquireStatus::Acquired {
                            let token = got.token.unwrap();
                            let kept = beliefs.get(&(resource, holder)).is_some_and(|(t, until)| *t == token && *until > sim.now);
                            if !kept {
                                // A fresh grant: nobody else may believe they hold it now.
                                for ((res, other), (_, until)) in &beliefs {
                                    prop_assert!(*res != resource || *other == holder || *until <= sim.now,
                                        "h{holder} granted r{resource} while h{other} holds it until {until:?}");
                                }
                                prop_assert!(token > last_grant, "token {token} after {last_grant}");
                                last_grant = token;
                            }
                            beliefs.retain(|(res, _), _| *res != resource);
                            beliefs.insert((resource, holder), (token, sim.now.plus_millis(ttl)));
                        }
                    }
                    Op::Renew { resource, holder, ttl } => {
                        let Some(&(token, _)) = beliefs.get(&(resource, holder)) else { continue };
                        let (r, h) = (format!("r{resource}"), format!("h{holder}"));
                        let got = sim.run(|v, ctx| plan_renew(v, &r, Holder { holder_id: &h, token: Some(token) }, Some(ttl), ctx));
                        if got.status == HoldStatus::Ok {
                            prop_assert!(beliefs[&(resource, holder)].1 > sim.now, "renewed a lease that had expired");
                            beliefs.insert((resource, holder), (token, sim.now.plus_millis(ttl)));
                        } else {
                            beliefs.remove(&(resource, holder));
                        }
                    }
                    Op::Release { resource, holder } => {
                        let Some(&(token, _)) = beliefs.get(&(resource, holder)) else { continue };
                        let (r, h) = (format!("r{resource}"), format!("h{holder}"));
                        sim.run(|v, ctx| plan_release(v, &r, Holder { holder_id: &h, token: Some(token) }, ctx));
                        beliefs.remove(&(resource, holder));
                    }
                    Op::Advance(ms) => sim.advance(ms),
                    Op::Sweep => {
                        let now = sim.now;
                        let due: Vec<_> = sim.view.entries.values().filter(|e| e.is_expired(now)).cloned().collect();
                        sim.run(|v, ctx| plan_expire(v, &due, ctx));
                    }
                }
            }
        }
    }
}
