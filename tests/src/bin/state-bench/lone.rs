//! One durable put at a time: its rate and the bytes it sends to the disk, beside the floor of
//! this disk (a bare append and `fdatasync` of the same size, in the same directory).
//!
//! Bytes are the device's own count (`/sys/dev/block/M:m/stat`, sectors written), not the
//! kernel's per-process `write_bytes`: that one counts a whole page-cache folio each time a
//! write dirties it, and with large folios a 1 KiB append counts as 64 KiB or more. The
//! device count includes anything else writing to the same disk meanwhile, so it is an upper
//! bound on a shared machine.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use state_core::ops::kv::SetRequest;

use super::{floor, open_engine, tempfile_dir, value_256};

/// Enough puts that the log checkpoints into the database at least once within them (every
/// 8 MiB of records), so its cost is in the figure.
const PUTS: u64 = 10_000;

/// Rate, CPU and bytes at the device of `PUTS` puts one after another on a fresh database.
struct Lone {
    per_second: f64,
    cpu: Duration,
    bytes: Option<u64>,
}

async fn lone(dir: &tempfile_dir::Dir, device: Option<&DeviceCounter>, with_request_id: bool) -> Result<Lone> {
    let engine = open_engine(dir)?;
    // Past the file's first growth, so what is measured is steady state.
    for i in 0..2000u64 {
        engine.set(SetRequest::new(format!("warm/{i}"), value_256())).await?;
    }
    let before = device.map(DeviceCounter::written).transpose()?;
    let cpu_before = own_cpu()?;
    let started = Instant::now();
    for i in 0..PUTS {
        let mut request = SetRequest::new(format!("lone/{i}"), value_256());
        if with_request_id {
            request.request_id = Some(format!("put-{i}"));
        }
        engine.set(request).await?;
    }
    let elapsed = started.elapsed();
    // Closing checkpoints what the log still holds: that is part of what the puts cost.
    engine.close().await;
    let after = device.map(DeviceCounter::written).transpose()?;
    Ok(Lone {
        per_second: PUTS as f64 / elapsed.as_secs_f64(),
        cpu: own_cpu()?.saturating_sub(cpu_before) / u32::try_from(PUTS)?,
        bytes: per_write(before, after),
    })
}

pub(super) async fn lone_puts() -> Result<()> {
    println!("## Engine: one durable 256-byte put at a time\n");
    let dir = tempfile_dir::Dir::new()?;
    let device = DeviceCounter::for_path(dir.path());
    let plain = lone(&dir, device.as_ref(), false).await?;
    let with_id_dir = tempfile_dir::Dir::new()?;
    let with_id = lone(&with_id_dir, device.as_ref(), true).await?;
    let after = device.as_ref().map(DeviceCounter::written).transpose()?;

    let direct = floor::bare_appends(dir.path(), 1024, PUTS, floor::Durably::Direct)?;
    let direct_after = device.as_ref().map(DeviceCounter::written).transpose()?;
    let buffered = floor::bare_appends(dir.path(), 1024, PUTS, floor::Durably::Buffered)?;
    let buffered_after = device.as_ref().map(DeviceCounter::written).transpose()?;

    println!("| what | per second | CPU per write | bytes to the disk per write |");
    println!("|---|---:|---:|---:|");
    let row = |what: &str, per_second: f64, cpu: Duration, bytes: Option<u64>| {
        let bytes = bytes.map_or_else(|| "n/a (no block device counter)".to_owned(), |b| b.to_string());
        println!("| {what} | {per_second:.0} | {:.1} µs | {bytes} |", cpu.as_secs_f64() * 1e6);
    };
    row(&format!("{PUTS} puts, one after another, checkpoint included"), plain.per_second, plain.cpu, plain.bytes);
    row(
        "the same with a request id each (an idempotency record beside each entry)",
        with_id.per_second,
        with_id.cpu,
        with_id.bytes,
    );
    row(
        "floor: bare 1 KiB direct O_DSYNC write (as the log writes), same disk",
        direct.per_second,
        direct.cpu,
        per_write(after, direct_after),
    );
    row(
        "bare 1 KiB buffered append + fdatasync (as a WAL through the page cache), same disk",
        buffered.per_second,
        buffered.cpu,
        per_write(direct_after, buffered_after),
    );
    println!(
        "\nTarget: ≤ 4,096 bytes per put. A buffered sync writes at least one 4 KiB page; a direct write only the 512-byte sectors it covers.\n"
    );
    Ok(())
}

/// Bytes to the device per write of `PUTS`, between two readings of its counter.
fn per_write(before: Option<u64>, after: Option<u64>) -> Option<u64> {
    before.zip(after).map(|(before, after)| (after - before) / PUTS)
}

/// Bytes the block device holding a path has written since boot.
struct DeviceCounter {
    stat: PathBuf,
}

impl DeviceCounter {
    fn for_path(path: &Path) -> Option<DeviceCounter> {
        let dev = std::fs::metadata(path).ok()?.dev();
        // Linux's encoding of a device number (glibc's major()/minor()).
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
        let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
        let stat = PathBuf::from(format!("/sys/dev/block/{major}:{minor}/stat"));
        stat.exists().then_some(DeviceCounter { stat })
    }

    fn written(&self) -> Result<u64> {
        let text = std::fs::read_to_string(&self.stat).with_context(|| format!("reading {}", self.stat.display()))?;
        // Field 7: sectors written, in 512-byte units whatever the device's sector size.
        let sectors: u64 = text
            .split_whitespace()
            .nth(6)
            .and_then(|n| n.parse().ok())
            .with_context(|| format!("no sectors-written field in {}", self.stat.display()))?;
        Ok(sectors * 512)
    }
}

/// CPU time of this whole process, threads that ended included (`/proc/self/stat`, in clock
/// ticks: coarse, but a run of seconds makes that under a percent).
fn own_cpu() -> Result<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").context("reading /proc (Linux only)")?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("").split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|n| n.parse::<u64>().ok()).context("no CPU times in /proc/self/stat");
    // utime and stime are the 14th and 15th fields; the first after the name is the 3rd.
    let total = ticks(11)? + ticks(12)?;
    Ok(Duration::from_millis(total * 10))
}
