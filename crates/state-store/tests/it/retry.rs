//! The writer retries a batch that failed with a retryable storage error, planning it afresh,
//! and gives up (reporting the error, applying nothing) after a bounded number of attempts.

use std::ops::RangeInclusive;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::json;
use state_core::ops::WriteStatus;
use state_core::ops::history::KeyFilter;
use state_core::ops::kv::SetRequest;
use state_core::{Entry, Event, UnixMillis};
use state_store::backend::{Backend, Order, ReadTxn, WriteTxn, WriterExclusion};
use state_store::conformance::{Fixture, Store, history_since, set_req};
use state_store::{EngineError, RedbBackend, StorageError};

/// redb whose next `failures` commits fail as a dropped connection would: retryable, with
/// nothing applied.
struct Flaky {
    inner: RedbBackend,
    failures: Arc<AtomicU32>,
}

struct FlakyWrite<'a> {
    inner: Box<dyn WriteTxn + 'a>,
    failures: Arc<AtomicU32>,
}

impl Backend for Flaky {
    fn kind(&self) -> &'static str {
        "flaky-redb"
    }
    fn writer_exclusion(&self) -> WriterExclusion {
        WriterExclusion::Process
    }
    fn begin_read(&self) -> Result<Box<dyn ReadTxn + '_>, StorageError> {
        self.inner.begin_read()
    }
    fn begin_write(&self) -> Result<Box<dyn WriteTxn + '_>, StorageError> {
        Ok(Box::new(FlakyWrite { inner: self.inner.begin_write()?, failures: self.failures.clone() }))
    }
    fn size_on_disk(&self) -> Option<u64> {
        None
    }
}

impl ReadTxn for FlakyWrite<'_> {
    fn revision(&self) -> Result<u64, StorageError> {
        self.inner.revision()
    }
    fn compacted_revision(&self) -> Result<u64, StorageError> {
        self.inner.compacted_revision()
    }
    fn get(&self, key: &str) -> Result<Option<Entry>, StorageError> {
        self.inner.get(key)
    }
    fn scan(
        &self,
        prefix: &str,
        after: Option<&str>,
        visit: &mut dyn FnMut(Entry) -> bool,
    ) -> Result<(), StorageError> {
        self.inner.scan(prefix, after, visit)
    }
    fn key_count(&self) -> Result<u64, StorageError> {
        self.inner.key_count()
    }
    fn expired_before(&self, now: UnixMillis, limit: usize) -> Result<Vec<Entry>, StorageError> {
        self.inner.expired_before(now, limit)
    }
    fn history(
        &self,
        keys: &KeyFilter,
        revisions: RangeInclusive<u64>,
        order: Order,
        visit: &mut dyn FnMut(Event) -> bool,
    ) -> Result<(), StorageError> {
        self.inner.history(keys, revisions, order, visit)
    }
}

impl WriteTxn for FlakyWrite<'_> {
    fn put(&mut self, entry: &Entry) -> Result<(), StorageError> {
        self.inner.put(entry)
    }
    fn delete(&mut self, key: &str) -> Result<(), StorageError> {
        self.inner.delete(key)
    }
    fn append(&mut self, event: &Event) -> Result<(), StorageError> {
        self.inner.append(event)
    }
    fn set_revision(&mut self, revision: u64) -> Result<(), StorageError> {
        self.inner.set_revision(revision)
    }
    fn clear(&mut self, compacted_through: u64) -> Result<u64, StorageError> {
        self.inner.clear(compacted_through)
    }
    fn compact(&mut self, through: u64, limit: usize) -> Result<u64, StorageError> {
        self.inner.compact(through, limit)
    }
    fn commit(self: Box<Self>) -> Result<(), StorageError> {
        let fail = self.failures.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
        if fail {
            // Dropping the inner transaction aborts it: nothing of this attempt lands.
            return Err(StorageError::Retryable("connection reset before commit".into()));
        }
        self.inner.commit()
    }
}

fn flaky(failures: &Arc<AtomicU32>) -> impl Fn() -> Fixture + Send + Sync + use<> {
    let failures = failures.clone();
    move || {
        let inner = RedbBackend::in_memory().expect("in-memory redb");
        Fixture::new(Arc::new(Flaky { inner, failures: failures.clone() }))
    }
}

#[tokio::test]
async fn transient_commit_failures_are_retried_and_applied_once() {
    let failures = Arc::new(AtomicU32::new(0));
    let s = Store::new(&flaky(&failures));
    s.set("k", json!(1)).await;
    failures.store(3, Ordering::SeqCst);
    let write = SetRequest { request_id: Some("r".into()), ..set_req("k", json!(2), Some(1)) };
    let result = s.engine.set(write).await.expect("succeeds after retries");
    assert_eq!((result.status, result.version, result.revision), (WriteStatus::Ok, 2, 2));
    assert_eq!(s.engine.batch_stats().retries, 3);
    assert_eq!(history_since(&s.engine, 0, 10).await.len(), 2, "one event per write, none from failed attempts");
}

#[tokio::test]
async fn a_failure_that_persists_is_reported_and_applies_nothing() {
    let failures = Arc::new(AtomicU32::new(u32::MAX));
    let s = Store::new(&flaky(&failures));
    let error = s.engine.set(set_req("k", json!(1), None)).await.unwrap_err();
    assert!(matches!(error, EngineError::Storage(StorageError::Retryable(_))), "{error}");
    failures.store(0, Ordering::SeqCst);
    assert_eq!(s.revision().await, 0);
    assert_eq!(s.get("k").await.version, 0, "nothing was applied");
}
