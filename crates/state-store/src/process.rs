//! Processes that hold databases: whether one is alive, and whether it is still the process
//! that took the lock rather than another that reused its pid. A pid alone names whoever has it
//! now; a pid with the time its process started names one process for good.

/// When the process `pid` started, in the system's clock ticks since boot (Linux's
/// `/proc/<pid>/stat`), or `None` if there is no such process or the system does not say.
pub fn started(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    start_time_of(&stat)
}

/// When this process started.
pub fn started_self() -> Option<u64> {
    started(std::process::id())
}

/// Field 22 of a stat line, counted after the command name, which is in parentheses and may
/// itself hold spaces and parentheses (so the last `)` ends it).
fn start_time_of(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the process that started at `start` under `pid` is still running. Without a start
/// time, whether any process has the pid (where the system can tell; assumed so elsewhere).
pub fn is_running(pid: u32, start: Option<u64>) -> bool {
    match (start, started(pid)) {
        (Some(recorded), Some(now)) => recorded == now,
        (Some(_), None) => !std::path::Path::new("/proc/self/stat").exists() && pid_exists(pid),
        (None, _) => pid_exists(pid),
    }
}

fn pid_exists(pid: u32) -> bool {
    let proc = std::path::Path::new("/proc");
    !proc.join("self").exists() || proc.join(pid.to_string()).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_time_is_read_past_a_name_with_spaces_and_parentheses() {
        let line = "1234 (a (b) c) S 1 1234 1234 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(start_time_of(line), Some(987654));
        assert_eq!(start_time_of("1 (x) S"), None);
    }

    #[test]
    fn this_process_is_running_and_a_reused_pid_is_not_it() {
        let me = std::process::id();
        let start = started_self();
        assert!(start.is_some(), "Linux says when a process started");
        assert!(is_running(me, start));
        assert!(!is_running(me, start.map(|s| s + 1)), "another start time is another process");
    }
}
