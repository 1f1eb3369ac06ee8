//! One database under several names, as the attacker's probe found it (issue 30): writes
//! acknowledged through a symbolic link, the owner killed, the database opened by its real
//! name. Every name reaches one owner and one log, a second hard name is refused, and a log
//! lost after a crash is refused until the user accepts the loss with `statectl recover`.

use crate::Place;

/// The pid the database's holder note names: the owner serving it.
fn owner_pid(place: &Place) -> i32 {
    let note = std::fs::read_to_string(place.db.with_file_name("s.redb.holder")).unwrap();
    let note: serde_json::Value = serde_json::from_str(&note).unwrap();
    note["pid"].as_i64().unwrap() as i32
}

/// Kills the owner as a crash would and waits until it is gone.
fn kill_owner(place: &Place) {
    let pid = owner_pid(place);
    let status = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap();
    assert!(status.success());
    let what = format!("owner {pid} to die of SIGKILL");
    state_e2e::wait::until(&what, std::time::Duration::from_secs(5), || state_e2e::wait::process_gone(pid as u32));
}

#[test]
fn writes_through_any_name_reach_one_owner_and_survive_its_crash() {
    let place = Place::new();
    let link = place.dir.path().join("link.redb");
    std::os::unix::fs::symlink(&place.db, &link).unwrap();
    let link = link.to_str().unwrap();
    let real = place.db.to_str().unwrap();
    let mut last = 0;
    for (key, value) in [("a", "1"), ("b", "2"), ("c", "3")] {
        last = place.json(&["--db", link, "put", key, value], 0)["revision"].as_u64().unwrap();
    }
    // While that owner runs, the real name reaches it rather than failing to find one.
    let pid = owner_pid(&place);
    assert_eq!(place.json(&["--db", real, "get", "a"], 0)["value"], 1);
    assert_eq!(owner_pid(&place), pid, "one owner for both names");

    kill_owner(&place);
    for (key, value) in [("a", 1), ("b", 2), ("c", 3)] {
        assert_eq!(place.json(&["--db", real, "get", key], 0)["value"], value, "{key} after the crash");
    }
    let revision = place.json(&["--db", real, "put", "d", "4"], 0)["revision"].as_u64().unwrap();
    assert_eq!(revision, last + 1, "the revision went on from the acknowledged writes, not back");
    kill_owner(&place);
    assert_eq!(place.json(&["--db", link, "get", "d"], 0)["value"], 4);

    // A second hard name is refused at once, by name, with what to do.
    let hard = place.dir.path().join("hard.redb");
    std::fs::hard_link(&place.db, &hard).unwrap();
    let refused = place.run(&["--db", hard.to_str().unwrap(), "put", "e", "5"]);
    assert_ne!(refused.code, 0);
    assert!(refused.stderr.contains("2 names (hard links)"), "{}", refused.stderr);
    std::fs::remove_file(&hard).unwrap();
}

#[test]
fn a_log_lost_after_a_crash_is_refused_until_recover_accepts_the_loss() {
    let place = Place::new();
    place.json(&["put", "early", "1"], 0);
    place.json(&["put", "late", "2"], 0);
    kill_owner(&place);
    let log = place.db.with_file_name("s.redb.wal");
    let saved = std::fs::read(&log).unwrap();
    std::fs::remove_file(&log).unwrap();

    let refused = place.run(&["get", "late"]);
    assert_ne!(refused.code, 0);
    assert!(
        refused.stderr.contains("missing or empty") && refused.stderr.contains("--accept-lost-writes"),
        "the reason and the way out, at once: {}",
        refused.stderr
    );
    let dry = place.run(&["recover"]);
    assert_eq!(dry.code, 1, "{}{}", dry.stdout, dry.stderr);
    assert!(dry.stdout.contains("missing or empty"), "{}", dry.stdout);
    assert_eq!(std::fs::metadata(&log).map_or(0, |m| m.len()), 0, "nothing was written to a log refused");

    // The log turns up again: nothing is lost.
    std::fs::write(&log, &saved).unwrap();
    assert_eq!(place.json(&["get", "late"], 0)["value"], 2);
    kill_owner(&place);
    std::fs::remove_file(&log).unwrap();
    let recovered = place.run(&["recover", "--accept-lost-writes"]);
    assert_eq!(recovered.code, 0, "{}{}", recovered.stdout, recovered.stderr);
    assert!(recovered.stdout.contains("recovered"), "{}", recovered.stdout);
    // What the first owner checkpointed when it opened the store again is there.
    assert_eq!(place.json(&["get", "late"], 0)["value"], 2);
    kill_owner(&place);
    let again = place.run(&["recover"]);
    assert_eq!(again.stdout.trim_end(), format!("{} opens as it is: nothing to recover", place.db.display()));
}
