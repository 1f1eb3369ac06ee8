//! macOS: no direct handle; `F_NOCACHE` on the buffered one, `F_FULLFSYNC` for it.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

pub(super) fn open_direct(_path: &Path, _options: &mut OpenOptions) -> io::Result<Option<File>> {
    Ok(None)
}

pub(super) fn keep_out_of_cache(file: &File) {
    if let Err(error) = rustix::fs::fcntl_nocache(file, true) {
        tracing::debug!(%error, "the filesystem keeps the log in the page cache (F_NOCACHE refused)");
    }
}

/// Said once per process: a filesystem without F_FULLFSYNC (some network and FAT volumes).
static WARNED_NO_FULLFSYNC: AtomicBool = AtomicBool::new(false);

pub(super) fn sync_to_media(file: &File) -> io::Result<()> {
    match rustix::fs::fcntl_fullfsync(file) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::NOTSUP | rustix::io::Errno::NOTTY | rustix::io::Errno::INVAL) => {
            if !WARNED_NO_FULLFSYNC.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "this filesystem has no F_FULLFSYNC: the log is synced with fsync, which may leave \
                     acknowledged writes in the drive's cache through a power cut"
                );
            }
            rustix::fs::fsync(file).map_err(io::Error::from)
        }
        Err(error) => Err(error.into()),
    }
}
