//! Lease rules. A lease is a system entry whose TTL is the lease's lifetime, so "is it held"
//! is "is the entry live", expiry is recorded by the same sweeper as key TTLs, and a grant's
//! fencing token is simply the revision that committed it: unique, and larger than every
//! token granted before it anywhere in the store.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::entry::{Action, Entry, live};
use crate::keyspace::{self, Space};
use crate::ops::lease::{
    AcquireRequest, AcquireResult, AcquireStatus, HoldResult, HoldStatus, LeaseGetResult, LeaseInfo, LeaseListResult,
    LeaseState, ReleaseRequest, RenewRequest,
};
use crate::plan::{Changes, Plan, ReadsFirst, Record, WriteContext};
use crate::time::UnixMillis;
use crate::view::{StateView, scan_page};

/// What a lease entry holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRecord {
    pub holder: String,
    pub token: u64,
    pub acquired_at: UnixMillis,
}

impl LeaseRecord {
    pub fn from_entry(entry: &Entry) -> Option<LeaseRecord> {
        serde_json::from_value(entry.value.clone()).ok()
    }

    fn to_value(&self) -> Value {
        json!({"holder": self.holder, "token": self.token, "acquired_at": self.acquired_at})
    }
}

/// A live lease: its record and expiry.
fn held(entry: Option<Entry>, now: UnixMillis) -> Option<(Entry, LeaseRecord)> {
    let entry = live(entry, now)?;
    let record = LeaseRecord::from_entry(&entry)?;
    Some((entry, record))
}

fn expiry(entry: &Entry) -> String {
    entry.expires_at.map_or_else(|| "never".to_owned(), UnixMillis::to_rfc3339)
}

/// Who may renew or release: the holder, with the token when the caller has one. Profiles of
/// servers that had no tokens pass `None` and are matched on the holder alone.
#[derive(Debug, Clone, Copy)]
pub struct Holder<'a> {
    pub holder_id: &'a str,
    pub token: Option<u64>,
}

impl Holder<'_> {
    fn matches(&self, record: &LeaseRecord) -> bool {
        record.holder == self.holder_id && self.token.is_none_or(|t| t == record.token)
    }
}

impl ReadsFirst for AcquireRequest {
    fn reads_first(&self) -> Vec<String> {
        vec![keyspace::lease_key(&self.resource_id)]
    }
}

impl ReadsFirst for RenewRequest {
    fn reads_first(&self) -> Vec<String> {
        vec![keyspace::lease_key(&self.resource_id)]
    }
}

impl ReadsFirst for ReleaseRequest {
    fn reads_first(&self) -> Vec<String> {
        vec![keyspace::lease_key(&self.resource_id)]
    }
}

/// Grants the lease if it is free or expired (with a new token), extends it if the caller
/// already holds it (same token), and otherwise reports the current holder.
pub fn plan_acquire<V: StateView + ?Sized>(
    view: &V,
    resource_id: &str,
    holder_id: &str,
    ttl_millis: Option<u64>,
    ctx: &WriteContext,
) -> Result<Plan<AcquireResult>, V::Error> {
    let key = keyspace::lease_key(resource_id);
    let stored = view.get(&key)?;
    if let Some((entry, record)) = held(stored.clone(), ctx.now) {
        if record.holder != holder_id {
            return Ok(Plan::unchanged(AcquireResult {
                status: AcquireStatus::Held,
                resource_id: resource_id.to_owned(),
                holder: record.holder,
                token: None,
                expires_at: expiry(&entry),
                revision: ctx.revision,
            }));
        }
        let mut changes = Changes::new(ctx, Some(holder_id));
        let entry = write_lease(&mut changes, stored.as_ref(), &key, &record, ttl_millis, Action::LeaseRenew);
        let revision = changes.revision();
        return Ok(changes.finish(AcquireResult {
            status: AcquireStatus::Acquired,
            resource_id: resource_id.to_owned(),
            holder: record.holder,
            token: Some(record.token),
            expires_at: expiry(&entry),
            revision,
        }));
    }
    let token = ctx.next_revision();
    let record = LeaseRecord { holder: holder_id.to_owned(), token, acquired_at: ctx.now };
    let mut changes = Changes::new(ctx, Some(holder_id));
    let entry = write_lease(&mut changes, stored.as_ref(), &key, &record, ttl_millis, Action::LeaseGrant);
    let revision = changes.revision();
    Ok(changes.finish(AcquireResult {
        status: AcquireStatus::Acquired,
        resource_id: resource_id.to_owned(),
        holder: holder_id.to_owned(),
        token: Some(token),
        expires_at: expiry(&entry),
        revision,
    }))
}

/// Writes a lease record whose entry TTL is the lease's lifetime, recording the transition.
fn write_lease(
    changes: &mut Changes<'_>,
    stored: Option<&Entry>,
    key: &str,
    record: &LeaseRecord,
    ttl_millis: Option<u64>,
    action: Action,
) -> Entry {
    let detail = json!({"holder": record.holder, "token": record.token, "ttl_ms": ttl_millis});
    changes.write(stored, key, record.to_value(), ttl_millis, Record::Transition(action, detail))
}

fn lost(resource_id: &str, current: Option<LeaseRecord>, ctx: &WriteContext) -> Plan<HoldResult> {
    Plan::unchanged(HoldResult {
        status: HoldStatus::Lost,
        resource_id: resource_id.to_owned(),
        expires_at: None,
        holder: current.map(|r| r.holder),
        revision: ctx.revision,
    })
}

/// Extends a live lease held by the caller to `ttl` from now.
pub fn plan_renew<V: StateView + ?Sized>(
    view: &V,
    resource_id: &str,
    holder: Holder<'_>,
    ttl_millis: Option<u64>,
    ctx: &WriteContext,
) -> Result<Plan<HoldResult>, V::Error> {
    let key = keyspace::lease_key(resource_id);
    let stored = view.get(&key)?;
    let Some((_, record)) = held(stored.clone(), ctx.now) else { return Ok(lost(resource_id, None, ctx)) };
    if !holder.matches(&record) {
        return Ok(lost(resource_id, Some(record), ctx));
    }
    let mut changes = Changes::new(ctx, Some(holder.holder_id));
    let entry = write_lease(&mut changes, stored.as_ref(), &key, &record, ttl_millis, Action::LeaseRenew);
    let revision = changes.revision();
    Ok(changes.finish(HoldResult {
        status: HoldStatus::Ok,
        resource_id: resource_id.to_owned(),
        expires_at: Some(expiry(&entry)),
        holder: None,
        revision,
    }))
}

/// Ends a live lease held by the caller, freeing the resource at once.
pub fn plan_release<V: StateView + ?Sized>(
    view: &V,
    resource_id: &str,
    holder: Holder<'_>,
    ctx: &WriteContext,
) -> Result<Plan<HoldResult>, V::Error> {
    let key = keyspace::lease_key(resource_id);
    let Some((entry, record)) = held(view.get(&key)?, ctx.now) else { return Ok(lost(resource_id, None, ctx)) };
    if !holder.matches(&record) {
        return Ok(lost(resource_id, Some(record), ctx));
    }
    let mut changes = Changes::new(ctx, Some(holder.holder_id));
    let detail = json!({"holder": record.holder, "token": record.token});
    changes.remove(&entry, Record::Transition(Action::LeaseRelease, detail));
    let revision = changes.revision();
    Ok(changes.finish(HoldResult {
        status: HoldStatus::Ok,
        resource_id: resource_id.to_owned(),
        expires_at: None,
        holder: None,
        revision,
    }))
}

/// Why a guarded write was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fenced {
    /// No live lease on the resource: it expired or was released.
    NotHeld,
    /// The lease is live but was granted again since: the token is stale.
    Superseded { holder: String },
}

impl Fenced {
    pub fn message(&self, resource_id: &str, token: u64) -> String {
        match self {
            Fenced::NotHeld => format!(
                "token {token} is no longer valid: lease `{resource_id}` expired or was released; acquire it again before writing"
            ),
            Fenced::Superseded { holder } => format!(
                "token {token} is stale: lease `{resource_id}` was granted again since and is held by `{holder}`; your write was refused"
            ),
        }
    }
}

/// Accepts a write guarded by `token` only if it is the resource's current, live grant.
pub fn check_fence<V: StateView + ?Sized>(
    view: &V,
    resource_id: &str,
    token: u64,
    now: UnixMillis,
) -> Result<Result<(), Fenced>, V::Error> {
    Ok(match held(view.get(&keyspace::lease_key(resource_id))?, now) {
        None => Err(Fenced::NotHeld),
        Some((_, record)) if record.token != token => Err(Fenced::Superseded { holder: record.holder }),
        Some(_) => Ok(()),
    })
}

fn info(resource_id: &str, entry: &Entry, record: &LeaseRecord) -> LeaseInfo {
    LeaseInfo {
        resource_id: resource_id.to_owned(),
        holder: record.holder.clone(),
        acquired_at: record.acquired_at.to_rfc3339(),
        expires_at: expiry(entry),
    }
}

/// The current state of one lease. Tokens are not shown: only a grant hands them out.
pub fn get<V: StateView + ?Sized>(
    view: &V,
    resource_id: &str,
    now: UnixMillis,
    revision: u64,
) -> Result<LeaseGetResult, V::Error> {
    Ok(match held(view.get(&keyspace::lease_key(resource_id))?, now) {
        Some((entry, record)) => {
            let info = info(resource_id, &entry, &record);
            LeaseGetResult {
                status: LeaseState::Held,
                resource_id: info.resource_id,
                holder: Some(info.holder),
                acquired_at: Some(info.acquired_at),
                expires_at: Some(info.expires_at),
                revision,
            }
        }
        None => LeaseGetResult {
            status: LeaseState::Free,
            resource_id: resource_id.to_owned(),
            holder: None,
            acquired_at: None,
            expires_at: None,
            revision,
        },
    })
}

/// Live leases under a resource prefix, a page at a time.
pub fn list<V: StateView + ?Sized>(
    view: &V,
    prefix: &str,
    after: Option<&str>,
    page: usize,
    now: UnixMillis,
    revision: u64,
) -> Result<LeaseListResult, V::Error> {
    let space = keyspace::prefix(Space::Lease);
    let after_key = after.map(keyspace::lease_key);
    let (leases, next_cursor) = scan_page(
        view,
        &format!("{space}{prefix}"),
        after_key.as_deref(),
        page,
        |entry| {
            Ok(held(Some(entry), now).map(|(entry, record)| info(keyspace::classify(&entry.key).1, &entry, &record)))
        },
        |lease: &LeaseInfo| &lease.resource_id,
    )?;
    Ok(LeaseListResult { leases, next_cursor, revision })
}

#[cfg(test)]
mod tests;
