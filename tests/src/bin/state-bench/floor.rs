//! What this machine cannot go below, measured in the same run as the figures it bounds: a bare
//! Unix-socket round trip between two processes (the least a call through the owner can cost),
//! and a bare durable append, both as the log makes them (one `O_DIRECT | O_DSYNC` write: the
//! least a durable write can cost) and buffered with `fdatasync` (as PostgreSQL's WAL does).

use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::{process_cpu, tempfile_dir};

/// Bytes each way per round trip: about a point read's call and reply.
pub(crate) const MESSAGE_BYTES: usize = 200;

/// Rate and CPU of one measured loop.
pub(crate) struct Floor {
    pub(crate) per_second: f64,
    /// CPU per iteration, every process involved.
    pub(crate) cpu: Duration,
}

/// Round trips of `MESSAGE_BYTES` between this thread and a child process that echoes them,
/// with blocking reads and writes (no event loop, no parsing): the floor under any hop.
pub(crate) fn socket_round_trip(round_trips: u32) -> Result<Floor> {
    let dir = tempfile_dir::Dir::new()?;
    let path = dir.path().join("echo.sock");
    let listener = UnixListener::bind(&path)?;
    let mut child = std::process::Command::new(std::env::current_exe()?)
        .arg("--echo-socket")
        .arg(&path)
        .spawn()
        .context("starting the echo process")?;
    let (mut stream, _) = listener.accept()?;
    let message = [b'x'; MESSAGE_BYTES];
    let mut buf = [0u8; MESSAGE_BYTES];
    let mut round_trip = |stream: &mut UnixStream| -> Result<()> {
        stream.write_all(&message)?;
        stream.read_exact(&mut buf)?;
        Ok(())
    };
    for _ in 0..1000 {
        round_trip(&mut stream)?;
    }
    let (mine, theirs) = (thread_cpu()?, process_cpu(child.id())?);
    let started = Instant::now();
    for _ in 0..round_trips {
        round_trip(&mut stream)?;
    }
    let elapsed = started.elapsed();
    let cpu = (thread_cpu()? - mine) + (process_cpu(child.id())? - theirs);
    drop(stream);
    child.wait()?;
    Ok(Floor { per_second: f64::from(round_trips) / elapsed.as_secs_f64(), cpu: cpu / round_trips })
}

/// The child side of [`socket_round_trip`]: echoes until the parent hangs up.
pub(crate) fn echo(path: &Path) -> Result<()> {
    let mut stream = UnixStream::connect(path)?;
    let mut buf = [0u8; MESSAGE_BYTES];
    while stream.read_exact(&mut buf).is_ok() {
        stream.write_all(&buf)?;
    }
    Ok(())
}

/// How a bare append is made durable.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Durably {
    /// Written through the page cache, then `fdatasync`.
    Buffered,
    /// One write past the page cache that returns once on the disk (`O_DIRECT | O_DSYNC`).
    Direct,
}

/// Appends `size` bytes (a multiple of 512) durably, `count` times, in a fresh preallocated
/// file under `dir`.
pub(crate) fn bare_appends(dir: &Path, size: usize, count: u64, sync: Durably) -> Result<Floor> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join("floor.bin");
    let file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path)?;
    // Preallocated and synced, as the log is, so no append changes the file's size.
    file.write_all_at(&vec![0; usize::try_from(size as u64 * count)?], 0)?;
    file.sync_all()?;
    let file = match sync {
        Durably::Buffered => file,
        Durably::Direct => {
            let flags = rustix::fs::OFlags::DIRECT | rustix::fs::OFlags::DSYNC;
            std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(flags.bits() as i32)
                .open(&path)
                .context("opening for direct I/O")?
        }
    };
    // Direct I/O needs memory aligned to the sector; a page covers any.
    let mut backing = vec![0x5a_u8; size + 4096];
    let start = backing.as_ptr().align_offset(4096);
    let bytes = backing.get_mut(start..start + size).context("aligning the buffer")?;
    let cpu_before = thread_cpu()?;
    let started = Instant::now();
    for i in 0..count {
        file.write_all_at(bytes, i * size as u64)?;
        if sync == Durably::Buffered {
            file.sync_data()?;
        }
    }
    let elapsed = started.elapsed();
    let cpu = thread_cpu()? - cpu_before;
    std::fs::remove_file(&path)?;
    let count32 = u32::try_from(count)?;
    Ok(Floor { per_second: count as f64 / elapsed.as_secs_f64(), cpu: cpu / count32 })
}

/// CPU time of the calling thread (Linux schedstat, nanoseconds).
fn thread_cpu() -> Result<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").context("reading /proc (Linux only)")?;
    let nanos = stat.split_whitespace().next().and_then(|n| n.parse().ok()).context("no CPU time in schedstat")?;
    Ok(Duration::from_nanos(nanos))
}
