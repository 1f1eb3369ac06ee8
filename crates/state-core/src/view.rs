//! Read access to stored entries, as planners need it. The store implements this over its
//! transactions; tests and models use [`MemoryView`]. Keeping reads behind this trait lets
//! every rule that must look at several records (a lease and a write, a run and its claim)
//! live in the core while the IO stays in the store.

use std::collections::BTreeMap;
use std::convert::Infallible;

use crate::entry::Entry;
use crate::time::UnixMillis;

pub trait StateView {
    type Error;

    /// The stored entry, expired or not: planners decide visibility with `now`.
    fn get(&self, key: &str) -> Result<Option<Entry>, Self::Error>;

    /// Entries whose key starts with `prefix`, in key order, beginning after `after`, until
    /// `visit` returns false.
    fn scan(&self, prefix: &str, after: Option<&str>, visit: &mut dyn FnMut(Entry) -> bool) -> Result<(), Self::Error>;
}

/// One page of records under `prefix`, after the key `after`: `pick` turns an entry into an
/// item or skips it. Returns the items and the cursor of the next page (from `cursor_of` of
/// the last item) when more items follow.
pub fn scan_page<V, T>(
    view: &V,
    prefix: &str,
    after: Option<&str>,
    page: usize,
    mut pick: impl FnMut(Entry) -> Result<Option<T>, V::Error>,
    cursor_of: impl Fn(&T) -> &str,
) -> Result<(Vec<T>, Option<String>), V::Error>
where
    V: StateView + ?Sized,
{
    let mut items = Vec::new();
    let mut more = false;
    let mut failure = None;
    view.scan(prefix, after, &mut |entry| match pick(entry) {
        Ok(Some(_)) if items.len() == page => {
            more = true;
            false
        }
        Ok(Some(item)) => {
            items.push(item);
            true
        }
        Ok(None) => true,
        Err(e) => {
            failure = Some(e);
            false
        }
    })?;
    if let Some(e) = failure {
        return Err(e);
    }
    let next = if more { items.last().map(|item| crate::cursor::encode(cursor_of(item))) } else { None };
    Ok((items, next))
}

/// The live entries under `prefix` whose value reads as a `T`, in key order: the records of
/// one semaphore, scope or queue.
pub fn live_records<V, T>(view: &V, prefix: &str, now: UnixMillis) -> Result<Vec<(Entry, T)>, V::Error>
where
    V: StateView + ?Sized,
    T: serde::de::DeserializeOwned,
{
    let mut found = Vec::new();
    view.scan(prefix, None, &mut |entry| {
        if !entry.is_expired(now)
            && let Ok(record) = serde_json::from_value::<T>(entry.value.clone())
        {
            found.push((entry, record));
        }
        true
    })?;
    Ok(found)
}

/// A page of names, each with what its records folded into, and the next page's cursor.
pub type NamesPage<A> = (Vec<(String, A)>, Option<String>);

/// One page of the names under a space whose records are keyed by a name, U+0002, then
/// the rest (semaphores, queues, reservation scopes): the names that start with `prefix`
/// and hold a live record, after the name `after`, each with its live records (those that
/// read as a `T`) folded into an `A` by `add`. Returns them and the next page's cursor.
pub fn names_page<V, T, A>(
    view: &V,
    space: &str,
    prefix: &str,
    after: Option<&str>,
    page: usize,
    now: UnixMillis,
    mut add: impl FnMut(&mut A, &Entry, T),
) -> Result<NamesPage<A>, V::Error>
where
    V: StateView + ?Sized,
    T: serde::de::DeserializeOwned,
    A: Default,
{
    let mut names: Vec<(String, A)> = Vec::new();
    let mut more = false;
    // Names hold no control characters, so U+0003 sorts after every record of `after` and
    // before those of any name that extends it.
    let start = after.map(|name| format!("{space}{name}\u{3}"));
    view.scan(&format!("{space}{prefix}"), start.as_deref(), &mut |entry| {
        let Some((name, _)) = entry.key.get(space.len()..).and_then(|rest| rest.split_once('\u{2}')) else {
            return true;
        };
        if entry.is_expired(now) {
            return true;
        }
        let Ok(record) = serde_json::from_value::<T>(entry.value.clone()) else { return true };
        if names.last().is_none_or(|(last, _)| last != name) {
            if names.len() == page {
                more = true;
                return false;
            }
            names.push((name.to_owned(), A::default()));
        }
        if let Some((_, folded)) = names.last_mut() {
            add(folded, &entry, record);
        }
        true
    })?;
    let next = if more { names.last().map(|(name, _)| crate::cursor::encode(name)) } else { None };
    Ok((names, next))
}

/// Entries in a map: a complete store for tests and model checks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryView {
    pub entries: BTreeMap<String, Entry>,
    pub revision: u64,
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
