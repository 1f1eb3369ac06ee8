//! Checkpoints: what an agent was doing, saved so that it, or another agent, can pick up
//! exactly there. Research fields follow the Sage design; work fields follow Goldfish.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::InvalidInput;
use crate::key::{validate_agent_id, validate_key};
use crate::limits::{check_count, check_text};

/// Longest text field, in bytes; a checkpoint is a summary, not a document store.
pub const MAX_CHECKPOINT_TEXT_BYTES: usize = 16 * 1024;
/// Most items in one list field.
pub const MAX_CHECKPOINT_ITEMS: usize = 100;
/// Longest workspace name or path, in bytes.
pub const MAX_WORKSPACE_BYTES: usize = 1024;
/// Default and largest result counts of search.
pub const DEFAULT_SEARCH_LIMIT: usize = 10;
pub const MAX_SEARCH_LIMIT: usize = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    Synthesis,
    BranchPoint,
    Constraint,
    Transition,
    Manual,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SourceType {
    Person,
    Document,
    Code,
    Api,
    Observation,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Relation {
    Supports,
    Contradicts,
    Nuances,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    Unresolved,
    Resolved,
    Moot,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ContributionType {
    Discovery,
    Experiment,
    Synthesis,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ActionType {
    Decision,
    Implementation,
    Learning,
    Exploration,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: SourceType,
    pub take: String,
    pub relation: Relation,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Tension {
    pub between: Vec<String>,
    pub nature: String,
    pub resolution: Resolution,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Contribution {
    #[serde(rename = "type")]
    pub kind: ContributionType,
    pub content: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NextAction {
    pub goal: String,
    #[serde(rename = "type")]
    pub kind: ActionType,
}

/// A checkpoint's fields: what a save sends and what is stored (everything but what the
/// store assigns; `agent_id` and `request_id` travel with the request, never into the record).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointFields {
    /// What was done or where things stand (this or `thesis` is required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Research: the current answer to the core question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thesis: Option<String>,
    /// Workspace path or name (default: the server's working directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// Session to add to (default: one per workspace per UTC day).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Achievements or decisions; they accumulate in the session.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub highlights: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active_files: Vec<String>,
    /// Default: read from the workspace's `.git/HEAD`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_branch: Option<String>,
    /// What you are working on, next steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_context: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_question: Option<String>,
    /// 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<Trigger>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_questions: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<Source>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tensions: Vec<Tension>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unique_contributions: Vec<Contribution>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<NextAction>,
    /// Skill or topic it belongs to (Sage's `skill`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Visible from every workspace.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub global: bool,
    #[serde(default, skip_serializing)]
    pub agent_id: Option<String>,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing)]
    pub request_id: Option<String>,
}

/// Save a checkpoint: its fields are the request.
pub type CheckpointSaveRequest = CheckpointFields;

fn text(argument: &str, value: &str) -> Result<(), InvalidInput> {
    check_text(argument, value, MAX_CHECKPOINT_TEXT_BYTES)
}

fn texts<'a>(argument: &str, values: impl ExactSizeIterator<Item = &'a String>) -> Result<(), InvalidInput> {
    check_count(argument, values.len(), MAX_CHECKPOINT_ITEMS)?;
    values.enumerate().try_for_each(|(i, v)| text(&format!("{argument}[{i}]"), v))
}

/// A workspace path or name: printable text of bounded length.
pub fn validate_workspace(argument: &str, workspace: &str) -> Result<(), InvalidInput> {
    if workspace.is_empty() || workspace.len() > MAX_WORKSPACE_BYTES {
        return Err(InvalidInput::Malformed {
            argument: argument.to_owned(),
            message: format!("give a workspace path or name of 1 to {MAX_WORKSPACE_BYTES} bytes"),
        });
    }
    validate_key(argument, &workspace[..workspace.len().min(crate::limits::MAX_KEY_BYTES)])
}

impl CheckpointSaveRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        let f = self;
        let title = f.description.as_deref().or(f.thesis.as_deref()).unwrap_or_default();
        if title.trim().is_empty() {
            return Err(InvalidInput::OutOfRange {
                argument: "description",
                message: "is required: say in a sentence what was done or where things stand (or give `thesis`)".into(),
            });
        }
        for (name, value) in [
            ("description", &f.description),
            ("thesis", &f.thesis),
            ("work_context", &f.work_context),
            ("core_question", &f.core_question),
            ("git_branch", &f.git_branch),
        ] {
            if let Some(value) = value {
                text(name, value)?;
            }
        }
        texts("highlights", f.highlights.iter())?;
        texts("active_files", f.active_files.iter())?;
        texts("open_questions", f.open_questions.iter())?;
        check_count("sources", f.sources.len(), MAX_CHECKPOINT_ITEMS)?;
        check_count("tensions", f.tensions.len(), MAX_CHECKPOINT_ITEMS)?;
        check_count("unique_contributions", f.unique_contributions.len(), MAX_CHECKPOINT_ITEMS)?;
        for (i, source) in f.sources.iter().enumerate() {
            text(&format!("sources[{i}].take"), &source.take)?;
        }
        for (i, contribution) in f.unique_contributions.iter().enumerate() {
            text(&format!("unique_contributions[{i}].content"), &contribution.content)?;
        }
        if let Some(confidence) = f.confidence
            && !(0.0..=1.0).contains(&confidence)
        {
            return Err(InvalidInput::OutOfRange {
                argument: "confidence",
                message: format!("must be between 0 and 1 (0.8 = fairly sure); got {confidence}"),
            });
        }
        if let Some(workspace) = &f.workspace {
            validate_workspace("workspace", workspace)?;
        }
        if let Some(session) = &f.session_id {
            validate_key("session_id", session)?;
        }
        if let Some(scope) = &f.scope {
            validate_agent_id("scope", scope)?;
        }
        if let Some(agent) = &self.agent_id {
            validate_agent_id("agent_id", agent)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckpointSaveResult {
    pub status: super::OkStatus,
    /// Time-ordered and readable: `2026-01-10T23-45-00_thesis-slug`.
    pub checkpoint_id: String,
    /// `state://checkpoint/{id}`.
    pub uri: String,
    pub session_id: String,
    pub workspace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_branch: Option<String>,
    /// Highlights the session holds now.
    pub session_highlights: usize,
    pub revision: u64,
}

/// How much a restore brings back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Depth {
    /// Description, work context, branch.
    Minimal,
    /// Plus the session's highlights and active files.
    #[default]
    Highlights,
    /// Every field, research included.
    Full,
}

/// Restore a checkpoint: by id (or unique prefix), the best match of `query`, a session's
/// latest, or (none of those) the workspace's latest.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointRestoreRequest {
    /// Id, unique prefix of one, or part of one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_id: Option<String>,
    /// Restore the best search match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// Restore this session's latest checkpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Limits latest and query (global checkpoints always count). Default: the server's working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<Depth>,
}

impl CheckpointRestoreRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        let chosen = [self.checkpoint_id.is_some(), self.query.is_some(), self.session_id.is_some()];
        if chosen.iter().filter(|c| **c).count() > 1 {
            return Err(InvalidInput::Malformed {
                argument: "checkpoint_id".into(),
                message: "give at most one of `checkpoint_id`, `query` and `session_id`".into(),
            });
        }
        if let Some(id) = &self.checkpoint_id {
            validate_key("checkpoint_id", id)?;
        }
        if let Some(query) = &self.query {
            validate_query("query", query)?;
        }
        if let Some(session) = &self.session_id {
            validate_key("session_id", session)?;
        }
        if let Some(workspace) = &self.workspace {
            validate_workspace("workspace", workspace)?;
        }
        Ok(())
    }
}

/// A search query: some words, of bounded length.
pub fn validate_query(argument: &'static str, query: &str) -> Result<(), InvalidInput> {
    if query.trim().is_empty() {
        return Err(InvalidInput::OutOfRange { argument, message: "is empty: give the words to search for".into() });
    }
    check_text(argument, query, 4096)
}

/// A stored checkpoint as restore returns it (`workspace` and `session_id` always set).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Checkpoint {
    pub id: String,
    pub saved_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(flatten)]
    pub fields: CheckpointFields,
}

/// By hand: the flattened fields refuse unknown names, which `flatten` cannot pass on, so the
/// checkpoint's own three are taken out first and the rest must be exactly the fields.
impl<'de> Deserialize<'de> for Checkpoint {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Checkpoint, D::Error> {
        use serde::de::Error;
        let mut object = serde_json::Map::<String, serde_json::Value>::deserialize(deserializer)?;
        let mut text = |name: &'static str| match object.remove(name) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(text)) => Ok(Some(text)),
            Some(_) => Err(D::Error::custom(format!("`{name}` must be a string"))),
        };
        let id = text("id")?.ok_or_else(|| D::Error::missing_field("id"))?;
        let saved_at = text("saved_at")?.ok_or_else(|| D::Error::missing_field("saved_at"))?;
        let agent_id = text("agent_id")?;
        let fields = CheckpointFields::deserialize(serde_json::Value::Object(object)).map_err(D::Error::custom)?;
        Ok(Checkpoint { id, saved_at, agent_id, fields })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RestoreStatus {
    Ok,
    NotFound,
    /// `checkpoint_id` matched several: see `candidates`.
    Ambiguous,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckpointRestoreResult {
    pub status: RestoreStatus,
    /// `id`, `saved_at`, `agent_id` and the fields `checkpoint_save` takes. Its schema is left
    /// open: the save tool's input already spells the fields out, and every client pays for
    /// a schema in every session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub checkpoint: Option<Checkpoint>,
    /// Every highlight of the checkpoint's session, oldest first (depth highlights and full).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub session_highlights: Vec<String>,
    /// Ids an ambiguous `checkpoint_id` matched.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<String>,
    /// Markdown ready to put in a prompt.
    pub context: String,
    pub revision: u64,
}

/// Search checkpoints by text, best match first.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointSearchRequest {
    pub query: String,
    /// `24h`, `7d`, `1week` back from now, or an RFC 3339 time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Only this workspace (path or name) and global checkpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// 1 to 100 (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<usize>,
}

/// A `limit` within 1..=max, `default` when absent.
pub fn bounded_limit(
    argument: &'static str,
    limit: Option<usize>,
    default: usize,
    max: usize,
) -> Result<usize, InvalidInput> {
    match limit {
        None => Ok(default),
        Some(n) if (1..=max).contains(&n) => Ok(n),
        Some(n) => Err(InvalidInput::OutOfRange { argument, message: format!("must be 1 to {max}; got {n}") }),
    }
}

impl CheckpointSearchRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        validate_query("query", &self.query)?;
        if let Some(workspace) = &self.workspace {
            validate_workspace("workspace", workspace)?;
        }
        if let Some(since) = &self.since {
            crate::time::parse_since("since", since, crate::UnixMillis(0))?;
        }
        bounded_limit("limit", self.limit, DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT).map(|_| ())
    }
}

/// A checkpoint in search results and timelines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckpointSummary {
    pub id: String,
    pub saved_at: String,
    pub workspace: String,
    pub session_id: String,
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_branch: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub highlights: Vec<String>,
    /// Relevance (search only): higher is better.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckpointSearchResult {
    pub checkpoints: Vec<CheckpointSummary>,
    pub revision: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TimelineFormat {
    #[default]
    Compact,
    Detailed,
}

/// Checkpoints of a recent period, newest first, grouped by UTC day and workspace.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointTimelineRequest {
    /// `1h`, `24h`, `7d` (default), `30d`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<TimelineFormat>,
    /// Only this workspace (path or name) and global checkpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
}

/// The longest timeline: a year.
pub const MAX_TIMELINE_MILLIS: u64 = 366 * 86_400_000;
/// Most checkpoints one timeline lists (the newest are kept).
pub const MAX_TIMELINE_ITEMS: usize = 1000;

impl CheckpointTimelineRequest {
    pub fn span_millis(&self) -> Result<u64, InvalidInput> {
        let range = self.range.as_deref().unwrap_or("7d");
        match crate::time::parse_span(range) {
            Some(ms) if ms <= MAX_TIMELINE_MILLIS => Ok(ms),
            _ => Err(InvalidInput::OutOfRange {
                argument: "range",
                message: format!("`{range}` is not a span of up to a year such as 1h, 24h, 7d or 30d"),
            }),
        }
    }

    pub fn validate(&self) -> Result<(), InvalidInput> {
        if let Some(workspace) = &self.workspace {
            validate_workspace("workspace", workspace)?;
        }
        self.span_millis().map(|_| ())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TimelineWorkspace {
    pub workspace: String,
    pub checkpoints: Vec<CheckpointSummary>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TimelineDay {
    /// UTC date, `YYYY-MM-DD`.
    pub date: String,
    pub workspaces: Vec<TimelineWorkspace>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckpointTimelineResult {
    pub since: String,
    pub until: String,
    pub total: usize,
    /// More checkpoints fell in the range than one timeline lists; the oldest were left out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    pub days: Vec<TimelineDay>,
    /// The same as markdown.
    pub formatted: String,
    pub revision: u64,
}
