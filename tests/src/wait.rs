//! Waiting, bounded, for something another process or thread does: the one place the tests
//! poll. A test that waits says what it waits for; one that waits too long fails saying that,
//! instead of hanging or passing by luck after a fixed pause.

use std::time::{Duration, Instant};

/// How often a condition is looked at again: small beside any patience the tests give, large
/// enough that looking costs nothing.
const POLL: Duration = Duration::from_millis(10);

/// Returns once `done` says so; panics, naming `what`, if it has not within `patience`.
pub fn until(what: &str, patience: Duration, mut done: impl FnMut() -> bool) {
    until_some(what, patience, || done().then_some(()));
}

/// Returns what `ready` gives once it gives something; panics, naming `what`, if it has given
/// nothing within `patience`.
pub fn until_some<T>(what: &str, patience: Duration, ready: impl FnMut() -> Option<T>) -> T {
    match within(patience, ready) {
        Some(value) => value,
        None => panic!("waited {patience:?} for {what}, in vain"),
    }
}

/// What `ready` gives once it gives something, or `None` if it has given nothing within
/// `patience`: for a caller whose failure says more than what it waited for.
pub fn within<T>(patience: Duration, mut ready: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + patience;
    loop {
        if let Some(value) = ready() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        // The poll itself: this is the one place the tests wait.
        std::thread::sleep(POLL);
    }
}

/// Whether the process `pid` has exited (gone, or a zombie its parent has not reaped).
pub fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses and may hold spaces.
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => true,
    }
}
