//! Owner sockets: the longest path one may be bound at, where they live unless told, and
//! whether the other end of a connection has hung up.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as platform;
#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
use macos as platform;

use std::os::fd::BorrowedFd;
use std::path::PathBuf;

use rustix::event::{PollFd, PollFlags, Timespec};

/// The longest path, in bytes, a Unix socket can be bound or reached at: `sun_path` less its
/// closing NUL (Linux 107, macOS 103).
pub const MAX_SOCKET_PATH: usize = platform::SUN_PATH - 1;

/// Where owner sockets live when nobody says: Linux's per-user `$XDG_RUNTIME_DIR/state`; else,
/// and always on macOS, `state-<uid>` in the temporary directory (`$TMPDIR`, which macOS makes
/// per user).
pub fn default_runtime_dir() -> PathBuf {
    platform::session_runtime_dir().unwrap_or_else(|| {
        let temp = std::env::temp_dir();
        if temp.is_absolute() { temp.join(user_dir_name()) } else { short_runtime_dir() }
    })
}

fn user_dir_name() -> String {
    format!("state-{}", rustix::process::getuid().as_raw())
}

/// The fallback of [`default_runtime_dir`], and where to go when it is too long for a socket:
/// `/tmp/state-<uid>`, short on every system.
pub fn short_runtime_dir() -> PathBuf {
    PathBuf::from("/tmp").join(user_dir_name())
}

/// Whether the other end of `socket` has closed it (its process died or closed it).
pub fn peer_hung_up(socket: BorrowedFd<'_>) -> bool {
    let mut fds = [PollFd::from_borrowed_fd(socket, platform::HUNG_UP_ASK)];
    let now = Timespec { tv_sec: 0, tv_nsec: 0 };
    match rustix::event::poll(&mut fds, Some(&now)) {
        Ok(_) => fds[0].revents().intersects(platform::HUNG_UP_ASK | PollFlags::HUP | PollFlags::ERR),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    use super::*;

    #[test]
    fn a_closed_peer_is_seen_and_an_open_one_is_not() {
        let (ours, theirs) = UnixStream::pair().expect("socket pair");
        assert!(!peer_hung_up(ours.as_fd()));
        drop(theirs);
        assert!(peer_hung_up(ours.as_fd()));
    }

    #[test]
    fn a_path_of_the_limit_binds_and_one_byte_more_does_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = dir.path().as_os_str().len() + 1;
        if base + 8 > MAX_SOCKET_PATH {
            return; // a temporary directory already too long to test with
        }
        let at = |len: usize| dir.path().join("s".repeat(len - base));
        assert!(std::os::unix::net::UnixListener::bind(at(MAX_SOCKET_PATH)).is_ok());
        assert!(std::os::unix::net::UnixListener::bind(at(MAX_SOCKET_PATH + 1)).is_err());
    }
}
