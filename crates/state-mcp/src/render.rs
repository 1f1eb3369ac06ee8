//! The one place where replies become MCP tool results.
//!
//! Errors a caller can act on (bad arguments, invalid input, compacted history, an unreachable
//! store) are tool results with `isError: true`, so the model reads the message and can
//! correct itself; only unroutable requests (an unknown tool) are JSON-RPC errors. The
//! message itself comes from the seam, so every frontend says the same thing.

use rmcp::model::{CallToolResult, ContentBlock};
use state_api::catalog::{Operation, Presentation};
use state_api::{ErrorCode, Reply};

use crate::legacy_json;

pub(crate) fn reply(op: Operation, reply: Reply) -> CallToolResult {
    match reply.body {
        Ok(value) => match op.spec().presentation {
            Presentation::Structured => CallToolResult::structured(value),
            Presentation::LegacyText => {
                CallToolResult::success(vec![ContentBlock::text(legacy_json::to_string(&value))])
            }
            Presentation::JsonText => CallToolResult::success(vec![ContentBlock::text(value.to_string())]),
            Presentation::PlainText => {
                let text = value.as_str().map_or_else(|| value.to_string(), str::to_owned);
                CallToolResult::success(vec![ContentBlock::text(text)])
            }
        },
        Err(error) => {
            let text = match error.code {
                ErrorCode::InvalidArguments => {
                    format!("{}. The tool's inputSchema lists the accepted arguments.", error.message)
                }
                _ => error.message,
            };
            CallToolResult::error(vec![ContentBlock::text(text)])
        }
    }
}
