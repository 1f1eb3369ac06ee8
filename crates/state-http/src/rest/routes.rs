//! The REST API v1, as one table: each route names its catalog operation and where the
//! operation's arguments come from. The router and the OpenAPI document are both built from
//! this table, so they cannot disagree.
//!
//! Reads are `GET` with the id last in the path (ids may contain `/`, so they take the rest of
//! it); actions on a collection are `POST /v1/<collection>:<verb>` with the arguments in a JSON
//! body, which keeps them apart from any id.

use axum::http::Method;
use state_api::catalog::Operation;

use crate::problem::OnConflict;

/// Where the rest of an operation's arguments come from, beyond path parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Body {
    /// No body: arguments come from the query string.
    None,
    /// A JSON object of arguments.
    Args,
    /// The body is one argument's JSON value (a key's value, a session's context); the others
    /// come from the query string.
    Field(&'static str),
}

/// HTTP conventions a route follows beyond the plain mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    Plain(OnConflict),
    /// `ETag` is the version; `If-None-Match` answers 304.
    KvRead,
    /// `If-Match` is `expected_version`, `If-None-Match: *` is create-only; 412 on conflict.
    KvWrite,
}

#[derive(Debug, Clone)]
pub(crate) struct Route {
    pub(crate) method: Method,
    /// axum syntax: `{name}` is one segment, `{*name}` the rest of the path.
    pub(crate) path: &'static str,
    pub(crate) op: Operation,
    pub(crate) body: Body,
    pub(crate) flavor: Flavor,
}

const PLAIN: Flavor = Flavor::Plain(OnConflict::Conflict);

fn route(method: Method, path: &'static str, op: Operation, body: Body, flavor: Flavor) -> Route {
    Route { method, path, op, body, flavor }
}

pub(crate) fn routes() -> Vec<Route> {
    use Body::{Args, Field, None};
    use Operation::*;
    let (get, put, post, delete) = (Method::GET, Method::PUT, Method::POST, Method::DELETE);
    vec![
        route(get.clone(), "/v1/kv/{*key}", StateGet, None, Flavor::KvRead),
        route(put.clone(), "/v1/kv/{*key}", StateSet, Field("value"), Flavor::KvWrite),
        route(delete.clone(), "/v1/kv/{*key}", StateDelete, None, Flavor::KvWrite),
        route(get.clone(), "/v1/kv", StateList, None, PLAIN),
        route(post.clone(), "/v1/kv:batchGet", StateBatchGet, Args, PLAIN),
        route(post.clone(), "/v1/kv:txn", StateTxn, Args, Flavor::Plain(OnConflict::Ok)),
        route(get.clone(), "/v1/history", HistoryLog, None, PLAIN),
        route(post.clone(), "/v1/leases:acquire", LeaseAcquire, Args, PLAIN),
        route(post.clone(), "/v1/leases:renew", LeaseRenew, Args, PLAIN),
        route(post.clone(), "/v1/leases:release", LeaseRelease, Args, PLAIN),
        route(get.clone(), "/v1/leases/{*resource_id}", LeaseGet, None, PLAIN),
        route(get.clone(), "/v1/leases", LeaseList, None, PLAIN),
        route(post.clone(), "/v1/workflows", WorkflowCreate, Args, PLAIN),
        route(get.clone(), "/v1/workflows", WorkflowList, None, PLAIN),
        route(get.clone(), "/v1/workflows:discover", WorkflowDiscover, None, PLAIN),
        route(post.clone(), "/v1/workflows:claim", WorkflowClaim, Args, PLAIN),
        route(get.clone(), "/v1/workflows/{run_id}", WorkflowStatus, None, PLAIN),
        route(get.clone(), "/v1/workflows/{run_id}/resume", WorkflowResume, None, PLAIN),
        route(post.clone(), "/v1/workflows/{run_id}/checkpoint", WorkflowCheckpoint, Args, PLAIN),
        route(post.clone(), "/v1/workflows/{run_id}/heartbeat", WorkflowHeartbeat, Args, PLAIN),
        route(post.clone(), "/v1/workflows/{run_id}/complete", WorkflowComplete, Args, PLAIN),
        route(post.clone(), "/v1/workflows/{run_id}/fail", WorkflowFail, Args, PLAIN),
        route(post.clone(), "/v1/workflows/{run_id}/cancel", WorkflowCancel, Args, PLAIN),
        route(put.clone(), "/v1/sessions/{*session_id}", SessionSave, Field("context"), PLAIN),
        route(get.clone(), "/v1/sessions/{*session_id}", SessionRestore, None, PLAIN),
        route(get.clone(), "/v1/sessions", SessionList, None, PLAIN),
        route(post.clone(), "/v1/checkpoints", CheckpointSave, Args, PLAIN),
        route(get.clone(), "/v1/checkpoints:restore", CheckpointRestore, None, PLAIN),
        route(get.clone(), "/v1/checkpoints:search", CheckpointSearch, None, PLAIN),
        route(get.clone(), "/v1/checkpoints:timeline", CheckpointTimeline, None, PLAIN),
        route(put.clone(), "/v1/knowledge/{*id}", KnowledgeSave, Args, PLAIN),
        route(delete.clone(), "/v1/knowledge/{*id}", KnowledgeDelete, None, PLAIN),
        route(get.clone(), "/v1/knowledge:recall", KnowledgeRecall, None, PLAIN),
        route(get.clone(), "/v1/knowledge", KnowledgeList, None, PLAIN),
        route(get.clone(), "/v1/store:export", StoreExport, None, PLAIN),
        route(post.clone(), "/v1/store:import", StoreImport, Args, PLAIN),
        route(get, "/v1/health", StateHealth, None, PLAIN),
        route(post, "/v1/admin:reset", StateReset, Args, PLAIN),
    ]
}

impl Route {
    /// Names of the path parameters, in order.
    pub(crate) fn path_params(&self) -> Vec<&'static str> {
        self.path
            .split('/')
            .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
            .map(|name| name.trim_start_matches('*'))
            .collect()
    }

    /// The path as OpenAPI writes it (`{*key}` becomes `{key}`).
    pub(crate) fn openapi_path(&self) -> String {
        self.path.replace("{*", "{")
    }
}

#[cfg(test)]
mod tests;
