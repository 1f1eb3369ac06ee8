//! Measuring what the ids under a prefix hold. A tenant's data is what its token covers: its
//! keys, and the records the store keeps under names it chose (leases, permits, path
//! reservations, queue messages, sessions). Runs are named by ids the store draws, and the
//! search index belongs to no one, so neither is counted.

use crate::entry::Entry;
use crate::keyspace::{self, Space};
use crate::limits::json_len;
use crate::ops::usage::{UsageRequest, UsageResult};
use crate::plan::Query;
use crate::time::UnixMillis;
use crate::view::StateView;

/// The record spaces whose keys begin with a name a token is checked against.
const NAMED_RECORDS: [Space; 8] = [
    Space::Lease,
    Space::Permit,
    Space::Reservation,
    Space::Message,
    Space::MessageDedupe,
    Space::Session,
    Space::SessionVersion,
    Space::Note,
];

impl Query for UsageRequest {
    type Output = UsageResult;

    fn read<V: StateView + ?Sized>(&self, view: &V, now: UnixMillis) -> Result<UsageResult, V::Error> {
        measure(view, &self.prefix, now)
    }
}

/// The live keys and named records under `prefix`, and their bytes, as `view` holds them at
/// `now`.
pub fn measure<V: StateView + ?Sized>(view: &V, prefix: &str, now: UnixMillis) -> Result<UsageResult, V::Error> {
    let mut usage = UsageResult { prefix: prefix.to_owned(), ..UsageResult::default() };
    let size = |entry: &Entry| (entry.key.len() + json_len(&entry.value)) as u64;
    // User keys sort after every record, so a scan of "" would also read the records: start
    // after them.
    let after = prefix.is_empty().then_some(keyspace::USER_KEYS_AFTER);
    view.scan(prefix, after, &mut |entry| {
        if !entry.is_expired(now) && !keyspace::is_system(&entry.key) {
            usage.keys += 1;
            usage.bytes += size(&entry);
        }
        true
    })?;
    for space in NAMED_RECORDS {
        view.scan(&keyspace::key(space, prefix), None, &mut |entry| {
            if !entry.is_expired(now) {
                usage.records += 1;
                usage.bytes += size(&entry);
            }
            true
        })?;
    }
    Ok(usage)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::view::MemoryView;

    fn entry(key: &str, value: serde_json::Value, expires_at: Option<u64>) -> Entry {
        Entry {
            key: key.into(),
            value,
            version: 1,
            create_revision: 1,
            mod_revision: 1,
            updated_at: UnixMillis(0),
            expires_at: expires_at.map(UnixMillis),
            agent_id: None,
        }
    }

    #[test]
    fn counts_keys_and_named_records_under_the_prefix_and_nothing_else() {
        let mut view = MemoryView::default();
        for e in [
            entry("team-a/x", json!("abc"), None),                      // 8 + 5
            entry("team-a/y", json!({"n": 1}), None),                   // 8 + 7
            entry("team-a/gone", json!(1), Some(10)),                   // expired at 10
            entry("team-b/x", json!("not ours"), None),                 // another tenant
            entry(&keyspace::session_key("team-a/s"), json!([]), None), // a record: 11 + 2
            entry(&keyspace::session_key("team-b/s"), json!([]), None),
            entry(&keyspace::lease_key("team-a/lock"), json!(null), Some(5)),
        ] {
            view.entries.insert(e.key.clone(), e);
        }
        let usage = measure(&view, "team-a/", UnixMillis(20)).unwrap();
        let session_bytes = (keyspace::session_key("team-a/s").len() + 2) as u64;
        assert_eq!((usage.keys, usage.records, usage.bytes), (2, 1, 13 + 15 + session_bytes), "{usage:?}");
        let everything = measure(&view, "", UnixMillis(20)).unwrap();
        assert_eq!((everything.keys, everything.records), (3, 2), "{everything:?}");
        // Before the expiries, the expired key and the lease count.
        let earlier = measure(&view, "team-a/", UnixMillis(1)).unwrap();
        assert_eq!((earlier.keys, earlier.records), (3, 2), "{earlier:?}");
    }
}
