//! Sage's tools over the seam.

use state_core::checkpoint::{self, context};
use state_core::limits::MAX_PAGE;
use state_core::ops::checkpoint::{CheckpointRestoreRequest, Depth, RestoreStatus, bounded_limit};
use state_core::ops::knowledge::{KnowledgeRecallRequest, KnowledgeSaveRequest};
use state_core::plan::Query;
use state_core::{StateView, UnixMillis};

use super::*;
use crate::seam::{Answer, Answered, Failure, Seam, native};

/// The newest checkpoints of one skill or all, newest first: Sage's list, which no native
/// operation answers (the timeline is bounded by time, search by a query).
pub struct Recent {
    limit: usize,
    skill: Option<String>,
}

impl Query for Recent {
    type Output = Vec<Checkpoint>;

    fn read<V: StateView + ?Sized>(&self, view: &V, _: UnixMillis) -> Result<Vec<Checkpoint>, V::Error> {
        checkpoint::recent(view, self.limit, self.skill.as_deref())
    }
}

pub async fn save_checkpoint<S: Seam>(seam: &S, a: SaveCheckpointArgs, id: Option<String>) -> Answered<S::Error> {
    let saved = seam.call(native::CHECKPOINT_SAVE, a.into_request(id)).await?;
    Answer::shaped(&SaveCheckpointResult { checkpoint_id: saved.checkpoint_id, path: saved.uri })
}

pub async fn list_checkpoints<S: Seam>(seam: &S, a: ListCheckpointsArgs, _: Option<String>) -> Answered<S::Error> {
    let limit = bounded_limit("limit", Some(a.limit), 10, MAX_PAGE).map_err(Failure::Invalid)?;
    let recent = seam.query(Recent { limit, skill: a.skill }).await?;
    Answer::shaped(&ListCheckpointsResult { checkpoints: recent.iter().map(listed).collect() })
}

pub async fn load_checkpoint<S: Seam>(seam: &S, a: LoadCheckpointArgs, _: Option<String>) -> Answered<S::Error> {
    let request = CheckpointRestoreRequest {
        checkpoint_id: Some(a.checkpoint_id.clone()),
        depth: Some(Depth::Full),
        ..CheckpointRestoreRequest::default()
    };
    let restored = seam.call(native::CHECKPOINT_RESTORE, request).await?;
    match (restored.status, restored.checkpoint) {
        (RestoreStatus::Ok, Some(checkpoint)) => {
            let formatted_context = context(RESTORED_TITLE, &checkpoint, &restored.session_highlights);
            let checkpoint = serde_json::to_value(&checkpoint).map_err(|e| Failure::Encode(e.to_string()))?;
            Answer::shaped(&LoadCheckpointResult { checkpoint, formatted_context })
        }
        (RestoreStatus::Ambiguous, _) => Err(Failure::Arguments(format!(
            "`checkpoint_id` `{}` matches several checkpoints: {}; give more of the id",
            a.checkpoint_id,
            restored.candidates.join(", ")
        ))),
        _ => Err(Failure::NotFound(format!("no checkpoint matches `{}`", a.checkpoint_id))),
    }
}

pub async fn save_knowledge<S: Seam>(seam: &S, a: SaveKnowledgeArgs, id: Option<String>) -> Answered<S::Error> {
    let request = KnowledgeSaveRequest {
        id: a.id,
        content: a.content,
        keywords: a.keywords,
        scope: a.skill,
        source: a.source,
        request_id: id,
        ..KnowledgeSaveRequest::default()
    };
    let saved = seam.call(native::KNOWLEDGE_SAVE, request).await?;
    Answer::shaped(&SaveKnowledgeResult { id: saved.id, version: saved.version, tokens: saved.tokens })
}

pub async fn recall_knowledge<S: Seam>(seam: &S, a: RecallKnowledgeArgs, _: Option<String>) -> Answered<S::Error> {
    let request = KnowledgeRecallRequest { query: a.query, scope: a.skill, ..KnowledgeRecallRequest::default() };
    let recalled = seam.call(native::KNOWLEDGE_RECALL, request).await?;
    let items: Vec<RecalledItem> = recalled
        .items
        .into_iter()
        .map(|i| RecalledItem { id: i.id, content: i.content, source: i.source.unwrap_or_default(), tokens: i.tokens })
        .collect();
    let formatted_context = if items.is_empty() { NOTHING_RECALLED.to_owned() } else { recalled.formatted_context };
    Answer::shaped(&RecallKnowledgeResult { items, total_tokens: recalled.total_tokens, formatted_context })
}
