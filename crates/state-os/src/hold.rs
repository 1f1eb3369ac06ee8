//! A hold on one process: signal it, and wait for it to end, without ever reaching another
//! process that took its pid since the hold was opened.
//!
//! Two kinds, behind one trait:
//! - [`Pidfd`] (Linux): a descriptor of the process itself. Signals go through it, so once it is
//!   open nothing can redirect them; it turns readable when the process exits.
//! - [`ByStartTime`] (macOS, and on Linux for tests): the pid with its start time, checked
//!   again right before every signal. The window left is the time between that check and
//!   `kill(2)`, microseconds, within which the process would have to exit, be reaped, and its
//!   pid come round again, which takes every other pid being handed out first (pids are issued
//!   in order on both systems). A kqueue `EVFILT_PROC` watch would leave the same window, since
//!   macOS has no way to signal through one.
//!
//! [`Native`] is the kind this system uses.

use std::io;
use std::time::{Duration, Instant};

use rustix::io::Errno;
use rustix::process::Pid;

use crate::process;

/// A signal a hold can send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM: finish and exit.
    Terminate,
    /// SIGCONT: a stopped process resumes (and so hears what it was sent).
    Continue,
    /// SIGKILL.
    Kill,
}

impl Signal {
    fn raw(self) -> rustix::process::Signal {
        match self {
            Signal::Terminate => rustix::process::Signal::TERM,
            Signal::Continue => rustix::process::Signal::CONT,
            Signal::Kill => rustix::process::Signal::KILL,
        }
    }
}

/// A hold on one process.
pub trait Hold: Sized + Send + Sync + 'static {
    /// Holds `pid` if it is the process that started at `started`; `Ok(None)` when that process
    /// is gone.
    fn open(pid: u32, started: u64) -> io::Result<Option<Self>>;

    /// Sends `signal`; nothing, and no error, once the process has exited.
    fn signal(&self, signal: Signal) -> io::Result<()>;

    /// Whether the process exits within `limit` (it blocks meanwhile: call it off any event loop).
    fn exited_within(&self, limit: Duration) -> bool;
}

/// The hold this system gives the strongest guarantee with.
#[cfg(target_os = "linux")]
pub type Native = Pidfd;
#[cfg(target_os = "macos")]
pub type Native = ByStartTime;

fn pid_of(pid: u32) -> io::Result<Pid> {
    i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("{pid} is not a process id")))
}

/// A process named by its pid and start time, checked again before every signal.
#[derive(Debug)]
pub struct ByStartTime {
    pid: u32,
    started: u64,
}

/// How often a [`ByStartTime`] looks whether its process has exited.
const EXIT_POLL: Duration = Duration::from_millis(10);

impl Hold for ByStartTime {
    fn open(pid: u32, started: u64) -> io::Result<Option<Self>> {
        pid_of(pid)?;
        Ok(process::is_running(pid, Some(started)).then_some(ByStartTime { pid, started }))
    }

    fn signal(&self, signal: Signal) -> io::Result<()> {
        if !process::is_running(self.pid, Some(self.started)) {
            return Ok(());
        }
        match rustix::process::kill_process(pid_of(self.pid)?, signal.raw()) {
            Ok(()) | Err(Errno::SRCH) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    fn exited_within(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if !process::is_running(self.pid, Some(self.started)) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(EXIT_POLL);
        }
    }
}

#[cfg(target_os = "linux")]
pub use linux::Pidfd;

#[cfg(target_os = "linux")]
mod linux;

#[cfg(test)]
mod tests;
