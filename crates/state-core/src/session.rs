//! Session rules. A session's head entry holds the latest context and its entry version is
//! the session version; every version is also kept under its own key, so restoring an old
//! one does not depend on history retention.

use serde_json::{Value, json};

use crate::entry::{Action, Entry};
use crate::keyspace::{self, Space};
use crate::ops::ReadStatus;
use crate::ops::session::{
    SessionInfo, SessionListResult, SessionRestoreResult, SessionSaveRequest, SessionSaveResult,
};
use crate::plan::{Changes, Plan, ReadsFirst, Record, WriteContext};
use crate::view::{StateView, scan_page};

/// The head only: the version it writes beside it is named by the head's version, known once
/// the head is read, so that write goes blind.
impl ReadsFirst for SessionSaveRequest {
    fn reads_first(&self) -> Vec<String> {
        vec![keyspace::session_key(&self.session_id)]
    }
}

pub fn plan_save<V: StateView + ?Sized>(
    view: &V,
    session_id: &str,
    context: &Value,
    agent_id: Option<&str>,
    ctx: &WriteContext,
) -> Result<Plan<SessionSaveResult>, V::Error> {
    let head_key = keyspace::session_key(session_id);
    let head = view.get(&head_key)?;
    let version = head.as_ref().map_or(1, |h| h.version + 1);
    let mut changes = Changes::new(ctx, agent_id);
    let head = changes.write(
        head.as_ref(),
        &head_key,
        context.clone(),
        None,
        Record::Transition(Action::SessionSave, json!({"version": version})),
    );
    changes.write(
        None,
        &keyspace::session_version_key(session_id, head.version),
        context.clone(),
        None,
        Record::Silent,
    );
    let revision = changes.revision();
    Ok(changes.finish(SessionSaveResult {
        status: crate::ops::OkStatus::Ok,
        session_id: session_id.to_owned(),
        version: head.version,
        revision,
    }))
}

pub fn restore<V: StateView + ?Sized>(
    view: &V,
    session_id: &str,
    version: Option<u64>,
    revision: u64,
) -> Result<SessionRestoreResult, V::Error> {
    let head = view.get(&keyspace::session_key(session_id))?;
    let latest = head.as_ref().map_or(0, |h| h.version);
    let found: Option<(u64, Entry)> = match version {
        None => head.map(|h| (h.version, h)),
        Some(v) if v > latest => None,
        Some(v) => view.get(&keyspace::session_version_key(session_id, v))?.map(|e| (v, e)),
    };
    Ok(match found {
        Some((version, entry)) => SessionRestoreResult {
            status: ReadStatus::Ok,
            session_id: session_id.to_owned(),
            version,
            latest_version: latest,
            context: Some(entry.value),
            saved_at: Some(entry.updated_at.to_rfc3339()),
            agent_id: entry.agent_id,
            revision,
        },
        None => SessionRestoreResult {
            status: ReadStatus::NotFound,
            session_id: session_id.to_owned(),
            version: 0,
            latest_version: latest,
            context: None,
            saved_at: None,
            agent_id: None,
            revision,
        },
    })
}

pub fn list<V: StateView + ?Sized>(
    view: &V,
    prefix: &str,
    after: Option<&str>,
    page: usize,
    revision: u64,
) -> Result<SessionListResult, V::Error> {
    let space = keyspace::prefix(Space::Session);
    let after_key = after.map(keyspace::session_key);
    let (sessions, next_cursor) = scan_page(
        view,
        &format!("{space}{prefix}"),
        after_key.as_deref(),
        page,
        |head| {
            Ok(Some(SessionInfo {
                session_id: keyspace::classify(&head.key).1.to_owned(),
                latest_version: head.version,
                updated_at: head.updated_at.to_rfc3339(),
            }))
        },
        |session: &SessionInfo| &session.session_id,
    )?;
    Ok(SessionListResult { sessions, next_cursor, revision })
}
