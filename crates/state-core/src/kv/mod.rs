//! Keys' rules: set and delete under version and lease guards (`mod.rs`), transactions
//! (`txn.rs`).

use crate::entry::live;
use crate::keyspace;
use crate::lease::check_fence;
use crate::occ::check_expected;
use crate::ops::kv::{DeleteRequest, DeleteResult, SetRequest, SetResult};
use crate::ops::{DeleteStatus, WriteStatus};
use crate::plan::{Changes, Plan, ReadsFirst, WriteContext};
use crate::time::ttl_millis;
use crate::view::StateView;

/// The refusal message when a guarded write's lease token is not current, else `None`.
pub(crate) fn fenced<V: StateView + ?Sized>(
    view: &V,
    lease: &Option<String>,
    token: Option<u64>,
    ctx: &WriteContext,
) -> Result<Option<String>, V::Error> {
    let (Some(lease), Some(token)) = (lease, token) else { return Ok(None) };
    Ok(check_fence(view, lease, token, ctx.now)?.err().map(|refusal| refusal.message(lease, token)))
}

/// The lease record a guarded write checks, when it names a lease and a token.
pub(crate) fn fence_key(lease: &Option<String>, token: Option<u64>) -> Option<String> {
    lease.as_deref().filter(|_| token.is_some()).map(keyspace::lease_key)
}

/// A guarded write of one key reads the key and, when fenced, its lease.
fn key_and_fence(key: &str, lease: &Option<String>, token: Option<u64>) -> Vec<String> {
    std::iter::once(key.to_owned()).chain(fence_key(lease, token)).collect()
}

impl ReadsFirst for SetRequest {
    fn reads_first(&self) -> Vec<String> {
        key_and_fence(&self.key, &self.lease, self.token)
    }
}

impl ReadsFirst for DeleteRequest {
    fn reads_first(&self) -> Vec<String> {
        key_and_fence(&self.key, &self.lease, self.token)
    }
}

/// Plans a put: the fence first, then the version guard, then the write.
pub fn plan_set<V: StateView + ?Sized>(
    view: &V,
    req: &SetRequest,
    ctx: &WriteContext,
) -> Result<Plan<SetResult>, V::Error> {
    let stored = view.get(&req.key)?;
    let current = live(stored.clone(), ctx.now);
    let current_version = current.as_ref().map_or(0, |e| e.version);
    let refused = |status, value, expected_version, message| {
        Plan::unchanged(SetResult {
            status,
            key: req.key.clone(),
            version: current_version,
            revision: ctx.revision,
            value,
            expected_version,
            message,
        })
    };
    if let Some(message) = fenced(view, &req.lease, req.token, ctx)? {
        return Ok(refused(WriteStatus::Fenced, None, None, Some(message)));
    }
    if let Err(mismatch) = check_expected(current_version, req.expected_version) {
        return Ok(refused(WriteStatus::Conflict, current.map(|e| e.value), Some(mismatch.expected), None));
    }
    // Validation already rejected a bad TTL; treat one that slipped through as "no TTL"
    // rather than panicking inside the writer.
    let ttl = req.ttl_seconds.and_then(|s| ttl_millis("ttl_seconds", s).ok());
    let mut changes = Changes::new(ctx, req.agent_id.as_deref());
    let entry = changes.put(stored.as_ref(), &req.key, req.value.clone(), ttl);
    let revision = changes.revision();
    Ok(changes.finish(SetResult {
        status: WriteStatus::Ok,
        key: entry.key,
        version: entry.version,
        revision,
        value: None,
        expected_version: None,
        message: None,
    }))
}

/// Plans a delete. Deleting an absent (or expired) key is `not_found` and changes nothing.
pub fn plan_delete<V: StateView + ?Sized>(
    view: &V,
    req: &DeleteRequest,
    ctx: &WriteContext,
) -> Result<Plan<DeleteResult>, V::Error> {
    let current = live(view.get(&req.key)?, ctx.now);
    let current_version = current.as_ref().map_or(0, |e| e.version);
    let refused = |status, value, message| {
        Plan::unchanged(DeleteResult {
            status,
            key: req.key.clone(),
            version: current_version,
            revision: ctx.revision,
            value,
            message,
        })
    };
    if let Some(message) = fenced(view, &req.lease, req.token, ctx)? {
        return Ok(refused(DeleteStatus::Fenced, None, Some(message)));
    }
    let Some(current) = current else {
        return Ok(refused(DeleteStatus::NotFound, None, None));
    };
    if check_expected(current_version, req.expected_version).is_err() {
        return Ok(refused(DeleteStatus::Conflict, Some(current.value), None));
    }
    let mut changes = Changes::new(ctx, req.agent_id.as_deref());
    changes.delete(&current);
    let revision = changes.revision();
    Ok(changes.finish(DeleteResult {
        status: DeleteStatus::Ok,
        key: current.key,
        version: current.version,
        revision,
        value: None,
        message: None,
    }))
}

mod txn;
pub use txn::plan_txn;

#[cfg(test)]
mod tests;
