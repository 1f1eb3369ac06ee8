use super::{Changes, Plan, WriteContext};
use crate::entry::Entry;

/// Removes the given entries whose TTL has run out by `ctx.now`, leaving an `expired` event
/// for each. Entries still live (a concurrent write renewed them) are left alone.
/// The outcome is the number of keys removed.
pub fn plan_expire(candidates: &[Entry], ctx: &WriteContext) -> Plan<usize> {
    let mut changes = Changes::new(ctx, None);
    let mut removed = 0;
    for entry in candidates.iter().filter(|e| e.is_expired(ctx.now)) {
        changes.expire(entry);
        removed += 1;
    }
    changes.finish(removed)
}
