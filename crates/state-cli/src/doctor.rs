//! `statectl doctor`: what a person checks when something is off, checked for them: the
//! database file (opened read-only: is it a database of this store), its write-ahead log
//! (every record read and judged as an open would), the directory (can this user write there),
//! who holds it, the owner's socket, whether the owner answers and runs this version, its log,
//! and the disk. Each check says what it found and, when it is wrong, the one thing to do
//! about it; anything that would stop a command is a failure (exit 1). Nothing is started or
//! changed that was not running before.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use anyhow::Result;
use serde::Serialize;
use serde_json::Value;
use state_api::catalog::Operation;

use crate::exit;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Status {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Serialize)]
struct Check {
    check: &'static str,
    status: Status,
    found: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

fn ok(check: &'static str, found: String) -> Check {
    Check { check, status: Status::Ok, found, fix: None }
}

fn warn(check: &'static str, found: String, fix: String) -> Check {
    Check { check, status: Status::Warn, found, fix: Some(fix) }
}

fn fail(check: &'static str, found: String, fix: String) -> Check {
    Check { check, status: Status::Fail, found, fix: Some(fix) }
}

/// Runs every check; exit 0 unless one failed (warnings are advice).
pub(crate) async fn doctor(cli: &crate::Cli, json: bool) -> Result<u8> {
    let db = cli.store.database.database()?;
    let mut checks = Vec::new();
    let exists = db.exists();
    let inspection = exists.then(|| state_api::inspect_database(&db));
    checks.push(database(&db, inspection.as_ref()));
    checks.push(directory(&db));
    if let Some(inspection) = &inspection {
        checks.push(write_ahead_log(&db, inspection));
        checks.extend(holder_and_owner(cli, &db).await);
        let log = state_api::owner_log_path(&db);
        checks.push(match std::fs::metadata(&log) {
            Ok(meta) => ok("owner log", format!("{} ({})", log.display(), size(meta.len()))),
            Err(_) => ok("owner log", format!("none yet at {} (an owner writes it)", log.display())),
        });
    }
    checks.push(disk(&db));
    if json {
        outln!("{}", serde_json::to_string_pretty(&checks).unwrap_or_default());
    } else {
        for check in &checks {
            let status = match check.status {
                Status::Ok => "ok  ",
                Status::Warn => "WARN",
                Status::Fail => "FAIL",
            };
            outln!("{status}  {:<10} {}", check.check, check.found);
            if let Some(fix) = &check.fix {
                outln!("      {:<10} → {fix}", "");
            }
        }
    }
    Ok(if checks.iter().any(|c| c.status == Status::Fail) { exit::FAILURE } else { exit::OK })
}

/// A size as people read it.
fn size(bytes: u64) -> String {
    match bytes {
        0..1_000 => format!("{bytes} bytes"),
        1_000..1_000_000 => format!("{:.1} KB", bytes as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", bytes as f64 / 1e6),
        _ => format!("{:.1} GB", bytes as f64 / 1e9),
    }
}

/// What the database file is, read-only, and whether others can read it.
fn database(db: &Path, inspection: Option<&state_api::Inspection>) -> Check {
    use state_api::DatabaseState;
    let restore = |db: &Path| {
        format!(
            "restore the last backup in its place (`statectl backup` makes them; docs/operations.md, Running it for months), \
             or move {} aside to start an empty store",
            db.display()
        )
    };
    match inspection.map(|i| &i.database) {
        Some(DatabaseState::Unusable(why)) => {
            return fail("database", format!("{} cannot be opened: {why}", db.display()), restore(db));
        }
        Some(DatabaseState::Readable { format, .. }) if *format == 0 => {
            return fail("database", format!("{} is not a database of this store", db.display()), restore(db));
        }
        _ => {}
    }
    let state = match inspection.map(|i| &i.database) {
        Some(DatabaseState::Readable { revision, log_open: true, .. }) => {
            format!(", revision {revision}, not closed cleanly (its next open replays its log)")
        }
        Some(DatabaseState::Readable { revision, .. }) => format!(", revision {revision}, closed cleanly"),
        Some(DatabaseState::NeedsRepair) => {
            ", not closed cleanly (its next open repairs it and replays its log)".into()
        }
        Some(DatabaseState::Held) => ", open in a process (below)".into(),
        Some(DatabaseState::Empty) => ", empty (the next open makes the database in it)".into(),
        _ => String::new(),
    };
    let meta = match std::fs::metadata(db) {
        Ok(meta) => meta,
        Err(_) => {
            return warn(
                "database",
                format!("none at {}", db.display()),
                "the first write creates it; if you expected one, check --db or STATE_DB".to_owned(),
            );
        }
    };
    let dir_mode = db.parent().and_then(|d| std::fs::metadata(d).ok()).map_or(0, |m| m.mode() & 0o777);
    let size = format!("{} ({}){state}", db.display(), size(meta.len()));
    if meta.mode() & 0o077 != 0 {
        warn("database", format!("{size}, readable by other users"), format!("chmod 600 {}", db.display()))
    } else if dir_mode & 0o077 != 0 {
        let dir = db.parent().map(|d| d.display().to_string()).unwrap_or_default();
        warn("database", format!("{size}, in a directory other users can enter"), format!("chmod 700 {dir}"))
    } else {
        ok("database", format!("{size}, private"))
    }
}

/// Whether this user can make the database's files where it lives: every command needs to.
fn directory(db: &Path) -> Check {
    let dir = db.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    // The nearest directory that exists is where the missing ones would be made.
    let existing = dir.ancestors().find(|d| d.exists()).unwrap_or(Path::new("/"));
    match state_api::writable_dir(existing) {
        Ok(()) => ok("directory", format!("{} is writable by this user", existing.display())),
        Err(error) => fail(
            "directory",
            format!("this user (uid {}) cannot write in {}: {error}", state_api::current_uid(), existing.display()),
            "give --db (or STATE_DB) a path in a directory you can write, or have its owner grant write access"
                .to_owned(),
        ),
    }
}

/// The write-ahead log beside the database, read and judged as an open would: it holds recent
/// writes in full, so it must also be as private as the database.
fn write_ahead_log(db: &Path, inspection: &state_api::Inspection) -> Check {
    use state_api::LogState;
    let log = &inspection.log_path;
    let recover = format!(
        "put this database's own log back at {} if it exists; otherwise `statectl recover --db {}` says what \
         would be lost and `--accept-lost-writes` opens the database with what it holds",
        log.display(),
        db.display()
    );
    let found = match &inspection.log {
        LogState::Refused(why) => return fail("log", why.clone(), recover),
        LogState::Absent => {
            return ok("log", format!("none at {} (none needed; the next open makes it)", log.display()));
        }
        LogState::NotChecked(why) => format!("not read ({why})"),
        LogState::Sound { to_replay: Some(0), .. } => "sound, nothing to replay".to_owned(),
        LogState::Sound { to_replay: Some(n), .. } => format!("sound, {n} write batches for the next open to replay"),
        LogState::Sound { to_replay: None, .. } => "sound".to_owned(),
    };
    match std::fs::metadata(log) {
        Err(_) => ok("log", format!("none yet at {}", log.display())),
        Ok(meta) if meta.mode() & 0o077 != 0 => warn(
            "log",
            format!("{} ({}), {found}, readable by other users", log.display(), size(meta.len())),
            format!("chmod 600 {}", log.display()),
        ),
        Ok(meta) => ok("log", format!("{} ({}), {found}, private", log.display(), size(meta.len()))),
    }
}

async fn holder_and_owner(cli: &crate::Cli, db: &Path) -> Vec<Check> {
    let runtime = state_api::runtime_dir(cli.store.database.runtime_dir.as_deref());
    let runtime_mode = std::fs::metadata(&runtime).map(|m| m.mode() & 0o777);
    let mut checks = vec![match runtime_mode {
        Ok(mode) if mode & 0o077 == 0 => ok("sockets", format!("{} (private)", runtime.display())),
        Ok(mode) => fail(
            "sockets",
            format!("{} is mode {mode:o}", runtime.display()),
            format!("chmod 700 {} (owners refuse a directory others can enter)", runtime.display()),
        ),
        Err(_) => ok("sockets", format!("{} (made by the first owner)", runtime.display())),
    }];
    match state_api::database_holder(db) {
        None => checks.push(ok("owner", "none running: the first client starts one".to_owned())),
        Some((pid, Some(role))) if role == "owner" => checks.extend(owner(cli, pid).await),
        Some((pid, role)) => checks.push(warn(
            "owner",
            format!("held by pid {pid} ({}), which does not share it", role.as_deref().unwrap_or("unknown role")),
            format!("other clients wait for it: stop it (kill {pid}) or run it without --standalone"),
        )),
    }
    checks
}

/// Asks the running owner how it is, through the same join every client makes.
async fn owner(cli: &crate::Cli, pid: u32) -> Vec<Check> {
    let stuck = |found: String| {
        fail("owner", found, format!("see its log; `kill {pid}` ends it and the next client starts another"))
    };
    let api = match cli.connect().await {
        Ok(api) => api,
        Err(error) => return vec![stuck(format!("pid {pid} does not answer: {error:#}"))],
    };
    let reply = api.call(Operation::StateHealth, serde_json::json!({})).await;
    api.close().await;
    let health = match reply.body {
        Ok(health) => health,
        Err(error) => return vec![stuck(format!("pid {pid} answers but not health: {}", error.message))],
    };
    let theirs = health["server_version"].as_str().unwrap_or("unknown").to_owned();
    let ours = env!("CARGO_PKG_VERSION");
    let mut checks = vec![ok(
        "owner",
        format!(
            "pid {pid} answers: revision {}, {} keys, {} clients connected (this check included)",
            health["revision"],
            health["keys"],
            health.get("owner").and_then(|o| o.get("clients")).unwrap_or(&Value::from(0))
        ),
    )];
    checks.push(if theirs == ours {
        ok("version", format!("state {ours}, as this statectl"))
    } else {
        warn(
            "version",
            format!("the owner runs state {theirs}, this statectl {ours}"),
            format!("after an upgrade, `kill {pid}`: it finishes queued writes, and the next client starts {ours}"),
        )
    });
    checks
}

fn disk(db: &Path) -> Check {
    let dir = db.parent().filter(|d| d.exists()).unwrap_or(Path::new("/"));
    match state_api::free_space(dir) {
        Ok(free) if free < 256 * 1024 * 1024 => warn(
            "disk",
            format!("{:.0} MB free for {}", free as f64 / 1e6, dir.display()),
            "free some space: writes are refused when the disk is nearly full".to_owned(),
        ),
        Ok(free) => ok("disk", format!("{:.1} GB free", free as f64 / 1e9)),
        Err(error) => warn("disk", format!("cannot tell the free space: {error}"), "check df".to_owned()),
    }
}
