//! A database file that fails on demand, as a full disk does: for the tests that prove what a
//! failed write costs (nothing acknowledged) and that the store recovers once space returns.

use std::io;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use redb::backends::FileBackend;
use redb::{BackendError, StorageBackend};

use super::{CACHE_BYTES, RedbBackend};
use crate::error::OpenError;

/// Switches for the faults a [`RedbBackend::open_with_faults`] file injects.
#[derive(Debug, Default)]
pub struct Faults {
    /// Every write and growth of the file fails with ENOSPC.
    pub disk_full: AtomicBool,
    /// Writes refused so far.
    pub refused: AtomicU64,
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
    /// Opens (or creates) the database at `path` on a file that fails as `faults` say, and
    /// reopens it the same way after a failed write.
    pub fn open_with_faults(path: &Path, faults: Arc<Faults>) -> Result<RedbBackend, OpenError> {
        let opener = {
            let path = path.to_owned();
            move || {
                let file =
                    std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path)?;
                let faulty = FaultyFile { inner: FileBackend::new(file)?, faults: faults.clone() };
                redb::Builder::new().set_cache_size(CACHE_BYTES).create_with_backend(faulty)
            }
        };
        RedbBackend::open_with(path, "test", Box::new(opener))
    }
}
