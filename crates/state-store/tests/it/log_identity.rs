//! The write-ahead log belongs to one database, found by any of its names. A child process
//! (this test binary, re-run on one test) opens a database by the name it is given, writes,
//! prints each write acknowledged and aborts, as a SIGKILL would end it: the writes are then
//! only in the log. The parent opens the database by another name, or after doing to the log
//! what an attacker or a careless user did, and must either find every acknowledged write or
//! refuse to open, saying why and what to do. Never open with the writes silently gone.

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use serde_json::json;
use state_core::ops::kv::GetRequest;
use state_store::{Engine, EngineConfig, OpenError, RedbBackend, SystemClock};

use crate::support::set_req;

fn engine_on(backend: RedbBackend) -> Engine {
    Engine::new(Arc::new(backend), Arc::new(SystemClock), EngineConfig::default()).unwrap()
}

fn value_of(engine: &Engine, key: &str) -> Option<serde_json::Value> {
    let request = GetRequest { key: key.to_owned(), version: None, revision: None };
    tokio::runtime::Handle::current().block_on(engine.get(request)).unwrap().value
}

fn log_of(db: &Path) -> PathBuf {
    state_store::backend::redb::wal::log_path(db)
}

/// The child: opens `LOGID_DB`, writes `LOGID_KEYS` keys named `LOGID_PREFIX<n>`, printing
/// each acknowledged one, and aborts without closing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_writes_then_dies() {
    let (Ok(db), Ok(count), Ok(prefix)) =
        (std::env::var("LOGID_DB"), std::env::var("LOGID_KEYS"), std::env::var("LOGID_PREFIX"))
    else {
        return;
    };
    let backend = RedbBackend::open(Path::new(&db)).unwrap_or_else(|e| panic!("child open: {e}"));
    if let Ok(bytes) = std::env::var("LOGID_CHECKPOINT_BYTES") {
        backend.set_checkpoint_bytes(bytes.parse().unwrap());
    }
    let engine = engine_on(backend);
    for n in 0..count.parse::<u64>().unwrap() {
        engine.set(set_req(&format!("{prefix}{n}"), json!(n), None)).await.unwrap();
        println!("ack {prefix}{n}");
    }
    std::process::abort();
}

/// Runs the child on `db` and returns the keys it saw acknowledged before it died.
fn crash_after_writing(db: &Path, prefix: &str, keys: u64, checkpoint_bytes: Option<u64>) -> Vec<String> {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", "log_identity::child_writes_then_dies", "--nocapture"])
        .env("LOGID_DB", db)
        .env("LOGID_KEYS", keys.to_string())
        .env("LOGID_PREFIX", prefix)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(bytes) = checkpoint_bytes {
        command.env("LOGID_CHECKPOINT_BYTES", bytes.to_string());
    }
    let mut child = command.spawn().unwrap();
    let acknowledged: Vec<String> = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .filter_map(|line| line.strip_prefix("ack ").map(str::to_owned))
        .collect();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(6), "the child died as planned: {status}");
    assert_eq!(acknowledged.len() as u64, keys, "every write was acknowledged before the crash");
    acknowledged
}

fn refusal(db: &Path) -> String {
    match RedbBackend::open(db) {
        Ok(_) => panic!("{} opened", db.display()),
        Err(error) => error.to_string(),
    }
}

fn assert_all_there(db: &Path, keys: &[String]) {
    let engine = engine_on(RedbBackend::open(db).unwrap_or_else(|e| panic!("open {}: {e}", db.display())));
    for (n, key) in keys.iter().enumerate() {
        assert_eq!(value_of(&engine, key), Some(json!(n)), "acknowledged {key} lost opening {}", db.display());
    }
    tokio::runtime::Handle::current().block_on(engine.close());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_made_through_a_symbolic_link_survive_a_crash_under_either_name() {
    if std::env::var_os("LOGID_DB").is_some() {
        return;
    }
    tokio::task::block_in_place(|| {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.redb");
        let link = dir.path().join("link.redb");
        // The link is made before the database: the first open creates the file it names.
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let first = crash_after_writing(&link, "a", 3, None);
        assert!(real.is_file() && log_of(&real).is_file() && !log_of(&link).exists(), "one log, by the real name");
        assert_all_there(&real, &first);
        let second = crash_after_writing(&real, "b", 3, None);
        assert_all_there(&link, &first);
        assert_all_there(&link, &second);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_with_two_names_is_refused_by_name_before_anything_is_written() {
    if std::env::var_os("LOGID_DB").is_some() {
        return;
    }
    tokio::task::block_in_place(|| {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.redb");
        let keys = crash_after_writing(&real, "k", 3, None);
        let hard = dir.path().join("hard.redb");
        std::fs::hard_link(&real, &hard).unwrap();
        for name in [&hard, &real] {
            let error = refusal(name);
            assert!(error.contains("2 names (hard links)") && error.contains("-samefile"), "{error}");
        }
        assert!(!log_of(&hard).exists(), "nothing was made for the second name");
        std::fs::remove_file(&hard).unwrap();
        assert_all_there(&real, &keys);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swapped_logs_are_refused_and_each_database_gets_its_own_back() {
    if std::env::var_os("LOGID_DB").is_some() {
        return;
    }
    tokio::task::block_in_place(|| {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.redb"), dir.path().join("b.redb"));
        let in_a = crash_after_writing(&a, "a", 3, None);
        let in_b = crash_after_writing(&b, "b", 3, None);
        let parked = dir.path().join("parked");
        std::fs::rename(log_of(&a), &parked).unwrap();
        std::fs::rename(log_of(&b), log_of(&a)).unwrap();
        std::fs::rename(&parked, log_of(&b)).unwrap();
        for db in [&a, &b] {
            let error = refusal(db);
            assert!(error.contains("belongs to another database") && error.contains("statectl recover"), "{error}");
        }
        std::fs::rename(log_of(&a), &parked).unwrap();
        std::fs::rename(log_of(&b), log_of(&a)).unwrap();
        std::fs::rename(&parked, log_of(&b)).unwrap();
        assert_all_there(&a, &in_a);
        assert_all_there(&b, &in_b);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_deleted_or_cut_after_a_crash_is_refused_and_recover_opens_with_what_is_left() {
    if std::env::var_os("LOGID_DB").is_some() {
        return;
    }
    tokio::task::block_in_place(|| {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.redb");
        let keys = crash_after_writing(&db, "k", 20, None);
        let saved = std::fs::read(log_of(&db)).unwrap();

        std::fs::remove_file(log_of(&db)).unwrap();
        let error = refusal(&db);
        assert!(error.contains("not closed cleanly") && error.contains("missing or empty"), "{error}");
        assert!(error.contains(&format!("put it at {}", log_of(&db).display())), "{error}");
        // An empty file in its place is no better.
        std::fs::write(log_of(&db), b"").unwrap();
        assert!(refusal(&db).contains("missing or empty"));

        // Cut inside its records: the writes past the cut are gone.
        std::fs::write(log_of(&db), &saved[..4096 + 512 * 10 + 100]).unwrap();
        let error = refusal(&db);
        assert!(error.contains("cut short"), "{error}");

        // The whole log back: every write.
        std::fs::write(log_of(&db), &saved).unwrap();
        assert_all_there(&db, &keys);

        // Lost for good: recover opens with what the database and the log's remains hold.
        let lost = crash_after_writing(&db, "lost", 5, None);
        std::fs::remove_file(log_of(&db)).unwrap();
        assert!(refusal(&db).contains("missing or empty"));
        let recovered = engine_on(RedbBackend::open_accepting_log_loss(&db).unwrap());
        assert_eq!(value_of(&recovered, &keys[19]), Some(json!(19)), "what was checkpointed is there");
        assert_eq!(value_of(&recovered, &lost[0]), None, "what only the log held is not");
        tokio::runtime::Handle::current().block_on(recovered.close());
        // And the database is whole again: it opens on its own from now on.
        assert_all_there(&db, &keys);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_copy_of_the_log_put_back_is_refused() {
    if std::env::var_os("LOGID_DB").is_some() {
        return;
    }
    tokio::task::block_in_place(|| {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.redb");
        let first = crash_after_writing(&db, "a", 3, None);
        let old_copy = std::fs::read(log_of(&db)).unwrap();
        assert_all_there(&db, &first);
        // Enough writes with a small checkpoint size that the log starts over more than once.
        let second = crash_after_writing(&db, "b", 40, Some(2048));
        let current = std::fs::read(log_of(&db)).unwrap();
        std::fs::write(log_of(&db), &old_copy).unwrap();
        let error = refusal(&db);
        assert!(error.contains("older copy"), "{error}");
        std::fs::write(log_of(&db), &current).unwrap();
        assert_all_there(&db, &second);
    });
}

/// The child for crashes while a store opens: opens `LOGID_OPEN` with a failpoint armed.
#[test]
fn child_opens_and_dies() {
    let Ok(db) = std::env::var("LOGID_OPEN") else { return };
    let opened = RedbBackend::open(Path::new(&db));
    panic!("the failpoint did not fire: {:?}", opened.map(|_| ()));
}

/// Opens `db` in a child that aborts at `point`; returns once it died there.
fn crash_while_opening(db: &Path, point: &str) {
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "log_identity::child_opens_and_dies", "--nocapture"])
        .env("LOGID_OPEN", db)
        .env("STATE_FAILPOINT", format!("{point}:1"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.signal(), Some(6), "the child died at {point}: {status}");
}

/// The review's case: an open whose log held nothing of this database's committed that the
/// store needs its log before the log had a header, so a crash there (or a full disk) left a
/// store that would never open again. A new database, and a log deleted after a clean close.
#[test]
fn a_crash_while_a_store_opens_never_leaves_it_refusing_itself() {
    if std::env::var_os("LOGID_OPEN").is_some() || std::env::var_os("LOGID_DB").is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("new.redb");
    crash_while_opening(&db, "opened-durable");
    drop(RedbBackend::open(&db).unwrap_or_else(|e| panic!("a new store after a crash while opening: {e}")));

    let db = dir.path().join("closed.redb");
    drop(RedbBackend::open(&db).unwrap());
    std::fs::remove_file(log_of(&db)).unwrap();
    crash_while_opening(&db, "opened-durable");
    drop(RedbBackend::open(&db).unwrap_or_else(|e| panic!("a closed store after a crash while opening: {e}")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_clean_close_the_log_is_not_needed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.redb");
    let engine = engine_on(RedbBackend::open(&db).unwrap());
    engine.set(set_req("kept", json!(1), None)).await.unwrap();
    engine.close().await;
    drop(engine);
    std::fs::remove_file(log_of(&db)).unwrap();
    let engine = engine_on(RedbBackend::open(&db).unwrap());
    let request = GetRequest { key: "kept".into(), version: None, revision: None };
    assert_eq!(engine.get(request).await.unwrap().value, Some(json!(1)));
}

#[test]
fn links_and_other_users_files_planted_beside_a_database_are_not_used() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.redb");
    let secret = dir.path().join("elsewhere");
    std::fs::write(&secret, b"not a log").unwrap();
    std::os::unix::fs::symlink(&secret, log_of(&db)).unwrap();
    let error = refusal(&db);
    assert!(error.contains("symbolic link"), "{error}");
    assert_eq!(std::fs::read(&secret).unwrap(), b"not a log", "nothing written through the link");
    std::fs::remove_file(log_of(&db)).unwrap();

    // A note's temporary file planted as a link is never written through either.
    let tmp = db.with_extension(format!("redb.holder.{}.tmp", std::process::id()));
    std::os::unix::fs::symlink(&secret, &tmp).unwrap();
    drop(RedbBackend::open(&db).unwrap());
    assert_eq!(std::fs::read(&secret).unwrap(), b"not a log");

    // Another user's files: only root can make one here, as CI runs.
    if rustix::process::geteuid().is_root() {
        // A link another user planted where a database is to be is not followed.
        let planted = dir.path().join("planted.redb");
        std::os::unix::fs::symlink(dir.path().join("theirs-target.redb"), &planted).unwrap();
        std::os::unix::fs::lchown(&planted, Some(65534), Some(65534)).unwrap();
        let error = refusal(&planted);
        assert!(error.contains("symbolic link made by uid 65534"), "{error}");
        assert!(!dir.path().join("theirs-target.redb").exists(), "nothing made where it points");

        let theirs = dir.path().join("theirs.redb");
        std::fs::write(log_of(&theirs), vec![0u8; 8192]).unwrap();
        std::os::unix::fs::chown(log_of(&theirs), Some(65534), Some(65534)).unwrap();
        let error = refusal(&theirs);
        assert!(error.contains("belongs to uid 65534"), "{error}");
        std::fs::remove_file(log_of(&theirs)).unwrap();
        drop(RedbBackend::open(&theirs).unwrap());
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        match RedbBackend::open(&theirs) {
            Err(OpenError::File { source, .. }) => assert!(source.to_string().contains("uid 65534"), "{source}"),
            other => panic!("another user's database: {:?}", other.map(|_| ())),
        }
    } else {
        eprintln!("SKIPPED: another user's files need root to make");
    }
}

/// A log damaged in its middle (issue 31): refused, saying how many acknowledged batches follow
/// the damage and what to do; accepting the loss keeps the writes before the damage and sets the
/// log aside, not deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_damaged_in_the_middle_keeps_what_came_before_when_the_loss_is_accepted() {
    if std::env::var_os("LOGID_DB").is_some() || std::env::var_os("LOGID_OPEN").is_some() {
        return;
    }
    tokio::task::block_in_place(|| {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.redb");
        let keys = crash_after_writing(&db, "k", 10, None);
        let mut bytes = std::fs::read(log_of(&db)).unwrap();
        // Each small batch takes one 512-byte slot from offset 4096: damage the fifth's payload.
        bytes[4096 + 4 * 512 + 40] ^= 0x55;
        std::fs::write(log_of(&db), &bytes).unwrap();
        let error = refusal(&db);
        assert!(error.contains("damaged at offset 6144") && error.contains("5 acknowledged write batches"), "{error}");
        let recovered = engine_on(RedbBackend::open_accepting_log_loss(&db).unwrap());
        for (n, key) in keys.iter().enumerate() {
            let expected = (n < 4).then(|| json!(n));
            assert_eq!(value_of(&recovered, key), expected, "{key}");
        }
        tokio::runtime::Handle::current().block_on(recovered.close());
        let aside: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".wal.set-aside-"))
            .collect();
        assert_eq!(aside.len(), 1, "the damaged log is kept aside");
    });
}
