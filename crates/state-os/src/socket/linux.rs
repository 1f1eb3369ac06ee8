//! Linux: `sun_path` of 108 bytes, `$XDG_RUNTIME_DIR`, `POLLRDHUP`.

use std::path::PathBuf;

use rustix::event::PollFlags;

pub(super) const SUN_PATH: usize = 108;

/// Set when the peer shut its end, even with data of its still unread.
pub(super) const HUNG_UP_ASK: PollFlags = PollFlags::RDHUP;

/// The session's private runtime directory, where the login manager made one.
pub(super) fn session_runtime_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from).filter(|dir| dir.is_absolute()).map(|dir| dir.join("state"))
}
