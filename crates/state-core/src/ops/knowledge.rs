//! Knowledge: notes an agent saves once and recalls by relevance, within a token budget.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::checkpoint::{bounded_limit, validate_query};
use super::{DeleteStatus, Paged, WriteStatus};
use crate::error::InvalidInput;
use crate::key::{validate_agent_id, validate_key};
use crate::limits::{check_count, check_text};

/// Longest note, in bytes. Recall packs notes into prompts: a longer text belongs in several
/// notes (or a key), not one.
pub const MAX_NOTE_BYTES: usize = 64 * 1024;
pub const MAX_KEYWORDS: usize = 32;
pub const MAX_KEYWORD_BYTES: usize = 128;
pub const MAX_SOURCE_BYTES: usize = 1024;
/// Recall budget in tokens: default and ceiling.
pub const DEFAULT_RECALL_TOKENS: usize = 2000;
pub const MAX_RECALL_TOKENS: usize = 32_000;
/// Most notes one recall returns, default and ceiling.
pub const DEFAULT_RECALL_ITEMS: usize = 10;
pub const MAX_RECALL_ITEMS: usize = 50;

/// Save a note; saving an existing id makes a new version.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KnowledgeSaveRequest {
    pub id: String,
    /// Markdown.
    pub content: String,
    /// Words it should be found by; they rank higher than body text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keywords: Vec<String>,
    /// Skill or topic; recall with a scope sees that scope and unscoped notes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Where it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Write only if the note is at this version (0 = create only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_version: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl KnowledgeSaveRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        validate_key("id", &self.id)?;
        if self.content.trim().is_empty() {
            return Err(InvalidInput::OutOfRange {
                argument: "content",
                message: "is empty: give the note's text (markdown)".into(),
            });
        }
        if self.content.len() > MAX_NOTE_BYTES {
            return Err(InvalidInput::OutOfRange {
                argument: "content",
                message: format!(
                    "is {} bytes, over the {MAX_NOTE_BYTES}-byte note limit: split it into several notes",
                    self.content.len()
                ),
            });
        }
        check_count("keywords", self.keywords.len(), MAX_KEYWORDS)?;
        for (i, keyword) in self.keywords.iter().enumerate() {
            check_text(&format!("keywords[{i}]"), keyword, MAX_KEYWORD_BYTES)?;
        }
        if let Some(scope) = &self.scope {
            validate_agent_id("scope", scope)?;
        }
        if let Some(source) = &self.source {
            check_text("source", source, MAX_SOURCE_BYTES)?;
        }
        if let Some(agent) = &self.agent_id {
            validate_agent_id("agent_id", agent)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KnowledgeSaveResult {
    /// `conflict`: `expected_version` did not match; `current_version` is the note's.
    pub status: WriteStatus,
    pub id: String,
    /// The version written (0 on conflict).
    pub version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_version: Option<u64>,
    /// The content's size in tokens.
    pub tokens: usize,
    pub revision: u64,
}

/// Notes relevant to a query, best first, as many as fit a token budget.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KnowledgeRecallRequest {
    pub query: String,
    /// Only this scope and unscoped notes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Token budget for the whole answer's context (default 2000, at most 32000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 32000))]
    pub max_tokens: Option<usize>,
    /// Most notes (default 10, at most 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<usize>,
}

impl KnowledgeRecallRequest {
    pub fn budget(&self) -> Result<usize, InvalidInput> {
        bounded_limit("max_tokens", self.max_tokens, DEFAULT_RECALL_TOKENS, MAX_RECALL_TOKENS)
    }

    pub fn item_limit(&self) -> Result<usize, InvalidInput> {
        bounded_limit("limit", self.limit, DEFAULT_RECALL_ITEMS, MAX_RECALL_ITEMS)
    }

    pub fn validate(&self) -> Result<(), InvalidInput> {
        validate_query("query", &self.query)?;
        if let Some(scope) = &self.scope {
            validate_agent_id("scope", scope)?;
        }
        self.budget()?;
        self.item_limit().map(|_| ())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RecalledNote {
    pub id: String,
    pub content: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keywords: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The content's size in tokens.
    pub tokens: usize,
    pub score: f64,
    pub version: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KnowledgeRecallResult {
    pub items: Vec<RecalledNote>,
    /// Sum of the items' tokens.
    pub total_tokens: usize,
    /// Tokens of `formatted_context`; never over the budget.
    pub context_tokens: usize,
    pub budget: usize,
    /// Matching notes left out because they did not fit.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted: usize,
    /// The encoding counts are in (`o200k_base`).
    pub tokenizer: String,
    /// The items as markdown, ready to put in a prompt.
    pub formatted_context: String,
    pub revision: u64,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Notes by id, a page at a time.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KnowledgeListRequest {
    /// Only ids starting with this.
    #[serde(default)]
    pub prefix: String,
    /// Only this scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

super::paged!(KnowledgeListRequest);

impl KnowledgeListRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        crate::key::validate_prefix("prefix", &self.prefix)?;
        if let Some(scope) = &self.scope {
            validate_agent_id("scope", scope)?;
        }
        self.validate_page()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NoteInfo {
    pub id: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keywords: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    pub tokens: usize,
    pub version: u64,
    pub updated_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KnowledgeListResult {
    pub notes: Vec<NoteInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    pub revision: u64,
}

/// Delete a note (and its index entries).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KnowledgeDeleteRequest {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_version: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl KnowledgeDeleteRequest {
    pub fn validate(&self) -> Result<(), InvalidInput> {
        validate_key("id", &self.id)?;
        if let Some(agent) = &self.agent_id {
            validate_agent_id("agent_id", agent)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KnowledgeDeleteResult {
    pub status: DeleteStatus,
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_version: Option<u64>,
    pub revision: u64,
}
