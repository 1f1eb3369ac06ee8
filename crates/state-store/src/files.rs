//! Files and directories only their user may read: a store holds every agent's state, so its
//! database, the notes and logs beside it, and the directories made for them are private,
//! whatever the process's umask. A database may sit in a directory other users can write
//! (`/tmp`, a shared project), so its files are never opened through a symbolic link, and one
//! that exists is used only if this user owns it.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Creates `dir` and any missing parents, each new one with mode 0700. Directories that exist
/// are left as they are: they may be the user's own (a project directory, say).
pub fn create_private_dir_all(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Options that create a file with mode 0600 and never follow a symbolic link in its place
/// (one planted there would send the write wherever its maker chose).
pub fn private_file() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.mode(0o600).custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32);
    options
}

/// Checks a file opened with [`private_file`] before it is trusted: it must be this user's (a
/// file another user made in a shared directory is theirs to read and to change), and it is
/// made private if it was not. Returns whether it had to be.
pub fn claim(file: &File, path: &Path) -> io::Result<bool> {
    let meta = file.metadata()?;
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} belongs to uid {}, not to this user (uid {me}), who could read or change it; remove it or \
                 use a directory of your own",
                path.display(),
                meta.uid()
            ),
        ));
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o077 == 0 {
        return Ok(false);
    }
    file.set_permissions(std::fs::Permissions::from_mode(mode & 0o700))?;
    Ok(true)
}

/// Opens (creating it, private, if missing) a file this user alone may use: never through a
/// symbolic link, and only if this user owns it.
pub fn open_private(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    let file =
        options.mode(0o600).custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32).open(path).map_err(|e| {
            if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
                io::Error::new(
                    e.kind(),
                    format!("{} is a symbolic link, which a store's files never follow; remove it", path.display()),
                )
            } else {
                e
            }
        })?;
    if claim(&file, path)? {
        tracing::warn!(file = %path.display(), "was readable by other users; made it private (0600)");
    }
    Ok(file)
}

/// The one name of a database file every process agrees on: absolute, with every symbolic link
/// resolved, the file's own name included (a link to a database not yet made included), so that
/// every way of naming one file reaches one owner and one log. Missing parent directories are
/// created (private).
pub fn database_path(path: &Path) -> io::Result<PathBuf> {
    let mut absolute = if path.is_absolute() { path.to_owned() } else { std::env::current_dir()?.join(path) };
    // As many links as the system itself follows in one path.
    for _ in 0..40 {
        let name = absolute.file_name().map(ToOwned::to_owned).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("{} does not name a file", path.display()))
        })?;
        let parent = absolute.parent().unwrap_or(Path::new("/")).to_owned();
        match std::fs::symlink_metadata(&absolute) {
            Ok(meta) if meta.file_type().is_symlink() => {
                // Followed only if this user (or root) made it: one another user planted in a
                // shared directory would send the database where they chose.
                let me = rustix::process::geteuid().as_raw();
                if meta.uid() != me && meta.uid() != 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        format!(
                            "{} is a symbolic link made by uid {}, not by this user (uid {me}); a store does not \
                             follow it. Remove it, or use a path of your own",
                            absolute.display(),
                            meta.uid()
                        ),
                    ));
                }
                // A link to a file not made yet names where it will be.
                absolute = parent.join(std::fs::read_link(&absolute)?);
                continue;
            }
            Ok(_) => return std::fs::canonicalize(&absolute),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        create_private_dir_all(&parent)?;
        return Ok(parent.canonicalize()?.join(name));
    }
    Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} is a loop of symbolic links", path.display())))
}

/// Refuses a database file with more than one name: its log, its owner's socket and its holder
/// note are found by name, so two names for one file would mean two logs, and writes acknowledged
/// through one name lost when it is opened through the other.
pub fn single_name(file: &File, path: &Path) -> io::Result<()> {
    let links = file.metadata()?.nlink();
    if links > 1 {
        return Err(io::Error::other(format!(
            "{} has {links} names (hard links): a store finds its write-ahead log and its owner by name, so \
             writes made through one name could be lost when it is opened through another. Keep one name \
             (`find / -xdev -samefile {}` lists them) and remove the others; use a symbolic link for a second \
             name",
            path.display(),
            path.display()
        )));
    }
    Ok(())
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
