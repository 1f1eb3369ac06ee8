use std::sync::Arc;

use state_store::RedbBackend;
pub(crate) use state_store::conformance::{Fixture, Store, counter, history_since, set_req, txn};

/// redb with an in-memory backing store.
pub(crate) fn redb_memory() -> Fixture {
    Fixture::new(Arc::new(RedbBackend::in_memory().expect("in-memory redb")))
}

/// redb on a file in a fresh temporary directory.
pub(crate) fn redb_file() -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let backend = RedbBackend::open(&dir.path().join("state.redb")).expect("open redb file");
    Fixture { backend: Arc::new(backend), keep: Box::new(dir) }
}
