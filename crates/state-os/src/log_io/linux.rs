//! Linux: `O_DIRECT | O_DSYNC` beside the buffered handle, `fdatasync` for it.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

pub(super) fn open_direct(path: &Path, options: &mut OpenOptions) -> io::Result<Option<File>> {
    let flags = rustix::fs::OFlags::DIRECT | rustix::fs::OFlags::DSYNC | rustix::fs::OFlags::NOFOLLOW;
    match options.custom_flags(flags.bits() as i32).open(path) {
        Ok(file) => Ok(Some(file)),
        Err(error) if super::refuses_alignment(&error) => {
            tracing::debug!(path = %path.display(), "no direct I/O on this filesystem; the log is buffered");
            Ok(None)
        }
        Err(error) => Err(error),
    }
}

pub(super) fn keep_out_of_cache(_file: &File) {}

pub(super) fn sync_to_media(file: &File) -> io::Result<()> {
    file.sync_data()
}
