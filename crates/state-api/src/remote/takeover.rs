//! Replacing an owner that is alive but hung: stopped (SIGSTOP, a debugger), or stuck on its
//! disk. Its socket still accepts connections, so without this every joined call would wait
//! out its deadline and fail, forever.
//!
//! A joiner that has heard nothing from its owner for a while, with calls outstanding, asks
//! it whether its writer still moves; one that gets no answer to that either ends it, then
//! rejoins (starting a new owner) and resends its calls under their idempotency keys. Ending
//! is done safely: only the process the database's holder note names as its owner, by pid and
//! start time, which is the process listening; through a hold on that process (`state_os::hold`:
//! a descriptor of the process on Linux, the start time checked again before every signal on
//! macOS), so a process that reused the pid is never hit; first SIGTERM (with SIGCONT, so a
//! stopped one hears it) to let it commit what it queued, SIGKILL only if it does not exit.
//! Without such a note nothing is signalled: the joiner says so and leaves it.

use std::os::fd::BorrowedFd;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use state_os::hold::{Hold, Signal};
use state_os::socket::peer_hung_up;
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
    end_through::<state_os::hold::Native>(db, pid, socket).await
}

/// [`end_hung_owner`] through a hold of kind `H` (the tests run every kind on this system).
async fn end_through<H: Hold>(db: &Path, pid: u32, socket: BorrowedFd<'_>) -> Result<Ended, String> {
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
    let Some(started) = holder.started else { return Err(format!("pid {pid} has no start time")) };
    let hold = match H::open(pid, started) {
        Ok(Some(hold)) => Arc::new(hold),
        Ok(None) => return Ok(Ended::AlreadyGone),
        Err(error) => return Err(format!("cannot hold pid {pid}: {error}")),
    };
    // The pid was read from this connection. Had its process died since, the kernel would have
    // closed its end before the pid could be reused: a connection still open means the hold
    // is on the owner.
    if peer_hung_up(socket) {
        return Ok(Ended::AlreadyGone);
    }
    let signal = |signal: Signal| hold.signal(signal).map_err(|e| format!("cannot signal pid {pid}: {e}"));
    signal(Signal::Terminate)?;
    signal(Signal::Continue)?;
    if exited_within(&hold, GRACE).await {
        return Ok(Ended::Stopped);
    }
    signal(Signal::Kill)?;
    if exited_within(&hold, KILL_WAIT).await {
        return Ok(Ended::Killed);
    }
    Err(format!("pid {pid} is still there {KILL_WAIT:?} after SIGKILL: it is stuck in the kernel (a hung disk?)"))
}

/// Whether the held process exits within `limit`: a blocking wait, on the blocking pool
/// (seconds at most, and only while taking over).
async fn exited_within<H: Hold>(hold: &Arc<H>, limit: Duration) -> bool {
    let hold = Arc::clone(hold);
    matches!(tokio::task::spawn_blocking(move || hold.exited_within(limit)).await, Ok(true))
}

#[cfg(test)]
mod tests;
