//! The stories every storage backend must tell the same way, each a public async function
//! over a [`BackendFactory`]; [`crate::conformance_suite!`] turns them into tests.

use serde_json::json;
use state_core::ops::history::HistoryOp;
use state_core::ops::history::HistoryRequest;
use state_core::ops::kv::{BatchGetRequest, DeleteRequest, GetRequest, ListRequest, SetRequest};
use state_core::ops::{DeleteStatus, ReadStatus, WriteStatus};

use super::{BackendFactory, Store, T0, counter, history_since, lease, set_req, txn};
use crate::{EngineConfig, EngineError};

pub async fn versions_and_revisions(backend: &dyn BackendFactory) {
    let s = Store::new(backend);
    assert_eq!(s.revision().await, 0);
    let a1 = s.set("a", json!(1)).await;
    assert_eq!((a1.status, a1.version, a1.revision), (WriteStatus::Ok, 1, 1));
    let b1 = s.set("b", json!("x")).await;
    assert_eq!((b1.version, b1.revision), (1, 2));
    let a2 = s.set("a", json!({"deep": [1, 2]})).await;
    assert_eq!((a2.version, a2.revision), (2, 3));

    let got = s.get("a").await;
    assert_eq!(got.status, ReadStatus::Ok);
    assert_eq!(got.value, Some(json!({"deep": [1, 2]})));
    assert_eq!((got.version, got.revision, got.create_revision, got.mod_revision), (2, 3, Some(1), Some(3)));
    assert_eq!(got.updated_at.as_deref(), Some("2026-11-21T00:00:00.000Z"));
    let missing = s.get("nope").await;
    assert_eq!((missing.status, missing.version, missing.revision), (ReadStatus::NotFound, 0, 3));
}

pub async fn conditional_writes(backend: &dyn BackendFactory) {
    let s = Store::new(backend);
    let created = s.engine.set(set_req("k", counter(0), Some(0))).await.unwrap();
    assert_eq!((created.status, created.version), (WriteStatus::Ok, 1));
    let again = s.engine.set(set_req("k", counter(9), Some(0))).await.unwrap();
    assert_eq!((again.status, again.version, again.value.clone()), (WriteStatus::Conflict, 1, Some(counter(0))));
    assert_eq!(again.revision, 1, "a conflict reports the current revision and consumes none");

    let hit = s.cas("k", counter(1), 1).await;
    assert_eq!((hit.status, hit.version, hit.revision), (WriteStatus::Ok, 2, 2));
    let stale = s.cas("k", counter(99), 1).await;
    assert_eq!((stale.status, stale.version, stale.expected_version), (WriteStatus::Conflict, 2, Some(1)));
    assert_eq!(stale.value, Some(counter(1)), "conflict carries the current value");
    // The conflict tells the caller exactly what to retry with.
    let retry = s.cas("k", counter(2), stale.version).await;
    assert_eq!((retry.status, retry.version), (WriteStatus::Ok, 3));

    let on_missing = s.cas("missing", json!(1), 4).await;
    assert_eq!((on_missing.status, on_missing.version, on_missing.value), (WriteStatus::Conflict, 0, None));
    assert_eq!(s.get("k").await.value, Some(counter(2)));
    assert_eq!(s.revision().await, 3);
}

pub async fn delete_and_recreate(backend: &dyn BackendFactory) {
    let s = Store::new(backend);
    s.set("k", json!(1)).await;
    s.set("k", json!(2)).await;
    let del = |expected| DeleteRequest {
        key: "k".into(),
        expected_version: expected,
        agent_id: Some("janitor".into()),
        ..DeleteRequest::default()
    };
    let stale = s.engine.delete(del(Some(1))).await.unwrap();
    assert_eq!((stale.status, stale.version, stale.value), (DeleteStatus::Conflict, 2, Some(json!(2))));
    let gone = s.engine.delete(del(Some(2))).await.unwrap();
    assert_eq!((gone.status, gone.version, gone.revision), (DeleteStatus::Ok, 2, 3));
    let twice = s.engine.delete(del(None)).await.unwrap();
    assert_eq!((twice.status, twice.revision), (DeleteStatus::NotFound, 3));
    assert_eq!(s.get("k").await.status, ReadStatus::NotFound);
    let reborn = s.set("k", json!(3)).await;
    assert_eq!((reborn.version, reborn.revision), (1, 4), "a re-created key starts again at version 1");
    assert_eq!(s.get("k").await.create_revision, Some(4));
}

pub async fn ttl_expiry(backend: &dyn BackendFactory) {
    let s = Store::new(backend);
    let mut req = set_req("session", json!("warm"), None);
    req.ttl_seconds = Some(1.5);
    s.engine.set(req).await.unwrap();
    s.set("forever", json!(1)).await;
    let listed = |s: &Store| {
        let engine = s.engine.clone();
        async move {
            let page = engine.list(ListRequest::default()).await.unwrap();
            page.entries.into_iter().map(|e| e.key).collect::<Vec<_>>()
        }
    };
    assert_eq!(s.get("session").await.expires_at.as_deref(), Some("2026-11-21T00:00:01.500Z"));
    // The sweeper wakes for the soonest stored expiry.
    assert_eq!(s.engine.next_expiry().await.unwrap(), Some(T0.plus_millis(1500)));

    s.clock.advance_millis(1499);
    assert_eq!(s.get("session").await.status, ReadStatus::Ok, "still live 1 ms before expiry");
    s.clock.advance_millis(1);
    assert_eq!(s.get("session").await.status, ReadStatus::NotFound, "invisible the instant it expires");
    assert_eq!(listed(&s).await, vec!["forever"]);
    let batch = s.engine.batch_get(BatchGetRequest { keys: vec!["session".into()] }).await.unwrap();
    assert_eq!(batch.entries[0].status, ReadStatus::NotFound);

    // Reads hide it before the sweeper runs; the sweep then records the expiry.
    assert_eq!(s.engine.expire_due(100).await.unwrap(), 1);
    assert_eq!(s.engine.expire_due(100).await.unwrap(), 0);
    assert_eq!(s.engine.next_expiry().await.unwrap(), None, "nothing left to wake for");
    let history = s.engine.history(HistoryRequest { key: Some("session".into()), ..Default::default() }).await.unwrap();
    let ops: Vec<_> = history.events.iter().map(|e| (e.op, e.version, e.time.as_str())).collect();
    assert_eq!(
        ops,
        vec![(HistoryOp::Put, 1, "2026-11-21T00:00:00.000Z"), (HistoryOp::Expired, 1, "2026-11-21T00:00:01.500Z"),]
    );
    assert_eq!(s.engine.health().await.unwrap().keys, Some(1));

    // An expired key can be created again, starting over at version 1.
    let recreated = s.engine.set(set_req("session", json!("new"), Some(0))).await.unwrap();
    assert_eq!((recreated.status, recreated.version), (WriteStatus::Ok, 1));
}

pub async fn transactions_are_all_or_nothing(backend: &dyn BackendFactory) {
    let s = Store::new(backend);
    s.set("acct/a", json!(100)).await;
    s.set("acct/b", json!(0)).await;
    let transfer = |a_version: u64| {
        txn(json!({
            "compare": [{"key": "acct/a", "version": a_version}, {"key": "acct/b", "exists": true}],
            "success": [
                {"op": "put", "key": "acct/a", "value": 60},
                {"op": "put", "key": "acct/b", "value": 40},
                {"op": "put", "key": "log/1", "value": "moved 40"},
            ],
            "failure": [{"op": "get", "key": "acct/a"}],
            "agent_id": "bank",
        }))
    };
    let ok = s.engine.txn(transfer(1)).await.unwrap();
    assert!(ok.succeeded);
    assert_eq!(ok.revision, 3, "one revision for the whole transaction");
    assert_eq!(ok.results.iter().map(|r| r.version).collect::<Vec<_>>(), vec![2, 2, 1]);
    assert_eq!(s.get("acct/b").await.mod_revision, Some(3));

    let replay = s.engine.txn(transfer(1)).await.unwrap();
    assert!(!replay.succeeded);
    assert_eq!(replay.failed_compares, vec![0]);
    assert_eq!(replay.results[0].value, Some(json!(60)));
    assert_eq!(replay.revision, 3, "the failure branch only read");
    assert_eq!(s.revision().await, 3);

    let history = s.engine.history(HistoryRequest::default()).await.unwrap();
    let rev3: Vec<_> = history.events.iter().filter(|e| e.revision == 3).map(|e| e.key.as_str()).collect();
    assert_eq!(rev3, vec!["acct/a", "acct/b", "log/1"]);
    assert!(history.events.iter().filter(|e| e.revision == 3).all(|e| e.agent_id.as_deref() == Some("bank")));

    let dup = txn(json!({"success": [{"op": "put", "key": "x", "value": 1}, {"op": "delete", "key": "x"}]}));
    assert!(matches!(s.engine.txn(dup).await, Err(EngineError::Invalid(_))));
    assert_eq!(s.get("x").await.status, ReadStatus::NotFound);
}

pub async fn history_and_reads_in_the_past(backend: &dyn BackendFactory) {
    let s = Store::new(backend);
    s.set("doc", json!("v1")).await; // rev 1
    s.set("other", json!(0)).await; // rev 2
    s.set("doc", json!("v2")).await; // rev 3
    s.engine.delete(DeleteRequest { key: "doc".into(), ..Default::default() }).await.unwrap(); // rev 4
    s.set("doc", json!("v1-again")).await; // rev 5: version 1 of a new lifetime

    let at = |version, revision| GetRequest { key: "doc".into(), version, revision };
    let v2 = s.engine.get(at(Some(2), None)).await.unwrap();
    assert_eq!((v2.status, v2.value.clone(), v2.mod_revision), (ReadStatus::Ok, Some(json!("v2")), Some(3)));
    let v1 = s.engine.get(at(Some(1), None)).await.unwrap();
    assert_eq!(v1.value, Some(json!("v1-again")), "a version is looked up in the latest lifetime that had it");
    assert_eq!(s.engine.get(at(Some(7), None)).await.unwrap().status, ReadStatus::NotFound);

    let expect = [(1, Some("v1")), (2, Some("v1")), (3, Some("v2")), (4, None), (5, Some("v1-again"))];
    for (revision, value) in expect {
        let got = s.engine.get(at(None, Some(revision))).await.unwrap();
        assert_eq!(got.value, value.map(|v| json!(v)), "doc at revision {revision}");
    }
    let future = s.engine.get(at(None, Some(6))).await.unwrap_err();
    assert!(future.to_string().contains("ahead of the store's current revision 5"), "{future}");

    let all = s.engine.history(HistoryRequest { key: Some("doc".into()), ..Default::default() }).await.unwrap();
    let ops: Vec<_> = all.events.iter().map(|e| (e.revision, e.op, e.version)).collect();
    assert_eq!(
        ops,
        vec![(1, HistoryOp::Put, 1), (3, HistoryOp::Put, 2), (4, HistoryOp::Delete, 2), (5, HistoryOp::Put, 1)]
    );

    // Paging forward from a revision never skips or repeats an event.
    let seen: Vec<u64> = history_since(&s.engine, 0, 2).await.iter().map(|e| e.revision).collect();
    assert_eq!(seen, vec![1, 2, 3, 4, 5]);

    let latest_two = s.engine.history(HistoryRequest { n: Some(2), ..Default::default() }).await.unwrap();
    assert_eq!(latest_two.events.iter().map(|e| e.revision).collect::<Vec<_>>(), vec![4, 5]);
    assert!(latest_two.more);
    let prefixed = s.engine.history(HistoryRequest { prefix: Some("oth".into()), ..Default::default() }).await.unwrap();
    assert_eq!(prefixed.events.len(), 1);
    let no_values =
        s.engine.history(HistoryRequest { include_values: Some(false), ..Default::default() }).await.unwrap();
    assert!(no_values.events.iter().all(|e| e.value.is_none()));
}

pub async fn compaction(backend: &dyn BackendFactory) {
    let s = Store::new(backend);
    for i in 0..10 {
        s.set("k", counter(i)).await; // revisions 1..=10, versions 1..=10
    }
    assert_eq!(s.engine.compact_history(6).await.unwrap(), 6);
    let err = s.engine.history(HistoryRequest { since_revision: Some(3), ..Default::default() }).await.unwrap_err();
    assert!(matches!(err, EngineError::Compacted { compacted_revision: 6, .. }), "{err}");
    let ok = s.engine.history(HistoryRequest { since_revision: Some(6), ..Default::default() }).await.unwrap();
    assert_eq!(ok.events.first().map(|e| e.revision), Some(7));
    assert_eq!(ok.compacted_revision, 6);
    let past = s.engine.get(GetRequest { key: "k".into(), version: None, revision: Some(5) }).await.unwrap_err();
    assert!(matches!(past, EngineError::Compacted { .. }), "{past}");
    let old_version = s.engine.get(GetRequest { key: "k".into(), version: Some(3), revision: None }).await.unwrap_err();
    assert!(matches!(old_version, EngineError::Compacted { .. }), "{old_version}");
    let kept = s.engine.get(GetRequest { key: "k".into(), version: Some(8), revision: None }).await.unwrap();
    assert_eq!(kept.value, Some(counter(7)));
    assert_eq!(s.get("k").await.value, Some(counter(9)), "compaction never touches current state");
    // Compacting past the present stops at the present.
    assert_eq!(s.engine.compact_history(1_000).await.unwrap(), 10);
    assert_eq!(s.get("k").await.version, 10);
    let unchanged = s.engine.get(GetRequest { key: "k".into(), version: None, revision: Some(10) }).await;
    assert!(matches!(unchanged, Err(EngineError::Compacted { .. })));
}

pub async fn listing(backend: &dyn BackendFactory) {
    let s = Store::new(backend);
    for key in ["p/c", "p/a", "q/z", "p/b", "pa"] {
        s.set(key, json!(key)).await;
    }
    let mut ttl = set_req("p/expiring", json!(0), None);
    ttl.ttl_seconds = Some(1.0);
    s.engine.set(ttl).await.unwrap();
    s.clock.advance_millis(1000);

    let mut keys = Vec::new();
    let mut cursor = None;
    loop {
        let page = s
            .engine
            .list(ListRequest { prefix: "p/".into(), limit: Some(2), cursor, include_values: true, delimiter: None })
            .await
            .unwrap();
        assert!(page.entries.len() <= 2);
        keys.extend(page.entries.iter().map(|e| (e.key.clone(), e.value.clone())));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let expected: Vec<_> = ["p/a", "p/b", "p/c"].iter().map(|k| (k.to_string(), Some(json!(k)))).collect();
    assert_eq!(keys, expected);
    let all = s.engine.list(ListRequest::default()).await.unwrap();
    assert_eq!(all.entries.len(), 5);
    assert!(all.entries.iter().all(|e| e.value.is_none()));
    assert_eq!(all.revision, 6);
}

/// Folders: keys below the prefix that hold the delimiter are listed once, in key order among
/// the keys, and pages go on past a folder whatever it holds (a key of U+10FFFF characters,
/// one of every length) and whether a page ends on it.
pub async fn listing_folders(backend: &dyn BackendFactory) {
    let s = Store::new(backend);
    let deep = format!("t/b/{}", "\u{10FFFF}".repeat(100));
    for key in ["t/a", "t/b/1", "t/b/2/x", &deep, "t/b0", "t/c/1", "t/d", "u/x", "t/"] {
        s.set(key, json!(1)).await;
    }
    // A folder whose every key has expired is not listed.
    let mut ttl = set_req("t/gone/1", json!(0), None);
    ttl.ttl_seconds = Some(1.0);
    s.engine.set(ttl).await.unwrap();
    s.clock.advance_millis(1000);

    let list = |limit: usize, cursor: Option<String>| {
        let req = ListRequest {
            prefix: "t/".into(),
            limit: Some(limit),
            cursor,
            include_values: false,
            delimiter: Some("/".into()),
        };
        s.engine.list(req)
    };
    let whole = list(100, None).await.unwrap();
    let keys: Vec<_> = whole.entries.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(keys, ["t/", "t/a", "t/b0", "t/d"]);
    assert_eq!(whole.prefixes, ["t/b/", "t/c/"]);
    assert_eq!(whole.next_cursor, None);
    for limit in 1..=6 {
        let mut seen = Vec::new();
        let mut cursor = None;
        loop {
            let page = list(limit, cursor).await.unwrap();
            assert!(page.entries.len() + page.prefixes.len() <= limit);
            seen.extend(page.entries.iter().map(|e| e.key.clone()));
            seen.extend(page.prefixes.iter().cloned());
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        seen.sort();
        assert_eq!(seen, ["t/", "t/a", "t/b/", "t/b0", "t/c/", "t/d"], "pages of {limit}");
    }
    let inside = s
        .engine
        .list(ListRequest { prefix: "t/b/".into(), delimiter: Some("/".into()), ..ListRequest::default() })
        .await
        .unwrap();
    assert_eq!(inside.entries.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(), ["t/b/1", deep.as_str()]);
    assert_eq!(inside.prefixes, ["t/b/2/"]);
}

pub async fn batch_reads(backend: &dyn BackendFactory) {
    let s = Store::new(backend);
    s.set("a", json!(1)).await;
    s.set("b", json!(2)).await;
    let batch = s.engine.batch_get(BatchGetRequest { keys: vec!["b".into(), "zz".into(), "a".into()] }).await.unwrap();
    assert_eq!(batch.revision, 2);
    let got: Vec<_> = batch.entries.iter().map(|e| (e.key.as_str(), e.status, e.value.clone())).collect();
    assert_eq!(
        got,
        vec![
            ("b", ReadStatus::Ok, Some(json!(2))),
            ("zz", ReadStatus::NotFound, None),
            ("a", ReadStatus::Ok, Some(json!(1)))
        ]
    );
}

pub async fn bad_input_changes_nothing(backend: &dyn BackendFactory) {
    let config = EngineConfig { limits: state_core::Limits { max_value_bytes: 64 }, ..EngineConfig::default() };
    let s = Store::with_config(backend, config);
    s.set("ok", json!(1)).await;
    let bad: Vec<SetRequest> = vec![
        set_req("", json!(1), None),
        set_req(&"k".repeat(513), json!(1), None),
        set_req("bad\nkey", json!(1), None),
        set_req("big", json!("x".repeat(100)), None),
        SetRequest { ttl_seconds: Some(-1.0), ..set_req("ttl", json!(1), None) },
        SetRequest { agent_id: Some(String::new()), ..set_req("agent", json!(1), None) },
    ];
    for req in bad {
        let err = s.engine.set(req.clone()).await.unwrap_err();
        assert!(matches!(err, EngineError::Invalid(_)), "{req:?}: {err}");
    }
    let oversized_in_txn = txn(json!({"success": [{"op": "put", "key": "a", "value": "y".repeat(100)}]}));
    assert!(s.engine.txn(oversized_in_txn).await.is_err());
    assert_eq!(s.revision().await, 1, "nothing was written");
    assert_eq!(s.engine.health().await.unwrap().keys, Some(1));
}

pub async fn health_reports_the_store(backend: &dyn BackendFactory) {
    let s = Store::new(backend);
    s.set("a", json!(1)).await;
    s.clock.advance_millis(61_000);
    let health = s.engine.health().await.unwrap();
    assert_eq!(
        (health.backend.as_str(), health.revision, health.keys, health.uptime_seconds),
        (s.kind, 1, Some(1), 61)
    );
    assert!(health.database_bytes.is_none_or(|b| b > 0), "a size, when there is one, is real: {health:?}");
}

pub async fn leases_and_fenced_writes(backend: &dyn BackendFactory) {
    use state_core::ops::lease::{
        AcquireStatus, HoldStatus, LeaseGetRequest, LeaseState, ReleaseRequest, RenewRequest,
    };
    let s = Store::new(backend);
    let acquire = |holder: &str| lease("deploy", holder, 2.0);
    let a = s.engine.lease_acquire(acquire("a")).await.unwrap();
    assert_eq!((a.status, a.token), (AcquireStatus::Acquired, Some(1)));
    let held = s.engine.lease_acquire(acquire("b")).await.unwrap();
    assert_eq!((held.status, held.holder.as_str()), (AcquireStatus::Held, "a"));

    let guarded =
        |token| SetRequest { lease: Some("deploy".into()), token: Some(token), ..SetRequest::new("site", json!("v")) };
    assert_eq!(s.engine.set(guarded(1)).await.unwrap().status, WriteStatus::Ok);

    s.clock.advance_millis(1_500);
    let renew = RenewRequest {
        request_id: None,
        resource_id: "deploy".into(),
        holder_id: "a".into(),
        token: 1,
        ttl_seconds: 2.0,
    };
    assert_eq!(s.engine.lease_renew(renew.clone()).await.unwrap().status, HoldStatus::Ok);
    s.clock.advance_millis(2_000);
    assert_eq!(s.engine.lease_renew(renew).await.unwrap().status, HoldStatus::Lost, "renewed too late");
    assert_eq!(s.engine.expire_due(10).await.unwrap(), 1, "the sweeper records the lease's expiry");

    let b = s.engine.lease_acquire(acquire("b")).await.unwrap();
    let b_token = b.token.unwrap();
    assert!(b_token > 1);
    let stale = s.engine.set(guarded(1)).await.unwrap();
    assert_eq!(stale.status, WriteStatus::Fenced, "a's old token no longer writes");
    let del = s
        .engine
        .delete(DeleteRequest {
            key: "site".into(),
            lease: Some("deploy".into()),
            token: Some(1),
            ..DeleteRequest::default()
        })
        .await
        .unwrap();
    assert_eq!(del.status, DeleteStatus::Fenced);
    let fenced_txn = s
        .engine
        .txn(txn(json!({"lease": "deploy", "token": 1, "success": [{"op": "put", "key": "site", "value": "x"}]})))
        .await
        .unwrap();
    assert_eq!(fenced_txn.status, state_core::ops::txn::TxnStatus::Fenced);
    assert_eq!(s.get("site").await.value, Some(json!("v")), "no fenced write landed");
    assert_eq!(s.engine.set(guarded(b_token)).await.unwrap().status, WriteStatus::Ok);

    let release =
        ReleaseRequest { request_id: None, resource_id: "deploy".into(), holder_id: "b".into(), token: b_token };
    assert_eq!(s.engine.lease_release(release).await.unwrap().status, HoldStatus::Ok);
    let free = s.engine.lease_get(LeaseGetRequest { resource_id: "deploy".into() }).await.unwrap();
    assert_eq!(free.status, LeaseState::Free);

    let lease_history = s
        .engine
        .history(HistoryRequest {
            kind: Some(state_core::ops::history::HistoryKind::Lease),
            key: Some("deploy".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let ops: Vec<_> = lease_history.events.iter().map(|e| e.op).collect();
    use HistoryOp::*;
    assert_eq!(ops, vec![Grant, Renew, Expire, Grant, Release]);
    assert!(lease_history.events.iter().all(|e| e.kind == state_core::ops::history::HistoryKind::Lease));
}

pub async fn semaphores_grant_up_to_their_capacity(backend: &dyn BackendFactory) {
    use state_core::ops::semaphore::{
        PermitStatus, SemaphoreAcquireRequest, SemaphoreGetRequest, SemaphoreReleaseRequest, SemaphoreRenewRequest,
        SemaphoreStatus,
    };
    let s = Store::new(backend);
    let acquire = |holder: &str, wait_seconds: Option<f64>| SemaphoreAcquireRequest {
        name: "build".into(),
        holder_id: holder.into(),
        capacity: 2,
        ttl_seconds: 2.0,
        wait_seconds,
        request_id: None,
    };
    let a = s.engine.semaphore_acquire(acquire("a", None)).await.unwrap();
    let b = s.engine.semaphore_acquire(acquire("b", None)).await.unwrap();
    assert_eq!((a.status, b.status), (SemaphoreStatus::Acquired, SemaphoreStatus::Acquired));
    let (a_token, b_token) = (a.token.unwrap(), b.token.unwrap());
    assert!(b_token > a_token, "every grant a larger token");
    let full = s.engine.semaphore_acquire(acquire("c", None)).await.unwrap();
    assert_eq!(full.status, SemaphoreStatus::Full);
    let names: Vec<_> = full.holders.iter().map(|h| h.holder.as_str()).collect();
    assert_eq!(names, ["a", "b"], "a refusal names the holders");

    // A waiting acquire is granted the permit b gives back, without polling for it.
    let waiter = {
        let engine = s.engine.clone();
        let request = acquire("c", Some(30.0));
        tokio::spawn(async move { engine.semaphore_acquire(request).await })
    };
    tokio::task::yield_now().await;
    let release =
        SemaphoreReleaseRequest { name: "build".into(), holder_id: "b".into(), token: b_token, request_id: None };
    assert_eq!(s.engine.semaphore_release(release.clone()).await.unwrap().status, PermitStatus::Ok);
    let c = tokio::time::timeout(std::time::Duration::from_secs(20), waiter).await.unwrap().unwrap().unwrap();
    assert_eq!(c.status, SemaphoreStatus::Acquired, "the waiter got b's permit");
    assert!(c.token.unwrap() > b_token);
    assert_eq!(s.engine.semaphore_release(release).await.unwrap().status, PermitStatus::Lost, "released twice");

    // Permits expire on the store's clock unless renewed; the sweeper records it.
    s.clock.advance_millis(1_500);
    let renew = SemaphoreRenewRequest {
        name: "build".into(),
        holder_id: "a".into(),
        token: a_token,
        ttl_seconds: 2.0,
        request_id: None,
    };
    assert_eq!(s.engine.semaphore_renew(renew).await.unwrap().status, PermitStatus::Ok);
    s.clock.advance_millis(1_000);
    assert_eq!(s.engine.expire_due(10).await.unwrap(), 1, "c's permit expired, a's was renewed");
    let now = s.engine.semaphore_get(SemaphoreGetRequest { name: "build".into() }).await.unwrap();
    assert_eq!((now.capacity, now.available, now.holders.len()), (Some(2), Some(1), 1));
    assert_eq!(now.holders[0].holder, "a");

    let mismatch =
        s.engine.semaphore_acquire(SemaphoreAcquireRequest { capacity: 5, ..acquire("d", None) }).await.unwrap();
    assert_eq!((mismatch.status, mismatch.capacity), (SemaphoreStatus::CapacityMismatch, 2));

    let history = s
        .engine
        .history(HistoryRequest {
            kind: Some(state_core::ops::history::HistoryKind::Semaphore),
            key: Some("build".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    use HistoryOp::*;
    let ops: Vec<_> = history.events.iter().map(|e| e.op).collect();
    assert_eq!(ops, vec![Grant, Grant, Release, Grant, Renew, Expire]);
}

pub async fn path_reservations_refuse_overlaps(backend: &dyn BackendFactory) {
    use state_core::ops::reservation::{
        PathCheckRequest, ReservationListRequest, ReservationReleaseRequest, ReservationRenewRequest,
        ReservationStatus, ReserveRequest, ReserveStatus,
    };
    let s = Store::new(backend);
    let reserve = |holder: &str, patterns: &[&str], exclusive: bool| ReserveRequest {
        scope: "/repo".into(),
        holder_id: holder.into(),
        patterns: patterns.iter().map(|p| (*p).to_owned()).collect(),
        exclusive: Some(exclusive),
        ttl_seconds: 2.0,
        reason: Some("migration".into()),
        request_id: None,
    };
    let a = s.engine.paths_reserve(reserve("a", &["db/**"], true)).await.unwrap();
    assert_eq!(a.status, ReserveStatus::Granted);
    let a_id = a.reservation.unwrap().reservation_id;
    let b = s.engine.paths_reserve(reserve("b", &["db/schema.sql", "README.md"], false)).await.unwrap();
    assert_eq!(b.status, ReserveStatus::Conflict);
    assert_eq!(b.conflicts[0].reservation.holder, "a");
    assert_eq!(b.conflicts[0].overlapping, vec![["db/schema.sql".to_owned(), "db/**".to_owned()]]);
    let b = s.engine.paths_reserve(reserve("b", &["README.md"], false)).await.unwrap();
    assert_eq!(b.status, ReserveStatus::Granted);

    let check = |holder: &str, path: &str| PathCheckRequest {
        scope: "/repo".into(),
        holder_id: holder.into(),
        path: path.into(),
    };
    assert!(!s.engine.paths_check(check("b", "db/x.sql")).await.unwrap().allowed);
    assert!(s.engine.paths_check(check("a", "db/x.sql")).await.unwrap().allowed);

    s.clock.advance_millis(1_500);
    let renew = ReservationRenewRequest {
        scope: "/repo".into(),
        holder_id: "a".into(),
        reservation_id: a_id,
        ttl_seconds: 2.0,
        request_id: None,
    };
    assert_eq!(s.engine.paths_renew(renew).await.unwrap().status, ReservationStatus::Ok);
    s.clock.advance_millis(1_000);
    assert_eq!(s.engine.expire_due(10).await.unwrap(), 1, "b's lapsed, a's was renewed");
    let listed = s.engine.paths_list(ReservationListRequest { scope: "/repo".into(), holder_id: None }).await.unwrap();
    let holders: Vec<_> = listed.reservations.iter().map(|r| r.holder.as_str()).collect();
    assert_eq!(holders, ["a"]);

    let release = ReservationReleaseRequest {
        scope: "/repo".into(),
        holder_id: "a".into(),
        reservation_id: None,
        request_id: None,
    };
    let released = s.engine.paths_release(release).await.unwrap();
    assert_eq!((released.status, released.reservation_ids), (ReservationStatus::Ok, vec![a_id]));
    assert!(s.engine.paths_check(check("b", "db/x.sql")).await.unwrap().allowed, "free once released");

    let history = s
        .engine
        .history(HistoryRequest {
            kind: Some(state_core::ops::history::HistoryKind::Reservation),
            key: Some("/repo".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    use HistoryOp::*;
    let ops: Vec<_> = history.events.iter().map(|e| e.op).collect();
    assert_eq!(ops, vec![Grant, Grant, Renew, Expire, Release]);
}

pub async fn queues_deliver_at_least_once_with_receipts(backend: &dyn BackendFactory) {
    use state_core::ops::queue::{
        QueueAckRequest, QueueNackRequest, QueuePeekRequest, QueueReceiveRequest, QueueSendRequest, ReceiveStatus,
        SendStatus, SettleStatus,
    };
    let s = Store::new(backend);
    let send = |body: serde_json::Value, priority: u8, dedupe: Option<&str>| QueueSendRequest {
        queue: "inbox/w".into(),
        body,
        priority: Some(priority),
        delay_seconds: None,
        dedupe_key: dedupe.map(str::to_owned),
        ttl_seconds: None,
        max_attempts: Some(2),
        sender: Some("planner".into()),
        request_id: None,
    };
    let receive = |wait_seconds: Option<f64>| QueueReceiveRequest {
        queue: "inbox/w".into(),
        consumer_id: "w".into(),
        visibility_seconds: Some(1.0),
        wait_seconds,
        request_id: None,
    };
    let low = s.engine.queue_send(send(json!("low"), 0, Some("job-1"))).await.unwrap();
    let dup = s.engine.queue_send(send(json!("again"), 0, Some("job-1"))).await.unwrap();
    assert_eq!((dup.status, dup.message_id), (SendStatus::Duplicate, low.message_id.clone()));
    s.engine.queue_send(send(json!("high"), 9, None)).await.unwrap();

    let first = s.engine.queue_receive(receive(None)).await.unwrap().message.unwrap();
    assert_eq!(first.body, json!("high"), "priority first");
    let second = s.engine.queue_receive(receive(None)).await.unwrap().message.unwrap();
    assert_eq!(second.body, json!("low"));
    assert_eq!(s.engine.queue_receive(receive(None)).await.unwrap().status, ReceiveStatus::Empty);

    let ack = |m: &state_core::ops::queue::Message, receipt: u64| QueueAckRequest {
        queue: "inbox/w".into(),
        message_id: m.message_id.clone(),
        receipt,
        request_id: None,
    };
    assert_eq!(s.engine.queue_ack(ack(&first, first.receipt.unwrap())).await.unwrap().status, SettleStatus::Ok);

    // The second one's receiver stalls: on the store's clock its visibility runs out, and the
    // next receiver gets it with a new receipt; the stalled receiver's ack is refused.
    s.clock.advance_millis(1_000);
    let redelivered = s.engine.queue_receive(receive(None)).await.unwrap().message.unwrap();
    assert_eq!((redelivered.message_id.as_str(), redelivered.attempts), (second.message_id.as_str(), 2));
    assert_eq!(s.engine.queue_ack(ack(&second, second.receipt.unwrap())).await.unwrap().status, SettleStatus::Stale);
    let nack = QueueNackRequest {
        queue: "inbox/w".into(),
        message_id: redelivered.message_id.clone(),
        receipt: redelivered.receipt.unwrap(),
        delay_seconds: None,
        request_id: None,
    };
    assert_eq!(s.engine.queue_nack(nack).await.unwrap().status, SettleStatus::Ok);
    let spent = s.engine.queue_receive(receive(None)).await.unwrap();
    assert_eq!(spent.dead_lettered, vec![second.message_id.clone()], "two attempts spent: dead-lettered");
    let peek = s.engine.queue_peek(QueuePeekRequest { queue: "inbox/w.dead".into(), limit: None }).await.unwrap();
    assert_eq!((peek.visible, peek.messages[0].body.clone()), (1, json!("low")));

    // A waiting receive is answered by the next send.
    let waiter = {
        let engine = s.engine.clone();
        let request = receive(Some(30.0));
        tokio::spawn(async move { engine.queue_receive(request).await })
    };
    tokio::task::yield_now().await;
    s.engine.queue_send(send(json!("late"), 0, None)).await.unwrap();
    let woken = tokio::time::timeout(std::time::Duration::from_secs(20), waiter).await.unwrap().unwrap().unwrap();
    assert_eq!(woken.message.unwrap().body, json!("late"));

    let history = s
        .engine
        .history(HistoryRequest {
            kind: Some(state_core::ops::history::HistoryKind::Queue),
            key: Some("inbox/w".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    use HistoryOp::*;
    let ops: Vec<_> = history.events.iter().map(|e| e.op).collect();
    assert_eq!(ops, vec![Send, Send, Receive, Receive, Ack, Receive, Nack, DeadLetter, Send, Receive]);
}

/// Semaphores, queues and reservation scopes are found by name prefix, a page of names at a
/// time, each with what it holds now; names that only expired records mention are not.
pub async fn coordination_records_are_listed_by_name(backend: &dyn BackendFactory) {
    use state_core::ops::NameListRequest;
    use state_core::ops::queue::{QueueReceiveRequest, QueueSendRequest};
    use state_core::ops::reservation::ReserveRequest;
    use state_core::ops::semaphore::SemaphoreAcquireRequest;
    let s = Store::new(backend);
    let acquire = |name: &str, holder: &str, ttl_seconds: f64| SemaphoreAcquireRequest {
        name: name.into(),
        holder_id: holder.into(),
        capacity: 3,
        ttl_seconds,
        wait_seconds: None,
        request_id: None,
    };
    // "build" is a prefix of "build2": a page boundary between them must skip exactly build's
    // permits, whatever its holders are called.
    for (name, holder, ttl) in
        [("build", "zed", 60.0), ("build", "amy", 60.0), ("build2", "bo", 60.0), ("gone", "x", 1.0)]
    {
        s.engine.semaphore_acquire(acquire(name, holder, ttl)).await.unwrap();
    }
    s.clock.advance_millis(1_500);
    let all = s.engine.semaphore_list(NameListRequest::default()).await.unwrap();
    let listed: Vec<_> = all.semaphores.iter().map(|m| (m.name.as_str(), m.available, m.holders.len())).collect();
    assert_eq!(listed, [("build", 1, 2), ("build2", 2, 1)], "an expired permit holds nothing");
    let first = s.engine.semaphore_list(NameListRequest { limit: Some(1), ..Default::default() }).await.unwrap();
    assert_eq!(first.semaphores[0].name, "build");
    let cursor = first.next_cursor.expect("a second page");
    let second =
        s.engine.semaphore_list(NameListRequest { limit: Some(1), cursor: Some(cursor), ..Default::default() });
    let second = second.await.unwrap();
    assert_eq!((second.semaphores[0].name.as_str(), second.next_cursor), ("build2", None));
    let prefixed = NameListRequest { prefix: "build2".into(), ..Default::default() };
    assert_eq!(s.engine.semaphore_list(prefixed).await.unwrap().semaphores.len(), 1);

    let send = |queue: &str, delay_seconds: Option<f64>| QueueSendRequest {
        queue: queue.into(),
        body: json!(1),
        priority: None,
        delay_seconds,
        dedupe_key: None,
        ttl_seconds: None,
        max_attempts: None,
        sender: None,
        request_id: None,
    };
    for (queue, delay) in
        [("inbox/a", None), ("inbox/a", None), ("inbox/a", Some(60.0)), ("inbox/b", None), ("jobs", None)]
    {
        s.engine.queue_send(send(queue, delay)).await.unwrap();
    }
    let receive = QueueReceiveRequest {
        queue: "inbox/a".into(),
        consumer_id: "c".into(),
        visibility_seconds: None,
        wait_seconds: None,
        request_id: None,
    };
    s.engine.queue_receive(receive).await.unwrap();
    let inboxes = s.engine.queue_list(NameListRequest { prefix: "inbox/".into(), ..Default::default() }).await;
    let counts: Vec<_> =
        inboxes.unwrap().queues.into_iter().map(|q| (q.queue, q.visible, q.in_flight, q.delayed)).collect();
    assert_eq!(counts, [("inbox/a".to_owned(), 1, 1, 1), ("inbox/b".to_owned(), 1, 0, 0)]);

    let reserve = |scope: &str, holder: &str, pattern: &str| ReserveRequest {
        scope: scope.into(),
        holder_id: holder.into(),
        patterns: vec![pattern.into()],
        exclusive: Some(false),
        ttl_seconds: 60.0,
        reason: None,
        request_id: None,
    };
    for (scope, holder, pattern) in [("/repo", "a", "src/**"), ("/repo", "b", "docs/"), ("/other", "c", "*")] {
        s.engine.paths_reserve(reserve(scope, holder, pattern)).await.unwrap();
    }
    let scopes = s.engine.paths_scopes(NameListRequest::default()).await.unwrap().scopes;
    let shown: Vec<_> = scopes.iter().map(|sc| (sc.scope.as_str(), sc.reservations.len())).collect();
    assert_eq!(shown, [("/other", 1), ("/repo", 2)]);
}

/// A completion releases a bounded number of the runs waiting on it; the engine's own upkeep
/// releases the rest, so every one of them becomes claimable without anyone asking.
/// How many records the store keeps under these spaces.
struct Indexed(&'static [state_core::keyspace::Space]);

impl state_core::plan::Query for Indexed {
    type Output = usize;

    fn read<V: state_core::view::StateView + ?Sized>(
        &self,
        view: &V,
        _: state_core::UnixMillis,
    ) -> Result<usize, V::Error> {
        let mut found = 0;
        for space in self.0 {
            view.scan(&state_core::keyspace::prefix(*space), None, &mut |_| {
                found += 1;
                true
            })?;
        }
        Ok(found)
    }
}

pub async fn the_sweeper_releases_what_a_completion_left_waiting(backend: &dyn BackendFactory) {
    use state_core::keyspace::Space;
    use state_core::ops::workflow::{ClaimRequest, ClaimStatus, CompleteRequest, CreateRunRequest};
    use state_core::workflow::RELEASES_PER_WRITE;
    let config = EngineConfig { sweep_interval: std::time::Duration::from_millis(10), ..EngineConfig::default() };
    let s = Store::with_config(backend, config);
    let _upkeep = s.engine.start_maintenance();
    let create =
        |name: &str, depends_on: Vec<String>| CreateRunRequest { name: name.into(), depends_on, ..Default::default() };
    let gate = s.engine.workflow_create(create("gate", Vec::new())).await.unwrap().run_id;
    let waiting = RELEASES_PER_WRITE + 44;
    // Sent at once, so the writer commits them in a few batches (PostgreSQL's commits are slow).
    let creates = (0..waiting).map(|_| s.engine.workflow_create(create("after", vec![gate.clone()])));
    for created in futures_util::future::join_all(creates).await {
        created.unwrap();
    }
    let claim = |name: &str| ClaimRequest {
        agent_id: "w".into(),
        lease_ttl_seconds: Some(60.0),
        run_id: None,
        tags: Default::default(),
        name: Some(name.into()),
        request_id: None,
    };
    let held = s.engine.workflow_claim(claim("gate")).await.unwrap();
    let complete = CompleteRequest {
        run_id: gate,
        agent_id: "w".into(),
        token: held.token.unwrap(),
        result: json!(1),
        request_id: None,
    };
    s.engine.workflow_complete(complete).await.unwrap();
    // Claims would not show when the last run was released (a claim takes the first in the
    // order), so the test reads how many runs the order holds, then claims one of the last.
    let mut queued = 0;
    for _ in 0..1_000 {
        queued = s.engine.query(Indexed(&[Space::Queue])).await.unwrap();
        if queued == waiting {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(queued, waiting, "every waiting run entered the claim order");
    let leftovers = s.engine.query(Indexed(&[Space::Dependent, Space::Release])).await.unwrap();
    assert_eq!(leftovers, 0, "no note or release record left behind");
    assert_eq!(s.engine.workflow_claim(claim("after")).await.unwrap().status, ClaimStatus::Claimed);
}

pub async fn runs_wait_for_their_dependencies(backend: &dyn BackendFactory) {
    use state_core::ops::workflow::{
        ClaimRequest, ClaimStatus, CompleteRequest, CreateRunRequest, CreateStatus, RunStatusRequest,
    };
    let s = Store::new(backend);
    let create = |name: &str, extra: CreateRunRequest| CreateRunRequest { name: name.into(), ..extra };
    let a = s.engine.workflow_create(create("a", CreateRunRequest::default())).await.unwrap().run_id;
    let b = s
        .engine
        .workflow_create(create(
            "b",
            CreateRunRequest { depends_on: vec![a.clone()], priority: Some(9), ..Default::default() },
        ))
        .await
        .unwrap()
        .run_id;
    let keyed = || create("c", CreateRunRequest { dedupe_key: Some("c-once".into()), ..Default::default() });
    let c = s.engine.workflow_create(keyed()).await.unwrap();
    let again = s.engine.workflow_create(keyed()).await.unwrap();
    assert_eq!((again.status, again.run_id.as_str()), (CreateStatus::Duplicate, c.run_id.as_str()));

    let claim = |run_id: Option<&str>| ClaimRequest {
        agent_id: "w".into(),
        lease_ttl_seconds: Some(60.0),
        run_id: run_id.map(str::to_owned),
        tags: Default::default(),
        name: None,
        request_id: None,
    };
    let waiting = s.engine.workflow_claim(claim(Some(&b))).await.unwrap();
    assert_eq!(waiting.status, ClaimStatus::Waiting, "b waits on a");
    let status = s.engine.workflow_status(RunStatusRequest { run_id: b.clone(), wait_seconds: None }).await.unwrap();
    assert_eq!(status.run.unwrap().waiting_on, vec![a.clone()]);
    let first = s.engine.workflow_claim(claim(None)).await.unwrap();
    assert_eq!(first.run_id.as_deref(), Some(a.as_str()), "b has the higher priority but is not ready");
    let short = RunStatusRequest { run_id: a.clone(), wait_seconds: Some(0.05) };
    let running = s.engine.workflow_status(short).await.unwrap().run.unwrap();
    assert_eq!(running.run_status, state_core::ops::workflow::RunStatus::Running, "the wait ran out first");
    // A caller waiting for a's result is answered by its completion, not by a timeout.
    let caller = {
        let engine = s.engine.clone();
        let request = RunStatusRequest { run_id: a.clone(), wait_seconds: Some(30.0) };
        tokio::spawn(async move { engine.workflow_status(request).await })
    };
    tokio::task::yield_now().await;
    let complete = CompleteRequest {
        run_id: a.clone(),
        agent_id: "w".into(),
        token: first.token.unwrap(),
        result: json!(1),
        request_id: None,
    };
    s.engine.workflow_complete(complete).await.unwrap();
    let waited = tokio::time::timeout(std::time::Duration::from_secs(20), caller).await.unwrap().unwrap().unwrap();
    let done = waited.run.as_ref().map(|run| run.run_status);
    assert_eq!((done, waited.result), (Some(state_core::ops::workflow::RunStatus::Completed), Some(json!(1))));
    let second = s.engine.workflow_claim(claim(None)).await.unwrap();
    assert_eq!(second.run_id.as_deref(), Some(b.as_str()), "ready now, and first by priority");

    // b parks for an approval; a signal makes it claimable again, on the same attempt.
    use state_core::ops::workflow::{AwaitSignalRequest, AwaitStatus, SignalRequest, SignalStatus};
    let park = AwaitSignalRequest {
        run_id: b.clone(),
        agent_id: "w".into(),
        token: second.token.unwrap(),
        name: "approved".into(),
        after_signal_id: None,
        request_id: None,
    };
    assert_eq!(s.engine.workflow_await_signal(park).await.unwrap().status, AwaitStatus::Waiting);
    assert_eq!(s.engine.workflow_claim(claim(Some(&b))).await.unwrap().status, ClaimStatus::Waiting);
    let approve = SignalRequest {
        run_id: b.clone(),
        name: "approved".into(),
        value: json!({"by": "ana"}),
        sender: Some("ana".into()),
        request_id: None,
    };
    assert_eq!(s.engine.workflow_signal(approve).await.unwrap().status, SignalStatus::Ok);
    let resumed = s.engine.workflow_claim(claim(Some(&b))).await.unwrap();
    assert_eq!((resumed.status, resumed.attempt), (ClaimStatus::Claimed, second.attempt));
    assert_eq!(resumed.signals[0].value, json!({"by": "ana"}));
}

pub async fn workflow_lifecycle(backend: &dyn BackendFactory) {
    use state_core::ops::workflow::*;
    let s = Store::new(backend);
    let created = s
        .engine
        .workflow_create(CreateRunRequest {
            request_id: None,
            name: "report".into(),
            tags: [("team".to_string(), "ops".to_string())].into(),
            input: json!({"day": 1}),
            max_attempts: Some(3),
            agent_id: Some("planner".into()),
            ..CreateRunRequest::default()
        })
        .await
        .unwrap();
    let run = created.run_id.clone();
    let claim = |agent: &str| ClaimRequest {
        request_id: None,
        agent_id: agent.into(),
        lease_ttl_seconds: Some(1.0),
        run_id: None,
        tags: [("team".to_string(), "ops".to_string())].into(),
        name: Some("report".into()),
    };
    let first = s.engine.workflow_claim(claim("w1")).await.unwrap();
    assert_eq!(
        (first.status, first.run_id.as_deref(), first.attempt),
        (ClaimStatus::Claimed, Some(run.as_str()), Some(1))
    );
    let t1 = first.token.unwrap();
    let step = |agent: &str, token, n, out: &str| CheckpointRequest {
        request_id: None,
        run_id: run.clone(),
        agent_id: agent.into(),
        token,
        step: n,
        output: json!(out),
    };
    assert_eq!(s.engine.workflow_checkpoint(step("w1", t1, 1, "fetched")).await.unwrap().status, CheckpointStatus::Ok);

    // w1 vanishes; its claim lapses and the sweeper returns the run to the queue.
    s.clock.advance_millis(1_000);
    s.engine.expire_due(10).await.unwrap();
    let pending = s
        .engine
        .workflow_status(RunStatusRequest { run_id: run.clone(), wait_seconds: None })
        .await
        .unwrap()
        .run
        .unwrap();
    assert_eq!((pending.run_status, pending.attempt, pending.last_step), (RunStatus::Pending, 1, 1));
    let discovered = s.engine.workflow_discover(DiscoverRequest::default()).await.unwrap();
    assert_eq!(discovered.runs.len(), 1);

    let second = s.engine.workflow_claim(claim("w2")).await.unwrap();
    let t2 = second.token.unwrap();
    assert_eq!((second.attempt, second.last_step), (Some(2), Some(1)));
    assert_eq!(s.engine.workflow_checkpoint(step("w1", t1, 2, "late")).await.unwrap().status, CheckpointStatus::Fenced);
    let beat = s
        .engine
        .workflow_heartbeat(HeartbeatRequest {
            request_id: None,
            run_id: run.clone(),
            agent_id: "w2".into(),
            token: t2,
            lease_ttl_seconds: Some(5.0),
        })
        .await
        .unwrap();
    assert_eq!(beat.status, HolderStatus::Ok);
    assert_eq!(s.engine.workflow_checkpoint(step("w2", t2, 2, "rendered")).await.unwrap().status, CheckpointStatus::Ok);
    let done = s
        .engine
        .workflow_complete(CompleteRequest {
            request_id: None,
            run_id: run.clone(),
            agent_id: "w2".into(),
            token: t2,
            result: json!("ok"),
        })
        .await
        .unwrap();
    assert_eq!(done.run_status, Some(RunStatus::Completed));

    let resumed = s.engine.workflow_resume(RunRequest { run_id: run.clone() }).await.unwrap();
    let steps: Vec<_> = resumed.steps.iter().map(|st| (st.step, st.output.clone(), st.attempt)).collect();
    assert_eq!(steps, vec![(1, Some(json!("fetched")), 1), (2, Some(json!("rendered")), 2)]);
    assert_eq!((resumed.input, resumed.result), (Some(json!({"day": 1})), Some(json!("ok"))));
    let history = s
        .engine
        .history(HistoryRequest {
            kind: Some(state_core::ops::history::HistoryKind::Workflow),
            key: Some(run.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    use HistoryOp::*;
    let ops: Vec<_> = history.events.iter().map(|e| e.op).collect();
    assert_eq!(ops, vec![Create, Claim, Checkpoint, ClaimExpired, Reclaim, Heartbeat, Checkpoint, Complete]);
    assert_eq!(history.events[1].agent_id.as_deref(), Some("w1"));
    let listed = s
        .engine
        .workflow_list(ListRunsRequest { status: Some(ListStatus::Completed), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(listed.runs.len(), 1);
}

pub async fn sessions_keep_every_version(backend: &dyn BackendFactory) {
    use state_core::ops::session::*;
    let s = Store::new(backend);
    for n in 1..=3 {
        let saved = s
            .engine
            .session_save(SessionSaveRequest {
                request_id: None,
                session_id: "chat/42".into(),
                context: json!({"turn": n}),
                agent_id: None,
            })
            .await
            .unwrap();
        assert_eq!(saved.version, n);
    }
    let latest =
        s.engine.session_restore(SessionRestoreRequest { session_id: "chat/42".into(), version: None }).await.unwrap();
    assert_eq!((latest.version, latest.latest_version, latest.context), (3, 3, Some(json!({"turn": 3}))));
    let first = s
        .engine
        .session_restore(SessionRestoreRequest { session_id: "chat/42".into(), version: Some(1) })
        .await
        .unwrap();
    assert_eq!(first.context, Some(json!({"turn": 1})));
    let beyond = s
        .engine
        .session_restore(SessionRestoreRequest { session_id: "chat/42".into(), version: Some(9) })
        .await
        .unwrap();
    assert_eq!(beyond.status, ReadStatus::NotFound);
    s.engine
        .session_save(SessionSaveRequest {
            request_id: None,
            session_id: "chat/42/sub".into(),
            context: json!(0),
            agent_id: None,
        })
        .await
        .unwrap();
    let listed =
        s.engine.session_list(SessionListRequest { prefix: "chat/".into(), ..Default::default() }).await.unwrap();
    let ids: Vec<_> = listed.sessions.iter().map(|x| (x.session_id.as_str(), x.latest_version)).collect();
    assert_eq!(ids, vec![("chat/42", 3), ("chat/42/sub", 1)]);
    // Compaction drops history, never saved versions.
    s.engine.compact_history(1_000).await.unwrap();
    let still = s
        .engine
        .session_restore(SessionRestoreRequest { session_id: "chat/42".into(), version: Some(2) })
        .await
        .unwrap();
    assert_eq!(still.context, Some(json!({"turn": 2})));
}

pub async fn reset_wipes_but_revisions_continue(backend: &dyn BackendFactory) {
    use state_core::ops::admin::ResetRequest;
    let s = Store::new(backend);
    s.set("a", json!(1)).await;
    let before = s.engine.lease_acquire(lease("r", "h", 60.0)).await.unwrap();
    let refused = s.engine.reset(ResetRequest { request_id: None, confirm: "yes".into(), agent_id: None }).await;
    assert!(matches!(refused, Err(EngineError::Invalid(_))));
    assert_eq!(s.get("a").await.status, ReadStatus::Ok, "without the confirmation nothing is deleted");

    let reset = s
        .engine
        .reset(ResetRequest { request_id: None, confirm: "DELETE EVERYTHING".into(), agent_id: Some("admin".into()) })
        .await
        .unwrap();
    assert_eq!((reset.removed, reset.revision), (2, 3));
    assert_eq!(s.get("a").await.status, ReadStatus::NotFound);
    let health = s.engine.health().await.unwrap();
    assert_eq!((health.keys, health.revision, health.compacted_revision), (Some(0), 3, 2));
    let history = s.engine.history(HistoryRequest::default()).await.unwrap();
    assert_eq!(history.events.iter().map(|e| e.op).collect::<Vec<_>>(), vec![HistoryOp::Reset]);
    let after = s.engine.lease_acquire(lease("r", "h", 60.0)).await.unwrap();
    assert!(after.token > before.token, "fencing tokens never repeat, even across a reset");
}

pub async fn system_records_stay_out_of_user_listings(backend: &dyn BackendFactory) {
    use state_core::ops::workflow::CreateRunRequest;
    let s = Store::new(backend);
    s.engine.lease_acquire(lease("r", "h", 60.0)).await.unwrap();
    s.engine
        .workflow_create(CreateRunRequest {
            request_id: None,
            name: "n".into(),
            tags: Default::default(),
            input: json!(null),
            max_attempts: None,
            agent_id: None,
            ..CreateRunRequest::default()
        })
        .await
        .unwrap();
    s.set("user", json!(1)).await;
    let all = s.engine.list(ListRequest::default()).await.unwrap();
    assert_eq!(all.entries.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(), vec!["user"]);
    // A cursor crafted to start inside the store's own records (the lease record's fencing
    // token, runs, request records) still lists only user keys.
    for crafted in ["", "\u{0}", "\u{1}", "\u{1}lease/", "\u{1}lease/r"] {
        let request = ListRequest {
            cursor: Some(state_core::cursor::encode(crafted)),
            include_values: true,
            ..ListRequest::default()
        };
        let page = s.engine.list(request.clone()).await.unwrap();
        let keys: Vec<&str> = page.entries.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(keys, vec!["user"], "cursor after {crafted:?}");
        // Nor when the cursor names a folder of the store's own records.
        let folders = ListRequest { delimiter: Some("/".into()), ..request };
        let page = s.engine.list(folders).await.unwrap();
        let keys: Vec<&str> = page.entries.iter().map(|e| e.key.as_str()).collect();
        assert_eq!((keys, page.prefixes.len()), (vec!["user"], 0), "folder cursor after {crafted:?}");
    }
    assert_eq!(s.engine.health().await.unwrap().keys, Some(1));
    let kv_only = s
        .engine
        .history(HistoryRequest { kind: Some(state_core::ops::history::HistoryKind::Kv), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(kv_only.events.len(), 1);
    let everything = s.engine.history(HistoryRequest::default()).await.unwrap();
    assert_eq!(everything.events.len(), 3, "unfiltered history shows leases and runs too");
}

pub async fn one_revision_can_hold_several_events_of_one_key(backend: &dyn BackendFactory) {
    let s = Store::new(backend);
    let mut short = set_req("k", json!("old"), None);
    short.ttl_seconds = Some(1.0);
    s.engine.set(short).await.unwrap();
    s.clock.advance_millis(1_000);
    // No sweep: the write itself records the expiry, in the same revision as the put.
    let put = s.set("k", json!("new")).await;
    assert_eq!((put.version, put.revision), (1, 2));
    for order in ["latest", "since"] {
        let req = match order {
            "latest" => HistoryRequest { key: Some("k".into()), ..Default::default() },
            _ => HistoryRequest { key: Some("k".into()), since_revision: Some(0), ..Default::default() },
        };
        let events = s.engine.history(req).await.unwrap().events;
        let seen: Vec<_> = events.iter().map(|e| (e.revision, e.op)).collect();
        assert_eq!(seen, vec![(1, HistoryOp::Put), (2, HistoryOp::Expired), (2, HistoryOp::Put)], "{order}");
    }
}

/// A caller told its write succeeded reads it at once, while the writer may still be busy
/// with the batch that carried it (a backend may answer before its readers can see a batch;
/// the engine then holds such reads back): many writers, each reading after every write.
pub async fn acknowledged_writes_are_read_at_once(backend: &dyn BackendFactory) {
    let s = Store::new(backend);
    let mut writers = Vec::new();
    for writer in 0..32 {
        let engine = s.engine.clone();
        writers.push(tokio::spawn(async move {
            let key = format!("seen/{writer}");
            for round in 1..=20u64 {
                let written = engine.set(set_req(&key, json!(round), None)).await.expect("set");
                let read = GetRequest { key: key.clone(), version: None, revision: None };
                let read = engine.get(read).await.expect("get");
                assert_eq!(
                    (read.value, read.version),
                    (Some(json!(round)), written.version),
                    "writer {writer}, round {round}: its acknowledged write was not read"
                );
                let revision = engine.revision().await.expect("revision");
                assert!(revision >= written.revision, "writer {writer}: revision {revision} < {}", written.revision);
            }
        }));
    }
    for writer in writers {
        writer.await.expect("writer task");
    }
}

pub async fn request_ids_make_retries_safe(backend: &dyn BackendFactory) {
    use state_core::ops::workflow::CreateRunRequest;
    let s = Store::new(backend);
    let write = SetRequest { request_id: Some("req-1".into()), ..set_req("k", counter(1), Some(0)) };
    let first = s.engine.set(write.clone()).await.unwrap();
    let retried = s.engine.set(write.clone()).await.unwrap();
    assert_eq!(retried, first, "a retry returns the first result");
    assert_eq!((first.status, first.version, s.revision().await), (WriteStatus::Ok, 1, 1), "applied once");
    let events = history_since(&s.engine, 0, 100).await;
    assert_eq!(events.len(), 1, "one write in history: {events:?}");

    let reused = SetRequest { request_id: Some("req-1".into()), ..set_req("k", counter(2), None) };
    let refused = s.engine.set(reused).await.unwrap_err();
    assert!(matches!(&refused, EngineError::Invalid(e) if e.argument() == "request_id"), "{refused}");
    assert_eq!(s.get("k").await.value, Some(counter(1)), "a refused reuse changes nothing");

    // A conflict changed nothing, so it is not recorded: its retry is decided afresh.
    let guarded = SetRequest { request_id: Some("req-2".into()), ..set_req("k", counter(5), Some(7)) };
    assert_eq!(s.engine.set(guarded.clone()).await.unwrap().status, WriteStatus::Conflict);
    assert_eq!(s.revision().await, 1);

    // Records are kept for the window, then forgotten.
    let window = EngineConfig::default().idempotency_window.as_millis() as u64;
    s.clock.advance_millis(window - 1);
    assert_eq!(s.engine.set(write.clone()).await.unwrap(), first, "still remembered just inside the window");
    s.clock.advance_millis(1);
    let after = s.engine.set(write).await.unwrap();
    assert_eq!((after.status, after.version), (WriteStatus::Conflict, 1), "a new request once the window ended");

    // Creations return the same id rather than creating twice.
    let create = CreateRunRequest {
        name: "job".into(),
        tags: Default::default(),
        input: json!(null),
        max_attempts: None,
        agent_id: None,
        request_id: Some("create-1".into()),
        ..CreateRunRequest::default()
    };
    let made = s.engine.workflow_create(create.clone()).await.unwrap();
    assert_eq!(s.engine.workflow_create(create).await.unwrap().run_id, made.run_id);
    let runs = s.engine.workflow_list(Default::default()).await.unwrap().runs;
    assert_eq!(runs.len(), 1, "a retried create makes one run");
}

/// Requests that arrive together share a write batch; each must see what the ones before it
/// in the batch wrote, not the state the batch began with (PostgreSQL fetches every key a
/// batch reads as it begins: those must give way to the batch's own writes).
pub async fn requests_in_one_batch_see_each_others_writes(backend: &dyn BackendFactory) {
    use futures_util::future::join_all;
    const WRITERS: u64 = 16;
    const EACH: u64 = 4;
    let s = Store::new(backend);
    let increment = || async {
        let mut conflicts = 0;
        for _ in 0..EACH {
            loop {
                let seen = s.get("counter").await;
                let n = seen.value.as_ref().and_then(|v| v["n"].as_u64()).unwrap_or(0);
                let wrote = s.engine.set(set_req("counter", counter(n + 1), Some(seen.version))).await.unwrap();
                if wrote.status == WriteStatus::Ok {
                    break;
                }
                assert_eq!(wrote.status, WriteStatus::Conflict, "{wrote:?}");
                conflicts += 1;
            }
        }
        conflicts
    };
    let conflicts: u64 = join_all((0..WRITERS).map(|_| increment())).await.into_iter().sum();
    let total = WRITERS * EACH;
    let got = s.get("counter").await;
    assert_eq!((got.value, got.version), (Some(counter(total)), total), "no increment lost");
    assert!(conflicts > 0, "writers that read the same version collided in a batch");

    // The same request sent eight times at once is applied once, wherever the copies land.
    let create = SetRequest { request_id: Some("together".into()), ..set_req("made", counter(1), Some(0)) };
    let answers = join_all((0..8).map(|_| s.engine.set(create.clone()))).await;
    for answer in &answers {
        let answer = answer.as_ref().unwrap();
        assert_eq!((answer.status, answer.version), (WriteStatus::Ok, 1), "{answer:?}");
    }
    // A transaction that reads what a put queued beside it just wrote.
    let put = s.engine.set(set_req("made", counter(2), Some(1)));
    let compare = s.engine.txn(txn(json!({
        "compare": [{"key": "made", "version": 2}],
        "success": [{"op": "put", "key": "made", "value": {"n": 3}}],
        "failure": [{"op": "get", "key": "made"}]
    })));
    let (put, compare) = tokio::join!(put, compare);
    assert_eq!(put.unwrap().status, WriteStatus::Ok);
    let made = s.get("made").await;
    let expected = if compare.unwrap().succeeded { (counter(3), 3) } else { (counter(2), 2) };
    assert_eq!((made.value, made.version), (Some(expected.0), expected.1));
    // Two compare-and-sets of one version, a write that scans between them (and so sends what
    // the batch wrote so far): exactly one wins, whatever batches they land in.
    let receive = state_core::ops::queue::QueueReceiveRequest {
        queue: "empty".into(),
        consumer_id: "c".into(),
        visibility_seconds: None,
        wait_seconds: None,
        request_id: None,
    };
    for round in 0..20 {
        let version = s.get("raced").await.version;
        let first = s.engine.set(set_req("raced", counter(round), Some(version)));
        let scans = s.engine.queue_receive(receive.clone());
        let second = s.engine.set(set_req("raced", counter(round), Some(version)));
        let (first, scanned, second) = tokio::join!(first, scans, second);
        scanned.unwrap();
        let wins = [first.unwrap().status, second.unwrap().status].into_iter().filter(|s| *s == WriteStatus::Ok);
        assert_eq!(wins.count(), 1, "round {round}: one compare-and-set of version {version} wins");
    }
    let largest = s.engine.health().await.unwrap().writes.map_or(0, |w| w.largest_batch);
    assert!(largest > 1, "some requests shared a batch (largest {largest})");
}

pub async fn request_records_stay_out_of_sight(backend: &dyn BackendFactory) {
    use state_core::ops::admin::{RESET_CONFIRMATION, ResetRequest};
    let s = Store::new(backend);
    for i in 0..3 {
        let write = SetRequest { request_id: Some(format!("id-{i}")), ..set_req(&format!("k{i}"), counter(i), None) };
        s.engine.set(write).await.unwrap();
    }
    let health = s.engine.health().await.unwrap();
    assert_eq!((health.keys, health.revision), (Some(3), 3), "records are not keys and take no revision");
    let listed = s.engine.list(ListRequest { prefix: String::new(), ..Default::default() }).await.unwrap();
    assert_eq!(listed.entries.len(), 3);
    assert_eq!(history_since(&s.engine, 0, 100).await.len(), 3, "no history of its own");

    // Sweeping expired records commits no revision and leaves no event.
    s.clock.advance_millis(EngineConfig::default().idempotency_window.as_millis() as u64);
    assert_eq!(s.engine.expire_due(100).await.unwrap(), 3);
    assert_eq!(s.revision().await, 3);
    assert_eq!(history_since(&s.engine, 0, 100).await.len(), 3);

    // A reset keeps request records: a write retried after it was applied once, then wiped.
    let write = SetRequest { request_id: Some("before".into()), ..set_req("gone", counter(1), None) };
    let written = s.engine.set(write.clone()).await.unwrap();
    let reset = ResetRequest { confirm: RESET_CONFIRMATION.into(), agent_id: None, request_id: Some("wipe".into()) };
    let first = s.engine.reset(reset.clone()).await.unwrap();
    assert_eq!(first.removed, 4, "four keys; the request record kept is not counted");
    assert_eq!(s.engine.set(write).await.unwrap(), written);
    assert_eq!(s.get("gone").await.status, ReadStatus::NotFound, "the retry did not bring the key back");
    // A reset's own record survives the wipe it performs, so its retry does not wipe again.
    s.set("after", json!(1)).await;
    assert_eq!(s.engine.reset(reset).await.unwrap(), first);
    assert_eq!(s.get("after").await.status, ReadStatus::Ok, "the retried reset did not run again");
}

/// A note and its index entries commit together: recall finds a note as soon as its save is
/// acknowledged, finds the new text of a new version and not the old, and forgets a deleted
/// note. The index lives in the backend's ordinary entries, so every backend must keep it.
pub async fn knowledge_index_follows_every_note_write(backend: &dyn BackendFactory) {
    use state_core::ops::knowledge::*;
    let s = Store::new(backend);
    let save = |id: &str, content: &str, expected_version: Option<u64>| KnowledgeSaveRequest {
        id: id.into(),
        content: content.into(),
        expected_version,
        ..KnowledgeSaveRequest::default()
    };
    let recall = |query: &str| KnowledgeRecallRequest { query: query.into(), ..KnowledgeRecallRequest::default() };
    let ids = |r: KnowledgeRecallResult| r.items.into_iter().map(|i| i.id).collect::<Vec<_>>();

    let first = s.engine.knowledge_save(save("vacuum", "Autovacuum reclaims dead tuples in Postgres.", Some(0))).await;
    let first = first.unwrap();
    assert_eq!((first.status, first.version), (WriteStatus::Ok, 1));
    assert!(first.tokens > 5, "a real token count: {}", first.tokens);
    s.engine
        .knowledge_save(save("fsync", "fsync makes a write durable before it is acknowledged.", None))
        .await
        .unwrap();
    assert_eq!(ids(s.engine.knowledge_recall(recall("dead tuples")).await.unwrap()), ["vacuum"]);

    let conflict = s.engine.knowledge_save(save("vacuum", "stale", Some(0))).await.unwrap();
    assert_eq!((conflict.status, conflict.current_version), (WriteStatus::Conflict, Some(1)));
    let second = s.engine.knowledge_save(save("vacuum", "Bloat: reindex the table.", Some(1))).await.unwrap();
    assert_eq!(second.version, 2);
    assert!(ids(s.engine.knowledge_recall(recall("dead tuples")).await.unwrap()).is_empty(), "old text unindexed");
    assert_eq!(ids(s.engine.knowledge_recall(recall("reindexing bloated tables")).await.unwrap()), ["vacuum"]);

    let deleted = s
        .engine
        .knowledge_delete(KnowledgeDeleteRequest { id: "vacuum".into(), ..KnowledgeDeleteRequest::default() })
        .await
        .unwrap();
    assert_eq!(deleted.status, DeleteStatus::Ok);
    assert!(ids(s.engine.knowledge_recall(recall("reindex bloat")).await.unwrap()).is_empty());
    let listed = s.engine.knowledge_list(KnowledgeListRequest::default()).await.unwrap();
    assert_eq!(listed.notes.iter().map(|n| n.id.as_str()).collect::<Vec<_>>(), ["fsync"]);
    // Index records are the store's own: no user listing shows them.
    let keys = s.engine.list(ListRequest { prefix: String::new(), ..ListRequest::default() }).await.unwrap();
    assert!(keys.entries.is_empty(), "{:?}", keys.entries);
}

/// Every change names who made it (`by`): the principal the engine handle acts for, never a
/// local process and never the store itself (an expiry), and it is kept as stored.
pub async fn history_records_who_made_each_change(backend: &dyn BackendFactory) {
    let s = Store::new(backend);
    s.set("doc", json!(1)).await;
    s.engine.on_behalf_of(Some("alice")).set(set_req("doc", json!(2), None)).await.unwrap();
    let mut ttl = set_req("doc", json!(3), None);
    ttl.ttl_seconds = Some(1.0);
    s.engine.on_behalf_of(Some("team-b")).set(ttl).await.unwrap();
    s.clock.advance_millis(1000);
    assert_eq!(s.engine.on_behalf_of(Some("team-b")).expire_due(100).await.unwrap(), 1);
    let delete = DeleteRequest { key: "gone".into(), ..Default::default() };
    s.set("gone", json!(0)).await;
    s.engine.on_behalf_of(Some("alice")).delete(delete).await.unwrap();

    let history = s.engine.history(HistoryRequest { n: Some(100), ..Default::default() }).await.unwrap();
    let seen: Vec<_> = history.events.iter().map(|e| (e.key.as_str(), e.op, e.by.as_deref())).collect();
    assert_eq!(
        seen,
        [
            ("doc", HistoryOp::Put, None),
            ("doc", HistoryOp::Put, Some("alice")),
            ("doc", HistoryOp::Put, Some("team-b")),
            ("doc", HistoryOp::Expired, None),
            ("gone", HistoryOp::Put, None),
            ("gone", HistoryOp::Delete, Some("alice")),
        ]
    );
    // A watcher resuming from the start sees the names the history keeps.
    let request = state_core::ops::watch::WatchRequest { after_revision: Some(0), ..Default::default() };
    let mut watch = s.engine.watch(request).await.unwrap();
    let mut names = Vec::new();
    while let Some(batch) = watch.next_until(history.events.last().unwrap().revision).await {
        names.extend(batch.unwrap().events.into_iter().map(|e| e.by));
    }
    let names: Vec<_> = names.iter().map(Option::as_deref).collect();
    assert_eq!(names, [None, Some("alice"), Some("team-b"), None, None, Some("alice")]);
}
