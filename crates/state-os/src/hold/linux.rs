//! Linux: a pidfd.

use std::io;
use std::os::fd::OwnedFd;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use rustix::process::{PidfdFlags, pidfd_open, pidfd_send_signal};

use super::{Hold, Signal, pid_of};
use crate::process;

/// A process held by a descriptor of its own.
#[derive(Debug)]
pub struct Pidfd {
    fd: OwnedFd,
}

impl Hold for Pidfd {
    fn open(pid: u32, started: u64) -> io::Result<Option<Self>> {
        let fd = match pidfd_open(pid_of(pid)?, PidfdFlags::empty()) {
            Ok(fd) => fd,
            Err(Errno::SRCH) => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        // The pidfd holds whichever process had the pid when it was opened. If that process
        // still started when the caller says, it is the one, and stays the pidfd's to the end.
        Ok(process::is_running(pid, Some(started)).then_some(Pidfd { fd }))
    }

    fn signal(&self, signal: Signal) -> io::Result<()> {
        match pidfd_send_signal(&self.fd, signal.raw()) {
            Ok(()) | Err(Errno::SRCH) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    fn exited_within(&self, limit: Duration) -> bool {
        let wait = Timespec {
            tv_sec: i64::try_from(limit.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(limit.subsec_nanos()),
        };
        let mut fds = [PollFd::new(&self.fd, PollFlags::IN)];
        matches!(rustix::event::poll(&mut fds, Some(&wait)), Ok(n) if n > 0)
    }
}
