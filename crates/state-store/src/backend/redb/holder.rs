//! Who holds a database file. redb locks the file itself; this note beside it only lets a
//! second process say *which* process holds the lock instead of just "in use".

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct HolderNote {
    pid: u32,
    program: String,
    since: String,
    /// How the holder uses the database, e.g. "owner" (it serves other processes) or
    /// "standalone" (it does not). Absent in notes written before roles existed.
    #[serde(default)]
    role: Option<String>,
    /// When the holder started (`state_os::process::started`): with the pid, it names one process, so
    /// a process that reused the pid is never taken for the holder.
    #[serde(default)]
    started: Option<u64>,
}

/// The process a database's holder note names, alive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HolderProcess {
    pub pid: u32,
    pub role: Option<String>,
    /// When it started; `None` in a note written before notes said.
    pub started: Option<u64>,
}

impl HolderProcess {
    /// Whether the process is still the one the note named (false once it has exited, even if
    /// another process has its pid now). A note without a start time cannot tell.
    pub fn is_running(&self) -> bool {
        self.started.is_some() && state_os::process::is_running(self.pid, self.started)
    }
}

/// The note written by the process holding the database; removed when it closes.
#[derive(Debug)]
pub(super) struct Holder {
    note_path: PathBuf,
}

pub(super) fn note_path(db_path: &Path) -> PathBuf {
    let mut name = db_path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".holder");
    db_path.with_file_name(name)
}

impl Holder {
    /// Records this process as the holder. Best effort: a read-only directory only costs the
    /// nicer message, never the open.
    pub(super) fn record(db_path: &Path, role: &str) -> Holder {
        let note_path = note_path(db_path);
        let program = std::env::args().next().map_or_else(
            || "unknown".to_owned(),
            |arg0| Path::new(&arg0).file_name().map_or(arg0.clone(), |n| n.to_string_lossy().into_owned()),
        );
        let since = crate::clock::Clock::now(&crate::clock::SystemClock);
        let note = HolderNote {
            pid: std::process::id(),
            program,
            since: since.to_rfc3339(),
            role: Some(role.to_owned()),
            started: state_os::process::started_self(),
        };
        if let Ok(text) = serde_json::to_string(&note) {
            // A name of this process's alone, made new: a file or link planted under a fixed
            // name in a shared directory is never written through. The rename replaces
            // whatever is at the note's name, a link included, never what it points at.
            let tmp = note_path.with_extension(format!("holder.{}.tmp", std::process::id()));
            let _ = std::fs::remove_file(&tmp);
            let written = crate::files::private_file()
                .create_new(true)
                .write(true)
                .open(&tmp)
                .and_then(|mut file| std::io::Write::write_all(&mut file, text.as_bytes()));
            match written {
                Ok(()) => {
                    if std::fs::rename(&tmp, &note_path).is_err() {
                        let _ = std::fs::remove_file(&tmp);
                    }
                }
                Err(_) => {
                    let _ = std::fs::remove_file(&tmp);
                }
            }
        }
        Holder { note_path }
    }

    /// Describes the holder of a locked database for an error message, with its role.
    pub(super) fn describe(db_path: &Path) -> (String, Option<String>) {
        let note = read_own_note(&note_path(db_path))
            .and_then(|text| serde_json::from_str::<HolderNote>(&text).ok())
            // A note left by a process that was killed describes nobody: the real holder has
            // the lock but has not written its own note yet.
            .filter(|note| state_os::process::is_running(note.pid, note.started));
        match note {
            Some(note) => {
                let role = note.role.as_deref().map(|r| format!("{r}, ")).unwrap_or_default();
                (format!("{} ({role}pid {}, running since {})", note.program, note.pid, note.since), note.role)
            }
            None => ("another process".to_owned(), None),
        }
    }
}

/// The process the note names as holding the database, if that process is alive (and, where
/// the note says when it started, is still that process).
pub(super) fn recorded(db_path: &Path) -> Option<HolderProcess> {
    let text = read_own_note(&note_path(db_path))?;
    let note = serde_json::from_str::<HolderNote>(&text).ok()?;
    state_os::process::is_running(note.pid, note.started).then_some(HolderProcess {
        pid: note.pid,
        role: note.role,
        started: note.started,
    })
}

/// The note's text, if it is a file of this user's: one another user planted (or a link) is
/// not taken to name anyone.
fn read_own_note(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.uid() != rustix::process::geteuid().as_raw() {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

impl Drop for Holder {
    fn drop(&mut self) {
        let ours = std::fs::read_to_string(&self.note_path)
            .ok()
            .and_then(|text| serde_json::from_str::<HolderNote>(&text).ok())
            .is_some_and(|note| note.pid == std::process::id());
        if ours {
            let _ = std::fs::remove_file(&self.note_path);
        }
    }
}
