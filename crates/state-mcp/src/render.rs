//! The one place where operation results and errors become MCP tool results.
//!
//! Errors a caller can act on (bad arguments, invalid input, compacted history, storage
//! trouble) are tool results with `isError: true`, so the model reads the message and can
//! correct itself; only unroutable requests (an unknown tool) are JSON-RPC errors.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;
use state_core::catalog::{Operation, Presentation};
use state_store::EngineError;
use state_store::dispatch::CallError;

use crate::legacy_json;

pub(crate) fn result(op: Operation, outcome: Result<Value, CallError>) -> CallToolResult {
    match outcome {
        Ok(value) => match op.spec().presentation {
            Presentation::Structured => CallToolResult::structured(value),
            Presentation::LegacyText => {
                CallToolResult::success(vec![ContentBlock::text(legacy_json::to_string(&value))])
            }
            Presentation::JsonText => CallToolResult::success(vec![ContentBlock::text(value.to_string())]),
        },
        Err(error) => CallToolResult::error(vec![ContentBlock::text(error_text(op, &error))]),
    }
}

fn error_text(op: Operation, error: &CallError) -> String {
    match error {
        CallError::Arguments { .. } => format!("{error}. The tool's inputSchema lists the accepted arguments."),
        CallError::Engine(EngineError::Invalid(invalid)) => {
            format!("invalid input to `{}`: {invalid}. Nothing was changed.", op.name())
        }
        CallError::Engine(EngineError::Storage(storage)) => {
            format!(
                "`{}` failed in storage: {storage}. Check state_health; a write that failed here was not applied.",
                op.name()
            )
        }
        CallError::Engine(other) => format!("`{}` failed: {other}", op.name()),
        other => other.to_string(),
    }
}
