//! What an adapter reaches the store through: native operations by their declarations
//! (`Native`), plus the few rules of a replaced server ours lack, which the engine applies
//! as core plans (`state_core::plan::Rule`). An adapter maps its profile's call onto these and
//! shapes the answer; it holds no rule and no storage of its own.

use std::future::Future;
use std::marker::PhantomData;

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use state_core::InvalidInput;
use state_core::limits::MAX_PAGE;
use state_core::ops::kv::{GetRequest, ListRequest, ListedEntry};
use state_core::ops::workflow::{ListRunsRequest, RunSummary};
use state_core::plan::{Query, Rule};

/// A native operation by name, with the request and result types its declaration has. The
/// catalog's tests check each against that declaration's schemas.
pub struct Native<Req, Res> {
    pub name: &'static str,
    types: PhantomData<fn(Req) -> Res>,
}

impl<Req, Res> Clone for Native<Req, Res> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<Req, Res> Copy for Native<Req, Res> {}

impl<Req, Res> Native<Req, Res> {
    const fn new(name: &'static str) -> Native<Req, Res> {
        Native { name, types: PhantomData }
    }
}

/// The native operations adapters call, typed.
pub mod native {
    use super::Native;
    use state_core::ops::admin::{ResetRequest, ResetResult};
    use state_core::ops::checkpoint::{
        CheckpointRestoreRequest, CheckpointRestoreResult, CheckpointSaveRequest, CheckpointSaveResult,
        CheckpointSearchRequest, CheckpointSearchResult, CheckpointTimelineRequest, CheckpointTimelineResult,
    };
    use state_core::ops::health::{HealthRequest, HealthResult};
    use state_core::ops::history::{HistoryRequest, HistoryResult};
    use state_core::ops::knowledge::{
        KnowledgeRecallRequest, KnowledgeRecallResult, KnowledgeSaveRequest, KnowledgeSaveResult,
    };
    use state_core::ops::kv::{
        BatchGetRequest, BatchGetResult, DeleteRequest, DeleteResult, GetRequest, GetResult, ListRequest, ListResult,
        SetRequest, SetResult,
    };
    use state_core::ops::lease::{AcquireRequest, AcquireResult};
    use state_core::ops::session::{
        SessionRestoreRequest, SessionRestoreResult, SessionSaveRequest, SessionSaveResult,
    };
    use state_core::ops::txn::{TxnRequest, TxnResult};
    use state_core::ops::workflow::{
        CreateRunRequest, CreateRunResult, ListRunsRequest, ListRunsResult, ResumeResult, RunRequest, RunStatusRequest,
        RunStatusResult,
    };

    macro_rules! natives {
        ($($constant:ident: $req:ty => $res:ty = $name:literal;)*) => {
            $(pub const $constant: Native<$req, $res> = Native::new($name);)*

            /// Every one: name, input schema, output schema (for the catalog's tests).
            pub fn all() -> Vec<(&'static str, fn() -> super::Schema, fn() -> super::Schema)> {
                vec![$(($name, super::request_schema::<$req>, super::result_schema::<$res>)),*]
            }
        };
    }

    natives! {
        GET: GetRequest => GetResult = "state_get";
        SET: SetRequest => SetResult = "state_set";
        DELETE: DeleteRequest => DeleteResult = "state_delete";
        LIST: ListRequest => ListResult = "state_list";
        BATCH_GET: BatchGetRequest => BatchGetResult = "state_batch_get";
        TXN: TxnRequest => TxnResult = "state_txn";
        HISTORY: HistoryRequest => HistoryResult = "history_log";
        LEASE_ACQUIRE: AcquireRequest => AcquireResult = "lease_acquire";
        WORKFLOW_CREATE: CreateRunRequest => CreateRunResult = "workflow_create";
        WORKFLOW_STATUS: RunStatusRequest => RunStatusResult = "workflow_status";
        WORKFLOW_RESUME: RunRequest => ResumeResult = "workflow_resume";
        WORKFLOW_LIST: ListRunsRequest => ListRunsResult = "workflow_list";
        SESSION_SAVE: SessionSaveRequest => SessionSaveResult = "session_save";
        SESSION_RESTORE: SessionRestoreRequest => SessionRestoreResult = "session_restore";
        HEALTH: HealthRequest => HealthResult = "state_health";
        RESET: ResetRequest => ResetResult = "state_reset";
        CHECKPOINT_SAVE: CheckpointSaveRequest => CheckpointSaveResult = "checkpoint_save";
        CHECKPOINT_RESTORE: CheckpointRestoreRequest => CheckpointRestoreResult = "checkpoint_restore";
        CHECKPOINT_SEARCH: CheckpointSearchRequest => CheckpointSearchResult = "checkpoint_search";
        CHECKPOINT_TIMELINE: CheckpointTimelineRequest => CheckpointTimelineResult = "checkpoint_timeline";
        KNOWLEDGE_SAVE: KnowledgeSaveRequest => KnowledgeSaveResult = "knowledge_save";
        KNOWLEDGE_RECALL: KnowledgeRecallRequest => KnowledgeRecallResult = "knowledge_recall";
    }
}

/// A type's JSON schema (2020-12, as the catalog generates them), for comparing two
/// declarations of one operation.
pub type Schema = Value;

fn request_schema<T: JsonSchema>() -> Schema {
    SchemaSettings::draft2020_12().for_deserialize().into_generator().into_root_schema_for::<T>().to_value()
}

fn result_schema<T: JsonSchema>() -> Schema {
    SchemaSettings::draft2020_12().for_serialize().into_generator().into_root_schema_for::<T>().to_value()
}

/// The store, as an adapter sees it.
pub trait Seam: Sync {
    /// Why a call failed, as the seam reports it; adapters pass it on unread, save for
    /// [`Seam::invalid`].
    type Error: Send;

    fn call<Req, Res>(
        &self,
        op: Native<Req, Res>,
        request: Req,
    ) -> impl Future<Output = Result<Res, Self::Error>> + Send
    where
        Req: Serialize + Send,
        Res: DeserializeOwned;

    fn apply<R: Rule>(&self, rule: R) -> impl Future<Output = Result<R::Output, Self::Error>> + Send;

    fn query<Q: Query>(&self, query: Q) -> impl Future<Output = Result<Q::Output, Self::Error>> + Send;

    /// The input the store refused, when that is why `error` happened: profiles whose server
    /// answered unstorable input with a result rather than an error need it.
    fn invalid(error: &Self::Error) -> Option<&InvalidInput>;
}

/// Why an adapter's call failed.
#[derive(Debug)]
pub enum Failure<E> {
    /// The subject does not exist, which that server reported by raising an error.
    NotFound(String),
    /// Input the profile refuses before calling anything.
    Invalid(InvalidInput),
    /// Arguments that do not fit the tool (an adapter that parses its own).
    Arguments(String),
    /// A shape that could not be encoded: a bug, and the call may have been applied.
    Encode(String),
    /// The seam refused a call.
    Seam(E),
}

impl<E> From<E> for Failure<E> {
    fn from(error: E) -> Failure<E> {
        Failure::Seam(error)
    }
}

/// What happened, as a profile's answer says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Conflict,
    NotFound,
    Invalid,
}

/// A profile's answer: its exact shape, and what happened.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub outcome: Outcome,
    pub body: Value,
}

impl Answer {
    /// A shape whose own `status` field (if any) says what happened: `conflict`,
    /// `not_found`, `error`; anything else is ok.
    pub fn shaped<T: Serialize, E>(shape: &T) -> Result<Answer, Failure<E>> {
        let body = serde_json::to_value(shape).map_err(|e| Failure::Encode(e.to_string()))?;
        let outcome = match body.get("status").and_then(Value::as_str) {
            Some("conflict") => Outcome::Conflict,
            Some("not_found") => Outcome::NotFound,
            Some("error") => Outcome::Invalid,
            _ => Outcome::Ok,
        };
        Ok(Answer { outcome, body })
    }

    /// Text or a bare value, with the outcome given.
    pub fn plain(outcome: Outcome, body: Value) -> Answer {
        Answer { outcome, body }
    }
}

/// An adapter's result.
pub type Answered<E> = Result<Answer, Failure<E>>;

/// Every user key under `prefix`, read a page at a time.
pub(crate) async fn all_keys<S: Seam>(seam: &S, prefix: &str) -> Result<Vec<ListedEntry>, S::Error> {
    let mut entries = Vec::new();
    let mut cursor = None;
    loop {
        let request = ListRequest {
            prefix: prefix.to_owned(),
            limit: Some(MAX_PAGE),
            cursor,
            include_values: false,
            delimiter: None,
        };
        let page = seam.call(native::LIST, request).await?;
        entries.extend(page.entries);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(entries),
        }
    }
}

/// Every workflow run, oldest first.
pub(crate) async fn all_runs<S: Seam>(seam: &S) -> Result<Vec<RunSummary>, S::Error> {
    let mut runs = Vec::new();
    let mut cursor = None;
    loop {
        let request = ListRunsRequest { limit: Some(MAX_PAGE), cursor, ..Default::default() };
        let page = seam.call(native::WORKFLOW_LIST, request).await?;
        runs.extend(page.runs);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(runs),
        }
    }
}

/// A key's current value and version.
pub(crate) fn get(key: String) -> GetRequest {
    GetRequest { key, version: None, revision: None }
}
