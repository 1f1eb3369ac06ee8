//! Disks that misbehave on demand, for the tests that prove what the store promises: a file
//! that fails as a full disk does (a failed write costs nothing acknowledged, and the store
//! recovers once space returns), and a disk that loses power (`Volatile`: whatever was written
//! since the last sync is gone, for the database file and its log alike).

use std::io;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use redb::backends::FileBackend;
use redb::{BackendError, StorageBackend};

use super::open::log_file;
use super::recovery::LogLoss;
use super::wal::LogFile;
use super::{CACHE_BYTES, OpenLog, RedbBackend};
use crate::error::OpenError;

/// Switches for the faults a [`RedbBackend::open_with_faults`] file injects.
#[derive(Debug, Default)]
pub struct Faults {
    /// Every write and growth of the file fails with ENOSPC.
    pub disk_full: AtomicBool,
    /// The log is spared: it lives on another disk, which has room.
    pub log_spared: AtomicBool,
    /// Writes refused so far.
    pub refused: AtomicU64,
}

/// The log's file on the same failing disk.
#[derive(Debug)]
struct FaultyLog {
    inner: std::fs::File,
    faults: Arc<Faults>,
}

impl LogFile for FaultyLog {
    fn size(&self) -> io::Result<u64> {
        self.inner.size()
    }
    fn read_at(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        self.inner.read_at(offset, out)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        if !self.faults.log_spared.load(Ordering::SeqCst) && self.faults.disk_full.load(Ordering::SeqCst) {
            self.faults.refused.fetch_add(1, Ordering::SeqCst);
            return Err(io::Error::from_raw_os_error(28)); // ENOSPC
        }
        self.inner.write_at(offset, data)
    }
    fn sync(&self) -> io::Result<()> {
        LogFile::sync(&self.inner)
    }
}

#[derive(Debug)]
struct FaultyFile {
    inner: FileBackend,
    faults: Arc<Faults>,
}

impl FaultyFile {
    fn check(&self) -> io::Result<()> {
        if self.faults.disk_full.load(Ordering::SeqCst) {
            self.faults.refused.fetch_add(1, Ordering::SeqCst);
            return Err(io::Error::from_raw_os_error(28)); // ENOSPC
        }
        Ok(())
    }
}

impl StorageBackend for FaultyFile {
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        self.inner.read(offset, out)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        if len > self.inner.len()? {
            self.check()?;
        }
        self.inner.set_len(len)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.inner.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.check()?;
        self.inner.write(offset, data)
    }
    fn close(&self) -> io::Result<()> {
        self.inner.close()
    }
    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.try_lock_range(start, end)
    }
    fn try_lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.try_lock_shared_range(start, end)
    }
    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.lock_range(start, end)
    }
    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.lock_shared_range(start, end)
    }
    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.unlock_range(start, end)
    }
    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.query_lock_range(start, end)
    }
}

impl RedbBackend {
    /// Opens (or creates) the database at `path` on a file that fails as `faults` say, its log
    /// on the same disk, and reopens it the same way after a failed write.
    pub fn open_with_faults(path: &Path, faults: Arc<Faults>) -> Result<RedbBackend, OpenError> {
        // Named as a real open names it: every alias of the file reaches the same log.
        let path = &crate::files::database_path(path)
            .map_err(|source| OpenError::CreateDir { path: path.to_owned(), source })?;
        let log: OpenLog = {
            let (create, path, faults) = (log_file(path), super::wal::log_path(path), faults.clone());
            Box::new(move || {
                drop(create()?);
                let inner = std::fs::OpenOptions::new().read(true).write(true).open(&path)?;
                Ok(Box::new(FaultyLog { inner, faults: faults.clone() }) as Box<dyn LogFile>)
            })
        };
        let opener = {
            let path = path.to_owned();
            move || {
                let file =
                    std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path)?;
                let faulty = FaultyFile { inner: FileBackend::new(file)?, faults: faults.clone() };
                redb::Builder::new().set_cache_size(CACHE_BYTES).create_with_backend(faulty)
            }
        };
        RedbBackend::open_with(path, "test", Box::new(opener), Some(log), LogLoss::Refuse)
    }

    /// Opens (or creates) a database whose file and log live on `disk` and `log`, which lose
    /// what was not synced when their power is cut. `path` names them in messages and holds
    /// the holder note.
    pub fn open_volatile(path: &Path, disk: &Volatile, log: &Volatile) -> Result<RedbBackend, OpenError> {
        let opener = {
            let disk = disk.clone();
            move || redb::Builder::new().set_cache_size(CACHE_BYTES).create_with_backend(disk.clone())
        };
        let log = log.clone();
        let open_log: OpenLog = Box::new(move || Ok(Box::new(log.clone()) as Box<dyn LogFile>));
        RedbBackend::open_with(path, "test", Box::new(opener), Some(open_log), LogLoss::Refuse)
    }
}

/// Bytes on a disk that can lose power. Writes land in what the disk holds now; a sync makes
/// that what survives; [`Volatile::cut_power`] throws away everything written since. Clones
/// are the same disk.
#[derive(Debug, Clone, Default)]
pub struct Volatile(Arc<Mutex<Platters>>);

#[derive(Debug, Default)]
struct Platters {
    now: Vec<u8>,
    synced: Vec<u8>,
    syncs: u64,
}

impl Volatile {
    /// Forgets every write since the last sync, as a power cut does.
    pub fn cut_power(&self) {
        if let Ok(mut p) = self.0.lock() {
            p.now = p.synced.clone();
        }
    }

    /// What the disk would hold after a power cut now, as a disk of its own: the original goes
    /// on taking writes, as a process that has not noticed goes on running.
    pub fn crashed_copy(&self) -> Volatile {
        let synced = self.0.lock().map(|p| p.synced.clone()).unwrap_or_default();
        Volatile(Arc::new(Mutex::new(Platters { now: synced.clone(), synced, syncs: 0 })))
    }

    /// What several disks of one machine would hold after one power cut now: each disk's lock is
    /// held until all are copied, so no sync lands on one disk between the copies of two others
    /// (a real cut stops every disk at the same instant; copies taken one after another could
    /// pair a database from before a checkpoint with a log from after it).
    pub fn crashed_together(disks: &[&Volatile]) -> Vec<Volatile> {
        let guards: Vec<_> = disks.iter().map(|disk| disk.0.lock()).collect();
        guards
            .iter()
            .map(|guard| {
                let synced = guard.as_ref().map(|p| p.synced.clone()).unwrap_or_default();
                Volatile(Arc::new(Mutex::new(Platters { now: synced.clone(), synced, syncs: 0 })))
            })
            .collect()
    }

    /// Flips the bits of one byte, as damage on the medium does.
    pub fn damage(&self, offset: u64) {
        if let Ok(mut guard) = self.0.lock() {
            let p = &mut *guard;
            for image in [&mut p.now, &mut p.synced] {
                if let Some(byte) = image.get_mut(offset as usize) {
                    *byte ^= 0xff;
                }
            }
        }
    }

    /// How many syncs the disk has seen.
    pub fn syncs(&self) -> u64 {
        self.0.lock().map(|p| p.syncs).unwrap_or(0)
    }

    fn platters(&self) -> io::Result<std::sync::MutexGuard<'_, Platters>> {
        self.0.lock().map_err(|_| io::Error::other("the disk's lock is poisoned"))
    }
}

impl LogFile for Volatile {
    fn size(&self) -> io::Result<u64> {
        Ok(self.platters()?.now.len() as u64)
    }
    fn read_at(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let p = self.platters()?;
        let end = offset as usize + out.len();
        let source = p.now.get(offset as usize..end).ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        out.copy_from_slice(source);
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut p = self.platters()?;
        let end = offset as usize + data.len();
        if p.now.len() < end {
            p.now.resize(end, 0);
        }
        p.now[offset as usize..end].copy_from_slice(data);
        Ok(())
    }
    fn sync(&self) -> io::Result<()> {
        let mut p = self.platters()?;
        p.synced = p.now.clone();
        p.syncs += 1;
        Ok(())
    }
}

impl StorageBackend for Volatile {
    fn len(&self) -> io::Result<u64> {
        self.size()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        self.read_at(offset, out)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.platters()?.now.resize(len as usize, 0);
        Ok(())
    }
    fn sync_data(&self) -> io::Result<()> {
        self.sync()
    }
    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.write_at(offset, data)
    }
}
