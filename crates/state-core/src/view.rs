//! Read access to stored entries, as planners need it. The store implements this over its
//! transactions; tests and models use [`MemoryView`]. Keeping reads behind this trait lets
//! every rule that must look at several records (a lease and a write, a run and its claim)
//! live in the core while the IO stays in the store.

use std::collections::BTreeMap;
use std::convert::Infallible;

use crate::entry::Entry;
use crate::plan::{Mutation, Plan};

pub trait StateView {
    type Error;

    /// The stored entry, expired or not: planners decide visibility with `now`.
    fn get(&self, key: &str) -> Result<Option<Entry>, Self::Error>;

    /// Entries whose key starts with `prefix`, in key order, beginning after `after`, until
    /// `visit` returns false.
    fn scan(&self, prefix: &str, after: Option<&str>, visit: &mut dyn FnMut(Entry) -> bool) -> Result<(), Self::Error>;
}

/// Entries in a map: a complete store for tests and model checks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryView {
    pub entries: BTreeMap<String, Entry>,
    pub revision: u64,
}

impl MemoryView {
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
        if plan.commits() {
            self.revision += 1;
        }
    }
}

impl StateView for MemoryView {
    type Error = Infallible;

    fn get(&self, key: &str) -> Result<Option<Entry>, Infallible> {
        Ok(self.entries.get(key).cloned())
    }

    fn scan(&self, prefix: &str, after: Option<&str>, visit: &mut dyn FnMut(Entry) -> bool) -> Result<(), Infallible> {
        use std::ops::Bound;
        let start = match after {
            Some(after) if after >= prefix => Bound::Excluded(after.to_owned()),
            _ => Bound::Included(prefix.to_owned()),
        };
        for (key, entry) in self.entries.range::<String, _>((start, Bound::Unbounded)) {
            if !key.starts_with(prefix) || !visit(entry.clone()) {
                break;
            }
        }
        Ok(())
    }
}
