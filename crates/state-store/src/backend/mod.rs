//! The storage trait every backend implements. It speaks in domain records (entries, events),
//! not bytes; the engine above it owns ordering, batching and the rules.
//!
//! Every backend must pass the conformance suite (`state_store::conformance`, feature
//! `conformance`): a backend crate runs it with `state_store::conformance_suite!(factory)`.
//!
//! # The contract
//!
//! - **One writer at a time, everywhere.** Revisions and fencing tokens are unique only if
//!   exactly one write transaction commits at a time across every process that uses the
//!   database. The engine runs one write transaction at a time in its process;
//!   [`Backend::writer_exclusion`] says what keeps other processes out.
//! - **Durable before acknowledged.** [`WriteTxn::commit`] (and [`WriteTxn::commit_durably`])
//!   returns only once the changes would survive a crash or a power cut.
//! - **Visible after acknowledged, to every read that begins after it.** A backend may defer
//!   making a durable transaction visible ([`Unpublished`]); the engine holds back the reads
//!   that begin meanwhile until it is published.
//! - **Snapshots.** A [`ReadTxn`] sees one committed state, unaffected by later commits.
//! - **Errors are domain errors.** A backend turns its own errors into [`StorageError`]; a
//!   failure before commit that is worth retrying (a serialization conflict, a dropped
//!   connection) is [`StorageError::Retryable`], and the writer retries the whole batch.

pub mod postgres;
pub mod redb;

use std::ops::RangeInclusive;

use state_core::ops::history::KeyFilter;
use state_core::{Entry, Event, UnixMillis};

use crate::error::StorageError;

/// What keeps a second writer out of a database, so that revisions stay gapless and unique.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriterExclusion {
    /// One process holds the database at a time (redb locks its file), and the engine's
    /// single writer thread runs one write transaction at a time inside it. Other processes
    /// reach the database through its owner.
    Process,
    /// The database serialises write transactions itself (for example a row lock on the
    /// revision counter, taken first in every write transaction), so engines in several
    /// processes may share it.
    Database,
}

/// What giving a file's free space back to the file system did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpaceGiven {
    /// The file's size before and after.
    pub before_bytes: u64,
    pub after_bytes: u64,
    /// What its live pages took.
    pub in_use_bytes: u64,
    /// How long reads and writes waited for it.
    pub held_for: std::time::Duration,
}

/// What a backup holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backup {
    /// The store revision it was taken at: every change up to it, none after.
    pub revision: u64,
    /// The backup file's size.
    pub bytes: u64,
}

pub trait Backend: Send + Sync + 'static {
    /// Short name shown in health output, e.g. "redb".
    fn kind(&self) -> &'static str;
    /// Who excludes concurrent writers (see the module docs).
    fn writer_exclusion(&self) -> WriterExclusion;
    /// Whether a point read (one key, a handful of lookups) is cheap enough to run inline on
    /// an async worker. True for an embedded store whose reads hit a page cache; false where a
    /// read may wait on a network round trip, so the engine moves it to the blocking pool.
    fn inline_point_reads(&self) -> bool {
        false
    }
    /// The current entry of `key` (expired or not) and the revision it was read at, from one
    /// snapshot, awaited on the caller's runtime instead of a read transaction on the blocking
    /// pool; `None` where a read transaction is as cheap (the engine then uses one).
    fn get_now<'a>(&'a self, key: &'a str) -> Option<PointRead<'a>> {
        let _ = key;
        None
    }
    /// A consistent snapshot for reading.
    fn begin_read(&self) -> Result<Box<dyn ReadTxn + '_>, StorageError>;
    /// The write transaction. The engine never holds two at once; see
    /// [`Backend::writer_exclusion`] for other processes.
    fn begin_write(&self) -> Result<Box<dyn WriteTxn + '_>, StorageError>;
    /// The write transaction, told the keys its batch's plans read first
    /// (`state_core::plan::ReadsFirst`). A backend whose reads are round trips fetches them as
    /// it begins, so a batch holds the writers' lock for a few round trips, not one per
    /// request; one whose reads are local lookups ignores them without collecting them.
    fn begin_write_reading(
        &self,
        reads: &mut dyn Iterator<Item = &str>,
    ) -> Result<Box<dyn WriteTxn + '_>, StorageError> {
        let _ = reads;
        self.begin_write()
    }
    /// Bytes the database occupies, if it lives in a file.
    fn size_on_disk(&self) -> Option<u64>;

    /// Writes a consistent copy of the last commit to a new file at `to` while writes go on:
    /// a database of its own, opened like any other. Backends whose data lives elsewhere
    /// (PostgreSQL) are backed up with their own tools.
    fn backup(&self, to: &std::path::Path) -> Result<Backup, StorageError> {
        let _ = to;
        Err(StorageError::Other(format!(
            "a {} store is backed up with its own tools (pg_dump for PostgreSQL), not by state",
            self.kind()
        )))
    }
    /// Shrinks the database's file when most of it is free pages (history compaction and
    /// deletes free pages; a file never shrinks by itself), holding reads and writes up while
    /// it moves the live pages down. The writer calls it between batches, with no write
    /// transaction open; `None` when there was nothing worth giving back, or a long read was
    /// in the way (the next call tries again). Backends whose space is managed elsewhere
    /// (PostgreSQL's VACUUM) have nothing to do.
    fn give_back_space(&self) -> Result<Option<SpaceGiven>, StorageError> {
        Ok(None)
    }
    /// Calls `on_commit` with the latest revision whenever commits made by other processes
    /// sharing the database may have become visible, until the returned [`Follower`] is
    /// dropped. `None` where no other process can write ([`WriterExclusion::Process`]).
    fn follow(&self, on_commit: Box<dyn Fn(u64) + Send + Sync>) -> Result<Option<Follower>, StorageError> {
        let _ = on_commit;
        Ok(None)
    }
}

/// A point read in flight: the stored entry and the revision of the snapshot it came from.
pub type PointRead<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(Option<Entry>, u64), StorageError>> + Send + 'a>>;

/// Keeps a backend's commit notifications coming; dropping it stops them.
pub struct Follower(pub Box<dyn Send + Sync>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Ascending,
    Descending,
}

pub trait ReadTxn {
    /// The last committed revision (0 for a new store).
    fn revision(&self) -> Result<u64, StorageError>;
    /// History at or below this revision has been removed.
    fn compacted_revision(&self) -> Result<u64, StorageError>;
    /// The stored entry, expired or not: the caller decides visibility.
    fn get(&self, key: &str) -> Result<Option<Entry>, StorageError>;
    /// Visits entries whose key starts with `prefix`, in key order, beginning after `after`,
    /// until `visit` returns false.
    fn scan(&self, prefix: &str, after: Option<&str>, visit: &mut dyn FnMut(Entry) -> bool)
    -> Result<(), StorageError>;
    /// Number of user keys stored (expired ones not yet swept included; the store's own
    /// records, see `state_core::keyspace`, excluded).
    fn key_count(&self) -> Result<u64, StorageError>;
    /// Server processes running on this store now, where several may (PostgreSQL replicas);
    /// `None` where one process holds it.
    fn replicas(&self) -> Result<Option<u64>, StorageError> {
        Ok(None)
    }
    /// Up to `limit` entries whose expiry is at or before `now`, soonest first.
    fn expired_before(&self, now: UnixMillis, limit: usize) -> Result<Vec<Entry>, StorageError>;
    /// Visits events matching `keys` whose revision lies in `revisions`, in revision order
    /// (events of one revision in the order they were appended), until `visit` returns false.
    fn history(
        &self,
        keys: &KeyFilter,
        revisions: RangeInclusive<u64>,
        order: Order,
        visit: &mut dyn FnMut(Event) -> bool,
    ) -> Result<(), StorageError>;
}

pub trait WriteTxn: ReadTxn {
    /// Inserts or replaces an entry, keeping any expiry index in step.
    fn put(&mut self, entry: &Entry) -> Result<(), StorageError>;
    fn delete(&mut self, key: &str) -> Result<(), StorageError>;
    /// Appends an event. Events arrive in revision order.
    fn append(&mut self, event: &Event) -> Result<(), StorageError>;
    fn set_revision(&mut self, revision: u64) -> Result<(), StorageError>;
    /// Removes every entry and all history, marking history through `compacted_through` as
    /// compacted. The revision counter is kept: revisions never go backwards. Returns how many
    /// entries were removed.
    fn clear(&mut self, compacted_through: u64) -> Result<u64, StorageError>;
    /// Removes history through revision `through`, whole revisions at a time, stopping once
    /// about `limit` events are gone. Returns the new compacted revision.
    fn compact(&mut self, through: u64, limit: usize) -> Result<u64, StorageError>;
    /// The database's own clock as this transaction began, where every process sharing the
    /// database should take time-based decisions (expiry) by it; `None` to use the engine's.
    fn database_now(&self) -> Option<UnixMillis> {
        None
    }
    /// Makes everything durable; only then may the engine acknowledge. Dropping a write
    /// transaction without committing it aborts it.
    fn commit(self: Box<Self>) -> Result<(), StorageError>;
    /// Makes everything durable without necessarily making it visible to readers yet: the
    /// engine acknowledges once this returns, then, given an [`Unpublished`], publishes it. A
    /// backend whose durability costs one log append defers the rest of its commit (applying
    /// the batch to its own structures) past the acknowledgement this way. The default
    /// commits, visible at once (`None`).
    fn commit_durably<'t>(self: Box<Self>) -> Result<Option<Box<dyn Unpublished + 't>>, StorageError>
    where
        Self: 't,
    {
        self.commit()?;
        Ok(None)
    }
}

/// A durable, acknowledged write transaction that readers may not see yet.
pub trait Unpublished {
    /// Makes the transaction visible to readers. An error here loses nothing acknowledged:
    /// the backend has noted it and recovers the transaction (from its log) before the next
    /// read or write.
    fn publish(&mut self) -> Result<(), StorageError>;
    /// Upkeep once readers see the transaction (a checkpoint of the log), kept off their path
    /// and off the acknowledgement's. Failures are the backend's to report and retry.
    fn finish(self: Box<Self>) {}
    /// Whether [`Unpublished::resume`] gives the transaction back.
    fn resumable(&self) -> bool {
        false
    }
    /// The same transaction, still unpublished, to stage the next batch in: publishing both
    /// at once costs less where a published change is dearer to change again (redb copies a
    /// published page before writing it; one it has not published yet it writes in place).
    /// Committing it durably again makes the next batch durable too. Dropping it without that
    /// (the next batch failed) loses nothing acknowledged: the backend applies the batches it
    /// carried on their own before the drop returns, or else recovers them (from its log)
    /// before the next read or write, as after a failed [`Unpublished::publish`]. Only called
    /// when [`Unpublished::resumable`] says so.
    fn resume<'t>(self: Box<Self>) -> Result<Box<dyn WriteTxn + 't>, StorageError>
    where
        Self: 't,
    {
        Err(StorageError::Other("internal error: this backend's transactions cannot be resumed".into()))
    }
}
