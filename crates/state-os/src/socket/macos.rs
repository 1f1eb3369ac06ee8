//! macOS: `sun_path` of 104 bytes, a per-user `$TMPDIR`, no `POLLRDHUP` (`POLLHUP` is set once
//! the peer closed a Unix stream socket).

use std::path::PathBuf;

use rustix::event::PollFlags;

pub(super) const SUN_PATH: usize = 104;

pub(super) const HUNG_UP_ASK: PollFlags = PollFlags::HUP;

/// None: `$TMPDIR` is already per user.
pub(super) fn session_runtime_dir() -> Option<PathBuf> {
    None
}
