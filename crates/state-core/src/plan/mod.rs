//! Write planning: given what the store holds now, decide the outcome of a write and the
//! exact changes that carry it out. Pure; the store applies a plan inside one transaction.

mod expire;
mod kv;
mod txn;

pub use expire::plan_expire;
pub use kv::{plan_delete, plan_set};
pub use txn::plan_txn;

use serde_json::Value;

use crate::entry::{Entry, Event, EventKind};
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

/// The decided outcome plus the changes to apply. A plan with no events changes nothing and
/// consumes no revision; every plan that changes something records it in `events`.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan<T> {
    pub outcome: T,
    pub mutations: Vec<Mutation>,
    pub events: Vec<Event>,
}

impl<T> Plan<T> {
    pub fn commits(&self) -> bool {
        !self.events.is_empty()
    }

    pub(crate) fn unchanged(outcome: T) -> Plan<T> {
        Plan { outcome, mutations: Vec::new(), events: Vec::new() }
    }

    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Plan<U> {
        Plan { outcome: f(self.outcome), mutations: self.mutations, events: self.events }
    }
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

    pub(crate) fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The revision the outcome reports: this write's if it changes anything, else the current.
    pub(crate) fn revision(&self) -> u64 {
        if self.is_empty() { self.ctx.revision } else { self.ctx.next_revision() }
    }

    /// Writes `value` over whatever is stored. An expired entry still on disk is recorded as
    /// expired first, and the new entry starts a fresh incarnation at version 1.
    pub(crate) fn put(&mut self, stored: Option<&Entry>, key: &str, value: Value, ttl_millis: Option<u64>) -> Entry {
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
        self.events.push(Event {
            revision,
            key: entry.key.clone(),
            kind: EventKind::Put,
            version: entry.version,
            agent_id: entry.agent_id.clone(),
            time: now,
            value: Some(entry.value.clone()),
        });
        self.mutations.push(Mutation::Put(entry.clone()));
        entry
    }

    /// Deletes a live entry.
    pub(crate) fn delete(&mut self, live: &Entry) {
        self.events.push(Event {
            revision: self.ctx.next_revision(),
            key: live.key.clone(),
            kind: EventKind::Delete,
            version: live.version,
            agent_id: self.agent_id.map(str::to_owned),
            time: self.ctx.now,
            value: None,
        });
        self.mutations.push(Mutation::Delete(live.key.clone()));
    }

    /// Removes an entry whose TTL ran out. The event is stamped with the instant it expired.
    pub(crate) fn expire(&mut self, expired: &Entry) {
        self.record_expiry(expired);
        self.mutations.push(Mutation::Delete(expired.key.clone()));
    }

    fn record_expiry(&mut self, expired: &Entry) {
        self.events.push(Event {
            revision: self.ctx.next_revision(),
            key: expired.key.clone(),
            kind: EventKind::Expired,
            version: expired.version,
            agent_id: None,
            time: expired.expires_at.unwrap_or(self.ctx.now),
            value: None,
        });
    }

    pub(crate) fn finish<T>(self, outcome: T) -> Plan<T> {
        Plan { outcome, mutations: self.mutations, events: self.events }
    }
}

#[cfg(test)]
mod tests;
