//! Which watchers a committed batch wakes. A watcher waits on its own [`Notify`], not on the
//! feed's channel (whose every send would wake every receiver): a batch wakes the watchers
//! whose keys it touches, found by key, by each registered prefix length and by kind, so a
//! commit costs the watchers it concerns, not all of them. Everyone is woken now and then all
//! the same (and whenever a batch comes without its events), so watchers of quiet keys keep up
//! with the channel and never fall so far behind that it overwrites what they have not read.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use state_core::Event;
use state_core::keyspace::{self, Space};
use state_core::ops::history::KeyFilter;
use tokio::sync::Notify;

type Waiters = HashMap<u64, Arc<Notify>>;

#[derive(Default)]
struct Table {
    next_id: u64,
    all: Waiters,
    user_keys: Waiters,
    exact: HashMap<String, Waiters>,
    prefix: HashMap<String, Waiters>,
    /// How many prefixes of each length are registered: the lengths a key is cut at.
    prefix_lengths: BTreeMap<usize, usize>,
}

/// The watchers of one feed, by what they watch.
pub(crate) struct Routes {
    table: Mutex<Table>,
    /// Batches published since every watcher was last woken.
    since_everyone: AtomicUsize,
    /// Every this many batches, every watcher is woken: half the channel, so none is overrun
    /// for want of a look.
    everyone_every: usize,
}

/// A watcher's place in the routes; leaving it (dropping this) unregisters it.
pub(crate) struct Route {
    routes: Weak<Routes>,
    id: u64,
    filter: KeyFilter,
    pub(crate) notify: Arc<Notify>,
}

impl Routes {
    pub(crate) fn new(channel_capacity: usize) -> Routes {
        Routes {
            table: Mutex::new(Table::default()),
            since_everyone: AtomicUsize::new(0),
            everyone_every: (channel_capacity / 2).max(1),
        }
    }

    /// Registers a watcher of `filter`.
    pub(crate) fn register(self: &Arc<Self>, filter: &KeyFilter) -> Route {
        let notify = Arc::new(Notify::new());
        let mut table = self.table.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        table.next_id += 1;
        let id = table.next_id;
        match filter {
            KeyFilter::All => {
                table.all.insert(id, notify.clone());
            }
            KeyFilter::UserKeys => {
                table.user_keys.insert(id, notify.clone());
            }
            KeyFilter::Exact(key) => {
                table.exact.entry(key.clone()).or_default().insert(id, notify.clone());
            }
            KeyFilter::Prefix(prefix) => {
                table.prefix.entry(prefix.clone()).or_default().insert(id, notify.clone());
                *table.prefix_lengths.entry(prefix.len()).or_default() += 1;
            }
        }
        Route { routes: Arc::downgrade(self), id, filter: filter.clone(), notify }
    }

    fn unregister(&self, route: &Route) {
        let mut table = self.table.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let table = &mut *table;
        let remove = |map: &mut HashMap<String, Waiters>, name: &str| {
            if let Some(waiters) = map.get_mut(name) {
                waiters.remove(&route.id);
                if waiters.is_empty() {
                    map.remove(name);
                }
            }
        };
        match &route.filter {
            KeyFilter::All => {
                table.all.remove(&route.id);
            }
            KeyFilter::UserKeys => {
                table.user_keys.remove(&route.id);
            }
            KeyFilter::Exact(key) => remove(&mut table.exact, key),
            KeyFilter::Prefix(prefix) => {
                remove(&mut table.prefix, prefix);
                if let Some(count) = table.prefix_lengths.get_mut(&prefix.len()) {
                    *count -= 1;
                    if *count == 0 {
                        table.prefix_lengths.remove(&prefix.len());
                    }
                }
            }
        }
    }

    /// Wakes the watchers a batch concerns: those of its events' keys, or everyone when it
    /// came without events (they read it from history) or it is everyone's turn.
    pub(crate) fn wake_for(&self, events: Option<&[Event]>) {
        let everyone_due = self.since_everyone.fetch_add(1, Ordering::Relaxed) + 1 >= self.everyone_every;
        let Some(events) = events.filter(|_| !everyone_due) else {
            self.wake_everyone();
            return;
        };
        let table = self.table.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let wake = |waiters: &Waiters| waiters.values().for_each(|notify| notify.notify_one());
        wake(&table.all);
        for event in events {
            let key = event.key.as_str();
            if !table.user_keys.is_empty() && keyspace::classify(key).0 == Space::Kv {
                wake(&table.user_keys);
            }
            if let Some(waiters) = table.exact.get(key) {
                wake(waiters);
            }
            for &length in table.prefix_lengths.keys() {
                if length > key.len() {
                    break;
                }
                if let Some(waiters) = key.get(..length).and_then(|cut| table.prefix.get(cut)) {
                    wake(waiters);
                }
            }
        }
    }

    /// Wakes every watcher: the engine is closing, or it is everyone's turn to keep up.
    pub(crate) fn wake_everyone(&self) {
        self.since_everyone.store(0, Ordering::Relaxed);
        let table = self.table.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let waiters =
            [&table.all, &table.user_keys].into_iter().chain(table.exact.values()).chain(table.prefix.values());
        for waiters in waiters {
            waiters.values().for_each(|notify| notify.notify_one());
        }
    }

    #[cfg(test)]
    pub(crate) fn count(&self) -> usize {
        let table = self.table.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        table.all.len()
            + table.user_keys.len()
            + table.exact.values().map(HashMap::len).sum::<usize>()
            + table.prefix.values().map(HashMap::len).sum::<usize>()
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        if let Some(routes) = self.routes.upgrade() {
            routes.unregister(self);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(key: &str) -> Event {
        Event {
            revision: 1,
            key: key.to_owned(),
            kind: state_core::entry::EventKind::Put,
            action: None,
            version: 1,
            agent_id: None,
            time: state_core::UnixMillis(0),
            value: None,
            by: None,
        }
    }

    /// Whether the route was woken since last asked (a stored permit completes at once).
    fn woken(route: &Route) -> bool {
        let notified = route.notify.notified();
        futures_util_poll(notified)
    }

    fn futures_util_poll<F: std::future::Future>(future: F) -> bool {
        let waker = std::task::Waker::noop();
        let mut context = std::task::Context::from_waker(waker);
        let mut future = std::pin::pin!(future);
        future.as_mut().poll(&mut context).is_ready()
    }

    #[test]
    fn a_batch_wakes_only_the_watchers_of_its_keys() {
        let routes = Arc::new(Routes::new(4096));
        let exact = routes.register(&KeyFilter::Exact("jobs/1".into()));
        let prefix = routes.register(&KeyFilter::Prefix("jobs/".into()));
        let other = routes.register(&KeyFilter::Prefix("mail/".into()));
        let other_exact = routes.register(&KeyFilter::Exact("jobs/2".into()));
        let users = routes.register(&KeyFilter::UserKeys);
        let all = routes.register(&KeyFilter::All);
        routes.wake_for(Some(&[event("jobs/1")]));
        assert!(woken(&exact) && woken(&prefix) && woken(&users) && woken(&all));
        assert!(!woken(&other) && !woken(&other_exact), "watchers of other keys sleep on");
        // A batch that came without its events wakes everyone: they read it from history.
        routes.wake_for(None);
        assert!(woken(&other) && woken(&other_exact) && woken(&exact));
        drop((exact, prefix, other, other_exact, users));
        assert_eq!(routes.count(), 1, "a watcher that ends leaves the routes");
        drop(all);
        assert_eq!(routes.count(), 0);
    }

    #[test]
    fn everyone_is_woken_every_half_channel_to_keep_up() {
        let routes = Arc::new(Routes::new(8));
        let quiet = routes.register(&KeyFilter::Prefix("quiet/".into()));
        for _ in 0..3 {
            routes.wake_for(Some(&[event("busy/x")]));
        }
        assert!(!woken(&quiet));
        routes.wake_for(Some(&[event("busy/x")]));
        assert!(woken(&quiet), "the fourth batch of a channel of eight is everyone's turn");
    }
}
