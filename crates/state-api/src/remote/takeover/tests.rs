#![allow(clippy::unwrap_used)]

use std::os::fd::AsFd;
use std::process::{Command, Stdio};

use super::*;

fn stopped_child() -> std::process::Child {
    let child = Command::new("sleep").arg("100").stdin(Stdio::null()).spawn().unwrap();
    let status = Command::new("kill").args(["-STOP", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    child
}

#[tokio::test]
async fn a_stopped_process_is_asked_to_stop_and_does() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = stopped_child();
    let (ours, _theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let ended = end_hung_owner(&dir.path().join("s.redb"), child.id(), ours.as_fd()).await;
    assert_eq!(ended, Ok(Ended::Stopped));
    let status = child.wait().unwrap();
    assert!(!status.success(), "it ended on SIGTERM: {status:?}");
}

#[tokio::test]
async fn a_process_the_holder_note_does_not_name_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.redb");
    // The database's holder is another (live) process: this process itself.
    let note = format!(
        r#"{{"pid": {}, "program": "t", "since": "2026-11-26T00:00:00Z", "role": "owner"}}"#,
        std::process::id()
    );
    std::fs::write(dir.path().join("s.redb.holder"), note).unwrap();
    let mut child = stopped_child();
    let (ours, _theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let refused = end_hung_owner(&db, child.id(), ours.as_fd()).await.unwrap_err();
    assert!(refused.contains("left alone"), "{refused}");
    assert!(child.try_wait().unwrap().is_none(), "it was not signalled");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_connection_whose_peer_closed_is_seen_as_hung_up() {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    assert!(!peer_hung_up(ours.as_fd()));
    drop(theirs);
    assert!(peer_hung_up(ours.as_fd()));
}
