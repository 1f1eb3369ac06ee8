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

/// Where the PostgreSQL tests run: `STATE_TEST_POSTGRES_URL` (`.ci/run` sets it).
pub(crate) const POSTGRES_URL_VAR: &str = "STATE_TEST_POSTGRES_URL";

/// Whether the PostgreSQL tests can run here; says so on stderr when they cannot. Under
/// `STATE_REQUIRE_POSTGRES=1` (CI) a missing URL fails instead.
pub(crate) fn postgres_available() -> bool {
    if std::env::var_os(POSTGRES_URL_VAR).is_some() {
        return true;
    }
    assert!(
        std::env::var_os("STATE_REQUIRE_POSTGRES").is_none(),
        "STATE_REQUIRE_POSTGRES is set but {POSTGRES_URL_VAR} is not"
    );
    eprintln!(
        "SKIPPED: set {POSTGRES_URL_VAR} (e.g. postgres://postgres@127.0.0.1/postgres) to run the PostgreSQL tests"
    );
    false
}

/// A store in a fresh schema of the test database, dropped when the fixture is.
pub(crate) fn postgres() -> Fixture {
    postgres_in(unique_schema("conformance"))
}

/// A store in `schema` of the test database, dropped when the fixture is.
pub(crate) fn postgres_in(schema: String) -> Fixture {
    use state_store::backend::postgres::{PostgresBackend, PostgresOptions};
    let url = std::env::var(POSTGRES_URL_VAR).expect("postgres_available() was checked");
    let options = PostgresOptions {
        schema: schema.clone(),
        pool_size: 4,
        // Stories drive time with a manual clock.
        database_clock: false,
        ..PostgresOptions::new(url.clone())
    };
    let backend = PostgresBackend::open(options).expect("open PostgreSQL");
    Fixture { backend: Arc::new(backend), keep: Box::new(DropSchema { url, schema }) }
}

/// A schema name no other test (or test process) uses.
pub(crate) fn unique_schema(what: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("test_{what}_{}_{}_{nanos}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Runs `sql` on a connection of its own to the test database, as a writer that ignores the
/// store's lock would.
pub(crate) fn behind_its_back(sql: &str) {
    let url = std::env::var(POSTGRES_URL_VAR).expect("postgres_available() was checked");
    let sql = sql.to_owned();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async {
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect");
            tokio::spawn(connection);
            client.batch_execute(&sql).await.expect("the statements behind the store's back");
        });
    })
    .join()
    .expect("the writer behind the store's back");
}

struct DropSchema {
    url: String,
    schema: String,
}

impl Drop for DropSchema {
    fn drop(&mut self) {
        // On a thread of its own: the fixture may be dropped inside a runtime.
        let (url, schema) = (self.url.clone(), self.schema.clone());
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            runtime.block_on(async {
                if let Ok((client, connection)) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await {
                    tokio::spawn(connection);
                    let _ = client.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE")).await;
                }
            });
        })
        .join();
    }
}

/// Returns once `done` says so, looking again every few milliseconds; panics, naming `what`,
/// if it has not within `patience`. The one place these tests poll.
pub(crate) async fn until(what: &str, patience: std::time::Duration, mut done: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + patience;
    while !done().await {
        assert!(tokio::time::Instant::now() < deadline, "waited {patience:?} for {what}, in vain");
        // The poll itself: this is the one place these tests wait.
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
}
