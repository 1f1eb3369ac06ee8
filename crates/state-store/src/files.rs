//! Files and directories only their user may read: a store holds every agent's state, so its
//! database, the notes and logs beside it, and the directories made for them are private,
//! whatever the process's umask.

use std::fs::{DirBuilder, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Creates `dir` and any missing parents, each new one with mode 0700. Directories that exist
/// are left as they are: they may be the user's own (a project directory, say).
pub fn create_private_dir_all(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Options that create a file with mode 0600.
pub fn private_file() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.mode(0o600);
    options
}

/// Takes group and other access away from an existing file (one made by an older version, or
/// by hand). Returns whether it had any.
pub fn make_private(path: &Path) -> io::Result<bool> {
    let mode = std::fs::metadata(path)?.permissions().mode();
    if mode & 0o077 == 0 {
        return Ok(false);
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o700))?;
    Ok(true)
}

/// Bytes an unprivileged process may still write on the filesystem holding `dir`.
pub fn free_space(dir: &Path) -> io::Result<u64> {
    let stats = rustix::fs::statvfs(dir)?;
    Ok(stats.f_bavail.saturating_mul(stats.f_frsize))
}

#[cfg(test)]
mod tests;
