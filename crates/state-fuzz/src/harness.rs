//! What every target shares: one runtime, and stores in memory, made once per process (a fuzzer
//! runs millions of inputs in one process).

use std::sync::{Arc, OnceLock};

use state_api::{Api, Local};
use state_store::{Engine, EngineConfig, RedbBackend, SystemClock};

pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap())
}

/// A fresh engine on an in-memory database.
pub(crate) fn engine() -> Engine {
    let backend = RedbBackend::in_memory().unwrap();
    Engine::new(Arc::new(backend), Arc::new(SystemClock), EngineConfig::default()).unwrap()
}

/// One store in memory for the whole process, behind the seam, with a few records of every
/// kind (user keys, a lease, a run) for inputs to meet.
pub(crate) fn api() -> &'static Api {
    static API: OnceLock<Api> = OnceLock::new();
    API.get_or_init(|| {
        let api = runtime().block_on(async { Api::local(Local::without_maintenance(engine())) });
        runtime().block_on(seed(&api));
        api
    })
}

async fn seed(api: &Api) {
    use serde_json::json;
    use state_api::catalog::Operation;
    for (op, args) in [
        (Operation::StateSet, json!({"key": "a/1", "value": 1})),
        (Operation::StateSet, json!({"key": "b/2", "value": {"x": [1, 2]}})),
        (Operation::LeaseAcquire, json!({"resource_id": "a/lock", "holder_id": "h", "ttl_seconds": 600})),
        (Operation::WorkflowCreate, json!({"name": "a/job"})),
        (Operation::StateSet, json!({"key": "c", "value": "once", "request_id": "r1"})),
    ] {
        assert!(api.call(op, args).await.body.is_ok());
    }
}

/// Text from fuzz bytes, lossily: most targets speak text protocols.
pub(crate) fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}
