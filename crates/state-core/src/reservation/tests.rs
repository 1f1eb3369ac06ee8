use super::*;
use crate::ops::history::HistoryOp;
use crate::testing::Sim;

const TTL: u64 = 1_000;

fn reserve(sim: &mut Sim, holder: &str, patterns: &[&str], exclusive: bool) -> ReserveResult {
    let patterns: Vec<String> = patterns.iter().map(|p| (*p).to_owned()).collect();
    let globs: Vec<Glob> = patterns.iter().map(|p| Glob::parse(p).unwrap()).collect();
    let wanted = Wanted {
        scope: "repo",
        holder_id: holder,
        patterns: &patterns,
        globs: &globs,
        exclusive,
        reason: Some("refactor"),
        ttl_millis: TTL,
    };
    sim.run(|v, ctx| plan_reserve(v, &wanted, ctx))
}

fn check_path(sim: &Sim, holder: &str, path: &str) -> PathCheckResult {
    sim.read(|v| check(v, "repo", holder, path, sim.now, sim.view.revision))
}

#[test]
fn an_overlapping_exclusive_reservation_is_refused_naming_the_holder() {
    let mut sim = Sim::new();
    let a = reserve(&mut sim, "a", &["src/**"], true);
    assert_eq!(a.status, ReserveStatus::Granted);
    let a_id = a.reservation.unwrap().reservation_id;

    let b = reserve(&mut sim, "b", &["docs/*.md", "src/lib.rs"], true);
    assert_eq!(b.status, ReserveStatus::Conflict);
    assert!(b.reservation.is_none(), "a refused request reserves nothing, not even its free patterns");
    let conflict = &b.conflicts[0];
    assert_eq!((conflict.reservation.holder.as_str(), conflict.reservation.reservation_id), ("a", a_id));
    assert_eq!(conflict.reservation.reason.as_deref(), Some("refactor"));
    assert_eq!(conflict.overlapping, vec![["src/lib.rs".to_owned(), "src/**".to_owned()]]);

    assert_eq!(reserve(&mut sim, "b", &["docs/*.md"], true).status, ReserveStatus::Granted, "apart is fine");
    assert_eq!(reserve(&mut sim, "a", &["src/lib.rs"], true).status, ReserveStatus::Granted, "never with oneself");
}

#[test]
fn shared_reservations_coexist_but_not_with_an_exclusive_one() {
    let mut sim = Sim::new();
    assert_eq!(reserve(&mut sim, "a", &["src/**"], false).status, ReserveStatus::Granted);
    assert_eq!(reserve(&mut sim, "b", &["src/*.rs"], false).status, ReserveStatus::Granted);
    assert_eq!(reserve(&mut sim, "c", &["src/main.rs"], true).status, ReserveStatus::Conflict);
    let conflicts = reserve(&mut sim, "c", &["src/main.rs"], true).conflicts;
    let holders: Vec<_> = conflicts.iter().map(|c| c.reservation.holder.as_str()).collect();
    assert_eq!(holders, ["a", "b"], "every reservation in the way is named");
}

#[test]
fn check_says_whether_a_path_may_be_written() {
    let mut sim = Sim::new();
    reserve(&mut sim, "a", &["src/*.rs"], true);
    reserve(&mut sim, "b", &["docs/"], false);
    let blocked = check_path(&sim, "b", "src/lib.rs");
    assert!(!blocked.allowed);
    assert_eq!(blocked.blocking[0].holder, "a");
    let own = check_path(&sim, "a", "src/lib.rs");
    assert!(own.allowed && own.yours.len() == 1, "one's own reservation does not block");
    assert!(check_path(&sim, "a", "src/a/lib.rs").allowed, "`*` stops at a slash");
    assert!(check_path(&sim, "a", "docs/x.md").allowed, "a shared reservation does not block writes");
}

#[test]
fn reservations_expire_renew_and_release() {
    let mut sim = Sim::new();
    let id = reserve(&mut sim, "a", &["src/**"], true).reservation.unwrap().reservation_id;
    sim.advance(TTL - 1);
    let renewed = sim.run(|v, ctx| plan_renew(v, "repo", "a", id, TTL, ctx));
    assert_eq!(renewed.status, ReservationStatus::Ok);
    sim.advance(TTL - 1);
    assert_eq!(reserve(&mut sim, "b", &["src/x"], true).status, ReserveStatus::Conflict, "renewed: still held");
    sim.advance(1);
    assert_eq!(reserve(&mut sim, "b", &["src/x"], true).status, ReserveStatus::Granted, "expired: free");
    let late = sim.run(|v, ctx| plan_renew(v, "repo", "a", id, TTL, ctx));
    assert_eq!(late.status, ReservationStatus::Lost);

    reserve(&mut sim, "c", &["a"], true);
    reserve(&mut sim, "c", &["b"], true);
    let all = sim.run(|v, ctx| plan_release(v, "repo", "c", None, ctx));
    assert_eq!((all.status, all.reservation_ids.len()), (ReservationStatus::Ok, 2), "every one of c's");
    let again = sim.run(|v, ctx| plan_release(v, "repo", "c", None, ctx));
    assert_eq!(again.status, ReservationStatus::Lost);
    let listed = sim.read(|v| list(v, "repo", None, sim.now, 0));
    let holders: Vec<_> = listed.reservations.iter().map(|r| r.holder.as_str()).collect();
    assert_eq!(holders, ["b"]);
    assert_eq!(sim.ops_of("repo").first(), Some(&HistoryOp::Grant));
}

#[test]
fn scopes_are_apart() {
    let mut sim = Sim::new();
    reserve(&mut sim, "a", &["**"], true);
    let patterns = vec!["src/lib.rs".to_owned()];
    let globs = vec![Glob::parse("src/lib.rs").unwrap()];
    let other = Wanted {
        scope: "other-repo",
        holder_id: "b",
        patterns: &patterns,
        globs: &globs,
        exclusive: true,
        reason: None,
        ttl_millis: TTL,
    };
    assert_eq!(sim.run(|v, ctx| plan_reserve(v, &other, ctx)).status, ReserveStatus::Granted);
}

/// Random reserves, releases and clock moves by four holders over a handful of overlapping
/// patterns: at no point are two live reservations of different holders, one of them
/// exclusive, able to match the same path; and a refusal always names one that would.
#[test]
fn random_histories_never_grant_two_conflicting_reservations() {
    let patterns = ["src/**", "src/*.rs", "src/lib.rs", "docs/", "*.md", "**/*.md", "tests/a?.rs"];
    let probes = ["src/lib.rs", "src/a/b.rs", "docs/x.md", "README.md", "tests/ab.rs", "src/x.md"];
    for seed in 1..=30u64 {
        let mut rng = crate::testing::Rng::new(seed);
        let mut next = |n: u64| rng.below(n);
        let mut sim = Sim::new();
        for step in 0..200 {
            let holder = format!("h{}", next(4));
            match next(5) {
                0..=2 => {
                    let picked: Vec<&str> =
                        (0..=next(2)).map(|_| patterns[next(patterns.len() as u64) as usize]).collect();
                    let result = reserve(&mut sim, &holder, &picked, next(3) != 0);
                    if result.status == ReserveStatus::Conflict {
                        assert!(
                            !result.conflicts.is_empty(),
                            "seed {seed} step {step}: a refusal names what is in the way"
                        );
                    }
                }
                3 => {
                    sim.run(|v, ctx| plan_release(v, "repo", &holder, None, ctx));
                }
                _ => sim.advance(next(600)),
            }
            let live = sim.read(|v| list(v, "repo", None, sim.now, 0)).reservations;
            for (i, a) in live.iter().enumerate() {
                for b in &live[i + 1..] {
                    if a.holder == b.holder || !(a.exclusive || b.exclusive) {
                        continue;
                    }
                    for probe in probes {
                        let covers =
                            |r: &ReservationInfo| r.patterns.iter().any(|p| Glob::parse(p).unwrap().matches(probe));
                        assert!(
                            !(covers(a) && covers(b)),
                            "seed {seed} step {step}: {} and {} both hold {probe}",
                            a.holder,
                            b.holder
                        );
                    }
                }
            }
        }
    }
}

/// The attacker's request (issue 30): many shared reservations of 32 long `**` patterns, then
/// one exclusive request of 32 more that overlaps them all. The answer used to name every
/// reservation with every pair (541 MB for 1,000); it is now bounded whatever is stored.
#[test]
fn a_refusal_against_many_wide_reservations_is_bounded_in_size() {
    let mut sim = Sim::new();
    let long = |holder: usize, i: usize| format!("{}/**/{holder}-{i}-{}", "d".repeat(100), "x".repeat(100));
    // As many as a scope holds: 64 reservations of 32 patterns.
    for holder in 0..64 {
        let patterns: Vec<String> = (0..32).map(|i| long(holder, i)).collect();
        let refs: Vec<&str> = patterns.iter().map(String::as_str).collect();
        assert_eq!(reserve(&mut sim, &format!("h{holder}"), &refs, false).status, ReserveStatus::Granted);
    }
    let wide: Vec<String> = (0..32).map(|i| format!("{}/**/*{i}*", "d".repeat(100))).collect();
    let refs: Vec<&str> = wide.iter().map(String::as_str).collect();
    let refused = reserve(&mut sim, "attacker", &refs, true);
    assert_eq!(refused.status, ReserveStatus::Conflict);
    assert_eq!(refused.conflicts.len(), MAX_CONFLICTS_LISTED);
    assert!(refused.more_conflicts, "it says others are in the way too");
    for conflict in &refused.conflicts {
        assert!(conflict.overlapping.len() <= MAX_PAIRS_LISTED);
        assert!(conflict.overlapping_total >= conflict.overlapping.len());
    }
    let bytes = serde_json::to_vec(&refused).unwrap().len();
    assert!(bytes < 200 * 1024, "the refusal is {bytes} bytes");
}

#[test]
fn a_scope_and_a_holder_have_ceilings() {
    let mut sim = Sim::new();
    for i in 0..MAX_RESERVATIONS_PER_HOLDER {
        assert_eq!(reserve(&mut sim, "a", &[&format!("f{i}")], true).status, ReserveStatus::Granted);
    }
    let refused = reserve(&mut sim, "a", &["one-more"], true);
    assert_eq!(refused.status, ReserveStatus::LimitReached);
    assert!(refused.limit.as_deref().is_some_and(|l| l.contains("you hold 50 ")), "{:?}", refused.limit);
    for holder in 1..MAX_RESERVATIONS_PER_SCOPE / MAX_RESERVATIONS_PER_HOLDER {
        for i in 0..MAX_RESERVATIONS_PER_HOLDER {
            reserve(&mut sim, &format!("h{holder}"), &[&format!("g{holder}/{i}")], true);
        }
    }
    let refused = reserve(&mut sim, "newcomer", &["free"], true);
    assert_eq!(refused.status, ReserveStatus::LimitReached);
    assert!(refused.limit.as_deref().is_some_and(|l| l.contains("the scope holds 500 ")), "{:?}", refused.limit);
    // Released ones make room again.
    assert_eq!(sim.run(|v, ctx| plan_release(v, "repo", "a", None, ctx)).status, ReservationStatus::Ok);
    assert_eq!(reserve(&mut sim, "newcomer", &["free"], true).status, ReserveStatus::Granted);
}

#[test]
fn a_path_check_names_at_most_twenty_of_each() {
    let mut sim = Sim::new();
    for holder in 0..30 {
        reserve(&mut sim, &format!("h{holder}"), &["src/**"], false);
    }
    for i in 0..30 {
        reserve(&mut sim, "me", &[&format!("src/*{i}*")], false);
        reserve(&mut sim, "me", &["src/**"], false);
    }
    let checked = check_path(&sim, "me", "src/a.rs");
    assert!(checked.allowed, "shared reservations block nobody");
    assert_eq!(checked.yours.len(), MAX_COVERING_LISTED);
    assert!(checked.truncated);
}

#[test]
fn a_scope_holds_at_most_2048_patterns() {
    let mut sim = Sim::new();
    for holder in 0..64 {
        let patterns: Vec<String> = (0..32).map(|i| format!("h{holder}/f{i}")).collect();
        let refs: Vec<&str> = patterns.iter().map(String::as_str).collect();
        assert_eq!(reserve(&mut sim, &format!("h{holder}"), &refs, true).status, ReserveStatus::Granted);
    }
    let refused = reserve(&mut sim, "late", &["elsewhere"], true);
    assert_eq!(refused.status, ReserveStatus::LimitReached);
    assert!(refused.limit.as_deref().is_some_and(|l| l.contains("2048")), "{:?}", refused.limit);
}
