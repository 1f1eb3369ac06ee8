use std::sync::{Arc, Mutex};

use super::*;

/// A log file in memory; clones share the bytes, as reopening a file does.
#[derive(Debug, Clone, Default)]
struct Bytes(Arc<Mutex<Vec<u8>>>);

impl Bytes {
    fn snapshot(&self) -> Vec<u8> {
        self.0.lock().unwrap().clone()
    }

    fn with(bytes: Vec<u8>) -> Bytes {
        Bytes(Arc::new(Mutex::new(bytes)))
    }
}

impl LogFile for Bytes {
    fn size(&self) -> io::Result<u64> {
        Ok(self.0.lock().unwrap().len() as u64)
    }
    fn read_at(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let bytes = self.0.lock().unwrap();
        let end = offset as usize + out.len();
        let Some(source) = bytes.get(offset as usize..end) else {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        };
        out.copy_from_slice(source);
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut bytes = self.0.lock().unwrap();
        let end = offset as usize + data.len();
        if bytes.len() < end {
            bytes.resize(end, 0);
        }
        bytes[offset as usize..end].copy_from_slice(data);
        Ok(())
    }
    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
}

fn open(file: &Bytes) -> Result<(Wal, Vec<Record>), LogError> {
    Wal::open(Box::new(file.clone()), Path::new("test.wal"), 1, STORE)
}

/// The identity of the database the logs in these tests belong to.
const STORE: u64 = 0x5eed;

fn payload(i: u64) -> Vec<u8> {
    format!("batch {i} {}", "x".repeat((i as usize * 37) % 700)).into_bytes()
}

#[test]
fn records_come_back_in_order_and_the_log_goes_on_after_them() {
    let file = Bytes::default();
    let (mut wal, records) = open(&file).unwrap();
    assert!(records.is_empty());
    for i in 1..=20 {
        assert_eq!(wal.append(&payload(i)).unwrap(), i);
    }
    let (mut wal, records) = open(&file).unwrap();
    assert_eq!(records.iter().map(|r| r.lsn).collect::<Vec<_>>(), (1..=20).collect::<Vec<_>>());
    assert!(records.iter().all(|r| r.payload == payload(r.lsn)));
    assert_eq!(wal.append(b"next").unwrap(), 21);
    assert_eq!(open(&file).unwrap().1.len(), 21);
}

#[test]
fn a_log_started_over_forgets_what_came_before_in_the_same_blocks() {
    let file = Bytes::default();
    let (mut wal, _) = open(&file).unwrap();
    for i in 1..=10 {
        wal.append(&payload(i)).unwrap();
    }
    wal.start_over(11).unwrap();
    wal.append(b"short").unwrap();
    let (_, records) = open(&file).unwrap();
    assert_eq!(records, vec![Record { lsn: 11, payload: b"short".to_vec() }], "older records are stale");
    // The next start over writes the other header slot; either surviving alone still works.
    let (mut wal, _) = open(&file).unwrap();
    wal.start_over(12).unwrap();
    let (_, records) = open(&file).unwrap();
    assert!(records.is_empty());
}

#[test]
fn a_tail_cut_at_any_byte_opens_with_every_whole_record_before_it() {
    let file = Bytes::default();
    let (mut wal, _) = open(&file).unwrap();
    for i in 1..=3 {
        wal.append(&payload(i)).unwrap();
    }
    let before_last = wal.end;
    wal.append(&payload(4)).unwrap();
    let full = file.snapshot();
    // The append of record 4 was cut short at every byte: what reached the disk is a prefix of
    // it, the rest of its blocks still zero.
    let record_end = before_last + RECORD_HEADER + payload(4).len() as u64;
    for cut in before_last..record_end {
        let mut bytes = full.clone();
        bytes[cut as usize..wal.end as usize].fill(0);
        let (_, records) = open(&Bytes::with(bytes)).unwrap_or_else(|_| panic!("cut at {cut} refused"));
        let lsns: Vec<u64> = records.iter().map(|r| r.lsn).collect();
        assert_eq!(lsns, vec![1, 2, 3], "cut at {cut}");
    }
    // A torn append over blocks holding an older epoch's records reads those as stale too.
    let (mut wal, _) = open(&file).unwrap();
    wal.start_over(5).unwrap();
    wal.append(b"one").unwrap();
    let start = wal.end;
    wal.append(&payload(9)).unwrap();
    let reused = file.snapshot();
    for cut in start..start + RECORD_HEADER + payload(9).len() as u64 {
        let mut bytes = reused.clone();
        bytes[cut as usize..wal.end as usize].copy_from_slice(&full[cut as usize..wal.end as usize]);
        let (_, records) = open(&Bytes::with(bytes)).unwrap_or_else(|_| panic!("cut at {cut} refused"));
        assert_eq!(records.iter().map(|r| r.lsn).collect::<Vec<_>>(), vec![5], "cut at {cut}");
    }
}

#[test]
fn damage_before_acknowledged_records_is_told_with_the_offset_and_what_follows() {
    let file = Bytes::default();
    let (mut wal, _) = open(&file).unwrap();
    let mut starts = Vec::new();
    for i in 1..=5 {
        starts.push(wal.end);
        wal.append(&payload(i)).unwrap();
    }
    let mut bytes = file.snapshot();
    let damaged = starts[2] as usize + 20;
    bytes[damaged] ^= 0x40;
    let (mut wal, records) = open(&Bytes::with(bytes.clone())).unwrap();
    assert_eq!(records.iter().map(|r| r.lsn).collect::<Vec<_>>(), [1, 2], "the records before the damage");
    assert_eq!(wal.tail(), Tail::Damaged { offset: starts[2], following: 2 });
    assert!(wal.append(b"after").is_err(), "nothing is appended past damage");
    // Damage among records the database already holds costs nothing.
    let (wal, _) = Wal::open(Box::new(Bytes::with(bytes)), Path::new("test.wal"), 6, STORE).unwrap();
    assert_eq!(wal.tail(), Tail::Clean);
}

#[test]
fn a_torn_header_leaves_the_other_in_charge() {
    let file = Bytes::default();
    let (mut wal, _) = open(&file).unwrap();
    wal.append(b"first epoch").unwrap();
    let before = file.snapshot();
    wal.start_over(2).unwrap();
    let after = file.snapshot();
    // The new header was being written when the power went: any prefix of it reached the disk.
    let slot = HEADER_SLOTS[wal.slot] as usize;
    for cut in 0..HEADER_BYTES {
        let mut bytes = after.clone();
        bytes[slot + cut..slot + HEADER_BYTES].copy_from_slice(&before[slot + cut..slot + HEADER_BYTES]);
        // Whole when the bytes not yet written happen to equal the old ones (a random salt's
        // last bytes can match, 1 in 256 per byte).
        let whole = bytes[slot..slot + HEADER_BYTES] == after[slot..slot + HEADER_BYTES];
        let (wal, records) = open(&Bytes::with(bytes)).unwrap();
        assert!(whole || records.len() == 1, "cut {cut}: the old header and its record");
        assert!(whole || wal.next_lsn() == 2);
    }
}

#[test]
fn a_log_with_data_but_no_intact_header_is_refused_and_a_zeroed_one_is_new() {
    let file = Bytes::default();
    let (mut wal, _) = open(&file).unwrap();
    wal.append(b"acknowledged").unwrap();
    let mut bytes = file.snapshot();
    bytes[..1024].fill(0xff);
    assert!(matches!(open(&Bytes::with(bytes)), Err(LogError::Corrupt(_))));
    let (wal, records) = open(&Bytes::with(vec![0; 8192])).unwrap();
    assert!(records.is_empty() && wal.next_lsn() == 1);
}

#[test]
fn client_bytes_shaped_like_a_record_are_not_taken_for_one() {
    // A value written by a client lands in a record's payload; after the log starts over, the
    // old payload sits in blocks past the new records. Shaped as a record of the new epoch with
    // the next sequence number (but without the salt), it must be neither replayed nor read as
    // damage.
    let file = Bytes::default();
    let (mut wal, _) = open(&file).unwrap();
    wal.start_over(1).unwrap();
    let epoch = wal.header.epoch + 1;
    let forged_header = Header { epoch, salt: 0, first_lsn: 2, store: Some(STORE) };
    let forged_payload = b"put \x01admin-token".to_vec();
    let mut forged = Vec::new();
    forged.extend_from_slice(&(forged_payload.len() as u32).to_le_bytes());
    forged.extend_from_slice(&checksum(&forged_header, 3, &forged_payload).to_le_bytes());
    forged.extend_from_slice(&3u64.to_le_bytes());
    forged.extend_from_slice(&forged_payload);
    let mut value = vec![b' '; ALIGN as usize - 16 - 4];
    value.extend_from_slice(&forged);
    wal.append(&value).unwrap();
    wal.start_over(2).unwrap();
    wal.append(b"x").unwrap();
    let (_, records) = open(&file).unwrap();
    assert_eq!(records.len(), 1);
}

/// The real file: records written past the page cache come back through it, across start
/// overs (whose headers are buffered).
/// CI's disk takes direct writes (`STATE_REQUIRE_DIRECT_IO`), so there the direct path is the
/// one proven, not the fallback.
#[test]
fn a_log_on_disk_written_directly_reads_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("direct.wal");
    let direct = round_trip_on_disk(&path, || direct::DirectLog::open(&path).unwrap());
    if std::env::var_os("STATE_REQUIRE_DIRECT_IO").is_some() {
        assert!(direct, "{} takes no direct writes here", dir.path().display());
    }
}

/// A record larger than a piece goes to the disk piece by piece, each aligned.
#[test]
fn a_record_written_in_pieces_reads_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pieces.wal");
    round_trip_on_disk(&path, || direct::DirectLog::with_pieces_of(&path, 512).unwrap());
}

/// Where the filesystem takes no direct I/O (older tmpfs), the same file goes on buffered.
#[test]
fn a_log_without_direct_io_reads_back_whole_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("buffered.wal");
    assert!(!round_trip_on_disk(&path, || direct::DirectLog::buffered_only(&path).unwrap()));
}

/// Appends, reopens, starts over, each time through a file from `open_file`; returns
/// whether that file wrote its records directly.
fn round_trip_on_disk(path: &Path, open_file: impl Fn() -> direct::DirectLog) -> bool {
    let boxed = || Box::new(open_file()) as Box<dyn LogFile>;
    let (mut wal, records) = Wal::open(boxed(), path, 1, STORE).unwrap();
    assert!(records.is_empty());
    for i in 1..=300 {
        assert_eq!(wal.append(&payload(i)).unwrap(), i);
    }
    let (mut wal, records) = Wal::open(boxed(), path, 1, STORE).unwrap();
    assert_eq!(records.len(), 300);
    assert!(records.iter().all(|r| r.payload == payload(r.lsn)), "every record byte for byte");

    wal.start_over(301).unwrap();
    wal.append(b"kept").unwrap();
    wal.append(b"after").unwrap();
    let (_, records) = Wal::open(boxed(), path, 1, STORE).unwrap();
    assert_eq!(
        records,
        vec![Record { lsn: 301, payload: b"kept".to_vec() }, Record { lsn: 302, payload: b"after".to_vec() }]
    );
    open_file().is_direct()
}

#[test]
fn a_header_names_its_database_and_a_log_from_before_identities_still_reads() {
    let file = Bytes::default();
    let (mut wal, _) = open(&file).unwrap();
    wal.append(b"one").unwrap();
    let (wal, records) = open(&file).unwrap();
    assert_eq!(wal.found(), Some(Found { epoch: 1, store: Some(STORE) }));
    assert_eq!(records.len(), 1);

    // A format 1 header (40 bytes, no identity) and a record checksummed as format 1 did.
    let old = Header { epoch: 7, salt: 99, first_lsn: 5, store: None };
    let mut header = [0u8; HEADER_BYTES_V1];
    header[..8].copy_from_slice(MAGIC);
    header[8..12].copy_from_slice(&1u32.to_le_bytes());
    header[12..20].copy_from_slice(&old.epoch.to_le_bytes());
    header[20..28].copy_from_slice(&old.salt.to_le_bytes());
    header[28..36].copy_from_slice(&old.first_lsn.to_le_bytes());
    let crc = crc32fast::hash(&header[..36]);
    header[36..40].copy_from_slice(&crc.to_le_bytes());
    let mut bytes = vec![0u8; GROW_BYTES as usize];
    bytes[..HEADER_BYTES_V1].copy_from_slice(&header);
    let payload = b"from an older version";
    let mut record = Vec::new();
    record.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    record.extend_from_slice(&checksum(&old, 5, payload).to_le_bytes());
    record.extend_from_slice(&5u64.to_le_bytes());
    record.extend_from_slice(payload);
    bytes[DATA_START as usize..DATA_START as usize + record.len()].copy_from_slice(&record);
    let (wal, records) = open(&Bytes::with(bytes)).unwrap();
    assert_eq!(wal.found(), Some(Found { epoch: 7, store: None }));
    assert_eq!(records, vec![Record { lsn: 5, payload: payload.to_vec() }]);
    assert_eq!(wal.tail(), Tail::Clean);
}

#[test]
fn a_file_cut_inside_its_records_is_told_from_a_torn_append() {
    let file = Bytes::default();
    let (mut wal, _) = open(&file).unwrap();
    let mut starts = Vec::new();
    for i in 1..=6 {
        starts.push(wal.end);
        wal.append(&payload(i)).unwrap();
    }
    let full = file.snapshot();
    assert_eq!(full.len() as u64 % GROW_BYTES, 0, "the log grows in whole steps");
    assert_eq!(open(&file).unwrap().0.tail(), Tail::Clean);
    // Cut inside record 4, and exactly at its start: records 4 to 6 are gone with the cut.
    for cut in [starts[3] as usize + 20, starts[3] as usize] {
        let (wal, records) = open(&Bytes::with(full[..cut].to_vec())).unwrap();
        assert_eq!(records.len(), 3);
        assert_eq!(wal.tail(), Tail::CutShort { len: cut as u64 }, "cut at {cut}");
    }
    // Cut right after the last record: every record is there, but the zeroed slot that always
    // follows the last one is not, so the file was cut (a record may have followed).
    let (wal, records) = open(&Bytes::with(full[..wal.end as usize].to_vec())).unwrap();
    assert_eq!(records.len(), 6);
    assert_eq!(wal.tail(), Tail::CutShort { len: wal.end });
    // A crash while the file grew leaves zeros where the next record goes: not a cut.
    let mut grown = full.clone();
    grown.extend_from_slice(&[0u8; 64 * 1024]);
    assert_eq!(open(&Bytes::with(grown)).unwrap().0.tail(), Tail::Clean);
}
