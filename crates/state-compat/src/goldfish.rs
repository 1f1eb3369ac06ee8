//! COA Goldfish's one `checkpoint` tool: its whole input schema, the action inferred from the
//! arguments by its rules, its defaults (restore, depth highlights, mode latest, range 7d,
//! limit 10) and its output formats (plain, emoji, json, dual).

use std::fmt::Write as _;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use state_core::ops::checkpoint::{
    CheckpointFields, CheckpointRestoreRequest, CheckpointRestoreResult, CheckpointSaveRequest, CheckpointSaveResult,
    CheckpointSearchRequest, CheckpointSearchResult, CheckpointTimelineRequest, CheckpointTimelineResult, Depth,
    RestoreStatus, TimelineFormat,
};

pub mod calls;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Latest,
    Specific,
    Search,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputFormat {
    Plain,
    #[default]
    Emoji,
    Json,
    Dual,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CheckpointArgs {
    /// save, restore (default), search or timeline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["save", "restore", "search", "timeline"]))]
    pub action: Option<String>,
    /// Checkpoint description (required for save).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub highlights: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_files: Option<Vec<String>>,
    /// Auto-detected if not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_branch: Option<String>,
    /// What you are working on, next steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_context: Option<String>,
    /// Auto-generated if not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Visible from every workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_id: Option<String>,
    /// Default highlights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<Depth>,
    /// Default latest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// E.g. "24h", "1week".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Default 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<f64>,
    /// "1h", "24h", "7d" (default), "30d".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<String>,
    /// Timeline: compact (default) or detailed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<TimelineFormat>,
    /// Path or name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_format: Option<OutputFormat>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Save,
    Restore,
    Search,
    Timeline,
}

/// The action to run: the one named, else Goldfish's inference. `Err` carries a name that is
/// no action.
pub fn action(args: &CheckpointArgs) -> Result<Action, String> {
    if let Some(name) = &args.action {
        return match name.as_str() {
            "save" => Ok(Action::Save),
            "restore" => Ok(Action::Restore),
            "search" => Ok(Action::Search),
            "timeline" => Ok(Action::Timeline),
            other => Err(other.to_owned()),
        };
    }
    let given = |s: &Option<String>| s.as_deref().is_some_and(|s| !s.is_empty());
    Ok(if given(&args.description) {
        Action::Save
    } else if given(&args.query) {
        Action::Search
    } else if given(&args.range) {
        Action::Timeline
    } else {
        // checkpointId, depth or mode mean restore, and so does nothing at all.
        Action::Restore
    })
}

pub fn unknown_action(name: &str) -> String {
    format!("❓ Unknown action: {name}. Supported actions: save, restore, search, timeline")
}

pub fn error_text(message: &str) -> String {
    format!("❌ Error in checkpoint tool: {message}")
}

impl CheckpointArgs {
    pub fn output(&self) -> OutputFormat {
        self.output_format.unwrap_or_default()
    }

    pub fn save_request(&self, request_id: Option<String>) -> CheckpointSaveRequest {
        CheckpointFields {
            description: self.description.clone(),
            workspace: self.workspace.clone(),
            session_id: self.session_id.clone(),
            highlights: self.highlights.clone().unwrap_or_default(),
            active_files: self.active_files.clone().unwrap_or_default(),
            git_branch: self.git_branch.clone(),
            work_context: self.work_context.clone(),
            global: self.global.unwrap_or(false),
            request_id,
            ..CheckpointFields::default()
        }
    }

    /// The restore `mode` asks for; `Err` names what that mode is missing.
    pub fn restore_request(&self) -> Result<CheckpointRestoreRequest, String> {
        let mode = self.mode.unwrap_or(if self.checkpoint_id.is_some() { Mode::Specific } else { Mode::Latest });
        let mut request = CheckpointRestoreRequest {
            workspace: self.workspace.clone(),
            depth: Some(self.depth.unwrap_or_default()),
            ..CheckpointRestoreRequest::default()
        };
        match mode {
            Mode::Latest => {}
            Mode::Specific => {
                request.checkpoint_id = Some(self.checkpoint_id.clone().ok_or("mode \"specific\" needs checkpointId")?);
            }
            Mode::Search => request.query = Some(self.query.clone().ok_or("mode \"search\" needs query")?),
        }
        Ok(request)
    }

    pub fn search_request(&self) -> Result<CheckpointSearchRequest, String> {
        let limit = match self.limit {
            None => None,
            Some(n) if n.fract() == 0.0 && n >= 1.0 => Some(n as usize),
            Some(n) => return Err(format!("limit must be a whole number of 1 or more; got {n}")),
        };
        Ok(CheckpointSearchRequest {
            query: self.query.clone().unwrap_or_default(),
            since: self.since.clone(),
            workspace: self.workspace.clone(),
            limit: Some(limit.unwrap_or(10)),
        })
    }

    pub fn timeline_request(&self) -> CheckpointTimelineRequest {
        CheckpointTimelineRequest {
            range: Some(self.range.clone().unwrap_or_else(|| "7d".to_owned())),
            format: self.format,
            workspace: self.workspace.clone(),
        }
    }
}

/// Text in the asked format: `plain` and `emoji` differ only in their markers; `json` is the
/// structured result; `dual` is the text followed by the JSON.
fn shape(format: OutputFormat, lines: &[(&str, String)], json: &impl Serialize) -> String {
    let json = || serde_json::to_string_pretty(json).unwrap_or_default();
    let text = |emoji: bool| {
        let mut out = String::new();
        for (marker, line) in lines {
            if emoji && !marker.is_empty() {
                let _ = writeln!(out, "{marker} {line}");
            } else {
                let _ = writeln!(out, "{line}");
            }
        }
        out.trim_end().to_owned()
    };
    match format {
        OutputFormat::Plain => text(false),
        OutputFormat::Emoji => text(true),
        OutputFormat::Json => json(),
        OutputFormat::Dual => format!("{}\n\n{}", text(true), json()),
    }
}

pub fn saved(format: OutputFormat, description: &str, result: &CheckpointSaveResult) -> String {
    let mut lines = vec![
        ("💾", format!("Checkpoint saved: {description}")),
        ("🆔", format!("ID: {}", result.checkpoint_id)),
        ("📁", format!("Workspace: {}", result.workspace)),
        ("🔗", format!("Session: {}", result.session_id)),
    ];
    if let Some(branch) = &result.git_branch {
        lines.push(("🌿", format!("Branch: {branch}")));
    }
    lines.push(("⭐", format!("Highlights in session: {}", result.session_highlights)));
    shape(format, &lines, result)
}

pub fn restored(format: OutputFormat, result: &CheckpointRestoreResult) -> String {
    let lines = match result.status {
        RestoreStatus::Ok => vec![("🧠", result.context.trim_end().to_owned())],
        RestoreStatus::NotFound => vec![("🔍", "No checkpoint found to restore.".to_owned())],
        RestoreStatus::Ambiguous => vec![("❓", result.context.clone())],
    };
    shape(format, &lines, result)
}

pub fn found(format: OutputFormat, query: &str, result: &CheckpointSearchResult) -> String {
    let mut lines = vec![("🔍", format!("{} checkpoint(s) match \"{query}\"", result.checkpoints.len()))];
    for c in &result.checkpoints {
        lines.push((
            "•",
            format!("{} [{}] {} ({})", c.saved_at.get(..16).unwrap_or_default(), c.id, c.description, c.workspace),
        ));
    }
    shape(format, &lines, result)
}

pub fn timeline(format: OutputFormat, result: &CheckpointTimelineResult) -> String {
    shape(format, &[("📅", result.formatted.trim_end().to_owned())], result)
}
