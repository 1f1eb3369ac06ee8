use std::collections::BTreeMap;

use super::{fence_key, fenced};
use crate::entry::{Entry, live};
use crate::ops::ReadStatus;
use crate::ops::txn::{TxnOp, TxnOpKind, TxnOpResult, TxnRequest, TxnResult, TxnStatus};
use crate::plan::{Changes, Plan, ReadsFirst, WriteContext};
use crate::time::ttl_millis;
use crate::view::StateView;

impl ReadsFirst for TxnRequest {
    /// The fence, every compare's key and every operation's, each once: whichever branch
    /// runs, the plan reads no other key.
    fn reads_first(&self) -> Vec<String> {
        let named = self.compare.iter().map(|c| c.key.as_str());
        let operated = self.success.iter().chain(&self.failure).map(TxnOp::key);
        let mut keys: Vec<String> = fence_key(&self.lease, self.token).into_iter().collect();
        for key in named.chain(operated) {
            if !keys.iter().any(|k| k == key) {
                keys.push(key.to_owned());
            }
        }
        keys
    }
}

/// Plans a transaction. Compares see the state before the transaction; operations run in
/// order, each seeing the effects of the ones before it. A stale lease token refuses it all.
pub fn plan_txn<V: StateView + ?Sized>(
    view: &V,
    req: &TxnRequest,
    ctx: &WriteContext,
) -> Result<Plan<TxnResult>, V::Error> {
    if let Some(message) = fenced(view, &req.lease, req.token, ctx)? {
        return Ok(Plan::unchanged(TxnResult {
            status: TxnStatus::Fenced,
            succeeded: false,
            revision: ctx.revision,
            failed_compares: Vec::new(),
            results: Vec::new(),
            message: Some(message),
        }));
    }
    let mut stored: BTreeMap<&str, Option<Entry>> = BTreeMap::new();
    let keys = req.compare.iter().map(|c| c.key.as_str()).chain(req.success.iter().chain(&req.failure).map(TxnOp::key));
    for key in keys {
        if !stored.contains_key(key) {
            stored.insert(key, view.get(key)?);
        }
    }
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
    Ok(changes.finish(TxnResult {
        status: TxnStatus::Ok,
        succeeded,
        revision,
        failed_compares,
        results,
        message: None,
    }))
}
