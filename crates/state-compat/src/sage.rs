//! The Sage MCP design's tools: `save_checkpoint`, `list_checkpoints`, `load_checkpoint`,
//! `save_knowledge`, `recall_knowledge`, with its argument and result shapes. A checkpoint's
//! `path` is its `state://checkpoint/{id}` resource, which stands where Sage returned a file.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use state_core::ops::checkpoint::{
    Checkpoint, CheckpointFields, CheckpointSaveRequest, Contribution, NextAction, Source, Tension, Trigger,
};

pub mod calls;

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SaveCheckpointArgs {
    pub core_question: String,
    pub thesis: String,
    /// 0 to 1.
    pub confidence: f64,
    #[serde(default = "synthesis")]
    pub trigger: Trigger,
    #[serde(default)]
    pub open_questions: Vec<String>,
    #[serde(default)]
    pub sources: Vec<Source>,
    #[serde(default)]
    pub tensions: Vec<Tension>,
    #[serde(default)]
    pub unique_contributions: Vec<Contribution>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<NextAction>,
    /// Skill it belongs to (for `list_checkpoints`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
    /// Workspace (default: the server's working directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
}

fn synthesis() -> Trigger {
    Trigger::Synthesis
}

impl SaveCheckpointArgs {
    pub fn into_request(self, request_id: Option<String>) -> CheckpointSaveRequest {
        CheckpointFields {
            thesis: Some(self.thesis),
            core_question: Some(self.core_question),
            confidence: Some(self.confidence),
            trigger: Some(self.trigger),
            open_questions: self.open_questions,
            sources: self.sources,
            tensions: self.tensions,
            unique_contributions: self.unique_contributions,
            action: self.action,
            scope: self.skill,
            workspace: self.workspace,
            request_id,
            ..CheckpointFields::default()
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SaveCheckpointResult {
    pub checkpoint_id: String,
    /// The checkpoint's resource URI.
    pub path: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListCheckpointsArgs {
    #[serde(default = "ten")]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
}

fn ten() -> usize {
    10
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ListedCheckpoint {
    pub id: String,
    pub thesis: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<Trigger>,
    /// `YYYY-MM-DDTHH:MM:SS`, UTC.
    pub saved: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ListCheckpointsResult {
    pub checkpoints: Vec<ListedCheckpoint>,
}

/// How much of a thesis a listing shows.
const LISTED_THESIS_CHARS: usize = 100;

pub fn listed(checkpoint: &Checkpoint) -> ListedCheckpoint {
    let f = &checkpoint.fields;
    let full = f.thesis.as_deref().or(f.description.as_deref()).unwrap_or_default();
    let thesis = if full.chars().count() > LISTED_THESIS_CHARS {
        format!("{}...", full.chars().take(LISTED_THESIS_CHARS).collect::<String>())
    } else {
        full.to_owned()
    };
    ListedCheckpoint {
        id: checkpoint.id.clone(),
        thesis,
        confidence: f.confidence,
        trigger: f.trigger,
        saved: checkpoint.saved_at.get(..19).unwrap_or_default().to_owned(),
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadCheckpointArgs {
    /// The id or part of it.
    pub checkpoint_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct LoadCheckpointResult {
    pub checkpoint: Value,
    pub formatted_context: String,
}

/// The heading Sage's restored context starts with.
pub const RESTORED_TITLE: &str = "Research Context (Restored)";

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SaveKnowledgeArgs {
    pub id: String,
    /// Markdown.
    pub content: String,
    #[serde(default)]
    pub keywords: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SaveKnowledgeResult {
    pub id: String,
    pub version: u64,
    pub tokens: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallKnowledgeArgs {
    pub query: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RecalledItem {
    pub id: String,
    pub content: String,
    pub source: String,
    pub tokens: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RecallKnowledgeResult {
    pub items: Vec<RecalledItem>,
    pub total_tokens: usize,
    pub formatted_context: String,
}

/// What Sage answered when nothing matched.
pub const NOTHING_RECALLED: &str = "No relevant knowledge found.";
