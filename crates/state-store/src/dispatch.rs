//! Calls a catalog operation by name with JSON arguments. Every frontend that speaks JSON
//! (MCP tools, REST routes, the CLI) goes through here, so argument parsing, compatibility
//! profiles and result shapes are the same everywhere.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use state_core::InvalidInput;
use state_core::catalog::Operation;
use state_core::compat::agentcheckpoint as ac;
use state_core::ops::kv::{GetRequest, ListRequest};

use crate::engine::Engine;
use crate::error::EngineError;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The arguments do not fit the operation's input schema.
    #[error("invalid arguments for `{operation}`: {message}")]
    Arguments { operation: &'static str, message: String },
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl From<InvalidInput> for CallError {
    fn from(e: InvalidInput) -> CallError {
        CallError::Engine(e.into())
    }
}

pub async fn call(engine: &Engine, op: Operation, args: Value) -> Result<Value, CallError> {
    match op {
        Operation::StateGet => encode(engine.get(parse(op, args)?).await?),
        Operation::StateSet => encode(engine.set(parse(op, args)?).await?),
        Operation::StateDelete => encode(engine.delete(parse(op, args)?).await?),
        Operation::StateList => encode(engine.list(parse(op, args)?).await?),
        Operation::StateBatchGet => encode(engine.batch_get(parse(op, args)?).await?),
        Operation::StateTxn => encode(engine.txn(parse(op, args)?).await?),
        Operation::HistoryLog => encode(engine.history(parse(op, args)?).await?),
        Operation::StateHealth => {
            parse::<state_core::ops::health::HealthRequest>(op, args)?;
            encode(engine.health().await?)
        }
        Operation::AgentCheckpointGetState => {
            let args: ac::GetStateArgs = parse(op, args)?;
            legacy(
                engine
                    .get(GetRequest { key: args.key, version: None, revision: None })
                    .await
                    .map(|r| ac::get_response(&r)),
            )
        }
        Operation::AgentCheckpointSetState => {
            let args: ac::SetStateArgs = parse(op, args)?;
            let value = match ac::parse_value(&args.value) {
                Ok(value) => value,
                Err(response) => return Ok(response),
            };
            let req = ac::set_request(args.key, value, args.expected_version);
            legacy(engine.set(req).await.map(|r| ac::set_response(args.expected_version, &r)))
        }
        Operation::AgentCheckpointForceSetState => {
            let args: ac::ForceSetStateArgs = parse(op, args)?;
            let value = match ac::parse_value(&args.value) {
                Ok(value) => value,
                Err(response) => return Ok(response),
            };
            legacy(engine.set(ac::set_request(args.key, value, -1)).await.map(|r| ac::set_response(-1, &r)))
        }
        Operation::AgentCheckpointListState => {
            let args: ac::ListStateArgs = parse(op, args)?;
            legacy(list_like(engine, &args.pattern).await)
        }
        Operation::AgentCheckpointDeleteState => {
            let args: ac::DeleteStateArgs = parse(op, args)?;
            let key = args.key.clone();
            legacy(engine.delete(ac::delete_request(args.key)).await.map(|_| ac::delete_response(&key)))
        }
    }
}

/// All keys matching a SQL LIKE pattern, read a page at a time.
async fn list_like(engine: &Engine, pattern: &str) -> Result<Value, EngineError> {
    let like = ac::LikePattern::new(pattern);
    let prefix = like.scan_prefix().unwrap_or_default();
    let mut matched = Vec::new();
    let mut cursor = None;
    loop {
        let page = engine
            .list(ListRequest {
                prefix: prefix.clone(),
                limit: Some(state_core::limits::MAX_PAGE),
                cursor,
                include_values: false,
            })
            .await?;
        matched.extend(page.entries.into_iter().filter(|e| like.matches(&e.key)));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(ac::list_response(&matched)),
        }
    }
}

/// Compatibility profiles report unstorable input the way the replaced server did: as a
/// normal result with `status: error`, which their users' prompts already handle.
fn legacy(result: Result<Value, EngineError>) -> Result<Value, CallError> {
    match result {
        Ok(value) => Ok(value),
        Err(EngineError::Invalid(invalid)) => Ok(ac::error(invalid)),
        Err(other) => Err(other.into()),
    }
}

fn parse<T: DeserializeOwned>(op: Operation, args: Value) -> Result<T, CallError> {
    serde_path_to_error::deserialize(args).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        let message = if path == "." { inner } else { format!("`{path}`: {inner}") };
        CallError::Arguments { operation: op.name(), message }
    })
}

fn encode<T: Serialize>(result: T) -> Result<Value, CallError> {
    serde_json::to_value(result)
        .map_err(|e| CallError::Engine(crate::error::StorageError::Other(format!("cannot encode result: {e}")).into()))
}
