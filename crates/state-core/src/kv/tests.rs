use serde_json::{Value, json};

use super::*;
use crate::entry::{Entry, EventKind};
use crate::expire::plan_expire;
use crate::ops::kv::{DeleteRequest, SetRequest};
use crate::ops::txn::{Compare, TxnRequest};
use crate::ops::{DeleteStatus, ReadStatus, WriteStatus};
use crate::plan::{Mutation, Plan, WriteContext};
use crate::time::UnixMillis;
use crate::view::MemoryView;

/// A store holding at most `entry`.
fn holding(entry: Option<Entry>) -> MemoryView {
    let mut view = MemoryView::default();
    if let Some(entry) = entry {
        view.entries.insert(entry.key.clone(), entry);
    }
    view
}

fn ok<T>(result: Result<T, std::convert::Infallible>) -> T {
    match result {
        Ok(value) => value,
        Err(never) => match never {},
    }
}

const NOW: UnixMillis = UnixMillis(1_000_000);

fn ctx(revision: u64) -> WriteContext {
    WriteContext { now: NOW, revision }
}

fn stored(key: &str, value: Value, version: u64, expires_at: Option<u64>) -> Entry {
    Entry {
        key: key.into(),
        value,
        version,
        create_revision: 2,
        mod_revision: 7,
        updated_at: UnixMillis(500),
        expires_at: expires_at.map(UnixMillis),
        agent_id: None,
    }
}

fn set(key: &str, value: Value, expected: Option<u64>) -> SetRequest {
    SetRequest { expected_version: expected, agent_id: Some("agent-1".into()), ..SetRequest::new(key, value) }
}

fn kinds<T>(plan: &Plan<T>) -> Vec<(EventKind, u64)> {
    plan.events.iter().map(|e| (e.kind, e.version)).collect()
}

struct SetCase {
    name: &'static str,
    stored: Option<Entry>,
    expected: Option<u64>,
    status: WriteStatus,
    /// The version the result reports: the new one, or the current one on conflict.
    version: u64,
    events: Vec<(EventKind, u64)>,
}

fn check_set(case: SetCase) {
    let SetCase { name, stored, expected, status, version, events } = case;
    let plan = ok(plan_set(&holding(stored.clone()), &set("k", json!("new"), expected), &ctx(10)));
    assert_eq!(plan.outcome.status, status, "{name}");
    assert_eq!(plan.outcome.version, version, "{name}");
    assert_eq!(kinds(&plan), events, "{name}");
    assert_eq!(plan.commits(), status == WriteStatus::Ok, "{name}");
    let revision = if plan.commits() { 11 } else { 10 };
    assert_eq!(plan.outcome.revision, revision, "{name}");
    if status == WriteStatus::Conflict {
        let current = stored.filter(|e| !e.is_expired(NOW)).map(|e| e.value);
        assert_eq!(plan.outcome.value, current, "{name}: conflict carries the current value");
        assert_eq!(plan.outcome.expected_version, expected, "{name}");
    }
}

#[test]
fn set_rules() {
    use EventKind::{Expired, Put};
    use WriteStatus::{Conflict, Ok};
    let live = || Some(stored("k", json!("old"), 3, None));
    let expired = || Some(stored("k", json!("old"), 3, Some(NOW.0)));
    let about_to_expire = || Some(stored("k", json!("old"), 3, Some(NOW.0 + 1)));
    let cases = [
        SetCase { name: "create", stored: None, expected: None, status: Ok, version: 1, events: vec![(Put, 1)] },
        SetCase {
            name: "create only",
            stored: None,
            expected: Some(0),
            status: Ok,
            version: 1,
            events: vec![(Put, 1)],
        },
        SetCase {
            name: "create only on existing",
            stored: live(),
            expected: Some(0),
            status: Conflict,
            version: 3,
            events: vec![],
        },
        SetCase {
            name: "update unconditionally",
            stored: live(),
            expected: None,
            status: Ok,
            version: 4,
            events: vec![(Put, 4)],
        },
        SetCase { name: "cas hit", stored: live(), expected: Some(3), status: Ok, version: 4, events: vec![(Put, 4)] },
        SetCase { name: "cas stale", stored: live(), expected: Some(2), status: Conflict, version: 3, events: vec![] },
        SetCase { name: "cas ahead", stored: live(), expected: Some(4), status: Conflict, version: 3, events: vec![] },
        SetCase {
            name: "cas on missing",
            stored: None,
            expected: Some(1),
            status: Conflict,
            version: 0,
            events: vec![],
        },
        SetCase {
            name: "expired at exactly now is gone",
            stored: expired(),
            expected: None,
            status: Ok,
            version: 1,
            events: vec![(Expired, 3), (Put, 1)],
        },
        SetCase {
            name: "expired key can be created",
            stored: expired(),
            expected: Some(0),
            status: Ok,
            version: 1,
            events: vec![(Expired, 3), (Put, 1)],
        },
        SetCase {
            name: "expired key has no old version",
            stored: expired(),
            expected: Some(3),
            status: Conflict,
            version: 0,
            events: vec![],
        },
        SetCase {
            name: "one ms before expiry it is live",
            stored: about_to_expire(),
            expected: Some(3),
            status: Ok,
            version: 4,
            events: vec![(Put, 4)],
        },
    ];
    for case in cases {
        check_set(case);
    }
}

#[test]
fn set_stamps_entry_and_event() {
    let mut req = set("k", json!({"a": 1}), None);
    req.ttl_seconds = Some(1.5);
    let plan = ok(plan_set(&holding(Some(stored("k", json!(0), 3, None))), &req, &ctx(10)));
    let [Mutation::Put(entry)] = plan.mutations.as_slice() else { panic!("one put expected: {:?}", plan.mutations) };
    assert_eq!((entry.version, entry.create_revision, entry.mod_revision), (4, 2, 11));
    assert_eq!(entry.expires_at, Some(UnixMillis(NOW.0 + 1500)));
    assert_eq!(entry.updated_at, NOW);
    assert_eq!(entry.agent_id.as_deref(), Some("agent-1"));
    let event = &plan.events[0];
    assert_eq!((event.revision, event.time, event.value.clone()), (11, NOW, Some(json!({"a": 1}))));

    let created = ok(plan_set(&holding(None), &req, &ctx(10)));
    let [Mutation::Put(entry)] = created.mutations.as_slice() else { panic!() };
    assert_eq!((entry.create_revision, entry.mod_revision), (11, 11));
}

#[test]
fn rewriting_without_ttl_clears_it() {
    let plan =
        ok(plan_set(&holding(Some(stored("k", json!(0), 1, Some(NOW.0 + 10)))), &set("k", json!(1), None), &ctx(1)));
    let [Mutation::Put(entry)] = plan.mutations.as_slice() else { panic!() };
    assert_eq!(entry.expires_at, None);
}

struct DeleteCase {
    name: &'static str,
    stored: Option<Entry>,
    expected: Option<u64>,
    status: DeleteStatus,
    version: u64,
    commits: bool,
}

fn check_delete(case: DeleteCase) {
    let DeleteCase { name, stored, expected, status, version, commits } = case;
    let req = DeleteRequest { key: "k".into(), expected_version: expected, ..DeleteRequest::default() };
    let plan = ok(plan_delete(&holding(stored), &req, &ctx(4)));
    assert_eq!((plan.outcome.status, plan.outcome.version, plan.commits()), (status, version, commits), "{name}");
    if commits {
        assert_eq!(plan.mutations, vec![Mutation::Delete("k".into())], "{name}");
        assert_eq!(kinds(&plan), vec![(EventKind::Delete, 3)], "{name}");
        assert_eq!(plan.outcome.revision, 5, "{name}");
    } else {
        assert_eq!(plan.outcome.revision, 4, "{name}");
    }
}

#[test]
fn delete_rules() {
    use DeleteStatus::{Conflict, NotFound, Ok};
    let live = || Some(stored("k", json!("v"), 3, None));
    let expired = || Some(stored("k", json!("v"), 3, Some(NOW.0 - 1)));
    let cases = [
        DeleteCase { name: "delete", stored: live(), expected: None, status: Ok, version: 3, commits: true },
        DeleteCase {
            name: "matching version",
            stored: live(),
            expected: Some(3),
            status: Ok,
            version: 3,
            commits: true,
        },
        DeleteCase {
            name: "stale version",
            stored: live(),
            expected: Some(2),
            status: Conflict,
            version: 3,
            commits: false,
        },
        DeleteCase { name: "missing", stored: None, expected: None, status: NotFound, version: 0, commits: false },
        DeleteCase {
            name: "missing with version",
            stored: None,
            expected: Some(3),
            status: NotFound,
            version: 0,
            commits: false,
        },
        DeleteCase { name: "expired", stored: expired(), expected: None, status: NotFound, version: 0, commits: false },
    ];
    for case in cases {
        check_delete(case);
    }
}

fn compare(value: Value) -> Compare {
    serde_json::from_value(value).expect("valid compare")
}

fn txn(compares: Vec<Value>, success: Vec<Value>, failure: Vec<Value>) -> TxnRequest {
    serde_json::from_value(json!({"compare": compares, "success": success, "failure": failure})).expect("valid txn")
}

fn world() -> MemoryView {
    let mut w = MemoryView::default();
    w.entries.insert("a".into(), stored("a", json!({"n": 1}), 2, None));
    w.entries.insert("gone".into(), stored("gone", json!(0), 5, Some(NOW.0)));
    w
}

#[test]
fn compare_rules() {
    let a = world().entries.get("a").cloned();
    let cases = [
        (json!({"key": "a", "version": 2}), a.as_ref(), true),
        (json!({"key": "a", "version": 3}), a.as_ref(), false),
        (json!({"key": "a", "op": "lt", "version": 3}), a.as_ref(), true),
        (json!({"key": "a", "op": ">", "version": 1}), a.as_ref(), true),
        (json!({"key": "a", "op": "ne", "version": 2}), a.as_ref(), false),
        (json!({"key": "a", "mod_revision": 7}), a.as_ref(), true),
        (json!({"key": "a", "exists": true}), a.as_ref(), true),
        (json!({"key": "a", "value": {"n": 1}}), a.as_ref(), true),
        (json!({"key": "a", "op": "ne", "value": {"n": 1}}), a.as_ref(), false),
        (json!({"key": "x", "version": 0}), None, true),
        (json!({"key": "x", "exists": false}), None, true),
        (json!({"key": "x", "value": null}), None, false),
        (json!({"key": "x", "op": "ne", "value": null}), None, true),
    ];
    for (spec, entry, holds) in cases {
        assert_eq!(compare(spec.clone()).holds(entry), holds, "{spec}");
    }
}

#[test]
fn malformed_compares_are_rejected_while_parsing() {
    let bad = [
        json!({"key": "a"}),
        json!({"key": "a", "version": 1, "exists": true}),
        json!({"key": "a", "op": "lt", "value": 1}),
        json!({"key": "a", "op": "ne", "exists": true}),
        json!({"key": "a", "version": 1, "color": "red"}),
    ];
    for spec in bad {
        let err = serde_json::from_value::<Compare>(spec.clone()).unwrap_err().to_string();
        assert!(!err.is_empty(), "{spec}");
    }
    let null_value = compare(json!({"key": "a", "value": null}));
    assert_eq!(serde_json::to_value(&null_value).unwrap(), json!({"key": "a", "op": "eq", "value": null}));
}

#[test]
fn txn_success_runs_in_order_under_one_revision() {
    let req = txn(
        vec![json!({"key": "a", "version": 2}), json!({"key": "none", "exists": false})],
        vec![
            json!({"op": "put", "key": "a", "value": "A3"}),
            json!({"op": "get", "key": "a"}),
            json!({"op": "put", "key": "new", "value": 1}),
            json!({"op": "delete", "key": "none"}),
        ],
        vec![],
    );
    let plan = ok(plan_txn(&world(), &req, &ctx(20)));
    let out = &plan.outcome;
    assert!(out.succeeded);
    assert_eq!(out.revision, 21);
    assert!(out.failed_compares.is_empty());
    let summary: Vec<(ReadStatus, u64, Option<Value>)> =
        out.results.iter().map(|r| (r.status, r.version, r.value.clone())).collect();
    assert_eq!(
        summary,
        vec![
            (ReadStatus::Ok, 3, None),
            (ReadStatus::Ok, 3, Some(json!("A3"))),
            (ReadStatus::Ok, 1, None),
            (ReadStatus::NotFound, 0, None),
        ]
    );
    assert!(plan.events.iter().all(|e| e.revision == 21));
    assert_eq!(plan.mutations.len(), 2);
}

#[test]
fn txn_failure_branch_reports_failed_compares() {
    let req = txn(
        vec![
            json!({"key": "a", "version": 2}),
            json!({"key": "a", "value": "nope"}),
            json!({"key": "gone", "exists": true}),
        ],
        vec![json!({"op": "put", "key": "a", "value": 0})],
        vec![json!({"op": "get", "key": "a"}), json!({"op": "get", "key": "gone"})],
    );
    let plan = ok(plan_txn(&world(), &req, &ctx(20)));
    assert!(!plan.outcome.succeeded);
    assert_eq!(plan.outcome.failed_compares, vec![1, 2]);
    assert!(!plan.commits(), "a read-only branch consumes no revision");
    assert_eq!(plan.outcome.revision, 20);
    assert_eq!(plan.outcome.results[1].status, ReadStatus::NotFound, "expired keys read as absent");
}

#[test]
fn txn_put_over_expired_key_records_the_expiry() {
    let req = txn(vec![], vec![json!({"op": "put", "key": "gone", "value": 1})], vec![]);
    let plan = ok(plan_txn(&world(), &req, &ctx(3)));
    assert_eq!(kinds(&plan), vec![(EventKind::Expired, 5), (EventKind::Put, 1)]);
}

#[test]
fn txn_rejects_two_writes_to_one_key() {
    let req =
        txn(vec![], vec![json!({"op": "put", "key": "a", "value": 1}), json!({"op": "delete", "key": "a"})], vec![]);
    let err = req.validate(&crate::Limits::default()).unwrap_err();
    assert!(err.to_string().contains("more than once"), "{err}");
}

#[test]
fn expire_removes_only_what_ran_out() {
    let candidates = vec![
        stored("a", json!(1), 1, Some(NOW.0 - 5)),
        stored("b", json!(1), 4, Some(NOW.0)),
        stored("c", json!(1), 1, Some(NOW.0 + 1)),
        stored("d", json!(1), 1, None),
    ];
    let plan = ok(plan_expire(&MemoryView::default(), &candidates, &ctx(8)));
    assert_eq!(plan.outcome, 2);
    assert_eq!(plan.mutations, vec![Mutation::Delete("a".into()), Mutation::Delete("b".into())]);
    assert_eq!(
        plan.events.iter().map(|e| (e.kind, e.revision, e.time)).collect::<Vec<_>>(),
        vec![(EventKind::Expired, 9, UnixMillis(NOW.0 - 5)), (EventKind::Expired, 9, NOW),]
    );
}
