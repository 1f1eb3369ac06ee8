//! The version guards of a PostgreSQL write transaction, checked by the database when the
//! writes go out with COMMIT: a row changed behind the transaction's back (by a writer that
//! ignored the store's lock, which no replica does) rolls the whole commit back as retryable.

use serde_json::json;
use state_core::{Entry, UnixMillis};
use state_store::StorageError;

use crate::support::{behind_its_back, postgres_available, postgres_in, unique_schema};

fn entry(key: &str, version: u64, revision: u64) -> Entry {
    Entry {
        key: key.into(),
        value: json!(version),
        version,
        create_revision: 1,
        mod_revision: revision,
        updated_at: UnixMillis(0),
        expires_at: None,
        agent_id: None,
    }
}

/// What the store held after the commit: its revision and the versions of the three keys.
#[derive(Debug, PartialEq)]
struct After {
    revision: u64,
    kept: Option<u64>,
    gone: Option<u64>,
    new: Option<u64>,
}

/// Seeds `kept` and `gone` at version 1 (revision 1), then runs a transaction that reads
/// `kept`, `gone` and `new` as it begins, lets `meddle` (given the quoted schema) run behind
/// its back, writes all three (an update, a delete and an insert, each guarded by what it
/// read), and commits.
fn commit_after(meddle: impl FnOnce(&str)) -> (Result<(), StorageError>, After) {
    let schema = unique_schema("guards");
    let fixture = postgres_in(schema.clone());
    let backend = &fixture.backend;
    let mut seed = backend.begin_write().unwrap();
    seed.put(&entry("kept", 1, 1)).unwrap();
    seed.put(&entry("gone", 1, 1)).unwrap();
    seed.set_revision(1).unwrap();
    seed.commit().unwrap();

    let mut txn = backend.begin_write_reading(&mut ["kept", "gone", "new"].into_iter()).unwrap();
    assert_eq!(txn.get("kept").unwrap().map(|e| e.version), Some(1));
    assert_eq!(txn.get("gone").unwrap().map(|e| e.version), Some(1));
    assert_eq!(txn.get("new").unwrap(), None);
    meddle(&format!("\"{schema}\""));
    txn.put(&entry("kept", 2, 2)).unwrap();
    txn.delete("gone").unwrap();
    txn.put(&entry("new", 1, 2)).unwrap();
    txn.set_revision(2).unwrap();
    let committed = txn.commit();

    // Another writer gets the lock at once: the transaction let it go, committed or not.
    behind_its_back(&format!("SET lock_timeout = '5s'; BEGIN; SELECT 1 FROM \"{schema}\".meta FOR UPDATE; ROLLBACK;"));
    let read = backend.begin_read().unwrap();
    let version = |key: &str| read.get(key).unwrap().map(|e| e.version);
    let after =
        After { revision: read.revision().unwrap(), kept: version("kept"), gone: version("gone"), new: version("new") };
    (committed, after)
}

#[test]
fn writes_read_first_commit_in_one_go() {
    if !postgres_available() {
        return;
    }
    let (committed, after) = commit_after(|_| {});
    committed.unwrap();
    assert_eq!(after, After { revision: 2, kept: Some(2), gone: None, new: Some(1) });
}

#[test]
fn a_row_changed_behind_the_transactions_back_rolls_the_commit_back() {
    if !postgres_available() {
        return;
    }
    type Meddle = fn(&str) -> String;
    let meddlers: [(&str, Meddle); 3] = [
        ("an updated row", |s| format!("UPDATE {s}.entries SET version = 7 WHERE key = 'kept'")),
        ("a deleted row", |s| format!("UPDATE {s}.entries SET version = 9 WHERE key = 'gone'")),
        ("an inserted row", |s| {
            format!(
                "INSERT INTO {s}.entries (key, system, value, version, create_revision, mod_revision, updated_at) \
                 VALUES ('new', false, '5', 5, 1, 1, 0)"
            )
        }),
    ];
    for (what, meddle) in meddlers {
        let (committed, after) = commit_after(|schema| behind_its_back(&meddle(schema)));
        assert!(matches!(committed, Err(StorageError::Retryable(_))), "{what}: {committed:?}");
        assert_eq!(after.revision, 1, "{what}: nothing of the transaction committed");
        assert_ne!(after.kept, Some(2), "{what}: the update did not apply");
        assert_ne!(after.new, Some(1), "{what}: the insert did not apply");
        assert_ne!(after.gone, None, "{what}: the delete did not apply");
    }
}

/// A commit that fails before COMMIT is sent (here: its checked statements cannot be
/// prepared) rolls back and lets the writers' lock go, instead of handing the pool a
/// connection that still holds it.
#[test]
fn a_commit_that_fails_before_sending_lets_the_lock_go() {
    if !postgres_available() {
        return;
    }
    let (committed, after) = commit_after(|schema| behind_its_back(&format!("DROP FUNCTION {schema}.guard(boolean)")));
    assert!(committed.is_err(), "{committed:?}");
    assert_eq!(after.revision, 1, "nothing of the transaction committed");
}
