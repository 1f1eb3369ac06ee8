//! Processes that hold databases: whether one is alive, and whether it is still the process
//! that took the lock rather than another that reused its pid. A pid alone names whoever has it
//! now; a pid with the time its process started names one process for good.
//!
//! Start times are opaque numbers, compared only with others read on the same system: Linux
//! gives clock ticks since boot, macOS microseconds since the epoch. A process that has exited
//! but not yet been reaped (a zombie) has no start time: it holds no locks and no sockets.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as platform;
#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
use macos as platform;

use rustix::io::Errno;
use rustix::process::Pid;

/// When the process `pid` started, or `None` if there is no such live process or the system
/// does not say.
pub fn started(pid: u32) -> Option<u64> {
    platform::started(pid)
}

/// When this process started.
pub fn started_self() -> Option<u64> {
    started(std::process::id())
}

/// Whether the process that started at `start` under `pid` is still running. Without a start
/// time, whether any process has the pid.
pub fn is_running(pid: u32, start: Option<u64>) -> bool {
    match (start, started(pid)) {
        (Some(recorded), Some(now)) => recorded == now,
        // A system that says when this process started would say it for that one too, were it
        // alive; one that says nothing (Linux without /proc) is asked whether the pid is taken.
        (Some(_), None) => started_self().is_none() && exists(pid),
        (None, _) => exists(pid),
    }
}

/// Whether any process has `pid` (a null signal: refused for another user's process, which
/// still exists).
pub fn exists(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else { return false };
    !matches!(rustix::process::test_kill_process(pid), Err(Errno::SRCH))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_running_and_a_reused_pid_is_not_it() {
        let me = std::process::id();
        let start = started_self();
        assert!(start.is_some(), "the system says when a process started");
        assert!(is_running(me, start));
        assert!(!is_running(me, start.map(|s| s + 1)), "another start time is another process");
    }

    #[test]
    fn an_exited_process_is_not_running_even_before_it_is_reaped() {
        let mut child = std::process::Command::new("true").spawn().expect("spawn true");
        let pid = child.id();
        // Until waited for, the child stays a zombie under its pid.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while started(pid).is_some() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(started(pid), None, "a zombie has no start time");
        assert!(!is_running(pid, Some(1)));
        child.wait().expect("reap");
        assert!(!exists(pid) || started(pid).is_some(), "gone, or the pid already reused");
    }

    #[test]
    fn pid_zero_and_pids_past_the_range_name_no_process() {
        assert!(!exists(0));
        assert!(!exists(u32::MAX));
        assert_eq!(started(u32::MAX), None);
    }
}
