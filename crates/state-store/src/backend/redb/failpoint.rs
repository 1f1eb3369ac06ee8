//! Crash points for tests (feature `failpoints`): `STATE_FAILPOINT=<name>:<n>` makes the
//! process abort, as abruptly as SIGKILL, the n-th time it passes the point `name`. Without the
//! feature every point compiles to nothing.

#[cfg(feature = "failpoints")]
pub(super) fn reached(name: &str) -> bool {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static ARMED: OnceLock<Option<(String, u64)>> = OnceLock::new();
    static PASSES: AtomicU64 = AtomicU64::new(0);
    let armed = ARMED.get_or_init(|| {
        let spec = std::env::var("STATE_FAILPOINT").ok()?;
        let (point, n) = spec.split_once(':')?;
        Some((point.to_owned(), n.parse().ok()?))
    });
    match armed {
        Some((point, n)) if point == name => PASSES.fetch_add(1, Ordering::SeqCst) + 1 == *n,
        _ => false,
    }
}

#[cfg(not(feature = "failpoints"))]
pub(super) fn reached(_: &str) -> bool {
    false
}

/// Aborts at `name` when armed there.
pub(super) fn crash_at(name: &str) {
    if reached(name) {
        std::process::abort();
    }
}

/// Aborts at `name` when armed there, after `pause`: for a point reached once callers were
/// answered, so they get to say so first.
pub(super) fn crash_at_after(name: &str, pause: std::time::Duration) {
    if reached(name) {
        std::thread::sleep(pause);
        std::process::abort();
    }
}
