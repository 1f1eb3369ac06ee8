//! The PostgreSQL backend: one database (one schema in it) shared by any number of engines in
//! any number of processes, so `state-http` replicas can run side by side.
//!
//! How the storage contract holds across processes:
//! - **One writer at a time, everywhere:** every write transaction begins by locking the single
//!   `meta` row (`SELECT ... FOR UPDATE`) and reading the revision under that lock. The next
//!   writer, in this process or another, waits on the row until the first commits, then reads
//!   the revision it committed. So revisions are gapless and in commit order, and every
//!   decision a plan takes (a version compare, an absent key, a lease's token, a run's claim)
//!   is taken on state no other writer can change before the commit.
//! - **Version predicates besides:** a write to a key this transaction read carries the version
//!   it read (`WHERE version = $n`, or insert-if-absent); a predicate that fails rolls the batch
//!   back as retryable. Under the lock this never fires; it guards the contract in depth.
//! - **Durable before acknowledged:** `COMMIT` with PostgreSQL's default `synchronous_commit`.
//! - **The database clock:** a write transaction reads `clock_timestamp()` as it takes the lock,
//!   and expiry decisions of that batch use it, so replicas agree on what has expired.
//! - **Commits by others:** each commit sends `NOTIFY` with its revision; [`follow`] turns
//!   those (or, where LISTEN is missing, a timer) into the engine's change feed.
//!
//! The trait is synchronous (the engine calls it from its writer thread and the blocking pool);
//! the backend drives tokio-postgres on a small runtime of its own and blocks on it there.

mod follow;
mod pending;
mod schema;
mod tls;
mod txn;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use self::schema::{MIGRATIONS, STORE_FORMAT, Sql};
use self::txn::PgTxn;
use super::{Backend, Follower, PointRead, ReadTxn, WriteTxn, WriterExclusion};
use crate::error::StorageError;

/// How a replica learns about commits made by the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowMode {
    /// LISTEN for the doorbell every commit rings, with a slow timer as a safety net.
    Notify,
    /// Poll the revision on a timer, for engines without LISTEN/NOTIFY.
    Poll(Duration),
}

/// Where and how to open a PostgreSQL-backed store.
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    /// A libpq-style URL or key=value string, e.g. `postgres://user@127.0.0.1:5432/db`.
    pub url: String,
    /// The schema holding the store's tables; created if missing. Several stores can share a
    /// database under different schemas.
    pub schema: String,
    /// Connections this process keeps to the database (plus one for LISTEN).
    pub pool_size: usize,
    /// Take expiry decisions by the database's clock (the default), not this process's.
    pub database_clock: bool,
    pub follow: FollowMode,
    /// Check the server's certificate against this CA bundle (PEM) and its name, and never
    /// connect unencrypted. Without it, `sslmode` in the URL decides as in libpq: encrypt when
    /// the server offers it (`prefer`, the default) or insist (`require`), unchecked.
    pub tls_ca: Option<std::path::PathBuf>,
    /// **Test only.** Drop every guard against concurrent writers: no lock on the revision row,
    /// no version predicates. Exists so the lost-update test can show that it catches lost
    /// updates; never set it on data you care about.
    pub unguarded: bool,
}

impl PostgresOptions {
    pub fn new(url: impl Into<String>) -> PostgresOptions {
        PostgresOptions {
            url: url.into(),
            schema: "state".into(),
            pool_size: 16,
            database_clock: true,
            follow: FollowMode::Notify,
            tls_ca: None,
            unguarded: false,
        }
    }
}

pub struct PostgresBackend {
    /// Drives the connections; `None` only while dropping.
    runtime: Option<tokio::runtime::Runtime>,
    handle: tokio::runtime::Handle,
    pool: Pool,
    config: tokio_postgres::Config,
    /// Whether this process's connections carry the name replicas are counted by.
    counts_replicas: bool,
    tls: MakeRustlsConnect,
    /// Shared with the tasks that outlive a call (point reads, the follower).
    sql: Arc<Sql>,
    options: PostgresOptions,
}

impl std::fmt::Debug for PostgresBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresBackend").field("schema", &self.options.schema).finish_non_exhaustive()
    }
}

impl PostgresBackend {
    /// Connects, creates the schema and applies pending migrations (under an advisory lock, so
    /// replicas starting together apply each migration once), and checks the store format.
    pub fn open(options: PostgresOptions) -> Result<PostgresBackend, StorageError> {
        let mut config: tokio_postgres::Config =
            options.url.parse().map_err(|e| StorageError::Other(format!("the PostgreSQL URL does not parse: {e}")))?;
        if options.tls_ca.is_some() {
            if config.get_ssl_mode() == SslMode::Disable {
                return Err(StorageError::Other(
                    "a CA bundle to check PostgreSQL's certificate was given, but the URL says sslmode=disable".into(),
                ));
            }
            config.ssl_mode(SslMode::Require);
        }
        let tls = tls::connector(options.tls_ca.as_deref())?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("state-postgres")
            .enable_all()
            .build()
            .map_err(|e| StorageError::Other(format!("cannot start the PostgreSQL client runtime: {e}")))?;
        let handle = runtime.handle().clone();
        let sql = Arc::new(Sql::new(&options.schema));
        // Every connection of this process carries one name, so `state_health` can count the
        // replicas on this store (distinct names) in pg_stat_activity, and an operator sees
        // whose connections these are; unless the URL names them itself (then not counted).
        let named_by_us = config.get_application_name().is_none();
        if named_by_us {
            let nonce =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
            config.application_name(format!("{}{}.{nonce:08x}", sql.replica_name_prefix, std::process::id()));
        }
        let manager = Manager::from_config(
            config.clone(),
            tls.clone(),
            ManagerConfig { recycling_method: RecyclingMethod::Fast },
        );
        let pool = {
            let _entered = handle.enter();
            Pool::builder(manager)
                .max_size(options.pool_size.max(1))
                .runtime(deadpool_postgres::Runtime::Tokio1)
                .wait_timeout(Some(Duration::from_secs(30)))
                .create_timeout(Some(Duration::from_secs(10)))
                .build()
                .map_err(|e| StorageError::Other(format!("cannot build the PostgreSQL pool: {e}")))?
        };
        let backend = PostgresBackend {
            runtime: Some(runtime),
            handle,
            pool,
            config,
            tls,
            sql,
            counts_replicas: named_by_us,
            options,
        };
        backend.migrate()?;
        Ok(backend)
    }

    /// Runs `future` to completion on this backend's runtime, from any thread (including one
    /// inside another runtime: it blocks that thread, which the engine never does on a worker).
    fn block<F: Future>(&self, future: F) -> F::Output {
        let _entered = self.handle.enter();
        futures_executor::block_on(future)
    }

    async fn connection(&self) -> Result<deadpool_postgres::Object, StorageError> {
        pooled(&self.pool).await
    }

    fn migrate(&self) -> Result<(), StorageError> {
        self.block(async {
            let mut client = self.connection().await?;
            let txn = client.transaction().await.map_err(txn::storage)?;
            // One key per schema: replicas of one store wait for each other, other stores don't.
            txn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&format!("state-migrate:{}", self.sql.schema)])
                .await
                .map_err(txn::storage)?;
            let s = &self.sql.schema;
            txn.batch_execute(&format!(
                "CREATE SCHEMA IF NOT EXISTS {s}; CREATE TABLE IF NOT EXISTS {s}.migrations \
                 (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            ))
            .await
            .map_err(txn::storage)?;
            let applied: Vec<i32> = txn
                .query(&format!("SELECT version FROM {s}.migrations"), &[])
                .await
                .map_err(txn::storage)?
                .iter()
                .map(|row| row.get(0))
                .collect();
            for (version, script) in MIGRATIONS {
                if applied.contains(version) {
                    continue;
                }
                txn.batch_execute(&script.replace("{s}", s)).await.map_err(txn::storage)?;
                txn.execute(&format!("INSERT INTO {s}.migrations (version) VALUES ($1)"), &[version])
                    .await
                    .map_err(txn::storage)?;
                tracing::info!(schema = %self.options.schema, version, "applied PostgreSQL migration");
            }
            let format: i32 = txn
                .query_one(&format!("SELECT format FROM {s}.meta WHERE id = 1"), &[])
                .await
                .map_err(txn::storage)?
                .get(0);
            if format > STORE_FORMAT {
                return Err(StorageError::Corrupt(format!(
                    "store format {format} is newer than this build understands ({STORE_FORMAT}); upgrade the server"
                )));
            }
            txn.commit().await.map_err(txn::storage)
        })
    }
}

pub(super) async fn pooled(pool: &Pool) -> Result<deadpool_postgres::Object, StorageError> {
    pool.get().await.map_err(|e| StorageError::Retryable(format!("cannot reach PostgreSQL: {}", causes(&e))))
}

/// An error with its causes ("error connecting to server: Connection refused"): the pool's
/// and the driver's messages alone do not say what went wrong.
fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        source = cause.source();
    }
    text
}

impl Drop for PostgresBackend {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which is refused inside another runtime; nothing waits
        // on these connections any more, so let them close in the background.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Backend for PostgresBackend {
    fn kind(&self) -> &'static str {
        "postgres"
    }

    fn writer_exclusion(&self) -> WriterExclusion {
        WriterExclusion::Database
    }

    fn begin_read(&self) -> Result<Box<dyn ReadTxn + '_>, StorageError> {
        Ok(Box::new(PgTxn::begin_read(self)?))
    }

    /// One statement on a pooled connection: no transaction, no hop to the blocking pool. It
    /// runs as a task on this backend's runtime, so every connection keeps being driven there
    /// whichever runtime the caller is on.
    fn get_now<'a>(&'a self, key: &'a str) -> Option<PointRead<'a>> {
        let (pool, sql, key) = (self.pool.clone(), self.sql.clone(), key.to_owned());
        let task = self.handle.spawn(async move {
            let client = pooled(&pool).await?;
            let statement = client.prepare_cached(&sql.get_now).await.map_err(txn::storage)?;
            let row = client.query_one(&statement, &[&key]).await.map_err(txn::storage)?;
            let revision = txn::unsigned(row.get(8))?;
            let entry = match row.get::<_, Option<String>>(0) {
                Some(_) => Some(txn::decode_entry(&row)?),
                None => None,
            };
            Ok((entry, revision))
        });
        Some(Box::pin(async move {
            task.await.map_err(|e| StorageError::Other(format!("PostgreSQL read task failed: {e}")))?
        }))
    }

    fn begin_write(&self) -> Result<Box<dyn WriteTxn + '_>, StorageError> {
        Ok(Box::new(PgTxn::begin_write(self, Vec::new())?))
    }

    fn begin_write_reading(
        &self,
        reads: &mut dyn Iterator<Item = &str>,
    ) -> Result<Box<dyn WriteTxn + '_>, StorageError> {
        let mut keys: Vec<String> = reads.map(str::to_owned).collect();
        keys.sort_unstable();
        keys.dedup();
        Ok(Box::new(PgTxn::begin_write(self, keys)?))
    }

    fn size_on_disk(&self) -> Option<u64> {
        None
    }

    fn follow(&self, on_commit: Box<dyn Fn(u64) + Send + Sync>) -> Result<Option<Follower>, StorageError> {
        Ok(Some(follow::spawn(self, on_commit)))
    }
}
