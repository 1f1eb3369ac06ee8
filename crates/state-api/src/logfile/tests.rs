use std::io::Write;

use super::*;

#[test]
fn the_log_rotates_at_its_cap() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb.owner.log");
    let mut log = CappedLog::open(&path, 1024).unwrap();
    let line = [b'x'; 100];
    for _ in 0..25 {
        log.write_all(&line).unwrap();
    }
    let current = std::fs::metadata(&path).unwrap().len();
    let previous = std::fs::metadata(dir.path().join("s.redb.owner.log.1")).unwrap().len();
    assert!(current <= 1024 && previous <= 1024, "{current} {previous}");
    assert_eq!((current + previous) % 100, 0, "lines are never split across files");
    assert_eq!(owner_log_path(Path::new("/x/s.redb")), Path::new("/x/s.redb.owner.log"));
}

#[test]
fn a_link_planted_in_the_logs_place_is_not_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb.owner.log");
    let target = dir.path().join("someone-elses");
    std::fs::write(&target, b"theirs").unwrap();
    std::os::unix::fs::symlink(&target, &path).unwrap();
    let error = CappedLog::open(&path, 1024).err().expect("a link is refused");
    assert!(error.to_string().contains("symbolic link"), "{error}");
    assert_eq!(std::fs::read(&target).unwrap(), b"theirs");
}
