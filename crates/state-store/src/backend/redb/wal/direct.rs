//! The log's file on a real disk: records go straight to the device, bypassing the page cache,
//! in one synchronous write each (Linux: `O_DIRECT | O_DSYNC`; a batch past 64 MiB in pieces),
//! or, where the system or filesystem has no such writes, a buffered write and a sync to the
//! medium (`state_os::log_io` says how each system does both).
//!
//! Why: a buffered append dirties a whole 4 KiB page and `fdatasync` writes it back, so every
//! durable put cost at least 4 KiB at the device and two system calls. A direct write sends only
//! the 512-byte sectors the record covers, in one call that returns once they are on stable
//! storage (measured on this project's machines: 19,000 appends/s at 12 µs of CPU and ~570
//! bytes per 512-byte record, against 12,600/s at 33 µs and 4,180 bytes buffered).
//!
//! Everything else (sizing, the zeroed growth steps, the two header slots, the reads at open,
//! the erasure of a record) stays on an ordinary buffered handle of the same file: those touch
//! the first page or whole new ranges, and the kernel keeps the two handles coherent by
//! writing back and dropping cached pages a direct write overlaps. A filesystem that refuses
//! direct I/O (some network filesystems, older tmpfs) gets the buffered handle alone, as
//! before; so does a device whose sectors are larger than 512 bytes, after its first refusal.
//! So does every log where `STATE_LOG_WRITES=buffered` (feature `failpoints`, for tests): the
//! way macOS always writes, run by the Linux tests too.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use super::{DurableWriteError, LogFile};
use crate::files;

/// Memory a direct write comes from is aligned to this (a page covers any sector size).
const MEMORY_ALIGN: usize = 4096;
/// A record is written in pieces of at most this many bytes: Linux writes at most ~2 GiB in
/// one call, and a piece is copied to aligned memory first.
const PIECE_BYTES: usize = 64 * 1024 * 1024;
/// The aligned buffer is kept between appends up to this size.
const KEPT_SCRATCH_BYTES: usize = 1024 * 1024;

#[derive(Debug)]
pub(in crate::backend::redb) struct DirectLog {
    buffered: File,
    /// `None` where the filesystem does not do direct I/O.
    direct: Option<File>,
    /// A direct write was refused as misaligned: the device's sectors are larger than 512.
    direct_refused: AtomicBool,
    /// An aligned copy of the piece being written, reused across appends.
    scratch: Mutex<Vec<u8>>,
    /// A multiple of 512: see `PIECE_BYTES`.
    piece_bytes: usize,
}

impl DirectLog {
    /// Opens (creating it private) the log at `path`: never through a symbolic link, and only
    /// a file of this user's.
    pub(in crate::backend::redb) fn open(path: &Path) -> io::Result<DirectLog> {
        let buffered =
            files::open_private(path, std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false))?;
        let mut direct_options = files::private_file();
        direct_options.write(true);
        let direct =
            if buffered_for_tests() { None } else { state_os::log_io::open_direct(path, &mut direct_options)? };
        state_os::log_io::keep_out_of_cache(&buffered);
        if let Some(direct) = &direct {
            // Opened by name a second time: it must be the same file, not one swapped in between.
            use std::os::unix::fs::MetadataExt;
            let (a, b) = (buffered.metadata()?, direct.metadata()?);
            if (a.dev(), a.ino()) != (b.dev(), b.ino()) {
                return Err(io::Error::other(format!("{} was replaced while it was being opened", path.display())));
            }
        }
        Ok(DirectLog {
            buffered,
            direct,
            direct_refused: AtomicBool::new(false),
            scratch: Mutex::new(Vec::new()),
            piece_bytes: PIECE_BYTES,
        })
    }

    /// The file as a filesystem without direct I/O has it.
    #[cfg(test)]
    pub(in crate::backend::redb) fn buffered_only(path: &Path) -> io::Result<DirectLog> {
        Ok(DirectLog { direct: None, ..DirectLog::open(path)? })
    }

    /// The file writing records in pieces of `bytes` (a multiple of 512), so tests reach the
    /// piece-by-piece path with small records.
    #[cfg(test)]
    pub(in crate::backend::redb) fn with_pieces_of(path: &Path, bytes: usize) -> io::Result<DirectLog> {
        Ok(DirectLog { piece_bytes: bytes, ..DirectLog::open(path)? })
    }

    /// Whether records bypass the page cache.
    #[cfg(test)]
    pub(in crate::backend::redb) fn is_direct(&self) -> bool {
        self.direct.is_some() && !self.direct_refused.load(Ordering::Relaxed)
    }
}

impl LogFile for DirectLog {
    fn size(&self) -> io::Result<u64> {
        Ok(self.buffered.metadata()?.len())
    }

    fn read_at(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        self.buffered.read_exact_at(out, offset)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.buffered.write_all_at(data, offset)
    }

    fn sync(&self) -> io::Result<()> {
        state_os::log_io::sync_to_media(&self.buffered)
    }

    fn write_durably_at(&self, offset: u64, data: &[u8]) -> Result<(), DurableWriteError> {
        let buffered = || {
            self.write_at(offset, data).map_err(DurableWriteError::NotWritten)?;
            self.sync().map_err(DurableWriteError::MaybeWritten)
        };
        let Some(direct) = self.direct.as_ref().filter(|_| !self.direct_refused.load(Ordering::Relaxed)) else {
            return buffered();
        };
        let refused = |reason: &str| DurableWriteError::NotWritten(io::Error::other(reason.to_owned()));
        let mut scratch = self.scratch.lock().map_err(|_| refused("the log's buffer lock is poisoned"))?;
        let mut written = 0;
        for piece in data.chunks(self.piece_bytes) {
            scratch.clear();
            scratch.resize(piece.len() + MEMORY_ALIGN, 0);
            let start = scratch.as_ptr().align_offset(MEMORY_ALIGN);
            let aligned = scratch
                .get_mut(start..start + piece.len())
                .ok_or_else(|| refused("cannot align the log's write buffer"))?;
            aligned.copy_from_slice(piece);
            // One call per piece: a direct write is not resumed part way, since its remainder
            // would no longer be aligned.
            match FileExt::write_at(direct, aligned, offset + written as u64) {
                Ok(n) if n == piece.len() => written += n,
                Ok(n) => {
                    return Err(DurableWriteError::MaybeWritten(io::Error::other(format!(
                        "a direct write to the log stopped after {} of {} bytes",
                        written + n,
                        data.len()
                    ))));
                }
                // A device whose sectors are larger than the log's 512-byte steps refuses them
                // (some filesystems only after an earlier piece went through): the whole record
                // is written again, buffered and synced, and the log goes on that way.
                Err(error) if state_os::log_io::refuses_alignment(&error) => {
                    tracing::warn!(%error, "the disk refuses the log's direct writes; it goes on through the page cache");
                    self.direct_refused.store(true, Ordering::Relaxed);
                    drop(scratch);
                    return buffered();
                }
                Err(error) if written == 0 && refused_before_writing(&error) => {
                    return Err(DurableWriteError::NotWritten(error));
                }
                Err(error) => return Err(DurableWriteError::MaybeWritten(error)),
            }
        }
        // A batch far above the usual keeps no buffer of its size for the life of the process.
        if scratch.capacity() > KEPT_SCRATCH_BYTES {
            *scratch = Vec::new();
        }
        Ok(())
    }
}

/// Whether the tests asked for the buffered way (`STATE_LOG_WRITES=buffered`).
#[cfg(feature = "failpoints")]
fn buffered_for_tests() -> bool {
    std::env::var("STATE_LOG_WRITES").is_ok_and(|way| way == "buffered")
}

#[cfg(not(feature = "failpoints"))]
fn buffered_for_tests() -> bool {
    false
}

/// Errors a write returns before it touches the disk. Not a full disk: a direct write spanning
/// extents can put its first ones on the disk and then report ENOSPC (thin-provisioned
/// volumes, copy-on-write filesystems), so that one may have written part of the record.
fn refused_before_writing(error: &io::Error) -> bool {
    use rustix::io::Errno;
    [Errno::BADF, Errno::PERM].iter().any(|errno| error.raw_os_error() == Some(errno.raw_os_error()))
}
