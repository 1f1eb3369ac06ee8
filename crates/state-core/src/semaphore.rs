//! Semaphore rules. A permit is a system entry per (semaphore, holder) whose TTL is the
//! permit's lifetime, exactly as a lease is one entry per resource: "how many are held" is
//! "how many live entries under the semaphore's prefix", expiry is swept like any TTL, and a
//! grant's fencing token is the revision that committed it.
//!
//! A holder has at most one permit of a semaphore: acquiring again renews it with the same
//! token. The capacity is stated by every acquire and stored in each permit; while any permit
//! is live, an acquire stating another capacity is refused (`capacity_mismatch`), so two
//! groups of agents never silently enforce different limits. With no live permit the next
//! acquire sets it.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::entry::{Action, Entry, live};
use crate::keyspace;
use crate::ops::semaphore::{
    PermitInfo, PermitResult, PermitStatus, SemaphoreAcquireResult, SemaphoreGetResult, SemaphoreListResult,
    SemaphoreReleaseRequest, SemaphoreRenewRequest, SemaphoreStatus, SemaphoreSummary,
};
use crate::plan::{Changes, Plan, ReadsFirst, Record, WriteContext};
use crate::time::UnixMillis;
use crate::view::{StateView, live_records, names_page};

/// What a permit entry holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermitRecord {
    pub holder: String,
    pub token: u64,
    pub acquired_at: UnixMillis,
    pub capacity: u32,
}

impl PermitRecord {
    fn from_entry(entry: &Entry) -> Option<PermitRecord> {
        serde_json::from_value(entry.value.clone()).ok()
    }

    fn to_value(&self) -> Value {
        json!({"holder": self.holder, "token": self.token, "acquired_at": self.acquired_at, "capacity": self.capacity})
    }
}

/// The live permits of `name`, in holder order.
fn live_permits<V: StateView + ?Sized>(
    view: &V,
    name: &str,
    now: UnixMillis,
) -> Result<Vec<(Entry, PermitRecord)>, V::Error> {
    live_records(view, &keyspace::permit_prefix(name), now)
}

fn expiry(entry: &Entry) -> String {
    entry.expires_at.map_or_else(|| "never".to_owned(), UnixMillis::to_rfc3339)
}

fn info(entry: &Entry, record: &PermitRecord) -> PermitInfo {
    PermitInfo {
        holder: record.holder.clone(),
        acquired_at: record.acquired_at.to_rfc3339(),
        expires_at: expiry(entry),
    }
}

fn write_permit(
    changes: &mut Changes<'_>,
    stored: Option<&Entry>,
    key: &str,
    record: &PermitRecord,
    ttl_millis: u64,
    action: Action,
) -> Entry {
    let detail =
        json!({"holder": record.holder, "token": record.token, "capacity": record.capacity, "ttl_ms": ttl_millis});
    changes.write(stored, key, record.to_value(), Some(ttl_millis), Record::Transition(action, detail))
}

/// Grants a permit if one is free (with a new token), renews the caller's own, and otherwise
/// reports who holds them all.
pub fn plan_acquire<V: StateView + ?Sized>(
    view: &V,
    name: &str,
    holder_id: &str,
    capacity: u32,
    ttl_millis: u64,
    ctx: &WriteContext,
) -> Result<Plan<SemaphoreAcquireResult>, V::Error> {
    let permits = live_permits(view, name, ctx.now)?;
    let in_force = permits.first().map_or(capacity, |(_, record)| record.capacity);
    let key = keyspace::permit_key(name, holder_id);
    let holders = |permits: &[(Entry, PermitRecord)]| permits.iter().map(|(e, r)| info(e, r)).collect::<Vec<_>>();
    let refused = |status, permits: &[(Entry, PermitRecord)]| {
        Plan::unchanged(SemaphoreAcquireResult {
            status,
            name: name.to_owned(),
            capacity: in_force,
            token: None,
            expires_at: None,
            holders: holders(permits),
            revision: ctx.revision,
        })
    };

    let mine = permits.iter().position(|(_, record)| record.holder == holder_id);
    let (record, action, stored) = match mine {
        // Renewing is holding on the same terms: a holder who now states another capacity
        // disagrees with the one in force (its own), like any newcomer would.
        Some(_) if in_force != capacity => return Ok(refused(SemaphoreStatus::CapacityMismatch, &permits)),
        Some(index) => {
            let (entry, record) = &permits[index];
            (record.clone(), Action::LeaseRenew, Some(entry.clone()))
        }
        None if in_force != capacity => return Ok(refused(SemaphoreStatus::CapacityMismatch, &permits)),
        None if permits.len() >= capacity as usize => return Ok(refused(SemaphoreStatus::Full, &permits)),
        None => {
            let record = PermitRecord {
                holder: holder_id.to_owned(),
                token: ctx.next_revision(),
                acquired_at: ctx.now,
                capacity,
            };
            // An expired permit of this holder not yet swept is replaced in place.
            (record, Action::LeaseGrant, view.get(&key)?)
        }
    };
    let mut changes = Changes::new(ctx, Some(holder_id));
    let entry = write_permit(&mut changes, stored.as_ref(), &key, &record, ttl_millis, action);
    let revision = changes.revision();
    let mut now_held: Vec<PermitInfo> =
        permits.iter().filter(|(_, r)| r.holder != holder_id).map(|(e, r)| info(e, r)).collect();
    now_held.push(info(&entry, &record));
    now_held.sort_by(|a, b| a.holder.cmp(&b.holder));
    Ok(changes.finish(SemaphoreAcquireResult {
        status: SemaphoreStatus::Acquired,
        name: name.to_owned(),
        capacity: in_force,
        token: Some(record.token),
        expires_at: Some(expiry(&entry)),
        holders: now_held,
        revision,
    }))
}

impl ReadsFirst for SemaphoreRenewRequest {
    fn reads_first(&self) -> Vec<String> {
        vec![keyspace::permit_key(&self.name, &self.holder_id)]
    }
}

impl ReadsFirst for SemaphoreReleaseRequest {
    fn reads_first(&self) -> Vec<String> {
        vec![keyspace::permit_key(&self.name, &self.holder_id)]
    }
}

/// The caller's live permit, if `token` is its token.
fn held<V: StateView + ?Sized>(
    view: &V,
    name: &str,
    holder_id: &str,
    token: u64,
    now: UnixMillis,
) -> Result<Option<(Entry, PermitRecord)>, V::Error> {
    let Some(entry) = live(view.get(&keyspace::permit_key(name, holder_id))?, now) else { return Ok(None) };
    Ok(PermitRecord::from_entry(&entry).filter(|record| record.token == token).map(|record| (entry, record)))
}

fn lost(name: &str, ctx: &WriteContext) -> Plan<PermitResult> {
    Plan::unchanged(PermitResult {
        status: PermitStatus::Lost,
        name: name.to_owned(),
        expires_at: None,
        revision: ctx.revision,
    })
}

/// Extends the caller's live permit to `ttl` from now.
pub fn plan_renew<V: StateView + ?Sized>(
    view: &V,
    name: &str,
    holder_id: &str,
    token: u64,
    ttl_millis: u64,
    ctx: &WriteContext,
) -> Result<Plan<PermitResult>, V::Error> {
    let Some((entry, record)) = held(view, name, holder_id, token, ctx.now)? else { return Ok(lost(name, ctx)) };
    let mut changes = Changes::new(ctx, Some(holder_id));
    let key = entry.key.clone();
    let entry = write_permit(&mut changes, Some(&entry), &key, &record, ttl_millis, Action::LeaseRenew);
    let revision = changes.revision();
    Ok(changes.finish(PermitResult {
        status: PermitStatus::Ok,
        name: name.to_owned(),
        expires_at: Some(expiry(&entry)),
        revision,
    }))
}

/// Gives the caller's live permit back, freeing it at once.
pub fn plan_release<V: StateView + ?Sized>(
    view: &V,
    name: &str,
    holder_id: &str,
    token: u64,
    ctx: &WriteContext,
) -> Result<Plan<PermitResult>, V::Error> {
    let Some((entry, record)) = held(view, name, holder_id, token, ctx.now)? else { return Ok(lost(name, ctx)) };
    let mut changes = Changes::new(ctx, Some(holder_id));
    let detail = json!({"holder": record.holder, "token": record.token});
    changes.remove(&entry, Record::Transition(Action::LeaseRelease, detail));
    let revision = changes.revision();
    Ok(changes.finish(PermitResult { status: PermitStatus::Ok, name: name.to_owned(), expires_at: None, revision }))
}

/// Who holds the semaphore's permits now. Tokens are not shown: only a grant hands them out.
pub fn get<V: StateView + ?Sized>(
    view: &V,
    name: &str,
    now: UnixMillis,
    revision: u64,
) -> Result<SemaphoreGetResult, V::Error> {
    let permits = live_permits(view, name, now)?;
    let capacity = permits.first().map(|(_, record)| record.capacity);
    let held = u32::try_from(permits.len()).unwrap_or(u32::MAX);
    Ok(SemaphoreGetResult {
        name: name.to_owned(),
        capacity,
        available: capacity.map(|c| c.saturating_sub(held)),
        holders: permits.iter().map(|(e, r)| info(e, r)).collect(),
        revision,
    })
}

/// A page of the semaphores whose name starts with `prefix` and that have a permit held.
pub fn list<V: StateView + ?Sized>(
    view: &V,
    prefix: &str,
    after: Option<&str>,
    page: usize,
    now: UnixMillis,
    revision: u64,
) -> Result<SemaphoreListResult, V::Error> {
    let space = keyspace::prefix(keyspace::Space::Permit);
    let (names, next_cursor) = names_page(
        view,
        &space,
        prefix,
        after,
        page,
        now,
        |held: &mut Vec<(u32, PermitInfo)>, entry, record: PermitRecord| {
            held.push((record.capacity, info(entry, &record)));
        },
    )?;
    let semaphores = names
        .into_iter()
        .map(|(name, held)| {
            let capacity = held.first().map_or(0, |(capacity, _)| *capacity);
            let taken = u32::try_from(held.len()).unwrap_or(u32::MAX);
            SemaphoreSummary {
                name,
                capacity,
                available: capacity.saturating_sub(taken),
                holders: held.into_iter().map(|(_, holder)| holder).collect(),
            }
        })
        .collect();
    Ok(SemaphoreListResult { semaphores, next_cursor, revision })
}

/// When the soonest of `name`'s live permits expires: a waiter need not look again before.
pub fn next_expiry<V: StateView + ?Sized>(
    view: &V,
    name: &str,
    now: UnixMillis,
) -> Result<Option<UnixMillis>, V::Error> {
    Ok(live_permits(view, name, now)?.iter().filter_map(|(entry, _)| entry.expires_at).min())
}

#[cfg(test)]
mod tests;
