//! The write-ahead log's way to stable storage. An acknowledged write must be on the medium
//! itself when its caller hears so, not in a drive's volatile cache.
//!
//! - Linux: a second handle opened `O_DIRECT | O_DSYNC` writes a record's sectors straight to
//!   the device and returns once they are stable; where a filesystem refuses direct I/O, a
//!   buffered write and `fdatasync`, which flushes the drive's cache as well.
//! - macOS: `fsync` there leaves data in the drive's cache, so a durable write is a buffered
//!   write and `fcntl(F_FULLFSYNC)`, which flushes it. Not `F_BARRIERFSYNC`: a barrier only
//!   orders writes, and a write acknowledged before its data reached the medium is lost in a
//!   power cut that ordering does not prevent. `F_NOCACHE` keeps the log out of the page cache
//!   as `O_DIRECT` does on Linux. (redb's own commits sync through the standard library's
//!   `File::sync_data`, which on macOS is `F_FULLFSYNC` too.)
//!
//! The buffered way with a full sync is the same code on both systems: the Linux tests run
//! the log through it as well as through direct writes.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as platform;
#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
use macos as platform;

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

/// A second handle on `path` whose writes bypass the page cache and return once on stable
/// storage, opened with `options` (which carry the file's mode and refusal of links), or
/// `None` where the filesystem or the system has no such writes.
pub fn open_direct(path: &Path, options: &mut OpenOptions) -> io::Result<Option<File>> {
    platform::open_direct(path, options)
}

/// Asks the system to keep `file`'s data out of its page cache (macOS; on Linux the direct
/// handle does that). Advice only: a filesystem that refuses it is not an error.
pub fn keep_out_of_cache(file: &File) {
    platform::keep_out_of_cache(file);
}

/// Makes what was written to `file` durable: on the medium, not in a drive's cache.
pub fn sync_to_media(file: &File) -> io::Result<()> {
    platform::sync_to_media(file)
}

/// Whether a direct write failed because the device wants larger or differently aligned
/// sectors than it was given (`EINVAL`), so the write should go the buffered way instead.
pub fn refuses_alignment(error: &io::Error) -> bool {
    error.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error())
}
