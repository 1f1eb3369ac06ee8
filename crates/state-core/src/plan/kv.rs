use super::{Changes, Plan, WriteContext};
use crate::entry::{Entry, live};
use crate::occ::check_expected;
use crate::ops::kv::{DeleteRequest, DeleteResult, SetRequest, SetResult};
use crate::ops::{DeleteStatus, WriteStatus};
use crate::time::ttl_millis;

/// Plans a put. `stored` is the entry as the store holds it, possibly expired.
pub fn plan_set(req: &SetRequest, stored: Option<&Entry>, ctx: &WriteContext) -> Plan<SetResult> {
    let current = live(stored.cloned(), ctx.now);
    let current_version = current.as_ref().map_or(0, |e| e.version);
    if let Err(mismatch) = check_expected(current_version, req.expected_version) {
        return Plan::unchanged(SetResult {
            status: WriteStatus::Conflict,
            key: req.key.clone(),
            version: mismatch.current,
            revision: ctx.revision,
            value: current.map(|e| e.value),
            expected_version: Some(mismatch.expected),
        });
    }
    // Validation already rejected a bad TTL; treat one that slipped through as "no TTL"
    // rather than panicking inside the writer.
    let ttl = req.ttl_seconds.and_then(|s| ttl_millis("ttl_seconds", s).ok());
    let mut changes = Changes::new(ctx, req.agent_id.as_deref());
    let entry = changes.put(stored, &req.key, req.value.clone(), ttl);
    let revision = changes.revision();
    changes.finish(SetResult {
        status: WriteStatus::Ok,
        key: entry.key,
        version: entry.version,
        revision,
        value: None,
        expected_version: None,
    })
}

/// Plans a delete. Deleting an absent (or expired) key is `not_found` and changes nothing.
pub fn plan_delete(req: &DeleteRequest, stored: Option<&Entry>, ctx: &WriteContext) -> Plan<DeleteResult> {
    let current = live(stored.cloned(), ctx.now);
    let current_version = current.as_ref().map_or(0, |e| e.version);
    let unchanged = |status, value| {
        Plan::unchanged(DeleteResult {
            status,
            key: req.key.clone(),
            version: current_version,
            revision: ctx.revision,
            value,
        })
    };
    let Some(current) = current else {
        return unchanged(DeleteStatus::NotFound, None);
    };
    if check_expected(current_version, req.expected_version).is_err() {
        return unchanged(DeleteStatus::Conflict, Some(current.value));
    }
    let mut changes = Changes::new(ctx, req.agent_id.as_deref());
    changes.delete(&current);
    let revision = changes.revision();
    changes.finish(DeleteResult {
        status: DeleteStatus::Ok,
        key: current.key,
        version: current.version,
        revision,
        value: None,
    })
}
