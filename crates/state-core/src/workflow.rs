//! The workflow run state machine.
//!
//! A run is a system entry (`RunRecord`); the worker's claim on it is a separate entry whose
//! TTL is the claim's lease, so a worker that stops heartbeating loses the run exactly when
//! its lease runs out, and the sweeper (or the next claim) returns the run to the queue with
//! the next attempt. Every operation that only the holder may perform checks the holder and
//! the fencing token against the live claim; a worker that was paused past its lease is
//! refused as `fenced` instead of clobbering its successor's work.
//!
//! ```text
//!             claim                complete
//!  pending ─────────▶ running ─────────────▶ completed
//!     ▲                │  │ fail(retryable, attempts left) ─▶ pending
//!     │  claim expired │  │ fail / claim expired on the last attempt ─▶ failed
//!     └────────────────┘  │ cancel (from pending or running) ─▶ cancelled
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::entry::{Action, Entry, live};
use crate::keyspace::{self, Space};
use crate::ops::workflow::{
    AwaitSignalResult, AwaitStatus, CancelResult, CancelStatus, CheckpointResult, CheckpointStatus, ClaimResult,
    ClaimStatus, CreateRunRequest, CreateRunResult, CreateStatus, FinishResult, FoundStatus, HeartbeatResult,
    HolderStatus, ListRunsResult, ListStatus, MAX_SIGNALS, PendingState, ResumeResult, RunStatus, RunStatusResult,
    RunSummary, Signal, SignalRequest, SignalResult, SignalStatus, StepOutput,
};
use crate::plan::{Changes, Plan, Record, WriteContext};
use crate::time::UnixMillis;
use crate::view::{StateView, scan_page};

/// What a run entry holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub name: String,
    pub tags: BTreeMap<String, String>,
    pub input: Value,
    pub status: RunStatus,
    /// Claims so far.
    pub attempt: u32,
    pub max_attempts: u32,
    /// Holder and token of the current (or, once finished, the last) claim.
    pub holder: Option<String>,
    pub token: Option<u64>,
    pub last_step: u64,
    pub result: Option<Value>,
    pub error: Option<String>,
    pub created_at: UnixMillis,
    pub updated_at: UnixMillis,
    /// Runs that must complete first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    #[serde(default)]
    pub priority: u8,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<UnixMillis>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedupe_key: Option<String>,
    /// Parked until a signal of this name, with an id above `after`, arrives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub awaiting: Option<Awaiting>,
    /// Runs sharing the key run at most `limit` at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<Concurrency>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Concurrency {
    pub key: String,
    pub limit: u32,
}

/// What a parked run waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Awaiting {
    pub name: String,
    pub after: u64,
}

/// What a claim entry holds; its TTL is the claim's lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimRecord {
    pub holder: String,
    pub token: u64,
}

/// What a step entry holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    pub output: Value,
    pub agent_id: Option<String>,
    pub attempt: u32,
    pub at: UnixMillis,
}

fn decode<T: serde::de::DeserializeOwned>(entry: &Entry) -> Option<T> {
    serde_json::from_value(entry.value.clone()).ok()
}

fn encode<T: Serialize>(record: &T) -> Value {
    serde_json::to_value(record).unwrap_or(Value::Null)
}

/// A run id from the moment and revision of its creation, in ULID form (Crockford base32,
/// 48 bits of milliseconds then 80 bits of revision): sortable by creation, unique because
/// revisions are, and needing no randomness.
pub fn run_id(now: UnixMillis, revision: u64) -> String {
    const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    let value: u128 = (u128::from(now.0 & 0xFFFF_FFFF_FFFF) << 80) | u128::from(revision);
    (0..26).rev().map(|i| ALPHABET[((value >> (i * 5)) & 31) as usize] as char).collect()
}

/// A run as stored, with its claim, read at one instant.
#[derive(Debug, Clone)]
pub struct RunView {
    pub entry: Entry,
    pub run: RunRecord,
    pub claim: Option<Entry>,
}

/// Where a run really is at `now`, whether or not the sweeper has caught up.
#[derive(Debug, Clone, PartialEq)]
pub enum Phase {
    Pending,
    /// Held by a live claim.
    Held {
        claim: ClaimRecord,
        expires_at: Option<UnixMillis>,
    },
    /// Its worker's claim ran out; claimable again if attempts remain.
    Lapsed {
        attempts_left: bool,
    },
    Finished(RunStatus),
}

impl RunView {
    pub fn load<V: StateView + ?Sized>(view: &V, run_id: &str) -> Result<Option<RunView>, V::Error> {
        let Some(entry) = view.get(&keyspace::run_key(run_id))? else { return Ok(None) };
        let Some(run) = decode::<RunRecord>(&entry) else { return Ok(None) };
        let claim = view.get(&keyspace::claim_key(run_id))?;
        Ok(Some(RunView { entry, run, claim }))
    }

    pub fn run_id(&self) -> &str {
        keyspace::classify(&self.entry.key).1
    }

    pub fn phase(&self, now: UnixMillis) -> Phase {
        match self.run.status {
            RunStatus::Pending => Phase::Pending,
            RunStatus::Running => {
                let claim =
                    live(self.claim.clone(), now).and_then(|e| decode::<ClaimRecord>(&e).map(|c| (c, e.expires_at)));
                match claim {
                    Some((claim, expires_at)) if Some(claim.token) == self.run.token => {
                        Phase::Held { claim, expires_at }
                    }
                    _ => Phase::Lapsed { attempts_left: self.run.attempt < self.run.max_attempts },
                }
            }
            done => Phase::Finished(done),
        }
    }

    pub fn status(&self, now: UnixMillis) -> RunStatus {
        match self.phase(now) {
            Phase::Pending | Phase::Lapsed { attempts_left: true } => RunStatus::Pending,
            Phase::Held { .. } => RunStatus::Running,
            Phase::Lapsed { attempts_left: false } => RunStatus::Failed,
            Phase::Finished(status) => status,
        }
    }

    pub fn summary(&self, now: UnixMillis) -> RunSummary {
        let phase = self.phase(now);
        let (holder, lease_expires_at) = match &phase {
            Phase::Held { claim, expires_at } => (Some(claim.holder.clone()), expires_at.map(UnixMillis::to_rfc3339)),
            _ => (None, None),
        };
        let error = match phase {
            Phase::Lapsed { attempts_left: false } => Some(lapse_error(&self.run)),
            _ => self.run.error.clone(),
        };
        RunSummary {
            run_id: self.run_id().to_owned(),
            name: self.run.name.clone(),
            run_status: self.status(now),
            tags: self.run.tags.clone(),
            attempt: self.run.attempt,
            max_attempts: self.run.max_attempts,
            last_step: self.run.last_step,
            holder,
            lease_expires_at,
            error,
            priority: self.run.priority,
            depends_on: self.run.depends_on.clone(),
            waiting_on: Vec::new(),
            blocked_by: None,
            not_before: self.run.not_before.filter(|at| *at > now).map(UnixMillis::to_rfc3339),
            awaiting_signal: self.run.awaiting.as_ref().map(|a| a.name.clone()),
            limited_by: None,
            state: None,
            created_at: self.run.created_at.to_rfc3339(),
            updated_at: self.run.updated_at.to_rfc3339(),
        }
    }

    /// The summary with what the run waits on: its unfinished dependencies, or the one that
    /// failed or was cancelled and so blocks it for good.
    pub fn describe<V: StateView + ?Sized>(&self, view: &V, now: UnixMillis) -> Result<RunSummary, V::Error> {
        let mut summary = self.summary(now);
        if summary.run_status != RunStatus::Pending {
            return Ok(summary);
        }
        let deps = dependencies(view, &self.run, now)?;
        summary.waiting_on = deps.waiting_on;
        summary.blocked_by = deps.blocked_by;
        let parked = match &self.run.awaiting {
            Some(awaiting) => signal_named(view, self.run_id(), &awaiting.name, awaiting.after)?.is_none(),
            None => false,
        };
        if !parked {
            // A signal that came makes the name history, not a reason.
            summary.awaiting_signal = None;
        }
        // The same order a claim decides in (`ready`, then `at_limit`), so `claimable` is
        // exactly what a claim could take.
        summary.state = Some(if summary.blocked_by.is_some() {
            PendingState::Blocked
        } else if parked {
            PendingState::Parked
        } else if !summary.waiting_on.is_empty() {
            PendingState::Waiting
        } else if summary.not_before.is_some() {
            PendingState::Delayed
        } else if at_limit(view, self, now)? {
            summary.limited_by = self
                .run
                .concurrency
                .as_ref()
                .map(|c| format!("concurrency key `{}` already runs its limit of {}", c.key, c.limit));
            PendingState::Waiting
        } else {
            PendingState::Claimable
        });
        Ok(summary)
    }

    fn matches(&self, name: Option<&str>, tags: &BTreeMap<String, String>) -> bool {
        name.is_none_or(|n| n == self.run.name) && tags.iter().all(|(k, v)| self.run.tags.get(k) == Some(v))
    }
}

/// Where a run's dependencies stand.
#[derive(Debug, Default)]
struct Dependencies {
    waiting_on: Vec<String>,
    blocked_by: Option<String>,
}

impl Dependencies {
    fn met(&self) -> bool {
        self.waiting_on.is_empty() && self.blocked_by.is_none()
    }
}

/// A run's dependencies at `now`. A dependency that does not exist blocks the run like one
/// that failed: waiting for it could never end.
fn dependencies<V: StateView + ?Sized>(view: &V, run: &RunRecord, now: UnixMillis) -> Result<Dependencies, V::Error> {
    let mut deps = Dependencies::default();
    for dep in &run.depends_on {
        match RunView::load(view, dep)?.map(|d| d.status(now)) {
            Some(RunStatus::Completed) => {}
            Some(RunStatus::Pending | RunStatus::Running) => deps.waiting_on.push(dep.clone()),
            Some(status) => {
                deps.blocked_by.get_or_insert_with(|| format!("dependency {dep} is {}", status_name(status)));
            }
            None => {
                deps.blocked_by.get_or_insert_with(|| format!("dependency {dep} does not exist"));
            }
        }
    }
    Ok(deps)
}

fn status_name(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Pending => "pending",
        RunStatus::Running => "running",
        RunStatus::Completed => "completed",
        RunStatus::Failed => "failed",
        RunStatus::Cancelled => "cancelled",
    }
}

/// Whether a run whose phase allows a claim may be claimed now: its delay passed and every
/// dependency completed.
fn ready<V: StateView + ?Sized>(view: &V, run: &RunView, now: UnixMillis) -> Result<bool, V::Error> {
    if run.run.not_before.is_some_and(|at| at > now) {
        return Ok(false);
    }
    if let Some(awaiting) = &run.run.awaiting
        && signal_named(view, run.run_id(), &awaiting.name, awaiting.after)?.is_none()
    {
        return Ok(false);
    }
    Ok(dependencies(view, &run.run, now)?.met())
}

/// Every signal sent to a run, oldest first.
pub fn signals<V: StateView + ?Sized>(view: &V, run_id: &str) -> Result<Vec<Signal>, V::Error> {
    let mut found = Vec::new();
    view.scan(&keyspace::signal_prefix(run_id), None, &mut |entry| {
        let id = entry.key.rsplit('\u{2}').next().and_then(|n| n.parse::<u64>().ok());
        if let (Some(signal_id), Some(name)) = (id, entry.value.get("name").and_then(Value::as_str)) {
            found.push(Signal {
                signal_id,
                name: name.to_owned(),
                value: entry.value.get("value").cloned().unwrap_or(Value::Null),
                sent_at: entry.updated_at.to_rfc3339(),
                sender: entry.agent_id.clone(),
            });
        }
        true
    })?;
    Ok(found)
}

/// The first signal named `name` with an id above `after`.
fn signal_named<V: StateView + ?Sized>(
    view: &V,
    run_id: &str,
    name: &str,
    after: u64,
) -> Result<Option<Signal>, V::Error> {
    Ok(signals(view, run_id)?.into_iter().find(|s| s.name == name && s.signal_id > after))
}

/// Records a signal for a run that has not finished.
pub fn plan_signal<V: StateView + ?Sized>(
    view: &V,
    req: &SignalRequest,
    ctx: &WriteContext,
) -> Result<Plan<SignalResult>, V::Error> {
    let refused = |status| {
        Plan::unchanged(SignalResult { status, run_id: req.run_id.clone(), signal_id: None, revision: ctx.revision })
    };
    let Some(run) = RunView::load(view, &req.run_id)? else { return Ok(refused(SignalStatus::NotFound)) };
    if matches!(run.phase(ctx.now), Phase::Finished(_) | Phase::Lapsed { attempts_left: false }) {
        return Ok(refused(SignalStatus::Finished));
    }
    if signals(view, &req.run_id)?.len() >= MAX_SIGNALS {
        return Ok(refused(SignalStatus::Full));
    }
    let signal_id = ctx.next_revision();
    let mut changes = Changes::new(ctx, req.sender.as_deref());
    let detail = json!({"name": req.name, "signal_id": signal_id});
    let value = json!({"name": req.name, "value": req.value});
    let key = keyspace::signal_key(&req.run_id, signal_id);
    changes.write(None, &key, value, None, Record::Transition(Action::RunSignal, detail));
    let revision = changes.revision();
    let result =
        SignalResult { status: SignalStatus::Ok, run_id: req.run_id.clone(), signal_id: Some(signal_id), revision };
    Ok(changes.finish(result))
}

/// Parks a run its caller holds until a signal named `name` (id above `after`) arrives; or,
/// when one already has, answers with it and changes nothing.
pub fn plan_await_signal<V: StateView + ?Sized>(
    view: &V,
    run_id: &str,
    caller: Caller<'_>,
    name: &str,
    after: u64,
    ctx: &WriteContext,
) -> Result<Plan<AwaitSignalResult>, V::Error> {
    let answer = |status, signal, message| AwaitSignalResult {
        status,
        run_id: run_id.to_owned(),
        signal,
        message,
        revision: ctx.revision,
    };
    let run = match authorize(view, run_id, caller, ctx.now)? {
        Authorized::Yes(run) => run,
        Authorized::NotFound => return Ok(Plan::unchanged(answer(AwaitStatus::NotFound, None, None))),
        Authorized::Refused(why, _) => return Ok(Plan::unchanged(answer(AwaitStatus::Fenced, None, Some(why)))),
    };
    if let Some(signal) = signal_named(view, run_id, name, after)? {
        return Ok(Plan::unchanged(answer(AwaitStatus::Signaled, Some(signal), None)));
    }
    let mut changes = Changes::new(ctx, caller.agent_id);
    if let Some(claim) = &run.claim {
        changes.remove(claim, Record::Silent);
    }
    let mut parked = run.run.clone();
    parked.status = RunStatus::Pending;
    parked.holder = None;
    parked.token = None;
    parked.awaiting = Some(Awaiting { name: name.to_owned(), after });
    parked.updated_at = ctx.now;
    let detail = json!({"name": name, "after_signal_id": after, "attempt": parked.attempt});
    save_run(&mut changes, &run.entry, &parked, Action::RunAwaitSignal, detail);
    let revision = changes.revision();
    Ok(changes.finish(AwaitSignalResult { revision, ..answer(AwaitStatus::Waiting, None, None) }))
}

fn lapse_error(run: &RunRecord) -> String {
    format!("the claim of attempt {} expired and no attempts remain (max_attempts {})", run.attempt, run.max_attempts)
}

/// Creates a run, pending, with a time-ordered id; or, when an unfinished run carries the
/// same dedupe key, returns that one.
pub fn plan_create<V: StateView + ?Sized>(
    view: &V,
    req: &CreateRunRequest,
    ctx: &WriteContext,
) -> Result<Plan<CreateRunResult>, V::Error> {
    let dedupe_index = req.dedupe_key.as_deref().map(|key| keyspace::run_dedupe_key(&req.name, key));
    if let Some(index) = &dedupe_index
        && let Some(entry) = view.get(index)?
        && let Some(existing) = entry.value.get("run_id").and_then(Value::as_str)
        && let Some(run) = RunView::load(view, existing)?
        && matches!(run.status(ctx.now), RunStatus::Pending | RunStatus::Running)
    {
        return Ok(Plan::unchanged(CreateRunResult {
            status: CreateStatus::Duplicate,
            run_id: existing.to_owned(),
            name: run.run.name,
            revision: ctx.revision,
        }));
    }
    let id = run_id(ctx.now, ctx.next_revision());
    let delay = req.delay_millis();
    let run = RunRecord {
        name: req.name.clone(),
        tags: req.tags.clone(),
        input: req.input.clone(),
        status: RunStatus::Pending,
        attempt: 0,
        max_attempts: req.max_attempts(),
        holder: None,
        token: None,
        last_step: 0,
        result: None,
        error: None,
        created_at: ctx.now,
        updated_at: ctx.now,
        depends_on: req.depends_on.clone(),
        priority: req.priority.unwrap_or(0),
        not_before: (delay > 0).then(|| ctx.now.plus_millis(delay)),
        dedupe_key: req.dedupe_key.clone(),
        awaiting: None,
        concurrency: req
            .concurrency_key
            .as_ref()
            .map(|key| Concurrency { key: key.clone(), limit: req.concurrency_limit.unwrap_or(1) }),
    };
    let mut changes = Changes::new(ctx, req.agent_id.as_deref());
    let mut detail = json!({"name": run.name, "tags": run.tags, "max_attempts": run.max_attempts});
    if !run.depends_on.is_empty() {
        detail["depends_on"] = json!(run.depends_on);
    }
    changes.write(None, &keyspace::run_key(&id), encode(&run), None, Record::Transition(Action::RunCreate, detail));
    // A run enters the claim order only once nothing it depends on is unfinished, so claims
    // never reread the runs that wait; until then it is noted under each dependency it waits
    // on, and the completion of the last one enqueues it. A blocked run is never enqueued.
    let deps = dependencies(view, &run, ctx.now)?;
    if deps.met() {
        changes.write(None, &keyspace::queue_key_for(&id, run.priority), Value::Null, None, Record::Silent);
    } else if deps.blocked_by.is_none() {
        for dependency in &deps.waiting_on {
            changes.write(None, &keyspace::dependent_key(dependency, &id), Value::Null, None, Record::Silent);
        }
    }
    if let Some(index) = &dedupe_index {
        let stored = view.get(index)?;
        changes.write(stored.as_ref(), index, json!({"run_id": id}), None, Record::Silent);
    }
    let revision = changes.revision();
    Ok(changes.finish(CreateRunResult { status: CreateStatus::Ok, run_id: id, name: req.name.clone(), revision }))
}

/// Writes a run's claim entry: silent, its TTL is the claim's lease.
fn write_claim(
    changes: &mut Changes<'_>,
    stored: Option<&Entry>,
    run_id: &str,
    claim: &ClaimRecord,
    ttl: Option<u64>,
) -> Entry {
    changes.write(stored, &keyspace::claim_key(run_id), encode(claim), ttl, Record::Silent)
}

/// Writes the new state of a run, recording the transition.
fn save_run(changes: &mut Changes<'_>, stored: &Entry, run: &RunRecord, action: Action, detail: Value) -> Entry {
    changes.write(Some(stored), &stored.key, encode(run), None, Record::Transition(action, detail))
}

/// Leaves the queue and drops the claim: the run is finished. The runs waiting on it are
/// released (see [`release_dependents`]).
fn retire<V: StateView + ?Sized>(
    view: &V,
    changes: &mut Changes<'_>,
    run: &RunView,
    completed: bool,
) -> Result<(), V::Error> {
    if let Some(claim) = &run.claim {
        changes.remove(claim, Record::Silent);
    }
    changes.drop_key(&keyspace::queue_key_for(run.run_id(), run.run.priority));
    if release_dependents(view, changes, run.run_id(), completed)? {
        // A run retires once, so no record can exist yet: the sweeper's word that more wait.
        let release = keyspace::release_key(run.run_id());
        changes.write(None, &release, json!({"completed": completed}), None, Record::Silent);
    }
    Ok(())
}

/// Most waiting runs one write releases, so that completing a run many others wait on stays
/// a bounded write for the single writer; the sweeper releases the rest.
pub const RELEASES_PER_WRITE: usize = 256;

/// Drops the notes of runs waiting on `dependency`, which just finished, enqueueing those it
/// was the last unfinished dependency of when it `completed` (when it did not, they stay
/// blocked for good, out of the claim order). At most [`RELEASES_PER_WRITE`] at a time;
/// returns whether more remain (a `Release` record then says so, for
/// [`plan_release_pending`]).
fn release_dependents<V: StateView + ?Sized>(
    view: &V,
    changes: &mut Changes<'_>,
    dependency: &str,
    completed: bool,
) -> Result<bool, V::Error> {
    let mut notes = Vec::new();
    view.scan(&keyspace::dependent_prefix(dependency), None, &mut |entry| {
        notes.push(entry.key);
        notes.len() <= RELEASES_PER_WRITE
    })?;
    let more = notes.len() > RELEASES_PER_WRITE;
    notes.truncate(RELEASES_PER_WRITE);
    for note in notes {
        changes.drop_key(&note);
        let Some(dependent) = keyspace::dependent_run_id(&note) else { continue };
        if !completed {
            continue;
        }
        let Some(waiting) = RunView::load(view, dependent)? else { continue };
        if waiting.status(changes.now()).is_terminal() {
            continue;
        }
        // Called by the completion itself, the view still shows `dependency` unfinished.
        let mut deps = dependencies(view, &waiting.run, changes.now())?;
        deps.waiting_on.retain(|dep| dep != dependency);
        if deps.met() {
            let queued = keyspace::queue_key_for(dependent, waiting.run.priority);
            changes.write(None, &queued, Value::Null, None, Record::Silent);
        }
    }
    Ok(more)
}

/// Releases the runs still waiting on finished runs, for the sweeper: up to
/// [`RELEASES_PER_WRITE`] of them. Returns how many finished runs it worked on (0: none left).
pub fn plan_release_pending<V: StateView + ?Sized>(view: &V, ctx: &WriteContext) -> Result<Plan<usize>, V::Error> {
    let mut pending = None;
    view.scan(&keyspace::prefix(Space::Release), None, &mut |entry| {
        pending = Some(entry);
        false
    })?;
    let mut changes = Changes::new(ctx, None);
    let Some(record) = pending else { return Ok(changes.finish(0)) };
    let dependency = keyspace::classify(&record.key).1.to_owned();
    let completed = record.value.get("completed").and_then(Value::as_bool).unwrap_or(false);
    if !release_dependents(view, &mut changes, &dependency, completed)? {
        changes.remove(&record, Record::Silent);
    }
    Ok(changes.finish(1))
}

/// Settles a run whose claim ran out: back to pending while attempts remain, else failed.
/// Returns the run as it now stands.
fn settle_lapse<V: StateView + ?Sized>(
    state: &V,
    changes: &mut Changes<'_>,
    view: &RunView,
) -> Result<RunView, V::Error> {
    let mut run = view.run.clone();
    let attempts_left = run.attempt < run.max_attempts;
    let previous = run.holder.clone();
    if attempts_left {
        run.status = RunStatus::Pending;
    } else {
        run.status = RunStatus::Failed;
        run.error = Some(lapse_error(&run));
    }
    run.updated_at = changes.now();
    let detail = json!({"attempt": run.attempt, "holder": previous, "run_status": run.status});
    if let Some(claim) = &view.claim {
        if claim.is_expired(changes.now()) {
            changes.expire(claim);
        } else {
            changes.remove(claim, Record::Silent);
        }
    }
    if !attempts_left {
        retire(state, changes, &RunView { claim: None, ..view.clone() }, false)?;
    }
    let entry = save_run(changes, &view.entry, &run, Action::RunClaimExpire, detail);
    Ok(RunView { entry, run, claim: None })
}

/// The claim-expiry transition, for the sweeper: `expired` is a claim entry whose TTL ran out.
pub(crate) fn expire_claim<V: StateView + ?Sized>(
    view: &V,
    changes: &mut Changes<'_>,
    expired: &Entry,
) -> Result<(), V::Error> {
    let (_, run_id) = keyspace::classify(&expired.key);
    match RunView::load(view, run_id)? {
        Some(run) if matches!(run.phase(changes.now()), Phase::Lapsed { .. }) => {
            settle_lapse(view, changes, &run)?;
        }
        // An orphaned or superseded claim: just drop it.
        _ => changes.expire(expired),
    }
    Ok(())
}

/// The claim parameters of one request.
#[derive(Debug, Clone, Copy)]
pub struct ClaimArgs<'a> {
    pub agent_id: &'a str,
    /// `None`: the claim never lapses (profiles of servers without claim leases).
    pub ttl_millis: Option<u64>,
    pub run_id: Option<&'a str>,
    pub name: Option<&'a str>,
    pub tags: &'a BTreeMap<String, String>,
}

fn claim_outcome(status: ClaimStatus, revision: u64) -> ClaimResult {
    ClaimResult {
        status,
        run_id: None,
        name: None,
        token: None,
        attempt: None,
        max_attempts: None,
        last_step: None,
        input: None,
        lease_expires_at: None,
        holder: None,
        run_status: None,
        signals: Vec::new(),
        revision,
    }
}

/// Claims a given run, or the oldest claimable run matching the filters.
pub fn plan_claim<V: StateView + ?Sized>(
    view: &V,
    args: ClaimArgs<'_>,
    ctx: &WriteContext,
) -> Result<Plan<ClaimResult>, V::Error> {
    let now = ctx.now;
    let target = match args.run_id {
        Some(run_id) => {
            let Some(run) = RunView::load(view, run_id)? else {
                return Ok(Plan::unchanged(ClaimResult {
                    run_id: Some(run_id.to_owned()),
                    ..claim_outcome(ClaimStatus::NotFound, ctx.revision)
                }));
            };
            match run.phase(now) {
                Phase::Held { claim, expires_at } if claim.holder != args.agent_id => {
                    return Ok(Plan::unchanged(ClaimResult {
                        run_id: Some(run_id.to_owned()),
                        holder: Some(claim.holder),
                        lease_expires_at: expires_at.map(UnixMillis::to_rfc3339),
                        ..claim_outcome(ClaimStatus::Held, ctx.revision)
                    }));
                }
                Phase::Finished(_) | Phase::Lapsed { attempts_left: false } => {
                    return Ok(Plan::unchanged(ClaimResult {
                        run_id: Some(run_id.to_owned()),
                        run_status: Some(run.status(now)),
                        ..claim_outcome(ClaimStatus::Finished, ctx.revision)
                    }));
                }
                Phase::Pending | Phase::Lapsed { .. } if !ready(view, &run, now)? || at_limit(view, &run, now)? => {
                    return Ok(Plan::unchanged(ClaimResult {
                        run_id: Some(run_id.to_owned()),
                        run_status: Some(RunStatus::Pending),
                        ..claim_outcome(ClaimStatus::Waiting, ctx.revision)
                    }));
                }
                _ => run,
            }
        }
        None => match next_claimable(view, args, now)? {
            Some(run) => run,
            None => return Ok(Plan::unchanged(claim_outcome(ClaimStatus::NoneAvailable, ctx.revision))),
        },
    };
    let mut changes = Changes::new(ctx, Some(args.agent_id));
    let signals = signals(view, target.run_id())?;
    let result = ClaimResult { signals, ..claim_run(view, &mut changes, target, args)? };
    Ok(changes.finish(result))
}

/// Visits the unfinished runs in claim order (highest priority, then oldest) until `visit`
/// says stop: the runs with a priority are indexed apart, by priority, so a claim reads runs
/// from the front of the order and stops at the first it can take.
fn scan_queued<V: StateView + ?Sized>(
    view: &V,
    visit: &mut dyn FnMut(RunView) -> Result<bool, V::Error>,
) -> Result<(), V::Error> {
    let mut failure = None;
    let mut go_on = true;
    for prefix in [keyspace::prefix(Space::PriorityQueue), keyspace::prefix(Space::Queue)] {
        if !go_on {
            break;
        }
        view.scan(&prefix, None, &mut |queued| {
            let loaded = RunView::load(view, keyspace::queued_run_id(&queued.key));
            go_on = match loaded {
                Ok(Some(run)) => visit(run).unwrap_or_else(|e| {
                    failure = Some(e);
                    false
                }),
                Ok(None) => true,
                Err(e) => {
                    failure = Some(e);
                    false
                }
            };
            go_on
        })?;
    }
    failure.map_or(Ok(()), Err)
}

/// The first run in claim order that matches the filters and can be claimed now: its phase
/// allows it, its delay passed, its dependencies completed (or its signal came), and its
/// concurrency key is below its limit.
fn next_claimable<V: StateView + ?Sized>(
    view: &V,
    args: ClaimArgs<'_>,
    now: UnixMillis,
) -> Result<Option<RunView>, V::Error> {
    let mut found = None;
    scan_queued(view, &mut |run| {
        if run.matches(args.name, args.tags)
            && claimable(&run.phase(now))
            && ready(view, &run, now)?
            && !at_limit(view, &run, now)?
        {
            found = Some(run);
            return Ok(false);
        }
        Ok(true)
    })?;
    Ok(found)
}

/// Whether the runs sharing `run`'s concurrency key already run as many as its limit allows.
/// A held run has a claim entry, so the claims (as many as the runs being worked on, not as
/// many as wait) are what is read.
fn at_limit<V: StateView + ?Sized>(view: &V, run: &RunView, now: UnixMillis) -> Result<bool, V::Error> {
    let Some(concurrency) = &run.run.concurrency else { return Ok(false) };
    let mut claimed = Vec::new();
    view.scan(&keyspace::prefix(Space::Claim), None, &mut |claim| {
        claimed.push(keyspace::classify(&claim.key).1.to_owned());
        true
    })?;
    let mut running = 0;
    for run_id in claimed {
        let Some(other) = RunView::load(view, &run_id)? else { continue };
        let same_key = other.run.concurrency.as_ref().is_some_and(|c| c.key == concurrency.key);
        if same_key && matches!(other.phase(now), Phase::Held { .. }) {
            running += 1;
            if running >= concurrency.limit {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

fn claimable(phase: &Phase) -> bool {
    matches!(phase, Phase::Pending | Phase::Lapsed { attempts_left: true })
}

fn claim_run<V: StateView + ?Sized>(
    view: &V,
    changes: &mut Changes<'_>,
    target: RunView,
    args: ClaimArgs<'_>,
) -> Result<ClaimResult, V::Error> {
    let now = changes.now();
    // The claim's fencing token is the revision that commits it, like a lease grant's.
    let token = changes.next_revision();
    let run_id = target.run_id().to_owned();
    // Any claim after the first attempt is a reclaim, whether the lapse was already swept or not.
    let action = if target.run.attempt > 0 { Action::RunReclaim } else { Action::RunClaim };
    let target = match target.phase(now) {
        // The same worker claiming again (say, after losing a response) renews its claim.
        Phase::Held { claim, .. } => {
            let mut run = target.run.clone();
            run.updated_at = now;
            let claim_entry = write_claim(changes, target.claim.as_ref(), &run_id, &claim, args.ttl_millis);
            let detail = json!({"attempt": run.attempt, "holder": claim.holder, "token": claim.token});
            let entry = save_run(changes, &target.entry, &run, Action::RunHeartbeat, detail);
            return Ok(claimed(&run_id, &run, claim.token, &entry, claim_entry.expires_at));
        }
        Phase::Lapsed { .. } => settle_lapse(view, changes, &target)?,
        _ => target,
    };
    let mut run = target.run.clone();
    run.status = RunStatus::Running;
    // A run that parked for a signal continues its attempt: waiting is not failing.
    if run.awaiting.take().is_none() {
        run.attempt += 1;
    }
    run.holder = Some(args.agent_id.to_owned());
    run.token = Some(token);
    run.updated_at = now;
    let claim = ClaimRecord { holder: args.agent_id.to_owned(), token };
    let claim_entry = write_claim(changes, target.claim.as_ref(), &run_id, &claim, args.ttl_millis);
    let detail = json!({"attempt": run.attempt, "holder": args.agent_id, "token": token});
    let entry = save_run(changes, &target.entry, &run, action, detail);
    Ok(claimed(&run_id, &run, token, &entry, claim_entry.expires_at))
}

fn claimed(run_id: &str, run: &RunRecord, token: u64, entry: &Entry, expires_at: Option<UnixMillis>) -> ClaimResult {
    ClaimResult {
        status: ClaimStatus::Claimed,
        run_id: Some(run_id.to_owned()),
        name: Some(run.name.clone()),
        token: Some(token),
        attempt: Some(run.attempt),
        max_attempts: Some(run.max_attempts),
        last_step: Some(run.last_step),
        input: Some(run.input.clone()),
        lease_expires_at: expires_at.map(UnixMillis::to_rfc3339),
        holder: None,
        run_status: None,
        signals: Vec::new(),
        revision: entry.mod_revision,
    }
}

/// Who is asking to act as a run's holder. Profiles of servers without tokens pass `None`s
/// and are not fenced (that server accepted such calls from anyone).
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    pub agent_id: Option<&'a str>,
    pub token: Option<u64>,
}

impl Caller<'_> {
    fn is_fenced(&self) -> bool {
        self.agent_id.is_some() || self.token.is_some()
    }
}

enum Authorized {
    Yes(RunView),
    NotFound,
    Refused(String, RunView),
}

/// Checks that the caller holds a live claim on the run with its current token.
fn authorize<V: StateView + ?Sized>(
    view: &V,
    run_id: &str,
    caller: Caller<'_>,
    now: UnixMillis,
) -> Result<Authorized, V::Error> {
    let Some(run) = RunView::load(view, run_id)? else { return Ok(Authorized::NotFound) };
    if !caller.is_fenced() {
        return Ok(Authorized::Yes(run));
    }
    let refusal = match run.phase(now) {
        Phase::Held { claim, .. }
            if caller.agent_id.is_none_or(|a| a == claim.holder) && caller.token.is_none_or(|t| t == claim.token) =>
        {
            return Ok(Authorized::Yes(run));
        }
        Phase::Held { claim, .. } => format!(
            "run `{run_id}` is held by `{}` (attempt {}); your claim is no longer current",
            claim.holder, run.run.attempt
        ),
        Phase::Lapsed { .. } => format!("your claim on run `{run_id}` expired; claim the run again to continue"),
        Phase::Pending => format!("run `{run_id}` is not claimed; claim it first"),
        Phase::Finished(status) => format!("run `{run_id}` is already {}", status.as_str()),
    };
    Ok(Authorized::Refused(refusal, run))
}

/// How strictly a checkpoint is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepRule {
    /// Steps advance by one; a recorded step may only be re-sent with the same output.
    Sequential,
    /// Any step number; re-sending a step replaces its output (profiles of servers that did so).
    Overwrite,
}

/// Records a step's output for the run's current holder.
pub fn plan_checkpoint<V: StateView + ?Sized>(
    view: &V,
    run_id: &str,
    caller: Caller<'_>,
    step: u64,
    output: &Value,
    rule: StepRule,
    ctx: &WriteContext,
) -> Result<Plan<CheckpointResult>, V::Error> {
    let outcome = |status, last_step, message: Option<String>| CheckpointResult {
        status,
        run_id: run_id.to_owned(),
        step,
        last_step,
        signals: Vec::new(),
        revision: ctx.revision,
        message,
    };
    let run = match authorize(view, run_id, caller, ctx.now)? {
        Authorized::Yes(run) => run,
        Authorized::NotFound => return Ok(Plan::unchanged(outcome(CheckpointStatus::NotFound, 0, None))),
        Authorized::Refused(why, run) => {
            return Ok(Plan::unchanged(outcome(CheckpointStatus::Fenced, run.run.last_step, Some(why))));
        }
    };
    let last = run.run.last_step;
    let step_key = keyspace::step_key(run_id, step);
    let recorded = view.get(&step_key)?;
    if rule == StepRule::Sequential {
        if let Some(recorded) = recorded.as_ref().and_then(decode::<StepRecord>) {
            return Ok(Plan::unchanged(if &recorded.output == output {
                outcome(CheckpointStatus::Duplicate, last, None)
            } else {
                outcome(
                    CheckpointStatus::Conflict,
                    last,
                    Some(format!(
                        "step {step} was already recorded with a different output; steps are immutable once accepted"
                    )),
                )
            }));
        }
        if step != last + 1 {
            return Ok(Plan::unchanged(outcome(
                CheckpointStatus::Conflict,
                last,
                Some(format!("step {step} is out of order: the next step is {}", last + 1)),
            )));
        }
    }
    let mut changes = Changes::new(ctx, caller.agent_id);
    let record = StepRecord {
        output: output.clone(),
        agent_id: caller.agent_id.map(str::to_owned),
        attempt: run.run.attempt,
        at: ctx.now,
    };
    changes.write(recorded.as_ref(), &step_key, encode(&record), None, Record::Silent);
    let mut updated = run.run.clone();
    updated.last_step = last.max(step);
    updated.updated_at = ctx.now;
    let detail = json!({"step": step, "attempt": updated.attempt});
    save_run(&mut changes, &run.entry, &updated, Action::RunCheckpoint, detail);
    let revision = changes.revision();
    let signals = signals(view, run_id)?;
    Ok(changes.finish(CheckpointResult { revision, signals, ..outcome(CheckpointStatus::Ok, updated.last_step, None) }))
}

fn holder_refusal(run_id: &str, status: HolderStatus, message: Option<String>, revision: u64) -> HeartbeatResult {
    HeartbeatResult {
        status,
        run_id: run_id.to_owned(),
        lease_expires_at: None,
        signals: Vec::new(),
        revision,
        message,
    }
}

/// Renews the caller's claim for another `ttl` from now.
pub fn plan_heartbeat<V: StateView + ?Sized>(
    view: &V,
    run_id: &str,
    caller: Caller<'_>,
    ttl_millis: Option<u64>,
    ctx: &WriteContext,
) -> Result<Plan<HeartbeatResult>, V::Error> {
    let run = match authorize(view, run_id, caller, ctx.now)? {
        Authorized::Yes(run) => run,
        Authorized::NotFound => {
            return Ok(Plan::unchanged(holder_refusal(run_id, HolderStatus::NotFound, None, ctx.revision)));
        }
        Authorized::Refused(why, _) => {
            return Ok(Plan::unchanged(holder_refusal(run_id, HolderStatus::Fenced, Some(why), ctx.revision)));
        }
    };
    let Phase::Held { claim, .. } = run.phase(ctx.now) else {
        let why = format!("run `{run_id}` is not claimed; claim it first");
        return Ok(Plan::unchanged(holder_refusal(run_id, HolderStatus::Fenced, Some(why), ctx.revision)));
    };
    let mut changes = Changes::new(ctx, caller.agent_id);
    let claim_entry = write_claim(&mut changes, run.claim.as_ref(), run_id, &claim, ttl_millis);
    let mut updated = run.run.clone();
    updated.updated_at = ctx.now;
    let detail = json!({"attempt": updated.attempt, "holder": claim.holder, "token": claim.token});
    save_run(&mut changes, &run.entry, &updated, Action::RunHeartbeat, detail);
    let revision = changes.revision();
    Ok(changes.finish(HeartbeatResult {
        status: HolderStatus::Ok,
        run_id: run_id.to_owned(),
        lease_expires_at: claim_entry.expires_at.map(UnixMillis::to_rfc3339),
        signals: signals(view, run_id)?,
        revision,
        message: None,
    }))
}

fn finish_refusal(
    run_id: &str,
    status: HolderStatus,
    run: Option<&RunView>,
    message: Option<String>,
    ctx: &WriteContext,
) -> FinishResult {
    FinishResult {
        status,
        run_id: run_id.to_owned(),
        run_status: run.map(|r| r.status(ctx.now)),
        attempt: run.map(|r| r.run.attempt),
        revision: ctx.revision,
        message,
    }
}

/// How a holder ends its attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    Complete {
        result: Value,
    },
    /// `retry_delay_millis`: the retry is not claimable before then (a backoff).
    Fail {
        error: String,
        retryable: bool,
        retry_delay_millis: u64,
    },
}

/// Completes the run, or fails the attempt (returning the run to the queue while retryable
/// attempts remain). Repeating the same completion with the same token changes nothing.
pub fn plan_finish<V: StateView + ?Sized>(
    view: &V,
    run_id: &str,
    caller: Caller<'_>,
    ending: &Ending,
    ctx: &WriteContext,
) -> Result<Plan<FinishResult>, V::Error> {
    let run = match authorize(view, run_id, caller, ctx.now)? {
        Authorized::Yes(run) => run,
        Authorized::NotFound => {
            return Ok(Plan::unchanged(finish_refusal(run_id, HolderStatus::NotFound, None, None, ctx)));
        }
        Authorized::Refused(why, run) => {
            // A lost response makes workers repeat a completion: the same holder and token
            // completing an already completed run is answered, not refused.
            let repeat = matches!(ending, Ending::Complete { .. })
                && run.run.status == RunStatus::Completed
                && caller.token == run.run.token
                && caller.agent_id == run.run.holder.as_deref();
            let status = if repeat { HolderStatus::Ok } else { HolderStatus::Fenced };
            let message = if repeat { None } else { Some(why) };
            return Ok(Plan::unchanged(finish_refusal(run_id, status, Some(&run), message, ctx)));
        }
    };
    let mut changes = Changes::new(ctx, caller.agent_id);
    let mut updated = run.run.clone();
    updated.updated_at = ctx.now;
    let (action, detail) = match ending {
        Ending::Complete { result } => {
            updated.status = RunStatus::Completed;
            updated.result = Some(result.clone());
            retire(view, &mut changes, &run, true)?;
            (Action::RunComplete, json!({"attempt": updated.attempt, "last_step": updated.last_step}))
        }
        Ending::Fail { error, retryable, retry_delay_millis } => {
            updated.error = Some(error.clone());
            if let Some(claim) = &run.claim {
                changes.remove(claim, Record::Silent);
            }
            if *retryable && updated.attempt < updated.max_attempts {
                updated.status = RunStatus::Pending;
                if *retry_delay_millis > 0 {
                    updated.not_before = Some(changes.now().plus_millis(*retry_delay_millis));
                }
                (
                    Action::RunRetry,
                    json!({"attempt": updated.attempt, "error": error, "retry_delay_ms": retry_delay_millis}),
                )
            } else {
                updated.status = RunStatus::Failed;
                retire(view, &mut changes, &RunView { claim: None, ..run.clone() }, false)?;
                (Action::RunFail, json!({"attempt": updated.attempt, "error": error, "retryable": retryable}))
            }
        }
    };
    save_run(&mut changes, &run.entry, &updated, action, detail);
    let revision = changes.revision();
    Ok(changes.finish(FinishResult {
        status: HolderStatus::Ok,
        run_id: run_id.to_owned(),
        run_status: Some(updated.status),
        attempt: Some(updated.attempt),
        revision,
        message: None,
    }))
}

/// Cancels a run that has not finished; its holder's later writes are fenced.
pub fn plan_cancel<V: StateView + ?Sized>(
    view: &V,
    run_id: &str,
    reason: Option<&str>,
    agent_id: Option<&str>,
    ctx: &WriteContext,
) -> Result<Plan<CancelResult>, V::Error> {
    let outcome =
        |status, run_status| CancelResult { status, run_id: run_id.to_owned(), run_status, revision: ctx.revision };
    let Some(run) = RunView::load(view, run_id)? else {
        return Ok(Plan::unchanged(outcome(CancelStatus::NotFound, None)));
    };
    let current = run.status(ctx.now);
    if current.is_terminal() {
        return Ok(Plan::unchanged(outcome(CancelStatus::Finished, Some(current))));
    }
    let mut changes = Changes::new(ctx, agent_id);
    let mut updated = run.run.clone();
    updated.status = RunStatus::Cancelled;
    updated.error = reason.map(str::to_owned);
    updated.updated_at = ctx.now;
    retire(view, &mut changes, &run, false)?;
    save_run(
        &mut changes,
        &run.entry,
        &updated,
        Action::RunCancel,
        json!({"attempt": updated.attempt, "reason": reason}),
    );
    let revision = changes.revision();
    Ok(changes.finish(CancelResult {
        status: CancelStatus::Ok,
        run_id: run_id.to_owned(),
        run_status: Some(RunStatus::Cancelled),
        revision,
    }))
}

/// The lightweight view of a run.
pub fn status<V: StateView + ?Sized>(
    view: &V,
    run_id: &str,
    now: UnixMillis,
    revision: u64,
) -> Result<RunStatusResult, V::Error> {
    Ok(match RunView::load(view, run_id)? {
        Some(run) => RunStatusResult {
            status: FoundStatus::Ok,
            run_id: run_id.to_owned(),
            result: run.run.result.clone().filter(|_| run.run.status == RunStatus::Completed),
            run: Some(run.describe(view, now)?),
            revision,
        },
        None => RunStatusResult {
            status: FoundStatus::NotFound,
            run_id: run_id.to_owned(),
            run: None,
            result: None,
            revision,
        },
    })
}

/// Everything a new worker needs to continue a run.
pub fn resume<V: StateView + ?Sized>(
    view: &V,
    run_id: &str,
    now: UnixMillis,
    revision: u64,
) -> Result<ResumeResult, V::Error> {
    let Some(run) = RunView::load(view, run_id)? else {
        return Ok(ResumeResult {
            status: FoundStatus::NotFound,
            run_id: run_id.to_owned(),
            run: None,
            input: None,
            steps: Vec::new(),
            result: None,
            signals: Vec::new(),
            revision,
        });
    };
    let mut steps = Vec::new();
    view.scan(&keyspace::step_prefix(run_id), None, &mut |entry| {
        let step = entry.key.rsplit('\u{2}').next().and_then(|n| n.parse::<u64>().ok());
        if let (Some(step), Some(record)) = (step, decode::<StepRecord>(&entry)) {
            steps.push(StepOutput {
                step,
                output: Some(record.output),
                agent_id: record.agent_id,
                attempt: record.attempt,
                at: record.at.to_rfc3339(),
            });
        }
        true
    })?;
    Ok(ResumeResult {
        status: FoundStatus::Ok,
        run_id: run_id.to_owned(),
        input: Some(run.run.input.clone()),
        result: run.run.result.clone(),
        run: Some(run.summary(now)),
        steps,
        signals: signals(view, run_id)?,
        revision,
    })
}

/// Filters for listing runs.
#[derive(Debug, Clone, Copy)]
pub struct RunFilter<'a> {
    pub status: Option<ListStatus>,
    pub name: Option<&'a str>,
    pub tags: &'a BTreeMap<String, String>,
}

/// Runs matching the filter in creation order, a page at a time.
pub fn list<V: StateView + ?Sized>(
    view: &V,
    filter: RunFilter<'_>,
    after: Option<&str>,
    page: usize,
    now: UnixMillis,
    revision: u64,
) -> Result<ListRunsResult, V::Error> {
    let after_key = after.map(keyspace::run_key);
    let (runs, next_cursor) = scan_page(
        view,
        &keyspace::prefix(Space::Run),
        after_key.as_deref(),
        page,
        |entry| {
            let claim = view.get(&keyspace::claim_key(keyspace::classify(&entry.key).1))?;
            let Some(run) = decode::<RunRecord>(&entry) else { return Ok(None) };
            let run = RunView { entry, run, claim };
            if !run.matches(filter.name, filter.tags) {
                return Ok(None);
            }
            let status = run.status(now);
            // Only runs that may be wanted are described (which reads their dependencies).
            if let Some(wanted) = filter.status {
                let maybe =
                    if wanted.needs_state() { status == RunStatus::Pending } else { wanted.admits(status, None) };
                if !maybe {
                    return Ok(None);
                }
            }
            let summary = run.describe(view, now)?;
            let wanted = filter.status.is_none_or(|wanted| wanted.admits(summary.run_status, summary.state));
            Ok(wanted.then_some(summary))
        },
        |run: &RunSummary| &run.run_id,
    )?;
    Ok(ListRunsResult { runs, next_cursor, revision })
}

#[cfg(test)]
mod tests;
