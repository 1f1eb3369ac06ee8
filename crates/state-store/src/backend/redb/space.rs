//! What the database file takes on the disk: the page cache sized from it, the room a commit
//! must leave free, and giving a mostly free file's space back (at open and while serving).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use redb::{Database, ReadableDatabase, WriteTransaction};

use super::wal;
use super::{META, META_FREED, RedbBackend, meta_value, storage};
use crate::backend::SpaceGiven;
use crate::error::StorageError;

/// Files smaller than this are never compacted: the space is not worth the time.
pub(super) const SHRINK_FROM_BYTES: u64 = 16 * 1024 * 1024;

/// The first and the longest pause after a try to give space back that could do nothing.
const SHRINK_BACKOFF_FIRST: Duration = Duration::from_secs(10);
const SHRINK_BACKOFF_MOST: Duration = Duration::from_secs(600);
/// Live data a compaction moves at most while the store serves, since reads and writes wait
/// for it (26 ms for 2.7 MB in a debug build): a store holding more is compacted when it is
/// next opened.
pub(super) const MOST_MOVED_WHILE_SERVING: u64 = 64 * 1024 * 1024;
/// The largest file looked at while serving, as a multiple of the live data it may move:
/// the walk that counts the pages in use visits every live page, up to the whole file.
const WALKED_PER_MOVED: u64 = 4;
/// How long giving space back waits for reads under way (every other read and write waits
/// with it) before it leaves the file for another time.
pub(super) const READS_WAITED_FOR: Duration = Duration::from_millis(20);

/// Smallest and largest page cache chosen for a database by its size ([`cache_for`]).
pub(super) const CACHE_MIN_BYTES: u64 = 8 * 1024 * 1024;

pub(super) const CACHE_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// redb's page cache for a database file of `file_bytes`, unless a size is given: half the
/// file, between 8 and 64 MiB. The cache sits above the kernel's page cache, which keeps the
/// rest of a large file at hand; a cache sized to the file keeps a store of a few MB costing
/// a few MB, where a fixed 256 MiB filled up behind any long-running store.
pub fn cache_for(file_bytes: u64, given: Option<u64>) -> usize {
    let bytes = given.unwrap_or_else(|| (file_bytes / 2).clamp(CACHE_MIN_BYTES, CACHE_MAX_BYTES));
    usize::try_from(bytes).unwrap_or(usize::MAX)
}

/// Free space a commit leaves on the disk at least, beyond what it writes: room for redb's own
/// pages, for the commit after it, and for opening again after a crash (which replays the log
/// into the file).
pub(super) const DISK_RESERVE_BYTES: u64 = 4 * 1024 * 1024;

/// The handle to itself, once no other thread holds it, waiting (a millisecond at a time)
/// until `deadline`. The slot's lock keeps anyone from taking it meanwhile.
pub(super) fn exclusive(slot: &mut Option<Arc<Database>>, deadline: std::time::Instant) -> Option<&mut Database> {
    while slot.as_mut().is_some_and(|db| Arc::get_mut(db).is_none()) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    slot.as_mut().and_then(Arc::get_mut)
}

/// Moves the live pages down and cuts the file short, a few passes (each moves what it can).
/// A read transaction under way refuses it (redb compacts only with none live): waited for
/// until `deadline`; `false` if it was still there then.
pub(super) fn compact_file(db: &mut Database, deadline: std::time::Instant) -> Result<bool, StorageError> {
    let mut passes = 0;
    while passes < 4 {
        match db.compact() {
            Ok(true) => passes += 1,
            Ok(false) => break,
            Err(redb::CompactionError::TransactionInProgress) if passes == 0 => {
                if std::time::Instant::now() >= deadline {
                    return Ok(false);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(error) => return Err(storage(error)),
        }
    }
    Ok(true)
}

/// Adds `bytes` to what the file is counted to have free: entries overwritten or deleted and
/// history compacted leave their pages free, which tells [`RedbBackend::shrink`] without a
/// walk of the file whether it is worth compacting.
pub(super) fn add_freed(txn: &WriteTransaction, bytes: u64) -> Result<(), StorageError> {
    if bytes == 0 {
        return Ok(());
    }
    let mut meta = txn.open_table(META).map_err(storage)?;
    let before = meta_value(&meta, META_FREED)?;
    meta.insert(META_FREED, before.saturating_add(bytes)).map_err(storage)?;
    Ok(())
}

impl RedbBackend {
    /// Compacts the file when at least half of it is free (deletes, overwrites and history
    /// compaction free pages, but redb never shrinks a file by itself), and says how long
    /// reads and writes waited for it.
    ///
    /// Only the writer thread calls this, between batches, so no write transaction is live.
    /// Reads go on while it looks whether compacting is worth it, and wait while it compacts:
    /// redb compacts only with no transaction live, so the handle is taken out of everyone's
    /// reach. A read already under way is waited for up to `wait_for_reads`; one that takes
    /// longer (a backup, a long scan) leaves the file for a later try, which backs off.
    /// `most_in_use` bounds the live data moved, and so how long everyone waits, and the file
    /// looked at (four times that), since counting the pages in use walks the live ones with
    /// writes held: a larger store is compacted when it is next opened.
    pub(super) fn shrink(
        &self,
        wait_for_reads: Duration,
        most_in_use: u64,
    ) -> Result<Option<SpaceGiven>, StorageError> {
        let Some(path) = &self.path else { return Ok(None) };
        if self.shrink_due.lock().is_ok_and(|due| due.is_some_and(|at| std::time::Instant::now() < at)) {
            return Ok(None);
        }
        let file_bytes = std::fs::metadata(path).map_err(|e| StorageError::Io(e.to_string()))?.len();
        // Counting the pages in use walks every live page with writes held, and a larger
        // file may hold that much live: seconds, long enough for clients to take the owner
        // for hung. Such a file is looked at when it is next opened.
        if file_bytes < SHRINK_FROM_BYTES || file_bytes > most_in_use.saturating_mul(WALKED_PER_MOVED) {
            return Ok(None);
        }
        // What commits counted as freed decides cheaply whether to look closer (counting the
        // file's pages walks all of it). Freed pages get reused, so it overcounts as time
        // goes by; the walk decides, and leaves the count at what it found free.
        let freed = {
            let db = self.database()?;
            // Someone else holds the handle (a backup copying the store): compaction would
            // have to wait for it, so nothing is worth doing before it lets go.
            if Arc::strong_count(&db) > 2 {
                self.back_off();
                return Ok(None);
            }
            meta_value(&db.begin_read().map_err(storage)?.open_table(META).map_err(storage)?, META_FREED)?
        };
        if freed.saturating_mul(4) < file_bytes {
            return Ok(None);
        }
        // Pages that commits since the last durable one freed are free in the file only after
        // the next: a checkpoint first, so the walk counts them free.
        self.checkpoint_if(|_| true)?;
        let used_bytes = {
            let db = self.database()?;
            let txn = db.begin_write().map_err(storage)?;
            let stats = txn.stats().map_err(storage)?;
            let used = stats.allocated_pages().saturating_mul(stats.page_size() as u64);
            // Counted afresh from what the walk found free, less the quarter that makes the
            // next look: the next walk comes once commits have freed enough to make the file
            // half free, not at every look, however much a reader held on to this time.
            let found_free = file_bytes.saturating_sub(used);
            let count = found_free.saturating_sub(file_bytes / 4);
            txn.open_table(META).map_err(storage)?.insert(META_FREED, count).map_err(storage)?;
            txn.commit().map_err(|e| self.noted(storage(e)))?;
            used
        };
        if used_bytes.saturating_mul(2) > file_bytes {
            tracing::debug!(file_bytes, used_bytes, freed, "the file is not half free; left as it is");
            return Ok(None);
        }
        if used_bytes > most_in_use {
            tracing::info!(
                file_bytes,
                used_bytes,
                "the file is half free but holds too much to compact while serving; it is compacted when next opened"
            );
            self.back_off();
            return Ok(None);
        }
        let mut slot =
            self.db.write().map_err(|_| StorageError::Other("the database handle lock is poisoned".into()))?;
        let held_from = std::time::Instant::now();
        let deadline = held_from + wait_for_reads;
        let compacted = match exclusive(&mut slot, deadline) {
            Some(db) => compact_file(db, deadline).map_err(|e| self.noted(e))?,
            None => false,
        };
        drop(slot);
        if !compacted {
            tracing::debug!("a read was under way; the file is compacted another time");
            self.back_off();
            return Ok(None);
        }
        let txn = self.database()?.begin_write().map_err(storage)?;
        txn.open_table(META).map_err(storage)?.insert(META_FREED, 0).map_err(storage)?;
        txn.commit().map_err(|e| self.noted(storage(e)))?;
        if let Ok(mut due) = self.shrink_due.lock() {
            *due = None;
        }
        let given = SpaceGiven {
            before_bytes: file_bytes,
            after_bytes: std::fs::metadata(path).map_or(file_bytes, |m| m.len()),
            in_use_bytes: used_bytes,
            held_for: held_from.elapsed(),
        };
        tracing::info!(
            before_bytes = given.before_bytes,
            after_bytes = given.after_bytes,
            in_use_bytes = given.in_use_bytes,
            held_millis = given.held_for.as_millis() as u64,
            "compacted the database file"
        );
        Ok(Some(given))
    }

    /// A try that could not compact waits before the next: 10 s, twice as long after each
    /// such try, at most 10 minutes, so a store that cannot be compacted now (a long read, a
    /// backup, too much to move) costs a walk of its file and a pause of its requests rarely.
    fn back_off(&self) {
        let Ok(mut due) = self.shrink_due.lock() else { return };
        let now = std::time::Instant::now();
        let waited = due.map_or(Duration::ZERO, |at| at.saturating_duration_since(now));
        let next = (waited * 2).clamp(SHRINK_BACKOFF_FIRST, SHRINK_BACKOFF_MOST);
        *due = Some(now + next);
    }

    /// Refuses a commit of `written` bytes that would leave less than the reserve free on the
    /// database's disk: redb must never meet a full disk, since a failed write stops it until
    /// it is reopened, and a disk at 0 bytes would keep the store from opening again. Reads
    /// are unaffected.
    ///
    /// What a commit really costs the disk: its record in the log (and the step the log may
    /// grow by), and in the file, at the next checkpoint, twice what it and every commit
    /// since the last checkpoint wrote (copy-on-write: the new pages, and the old ones until
    /// freed), since redb holds those in its write buffer until a durable commit writes them.
    pub(super) fn check_space(&self, written: u64) -> Result<(), StorageError> {
        let needed = self.space_needed(written);
        match self.free_space() {
            Some(available) if available < needed => {
                let path = self.path.clone().unwrap_or_default();
                Err(StorageError::Full { path, available, needed })
            }
            _ => Ok(()),
        }
    }

    /// Refuses a write once the database's name leads elsewhere than the file opened: the
    /// file was deleted (a user starting over while an idle owner still held it) or replaced.
    /// One `stat` per commit, beside its sync.
    pub(super) fn check_named(&self) -> Result<(), StorageError> {
        use std::os::unix::fs::MetadataExt;
        let (Some(path), Some(opened)) = (&self.path, self.file) else { return Ok(()) };
        match std::fs::metadata(path) {
            Ok(now) if (now.dev(), now.ino()) == opened => Ok(()),
            _ => Err(StorageError::Gone { path: path.clone() }),
        }
    }

    pub(super) fn space_needed(&self, written: u64) -> u64 {
        let undurable = self.undurable.load(Ordering::Relaxed);
        undurable
            .saturating_add(written)
            .saturating_mul(2)
            .saturating_add(written)
            .saturating_add(wal::GROW_BYTES)
            .saturating_add(DISK_RESERVE_BYTES)
    }

    /// Bytes free on the database's disk, for a database in a file.
    pub(super) fn free_space(&self) -> Option<u64> {
        let path = self.path.as_ref()?;
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        crate::files::free_space(dir).ok()
    }

    /// Whether the disk is too tight to leave what redb holds unwritten: then a checkpoint
    /// writes it before the next batch, turning an estimate into what the disk really holds.
    pub(super) fn tight_on_space(&self) -> bool {
        self.undurable.load(Ordering::Relaxed) > 0
            && self.free_space().is_some_and(|free| free < self.space_needed(0).saturating_add(DISK_RESERVE_BYTES))
    }
}

#[cfg(test)]
mod cache_tests {
    use super::cache_for;

    #[test]
    fn the_cache_follows_the_file_between_its_bounds_unless_given() {
        const MIB: u64 = 1024 * 1024;
        assert_eq!(cache_for(0, None) as u64, 8 * MIB, "a new store");
        assert_eq!(cache_for(40 * MIB, None) as u64, 20 * MIB);
        assert_eq!(cache_for(1200 * MIB, None) as u64, 64 * MIB, "the 30-minute soak's file");
        assert_eq!(cache_for(1200 * MIB, Some(512 * MIB)) as u64, 512 * MIB, "--cache-size wins");
    }
}
