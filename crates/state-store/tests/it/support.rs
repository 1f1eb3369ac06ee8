use std::sync::Arc;

use serde_json::{Value, json};
use state_core::UnixMillis;
use state_core::ops::history::{HistoryEvent, HistoryRequest};
use state_core::ops::kv::{GetRequest, GetResult, SetRequest, SetResult};
use state_store::backend::Backend;
use state_store::{Engine, EngineConfig, ManualClock, RedbBackend};

/// Start of every test's manual clock: 2026-11-21T00:00:00Z.
pub(crate) const T0: UnixMillis = UnixMillis(1_795_219_200_000);

/// An engine on some backend, driven by a manual clock.
pub(crate) struct Store {
    pub engine: Engine,
    pub clock: ManualClock,
    _dir: Option<tempfile::TempDir>,
}

/// The backends every conformance test runs against.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    RedbMemory,
    RedbFile,
}

impl Store {
    pub(crate) fn new(kind: Kind) -> Store {
        Store::with_config(kind, EngineConfig::default())
    }

    pub(crate) fn with_config(kind: Kind, config: EngineConfig) -> Store {
        let (backend, dir): (Arc<dyn Backend>, _) = match kind {
            Kind::RedbMemory => (Arc::new(RedbBackend::in_memory().expect("in-memory redb")), None),
            Kind::RedbFile => {
                let dir = tempfile::tempdir().expect("temp dir");
                let backend = RedbBackend::open(&dir.path().join("state.redb")).expect("open redb file");
                (Arc::new(backend), Some(dir))
            }
        };
        let clock = ManualClock::new(T0);
        let engine = Engine::new(backend, Arc::new(clock.clone()), config).expect("engine");
        Store { engine, clock, _dir: dir }
    }

    pub(crate) async fn set(&self, key: &str, value: Value) -> SetResult {
        self.engine.set(set_req(key, value, None)).await.expect("set")
    }

    pub(crate) async fn cas(&self, key: &str, value: Value, expected: u64) -> SetResult {
        self.engine.set(set_req(key, value, Some(expected))).await.expect("cas")
    }

    pub(crate) async fn get(&self, key: &str) -> GetResult {
        self.engine.get(GetRequest { key: key.into(), version: None, revision: None }).await.expect("get")
    }

    pub(crate) async fn revision(&self) -> u64 {
        self.engine.health().await.expect("health").revision
    }
}

/// Every history event after `since`, read page by page the way a client catches up.
pub(crate) async fn history_since(engine: &Engine, since: u64, page: usize) -> Vec<HistoryEvent> {
    let mut events = Vec::new();
    let mut since = since;
    loop {
        let req = HistoryRequest { since_revision: Some(since), n: Some(page), ..Default::default() };
        let got = engine.history(req).await.expect("history");
        events.extend(got.events.iter().cloned());
        match got.events.last() {
            Some(last) if got.more => since = last.revision,
            _ => return events,
        }
    }
}

pub(crate) fn set_req(key: &str, value: Value, expected: Option<u64>) -> SetRequest {
    SetRequest { expected_version: expected, ..SetRequest::new(key, value) }
}

pub(crate) fn txn(spec: Value) -> state_core::ops::txn::TxnRequest {
    serde_json::from_value(spec).expect("valid txn")
}

pub(crate) fn counter(n: u64) -> Value {
    json!({"n": n})
}
