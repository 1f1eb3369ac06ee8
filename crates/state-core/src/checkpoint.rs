//! Checkpoint rules. A checkpoint is a write-once entry under an id that starts with its UTC
//! save time, so key order is time order and a timeline is one range scan. Beside it, in the
//! same plan: its session (whose highlights accumulate), the latest-checkpoint pointer of its
//! workspace (and of global checkpoints), and its search index entries.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::entry::{Action, Entry};
use crate::keyspace::{self, Corpus, Space};
use crate::ops::OkStatus;
use crate::ops::checkpoint::{
    Checkpoint, CheckpointFields, CheckpointRestoreRequest, CheckpointRestoreResult, CheckpointSaveRequest,
    CheckpointSaveResult, CheckpointSearchResult, CheckpointSummary, CheckpointTimelineResult, Depth,
    MAX_TIMELINE_ITEMS, RestoreStatus, TimelineDay, TimelineFormat, TimelineWorkspace,
};
use crate::plan::{Changes, Plan, Record, WriteContext};
use crate::text_index::{self, Document};
use crate::time::UnixMillis;
use crate::view::StateView;

/// The workspace of a checkpoint saved without one by a caller that could not supply it.
pub const DEFAULT_WORKSPACE: &str = "default";
/// A session keeps this many of its latest highlights.
pub const MAX_SESSION_HIGHLIGHTS: usize = 500;
/// Most ids an ambiguous id lists.
const MAX_CANDIDATES: usize = 10;

/// The URI a checkpoint is read at as an MCP resource.
pub fn uri(id: &str) -> String {
    format!("state://checkpoint/{id}")
}

/// A checkpoint with its search terms computed before the write queue.
#[derive(Debug, Clone)]
pub struct PreparedCheckpoint {
    request: CheckpointSaveRequest,
    document: Document,
}

pub fn prepare(request: CheckpointSaveRequest) -> PreparedCheckpoint {
    let document = document(&request);
    PreparedCheckpoint { request, document }
}

/// What the search index holds for a checkpoint: its title weighs double.
pub fn document(f: &CheckpointSaveRequest) -> Document {
    let mut body: Vec<&str> = Vec::new();
    body.extend(f.highlights.iter().map(String::as_str));
    body.extend(f.work_context.as_deref());
    body.extend(f.core_question.as_deref());
    body.extend(f.open_questions.iter().map(String::as_str));
    body.extend(f.sources.iter().flat_map(|s| [s.id.as_str(), s.take.as_str()]));
    body.extend(f.tensions.iter().map(|t| t.nature.as_str()));
    body.extend(f.unique_contributions.iter().map(|c| c.content.as_str()));
    body.extend(f.action.as_ref().map(|a| a.goal.as_str()));
    body.extend(f.active_files.iter().map(String::as_str));
    body.extend(f.git_branch.as_deref());
    body.extend(f.scope.as_deref());
    let body = body.join("\n");
    let title = [f.description.as_deref(), f.thesis.as_deref()].into_iter().flatten().collect::<Vec<_>>().join("\n");
    Document::of(&[(&title, 2), (&body, 1)])
}

/// The readable part of an id: the first words of the title, lowercase ASCII, hyphenated.
fn slug(title: &str) -> String {
    let words: Vec<String> = title
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(6)
        .map(str::to_ascii_lowercase)
        .collect();
    let mut slug = String::new();
    for word in words {
        if slug.len() + word.len() + 1 > 48 {
            break;
        }
        if !slug.is_empty() {
            slug.push('-');
        }
        slug.push_str(&word);
    }
    if slug.is_empty() { "checkpoint".to_owned() } else { slug }
}

/// A workspace's short name: the last component of its path.
pub fn workspace_name(workspace: &str) -> &str {
    workspace.trim_end_matches(['/', '\\']).rsplit(['/', '\\']).next().filter(|n| !n.is_empty()).unwrap_or(workspace)
}

/// Whether a checkpoint is visible when `wanted` (a path or a name) is asked for.
fn visible_in(fields: &CheckpointFields, wanted: Option<&str>) -> bool {
    let Some(wanted) = wanted else { return true };
    let workspace = fields.workspace.as_deref().unwrap_or(DEFAULT_WORKSPACE);
    fields.global || workspace == wanted || workspace_name(workspace) == wanted
}

/// The session a save joins when it names none: one per workspace per UTC day, named after
/// the workspace (`state-2026-11-23`; `workspace-...` for a root or unnamed one).
fn default_session(workspace: &str, now: UnixMillis) -> String {
    let name: String = workspace_name(workspace)
        .chars()
        .map(|c| if c.is_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '-' })
        .collect();
    let name = name.trim_matches('-');
    let name = if name.is_empty() { "workspace" } else { name };
    format!("{name}-{}", now.date())
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Session {
    workspace: String,
    highlights: Vec<String>,
    checkpoints: u64,
    latest: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Latest {
    id: String,
    saved: u64,
}

fn decode<T: for<'de> Deserialize<'de>>(entry: &Entry) -> Option<T> {
    serde_json::from_value(entry.value.clone()).ok()
}

pub fn plan_save<V: StateView + ?Sized>(
    view: &V,
    prepared: &PreparedCheckpoint,
    ctx: &WriteContext,
) -> Result<Plan<CheckpointSaveResult>, V::Error> {
    let mut fields = prepared.request.clone();
    let workspace = fields.workspace.get_or_insert_with(|| DEFAULT_WORKSPACE.to_owned()).clone();
    let session_id = fields.session_id.get_or_insert_with(|| default_session(&workspace, ctx.now)).clone();
    let title = fields.description.as_deref().or(fields.thesis.as_deref()).unwrap_or_default();
    let base = format!("{}_{}", ctx.now.to_id_stamp(), slug(title));
    let mut id = base.clone();
    // Two saves in the same second with the same title still get distinct ids.
    for n in 2.. {
        if view.get(&keyspace::checkpoint_key(&id))?.is_none() {
            break;
        }
        id = format!("{base}-{n}");
    }

    let mut changes = Changes::new(ctx, prepared.request.agent_id.as_deref());
    let session_key = keyspace::checkpoint_session_key(&session_id);
    let stored_session = view.get(&session_key)?;
    let mut session: Session = stored_session.as_ref().and_then(decode).unwrap_or_default();
    if session.workspace.is_empty() {
        session.workspace = workspace.clone();
    }
    for highlight in &fields.highlights {
        if !session.highlights.contains(highlight) {
            session.highlights.push(highlight.clone());
        }
    }
    let excess = session.highlights.len().saturating_sub(MAX_SESSION_HIGHLIGHTS);
    session.highlights.drain(..excess);
    session.checkpoints += 1;
    session.latest = id.clone();
    let session_highlights = session.highlights.len();

    let detail = json!({ "workspace": workspace, "session_id": session_id, "global": fields.global });
    let record = serde_json::to_value(&fields).unwrap_or(Value::Null);
    changes.write(
        None,
        &keyspace::checkpoint_key(&id),
        record,
        None,
        Record::Transition(Action::CheckpointSave, detail),
    );
    let session_value = serde_json::to_value(&session).unwrap_or(Value::Null);
    changes.write(stored_session.as_ref(), &session_key, session_value, None, Record::Silent);
    let latest = json!(Latest { id: id.clone(), saved: ctx.now.0 });
    changes.write(None, &keyspace::checkpoint_latest_key(Some(&workspace)), latest.clone(), None, Record::Silent);
    if fields.global {
        changes.write(None, &keyspace::checkpoint_latest_key(None), latest, None, Record::Silent);
    }
    text_index::index(view, &mut changes, Corpus::Checkpoints, &id, Some(&prepared.document))?;
    let revision = changes.revision();
    Ok(changes.finish(CheckpointSaveResult {
        status: OkStatus::Ok,
        uri: uri(&id),
        checkpoint_id: id,
        session_id,
        workspace,
        git_branch: fields.git_branch,
        session_highlights,
        revision,
    }))
}

/// A stored checkpoint entry as a [`Checkpoint`].
fn load(entry: &Entry) -> Option<Checkpoint> {
    Some(Checkpoint {
        id: keyspace::classify(&entry.key).1.to_owned(),
        saved_at: entry.updated_at.to_rfc3339(),
        agent_id: entry.agent_id.clone(),
        fields: decode(entry)?,
    })
}

/// One checkpoint by id.
pub fn get<V: StateView + ?Sized>(view: &V, id: &str) -> Result<Option<Checkpoint>, V::Error> {
    Ok(view.get(&keyspace::checkpoint_key(id))?.as_ref().and_then(load))
}

/// Ids matching `partial`: exactly, else as a prefix, else as a substring.
fn matching_ids<V: StateView + ?Sized>(view: &V, partial: &str) -> Result<Vec<String>, V::Error> {
    if view.get(&keyspace::checkpoint_key(partial))?.is_some() {
        return Ok(vec![partial.to_owned()]);
    }
    let space = keyspace::prefix(Space::Checkpoint);
    let mut ids = Vec::new();
    view.scan(&keyspace::checkpoint_key(partial), None, &mut |entry| {
        ids.push(keyspace::classify(&entry.key).1.to_owned());
        ids.len() <= MAX_CANDIDATES
    })?;
    if ids.is_empty() {
        view.scan(&space, None, &mut |entry| {
            let id = keyspace::classify(&entry.key).1;
            if id.contains(partial) {
                ids.push(id.to_owned());
            }
            ids.len() <= MAX_CANDIDATES
        })?;
    }
    Ok(ids)
}

/// The newest checkpoint visible in `workspace` (`None`: in any workspace).
fn latest<V: StateView + ?Sized>(view: &V, workspace: Option<&str>) -> Result<Option<String>, V::Error> {
    let mut pointers: Vec<Latest> = Vec::new();
    let consider = |pointers: &mut Vec<Latest>, entry: Option<Entry>| {
        if let Some(latest) = entry.as_ref().and_then(decode::<Latest>) {
            pointers.push(latest);
        }
    };
    match workspace {
        Some(workspace) => {
            consider(&mut pointers, view.get(&keyspace::checkpoint_latest_key(Some(workspace)))?);
            let exact = !pointers.is_empty();
            consider(&mut pointers, view.get(&keyspace::checkpoint_latest_key(None))?);
            if !exact && !workspace.contains(['/', '\\']) {
                // A name rather than a path: every workspace whose last component it is.
                let space = keyspace::prefix(Space::CheckpointLatest);
                view.scan(&space, None, &mut |entry| {
                    let path = keyspace::classify(&entry.key).1;
                    if !path.is_empty() && path != workspace && workspace_name(path) == workspace {
                        consider(&mut pointers, Some(entry));
                    }
                    true
                })?;
            }
        }
        None => view.scan(&keyspace::prefix(Space::CheckpointLatest), None, &mut |entry| {
            consider(&mut pointers, Some(entry));
            true
        })?,
    }
    Ok(pointers.into_iter().max_by(|a, b| a.saved.cmp(&b.saved).then_with(|| a.id.cmp(&b.id))).map(|l| l.id))
}

/// The checkpoint a restore asks for, or the candidates of an ambiguous id.
fn choose<V: StateView + ?Sized>(
    view: &V,
    request: &CheckpointRestoreRequest,
) -> Result<Result<Option<Checkpoint>, Vec<String>>, V::Error> {
    let workspace = request.workspace.as_deref();
    if let Some(partial) = &request.checkpoint_id {
        let mut ids = matching_ids(view, partial)?;
        return Ok(match ids.len() {
            0 | 1 => Ok(ids.pop().map(|id| get(view, &id)).transpose()?.flatten()),
            _ => {
                ids.truncate(MAX_CANDIDATES);
                Err(ids)
            }
        });
    }
    if let Some(query) = &request.query {
        for (id, _) in text_index::search(view, Corpus::Checkpoints, query, None)? {
            if let Some(checkpoint) = get(view, &id)?.filter(|c| visible_in(&c.fields, workspace)) {
                return Ok(Ok(Some(checkpoint)));
            }
        }
        return Ok(Ok(None));
    }
    if let Some(session) = &request.session_id {
        let stored = view.get(&keyspace::checkpoint_session_key(session))?;
        let latest = stored.as_ref().and_then(decode::<Session>).map(|s| s.latest);
        return Ok(Ok(latest.map(|id| get(view, &id)).transpose()?.flatten()));
    }
    Ok(Ok(latest(view, workspace)?.map(|id| get(view, &id)).transpose()?.flatten()))
}

pub fn restore<V: StateView + ?Sized>(
    view: &V,
    request: &CheckpointRestoreRequest,
    revision: u64,
) -> Result<CheckpointRestoreResult, V::Error> {
    let depth = request.depth.unwrap_or_default();
    let empty = |status, candidates: Vec<String>, context: String| CheckpointRestoreResult {
        status,
        checkpoint: None,
        session_highlights: Vec::new(),
        candidates,
        context,
        revision,
    };
    let mut checkpoint = match choose(view, request)? {
        Err(candidates) => {
            let context = format!("Several checkpoints match: {}. Give more of the id.", candidates.join(", "));
            return Ok(empty(RestoreStatus::Ambiguous, candidates, context));
        }
        Ok(None) => return Ok(empty(RestoreStatus::NotFound, Vec::new(), "No checkpoint found.".to_owned())),
        Ok(Some(checkpoint)) => checkpoint,
    };
    let session_highlights = if depth == Depth::Minimal {
        Vec::new()
    } else {
        let session = checkpoint.fields.session_id.as_deref().unwrap_or_default();
        let stored = view.get(&keyspace::checkpoint_session_key(session))?;
        stored.as_ref().and_then(decode::<Session>).map(|s| s.highlights).unwrap_or_default()
    };
    trim_to(&mut checkpoint.fields, depth);
    let context = context("Checkpoint restored", &checkpoint, &session_highlights);
    Ok(CheckpointRestoreResult {
        status: RestoreStatus::Ok,
        checkpoint: Some(checkpoint),
        session_highlights,
        candidates: Vec::new(),
        context,
        revision,
    })
}

/// Leaves the fields `depth` brings back.
fn trim_to(fields: &mut CheckpointFields, depth: Depth) {
    if depth == Depth::Full {
        return;
    }
    let kept = CheckpointFields {
        description: fields.description.take(),
        thesis: fields.thesis.take(),
        workspace: fields.workspace.take(),
        session_id: fields.session_id.take(),
        git_branch: fields.git_branch.take(),
        work_context: fields.work_context.take(),
        global: fields.global,
        highlights: if depth == Depth::Highlights { std::mem::take(&mut fields.highlights) } else { Vec::new() },
        active_files: if depth == Depth::Highlights { std::mem::take(&mut fields.active_files) } else { Vec::new() },
        ..CheckpointFields::default()
    };
    *fields = kept;
}

/// A checkpoint as markdown, ready to put in a prompt, under the heading `title`.
pub fn context(title: &str, checkpoint: &Checkpoint, session_highlights: &[String]) -> String {
    let f = &checkpoint.fields;
    let mut out = String::new();
    let headline = f.description.as_deref().or(f.thesis.as_deref()).unwrap_or_default();
    let _ = writeln!(out, "# {title}: {headline}\n");
    let _ = write!(out, "- id: `{}`\n- saved: {}\n", checkpoint.id, checkpoint.saved_at);
    for (label, value) in
        [("workspace", &f.workspace), ("branch", &f.git_branch), ("session", &f.session_id), ("scope", &f.scope)]
    {
        if let Some(value) = value {
            let _ = writeln!(out, "- {label}: `{value}`");
        }
    }
    if let Some(work) = &f.work_context {
        let _ = write!(out, "\n## Where things stand\n{work}\n");
    }
    let list = |out: &mut String, heading: &str, items: &mut dyn Iterator<Item = String>| {
        let mut items = items.peekable();
        if items.peek().is_some() {
            let _ = writeln!(out, "\n## {heading}");
            for item in items {
                let _ = writeln!(out, "- {item}");
            }
        }
    };
    let highlights = if session_highlights.is_empty() { &f.highlights } else { session_highlights };
    list(&mut out, "Highlights", &mut highlights.iter().cloned());
    list(&mut out, "Active files", &mut f.active_files.iter().map(|p| format!("`{p}`")));
    if let Some(question) = &f.core_question {
        let _ = write!(out, "\n## Core question\n{question}\n");
    }
    if f.description.is_some()
        && let Some(thesis) = &f.thesis
    {
        let _ = write!(out, "\n## Thesis\n{thesis}\n");
    }
    if f.confidence.is_some() || f.trigger.is_some() {
        let confidence = f.confidence.map(|c| format!("confidence {c}")).unwrap_or_default();
        let trigger = f.trigger.map(|t| format!(" trigger {}", enum_name(&t))).unwrap_or_default();
        let _ = writeln!(out, "\n_{}_", format!("{confidence}{trigger}").trim());
    }
    list(&mut out, "Open questions", &mut f.open_questions.iter().cloned());
    list(
        &mut out,
        "Sources",
        &mut f
            .sources
            .iter()
            .map(|s| format!("{} ({}, {}): {}", s.id, enum_name(&s.kind), enum_name(&s.relation), s.take)),
    );
    list(
        &mut out,
        "Tensions",
        &mut f
            .tensions
            .iter()
            .map(|t| format!("{}: {} ({})", t.between.join(" vs "), t.nature, enum_name(&t.resolution))),
    );
    list(
        &mut out,
        "Unique contributions",
        &mut f.unique_contributions.iter().map(|c| format!("{}: {}", enum_name(&c.kind), c.content)),
    );
    if let Some(action) = &f.action {
        let _ = write!(out, "\n## Next action\n{} ({})\n", action.goal, enum_name(&action.kind));
    }
    out
}

/// A unit enum's wire name.
fn enum_name<T: Serialize>(value: &T) -> String {
    serde_json::to_value(value).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

fn summary(checkpoint: Checkpoint, detailed: bool, score: Option<f64>) -> CheckpointSummary {
    let f = checkpoint.fields;
    CheckpointSummary {
        id: checkpoint.id,
        saved_at: checkpoint.saved_at,
        workspace: f.workspace.unwrap_or_default(),
        session_id: f.session_id.unwrap_or_default(),
        description: f.description.or(f.thesis).unwrap_or_default(),
        git_branch: if detailed { f.git_branch } else { None },
        highlights: if detailed { f.highlights } else { Vec::new() },
        score,
    }
}

/// What a search asks for besides its query.
#[derive(Debug, Clone, Copy)]
pub struct SearchFilter<'a> {
    pub since: Option<UnixMillis>,
    pub workspace: Option<&'a str>,
    pub limit: usize,
}

pub fn search<V: StateView + ?Sized>(
    view: &V,
    query: &str,
    filter: SearchFilter<'_>,
    revision: u64,
) -> Result<CheckpointSearchResult, V::Error> {
    let mut checkpoints = Vec::new();
    for (id, score) in text_index::search(view, Corpus::Checkpoints, query, None)? {
        if checkpoints.len() == filter.limit {
            break;
        }
        let Some(entry) = view.get(&keyspace::checkpoint_key(&id))? else { continue };
        if filter.since.is_some_and(|since| entry.updated_at < since) {
            continue;
        }
        let Some(checkpoint) = load(&entry) else { continue };
        if visible_in(&checkpoint.fields, filter.workspace) {
            checkpoints.push(summary(checkpoint, true, Some(score)));
        }
    }
    Ok(CheckpointSearchResult { checkpoints, revision })
}

/// Checkpoints saved in `[since, now]` visible in `workspace`, oldest first, at most
/// `limit` (the newest kept); `filter` picks further. Returns them and whether any were cut.
fn saved_between<V: StateView + ?Sized>(
    view: &V,
    since: UnixMillis,
    now: UnixMillis,
    limit: usize,
    filter: &dyn Fn(&Checkpoint) -> bool,
) -> Result<(Vec<Checkpoint>, bool), V::Error> {
    let space = keyspace::prefix(Space::Checkpoint);
    // Ids begin with their second: start just before the one `since` falls in.
    let start = keyspace::checkpoint_key(&UnixMillis(since.0 / 1000 * 1000).to_id_stamp());
    let mut found = std::collections::VecDeque::new();
    let mut truncated = false;
    view.scan(&space, Some(&start), &mut |entry| {
        if entry.updated_at < since || entry.updated_at > now {
            return true;
        }
        if let Some(checkpoint) = load(&entry).filter(|c| filter(c)) {
            if found.len() == limit {
                found.pop_front();
                truncated = true;
            }
            found.push_back(checkpoint);
        }
        true
    })?;
    Ok((found.into(), truncated))
}

/// The newest checkpoints (at most `limit`) of `scope` (`None`: any), newest first.
pub fn recent<V: StateView + ?Sized>(view: &V, limit: usize, scope: Option<&str>) -> Result<Vec<Checkpoint>, V::Error> {
    let filter = |c: &Checkpoint| scope.is_none() || c.fields.scope.as_deref() == scope;
    let (mut found, _) = saved_between(view, UnixMillis(0), UnixMillis(u64::MAX), limit, &filter)?;
    found.reverse();
    Ok(found)
}

pub fn timeline<V: StateView + ?Sized>(
    view: &V,
    span_millis: u64,
    format: TimelineFormat,
    workspace: Option<&str>,
    now: UnixMillis,
    revision: u64,
) -> Result<CheckpointTimelineResult, V::Error> {
    let since = now.minus_millis(span_millis);
    let detailed = format == TimelineFormat::Detailed;
    let filter = |c: &Checkpoint| visible_in(&c.fields, workspace);
    let (found, truncated) = saved_between(view, since, now, MAX_TIMELINE_ITEMS, &filter)?;
    let total = found.len();
    let mut days: Vec<TimelineDay> = Vec::new();
    for checkpoint in found.into_iter().rev() {
        let date = checkpoint.saved_at.get(..10).unwrap_or_default().to_owned();
        if days.last().is_none_or(|d| d.date != date) {
            days.push(TimelineDay { date, workspaces: Vec::new() });
        }
        let Some(day) = days.last_mut() else { continue };
        let item = summary(checkpoint, detailed, None);
        match day.workspaces.iter_mut().find(|w| w.workspace == item.workspace) {
            Some(group) => group.checkpoints.push(item),
            None => {
                day.workspaces.push(TimelineWorkspace { workspace: item.workspace.clone(), checkpoints: vec![item] })
            }
        }
    }
    let formatted = format_timeline(&days, total, detailed);
    Ok(CheckpointTimelineResult {
        since: since.to_rfc3339(),
        until: now.to_rfc3339(),
        total,
        truncated,
        days,
        formatted,
        revision,
    })
}

fn format_timeline(days: &[TimelineDay], total: usize, detailed: bool) -> String {
    let mut out = format!("# Timeline: {total} checkpoint{}\n", if total == 1 { "" } else { "s" });
    for day in days {
        let _ = write!(out, "\n## {}\n", day.date);
        for group in &day.workspaces {
            let _ = writeln!(out, "### {}", workspace_name(&group.workspace));
            for c in &group.checkpoints {
                let time = c.saved_at.get(11..16).unwrap_or_default();
                let _ = writeln!(out, "- {time} {} (`{}`)", c.description, c.id);
                if detailed {
                    if let Some(branch) = &c.git_branch {
                        let _ = writeln!(out, "  - branch: {branch}");
                    }
                    for highlight in &c.highlights {
                        let _ = writeln!(out, "  - {highlight}");
                    }
                }
            }
        }
    }
    out
}

/// Checkpoint ids a page at a time (for resource listings), oldest first.
pub fn ids_page<V: StateView + ?Sized>(
    view: &V,
    after: Option<&str>,
    page: usize,
) -> Result<(Vec<Checkpoint>, bool), V::Error> {
    let space = keyspace::prefix(Space::Checkpoint);
    let after = after.map(keyspace::checkpoint_key);
    let mut out = Vec::new();
    let mut more = false;
    view.scan(&space, after.as_deref(), &mut |entry| {
        if out.len() == page {
            more = true;
            return false;
        }
        out.extend(load(&entry));
        true
    })?;
    Ok((out, more))
}

#[cfg(test)]
mod tests;
