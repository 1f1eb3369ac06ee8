//! The conformance suite: the behaviour every storage backend must show, written once over a
//! [`BackendFactory`] and driven by a manual clock. A backend crate runs all of it with one
//! line in its tests:
//!
//! ```ignore
//! fn my_backend() -> state_store::conformance::Fixture { ... }
//! state_store::conformance_suite!(my_backend);
//! ```
//!
//! There are no per-backend branches: what differs between backends (a file or not, its
//! name) is read from the backend itself.

// Test code: a panic is how a story reports that a backend broke the contract.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod stories;

use std::any::Any;
use std::sync::Arc;

use serde_json::{Value, json};
use state_core::UnixMillis;
use state_core::ops::history::{HistoryEvent, HistoryRequest};
use state_core::ops::kv::{GetRequest, GetResult, SetRequest, SetResult};
use state_core::ops::lease::AcquireRequest;

use crate::backend::Backend;
use crate::{Engine, EngineConfig, ManualClock};

/// A fresh, empty backend, and whatever must live as long as it (a temporary directory, a
/// database schema to drop).
pub struct Fixture {
    pub backend: Arc<dyn Backend>,
    pub keep: Box<dyn Any + Send + Sync>,
}

impl Fixture {
    pub fn new(backend: Arc<dyn Backend>) -> Fixture {
        Fixture { backend, keep: Box::new(()) }
    }
}

/// Makes a fresh backend for each story.
pub trait BackendFactory: Send + Sync {
    fn create(&self) -> Fixture;
}

impl<F: Fn() -> Fixture + Send + Sync> BackendFactory for F {
    fn create(&self) -> Fixture {
        self()
    }
}

/// Start of every story's manual clock: 2026-11-21T00:00:00Z.
pub const T0: UnixMillis = UnixMillis(1_795_219_200_000);

/// An engine over a fresh backend, driven by a manual clock.
pub struct Store {
    pub engine: Engine,
    pub clock: ManualClock,
    /// The backend's name, as health reports it.
    pub kind: &'static str,
    _keep: Box<dyn Any + Send + Sync>,
}

impl Store {
    pub fn new(factory: &dyn BackendFactory) -> Store {
        Store::with_config(factory, EngineConfig::default())
    }

    pub fn with_config(factory: &dyn BackendFactory, config: EngineConfig) -> Store {
        let Fixture { backend, keep } = factory.create();
        let kind = backend.kind();
        let clock = ManualClock::new(T0);
        let engine = Engine::new(backend, Arc::new(clock.clone()), config).expect("engine");
        Store { engine, clock, kind, _keep: keep }
    }

    pub async fn set(&self, key: &str, value: Value) -> SetResult {
        self.engine.set(set_req(key, value, None)).await.expect("set")
    }

    pub async fn cas(&self, key: &str, value: Value, expected: u64) -> SetResult {
        self.engine.set(set_req(key, value, Some(expected))).await.expect("cas")
    }

    pub async fn get(&self, key: &str) -> GetResult {
        self.engine.get(GetRequest { key: key.into(), version: None, revision: None }).await.expect("get")
    }

    pub async fn revision(&self) -> u64 {
        self.engine.revision().await.expect("revision")
    }
}

/// Every history event after `since`, read page by page the way a client catches up.
pub async fn history_since(engine: &Engine, since: u64, page: usize) -> Vec<HistoryEvent> {
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

pub fn set_req(key: &str, value: Value, expected: Option<u64>) -> SetRequest {
    SetRequest { expected_version: expected, ..SetRequest::new(key, value) }
}

pub fn txn(spec: Value) -> state_core::ops::txn::TxnRequest {
    serde_json::from_value(spec).expect("valid txn")
}

/// A lease request for `resource` by `holder`.
pub fn lease(resource: &str, holder: &str, ttl_seconds: f64) -> AcquireRequest {
    AcquireRequest { resource_id: resource.into(), holder_id: holder.into(), ttl_seconds, request_id: None }
}

pub fn counter(n: u64) -> Value {
    json!({"n": n})
}

/// One `#[tokio::test]` per story, each on a fresh backend from `$factory` (anything
/// implementing [`BackendFactory`], such as a `fn() -> Fixture`). With `if = $available`
/// (a `fn() -> bool`), each story first asks it and returns at once when it says no: for a
/// backend that needs a server the test machine may not have (it should say why on stderr).
#[macro_export]
macro_rules! conformance_suite {
    ($factory:expr) => {
        $crate::conformance_suite!($factory, if = || true);
    };
    ($factory:expr, if = $available:expr) => {
        $crate::conformance_suite!(@stories $factory, $available;
            versions_and_revisions,
            conditional_writes,
            delete_and_recreate,
            ttl_expiry,
            transactions_are_all_or_nothing,
            history_and_reads_in_the_past,
            compaction,
            listing,
            listing_folders,
            batch_reads,
            bad_input_changes_nothing,
            health_reports_the_store,
            leases_and_fenced_writes,
            semaphores_grant_up_to_their_capacity,
            path_reservations_refuse_overlaps,
            queues_deliver_at_least_once_with_receipts,
            coordination_records_are_listed_by_name,
            runs_wait_for_their_dependencies,
            the_sweeper_releases_what_a_completion_left_waiting,
            workflow_lifecycle,
            sessions_keep_every_version,
            reset_wipes_but_revisions_continue,
            system_records_stay_out_of_user_listings,
            one_revision_can_hold_several_events_of_one_key,
            acknowledged_writes_are_read_at_once,
            request_ids_make_retries_safe,
            request_records_stay_out_of_sight,
            knowledge_index_follows_every_note_write,
            history_records_who_made_each_change,
            requests_in_one_batch_see_each_others_writes,
        );
    };
    (@stories $factory:expr, $available:expr; $($story:ident),* $(,)?) => {
        $(
            #[::tokio::test]
            async fn $story() {
                if !($available)() {
                    return;
                }
                $crate::conformance::stories::$story(&$factory).await
            }
        )*
    };
}
