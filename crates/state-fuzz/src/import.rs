//! Dump imports, as a hostile dump file reaches the server: whatever records it holds, the
//! import is applied whole or refused with a reason, never an internal error, and the store
//! answers reads afterwards.

use serde_json::{Value, json};
use state_api::Outcome;
use state_api::catalog::Operation;

pub(crate) fn records(data: &[u8]) {
    let records: Vec<Value> =
        crate::harness::text(data).lines().filter_map(|line| serde_json::from_str(line).ok()).collect();
    let api = crate::harness::api();
    let runtime = crate::harness::runtime();
    for dry_run in [true, false] {
        let reply = runtime.block_on(api.call(Operation::StoreImport, json!({"records": records, "dry_run": dry_run})));
        assert_ne!(reply.outcome, Outcome::Internal, "{:?}", reply.body);
    }
    let health = runtime.block_on(api.call(Operation::StateHealth, json!({})));
    assert!(health.body.is_ok(), "{:?}", health.body);
}
