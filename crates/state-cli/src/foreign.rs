//! Databases of the servers `state` replaces, read as dump records so `statectl import
//! --from` keeps what they held: keys, values, versions and times. Opened read-only; the
//! server may still be running.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use rusqlite::{Connection, OpenFlags};
use serde_json::Value;
use state_compat::sidecar;
use state_core::ops::transfer::DumpedRecord;
use state_core::transfer;

fn open(path: &Path, server: &str) -> Result<Connection> {
    if !path.is_file() {
        bail!("{} is not a file: give the path of {server}'s SQLite database", path.display());
    }
    Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .with_context(|| format!("cannot open {} as a SQLite database", path.display()))
}

/// SQLite's `datetime('now')` text (UTC, no zone) as RFC 3339.
fn sql_datetime(text: &str) -> String {
    format!("{}Z", text.trim().replacen(' ', "T", 1))
}

/// A stored JSON text as its value; text that is not JSON is kept as a string rather than lost.
fn json_text(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// A key of another server as a dump record. It has no revisions here: the import gives it
/// this store's.
fn record(
    key: String,
    value: &str,
    version: i64,
    updated_at: String,
    expires_at: Option<String>,
    agent_id: Option<String>,
) -> DumpedRecord {
    DumpedRecord {
        key,
        value: json_text(value),
        version: u64::try_from(version).unwrap_or(1).max(1),
        create_revision: 0,
        mod_revision: 0,
        updated_at,
        expires_at,
        agent_id,
    }
}

/// agentcheckpoint 1.x: one table, `checkpoints(key, value JSON text, version, updated_at)`.
/// Its keys are our keys, as its compatibility profile reads them.
pub(crate) fn agentcheckpoint(path: &Path) -> Result<Vec<DumpedRecord>> {
    let db = open(path, "agentcheckpoint")?;
    let mut rows = db.prepare("SELECT key, value, version, updated_at FROM checkpoints ORDER BY key").context(
        "no `checkpoints` table with key, value, version and updated_at: is this agentcheckpoint's database?",
    )?;
    let records = rows
        .query_map([], |row| {
            let (key, value, version, updated_at): (String, String, i64, String) =
                (row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?);
            Ok(record(key, &value, version, sql_datetime(&updated_at), None, None))
        })?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("cannot read the checkpoints of {}", path.display()))?;
    Ok(records)
}

/// What a foreign database held that an import does not bring over, to say so.
#[derive(Debug, Default)]
pub(crate) struct Left {
    /// The sidecar's live leases: they carry no fencing token, so their holders acquire them
    /// again here rather than hold a lease no write could be fenced by.
    pub(crate) leases: u64,
}

/// Epoch seconds (SQLite `unixepoch()` or Python's `time.time()`) as an instant.
fn epoch_millis(seconds: f64) -> state_core::UnixMillis {
    state_core::UnixMillis((seconds.max(0.0) * 1000.0).round() as u64)
}

fn epoch_seconds(seconds: f64) -> String {
    epoch_millis(seconds).to_rfc3339()
}

/// mcp-state-sidecar 0.1 on SQLite: `kv_store(key, value_json, expires_at)` keeps no version,
/// so a key's version is the number of writes its audit `history` records, and its writer
/// and time are those of the last one; `sessions(session_id, context_json, updated_at)`
/// becomes a session at version 1; its workflow runs and step outputs become runs
/// (`state_compat::sidecar::run_records`). Its leases are counted, not imported.
pub(crate) fn sidecar(path: &Path) -> Result<(Vec<DumpedRecord>, Left)> {
    let db = open(path, "mcp-state-sidecar")?;
    let not_sidecar = "no kv_store, history and sessions tables: is this mcp-state-sidecar's SQLite database?";
    let mut keys = db
        .prepare(
            "SELECT k.key, k.value_json, k.expires_at, \
                    (SELECT COUNT(*) FROM history h WHERE h.key = k.key), \
                    (SELECT h.agent_id FROM history h WHERE h.key = k.key ORDER BY h.id DESC LIMIT 1), \
                    (SELECT h.written_at FROM history h WHERE h.key = k.key ORDER BY h.id DESC LIMIT 1) \
             FROM kv_store k ORDER BY k.key",
        )
        .context(not_sidecar)?;
    let now = now_seconds();
    let mut records = keys
        .query_map([], |row| {
            let (key, value, expires_at): (String, String, Option<f64>) = (row.get(0)?, row.get(1)?, row.get(2)?);
            let (writes, agent_id, written_at): (i64, Option<String>, Option<f64>) =
                (row.get(3)?, row.get(4)?, row.get(5)?);
            let updated_at = epoch_seconds(written_at.unwrap_or(now));
            Ok(record(key, &value, writes, updated_at, expires_at.map(epoch_seconds), agent_id))
        })?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("cannot read the keys of {}", path.display()))?;
    let mut sessions = db
        .prepare("SELECT session_id, context_json, updated_at FROM sessions ORDER BY session_id")
        .context(not_sidecar)?;
    let sessions = sessions
        .query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?, row.get::<_, f64>(2)?)))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("cannot read the sessions of {}", path.display()))?;
    for (session_id, context, updated_at) in sessions {
        records.extend(transfer::session_records(&session_id, json_text(&context), epoch_seconds(updated_at)));
    }
    for run in sidecar_runs(&db).with_context(|| format!("cannot read the workflows of {}", path.display()))? {
        records.extend(sidecar::run_records(&run));
    }
    let live_leases: i64 = db
        .query_row("SELECT COUNT(*) FROM leases WHERE expires_at > ?1", [now], |row| row.get(0))
        .context(not_sidecar)?;
    Ok((records, Left { leases: u64::try_from(live_leases).unwrap_or(0) }))
}

fn sidecar_runs(db: &Connection) -> Result<Vec<sidecar::SidecarRun>> {
    let mut steps: HashMap<String, Vec<(u64, Value)>> = HashMap::new();
    let mut rows = db.prepare("SELECT run_id, step, output_json FROM step_outputs ORDER BY run_id, step")?;
    let found =
        rows.query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?, row.get::<_, String>(2)?)))?;
    for step in found {
        let (run_id, step, output) = step?;
        steps.entry(run_id).or_default().push((u64::try_from(step).unwrap_or(0), json_text(&output)));
    }
    let mut rows = db.prepare(
        "SELECT run_id, name, status, tags_json, agent_id, created_at, updated_at FROM workflows ORDER BY created_at, run_id",
    )?;
    let runs = rows
        .query_map([], |row| {
            let run_id: String = row.get(0)?;
            let tags: String = row.get(3)?;
            Ok(sidecar::SidecarRun {
                steps: steps.remove(&run_id).unwrap_or_default(),
                run_id,
                name: row.get(1)?,
                status: row.get(2)?,
                tags: serde_json::from_str(&tags).unwrap_or_default(),
                agent_id: row.get(4)?,
                created_at: epoch_millis(row.get(5)?),
                updated_at: epoch_millis(row.get(6)?),
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(runs)
}

fn now_seconds() -> f64 {
    state_api::Clock::now(&state_api::SystemClock).0 as f64 / 1000.0
}
