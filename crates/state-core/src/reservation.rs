//! Reservation rules. A reservation is a system entry per (scope, holder, id) whose TTL is its
//! lifetime, like a lease: expiry is swept like any TTL, the id is the revision that granted
//! it (so it doubles as a fencing token), and history and watch see every grant, renewal,
//! release and expiry.
//!
//! Two reservations conflict when they belong to different holders, at least one is
//! exclusive, and some path matches a pattern of each (`glob::Glob::overlaps`). A holder's own
//! reservations never conflict with each other. A request that conflicts reserves nothing.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::entry::{Action, Entry, live};
use crate::glob::Glob;
use crate::keyspace;
use crate::ops::reservation::{
    MAX_CONFLICTS_LISTED, MAX_COVERING_LISTED, MAX_PAIRS_LISTED, MAX_PATTERNS_PER_SCOPE, MAX_RESERVATIONS_PER_HOLDER,
    MAX_RESERVATIONS_PER_SCOPE, PathCheckResult, ReservationConflict, ReservationInfo, ReservationListResult,
    ReservationReleaseRequest, ReservationRenewRequest, ReservationResult, ReservationStatus, ReserveResult,
    ReserveStatus, ScopeListResult, ScopeReservations,
};
use crate::plan::{Changes, Plan, ReadsFirst, Record, WriteContext};
use crate::time::UnixMillis;
use crate::view::{StateView, live_records, names_page};

/// What a reservation entry holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReservationRecord {
    pub holder: String,
    pub id: u64,
    pub patterns: Vec<String>,
    pub exclusive: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub acquired_at: UnixMillis,
}

impl ReservationRecord {
    fn from_entry(entry: &Entry) -> Option<ReservationRecord> {
        serde_json::from_value(entry.value.clone()).ok()
    }

    fn to_value(&self) -> Value {
        json!({
            "holder": self.holder,
            "id": self.id,
            "patterns": self.patterns,
            "exclusive": self.exclusive,
            "reason": self.reason,
            "acquired_at": self.acquired_at,
        })
    }

    fn globs(&self) -> Vec<(String, Glob)> {
        self.patterns.iter().filter_map(|p| Glob::parse(p).ok().map(|g| (p.clone(), g))).collect()
    }

    fn info(&self, entry: &Entry) -> ReservationInfo {
        ReservationInfo {
            reservation_id: self.id,
            holder: self.holder.clone(),
            patterns: self.patterns.clone(),
            exclusive: self.exclusive,
            reason: self.reason.clone(),
            acquired_at: self.acquired_at.to_rfc3339(),
            expires_at: expiry(entry),
        }
    }
}

fn expiry(entry: &Entry) -> String {
    entry.expires_at.map_or_else(|| "never".to_owned(), UnixMillis::to_rfc3339)
}

/// What a reserve asks for, read and checked by the request's `validate`.
pub struct Wanted<'a> {
    pub scope: &'a str,
    pub holder_id: &'a str,
    pub patterns: &'a [String],
    pub globs: &'a [Glob],
    pub exclusive: bool,
    pub reason: Option<&'a str>,
    pub ttl_millis: u64,
}

/// The live reservations under `prefix`.
fn live_under<V: StateView + ?Sized>(
    view: &V,
    prefix: &str,
    now: UnixMillis,
) -> Result<Vec<(Entry, ReservationRecord)>, V::Error> {
    live_records(view, prefix, now)
}

/// Steps of overlap checking one reservation request may take in all, against every
/// reservation of its scope: the writer's time one request can cost. Past it, the pairs left
/// are taken to overlap and the request is refused.
pub const OVERLAP_STEPS_PER_REQUEST: usize = 25_000;

/// The pairs of (wanted, theirs) patterns some path matches both of (or that could not be
/// told apart within what is left of `budget`): the first [`MAX_PAIRS_LISTED`], and how many
/// in all.
fn overlapping(wanted: &Wanted<'_>, theirs: &ReservationRecord, budget: &mut usize) -> (Vec<[String; 2]>, usize) {
    let their_globs = theirs.globs();
    let (mut pairs, mut total) = (Vec::new(), 0);
    for (mine, glob) in wanted.patterns.iter().zip(wanted.globs) {
        for (other, other_glob) in &their_globs {
            if glob.overlaps_within(other_glob, budget) {
                total += 1;
                if pairs.len() < MAX_PAIRS_LISTED {
                    pairs.push([mine.clone(), other.clone()]);
                }
            }
        }
    }
    (pairs, total)
}

/// Grants the reservation unless another holder's overlaps it where either is exclusive, or the
/// scope or the holder has reached its ceiling. The work is bounded whatever is stored: the
/// scope's reservations are read one by one and the reading stops at the eleventh in the way
/// (a refusal names at most [`MAX_CONFLICTS_LISTED`]), overlap checking stops at
/// [`OVERLAP_STEPS_PER_REQUEST`] steps, and a scope holds at most [`MAX_RESERVATIONS_PER_SCOPE`]
/// reservations and [`MAX_PATTERNS_PER_SCOPE`] patterns (so at most that many pairs per pattern
/// asked for, most of them told apart by their literal heads and tails at no cost).
pub fn plan_reserve<V: StateView + ?Sized>(
    view: &V,
    wanted: &Wanted<'_>,
    ctx: &WriteContext,
) -> Result<Plan<ReserveResult>, V::Error> {
    let refused = |status, conflicts, more_conflicts, limit: Option<String>| {
        Plan::unchanged(ReserveResult {
            status,
            scope: wanted.scope.to_owned(),
            reservation: None,
            conflicts,
            more_conflicts,
            limit,
            revision: ctx.revision,
        })
    };
    let (mut live, mut mine, mut patterns) = (0usize, 0usize, 0usize);
    let mut conflicts = Vec::new();
    let mut more_conflicts = false;
    let mut budget = OVERLAP_STEPS_PER_REQUEST;
    view.scan(&keyspace::reservation_prefix(wanted.scope), None, &mut |entry| {
        if entry.is_expired(ctx.now) {
            return true;
        }
        live += 1;
        let Some(theirs) = ReservationRecord::from_entry(&entry) else { return true };
        patterns += theirs.patterns.len();
        if theirs.holder == wanted.holder_id {
            mine += 1;
            return true;
        }
        if !(theirs.exclusive || wanted.exclusive) {
            return true;
        }
        let (overlapping, overlapping_total) = overlapping(wanted, &theirs, &mut budget);
        if overlapping_total == 0 {
            return true;
        }
        if conflicts.len() == MAX_CONFLICTS_LISTED {
            // Enough to refuse and to say why; the rest are not worth the writer's time.
            more_conflicts = true;
            return false;
        }
        conflicts.push(ReservationConflict { reservation: theirs.info(&entry), overlapping, overlapping_total });
        true
    })?;
    if !conflicts.is_empty() {
        return Ok(refused(ReserveStatus::Conflict, conflicts, more_conflicts, None));
    }
    if live >= MAX_RESERVATIONS_PER_SCOPE {
        let limit = format!("the scope holds {live} live reservations, its most");
        return Ok(refused(ReserveStatus::LimitReached, Vec::new(), false, Some(limit)));
    }
    if patterns + wanted.patterns.len() > MAX_PATTERNS_PER_SCOPE {
        let limit = format!(
            "the scope's reservations hold {patterns} patterns, and {} more would pass its most, {MAX_PATTERNS_PER_SCOPE}",
            wanted.patterns.len()
        );
        return Ok(refused(ReserveStatus::LimitReached, Vec::new(), false, Some(limit)));
    }
    if mine >= MAX_RESERVATIONS_PER_HOLDER {
        let limit = format!("you hold {mine} live reservations in this scope, the most one holder may");
        return Ok(refused(ReserveStatus::LimitReached, Vec::new(), false, Some(limit)));
    }
    let record = ReservationRecord {
        holder: wanted.holder_id.to_owned(),
        id: ctx.next_revision(),
        patterns: wanted.patterns.to_vec(),
        exclusive: wanted.exclusive,
        reason: wanted.reason.map(str::to_owned),
        acquired_at: ctx.now,
    };
    let key = keyspace::reservation_key(wanted.scope, wanted.holder_id, record.id);
    let mut changes = Changes::new(ctx, Some(wanted.holder_id));
    let detail = json!({
        "id": record.id,
        "patterns": record.patterns,
        "exclusive": record.exclusive,
        "ttl_ms": wanted.ttl_millis,
    });
    let transition = Record::Transition(Action::LeaseGrant, detail);
    let entry = changes.write(None, &key, record.to_value(), Some(wanted.ttl_millis), transition);
    let revision = changes.revision();
    Ok(changes.finish(ReserveResult {
        status: ReserveStatus::Granted,
        scope: wanted.scope.to_owned(),
        reservation: Some(record.info(&entry)),
        conflicts: Vec::new(),
        more_conflicts: false,
        limit: None,
        revision,
    }))
}

fn lost(scope: &str, ctx: &WriteContext) -> Plan<ReservationResult> {
    Plan::unchanged(ReservationResult {
        status: ReservationStatus::Lost,
        scope: scope.to_owned(),
        reservation_ids: Vec::new(),
        expires_at: None,
        revision: ctx.revision,
    })
}

impl ReadsFirst for ReservationRenewRequest {
    fn reads_first(&self) -> Vec<String> {
        vec![keyspace::reservation_key(&self.scope, &self.holder_id, self.reservation_id)]
    }
}

/// One reservation is a key to read; all of the caller's in the scope are a scan.
impl ReadsFirst for ReservationReleaseRequest {
    fn reads_first(&self) -> Vec<String> {
        self.reservation_id.map(|id| keyspace::reservation_key(&self.scope, &self.holder_id, id)).into_iter().collect()
    }
}

/// The caller's live reservation `id`.
fn held<V: StateView + ?Sized>(
    view: &V,
    scope: &str,
    holder_id: &str,
    id: u64,
    now: UnixMillis,
) -> Result<Option<(Entry, ReservationRecord)>, V::Error> {
    let entry = live(view.get(&keyspace::reservation_key(scope, holder_id, id))?, now);
    Ok(entry.and_then(|entry| ReservationRecord::from_entry(&entry).map(|record| (entry, record))))
}

/// Extends the caller's live reservation to `ttl` from now.
pub fn plan_renew<V: StateView + ?Sized>(
    view: &V,
    scope: &str,
    holder_id: &str,
    id: u64,
    ttl_millis: u64,
    ctx: &WriteContext,
) -> Result<Plan<ReservationResult>, V::Error> {
    let Some((entry, record)) = held(view, scope, holder_id, id, ctx.now)? else { return Ok(lost(scope, ctx)) };
    let mut changes = Changes::new(ctx, Some(holder_id));
    let transition = Record::Transition(Action::LeaseRenew, json!({"id": id, "ttl_ms": ttl_millis}));
    let key = entry.key.clone();
    let renewed = changes.write(Some(&entry), &key, record.to_value(), Some(ttl_millis), transition);
    let revision = changes.revision();
    Ok(changes.finish(ReservationResult {
        status: ReservationStatus::Ok,
        scope: scope.to_owned(),
        reservation_ids: vec![id],
        expires_at: Some(expiry(&renewed)),
        revision,
    }))
}

/// Ends the caller's reservation `id`, or every live one of the caller's in the scope.
pub fn plan_release<V: StateView + ?Sized>(
    view: &V,
    scope: &str,
    holder_id: &str,
    id: Option<u64>,
    ctx: &WriteContext,
) -> Result<Plan<ReservationResult>, V::Error> {
    let released = match id {
        Some(id) => held(view, scope, holder_id, id, ctx.now)?.into_iter().collect::<Vec<_>>(),
        None => live_under(view, &keyspace::reservation_holder_prefix(scope, holder_id), ctx.now)?,
    };
    if released.is_empty() {
        return Ok(lost(scope, ctx));
    }
    let mut changes = Changes::new(ctx, Some(holder_id));
    for (entry, record) in &released {
        changes.remove(entry, Record::Transition(Action::LeaseRelease, json!({"id": record.id})));
    }
    let revision = changes.revision();
    Ok(changes.finish(ReservationResult {
        status: ReservationStatus::Ok,
        scope: scope.to_owned(),
        reservation_ids: released.iter().map(|(_, r)| r.id).collect(),
        expires_at: None,
        revision,
    }))
}

/// The live reservations of a scope (of one holder, if given), in holder then id order.
pub fn list<V: StateView + ?Sized>(
    view: &V,
    scope: &str,
    holder_id: Option<&str>,
    now: UnixMillis,
    revision: u64,
) -> Result<ReservationListResult, V::Error> {
    let prefix = match holder_id {
        Some(holder) => keyspace::reservation_holder_prefix(scope, holder),
        None => keyspace::reservation_prefix(scope),
    };
    let reservations = live_under(view, &prefix, now)?.iter().map(|(e, r)| r.info(e)).collect();
    Ok(ReservationListResult { scope: scope.to_owned(), reservations, revision })
}

/// A page of the scopes whose name starts with `prefix` and that hold a live reservation,
/// each with its reservations.
pub fn list_scopes<V: StateView + ?Sized>(
    view: &V,
    prefix: &str,
    after: Option<&str>,
    page: usize,
    now: UnixMillis,
    revision: u64,
) -> Result<ScopeListResult, V::Error> {
    let space = keyspace::prefix(keyspace::Space::Reservation);
    let (names, next_cursor) = names_page(
        view,
        &space,
        prefix,
        after,
        page,
        now,
        |reservations: &mut Vec<ReservationInfo>, entry, record: ReservationRecord| {
            reservations.push(record.info(entry));
        },
    )?;
    let scopes = names.into_iter().map(|(scope, reservations)| ScopeReservations { scope, reservations }).collect();
    Ok(ScopeListResult { scopes, next_cursor, revision })
}

/// Whether `holder_id` may write `path`: not while another holder's exclusive reservation
/// covers it.
pub fn check<V: StateView + ?Sized>(
    view: &V,
    scope: &str,
    holder_id: &str,
    path: &str,
    now: UnixMillis,
    revision: u64,
) -> Result<PathCheckResult, V::Error> {
    let (mut blocking, mut yours, mut truncated) = (Vec::new(), Vec::new(), false);
    for (entry, record) in live_under(view, &keyspace::reservation_prefix(scope), now)? {
        if !record.globs().iter().any(|(_, glob)| glob.matches(path)) {
            continue;
        }
        let list = if record.holder == holder_id {
            &mut yours
        } else if record.exclusive {
            &mut blocking
        } else {
            continue;
        };
        if list.len() < MAX_COVERING_LISTED {
            list.push(record.info(&entry));
        } else {
            truncated = true;
        }
    }
    Ok(PathCheckResult { allowed: blocking.is_empty(), path: path.to_owned(), blocking, yours, truncated, revision })
}

#[cfg(test)]
mod tests;
