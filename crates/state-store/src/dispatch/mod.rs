//! Calls a catalog operation by name with JSON arguments. Every frontend that speaks JSON
//! (MCP tools, REST routes, the CLI) goes through here, so argument parsing, compatibility
//! profiles and result shapes are the same everywhere.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use state_core::InvalidInput;
use state_core::catalog::Operation;

mod compat;

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
    use Operation::*;
    match op {
        StateGet => encode(engine.get(parse(op, args)?).await?),
        StateSet => encode(engine.set(parse(op, args)?).await?),
        StateDelete => encode(engine.delete(parse(op, args)?).await?),
        StateList => encode(engine.list(parse(op, args)?).await?),
        StateBatchGet => encode(engine.batch_get(parse(op, args)?).await?),
        StateTxn => encode(engine.txn(parse(op, args)?).await?),
        HistoryLog => encode(engine.history(parse(op, args)?).await?),
        LeaseAcquire => encode(engine.lease_acquire(parse(op, args)?).await?),
        LeaseRenew => encode(engine.lease_renew(parse(op, args)?).await?),
        LeaseRelease => encode(engine.lease_release(parse(op, args)?).await?),
        LeaseGet => encode(engine.lease_get(parse(op, args)?).await?),
        LeaseList => encode(engine.lease_list(parse(op, args)?).await?),
        WorkflowCreate => encode(engine.workflow_create(parse(op, args)?).await?),
        WorkflowClaim => encode(engine.workflow_claim(parse(op, args)?).await?),
        WorkflowCheckpoint => encode(engine.workflow_checkpoint(parse(op, args)?).await?),
        WorkflowHeartbeat => encode(engine.workflow_heartbeat(parse(op, args)?).await?),
        WorkflowResume => encode(engine.workflow_resume(parse(op, args)?).await?),
        WorkflowComplete => encode(engine.workflow_complete(parse(op, args)?).await?),
        WorkflowFail => encode(engine.workflow_fail(parse(op, args)?).await?),
        WorkflowCancel => encode(engine.workflow_cancel(parse(op, args)?).await?),
        WorkflowStatus => encode(engine.workflow_status(parse(op, args)?).await?),
        WorkflowList => encode(engine.workflow_list(parse(op, args)?).await?),
        WorkflowDiscover => encode(engine.workflow_discover(parse(op, args)?).await?),
        SessionSave => encode(engine.session_save(parse(op, args)?).await?),
        SessionRestore => encode(engine.session_restore(parse(op, args)?).await?),
        SessionList => encode(engine.session_list(parse(op, args)?).await?),
        StateHealth => {
            parse::<state_core::ops::health::HealthRequest>(op, args)?;
            encode(engine.health().await?)
        }
        StateReset => encode(engine.reset(parse(op, args)?).await?),
        AgentCheckpointGetState
        | AgentCheckpointSetState
        | AgentCheckpointForceSetState
        | AgentCheckpointListState
        | AgentCheckpointDeleteState => compat::agentcheckpoint(engine, op, args).await,
        SidecarStateSet
        | SidecarStateGet
        | SidecarStateDelete
        | SidecarStateList
        | SidecarWorkflowCreate
        | SidecarWorkflowDiscover
        | SidecarWorkflowClaim
        | SidecarWorkflowCheckpoint
        | SidecarWorkflowResume
        | SidecarWorkflowStatus
        | SidecarWorkflowList
        | SidecarLeaseAcquire
        | SidecarLeaseRelease
        | SidecarLeaseRenew
        | SidecarHealth
        | SidecarReset
        | SidecarSessionSave
        | SidecarSessionRestore
        | SidecarHistoryLog => compat::sidecar(engine, op, args).await,
        CaxtonStore | CaxtonRetrieve | CaxtonDelete | CaxtonList | CaxtonExists | CaxtonBatchStore
        | CaxtonBatchRetrieve => compat::caxton(engine, op, args).await,
    }
}

pub(super) fn parse<T: DeserializeOwned>(op: Operation, args: Value) -> Result<T, CallError> {
    serde_path_to_error::deserialize(args).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        let message = if path == "." { inner } else { format!("`{path}`: {inner}") };
        CallError::Arguments { operation: op.name(), message }
    })
}

pub(super) fn encode<T: Serialize>(result: T) -> Result<Value, CallError> {
    serde_json::to_value(result)
        .map_err(|e| CallError::Engine(crate::error::StorageError::Other(format!("cannot encode result: {e}")).into()))
}
