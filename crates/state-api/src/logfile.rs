//! The detached owner's log: a file beside the database, capped in size. When it would grow
//! past the cap it is renamed to `<name>.1` (replacing the previous one) and started afresh,
//! so an owner that runs for months keeps at most twice the cap on disk.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Default cap of one log file.
pub const DEFAULT_LOG_CAP: u64 = 1024 * 1024;

/// Where the owner of `db` logs: `<db>.owner.log`.
pub fn owner_log_path(db: &Path) -> PathBuf {
    let mut name = db.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".owner.log");
    db.with_file_name(name)
}

/// A size-capped log file; clones write to the same file. Pass `move || log.clone()` as a
/// `tracing_subscriber` writer.
#[derive(Clone)]
pub struct CappedLog {
    state: Arc<Mutex<State>>,
}

struct State {
    path: PathBuf,
    file: File,
    size: u64,
    cap: u64,
}

impl CappedLog {
    pub fn open(path: &Path, cap: u64) -> io::Result<CappedLog> {
        // An owner's log names keys and clients: private, like the database beside it, and
        // never written through a link or into another user's file planted in its place.
        let file = state_store::files::open_private(path, std::fs::OpenOptions::new().create(true).append(true))?;
        let size = file.metadata()?.len();
        Ok(CappedLog { state: Arc::new(Mutex::new(State { path: path.to_owned(), file, size, cap: cap.max(1024) })) })
    }
}

impl State {
    fn rotate(&mut self) -> io::Result<()> {
        let mut old = self.path.as_os_str().to_owned();
        old.push(".1");
        std::fs::rename(&self.path, &old)?;
        // Made new: whatever appeared under the name since is not written through.
        let _ = std::fs::remove_file(&self.path);
        self.file = state_store::files::private_file().create_new(true).write(true).open(&self.path)?;
        self.size = 0;
        Ok(())
    }
}

impl Write for CappedLog {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut state = self.state.lock().map_err(|_| io::Error::other("log lock poisoned"))?;
        if state.size > 0 && state.size + buf.len() as u64 > state.cap {
            // A log that cannot rotate keeps appending rather than losing lines.
            let _ = state.rotate();
        }
        state.file.write_all(buf)?;
        state.size += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut state = self.state.lock().map_err(|_| io::Error::other("log lock poisoned"))?;
        state.file.flush()
    }
}

#[cfg(test)]
mod tests;
