use std::collections::BTreeMap;

use super::{Changes, Plan, WriteContext};
use crate::entry::{Entry, live};
use crate::ops::OkStatus;
use crate::ops::ReadStatus;
use crate::ops::txn::{TxnOp, TxnOpKind, TxnOpResult, TxnRequest, TxnResult};
use crate::time::ttl_millis;

/// Plans a transaction against the stored entries of every key in `req.keys()` (a key missing
/// from `stored` is treated as absent). Compares see the state before the transaction;
/// operations run in order, each seeing the effects of the ones before it.
pub fn plan_txn(req: &TxnRequest, stored: &BTreeMap<String, Option<Entry>>, ctx: &WriteContext) -> Plan<TxnResult> {
    let stored_entry = |key: &str| stored.get(key).and_then(Option::as_ref);
    let before = |key: &str| live(stored_entry(key).cloned(), ctx.now);

    let failed_compares: Vec<usize> =
        req.compare.iter().enumerate().filter(|(_, c)| !c.holds(before(&c.key).as_ref())).map(|(i, _)| i).collect();
    let succeeded = failed_compares.is_empty();
    let ops = if succeeded { &req.success } else { &req.failure };

    let mut changes = Changes::new(ctx, req.agent_id.as_deref());
    // Keys already touched by this transaction, with their state after that operation.
    let mut overlay: BTreeMap<&str, Option<Entry>> = BTreeMap::new();
    let mut results = Vec::with_capacity(ops.len());
    for op in ops {
        let key = op.key();
        let current = match overlay.get(key) {
            Some(state) => state.clone(),
            None => before(key),
        };
        let result = match op {
            TxnOp::Get { .. } => TxnOpResult {
                op: TxnOpKind::Get,
                key: key.to_owned(),
                status: if current.is_some() { ReadStatus::Ok } else { ReadStatus::NotFound },
                version: current.as_ref().map_or(0, |e| e.version),
                value: current.map(|e| e.value),
            },
            TxnOp::Put { value, ttl_seconds, .. } => {
                let ttl = ttl_seconds.and_then(|s| ttl_millis("ttl_seconds", s).ok());
                // Validation guarantees a key is written at most once, so the stored entry
                // (not the overlay) is what this put replaces.
                let entry = changes.put(stored_entry(key), key, value.clone(), ttl);
                let version = entry.version;
                overlay.insert(key, Some(entry));
                TxnOpResult { op: TxnOpKind::Put, key: key.to_owned(), status: ReadStatus::Ok, version, value: None }
            }
            TxnOp::Delete { .. } => {
                let (status, version) = match &current {
                    Some(entry) => {
                        changes.delete(entry);
                        (ReadStatus::Ok, entry.version)
                    }
                    None => (ReadStatus::NotFound, 0),
                };
                overlay.insert(key, None);
                TxnOpResult { op: TxnOpKind::Delete, key: key.to_owned(), status, version, value: None }
            }
        };
        results.push(result);
    }
    let revision = changes.revision();
    changes.finish(TxnResult { status: OkStatus::Ok, succeeded, revision, failed_compares, results })
}
