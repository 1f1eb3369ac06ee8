use crate::entry::Entry;
use crate::keyspace::{self, Space};
use crate::plan::{Changes, Plan, WriteContext};
use crate::view::StateView;
use crate::workflow;

/// Removes the given entries whose TTL has run out by `ctx.now`, recording each expiry. An
/// expired claim also returns its run to the queue (or fails it when no attempts remain).
/// Entries still live (a concurrent write renewed them) are left alone.
/// The outcome is the number of entries removed.
pub fn plan_expire<V: StateView + ?Sized>(
    view: &V,
    candidates: &[Entry],
    ctx: &WriteContext,
) -> Result<Plan<usize>, V::Error> {
    let mut changes = Changes::new(ctx, None);
    let mut removed = 0;
    for entry in candidates.iter().filter(|e| e.is_expired(ctx.now)) {
        match keyspace::classify(&entry.key).0 {
            Space::Claim => workflow::expire_claim(view, &mut changes, entry)?,
            _ => changes.expire(entry),
        }
        removed += 1;
    }
    Ok(changes.finish(removed))
}
