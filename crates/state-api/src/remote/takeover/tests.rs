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

/// The holder note an owner with `pid`, started at `started`, writes beside `s.redb`.
fn note_naming(dir: &std::path::Path, pid: u32, started: Option<u64>) {
    let note = serde_json::json!({
        "pid": pid, "program": "t", "since": "2026-11-26T00:00:00Z", "role": "owner", "started": started,
    });
    std::fs::write(dir.join("s.redb.holder"), note.to_string()).unwrap();
}

async fn a_stopped_process_is_asked_to_stop_and_does<H: Hold>() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = stopped_child();
    note_naming(dir.path(), child.id(), state_os::process::started(child.id()));
    let (ours, _theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let ended = end_through::<H>(&dir.path().join("s.redb"), child.id(), ours.as_fd()).await;
    assert_eq!(ended, Ok(Ended::Stopped));
    let status = child.wait().unwrap();
    assert!(!status.success(), "it ended on SIGTERM: {status:?}");
}

#[tokio::test]
async fn a_stopped_process_is_asked_to_stop_and_does_through_this_systems_hold() {
    a_stopped_process_is_asked_to_stop_and_does::<state_os::hold::Native>().await;
}

/// macOS's way, run here too.
#[tokio::test]
async fn a_stopped_process_is_asked_to_stop_and_does_by_its_start_time() {
    a_stopped_process_is_asked_to_stop_and_does::<state_os::hold::ByStartTime>().await;
}

/// One that ignores SIGTERM is killed, by either kind of hold.
async fn a_process_deaf_to_sigterm_is_killed<H: Hold>() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new("sh")
        .args(["-c", "trap '' TERM; while :; do sleep 1; done"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The shell has set its trap once it runs its loop's first sleep.
    std::thread::sleep(std::time::Duration::from_millis(300));
    note_naming(dir.path(), child.id(), state_os::process::started(child.id()));
    let (ours, _theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let ended = end_through::<H>(&dir.path().join("s.redb"), child.id(), ours.as_fd()).await;
    assert_eq!(ended, Ok(Ended::Killed));
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(child.wait().unwrap().signal(), Some(9));
}

#[tokio::test]
async fn a_process_deaf_to_sigterm_is_killed_through_this_systems_hold() {
    a_process_deaf_to_sigterm_is_killed::<state_os::hold::Native>().await;
}

#[tokio::test]
async fn a_process_deaf_to_sigterm_is_killed_by_its_start_time() {
    a_process_deaf_to_sigterm_is_killed::<state_os::hold::ByStartTime>().await;
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

/// The probe's case (issue 30): the pid the connection reported now belongs to another
/// process. Without a note that names the listener by pid and start time, nothing is signalled.
#[tokio::test]
async fn a_process_that_may_have_reused_the_pid_is_never_signalled() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.redb");
    let mut child = stopped_child();
    let (ours, _theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    // No note at all.
    let refused = end_hung_owner(&db, child.id(), ours.as_fd()).await.unwrap_err();
    assert!(refused.contains("no live holder note") && refused.contains("left alone"), "{refused}");
    // A note naming the pid, but a process that started at another time: the owner it
    // described is gone, and this one only has its pid.
    let started = state_os::process::started(child.id()).unwrap();
    note_naming(dir.path(), child.id(), Some(started + 7));
    assert!(end_hung_owner(&db, child.id(), ours.as_fd()).await.is_err());
    // A note from before notes said when their process started.
    note_naming(dir.path(), child.id(), None);
    let refused = end_hung_owner(&db, child.id(), ours.as_fd()).await.unwrap_err();
    assert!(refused.contains("not when it started"), "{refused}");
    assert!(child.try_wait().unwrap().is_none(), "it was never signalled");
    child.kill().unwrap();
    child.wait().unwrap();
}
