//! Read and write transactions on one pooled connection.
//!
//! A read transaction is `REPEATABLE READ, READ ONLY`: one snapshot for all its statements. A
//! write transaction is `READ COMMITTED` behind the lock on the `meta` row (see the module
//! above): once it holds the lock no other writer can commit, so each statement it runs sees
//! exactly the last commit plus its own changes.
//!
//! A write transaction buffers its entry writes (`pending.rs`) and its events, and sends them
//! in one round trip before anything reads more than one key and at commit: a batch of N
//! writes costs about N round trips for the reads its plans make, not 3N.

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::HashMap;
use std::ops::RangeInclusive;

use deadpool_postgres::Object;
use state_core::ops::history::KeyFilter;
use state_core::{Action, Entry, Event, EventKind, UnixMillis};
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use super::PostgresBackend;
use super::pending::{Guard, Pending, Statements, signed};
use crate::backend::{Order, ReadTxn, WriteTxn};
use crate::error::StorageError;

/// Rows fetched per round trip of a scan or a history walk; the visitor may stop early.
const PAGE: i64 = 256;

pub(super) struct PgTxn<'a> {
    backend: &'a PostgresBackend,
    /// Set when the transaction begins (a read transaction: with its first statement); taken
    /// by `commit` or `Drop`, which hand the connection back.
    client: OnceCell<Object>,
    write: Option<WriteState>,
    /// A read transaction's meta row, read once on first use.
    meta: Cell<Option<(u64, u64, u64)>>,
}

struct WriteState {
    revision: u64,
    compacted: u64,
    /// `clock_timestamp()` when the lock was granted.
    now: UnixMillis,
    /// What this transaction saw in the database of each key (its version, or absent): the
    /// guard its write to that key carries.
    observed: RefCell<HashMap<String, Option<u64>>>,
    /// Entries fetched as the transaction began, as the database holds them, until this
    /// transaction writes them (then `pending`, and after a flush the database, has them).
    known: RefCell<HashMap<String, Option<Entry>>>,
    /// Entry writes not yet sent.
    pending: RefCell<Pending>,
    /// Appended but not yet inserted, each with its sequence number within its revision.
    events: RefCell<Vec<(Event, i32)>>,
    next_seq: Option<(u64, i32)>,
    /// User keys added (or removed) by what was sent so far.
    user_keys: Cell<i64>,
    new_revision: Option<u64>,
}

/// The new revision as a parameter and as the doorbell's payload.
type RevisionParams = Option<(i64, String)>;

impl WriteState {
    /// Takes what is buffered and not yet sent: the entry writes, the events and (when
    /// `committing`) the new revision.
    fn unsent(&self, committing: bool) -> Result<(Statements, EventColumns, RevisionParams), StorageError> {
        let rows = self.pending.borrow_mut().take()?;
        let mut events = EventColumns::default();
        for (event, seq) in self.events.borrow_mut().drain(..) {
            events.push(&event, seq)?;
        }
        let revision = match self.new_revision {
            Some(revision) if committing => Some((signed(revision)?, revision.to_string())),
            _ => None,
        };
        Ok((rows, events, revision))
    }
}

impl<'a> PgTxn<'a> {
    /// A snapshot that begins with its first statement: BEGIN, the meta row and that
    /// statement go out together, so a point read is one round trip.
    pub(super) fn begin_read(backend: &'a PostgresBackend) -> Result<PgTxn<'a>, StorageError> {
        Ok(PgTxn { backend, client: OnceCell::new(), write: None, meta: Cell::new(None) })
    }

    /// Begins a write: BEGIN, the lock on the meta row and the entries of `reads` (the keys
    /// the batch's plans read first) in one round trip.
    pub(super) fn begin_write(backend: &'a PostgresBackend, reads: Vec<String>) -> Result<PgTxn<'a>, StorageError> {
        let sql = &backend.sql;
        let lock = if backend.options.unguarded { &sql.read_meta_unlocked } else { &sql.lock_meta };
        let params: [&(dyn ToSql + Sync); 1] = [&reads];
        let first = (!reads.is_empty()).then_some((sql.get_many.as_str(), &params[..]));
        let (client, (revision, compacted, now), rows) = backend.block(begin_with(backend, "BEGIN", lock, first))?;
        let write = WriteState {
            revision,
            compacted,
            now: UnixMillis(now),
            observed: RefCell::new(HashMap::new()),
            known: RefCell::new(HashMap::new()),
            pending: RefCell::new(Pending::default()),
            events: RefCell::new(Vec::new()),
            next_seq: None,
            user_keys: Cell::new(0),
            new_revision: None,
        };
        // Made before anything can fail, so that a failure rolls the transaction back (and
        // lets the lock go) as it is dropped.
        let txn = PgTxn { backend, client: OnceCell::from(client), write: Some(write), meta: Cell::new(None) };
        // Read under the lock, so nothing changes them before this transaction writes them.
        let mut known: HashMap<String, Option<Entry>> = reads.into_iter().map(|key| (key, None)).collect();
        for row in &rows {
            let entry = decode_entry(row)?;
            known.insert(entry.key.clone(), Some(entry));
        }
        if let Some(write) = &txn.write {
            *write.observed.borrow_mut() =
                known.iter().map(|(key, entry)| (key.clone(), entry.as_ref().map(|e| e.version))).collect();
            *write.known.borrow_mut() = known;
        }
        Ok(txn)
    }

    fn client(&self) -> Result<&Object, StorageError> {
        self.client.get().ok_or_else(|| StorageError::Other("transaction not begun or already finished".into()))
    }

    fn query(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, StorageError> {
        let Some(client) = self.client.get() else { return self.begin_snapshot(Some((sql, params))) };
        self.backend.block(run(client, sql, params)).map_err(storage)
    }

    /// Begins a read transaction: BEGIN, the meta row and `first` (if any) in one round trip.
    /// Returns what `first` returned.
    fn begin_snapshot(&self, first: Option<(&str, &[&(dyn ToSql + Sync)])>) -> Result<Vec<Row>, StorageError> {
        let begin = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY";
        let (client, meta, rows) =
            self.backend.block(begin_with(self.backend, begin, &self.backend.sql.read_meta, first))?;
        self.meta.set(Some(meta));
        // Only this transaction's own thread begins it, once.
        let _ = self.client.set(client);
        Ok(rows)
    }

    /// A read transaction's meta row (revision, compacted revision, user keys), which comes
    /// with its first statement.
    fn read_meta(&self) -> Result<(u64, u64, u64), StorageError> {
        if self.meta.get().is_none() {
            self.begin_snapshot(None)?;
        }
        self.meta
            .get()
            .ok_or_else(|| StorageError::Other("internal error: a snapshot began without its meta row".into()))
    }

    fn observe(&self, key: &str, version: Option<u64>) {
        if let Some(write) = &self.write {
            write.observed.borrow_mut().entry(key.to_owned()).or_insert(version);
        }
    }

    /// Sends buffered entry writes and events (and, when committing, the revision and the
    /// doorbell) in one round trip, checking every guard. Anything that reads more than one
    /// key from the database calls this first.
    fn flush(&self, committing: bool) -> Result<(), StorageError> {
        let Some(write) = &self.write else { return Ok(()) };
        let (rows, events, revision) = write.unsent(committing)?;
        if rows.is_empty() && events.revision.is_empty() && revision.is_none() {
            return Ok(());
        }
        let sql = &self.backend.sql;
        let unguarded = self.backend.options.unguarded;
        let client = self.client()?;
        let (u, i, p, expected) = (&rows.updates, &rows.inserts, &rows.upserts, &rows.expected);
        let mut sent: Vec<std::pin::Pin<Box<dyn Future<Output = Sent> + '_>>> = Vec::new();
        if u.len() > 0 {
            sent.push(Box::pin(async move {
                let mut params = u.params().to_vec();
                params.push(expected);
                (Kind::Update(u.len()), run(client, &sql.update_version_many, &params).await)
            }));
        }
        for (kind, entries, statement) in
            [(Kind::Insert(i.len()), i, &sql.insert_absent_many), (Kind::Upsert, p, &sql.upsert_many)]
        {
            if entries.len() > 0 {
                sent.push(Box::pin(async move { (kind, run(client, statement, &entries.params()).await) }));
            }
        }
        if !rows.guarded_deletes.is_empty() {
            let n = rows.guarded_deletes.len();
            let params: [&(dyn ToSql + Sync); 2] = [&rows.guarded_deletes, &rows.deleted_versions];
            sent.push(Box::pin(async move {
                (Kind::GuardedDelete(n), run(client, &sql.delete_version_many, &params).await)
            }));
        }
        if !rows.deletes.is_empty() {
            sent.push(Box::pin(async { (Kind::Delete, run(client, &sql.delete_many, &[&rows.deletes]).await) }));
        }
        if !events.revision.is_empty() {
            let append = if unguarded { &sql.append_unguarded } else { &sql.append };
            let e = &events;
            sent.push(Box::pin(async move { (Kind::Plain, run(client, append, &e.params()).await) }));
        }
        if let Some((revision, text)) = &revision {
            let set = if unguarded { &sql.set_revision_unguarded } else { &sql.set_revision };
            sent.push(Box::pin(async move { (Kind::Plain, run(client, set, &[revision]).await) }));
            // Delivered to listeners when (and only if) this transaction commits.
            sent.push(Box::pin(async move { (Kind::Plain, run(client, &sql.notify, &[&sql.channel, text]).await) }));
        }
        // Sent in order, answered together: one round trip.
        let answers = self.backend.block(futures_util::future::join_all(sent));
        for (kind, answer) in answers {
            let answered = answer.map_err(storage)?;
            let guarded = match kind {
                Kind::Update(n) | Kind::Insert(n) | Kind::GuardedDelete(n) => Some(n),
                Kind::Upsert | Kind::Delete | Kind::Plain => None,
            };
            if guarded.is_some_and(|n| answered.len() != n) {
                return Err(StorageError::Retryable(
                    "a key this transaction read changed before it wrote it; the batch is planned again".into(),
                ));
            }
            // Rows of user keys (`system` false) that came or went.
            let user = |row: &&Row| !row.get::<_, bool>(0);
            let change = match kind {
                Kind::Insert(_) => answered.iter().filter(user).count() as i64,
                Kind::Upsert => answered.iter().filter(user).filter(|row| row.get::<_, bool>(1)).count() as i64,
                Kind::GuardedDelete(_) | Kind::Delete => -(answered.iter().filter(user).count() as i64),
                Kind::Update(_) | Kind::Plain => 0,
            };
            write.user_keys.set(write.user_keys.get() + change);
        }
        let mut observed = write.observed.borrow_mut();
        for (key, version) in rows.written() {
            observed.insert(key.to_owned(), version);
        }
        Ok(())
    }
}

/// What a statement of a flush was, so its answer gets the right check: the guarded ones
/// (with how many rows they name) must touch every row.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Update(usize),
    Insert(usize),
    Upsert,
    GuardedDelete(usize),
    Delete,
    Plain,
}

type Sent = (Kind, Result<Vec<Row>, tokio_postgres::Error>);

async fn run(client: &Object, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, tokio_postgres::Error> {
    let statement = client.prepare_cached(sql).await?;
    client.query(&statement, params).await
}

/// A pooled connection with a transaction begun by `begin`, its meta row read by `meta` (the
/// revision row's first statement, locking it for a writer), and what `first` returns, all
/// sent before any answer is awaited: one round trip.
async fn begin_with(
    backend: &PostgresBackend,
    begin: &str,
    meta: &str,
    first: Option<(&str, &[&(dyn ToSql + Sync)])>,
) -> Result<(Object, (u64, u64, u64), Vec<Row>), StorageError> {
    let client = backend.connection().await?;
    let (begun, meta, rows) =
        futures_util::future::join3(client.batch_execute(begin), run(&client, meta, &[]), async {
            match first {
                Some((text, params)) => run(&client, text, params).await,
                None => Ok(Vec::new()),
            }
        })
        .await;
    begun.map_err(storage)?;
    let meta = meta_of(&meta.map_err(storage)?)?;
    Ok((client, meta, rows.map_err(storage)?))
}

/// The first three columns of a meta row read (the revision, the compacted revision, and
/// the user key count or the database clock).
pub(super) fn meta_of(rows: &[Row]) -> Result<(u64, u64, u64), StorageError> {
    let row = rows.first().ok_or_else(|| StorageError::Corrupt("the meta row is missing".into()))?;
    Ok((unsigned(row.get(0))?, unsigned(row.get(1))?, unsigned(row.get(2))?))
}

#[derive(Default)]
struct EventColumns {
    revision: Vec<i64>,
    seq: Vec<i32>,
    key: Vec<String>,
    kind: Vec<i16>,
    action: Vec<i16>,
    version: Vec<i64>,
    agent_id: Vec<Option<String>>,
    time: Vec<i64>,
    value: Vec<Option<String>>,
    by: Vec<Option<String>>,
}

impl EventColumns {
    /// The columns as the append statement's parameters $1..$10.
    fn params(&self) -> [&(dyn ToSql + Sync); 10] {
        [
            &self.revision,
            &self.seq,
            &self.key,
            &self.kind,
            &self.action,
            &self.version,
            &self.agent_id,
            &self.time,
            &self.value,
            &self.by,
        ]
    }

    fn push(&mut self, event: &Event, seq: i32) -> Result<(), StorageError> {
        self.revision.push(signed(event.revision)?);
        self.seq.push(seq);
        self.key.push(event.key.clone());
        self.kind.push(i16::from(event.kind.code()));
        self.action.push(event.action.map_or(0, |a| i16::from(a.code())));
        self.version.push(signed(event.version)?);
        self.agent_id.push(event.agent_id.clone());
        self.time.push(signed(event.time.0)?);
        self.value.push(event.value.as_ref().map(|v| v.to_string()));
        self.by.push(event.by.clone());
        Ok(())
    }
}

impl ReadTxn for PgTxn<'_> {
    fn revision(&self) -> Result<u64, StorageError> {
        match &self.write {
            Some(write) => Ok(write.new_revision.unwrap_or(write.revision)),
            None => Ok(self.read_meta()?.0),
        }
    }

    fn compacted_revision(&self) -> Result<u64, StorageError> {
        match &self.write {
            Some(write) => Ok(write.compacted),
            None => Ok(self.read_meta()?.1),
        }
    }

    fn get(&self, key: &str) -> Result<Option<Entry>, StorageError> {
        if let Some(write) = &self.write {
            if let Some(written) = write.pending.borrow().get(key) {
                return Ok(written.cloned());
            }
            if let Some(known) = write.known.borrow().get(key) {
                return Ok(known.clone());
            }
        }
        let rows = self.query(&self.backend.sql.get, &[&key])?;
        let entry = rows.first().map(decode_entry).transpose()?;
        self.observe(key, entry.as_ref().map(|e| e.version));
        Ok(entry)
    }

    fn scan(
        &self,
        prefix: &str,
        after: Option<&str>,
        visit: &mut dyn FnMut(Entry) -> bool,
    ) -> Result<(), StorageError> {
        self.flush(false)?;
        let mut cursor: Option<String> = after.filter(|a| *a >= prefix).map(str::to_owned);
        loop {
            // Each page is fetched whole before it is visited, so a visitor may read other keys.
            let rows = match &cursor {
                Some(after) => self.query(&self.backend.sql.scan_after, &[after, &PAGE])?,
                None => self.query(&self.backend.sql.scan_from, &[&prefix, &PAGE])?,
            };
            let complete = (rows.len() as i64) < PAGE;
            for row in &rows {
                let entry = decode_entry(row)?;
                if !entry.key.starts_with(prefix) {
                    return Ok(());
                }
                self.observe(&entry.key, Some(entry.version));
                cursor = Some(entry.key.clone());
                if !visit(entry) {
                    return Ok(());
                }
            }
            if complete {
                return Ok(());
            }
        }
    }

    fn key_count(&self) -> Result<u64, StorageError> {
        let (_, _, stored) = match &self.write {
            // A write transaction's own changes are not in the row yet.
            Some(write) => {
                self.flush(false)?;
                let (_, _, stored) = meta_of(&self.query(&self.backend.sql.read_meta, &[])?)?;
                return Ok(stored.saturating_add_signed(write.user_keys.get()));
            }
            None => self.read_meta()?,
        };
        Ok(stored)
    }

    fn replicas(&self) -> Result<Option<u64>, StorageError> {
        if !self.backend.counts_replicas {
            return Ok(None);
        }
        let rows = self.query(&self.backend.sql.count_replicas, &[&self.backend.sql.replica_name_prefix])?;
        let count: i64 = rows.first().map(|row| row.try_get(0)).transpose().map_err(storage)?.unwrap_or(0);
        Ok(Some(u64::try_from(count).unwrap_or(0)))
    }

    fn expired_before(&self, now: UnixMillis, limit: usize) -> Result<Vec<Entry>, StorageError> {
        self.flush(false)?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.query(&self.backend.sql.expired, &[&signed(now.0)?, &limit])?;
        let entries = rows.iter().map(decode_entry).collect::<Result<Vec<_>, _>>()?;
        for entry in &entries {
            self.observe(&entry.key, Some(entry.version));
        }
        Ok(entries)
    }

    fn history(
        &self,
        keys: &KeyFilter,
        revisions: RangeInclusive<u64>,
        order: Order,
        visit: &mut dyn FnMut(Event) -> bool,
    ) -> Result<(), StorageError> {
        self.flush(false)?;
        let (filter, key): (usize, &str) = match keys {
            KeyFilter::All => (0, ""),
            KeyFilter::UserKeys => (1, ""),
            KeyFilter::Exact(key) => (2, key),
            KeyFilter::Prefix(prefix) => (3, prefix),
        };
        let descending = order == Order::Descending;
        let sql = self.backend.sql.history(filter, descending);
        let (low, high) = (signed(*revisions.start())?, signed((*revisions.end()).min(i64::MAX as u64))?);
        // Keyset pagination: resume after the last (revision, seq) handed over; sequence
        // numbers start at 0, so (r, -1) stands just before revision r's first event.
        let mut resume: (i64, i32) = if descending { (high, -1) } else { (low, -1) };
        loop {
            let rows = self.query(sql, &[&low, &high, &PAGE, &key, &resume.0, &resume.1])?;
            let complete = (rows.len() as i64) < PAGE;
            for row in &rows {
                resume = (row.get(0), row.get(9));
                let event = decode_event(row)?;
                if keys.matches(&event.key) && !visit(event) {
                    return Ok(());
                }
            }
            if complete {
                return Ok(());
            }
        }
    }
}

impl WriteTxn for PgTxn<'_> {
    fn put(&mut self, entry: &Entry) -> Result<(), StorageError> {
        self.buffer(&entry.key, Some(entry.clone()))
    }

    fn delete(&mut self, key: &str) -> Result<(), StorageError> {
        self.buffer(key, None)
    }

    fn append(&mut self, event: &Event) -> Result<(), StorageError> {
        let write = self.write_state()?;
        let seq = match write.next_seq {
            Some((revision, seq)) if revision == event.revision => seq,
            _ => 0,
        };
        write.next_seq = Some((event.revision, seq + 1));
        write.events.borrow_mut().push((event.clone(), seq));
        Ok(())
    }

    fn set_revision(&mut self, revision: u64) -> Result<(), StorageError> {
        self.write_state()?.new_revision = Some(revision);
        Ok(())
    }

    fn clear(&mut self, compacted_through: u64) -> Result<u64, StorageError> {
        self.flush(false)?;
        let sql = &self.backend.sql;
        let removed = self.query(&sql.clear, &[])?.first().map_or(0, |row| row.get::<_, i64>(0));
        self.query(&sql.set_compacted, &[&signed(compacted_through)?])?;
        let (_, _, stored) = meta_of(&self.query(&sql.read_meta, &[])?)?;
        let write = self.write_state()?;
        write.user_keys.set(-i64::try_from(stored).unwrap_or(i64::MAX));
        write.compacted = compacted_through;
        write.next_seq = None;
        write.observed.borrow_mut().clear();
        write.known.borrow_mut().clear();
        unsigned(removed)
    }

    fn compact(&mut self, through: u64, limit: usize) -> Result<u64, StorageError> {
        self.flush(false)?;
        let compacted = self.write_state()?.compacted;
        if through <= compacted {
            return Ok(compacted);
        }
        let sql = &self.backend.sql;
        let (from, to) = (signed(compacted)?, signed(through)?);
        // The revision of the `limit`th event: compaction ends with it, whole revisions only.
        let offset = i64::try_from(limit.saturating_sub(1)).unwrap_or(i64::MAX);
        let last =
            self.query(&sql.compaction_boundary, &[&from, &to, &offset])?.first().map(|row| row.get::<_, i64>(0));
        let end = last.unwrap_or(to);
        self.query(&sql.compact, &[&from, &end])?;
        let more = self.query(&sql.events_left, &[&end, &to])?.first().is_some_and(|row| row.get::<_, bool>(0));
        let new = if more { unsigned(end)? } else { through };
        self.query(&sql.set_compacted, &[&signed(new)?])?;
        self.write_state()?.compacted = new;
        Ok(new)
    }

    /// Writes that were all read first (so all guarded) go out with COMMIT, in one round trip:
    /// the database checks each guarded statement's row count (`guard`), and a failed check
    /// aborts the transaction, which turns the COMMIT into a rollback. A transaction with
    /// blind writes flushes first, since their answers say whether they added keys.
    fn commit(mut self: Box<Self>) -> Result<(), StorageError> {
        let with_writes = !self.backend.options.unguarded && self.write_state()?.pending.get_mut().all_guarded();
        if !with_writes {
            self.flush(true)?;
        }
        let write = self.write.as_ref().ok_or_else(|| StorageError::Other("not a write transaction".into()))?;
        let (rows, events, revision) = write.unsent(with_writes)?;
        let added = rows.inserts.system.iter().filter(|system| !**system).count() as i64
            - rows.guarded_deletes.iter().filter(|key| !state_core::keyspace::is_system(key)).count() as i64;
        let user_keys = write.user_keys.get() + added;
        let client = self.client.get().ok_or_else(|| StorageError::Other("transaction already finished".into()))?;
        let sql = &self.backend.sql;
        let (u, i) = (&rows.updates, &rows.inserts);
        let counts = [u.len() as i64, i.len() as i64, rows.guarded_deletes.len() as i64];
        let mut statements: Vec<(&str, Vec<&(dyn ToSql + Sync)>)> = Vec::new();
        if u.len() > 0 {
            let mut params = u.params().to_vec();
            params.extend([&rows.expected as &(dyn ToSql + Sync), &counts[0]]);
            statements.push((&sql.update_version_checked, params));
        }
        if i.len() > 0 {
            let mut params = i.params().to_vec();
            params.push(&counts[1]);
            statements.push((&sql.insert_absent_checked, params));
        }
        if !rows.guarded_deletes.is_empty() {
            statements
                .push((&sql.delete_version_checked, vec![&rows.guarded_deletes, &rows.deleted_versions, &counts[2]]));
        }
        if !events.revision.is_empty() {
            statements.push((&sql.append, events.params().to_vec()));
        }
        if let Some((revision, text)) = &revision {
            statements.push((&sql.set_revision, vec![revision]));
            // Delivered to listeners when (and only if) this transaction commits.
            statements.push((&sql.notify, vec![&sql.channel, text]));
        }
        if user_keys != 0 {
            statements.push((&sql.add_user_keys, vec![&user_keys]));
        }
        // Prepared first (a round trip only on a connection's first use of a statement), so
        // that the statements and COMMIT then leave in order: a statement still being prepared
        // when COMMIT is sent would run after it, outside the transaction.
        let prepared = self
            .backend
            .block(futures_util::future::try_join_all(statements.iter().map(|(text, _)| client.prepare_cached(text))))
            .map_err(storage)?;
        let mut sent: Vec<_> = statements
            .iter()
            .zip(&prepared)
            .map(|((_, params), statement)| Box::pin(client.query(statement, params)))
            .collect();
        // Polled once each, a statement is sent, in order, or fails before anything is sent
        // (its parameters would not encode). COMMIT only follows when all were sent: after
        // one that never left, it would commit the rest.
        let mut early: Vec<Option<Result<Vec<Row>, tokio_postgres::Error>>> = Vec::new();
        self.backend.block(std::future::poll_fn(|cx| {
            early = sent
                .iter_mut()
                .map(|statement| match statement.as_mut().poll(cx) {
                    std::task::Poll::Ready(answer) => Some(answer),
                    std::task::Poll::Pending => None,
                })
                .collect();
            std::task::Poll::Ready(())
        }));
        if let Some(unsent) = early.iter_mut().find_map(|answer| answer.take_if(|a| a.is_err())).and_then(Result::err) {
            // Dropping the transaction rolls back whatever did go out.
            return Err(storage(unsent));
        }
        let answers = sent.into_iter().zip(early).map(|(statement, early)| async move {
            match early {
                Some(answer) => answer,
                None => statement.await,
            }
        });
        let (answers, committed) = self
            .backend
            .block(futures_util::future::join(futures_util::future::join_all(answers), client.batch_execute("COMMIT")));
        // Answered, one way or another: nothing is left for dropping to roll back.
        drop(self.client.take());
        if let Err(e) = &committed
            && (e.is_closed() || e.code().is_none())
        {
            // The COMMIT may or may not have reached the database: never retry blindly.
            return Err(StorageError::OutcomeUnknown(format!(
                "the connection to PostgreSQL failed during COMMIT: {e}"
            )));
        }
        // A statement that failed aborted the transaction: PostgreSQL answered the COMMIT as a
        // rollback, without an error, so that failure decides.
        if let Some(failed) = answers.into_iter().find_map(Result::err) {
            return Err(storage(failed));
        }
        committed.map_err(storage)
    }

    fn database_now(&self) -> Option<UnixMillis> {
        self.write.as_ref().filter(|_| self.backend.options.database_clock).map(|w| w.now)
    }
}

impl PgTxn<'_> {
    /// Buffers a write of `key`, guarded by what the transaction saw of it in the database.
    fn buffer(&mut self, key: &str, entry: Option<Entry>) -> Result<(), StorageError> {
        let unguarded = self.backend.options.unguarded;
        let write = self.write_state()?;
        let guard = match write.observed.borrow().get(key) {
            _ if unguarded => Guard::Blind,
            Some(Some(version)) => Guard::Version(*version),
            Some(None) => Guard::Absent,
            None => Guard::Blind,
        };
        write.known.get_mut().remove(key);
        write.pending.get_mut().write(key, entry, guard);
        Ok(())
    }

    fn write_state(&mut self) -> Result<&mut WriteState, StorageError> {
        self.write.as_mut().ok_or_else(|| StorageError::Other("not a write transaction".into()))
    }
}

impl Drop for PgTxn<'_> {
    fn drop(&mut self) {
        // A read transaction ends; a write transaction that was not committed is rolled back.
        // Either way the connection goes back to the pool once the database has answered, in
        // the background, so dropping never waits.
        let Some(client) = self.client.take() else { return };
        let end = if self.write.is_some() { "ROLLBACK" } else { "COMMIT" };
        self.backend.handle.spawn(async move {
            if client.batch_execute(end).await.is_err() {
                // The connection is broken: keep it out of the pool.
                let _ = Object::take(client);
            }
        });
    }
}

/// A PostgreSQL error as a domain error: connection loss and the transient conflicts are
/// retryable (nothing was committed); anything else is not.
pub(super) fn storage(e: tokio_postgres::Error) -> StorageError {
    let transient = [
        SqlState::T_R_SERIALIZATION_FAILURE,
        SqlState::T_R_DEADLOCK_DETECTED,
        SqlState::LOCK_NOT_AVAILABLE,
        SqlState::ADMIN_SHUTDOWN,
        SqlState::CRASH_SHUTDOWN,
        SqlState::CANNOT_CONNECT_NOW,
        SqlState::TOO_MANY_CONNECTIONS,
        SqlState::UNIQUE_VIOLATION,
    ];
    match e.code() {
        None => StorageError::Retryable(format!("PostgreSQL connection: {e}")),
        Some(code) if transient.contains(code) || code.code().starts_with("08") => {
            StorageError::Retryable(format!("PostgreSQL: {e}"))
        }
        Some(_) => {
            StorageError::Other(format!("PostgreSQL: {}", e.as_db_error().map_or(e.to_string(), |d| d.to_string())))
        }
    }
}

pub(super) fn unsigned(n: i64) -> Result<u64, StorageError> {
    u64::try_from(n).map_err(|_| StorageError::Corrupt(format!("negative number {n} in a counter column")))
}

fn decode_json(text: &str, what: &str) -> Result<serde_json::Value, StorageError> {
    serde_json::from_str(text).map_err(|e| StorageError::Corrupt(format!("{what} is not JSON: {e}")))
}

/// Decodes `key, value, version, create_revision, mod_revision, updated_at, expires_at, agent_id`.
pub(super) fn decode_entry(row: &Row) -> Result<Entry, StorageError> {
    let key: String = row.get(0);
    Ok(Entry {
        value: decode_json(row.get(1), &format!("the value of `{key}`"))?,
        version: unsigned(row.get(2))?,
        create_revision: unsigned(row.get(3))?,
        mod_revision: unsigned(row.get(4))?,
        updated_at: UnixMillis(unsigned(row.get(5))?),
        expires_at: row.get::<_, Option<i64>>(6).map(unsigned).transpose()?.map(UnixMillis),
        agent_id: row.get(7),
        key,
    })
}

/// Decodes `revision, key, kind, action, version, agent_id, time, value, by_principal`.
fn decode_event(row: &Row) -> Result<Event, StorageError> {
    let code = row.get::<_, i16>(2);
    let kind = u8::try_from(code)
        .ok()
        .and_then(EventKind::from_code)
        .ok_or_else(|| StorageError::Corrupt(format!("unknown event kind {code}")))?;
    let action = match row.get::<_, i16>(3) {
        0 => None,
        code => Some(
            u8::try_from(code)
                .ok()
                .and_then(Action::from_code)
                .ok_or_else(|| StorageError::Corrupt(format!("unknown event action {code}")))?,
        ),
    };
    let key: String = row.get(1);
    let value =
        row.get::<_, Option<&str>>(7).map(|v| decode_json(v, &format!("an event value of `{key}`"))).transpose()?;
    Ok(Event {
        revision: unsigned(row.get(0))?,
        kind,
        action,
        version: unsigned(row.get(4))?,
        agent_id: row.get(5),
        time: UnixMillis(unsigned(row.get(6))?),
        value,
        by: row.get(8),
        key,
    })
}
