//! Replacing an owner that is alive but hung: stopped (SIGSTOP, a debugger), or stuck on its
//! disk. Its socket still accepts connections, so without this every joined call would wait
//! out its deadline and fail, forever.
//!
//! A joiner that has heard nothing from its owner for a while, with calls outstanding, asks
//! it whether its writer still moves; one that gets no answer to that either ends it, then
//! rejoins (starting a new owner) and resends its calls under their idempotency keys. Ending
//! is done safely: only the process the database's holder note names as its owner, by pid and
//! start time, which is the process listening; through a pidfd opened before the start time
//! is checked again, so a process that reused the pid is never hit; first SIGTERM (with
//! SIGCONT, so a stopped one hears it) to let it commit what it queued, SIGKILL only if it does
//! not exit. Without such a note nothing is signalled: the joiner says so and leaves it.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open, pidfd_send_signal};
use state_store::RedbBackend;

/// How long an owner asked to stop gets to finish its queued writes before it is killed.
const GRACE: Duration = Duration::from_secs(5);

/// How long a killed owner gets to be gone (the kernel frees it once it leaves any I/O).
const KILL_WAIT: Duration = Duration::from_secs(10);

/// How a hung owner came to an end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ended {
    /// It exited on SIGTERM, having committed what it had queued.
    Stopped,
    /// It had to be killed.
    Killed,
    /// It was already gone when looked at.
    AlreadyGone,
}

/// Ends the owner `pid` of `db`, to which `socket` is a connection it does not answer on.
pub(super) async fn end_hung_owner(db: &Path, pid: u32, socket: BorrowedFd<'_>) -> Result<Ended, String> {
    let holder = match RedbBackend::holder(db) {
        Some(holder) if holder.pid != pid => {
            return Err(format!(
                "the process listening (pid {pid}) is not the one the database's holder note names (pid {}); \
                 left alone",
                holder.pid
            ));
        }
        Some(holder) if holder.role.as_deref() != Some("owner") => {
            let role = holder.role.as_deref().unwrap_or("an unknown role");
            return Err(format!("pid {pid} holds the database as `{role}`, not as its owner; left alone"));
        }
        Some(holder) if holder.started.is_none() => {
            return Err(format!(
                "the database's holder note names pid {pid} but not when it started, so a process that reused the \
                 pid cannot be told from it; left alone (stop it yourself if it is the owner)"
            ));
        }
        Some(holder) => holder,
        None => {
            return Err(format!(
                "no live holder note names the process listening (pid {pid}), so it cannot be told from a process \
                 that reused its pid; left alone (stop it yourself if it is the owner)"
            ));
        }
    };
    let raw = i32::try_from(pid).ok().and_then(Pid::from_raw).ok_or_else(|| format!("{pid} is not a process id"))?;
    let pidfd = match pidfd_open(raw, PidfdFlags::empty()) {
        Ok(pidfd) => pidfd,
        Err(rustix::io::Errno::SRCH) => return Ok(Ended::AlreadyGone),
        Err(error) => return Err(format!("cannot open pid {pid}: {error}")),
    };
    // The pidfd holds whichever process had the pid when it was opened. If that process still
    // started when the note says, it is the holder, and stays the pidfd's process to the end.
    if !holder.is_running() {
        return Ok(Ended::AlreadyGone);
    }
    // The pid was read from this connection. Had its process died since, the kernel would have
    // closed its end before the pid could be reused: a connection still open means the pidfd
    // is the owner's.
    if peer_hung_up(socket) {
        return Ok(Ended::AlreadyGone);
    }
    let signal = |signal: Signal| {
        pidfd_send_signal(&pidfd, signal).or_else(|e| if e == rustix::io::Errno::SRCH { Ok(()) } else { Err(e) })
    };
    signal(Signal::TERM).map_err(|e| format!("cannot signal pid {pid}: {e}"))?;
    signal(Signal::CONT).map_err(|e| format!("cannot signal pid {pid}: {e}"))?;
    if exited_within(&pidfd, GRACE).await {
        return Ok(Ended::Stopped);
    }
    signal(Signal::KILL).map_err(|e| format!("cannot kill pid {pid}: {e}"))?;
    if exited_within(&pidfd, KILL_WAIT).await {
        return Ok(Ended::Killed);
    }
    Err(format!("pid {pid} is still there {KILL_WAIT:?} after SIGKILL: it is stuck in the kernel (a hung disk?)"))
}

/// Whether the other end of `socket` has closed it (its process died or closed it).
fn peer_hung_up(socket: BorrowedFd<'_>) -> bool {
    let mut fds = [PollFd::from_borrowed_fd(socket, PollFlags::RDHUP)];
    let now = Timespec { tv_sec: 0, tv_nsec: 0 };
    match rustix::event::poll(&mut fds, Some(&now)) {
        Ok(_) => fds[0].revents().intersects(PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR),
        Err(_) => false,
    }
}

/// Whether the process behind `pidfd` exits within `limit` (a pidfd is readable once it has).
async fn exited_within(pidfd: &OwnedFd, limit: Duration) -> bool {
    let Ok(copy) = pidfd.as_fd().try_clone_to_owned() else { return false };
    let wait = Timespec {
        tv_sec: i64::try_from(limit.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(limit.subsec_nanos()),
    };
    // A blocking poll, on the blocking pool: seconds at most, and only while taking over.
    let polled = tokio::task::spawn_blocking(move || {
        let mut fds = [PollFd::new(&copy, PollFlags::IN)];
        rustix::event::poll(&mut fds, Some(&wait)).map(|n| n > 0)
    });
    matches!(polled.await, Ok(Ok(true)))
}

#[cfg(test)]
mod tests;
