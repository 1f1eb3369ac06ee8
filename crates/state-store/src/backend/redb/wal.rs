//! The write-ahead log beside a redb file (`<db>.wal`): a write batch is acknowledged once its
//! record is appended and synced, and redb then applies it without a sync of its own. A
//! checkpoint (a durable redb commit) makes every record so far redundant, and the log starts
//! over from its beginning under a new epoch, reusing the file's blocks, so a sync rewrites
//! data blocks already allocated instead of growing the file.
//!
//! Layout:
//! - two header slots (offsets 0 and 512), written alternately: magic, format, epoch, a random
//!   salt, the sequence number (LSN) of the epoch's first record, the identity of the database
//!   the log belongs to (format 2), and a CRC. The valid slot with the higher epoch is current,
//!   so a header torn mid-write leaves the other one in charge.
//! - records from offset 4096, each starting on a 512-byte boundary: payload length (u32), CRC
//!   (u32) over the salt, the LSN, the length and the payload, the LSN (u64), the payload. The
//!   salt makes a record of an earlier epoch, or bytes a client wrote that happen to look like
//!   a record, fail the check.
//!
//! Opening reads records in LSN order until one fails its check. If a valid record of the
//! current epoch follows at a later boundary, what failed is damage in the middle of the log
//! and the store refuses to open, naming the file and offset; otherwise it is the tail of an
//! append a crash cut short, which was never acknowledged.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Where records start: the first 4 KiB hold the two header slots.
const DATA_START: u64 = 4096;
/// Records start on these boundaries, so the search for valid records past damage is cheap.
const ALIGN: u64 = 512;
const HEADER_SLOTS: [u64; 2] = [0, 512];
/// Format 1 headers (no database identity) are 40 bytes, format 2 ones 48.
const HEADER_BYTES_V1: usize = 40;
const HEADER_BYTES: usize = 48;
const RECORD_HEADER: u64 = 16;
const MAGIC: &[u8; 8] = b"stateWAL";
/// 2: the header names the database it belongs to.
const FORMAT: u32 = 2;
/// The file grows in steps of this many zeroed bytes, synced once, so that appends within it
/// change no file metadata.
pub(super) const GROW_BYTES: u64 = 1024 * 1024;
/// Past this many bytes of records, the next commit checkpoints and the log starts over.
pub(super) const CHECKPOINT_BYTES: u64 = 8 * 1024 * 1024;
/// No batch is this large; a length beyond it is damage, not a record.
const MAX_RECORD: u64 = 1 << 32;

/// The log's file: positional reads and writes and a data sync. A trait so tests can put a
/// file under it that forgets what was written after the last sync, as a power cut does.
pub trait LogFile: Send + Sync + fmt::Debug {
    fn size(&self) -> io::Result<u64>;
    fn read_at(&self, offset: u64, out: &mut [u8]) -> io::Result<()>;
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;
    fn sync(&self) -> io::Result<()>;
    /// Writes `data` at `offset` and returns once it is on stable storage. Both are multiples
    /// of 512 bytes, so a file may send them to the device directly ([`direct::DirectLog`]).
    fn write_durably_at(&self, offset: u64, data: &[u8]) -> Result<(), DurableWriteError> {
        self.write_at(offset, data).map_err(DurableWriteError::NotWritten)?;
        self.sync().map_err(DurableWriteError::MaybeWritten)
    }
}

/// Why a durable write failed, and so whether its bytes may be on the disk.
#[derive(Debug)]
pub enum DurableWriteError {
    /// Refused before anything was written (a full disk refusing a buffered write).
    NotWritten(io::Error),
    /// Some or all of it may have reached the disk.
    MaybeWritten(io::Error),
}

impl LogFile for std::fs::File {
    fn size(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }

    fn read_at(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, out, offset)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(self, data, offset)
    }

    fn sync(&self) -> io::Result<()> {
        self.sync_data()
    }
}

/// Why a log cannot be used.
#[derive(Debug)]
pub(super) enum LogError {
    Io(io::Error),
    /// Damage that would lose acknowledged writes if ignored.
    Corrupt(String),
    /// An append was written but its sync failed, and it could not be erased: it may be on
    /// the disk, whole, and be replayed by the next open.
    MaybeWritten(io::Error),
}

impl From<io::Error> for LogError {
    fn from(error: io::Error) -> LogError {
        LogError::Io(error)
    }
}

/// One batch's changes, as logged.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Record {
    pub lsn: u64,
    pub payload: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Header {
    epoch: u64,
    salt: u64,
    first_lsn: u64,
    /// The identity of the database this log belongs to; `None` in a format 1 header, written
    /// before databases had one.
    store: Option<u64>,
}

/// What the header of a log found on disk says about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Found {
    pub epoch: u64,
    /// The database it belongs to (`None`: a log older than identities).
    pub store: Option<u64>,
}

/// Why the reading of a log's records stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tail {
    /// At a record never written, or the torn rest of one never acknowledged.
    Clean,
    /// At the end of a file shorter than the log ever made it: the file was cut, and records
    /// acknowledged past the cut are gone.
    CutShort { len: u64 },
    /// At damage in the middle of the log: `following` valid records of this epoch, written
    /// after the damaged one, were acknowledged and cannot be replayed in order.
    Damaged { offset: u64, following: u64 },
}

pub(super) struct Wal {
    file: Box<dyn LogFile>,
    /// For messages.
    path: PathBuf,
    header: Header,
    /// The slot the current header is in; the next header goes in the other.
    slot: usize,
    /// Where the next record goes.
    end: u64,
    /// The file's length: everything below it is allocated and written.
    len: u64,
    next_lsn: u64,
    /// An append or an erase failed: what is on disk past `end` is unknown, so nothing more is
    /// appended until the log starts over (a checkpoint).
    damaged: bool,
    /// The database every header written from now on names.
    store: u64,
    /// The header that was on disk when the log was opened, if any.
    found: Option<Found>,
    /// How the reading at open ended.
    tail: Tail,
}

impl fmt::Debug for Wal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wal")
            .field("path", &self.path)
            .field("end", &self.end)
            .field("next_lsn", &self.next_lsn)
            .finish()
    }
}

/// The log file of the database at `db`.
pub fn log_path(db: &Path) -> PathBuf {
    let mut name = db.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".wal");
    db.with_file_name(name)
}

impl Wal {
    /// Opens the log in `file` and reads its records, oldest first. A log that was never
    /// written (empty, or nothing but zeros) starts at `next_lsn`, naming the database `store`
    /// (as every header written from now on does). Whose log it is, and whether it was cut
    /// short, is for the caller to judge: see [`Wal::found`] and [`Wal::tail`].
    pub(super) fn open(
        file: Box<dyn LogFile>,
        path: &Path,
        next_lsn: u64,
        store: u64,
    ) -> Result<(Wal, Vec<Record>), LogError> {
        let len = file.size()?;
        let slots = HEADER_SLOTS.map(|at| read_header(&*file, at, len));
        let current = match (slots[0], slots[1]) {
            (Some(a), Some(b)) => Some(if b.epoch > a.epoch { (1, b) } else { (0, a) }),
            (Some(a), None) => Some((0, a)),
            (None, Some(b)) => Some((1, b)),
            (None, None) => None,
        };
        let Some((slot, header)) = current else {
            if !all_zero(&*file, 0, len)? {
                return Err(LogError::Corrupt(format!(
                    "{}: neither header of the write-ahead log is intact, and it holds data; it cannot be \
                     replayed safely. Move it aside only if the database itself is known to be complete",
                    path.display()
                )));
            }
            let wal = Wal {
                file,
                path: path.to_owned(),
                header: Header { epoch: 0, salt: 0, first_lsn: next_lsn, store: Some(store) },
                slot: 1,
                end: DATA_START,
                len,
                next_lsn,
                damaged: false,
                store,
                found: None,
                tail: Tail::Clean,
            };
            // No header yet: it is written by the first start over or append. A log found
            // missing and refused stays as it was found, never turned into a valid, empty log
            // that a second try would accept.
            return Ok((wal, Vec::new()));
        };
        let mut records = Vec::new();
        let mut at = DATA_START;
        let mut expected = header.first_lsn;
        let mut tail = Tail::Clean;
        loop {
            let (record, next) = match read_record(&*file, at, len, &header)? {
                Read::Record(record, next) => (record, next),
                Read::Nothing => break,
                // The file ends where the next record's slot should begin. A log of this format
                // always has room for a slot past its last record (see `append`), so someone cut
                // it; a log of the first format did not keep that room, and was cut only if it
                // ends inside a growth step.
                Read::PastEnd => {
                    if header.store.is_some() || len % GROW_BYTES != 0 {
                        tail = Tail::CutShort { len };
                    }
                    break;
                }
                // A record of the sequence number due whose payload the file's end cuts off
                // was cut. Anything else there is an older epoch's bytes (records started over
                // in place), whose length field means nothing.
                Read::RunsPastEnd { lsn } => {
                    if lsn == expected {
                        tail = Tail::CutShort { len };
                    }
                    break;
                }
            };
            if record.lsn != expected {
                return Err(LogError::Corrupt(format!(
                    "{}: the record at offset {at} has sequence number {} where {expected} belongs",
                    path.display(),
                    record.lsn
                )));
            }
            records.push(record);
            expected += 1;
            at = next;
        }
        // What stopped the reading: the torn tail of an unacknowledged append, or damage with
        // acknowledged records after it (counted, for whoever must decide to do without them).
        let mut probe = at + ALIGN;
        let mut following = 0u64;
        while probe + RECORD_HEADER <= len {
            match read_record(&*file, probe, len, &header)? {
                // Records the database already holds (at or below `next_lsn - 1`) need no replay.
                Read::Record(record, next) if record.lsn >= expected && record.lsn >= next_lsn => {
                    following += 1;
                    probe = next;
                }
                _ => probe += ALIGN,
            }
        }
        if following > 0 {
            tail = Tail::Damaged { offset: at, following };
        }
        let found = Some(Found { epoch: header.epoch, store: header.store });
        let wal = Wal {
            file,
            path: path.to_owned(),
            header,
            slot,
            end: at,
            len,
            next_lsn: expected,
            // Past damage nothing may be appended: the records after it would be read as its.
            damaged: matches!(tail, Tail::Damaged { .. }),
            store,
            found,
            tail,
        };
        Ok((wal, records))
    }

    /// The header found when the log was opened: `None` for a log that was missing, empty or
    /// never written.
    pub(super) fn found(&self) -> Option<Found> {
        self.found
    }

    /// How the reading of its records at open ended.
    pub(super) fn tail(&self) -> Tail {
        self.tail
    }

    /// The epoch the next [`Wal::start_over`] writes.
    pub(super) fn next_epoch(&self) -> u64 {
        self.header.epoch + 1
    }

    /// The sequence number the next record takes.
    pub(super) fn next_lsn(&self) -> u64 {
        self.next_lsn
    }

    /// Bytes of records since the log last started over.
    pub(super) fn used(&self) -> u64 {
        self.end - DATA_START
    }

    pub(super) fn is_damaged(&self) -> bool {
        self.damaged
    }

    /// Appends the next record and syncs it: once this returns, the batch survives a crash.
    pub(super) fn append(&mut self, payload: &[u8]) -> Result<u64, LogError> {
        if self.header.epoch == 0 {
            self.start_over(self.next_lsn)?;
        }
        if self.damaged {
            return Err(LogError::Io(io::Error::other(
                "an earlier write to the write-ahead log failed; it starts over at the next checkpoint",
            )));
        }
        let lsn = self.next_lsn;
        let length = u32::try_from(payload.len())
            .map_err(|_| LogError::Io(io::Error::other("a batch of 4 GiB or more cannot be logged")))?;
        let total = aligned(RECORD_HEADER + u64::from(length));
        let mut bytes = Vec::with_capacity(total as usize);
        bytes.extend_from_slice(&length.to_le_bytes());
        bytes.extend_from_slice(&checksum(&self.header, lsn, payload).to_le_bytes());
        bytes.extend_from_slice(&lsn.to_le_bytes());
        bytes.extend_from_slice(payload);
        bytes.resize(total as usize, 0);
        // A torn write leaves the record short of whole, and so never valid: its bytes past the
        // header are never completed by a later append at this offset, since the log takes none
        // until it starts over under a new salt.
        if super::failpoint::reached("torn-append") {
            // Half the record reaches the file, then the process dies.
            let _ =
                self.grow_to(self.end + total).and_then(|()| self.file.write_at(self.end, &bytes[..bytes.len() / 2]));
            std::process::abort();
        }
        // Room for one more slot always follows the last record, so the end of the file is
        // never where records stop, unless the file was cut (see `open`).
        if let Err(error) = self.grow_to(self.end + total + ALIGN) {
            self.damaged = true;
            return Err(LogError::Io(error));
        }
        match self.file.write_durably_at(self.end, &bytes) {
            Ok(()) => {}
            Err(DurableWriteError::NotWritten(error)) => {
                // Said to have written nothing; erased anyway, at no cost worth saving, in case a
                // file wrote part of it before failing. The write failed either way.
                let _ = self.erase_record_at(self.end);
                self.damaged = true;
                return Err(LogError::Io(error));
            }
            Err(DurableWriteError::MaybeWritten(error)) => {
                // Perhaps on the disk, whole: it must not be replayed.
                let erased = self.erase_record_at(self.end);
                self.damaged = true;
                return Err(match erased {
                    Ok(()) => LogError::Io(error),
                    Err(_) => LogError::MaybeWritten(error),
                });
            }
        }
        self.end += total;
        self.next_lsn += 1;
        Ok(lsn)
    }

    /// Zeroes the header of the record at `at` and syncs it: it is never replayed.
    fn erase_record_at(&self, at: u64) -> io::Result<()> {
        self.file.write_at(at, &[0u8; RECORD_HEADER as usize])?;
        self.file.sync()
    }

    /// Starts the log over: every record so far is in a durable commit of the database, and
    /// the next record takes `next_lsn`. The new header goes in the other slot, so a crash
    /// while it is written leaves the old one in charge (whose records are all applied).
    pub(super) fn start_over(&mut self, next_lsn: u64) -> Result<(), LogError> {
        let header =
            Header { epoch: self.header.epoch + 1, salt: random_salt(), first_lsn: next_lsn, store: Some(self.store) };
        let slot = 1 - self.slot;
        self.grow_to(DATA_START + ALIGN)?;
        if super::failpoint::reached("torn-header") {
            let _ = self.file.write_at(HEADER_SLOTS[slot], &encode_header(&header)[..HEADER_BYTES / 2]);
            std::process::abort();
        }
        // The new header may reach the disk even when its write or sync reports a failure:
        // appends under the old salt would then be unreadable after a crash, so none are made
        // until a start over succeeds.
        if let Err(error) =
            self.file.write_at(HEADER_SLOTS[slot], &encode_header(&header)).and_then(|()| self.file.sync())
        {
            self.damaged = true;
            return Err(LogError::Io(error));
        }
        self.header = header;
        self.slot = slot;
        self.end = DATA_START;
        self.next_lsn = next_lsn;
        self.damaged = false;
        Ok(())
    }

    /// Makes the file at least `needed` bytes long, in zeroed steps synced once, so appends
    /// below its end only overwrite allocated blocks.
    fn grow_to(&mut self, needed: u64) -> io::Result<()> {
        if needed <= self.len {
            return Ok(());
        }
        let new_len = needed.div_ceil(GROW_BYTES).max(1) * GROW_BYTES;
        let zeros = vec![0u8; 64 * 1024];
        let mut at = self.len;
        while at < new_len {
            let n = (new_len - at).min(zeros.len() as u64);
            self.file.write_at(at, &zeros[..n as usize])?;
            at += n;
        }
        self.file.sync()?;
        self.len = new_len;
        Ok(())
    }
}

fn aligned(n: u64) -> u64 {
    n.div_ceil(ALIGN) * ALIGN
}

fn checksum(header: &Header, lsn: u64, payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&header.salt.to_le_bytes());
    hasher.update(&header.epoch.to_le_bytes());
    if let Some(store) = header.store {
        hasher.update(&store.to_le_bytes());
    }
    hasher.update(&lsn.to_le_bytes());
    hasher.update(&(payload.len() as u64).to_le_bytes());
    hasher.update(payload);
    hasher.finalize()
}

/// Always the current format: a log is written in it from its first start over on.
fn encode_header(header: &Header) -> [u8; HEADER_BYTES] {
    let mut out = [0u8; HEADER_BYTES];
    out[..8].copy_from_slice(MAGIC);
    out[8..12].copy_from_slice(&FORMAT.to_le_bytes());
    out[12..20].copy_from_slice(&header.epoch.to_le_bytes());
    out[20..28].copy_from_slice(&header.salt.to_le_bytes());
    out[28..36].copy_from_slice(&header.first_lsn.to_le_bytes());
    out[36..44].copy_from_slice(&header.store.unwrap_or(0).to_le_bytes());
    let crc = crc32fast::hash(&out[..44]);
    out[44..48].copy_from_slice(&crc.to_le_bytes());
    out
}

/// A header of either format.
fn read_header(file: &dyn LogFile, at: u64, len: u64) -> Option<Header> {
    if at + HEADER_BYTES_V1 as u64 > len {
        return None;
    }
    let mut bytes = [0u8; HEADER_BYTES];
    let readable = (len - at).min(HEADER_BYTES as u64) as usize;
    file.read_at(at, &mut bytes[..readable]).ok()?;
    let u32_at = |at: usize| bytes.get(at..at + 4).and_then(|b| b.try_into().ok()).map(u32::from_le_bytes);
    let u64_at = |at: usize| bytes.get(at..at + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
    if &bytes[..8] != MAGIC {
        return None;
    }
    let store = match u32_at(8)? {
        1 if crc32fast::hash(&bytes[..36]) == u32_at(36)? => None,
        2 if readable == HEADER_BYTES && crc32fast::hash(&bytes[..44]) == u32_at(44)? => Some(u64_at(36)?),
        _ => return None,
    };
    Some(Header { epoch: u64_at(12)?, salt: u64_at(20)?, first_lsn: u64_at(28)?, store })
}

/// What is at an offset of the log.
enum Read {
    /// A valid record of this epoch, and where the next one starts.
    Record(Record, u64),
    /// No valid record.
    Nothing,
    /// The file ends where a record's header would be.
    PastEnd,
    /// A record header whose payload the file's end cuts off.
    RunsPastEnd { lsn: u64 },
}

/// The record at `at`, if a valid record of this epoch is there.
fn read_record(file: &dyn LogFile, at: u64, len: u64, header: &Header) -> io::Result<Read> {
    if at + RECORD_HEADER > len {
        return Ok(Read::PastEnd);
    }
    let mut head = [0u8; RECORD_HEADER as usize];
    file.read_at(at, &mut head)?;
    let length = u64::from(u32::from_le_bytes([head[0], head[1], head[2], head[3]]));
    let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    let lsn = u64::from_le_bytes([head[8], head[9], head[10], head[11], head[12], head[13], head[14], head[15]]);
    if length == 0 && crc == 0 || length >= MAX_RECORD {
        return Ok(Read::Nothing);
    }
    if at + RECORD_HEADER + length > len {
        return Ok(Read::RunsPastEnd { lsn });
    }
    let mut payload = vec![0u8; length as usize];
    file.read_at(at + RECORD_HEADER, &mut payload)?;
    if checksum(header, lsn, &payload) != crc {
        return Ok(Read::Nothing);
    }
    Ok(Read::Record(Record { lsn, payload }, at + aligned(RECORD_HEADER + length)))
}

fn all_zero(file: &dyn LogFile, from: u64, to: u64) -> io::Result<bool> {
    let mut buffer = vec![0u8; 64 * 1024];
    let mut at = from;
    while at < to {
        let n = (to - at).min(buffer.len() as u64) as usize;
        file.read_at(at, &mut buffer[..n])?;
        if buffer[..n].iter().any(|b| *b != 0) {
            return Ok(false);
        }
        at += n as u64;
    }
    Ok(true)
}

/// A new database's identity: random, and never 0 (which a header without one would read as).
pub(super) fn new_store_id() -> u64 {
    random_salt().max(1)
}

/// A salt no client can guess: the operating system's randomness, or failing that the
/// process's randomly keyed hasher.
fn random_salt() -> u64 {
    let mut bytes = [0u8; 8];
    let from_os = std::fs::File::open("/dev/urandom").and_then(|f| io::Read::read_exact(&mut &f, &mut bytes));
    match from_os {
        Ok(()) => u64::from_le_bytes(bytes),
        Err(_) => {
            use std::hash::BuildHasher;
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            std::collections::hash_map::RandomState::new().hash_one((now.as_nanos(), std::process::id()))
        }
    }
}

pub(super) mod direct;

#[cfg(test)]
mod tests;
