//! Where a database's owner listens: a Unix socket in a directory only this user can enter,
//! named after the database's canonical path. Never a TCP port.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The environment variable that overrides the directory owner sockets live in.
pub const RUNTIME_DIR_ENV: &str = "STATE_RUNTIME_DIR";

/// The file beside a database in which the process holding it records itself (pid, program,
/// since when), so a refused process can name the holder; a clean close removes it.
pub fn holder_note_path(db: &Path) -> PathBuf {
    state_store::backend::redb::holder_note_path(db)
}

/// Where a database's write-ahead log lives: writes only it holds until a checkpoint, so it
/// is as private as the database.
pub fn write_ahead_log_path(db: &Path) -> PathBuf {
    state_store::backend::redb::wal::log_path(db)
}

/// The live process recorded as holding the database, with its role (`owner`, `standalone`,
/// ...), if there is one.
pub fn database_holder(db: &Path) -> Option<(u32, Option<String>)> {
    state_store::RedbBackend::holder(db).map(|holder| (holder.pid, holder.role))
}

pub use state_store::backend::redb::inspect::{DatabaseState, Inspection, LogState};

/// A look at the database at `db` and its write-ahead log, read-only: what `statectl doctor`
/// reports, judged as an open would judge it.
pub fn inspect_database(db: &Path) -> Inspection {
    state_store::backend::redb::inspect::inspect(db)
}

/// Whether this user may create files in `dir` (a database, its log, its notes).
pub fn writable_dir(dir: &Path) -> std::io::Result<()> {
    rustix::fs::access(dir, rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK).map_err(std::io::Error::from)
}

/// Bytes free on the disk holding `dir`.
pub fn free_space(dir: &Path) -> std::io::Result<u64> {
    state_store::files::free_space(dir)
}

/// The directory owner sockets live in when none is given: on Linux `$XDG_RUNTIME_DIR/state`,
/// else (and on macOS) `state-<uid>` in the temporary directory; `/tmp/state-<uid>` when that
/// would make socket paths too long to bind.
pub fn runtime_dir(given: Option<&Path>) -> PathBuf {
    given.map_or_else(default_runtime_dir, Path::to_path_buf)
}

/// One database's meeting point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendezvous {
    /// The database file, as an absolute path without symbolic links.
    pub db: PathBuf,
    /// The private directory the socket lives in.
    pub dir: PathBuf,
    pub socket: PathBuf,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    #[error("cannot create the directory for database {}: {source}", path.display())]
    DatabaseDir { path: PathBuf, source: std::io::Error },
    #[error("cannot create the owner socket directory {}: {source}", path.display())]
    CreateRuntimeDir { path: PathBuf, source: std::io::Error },
    #[error("refusing the owner socket directory {}: it {reason}. {fix}", path.display())]
    UnsafeRuntimeDir { path: PathBuf, reason: String, fix: String },
    #[error(
        "the owner socket directory {} is too long: a socket in it would have a {length}-byte path, and \
         Unix sockets here take at most {limit} bytes. Set {RUNTIME_DIR_ENV} (or --runtime-dir) to a \
         directory at most {} bytes long",
        path.display(),
        limit - SOCKET_NAME_BYTES - 1
    )]
    RuntimeDirTooLong { path: PathBuf, length: usize, limit: usize },
}

impl Rendezvous {
    /// Finds (and creates, private, if missing) the socket directory for `db`. `runtime_dir`
    /// overrides the default ([`runtime_dir`]).
    pub fn for_database(db: &Path, runtime_dir: Option<&Path>) -> Result<Rendezvous, PathError> {
        let db = canonical_database(db)?;
        let dir = runtime_dir.map_or_else(default_runtime_dir, Path::to_path_buf);
        let socket = dir.join(format!("{:016x}.sock", fnv1a(db.as_os_str().as_bytes())));
        let length = socket.as_os_str().len();
        if length > state_os::socket::MAX_SOCKET_PATH {
            return Err(PathError::RuntimeDirTooLong { path: dir, length, limit: state_os::socket::MAX_SOCKET_PATH });
        }
        ensure_private_dir(&dir)?;
        Ok(Rendezvous { db, dir, socket })
    }
}

/// The database path every process on it agrees on: absolute, every symbolic link resolved,
/// the file's own name included, so a link and its target reach one owner and one log.
fn canonical_database(db: &Path) -> Result<PathBuf, PathError> {
    state_store::files::database_path(db).map_err(|source| PathError::DatabaseDir { path: db.to_owned(), source })
}

/// A socket's file name: 16 hex digits and `.sock`.
const SOCKET_NAME_BYTES: usize = 21;

/// The system's default, unless a socket in it would be too long to bind (a deep `$TMPDIR`):
/// then the short one every system has.
fn default_runtime_dir() -> PathBuf {
    let dir = state_os::socket::default_runtime_dir();
    if dir.as_os_str().len() + 1 + SOCKET_NAME_BYTES <= state_os::socket::MAX_SOCKET_PATH {
        dir
    } else {
        state_os::socket::short_runtime_dir()
    }
}

/// This process's user.
pub fn current_uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// Creates `dir` (mode 0700) if missing, then checks that it is a real directory owned by this
/// user that nobody else can enter: otherwise another user could listen in the owner's place.
fn ensure_private_dir(dir: &Path) -> Result<(), PathError> {
    if std::fs::symlink_metadata(dir).is_err() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| PathError::CreateRuntimeDir { path: dir.to_owned(), source })?;
    }
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|source| PathError::CreateRuntimeDir { path: dir.to_owned(), source })?;
    let unsafe_dir = |reason: String, fix: String| PathError::UnsafeRuntimeDir { path: dir.to_owned(), reason, fix };
    let elsewhere = format!("or set {RUNTIME_DIR_ENV} to a directory of your own");
    if meta.file_type().is_symlink() {
        return Err(unsafe_dir("is a symbolic link".into(), format!("Remove it, {elsewhere}")));
    }
    if !meta.is_dir() {
        return Err(unsafe_dir("is not a directory".into(), format!("Remove it, {elsewhere}")));
    }
    if meta.uid() != current_uid() {
        return Err(unsafe_dir(
            format!("belongs to uid {}, not to this user (uid {})", meta.uid(), current_uid()),
            format!("Have it removed, {elsewhere}"),
        ));
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(unsafe_dir(
            format!("has mode {mode:04o}, so other users can reach sockets in it"),
            format!("Run `chmod 700 {}`, {elsewhere}", dir.display()),
        ));
    }
    Ok(())
}

/// FNV-1a, 64 bits: a short, stable file name for a path (socket paths are limited to about
/// 100 bytes). Collisions are caught by the handshake, which names the database.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash: u64, byte| (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests;
