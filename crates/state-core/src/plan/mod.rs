//! What a write planner decides: the outcome and the exact changes that carry it out (`Plan`),
//! against the moment and revision it is planned at (`WriteContext`). The planners are the
//! rule modules' (`kv`, `lease`, `workflow`, ...); the store applies a plan inside one
//! transaction.

#[cfg(test)]
mod reads_first_tests;
mod rule;

pub use rule::{Query, ReadsFirst, Rule};

use serde_json::Value;

use crate::entry::{Action, Entry, Event, EventKind};
use crate::keyspace::{self, Space};
use crate::time::UnixMillis;

/// The moment and store revision a write is planned against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteContext {
    pub now: UnixMillis,
    /// The last committed revision; a plan that changes anything commits as `revision + 1`.
    pub revision: u64,
}

impl WriteContext {
    pub fn next_revision(&self) -> u64 {
        self.revision + 1
    }
}

/// A change to the current-entries table.
#[derive(Debug, Clone, PartialEq)]
pub enum Mutation {
    Put(Entry),
    Delete(String),
}

/// The decided outcome plus the changes to apply. A plan that changes nothing consumes no
/// revision; one that changes anything commits as the next revision.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan<T> {
    pub outcome: T,
    pub mutations: Vec<Mutation>,
    pub events: Vec<Event>,
}

impl<T> Plan<T> {
    /// Whether applying it changes anything stored.
    pub fn commits(&self) -> bool {
        !self.events.is_empty() || !self.mutations.is_empty()
    }

    /// Whether it takes the next revision. Every change a client can see is a history event,
    /// so a plan with events advances the revision; one that only maintains the store's own
    /// bookkeeping (sweeping expired request records) commits without consuming a revision.
    pub fn advances_revision(&self) -> bool {
        !self.events.is_empty()
    }

    /// The revision it commits as, when it takes one: the next, or (an import keeping fencing
    /// tokens monotonic) one above every revision its records carried.
    pub fn commit_revision(&self) -> Option<u64> {
        self.events.iter().map(|e| e.revision).max()
    }

    pub(crate) fn unchanged(outcome: T) -> Plan<T> {
        Plan { outcome, mutations: Vec::new(), events: Vec::new() }
    }
}

/// How a change shows up in history.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Record {
    /// A user key: the event carries the value written.
    Value,
    /// A system record: the event names the transition and carries its details.
    Transition(Action, Value),
    /// Index maintenance: no event of its own (the transition it serves has one).
    Silent,
}

/// Accumulates the mutations and events of one plan, all stamped with the next revision.
pub(crate) struct Changes<'a> {
    ctx: &'a WriteContext,
    agent_id: Option<&'a str>,
    mutations: Vec<Mutation>,
    events: Vec<Event>,
}

impl<'a> Changes<'a> {
    pub(crate) fn new(ctx: &'a WriteContext, agent_id: Option<&'a str>) -> Changes<'a> {
        Changes { ctx, agent_id, mutations: Vec::new(), events: Vec::new() }
    }

    pub(crate) fn now(&self) -> UnixMillis {
        self.ctx.now
    }

    /// The revision this plan will commit as.
    pub(crate) fn next_revision(&self) -> u64 {
        self.ctx.next_revision()
    }

    /// Removes an index entry, silently (it has no history of its own).
    pub(crate) fn drop_key(&mut self, key: &str) {
        self.mutations.push(Mutation::Delete(key.to_owned()));
    }

    /// The revision the outcome reports: this write's if it changes anything, else the current.
    pub(crate) fn revision(&self) -> u64 {
        if self.mutations.is_empty() && self.events.is_empty() { self.ctx.revision } else { self.ctx.next_revision() }
    }

    /// Writes a user key over whatever is stored.
    pub(crate) fn put(&mut self, stored: Option<&Entry>, key: &str, value: Value, ttl_millis: Option<u64>) -> Entry {
        self.write(stored, key, value, ttl_millis, Record::Value)
    }

    /// Writes `value` under `key`. An expired entry still on disk is recorded as expired
    /// first, and the new entry starts a fresh lifetime at version 1.
    pub(crate) fn write(
        &mut self,
        stored: Option<&Entry>,
        key: &str,
        value: Value,
        ttl_millis: Option<u64>,
        record: Record,
    ) -> Entry {
        let now = self.ctx.now;
        let live = match stored {
            Some(old) if old.is_expired(now) => {
                self.record_expiry(old);
                None
            }
            other => other,
        };
        let revision = self.ctx.next_revision();
        let entry = Entry {
            key: key.to_owned(),
            value,
            version: live.map_or(1, |e| e.version + 1),
            create_revision: live.map_or(revision, |e| e.create_revision),
            mod_revision: revision,
            updated_at: now,
            expires_at: ttl_millis.map(|ms| now.plus_millis(ms)),
            agent_id: self.agent_id.map(str::to_owned),
        };
        self.put_entry(entry.clone(), record);
        entry
    }

    /// Writes `entry` as it was elsewhere (an imported record): its version, update time,
    /// expiry and writer are kept; its revisions become this plan's.
    pub(crate) fn restore(&mut self, stored: Option<&Entry>, entry: Entry, record: Record) {
        if let Some(expired) = stored.filter(|e| e.is_expired(self.ctx.now)) {
            self.record_expiry(expired);
        }
        let revision = self.ctx.next_revision();
        self.put_entry(Entry { create_revision: revision, mod_revision: revision, ..entry }, record);
    }

    fn put_entry(&mut self, entry: Entry, record: Record) {
        let (action, detail) = match record {
            Record::Value => (None, Some(entry.value.clone())),
            Record::Transition(action, detail) => (Some(action), Some(detail)),
            Record::Silent => {
                self.mutations.push(Mutation::Put(entry));
                return;
            }
        };
        self.events.push(Event {
            revision: self.ctx.next_revision(),
            key: entry.key.clone(),
            kind: EventKind::Put,
            action,
            version: entry.version,
            agent_id: entry.agent_id.clone(),
            time: self.ctx.now,
            value: detail,
            by: None,
        });
        self.mutations.push(Mutation::Put(entry));
    }

    /// The mutations planned so far, in order.
    pub(crate) fn mutations(&self) -> &[Mutation] {
        &self.mutations
    }

    /// Deletes a user key.
    pub(crate) fn delete(&mut self, live: &Entry) {
        self.remove(live, Record::Value);
    }

    /// Removes an entry, recording it as `record` says.
    pub(crate) fn remove(&mut self, entry: &Entry, record: Record) {
        let (action, detail) = match record {
            Record::Value => (None, None),
            Record::Transition(action, detail) => (Some(action), Some(detail)),
            Record::Silent => {
                self.mutations.push(Mutation::Delete(entry.key.clone()));
                return;
            }
        };
        self.events.push(Event {
            revision: self.ctx.next_revision(),
            key: entry.key.clone(),
            kind: EventKind::Delete,
            action,
            version: entry.version,
            agent_id: self.agent_id.map(str::to_owned),
            time: self.ctx.now,
            value: detail,
            by: None,
        });
        self.mutations.push(Mutation::Delete(entry.key.clone()));
    }

    /// Removes an entry whose TTL ran out. The event is stamped with the instant it expired.
    pub(crate) fn expire(&mut self, expired: &Entry) {
        self.record_expiry(expired);
        self.mutations.push(Mutation::Delete(expired.key.clone()));
    }

    /// Records that an entry expired. Claims stay silent (the run's own transition says it),
    /// and so do request records (bookkeeping, not state anyone changed).
    fn record_expiry(&mut self, expired: &Entry) {
        let action = match keyspace::classify(&expired.key).0 {
            Space::Lease | Space::Permit | Space::Reservation => Some(Action::LeaseExpire),
            Space::Claim | Space::Request => return,
            _ => None,
        };
        self.events.push(Event {
            revision: self.ctx.next_revision(),
            key: expired.key.clone(),
            kind: EventKind::Expired,
            action,
            version: expired.version,
            agent_id: None,
            time: expired.expires_at.unwrap_or(self.ctx.now),
            value: None,
            by: None,
        });
    }

    pub(crate) fn finish<T>(self, outcome: T) -> Plan<T> {
        Plan { outcome, mutations: self.mutations, events: self.events }
    }
}

impl crate::view::MemoryView {
    /// Applies a plan the way a store would, advancing the revision if it changed anything.
    pub fn apply<T>(&mut self, plan: &Plan<T>) {
        for mutation in &plan.mutations {
            match mutation {
                Mutation::Put(entry) => {
                    self.entries.insert(entry.key.clone(), entry.clone());
                }
                Mutation::Delete(key) => {
                    self.entries.remove(key);
                }
            }
        }
        if let Some(revision) = plan.commit_revision() {
            self.revision = revision;
        }
    }
}
