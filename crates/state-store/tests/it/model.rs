//! Random operation sequences against the engine and against a plain in-memory model of the
//! semantics must agree on every status, version, value and revision.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::json;
use state_core::ops::kv::{DeleteRequest, GetRequest, ListRequest, SetRequest};
use state_core::ops::{DeleteStatus, ReadStatus, WriteStatus};

use state_store::conformance::BackendFactory;

use crate::support::{Store, txn};

const KEYS: [&str; 3] = ["a", "b", "c"];

#[derive(Debug, Clone)]
enum Op {
    Set {
        key: usize,
        value: u8,
        expected: Option<u64>,
        ttl_ms: Option<u64>,
    },
    Delete {
        key: usize,
        expected: Option<u64>,
    },
    /// If `if_key` is at `if_version`, put `put_key` and delete `del_key`; else read `if_key`.
    Txn {
        if_key: usize,
        if_version: u64,
        put_key: usize,
        value: u8,
        del_key: usize,
    },
    Get {
        key: usize,
    },
    Advance {
        ms: u64,
    },
    Sweep,
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0..KEYS.len();
    let version = prop_oneof![Just(None), (0u64..4).prop_map(Some)];
    prop_oneof![
        4 => (key.clone(), any::<u8>(), version.clone(), prop_oneof![Just(None), Just(Some(1000u64)), Just(Some(2500))])
            .prop_map(|(key, value, expected, ttl_ms)| Op::Set { key, value, expected, ttl_ms }),
        2 => (key.clone(), prop_oneof![Just(None), (1u64..4).prop_map(Some)]).prop_map(|(key, expected)| Op::Delete { key, expected }),
        2 => (key.clone(), 0u64..3, key.clone(), any::<u8>(), key.clone())
            .prop_map(|(if_key, if_version, put_key, value, del_key)| Op::Txn { if_key, if_version, put_key, value, del_key }),
        2 => key.prop_map(|key| Op::Get { key }),
        1 => prop_oneof![Just(0u64), Just(999), Just(1000), Just(2000)].prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Sweep),
    ]
}

#[derive(Debug, Clone, PartialEq)]
struct ModelEntry {
    value: u8,
    version: u64,
    expires: Option<u64>,
}

#[derive(Debug, Default)]
struct Model {
    entries: BTreeMap<&'static str, ModelEntry>,
    revision: u64,
    now: u64,
}

impl Model {
    fn live(&self, key: &str) -> Option<&ModelEntry> {
        self.entries.get(key).filter(|e| e.expires.is_none_or(|at| at > self.now))
    }

    fn version(&self, key: &str) -> u64 {
        self.live(key).map_or(0, |e| e.version)
    }

    fn write(&mut self, key: &'static str, value: u8, ttl_ms: Option<u64>) -> u64 {
        let version = self.version(key) + 1;
        self.entries.insert(key, ModelEntry { value, version, expires: ttl_ms.map(|t| self.now + t) });
        version
    }
}

async fn run(factory: &dyn BackendFactory, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let store = Store::new(factory);
    let start = store.clock.now_millis();
    let mut model = Model::default();
    for (step, op) in ops.into_iter().enumerate() {
        model.now = store.clock.now_millis() - start;
        match op {
            Op::Set { key, value, expected, ttl_ms } => {
                let name = KEYS[key];
                let req = SetRequest {
                    expected_version: expected,
                    ttl_seconds: ttl_ms.map(|ms| ms as f64 / 1000.0),
                    ..SetRequest::new(name, json!(value))
                };
                let got = store.engine.set(req).await.expect("set");
                let current = model.version(name);
                if expected.is_none_or(|e| e == current) {
                    let version = model.write(name, value, ttl_ms);
                    model.revision += 1;
                    prop_assert_eq!(
                        (got.status, got.version, got.revision),
                        (WriteStatus::Ok, version, model.revision),
                        "step {}",
                        step
                    );
                } else {
                    prop_assert_eq!(
                        (got.status, got.version, got.revision),
                        (WriteStatus::Conflict, current, model.revision),
                        "step {}",
                        step
                    );
                    prop_assert_eq!(got.value, model.live(name).map(|e| json!(e.value)));
                }
            }
            Op::Delete { key, expected } => {
                let name = KEYS[key];
                let got = store
                    .engine
                    .delete(DeleteRequest { key: name.into(), expected_version: expected, ..DeleteRequest::default() })
                    .await
                    .expect("delete");
                let current = model.version(name);
                let want = if current == 0 {
                    DeleteStatus::NotFound
                } else if expected.is_some_and(|e| e != current) {
                    DeleteStatus::Conflict
                } else {
                    model.entries.remove(name);
                    model.revision += 1;
                    DeleteStatus::Ok
                };
                prop_assert_eq!(
                    (got.status, got.version, got.revision),
                    (want, current, model.revision),
                    "step {}",
                    step
                );
            }
            Op::Txn { if_key, if_version, put_key, value, del_key } => {
                let (if_name, put_name, del_name) = (KEYS[if_key], KEYS[put_key], KEYS[del_key]);
                let success = if put_name == del_name {
                    json!([{"op": "put", "key": put_name, "value": value}])
                } else {
                    json!([{"op": "put", "key": put_name, "value": value}, {"op": "delete", "key": del_name}])
                };
                let req = txn(json!({
                    "compare": [{"key": if_name, "version": if_version}],
                    "success": success,
                    "failure": [{"op": "get", "key": if_name}],
                }));
                let got = store.engine.txn(req).await.expect("txn");
                let holds = model.version(if_name) == if_version;
                prop_assert_eq!(got.succeeded, holds, "step {}", step);
                if holds {
                    let put_version = model.write(put_name, value, None);
                    prop_assert_eq!(got.results[0].version, put_version);
                    if put_name != del_name {
                        let deleted = model.version(del_name);
                        prop_assert_eq!(got.results[1].version, deleted);
                        // Deleting an expired key finds nothing; its expiry is the sweeper's to record.
                        if deleted > 0 {
                            model.entries.remove(del_name);
                        }
                    }
                    model.revision += 1;
                } else {
                    prop_assert_eq!(got.results[0].value.clone(), model.live(if_name).map(|e| json!(e.value)));
                }
                prop_assert_eq!(got.revision, model.revision, "step {}", step);
            }
            Op::Get { key } => {
                let name = KEYS[key];
                let got = store
                    .engine
                    .get(GetRequest { key: name.into(), version: None, revision: None })
                    .await
                    .expect("get");
                match model.live(name) {
                    Some(e) => prop_assert_eq!(
                        (got.status, got.version, got.value),
                        (ReadStatus::Ok, e.version, Some(json!(e.value)))
                    ),
                    None => prop_assert_eq!(got.status, ReadStatus::NotFound),
                }
                prop_assert_eq!(got.revision, model.revision);
            }
            Op::Advance { ms } => store.clock.advance_millis(ms),
            Op::Sweep => {
                let removed = store.engine.expire_due(100).await.expect("sweep");
                let now = model.now;
                let expired: Vec<&str> = model
                    .entries
                    .iter()
                    .filter(|(_, e)| e.expires.is_some_and(|at| at <= now))
                    .map(|(k, _)| *k)
                    .collect();
                prop_assert_eq!(removed, expired.len(), "step {}", step);
                for key in &expired {
                    model.entries.remove(key);
                }
                if !expired.is_empty() {
                    model.revision += 1;
                }
            }
        }
    }
    // Finally the whole visible state must match, as of the clock's final time.
    model.now = store.clock.now_millis() - start;
    let listing = store.engine.list(ListRequest { include_values: true, ..Default::default() }).await.expect("list");
    let engine_state: Vec<_> = listing.entries.iter().map(|e| (e.key.clone(), e.version, e.value.clone())).collect();
    let model_state: Vec<_> =
        KEYS.iter().filter_map(|k| model.live(k).map(|e| (k.to_string(), e.version, Some(json!(e.value))))).collect();
    prop_assert_eq!(engine_state, model_state);
    prop_assert_eq!(listing.revision, model.revision);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]
    #[test]
    fn engine_matches_model(ops in proptest::collection::vec(op(), 1..60)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(run(&crate::support::redb_memory, ops))?;
    }
}

proptest! {
    // Each case migrates a fresh schema: fewer cases, the same model.
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn postgres_engine_matches_model(ops in proptest::collection::vec(op(), 1..60)) {
        if crate::support::postgres_available() {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            runtime.block_on(run(&crate::support::postgres, ops))?;
        }
    }
}
