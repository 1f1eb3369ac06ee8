//! The operation catalog: every operation declared once, with everything the seam and the
//! frontends derive from it: name, title, group, effect (mutating or not), request and result
//! types (so their JSON schemas), description, how it runs on the engine, and what a caller's
//! token must cover. MCP tool lists, dispatch, authorization, OpenAPI and REST's argument
//! typing read it; a declaration missing a piece does not compile: a request type a mutating
//! operation takes must carry an idempotency kind of the operation's name, a result type must
//! have an outcome class (`Classify`), and the engine's answer must be the declared result type.

use std::future::Future;
use std::pin::Pin;

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};
use state_core::idempotency::Mutating;
use state_core::ops::NameListRequest;
use state_store::EngineError;

use state_compat::{agentcheckpoint as ac, caxton as cx, goldfish as gf, memory as mm, sage as sg, sidecar as sc};
use state_core::ops::admin::{ResetRequest, ResetResult};
use state_core::ops::checkpoint::{
    CheckpointRestoreRequest, CheckpointRestoreResult, CheckpointSaveRequest, CheckpointSaveResult,
    CheckpointSearchRequest, CheckpointSearchResult, CheckpointTimelineRequest, CheckpointTimelineResult,
};
use state_core::ops::health::{HealthRequest, HealthResult};
use state_core::ops::history::{HistoryRequest, HistoryResult};
use state_core::ops::knowledge::{
    KnowledgeDeleteRequest, KnowledgeDeleteResult, KnowledgeListRequest, KnowledgeListResult, KnowledgeRecallRequest,
    KnowledgeRecallResult, KnowledgeSaveRequest, KnowledgeSaveResult,
};
use state_core::ops::kv::{
    BatchGetRequest, BatchGetResult, DeleteRequest, DeleteResult, GetRequest, GetResult, ListRequest, ListResult,
    SetRequest, SetResult,
};
use state_core::ops::lease::{
    AcquireRequest, AcquireResult, HoldResult, LeaseGetRequest, LeaseGetResult, LeaseListRequest, LeaseListResult,
    ReleaseRequest, RenewRequest,
};
use state_core::ops::queue::{
    QueueAckRequest, QueueListResult, QueueNackRequest, QueuePeekRequest, QueuePeekResult, QueueReceiveRequest,
    QueueReceiveResult, QueueRedriveRequest, QueueRedriveResult, QueueSendRequest, QueueSendResult, QueueSettleResult,
};
use state_core::ops::reservation::{
    PathCheckRequest, PathCheckResult, ReservationListRequest, ReservationListResult, ReservationReleaseRequest,
    ReservationRenewRequest, ReservationResult, ReserveRequest, ReserveResult, ScopeListResult,
};
use state_core::ops::semaphore::{
    PermitResult, SemaphoreAcquireRequest, SemaphoreAcquireResult, SemaphoreGetRequest, SemaphoreGetResult,
    SemaphoreListResult, SemaphoreReleaseRequest, SemaphoreRenewRequest,
};
use state_core::ops::session::{
    SessionListRequest, SessionListResult, SessionRestoreRequest, SessionRestoreResult, SessionSaveRequest,
    SessionSaveResult,
};
use state_core::ops::transfer::{ExportRequest, ExportResult, ImportRequest, ImportResult};
use state_core::ops::txn::{TxnRequest, TxnResult};
use state_core::ops::usage::{UsageRequest, UsageResult};
use state_core::ops::watch::{WatchRequest, WatchResult};
use state_core::ops::workflow::{AwaitSignalRequest, AwaitSignalResult, SignalRequest, SignalResult};
use state_core::ops::workflow::{
    CancelRequest, CancelResult, CheckpointRequest, CheckpointResult, ClaimRequest, ClaimResult, CompleteRequest,
    CreateRunRequest, CreateRunResult, DiscoverRequest, FailRequest, FinishResult, HeartbeatRequest, HeartbeatResult,
    ListRunsRequest, ListRunsResult, ResumeResult, RunRequest, RunStatusRequest, RunStatusResult,
};

use crate::auth::{self, Need, Right::Admin, Right::Read, Right::Write};
use crate::local::{self, CallError, Local};
use crate::reply::Reply;
use RestMethod::{Delete, Get, Post, Put};
use RestShape::{ConflictIsAnAnswer, KvRead, KvWrite, Plain};

pub type JsonObject = Map<String, Value>;

/// Every operation of every profile. Names may repeat across profiles (a compatibility
/// profile reuses the tool names of the server it replaces); variants never do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    StateGet,
    StateSet,
    StateDelete,
    StateList,
    StateBatchGet,
    StateTxn,
    HistoryLog,
    LeaseAcquire,
    LeaseRenew,
    LeaseRelease,
    LeaseGet,
    LeaseList,
    SemaphoreAcquire,
    SemaphoreRenew,
    SemaphoreRelease,
    SemaphoreGet,
    SemaphoreList,
    PathsReserve,
    PathsRenew,
    PathsRelease,
    PathsList,
    PathsCheck,
    PathsScopes,
    QueueSend,
    QueueReceive,
    QueueAck,
    QueueNack,
    QueueRedrive,
    QueuePeek,
    QueueList,
    WorkflowCreate,
    WorkflowClaim,
    WorkflowCheckpoint,
    WorkflowHeartbeat,
    WorkflowResume,
    WorkflowComplete,
    WorkflowFail,
    WorkflowCancel,
    WorkflowSignal,
    WorkflowAwaitSignal,
    WorkflowStatus,
    WorkflowList,
    WorkflowDiscover,
    SessionSave,
    SessionRestore,
    SessionList,
    StateHealth,
    StateReset,
    StateWatch,
    CheckpointSave,
    CheckpointRestore,
    CheckpointSearch,
    CheckpointTimeline,
    KnowledgeSave,
    KnowledgeRecall,
    KnowledgeList,
    KnowledgeDelete,
    StoreExport,
    StoreImport,
    StoreUsage,
    AgentCheckpointGetState,
    AgentCheckpointSetState,
    AgentCheckpointForceSetState,
    AgentCheckpointListState,
    AgentCheckpointDeleteState,
    SidecarStateSet,
    SidecarStateGet,
    SidecarStateDelete,
    SidecarStateList,
    SidecarWorkflowCreate,
    SidecarWorkflowDiscover,
    SidecarWorkflowClaim,
    SidecarWorkflowCheckpoint,
    SidecarWorkflowResume,
    SidecarWorkflowStatus,
    SidecarWorkflowList,
    SidecarLeaseAcquire,
    SidecarLeaseRelease,
    SidecarLeaseRenew,
    SidecarHealth,
    SidecarReset,
    SidecarSessionSave,
    SidecarSessionRestore,
    SidecarHistoryLog,
    CaxtonStore,
    CaxtonRetrieve,
    CaxtonDelete,
    CaxtonList,
    CaxtonExists,
    CaxtonBatchStore,
    CaxtonBatchRetrieve,
    SageSaveCheckpoint,
    SageListCheckpoints,
    SageLoadCheckpoint,
    SageSaveKnowledge,
    SageRecallKnowledge,
    GoldfishCheckpoint,
    MemoryCreateEntities,
    MemoryCreateRelations,
    MemoryAddObservations,
    MemoryDeleteEntities,
    MemoryDeleteObservations,
    MemoryDeleteRelations,
    MemoryReadGraph,
    MemorySearchNodes,
    MemoryOpenNodes,
    MemoryImport,
}

/// Which tool surface an operation belongs to. Compatibility profiles reproduce the tool names
/// and shapes of servers we replace, so their users switch without changing prompts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Profile {
    Native,
    /// The `agentcheckpoint` server: get_state, set_state, force_set_state, list_state, delete_state.
    AgentCheckpoint,
    /// The `mcp-state-sidecar` server: its state_*, workflow_*, lease_*, session_*, history_log
    /// and sidecar_* tools, replacing native tools of the same name.
    Sidecar,
    /// Caxton's StateTool interface: store, retrieve, delete, list, exists, batch_store, batch_retrieve.
    Caxton,
    /// The Sage MCP design: save_checkpoint, list_checkpoints, load_checkpoint, save_knowledge,
    /// recall_knowledge.
    Sage,
    /// COA Goldfish: one `checkpoint` tool that infers save, restore, search or timeline.
    Goldfish,
    /// The official MCP memory server: a knowledge graph of entities, relations and
    /// observations (create_entities, add_observations, read_graph, search_nodes, ...).
    Memory,
}

impl Profile {
    pub const ALL: [Profile; 7] = [
        Profile::Native,
        Profile::AgentCheckpoint,
        Profile::Sidecar,
        Profile::Caxton,
        Profile::Sage,
        Profile::Goldfish,
        Profile::Memory,
    ];

    pub fn from_name(name: &str) -> Option<Profile> {
        Profile::ALL.into_iter().find(|p| p.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Profile::Native => "native",
            Profile::AgentCheckpoint => "agentcheckpoint",
            Profile::Sidecar => "sidecar",
            Profile::Caxton => "caxton",
            Profile::Sage => "sage",
            Profile::Goldfish => "goldfish",
            Profile::Memory => "memory",
        }
    }
}

/// Groups a client can enable or leave out to keep its tool list short.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolGroup {
    Kv,
    Lease,
    /// Permits shared by up to N holders (opt-in).
    Semaphore,
    /// Path reservations for agents editing one repository (opt-in).
    Paths,
    /// Queues and mailboxes between agents (opt-in).
    Queue,
    Workflow,
    Session,
    Admin,
    Watch,
    Checkpoint,
    Knowledge,
    /// Moving a whole store's contents out and in (`statectl export` / `import`).
    Transfer,
}

impl ToolGroup {
    /// Served when a client names no groups: coordination state. Checkpoints and knowledge
    /// are asked for (`--tools`), or come with a profile that has them, because every tool
    /// costs every session context tokens.
    pub const DEFAULT: [ToolGroup; 6] =
        [ToolGroup::Kv, ToolGroup::Lease, ToolGroup::Workflow, ToolGroup::Session, ToolGroup::Admin, ToolGroup::Watch];

    pub const ALL: [ToolGroup; 12] = [
        ToolGroup::Kv,
        ToolGroup::Lease,
        ToolGroup::Semaphore,
        ToolGroup::Paths,
        ToolGroup::Queue,
        ToolGroup::Workflow,
        ToolGroup::Session,
        ToolGroup::Admin,
        ToolGroup::Watch,
        ToolGroup::Checkpoint,
        ToolGroup::Knowledge,
        ToolGroup::Transfer,
    ];

    pub fn from_name(name: &str) -> Option<ToolGroup> {
        ToolGroup::ALL.into_iter().find(|g| g.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            ToolGroup::Kv => "kv",
            ToolGroup::Lease => "lease",
            ToolGroup::Semaphore => "semaphore",
            ToolGroup::Paths => "paths",
            ToolGroup::Queue => "queue",
            ToolGroup::Workflow => "workflow",
            ToolGroup::Session => "session",
            ToolGroup::Admin => "admin",
            ToolGroup::Watch => "watch",
            ToolGroup::Checkpoint => "checkpoint",
            ToolGroup::Knowledge => "knowledge",
            ToolGroup::Transfer => "transfer",
        }
    }

    /// What the group is for, in a few words a model chooses by.
    pub fn summary(self) -> &'static str {
        match self {
            ToolGroup::Kv => "keys: get, set, delete, list, batch get, transactions, history",
            ToolGroup::Lease => "exclusive leases with fencing tokens",
            ToolGroup::Semaphore => "permits shared by up to N holders, fenced, with a bounded wait",
            ToolGroup::Paths => "reserve file paths and globs, exclusive or shared; conflicts are refused",
            ToolGroup::Queue => "mailboxes between agents: send, receive with a receipt, ack, dead letters",
            ToolGroup::Workflow => "runs that workers claim, checkpoint, resume and finish",
            ToolGroup::Session => "versioned context snapshots",
            ToolGroup::Admin => "store health, wipe",
            ToolGroup::Watch => "wait for changes instead of polling",
            ToolGroup::Checkpoint => "save where work stands; restore, search, timeline",
            ToolGroup::Knowledge => "notes recalled by relevance within a token budget",
            ToolGroup::Transfer => "export and import every record; measure a prefix",
        }
    }
}

/// What an operation does to the store, for clients deciding whether to ask before calling it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    ReadOnly,
    /// Changes state; repeating it with the same arguments changes nothing more.
    IdempotentWrite,
    /// Adds to the store and never changes or removes what is there; repeating it adds nothing
    /// more (the memory server's create and add tools).
    Additive,
    /// Changes or removes existing state.
    Write,
}

/// How a result is presented to a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presentation {
    /// Structured JSON matching `output_schema`, plus the same JSON as text.
    Structured,
    /// Text only, in the exact form the replaced server printed (no structured content).
    LegacyText,
    /// Text only, compact JSON (results that are not objects: null, true, arrays).
    JsonText,
    /// Text only: the result is a string, shown as it is (Goldfish's formatted answers).
    PlainText,
}

pub struct OperationSpec {
    pub operation: Operation,
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub profile: Profile,
    pub group: ToolGroup,
    pub effect: Effect,
    pub presentation: Presentation,
    input_schema: fn() -> JsonObject,
    output_schema: Option<fn() -> JsonObject>,
    run: Runner,
    needs: Needs,
    /// Where it lives in the REST API, beside the seam route every operation has
    /// (`POST /v1/call/{profile}/{name}`). `state_watch` streams at `GET /v1/watch` instead.
    pub rest: Option<RestRoute>,
    /// Its `statectl` command, beside `statectl call <id>` which reaches every operation.
    pub cli: Cli,
}

/// How `statectl` offers an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cli {
    /// A command of its own: the words after `statectl`, e.g. `workflow claim`.
    Command(&'static str),
    /// Only through `statectl call`, for the reason given.
    CallOnly(&'static str),
}

/// Why a replaced server's tool has no command of its own.
const REPLACED: &str = "a replaced server's tool, for its own clients; people use the native commands";

/// A REST route of an operation (`state-http` serves and documents it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestRoute {
    pub method: RestMethod,
    /// axum syntax: `{name}` is one segment, `{*name}` the rest of the path (ids contain `/`).
    pub path: &'static str,
    pub body: RestBody,
    pub shape: RestShape,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestMethod {
    Get,
    Put,
    Post,
    Delete,
}

/// Where the rest of an operation's arguments come from, beyond path parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestBody {
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
pub enum RestShape {
    /// Outcomes map to statuses; a conflict is 409.
    Plain,
    /// A conflict is an answer (a transaction's failure branch ran): 200.
    ConflictIsAnAnswer,
    /// `ETag` is the version; `If-None-Match` answers 304.
    KvRead,
    /// `If-Match` is `expected_version`, `If-None-Match: *` is create-only; 412 on conflict.
    KvWrite,
}

const fn rest(method: RestMethod, path: &'static str, body: RestBody, shape: RestShape) -> Option<RestRoute> {
    Some(RestRoute { method, path, body, shape })
}

/// A call running on an engine in this process.
pub(crate) type CallFuture<'a> = Pin<Box<dyn Future<Output = Result<Reply, CallError>> + Send + 'a>>;

/// How an operation runs.
#[derive(Clone, Copy)]
pub(crate) enum Runner {
    /// Parse the request, call the engine, classify and encode the result.
    Engine(for<'a> fn(&'a Local, Value) -> CallFuture<'a>),
    /// A replaced server's tool: parse its arguments, run its adapter over the seam
    /// (`state_compat::<profile>::calls`), reply with its shape.
    Compat(for<'a> fn(&'a Local, Value, Option<String>) -> CallFuture<'a>),
}

/// What a caller's token must cover to make the call.
#[derive(Clone, Copy)]
pub(crate) enum Needs {
    /// Read off the request; arguments that do not parse need nothing, as the call then fails
    /// on them without touching anything.
    Typed(fn(&Value) -> Result<Vec<Need>, String>),
    /// The whole store, with the right the effect asks for: the replaced servers' argument
    /// shapes name no prefixes to check.
    WholeStore,
    /// The whole store, as an administrator: wiping it.
    WholeStoreAdmin,
}

impl OperationSpec {
    pub fn input_schema(&self) -> JsonObject {
        (self.input_schema)()
    }

    pub fn output_schema(&self) -> Option<JsonObject> {
        self.output_schema.map(|f| f())
    }

    pub(crate) fn runner(&self) -> Runner {
        self.run
    }

    pub(crate) fn needs(&self) -> Needs {
        self.needs
    }
}

impl Operation {
    pub fn all() -> impl Iterator<Item = Operation> {
        SPECS.iter().map(|spec| spec.operation)
    }

    pub fn spec(self) -> &'static OperationSpec {
        // SPECS lists operations in declaration order; a test pins that.
        &SPECS[self as usize]
    }

    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// A name unique across profiles and stable across versions, for wire protocols:
    /// `profile/name`, e.g. `native/state_get` or `sidecar/state_get`.
    pub fn id(self) -> String {
        format!("{}/{}", self.spec().profile.name(), self.name())
    }

    pub fn from_id(id: &str) -> Option<Operation> {
        let (profile, name) = id.split_once('/')?;
        let profile = Profile::from_name(profile)?;
        Operation::all().find(|op| op.spec().profile == profile && op.name() == name)
    }

    /// Whether it changes the store (and so takes a `request_id`).
    pub fn is_mutating(self) -> bool {
        self.spec().effect != Effect::ReadOnly
    }
}

/// Whether two names are the same, at compile time.
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// A mutating operation's request is recorded for retries under the operation's name: its
/// type must say so (`state_core::ops`'s `mutating!` list), or this does not compile.
macro_rules! records_retries {
    (ReadOnly, $req:ty, $name:literal) => {};
    ($effect:ident, $req:ty, $name:literal) => {
        const _: () = assert!(
            same(<$req as Mutating>::KIND, $name),
            concat!("the request of ", $name, " records retries under another name")
        );
    };
}

/// Runs a native operation: parse, call, check the engine answers the declared result type.
macro_rules! runner {
    ($req:ty => $res:ty, engine: $method:ident) => {{
        fn run(local: &Local, args: Value) -> CallFuture<'_> {
            Box::pin(async move {
                let request: $req = local::parse(args)?;
                let result: Result<$res, EngineError> = local.engine().$method(request).await;
                local::reply(result)
            })
        }
        Runner::Engine(run)
    }};
    ($req:ty => $res:ty, local: $function:path) => {{
        fn run(local: &Local, args: Value) -> CallFuture<'_> {
            Box::pin(async move {
                let request: $req = local::parse(args)?;
                let result: Result<$res, EngineError> = $function(local, request).await;
                local::reply(result)
            })
        }
        Runner::Engine(run)
    }};
    // A read the core states as a `Query` on the request itself: no engine verb to name.
    ($req:ty => $res:ty, query) => {{
        fn run(local: &Local, args: Value) -> CallFuture<'_> {
            Box::pin(async move {
                let request: $req = local::parse(args)?;
                let result: Result<$res, EngineError> = match request.validate() {
                    Ok(()) => local.engine().query(request).await,
                    Err(invalid) => Err(invalid.into()),
                };
                local::reply(result)
            })
        }
        Runner::Engine(run)
    }};
}

/// Runs a compatibility tool: its arguments parsed as the declared type (or, for an adapter
/// that answers malformed calls itself, passed as parsed-or-why-not), its adapter run over
/// this process's seam.
macro_rules! adapter {
    ($req:ty, $adapter:path) => {{
        fn run(local: &Local, args: Value, id: Option<String>) -> CallFuture<'_> {
            Box::pin(async move {
                let request: $req = local::parse(args)?;
                local::seam::reply($adapter(&local::seam::LocalSeam(local), request, id).await)
            })
        }
        Runner::Compat(run)
    }};
    ($req:ty, unparsed: $adapter:path) => {{
        fn run(local: &Local, args: Value, id: Option<String>) -> CallFuture<'_> {
            Box::pin(async move {
                let request: Result<$req, String> = local::parse_or_why(args);
                local::seam::reply($adapter(&local::seam::LocalSeam(local), request, id).await)
            })
        }
        Runner::Compat(run)
    }};
}

/// What a token must cover, read off the typed request.
macro_rules! typed_needs {
    ($req:ty, $rule:expr) => {{
        fn needs(args: &Value) -> Result<Vec<Need>, String> {
            let request = <$req as serde::Deserialize>::deserialize(args).map_err(|e| e.to_string())?;
            let rule: fn(&$req) -> Vec<Need> = $rule;
            Ok(rule(&request))
        }
        Needs::Typed(needs)
    }};
}

macro_rules! spec {
    ($op:ident, $profile:ident, $name:literal, $title:literal, $group:ident, $effect:ident, $presentation:ident, $req:ty, $res:expr, $run:expr, $needs:expr, $desc:literal) => {
        spec!(
            $op,
            $profile,
            $name,
            $title,
            $group,
            $effect,
            $presentation,
            $req,
            $res,
            $run,
            $needs,
            None,
            Cli::CallOnly(REPLACED),
            $desc
        )
    };
    ($op:ident, $profile:ident, $name:literal, $title:literal, $group:ident, $effect:ident, $presentation:ident, $req:ty, $res:expr, $run:expr, $needs:expr, $rest:expr, $cli:expr, $desc:literal) => {
        OperationSpec {
            operation: Operation::$op,
            name: $name,
            title: $title,
            description: $desc,
            profile: Profile::$profile,
            group: ToolGroup::$group,
            effect: Effect::$effect,
            presentation: Presentation::$presentation,
            input_schema: input_schema::<$req>,
            output_schema: $res,
            run: $run,
            needs: $needs,
            rest: $rest,
            cli: $cli,
        }
    };
}

/// A native operation: structured result with an output schema, run on the engine (or by a
/// function of `local` given the engine's host).
macro_rules! native {
    ($op:ident, $name:literal, $title:literal, $group:ident, $effect:ident, $req:ty => $res:ty, engine: $method:ident, needs: $needs:expr, rest: $rest:expr, cli: $cli:expr, $desc:literal) => {
        native!(@declare $op, $name, $title, $group, $effect, $req, $res, runner!($req => $res, engine: $method), $needs, $rest, $cli, $desc)
    };
    ($op:ident, $name:literal, $title:literal, $group:ident, $effect:ident, $req:ty => $res:ty, local: $function:path, needs: $needs:expr, rest: $rest:expr, cli: $cli:expr, $desc:literal) => {
        native!(@declare $op, $name, $title, $group, $effect, $req, $res, runner!($req => $res, local: $function), $needs, $rest, $cli, $desc)
    };
    ($op:ident, $name:literal, $title:literal, $group:ident, $effect:ident, $req:ty => $res:ty, query, needs: $needs:expr, rest: $rest:expr, cli: $cli:expr, $desc:literal) => {
        native!(@declare $op, $name, $title, $group, $effect, $req, $res, runner!($req => $res, query), $needs, $rest, $cli, $desc)
    };
    (@declare $op:ident, $name:literal, $title:literal, $group:ident, $effect:ident, $req:ty, $res:ty, $run:expr, $needs:expr, $rest:expr, $cli:expr, $desc:literal) => {{
        records_retries!($effect, $req, $name);
        spec!(
            $op,
            Native,
            $name,
            $title,
            $group,
            $effect,
            Structured,
            $req,
            Some(output_schema::<$res>),
            $run,
            typed_needs!($req, $needs),
            $rest,
            $cli,
            $desc
        )
    }};
}

/// A sidecar tool: structured, like that FastMCP server answered.
macro_rules! sidecar {
    ($op:ident, $name:literal, $group:ident, $effect:ident, $req:ty => $res:ty, $($rest:tt)*) => {
        structured!($op, Sidecar, $name, $group, $effect, $req => $res, $($rest)*)
    };
}

/// A tool whose result is plain text: Python-printed JSON (agentcheckpoint) or the JSON of a
/// trait's return value (caxton).
macro_rules! text {
    ($op:ident, $profile:ident, $presentation:ident, $name:literal, $effect:ident, $req:ty, $adapter:path, $desc:literal) => {
        spec!(
            $op,
            $profile,
            $name,
            $name,
            Kv,
            $effect,
            $presentation,
            $req,
            None,
            adapter!($req, $adapter),
            Needs::WholeStore,
            $desc
        )
    };
}

/// A structured tool of a replaced server (sidecar's, or one that replaces a checkpoint or
/// knowledge server). Its needs are the whole store's unless it says otherwise.
macro_rules! structured {
    ($op:ident, $profile:ident, $name:literal, titled $title:literal, $group:ident, $effect:ident, $req:ty => $res:ty, $adapter:path, $desc:literal) => {
        spec!(
            $op,
            $profile,
            $name,
            $title,
            $group,
            $effect,
            Structured,
            $req,
            Some(output_schema::<$res>),
            adapter!($req, $adapter),
            Needs::WholeStore,
            $desc
        )
    };
    ($op:ident, $profile:ident, $name:literal, $group:ident, $effect:ident, $req:ty => $res:ty, $adapter:path, $desc:literal) => {
        structured!($op, $profile, $name, $group, $effect, $req => $res, $adapter, needs: WholeStore, $desc)
    };
    ($op:ident, $profile:ident, $name:literal, $group:ident, $effect:ident, $req:ty => $res:ty, $adapter:path, needs: $needs:ident, $desc:literal) => {
        spec!(
            $op,
            $profile,
            $name,
            $name,
            $group,
            $effect,
            Structured,
            $req,
            Some(output_schema::<$res>),
            adapter!($req, $adapter),
            Needs::$needs,
            $desc
        )
    };
}

static SPECS: [OperationSpec; 107] = [
    native!(
        StateGet,
        "state_get",
        "Get a key",
        Kv,
        ReadOnly,
        GetRequest => GetResult,
        engine: get,
        needs: |r| vec![Need::Id(r.key.clone(), Read)],
        rest: rest(Get, "/v1/kv/{*key}", RestBody::None, KvRead),
        cli: Cli::Command("get"),
        "Read a key's JSON value, version and store revision. Pass `version` or `revision` to read it as it was earlier."
    ),
    native!(
        StateSet,
        "state_set",
        "Set a key",
        Kv,
        Write,
        SetRequest => SetResult,
        engine: set,
        needs: |r| [vec![Need::Id(r.key.clone(), Write)], auth::fenced(&r.lease)].concat(),
        rest: rest(Put, "/v1/kv/{*key}", RestBody::Field("value"), KvWrite),
        cli: Cli::Command("put"),
        "Write a JSON value. Pass `expected_version` from your last read (0 = create only) so you never overwrite another agent's change; a conflict returns the current version and value to retry with."
    ),
    native!(
        StateDelete,
        "state_delete",
        "Delete a key",
        Kv,
        IdempotentWrite,
        DeleteRequest => DeleteResult,
        engine: delete,
        needs: |r| [vec![Need::Id(r.key.clone(), Write)], auth::fenced(&r.lease)].concat(),
        rest: rest(Delete, "/v1/kv/{*key}", RestBody::None, KvWrite),
        cli: Cli::Command("del"),
        "Delete a key, optionally only if `expected_version` matches."
    ),
    native!(
        StateList,
        "state_list",
        "List keys",
        Kv,
        ReadOnly,
        ListRequest => ListResult,
        engine: list,
        needs: |r| vec![Need::Prefix(r.prefix.clone(), Read)],
        rest: rest(Get, "/v1/kv", RestBody::None, Plain),
        cli: Cli::Command("ls"),
        "List keys under a prefix in key order with their versions (values if asked), a page at a time."
    ),
    native!(
        StateBatchGet,
        "state_batch_get",
        "Get several keys",
        Kv,
        ReadOnly,
        BatchGetRequest => BatchGetResult,
        engine: batch_get,
        needs: |r| r.keys.iter().map(|k| Need::Id(k.clone(), Read)).collect(),
        rest: rest(Post, "/v1/kv:batchGet", RestBody::Args, Plain),
        cli: Cli::CallOnly("`statectl get` reads one key; scripts batch with `call`"),
        "Read several keys from one consistent snapshot."
    ),
    native!(
        StateTxn,
        "state_txn",
        "Transaction",
        Kv,
        Write,
        TxnRequest => TxnResult,
        engine: txn,
        needs: auth::txn_needs,
        rest: rest(Post, "/v1/kv:txn", RestBody::Args, ConflictIsAnAnswer),
        cli: Cli::Command("txn"),
        "Atomic multi-key transaction: if every `compare` holds run the `success` ops, else the `failure` ops (get/put/delete), all under one revision."
    ),
    native!(
        HistoryLog,
        "history_log",
        "Change history",
        Kv,
        ReadOnly,
        HistoryRequest => HistoryResult,
        engine: history,
        needs: |r| auth::history_needs(r.kind, r.key.clone(), r.prefix.clone()),
        rest: rest(Get, "/v1/history", RestBody::None, Plain),
        cli: Cli::Command("history"),
        "Changes with revision, op, version, agent and time: keys, leases, runs, sessions (`kind`), for one id, a prefix or everything; page forward with `since_revision`."
    ),
    native!(
        LeaseAcquire,
        "lease_acquire",
        "Acquire a lease",
        Lease,
        Write,
        AcquireRequest => AcquireResult,
        engine: lease_acquire,
        needs: |r| vec![Need::Id(r.resource_id.clone(), Write)],
        rest: rest(Post, "/v1/leases:acquire", RestBody::Args, Plain),
        cli: Cli::Command("lease acquire"),
        "Take an exclusive lease on a resource for ttl_seconds, or learn who holds it. A grant returns a fencing token larger than any before: pass `lease` and `token` on writes it guards."
    ),
    native!(
        LeaseRenew,
        "lease_renew",
        "Renew a lease",
        Lease,
        Write,
        RenewRequest => HoldResult,
        engine: lease_renew,
        needs: |r| vec![Need::Id(r.resource_id.clone(), Write)],
        rest: rest(Post, "/v1/leases:renew", RestBody::Args, Plain),
        cli: Cli::Command("lease renew"),
        "Extend a lease you hold (holder_id and token) to ttl_seconds from now."
    ),
    native!(
        LeaseRelease,
        "lease_release",
        "Release a lease",
        Lease,
        IdempotentWrite,
        ReleaseRequest => HoldResult,
        engine: lease_release,
        needs: |r| vec![Need::Id(r.resource_id.clone(), Write)],
        rest: rest(Post, "/v1/leases:release", RestBody::Args, Plain),
        cli: Cli::Command("lease release"),
        "Give up a lease you hold (holder_id and token), freeing the resource at once."
    ),
    native!(
        LeaseGet,
        "lease_get",
        "Who holds a lease",
        Lease,
        ReadOnly,
        LeaseGetRequest => LeaseGetResult,
        engine: lease_get,
        needs: |r| vec![Need::Id(r.resource_id.clone(), Read)],
        rest: rest(Get, "/v1/leases/{*resource_id}", RestBody::None, Plain),
        cli: Cli::Command("lease get"),
        "Who holds a resource's lease and until when."
    ),
    native!(
        LeaseList,
        "lease_list",
        "List leases",
        Lease,
        ReadOnly,
        LeaseListRequest => LeaseListResult,
        engine: lease_list,
        needs: |r| vec![Need::Prefix(r.prefix.clone(), Read)],
        rest: rest(Get, "/v1/leases", RestBody::None, Plain),
        cli: Cli::Command("lease ls"),
        "Leases currently held, by resource prefix, a page at a time."
    ),
    native!(
        SemaphoreAcquire,
        "semaphore_acquire",
        "Acquire a semaphore permit",
        Semaphore,
        Write,
        SemaphoreAcquireRequest => SemaphoreAcquireResult,
        engine: semaphore_acquire,
        needs: |r| vec![Need::Id(r.name.clone(), Write)],
        rest: rest(Post, "/v1/semaphores:acquire", RestBody::Args, Plain),
        cli: Cli::Command("semaphore acquire"),
        "Take one of `capacity` permits of a named resource for ttl_seconds, waiting up to wait_seconds when all are held; a refusal lists the holders. A grant returns a fencing token; acquiring again renews yours."
    ),
    native!(
        SemaphoreRenew,
        "semaphore_renew",
        "Renew a semaphore permit",
        Semaphore,
        Write,
        SemaphoreRenewRequest => PermitResult,
        engine: semaphore_renew,
        needs: |r| vec![Need::Id(r.name.clone(), Write)],
        rest: rest(Post, "/v1/semaphores:renew", RestBody::Args, Plain),
        cli: Cli::Command("semaphore renew"),
        "Extend a permit you hold (holder_id and token) to ttl_seconds from now."
    ),
    native!(
        SemaphoreRelease,
        "semaphore_release",
        "Release a semaphore permit",
        Semaphore,
        IdempotentWrite,
        SemaphoreReleaseRequest => PermitResult,
        engine: semaphore_release,
        needs: |r| vec![Need::Id(r.name.clone(), Write)],
        rest: rest(Post, "/v1/semaphores:release", RestBody::Args, Plain),
        cli: Cli::Command("semaphore release"),
        "Give back a permit you hold (holder_id and token), freeing it at once."
    ),
    native!(
        SemaphoreGet,
        "semaphore_get",
        "Who holds a semaphore",
        Semaphore,
        ReadOnly,
        SemaphoreGetRequest => SemaphoreGetResult,
        engine: semaphore_get,
        needs: |r| vec![Need::Id(r.name.clone(), Read)],
        rest: rest(Get, "/v1/semaphores/{*name}", RestBody::None, Plain),
        cli: Cli::Command("semaphore get"),
        "A semaphore's capacity, free permits, and each holder with its expiry."
    ),
    native!(
        SemaphoreList,
        "semaphore_list",
        "List semaphores",
        Semaphore,
        ReadOnly,
        NameListRequest => SemaphoreListResult,
        engine: semaphore_list,
        needs: |r| vec![Need::Prefix(r.prefix.clone(), Read)],
        rest: rest(Get, "/v1/semaphores", RestBody::None, Plain),
        cli: Cli::Command("semaphore ls"),
        "Semaphores with a permit held, by name prefix, a page at a time, each with its holders."
    ),
    native!(
        PathsReserve,
        "paths_reserve",
        "Reserve paths",
        Paths,
        Write,
        ReserveRequest => ReserveResult,
        engine: paths_reserve,
        needs: |r| vec![Need::Id(r.scope.clone(), Write)],
        rest: rest(Post, "/v1/paths:reserve", RestBody::Args, Plain),
        cli: Cli::Command("paths reserve"),
        "Reserve paths or globs in a scope (a repository) for ttl_seconds, exclusive by default. Refused, reserving nothing, if another holder's overlaps where either is exclusive (up to 10 named), or past 500 holds, 2048 patterns, 50 per holder."
    ),
    native!(
        PathsRenew,
        "paths_renew",
        "Renew a path reservation",
        Paths,
        Write,
        ReservationRenewRequest => ReservationResult,
        engine: paths_renew,
        needs: |r| vec![Need::Id(r.scope.clone(), Write)],
        rest: rest(Post, "/v1/paths:renew", RestBody::Args, Plain),
        cli: Cli::Command("paths renew"),
        "Extend a reservation you hold (holder_id and reservation_id) to ttl_seconds from now."
    ),
    native!(
        PathsRelease,
        "paths_release",
        "Release path reservations",
        Paths,
        IdempotentWrite,
        ReservationReleaseRequest => ReservationResult,
        engine: paths_release,
        needs: |r| vec![Need::Id(r.scope.clone(), Write)],
        rest: rest(Post, "/v1/paths:release", RestBody::Args, Plain),
        cli: Cli::Command("paths release"),
        "Give back one reservation (reservation_id), or all of yours in the scope."
    ),
    native!(
        PathsList,
        "paths_list",
        "List path reservations",
        Paths,
        ReadOnly,
        ReservationListRequest => ReservationListResult,
        engine: paths_list,
        needs: |r| vec![Need::Id(r.scope.clone(), Read)],
        rest: rest(Get, "/v1/paths", RestBody::None, Plain),
        cli: Cli::Command("paths ls"),
        "Live reservations of a scope, or of one holder in it."
    ),
    native!(
        PathsCheck,
        "paths_check",
        "May I write this path",
        Paths,
        ReadOnly,
        PathCheckRequest => PathCheckResult,
        engine: paths_check,
        needs: |r| vec![Need::Id(r.scope.clone(), Read)],
        rest: rest(Get, "/v1/paths/check", RestBody::None, Plain),
        cli: Cli::Command("paths check"),
        "Whether holder_id may write a path now: not while another holder's exclusive reservation covers it (up to 20 named in `blocking`)."
    ),
    native!(
        PathsScopes,
        "paths_scopes",
        "List reservation scopes",
        Paths,
        ReadOnly,
        NameListRequest => ScopeListResult,
        engine: paths_scopes,
        needs: |r| vec![Need::Prefix(r.prefix.clone(), Read)],
        rest: rest(Get, "/v1/paths/scopes", RestBody::None, Plain),
        cli: Cli::Command("paths scopes"),
        "Scopes with live reservations, by name prefix, a page at a time, each with its reservations."
    ),
    native!(
        QueueSend,
        "queue_send",
        "Send a message",
        Queue,
        Write,
        QueueSendRequest => QueueSendResult,
        engine: queue_send,
        needs: |r| vec![Need::Id(r.queue.clone(), Write)],
        rest: rest(Post, "/v1/queues:send", RestBody::Args, Plain),
        cli: Cli::Command("queue send"),
        "Put a JSON message on a queue (an agent's inbox: `inbox/<agent>`), with priority 0-9, delay_seconds, ttl_seconds, max_attempts; a dedupe_key still in the queue returns that message."
    ),
    native!(
        QueueReceive,
        "queue_receive",
        "Receive a message",
        Queue,
        Write,
        QueueReceiveRequest => QueueReceiveResult,
        engine: queue_receive,
        needs: |r| vec![Need::Id(r.queue.clone(), Write)],
        rest: rest(Post, "/v1/queues:receive", RestBody::Args, Plain),
        cli: Cli::Command("queue receive"),
        "Take the next message (highest priority, then oldest), hidden from others for visibility_seconds, waiting up to wait_seconds. Ack it with its receipt when done, or it shows again."
    ),
    native!(
        QueueAck,
        "queue_ack",
        "Acknowledge a message",
        Queue,
        IdempotentWrite,
        QueueAckRequest => QueueSettleResult,
        engine: queue_ack,
        needs: |r| vec![Need::Id(r.queue.clone(), Write)],
        rest: rest(Post, "/v1/queues:ack", RestBody::Args, Plain),
        cli: Cli::Command("queue ack"),
        "Remove a received message for good (message_id and receipt). `stale`: it was received again since, and stays."
    ),
    native!(
        QueueNack,
        "queue_nack",
        "Give a message back",
        Queue,
        Write,
        QueueNackRequest => QueueSettleResult,
        engine: queue_nack,
        needs: |r| vec![Need::Id(r.queue.clone(), Write)],
        rest: rest(Post, "/v1/queues:nack", RestBody::Args, Plain),
        cli: Cli::Command("queue nack"),
        "Return a received message to the queue now or after delay_seconds; past max_attempts it moves to `<queue>.dead`, which keeps it (queue_redrive returns it)."
    ),
    native!(
        QueueRedrive,
        "queue_redrive",
        "Move dead letters back",
        Queue,
        Write,
        QueueRedriveRequest => QueueRedriveResult,
        engine: queue_redrive,
        needs: |r| vec![Need::Id(r.queue.clone(), Write), Need::Id(format!("{}.dead", r.queue), Write)],
        rest: rest(Post, "/v1/queues:redrive", RestBody::Args, Plain),
        cli: Cli::Command("queue redrive"),
        "Move up to limit messages of `<queue>.dead` back to the queue, oldest first, visible now, their attempts starting over; `remaining` says how many are left."
    ),
    native!(
        QueuePeek,
        "queue_peek",
        "Look at a queue",
        Queue,
        ReadOnly,
        QueuePeekRequest => QueuePeekResult,
        engine: queue_peek,
        needs: |r| vec![Need::Id(r.queue.clone(), Read)],
        rest: rest(Get, "/v1/queues", RestBody::None, Plain),
        cli: Cli::Command("queue peek"),
        "Counts of visible, in-flight, delayed and spent (bound for `<queue>.dead`) messages, and the first ones in receive order, without receiving."
    ),
    native!(
        QueueList,
        "queue_list",
        "List queues",
        Queue,
        ReadOnly,
        NameListRequest => QueueListResult,
        engine: queue_list,
        needs: |r| vec![Need::Prefix(r.prefix.clone(), Read)],
        rest: rest(Get, "/v1/queues:list", RestBody::None, Plain),
        cli: Cli::Command("queue ls"),
        "Queues holding messages, by name prefix (`inbox/` for every inbox), a page at a time, with their counts."
    ),
    native!(
        WorkflowCreate,
        "workflow_create",
        "Create a run",
        Workflow,
        Write,
        CreateRunRequest => CreateRunResult,
        engine: workflow_create,
        // A dependency is read (its outcome shows in waiting_on and blocked_by), and a
        // concurrency key is a name shared with every run that gives it: both are someone's.
        needs: |r| {
            let mut needs = vec![Need::Id(r.name.clone(), Write)];
            needs.extend(r.depends_on.iter().map(|run| Need::Run(run.clone(), Read)));
            needs.extend(r.concurrency_key.iter().map(|key| Need::Id(key.clone(), Write)));
            needs
        },
        rest: rest(Post, "/v1/workflows", RestBody::Args, Plain),
        cli: Cli::Command("workflow create"),
        "Register a run (name, tags, input, max_attempts) for a worker to claim; returns a time-ordered run_id."
    ),
    native!(
        WorkflowClaim,
        "workflow_claim",
        "Claim a run",
        Workflow,
        Write,
        ClaimRequest => ClaimResult,
        engine: workflow_claim,
        needs: auth::claim_needs,
        rest: rest(Post, "/v1/workflows:claim", RestBody::Args, Plain),
        cli: Cli::Command("workflow claim"),
        "Claim a run by run_id, or the oldest claimable one matching tags and name, under a lease that lapses unless renewed. Returns the token for checkpoint, heartbeat, complete and fail."
    ),
    native!(
        WorkflowCheckpoint,
        "workflow_checkpoint",
        "Checkpoint a step",
        Workflow,
        IdempotentWrite,
        CheckpointRequest => CheckpointResult,
        engine: workflow_checkpoint,
        needs: |r| vec![Need::Run(r.run_id.clone(), Write)],
        rest: rest(Post, "/v1/workflows/{run_id}/checkpoint", RestBody::Args, Plain),
        cli: Cli::Command("workflow checkpoint"),
        "Record a finished step's output as the run's holder with its token. Steps start at 1 and advance by one; re-sending a recorded step with the same output is harmless."
    ),
    native!(
        WorkflowHeartbeat,
        "workflow_heartbeat",
        "Renew a claim",
        Workflow,
        Write,
        HeartbeatRequest => HeartbeatResult,
        engine: workflow_heartbeat,
        needs: |r| vec![Need::Run(r.run_id.clone(), Write)],
        rest: rest(Post, "/v1/workflows/{run_id}/heartbeat", RestBody::Args, Plain),
        cli: Cli::Command("workflow heartbeat"),
        "Renew your claim on a run before its lease lapses."
    ),
    native!(
        WorkflowResume,
        "workflow_resume",
        "Resume a run",
        Workflow,
        ReadOnly,
        RunRequest => ResumeResult,
        engine: workflow_resume,
        needs: |r| vec![Need::Run(r.run_id.clone(), Read)],
        rest: rest(Get, "/v1/workflows/{run_id}/resume", RestBody::None, Plain),
        cli: Cli::Command("workflow resume"),
        "Everything a worker needs to continue a run: status, attempt, input and every accepted step's output."
    ),
    native!(
        WorkflowComplete,
        "workflow_complete",
        "Complete a run",
        Workflow,
        IdempotentWrite,
        CompleteRequest => FinishResult,
        engine: workflow_complete,
        needs: |r| vec![Need::Run(r.run_id.clone(), Write)],
        rest: rest(Post, "/v1/workflows/{run_id}/complete", RestBody::Args, Plain),
        cli: Cli::Command("workflow complete"),
        "Finish a run you hold, with its result."
    ),
    native!(
        WorkflowFail,
        "workflow_fail",
        "Fail an attempt",
        Workflow,
        Write,
        FailRequest => FinishResult,
        engine: workflow_fail,
        needs: |r| vec![Need::Run(r.run_id.clone(), Write)],
        rest: rest(Post, "/v1/workflows/{run_id}/fail", RestBody::Args, Plain),
        cli: Cli::Command("workflow fail"),
        "Report that your attempt failed. Retryable failures return the run to the queue until max_attempts; others fail it."
    ),
    native!(
        WorkflowCancel,
        "workflow_cancel",
        "Cancel a run",
        Workflow,
        IdempotentWrite,
        CancelRequest => CancelResult,
        engine: workflow_cancel,
        needs: |r| vec![Need::Run(r.run_id.clone(), Write)],
        rest: rest(Post, "/v1/workflows/{run_id}/cancel", RestBody::Args, Plain),
        cli: Cli::Command("workflow cancel"),
        "Cancel a run that has not finished; its worker's later writes are refused."
    ),
    native!(
        WorkflowSignal,
        "workflow_signal",
        "Signal a run",
        Workflow,
        Write,
        SignalRequest => SignalResult,
        engine: workflow_signal,
        needs: |r| vec![Need::Run(r.run_id.clone(), Write)],
        rest: rest(Post, "/v1/workflows/{run_id}/signal", RestBody::Args, Plain),
        cli: Cli::Command("workflow signal"),
        "Send a run a named signal with a value (an approval, a result). Its worker sees every signal on claim, heartbeat, checkpoint and resume; a run parked for it becomes claimable."
    ),
    native!(
        WorkflowAwaitSignal,
        "workflow_await_signal",
        "Park a run for a signal",
        Workflow,
        Write,
        AwaitSignalRequest => AwaitSignalResult,
        engine: workflow_await_signal,
        needs: |r| vec![Need::Run(r.run_id.clone(), Write)],
        rest: rest(Post, "/v1/workflows/{run_id}/await-signal", RestBody::Args, Plain),
        cli: Cli::Command("workflow await-signal"),
        "Wait for a named signal on a run you hold: answered at once if it came, else your claim ends and the run is claimable again, without spending an attempt, once it comes."
    ),
    native!(
        WorkflowStatus,
        "workflow_status",
        "Run status",
        Workflow,
        ReadOnly,
        RunStatusRequest => RunStatusResult,
        engine: workflow_status,
        needs: |r| vec![Need::Run(r.run_id.clone(), Read)],
        rest: rest(Get, "/v1/workflows/{run_id}", RestBody::None, Plain),
        cli: Cli::Command("workflow status"),
        "A run's status, attempt, last step and holder, without step outputs; wait_seconds waits for it to finish."
    ),
    native!(
        WorkflowList,
        "workflow_list",
        "List runs",
        Workflow,
        ReadOnly,
        ListRunsRequest => ListRunsResult,
        engine: workflow_list,
        needs: |r| vec![auth::runs_named(r.name.clone())],
        rest: rest(Get, "/v1/workflows", RestBody::None, Plain),
        cli: Cli::Command("workflow ls"),
        "Runs filtered by status, name and tags, oldest first, a page at a time."
    ),
    native!(
        WorkflowDiscover,
        "workflow_discover",
        "Discover claimable runs",
        Workflow,
        ReadOnly,
        DiscoverRequest => ListRunsResult,
        engine: workflow_discover,
        needs: |r| vec![auth::runs_named(r.name.clone())],
        rest: rest(Get, "/v1/workflows:discover", RestBody::None, Plain),
        cli: Cli::CallOnly("`workflow ls` filters by status and name; tags need `call`"),
        "Runs a worker could claim now, filtered by name and tags, oldest first, a page at a time."
    ),
    native!(
        SessionSave,
        "session_save",
        "Save a session",
        Session,
        Write,
        SessionSaveRequest => SessionSaveResult,
        engine: session_save,
        needs: |r| vec![Need::Id(r.session_id.clone(), Write)],
        rest: rest(Put, "/v1/sessions/{*session_id}", RestBody::Field("context"), Plain),
        cli: Cli::Command("session save"),
        "Save a context snapshot under a session id; every save is kept as a new version."
    ),
    native!(
        SessionRestore,
        "session_restore",
        "Restore a session",
        Session,
        ReadOnly,
        SessionRestoreRequest => SessionRestoreResult,
        engine: session_restore,
        needs: |r| vec![Need::Id(r.session_id.clone(), Read)],
        rest: rest(Get, "/v1/sessions/{*session_id}", RestBody::None, Plain),
        cli: Cli::Command("session restore"),
        "Restore a session's latest context, or a given version."
    ),
    native!(
        SessionList,
        "session_list",
        "List sessions",
        Session,
        ReadOnly,
        SessionListRequest => SessionListResult,
        engine: session_list,
        needs: |r| vec![Need::Prefix(r.prefix.clone(), Read)],
        rest: rest(Get, "/v1/sessions", RestBody::None, Plain),
        cli: Cli::Command("session ls"),
        "Sessions by id prefix with their latest version."
    ),
    native!(
        StateHealth,
        "state_health",
        "Store health",
        Admin,
        ReadOnly,
        HealthRequest => HealthResult,
        local: local::health,
        needs: |_| vec![Need::Nothing],
        rest: rest(Get, "/v1/health", RestBody::None, Plain),
        cli: Cli::Command("health"),
        "Store status: backend, revision, key count, database size, uptime."
    ),
    native!(
        StateReset,
        "state_reset",
        "Wipe the store",
        Admin,
        Write,
        ResetRequest => ResetResult,
        engine: reset,
        needs: |_| vec![Need::Prefix(String::new(), Admin)],
        rest: rest(Post, "/v1/admin:reset", RestBody::Args, Plain),
        cli: Cli::CallOnly("wiping a store takes the deliberate `call native/state_reset` with its confirmation"),
        "Irreversibly delete every key, lease, run, session and all history. Requires confirm: \"DELETE EVERYTHING\"."
    ),
    native!(
        StateWatch,
        "state_watch",
        "Wait for changes",
        Watch,
        ReadOnly,
        WatchRequest => WatchResult,
        local: local::long_poll,
        needs: auth::watch_needs,
        rest: None,
        cli: Cli::Command("watch"),
        "Wait (up to timeout_seconds, default 25) for changes after `after_revision` to a key or prefix, or a lease, run or session (`kind`); returns them in order with the revision to pass next time. Instead of polling."
    ),
    native!(
        CheckpointSave,
        "checkpoint_save",
        "Save a checkpoint",
        Checkpoint,
        Write,
        CheckpointSaveRequest => CheckpointSaveResult,
        engine: checkpoint_save,
        needs: |_| vec![Need::Prefix(String::new(), Write)],
        rest: rest(Post, "/v1/checkpoints", RestBody::Args, Plain),
        cli: Cli::Command("checkpoint save"),
        "Save where your work stands so you or another agent can resume it: description (or thesis), highlights, files, work_context; research fields optional. Returns a time-ordered id."
    ),
    native!(
        CheckpointRestore,
        "checkpoint_restore",
        "Restore a checkpoint",
        Checkpoint,
        ReadOnly,
        CheckpointRestoreRequest => CheckpointRestoreResult,
        engine: checkpoint_restore,
        needs: |_| vec![Need::Prefix(String::new(), Read)],
        rest: rest(Get, "/v1/checkpoints:restore", RestBody::None, Plain),
        cli: Cli::Command("checkpoint restore"),
        "Get a checkpoint back as data plus markdown context: the workspace's latest, or by id (prefix), query or session_id. Includes the session's accumulated highlights."
    ),
    native!(
        CheckpointSearch,
        "checkpoint_search",
        "Search checkpoints",
        Checkpoint,
        ReadOnly,
        CheckpointSearchRequest => CheckpointSearchResult,
        engine: checkpoint_search,
        needs: |_| vec![Need::Prefix(String::new(), Read)],
        rest: rest(Get, "/v1/checkpoints:search", RestBody::None, Plain),
        cli: Cli::Command("checkpoint search"),
        "Find checkpoints by text, most relevant first, optionally since a time and in one workspace."
    ),
    native!(
        CheckpointTimeline,
        "checkpoint_timeline",
        "Checkpoint timeline",
        Checkpoint,
        ReadOnly,
        CheckpointTimelineRequest => CheckpointTimelineResult,
        engine: checkpoint_timeline,
        needs: |_| vec![Need::Prefix(String::new(), Read)],
        rest: rest(Get, "/v1/checkpoints:timeline", RestBody::None, Plain),
        cli: Cli::Command("checkpoint timeline"),
        "What was done recently (1h, 24h, 7d, 30d), newest first, by day and workspace."
    ),
    native!(
        KnowledgeSave,
        "knowledge_save",
        "Save a note",
        Knowledge,
        Write,
        KnowledgeSaveRequest => KnowledgeSaveResult,
        engine: knowledge_save,
        needs: |r| vec![Need::Id(r.id.clone(), Write)],
        rest: rest(Put, "/v1/knowledge/{*id}", RestBody::Args, Plain),
        cli: Cli::Command("knowledge save"),
        "Save a markdown note under an id, with keywords and scope, for later recall. Saving an id again is a new version; pass expected_version to avoid overwriting another agent's."
    ),
    native!(
        KnowledgeRecall,
        "knowledge_recall",
        "Recall notes",
        Knowledge,
        ReadOnly,
        KnowledgeRecallRequest => KnowledgeRecallResult,
        engine: knowledge_recall,
        needs: |_| vec![Need::Prefix(String::new(), Read)],
        rest: rest(Get, "/v1/knowledge:recall", RestBody::None, Plain),
        cli: Cli::Command("knowledge recall"),
        "The notes most relevant to a query (BM25), packed into max_tokens, with a ready-to-use formatted_context."
    ),
    native!(
        KnowledgeList,
        "knowledge_list",
        "List notes",
        Knowledge,
        ReadOnly,
        KnowledgeListRequest => KnowledgeListResult,
        engine: knowledge_list,
        needs: |r| vec![Need::Prefix(r.prefix.clone(), Read)],
        rest: rest(Get, "/v1/knowledge", RestBody::None, Plain),
        cli: Cli::Command("knowledge ls"),
        "Notes by id prefix and scope, without content, a page at a time."
    ),
    native!(
        KnowledgeDelete,
        "knowledge_delete",
        "Delete a note",
        Knowledge,
        IdempotentWrite,
        KnowledgeDeleteRequest => KnowledgeDeleteResult,
        engine: knowledge_delete,
        needs: |r| vec![Need::Id(r.id.clone(), Write)],
        rest: rest(Delete, "/v1/knowledge/{*id}", RestBody::None, Plain),
        cli: Cli::Command("knowledge del"),
        "Delete a note, optionally only if expected_version matches."
    ),
    native!(
        StoreExport,
        "store_export",
        "Export records",
        Transfer,
        ReadOnly,
        ExportRequest => ExportResult,
        engine: export,
        needs: |_| vec![Need::Prefix(String::new(), Read)],
        rest: rest(Get, "/v1/store:export", RestBody::None, Plain),
        cli: Cli::Command("export"),
        "Every stored record (keys, leases, runs, sessions, checkpoints, notes) with version, times and writer, a page at a time: a dump for store_import."
    ),
    native!(
        StoreImport,
        "store_import",
        "Import records",
        Transfer,
        IdempotentWrite,
        ImportRequest => ImportResult,
        engine: import,
        needs: |_| vec![Need::Prefix(String::new(), Admin)],
        rest: rest(Post, "/v1/store:import", RestBody::Args, Plain),
        cli: Cli::Command("import"),
        "Write exported records (up to 1000, one transaction) keeping their versions. Records already there unchanged are skipped; differing ones are reported as conflicts, never overwritten. dry_run decides without writing."
    ),
    native!(
        StoreUsage,
        "store_usage",
        "Measure a prefix",
        Transfer,
        ReadOnly,
        UsageRequest => UsageResult,
        query,
        needs: |r| vec![Need::Prefix(r.prefix.clone(), Read)],
        rest: rest(Get, "/v1/usage", RestBody::None, Plain),
        cli: Cli::Command("usage"),
        "Live keys, named records (leases, queue messages, sessions) and their bytes under an id prefix: what a storage quota counts."
    ),
    text!(
        AgentCheckpointGetState,
        AgentCheckpoint,
        LegacyText,
        "get_state",
        ReadOnly,
        ac::GetStateArgs,
        ac::calls::get_state,
        "Read a checkpoint by key: its JSON value (as a string), version and update time, or status not_found."
    ),
    text!(
        AgentCheckpointSetState,
        AgentCheckpoint,
        LegacyText,
        "set_state",
        Write,
        ac::SetStateArgs,
        ac::calls::set_state,
        "Write a checkpoint (value is a JSON-encoded string) with a version guard: expected_version -1 or omitted = unconditional, 0 = create only, N = only if the stored version is N (else status conflict)."
    ),
    text!(
        AgentCheckpointForceSetState,
        AgentCheckpoint,
        LegacyText,
        "force_set_state",
        Write,
        ac::ForceSetStateArgs,
        ac::calls::force_set_state,
        "Write a checkpoint unconditionally (value is a JSON-encoded string). For concurrent writers use set_state with expected_version."
    ),
    text!(
        AgentCheckpointListState,
        AgentCheckpoint,
        LegacyText,
        "list_state",
        ReadOnly,
        ac::ListStateArgs,
        ac::calls::list_state,
        "List checkpoint keys matching a SQL LIKE pattern (% any run, _ one character; default % = all) with version and update time."
    ),
    text!(
        AgentCheckpointDeleteState,
        AgentCheckpoint,
        LegacyText,
        "delete_state",
        IdempotentWrite,
        ac::DeleteStateArgs,
        ac::calls::delete_state,
        "Delete a checkpoint key permanently."
    ),
    sidecar!(
        SidecarStateSet,
        "state_set",
        Kv,
        Write,
        sc::StateSetArgs => sc::OkResult,
        sc::calls::state_set,
        "Set a key to any JSON value, with an optional TTL in seconds and the writing agent's id; overwrites."
    ),
    sidecar!(
        SidecarStateGet,
        "state_get",
        Kv,
        ReadOnly,
        sc::KeyArgs => sc::GetResult,
        sc::calls::state_get,
        "Get a key's value; found is false if it is missing or expired."
    ),
    sidecar!(
        SidecarStateDelete,
        "state_delete",
        Kv,
        IdempotentWrite,
        sc::KeyArgs => sc::OkResult,
        sc::calls::state_delete,
        "Delete a key; ok is true if it existed."
    ),
    sidecar!(
        SidecarStateList,
        "state_list",
        Kv,
        ReadOnly,
        sc::StateListArgs => sc::KeysResult,
        sc::calls::state_list,
        "List live keys, optionally by prefix."
    ),
    sidecar!(
        SidecarWorkflowCreate,
        "workflow_create",
        Workflow,
        Write,
        sc::WorkflowCreateArgs => sc::CreateResult,
        sc::calls::workflow_create,
        "Register a workflow (name, tags) and get its run_id; status starts as created."
    ),
    sidecar!(
        SidecarWorkflowDiscover,
        "workflow_discover",
        Workflow,
        ReadOnly,
        sc::DiscoverArgs => sc::RunsResult,
        sc::calls::workflow_discover,
        "Find workflows by tags (all must match) and/or status (created, claimed, running, done, failed), newest first."
    ),
    sidecar!(
        SidecarWorkflowClaim,
        "workflow_claim",
        Workflow,
        Write,
        sc::ClaimArgs => sc::ClaimResultShape,
        sc::calls::workflow_claim,
        "Atomically claim a created workflow for an agent; exactly one of several concurrent claimers wins."
    ),
    sidecar!(
        SidecarWorkflowCheckpoint,
        "workflow_checkpoint",
        Workflow,
        Write,
        sc::CheckpointArgs => sc::CheckpointResultShape,
        sc::calls::workflow_checkpoint,
        "Store a completed step's output and advance the step counter; re-sending a step replaces its output."
    ),
    sidecar!(
        SidecarWorkflowResume,
        "workflow_resume",
        Workflow,
        ReadOnly,
        sc::RunIdArgs => sc::ResumeContext,
        sc::calls::workflow_resume,
        "Everything a replacement agent needs: last_step, every step's output, and the workflow's metadata."
    ),
    sidecar!(
        SidecarWorkflowStatus,
        "workflow_status",
        Workflow,
        ReadOnly,
        sc::RunIdArgs => sc::StatusResult,
        sc::calls::workflow_status,
        "A workflow's status, last step, agent and timestamps."
    ),
    sidecar!(
        SidecarWorkflowList,
        "workflow_list",
        Workflow,
        ReadOnly,
        sc::NoArgs => sc::RunsResult,
        sc::calls::workflow_list,
        "List every workflow, newest first."
    ),
    sidecar!(
        SidecarLeaseAcquire,
        "lease_acquire",
        Lease,
        Write,
        sc::LeaseArgs => sc::LeaseResult,
        sc::calls::lease_acquire,
        "Try to take an exclusive lease on a resource for ttl_seconds; on failure, holder names who has it."
    ),
    sidecar!(
        SidecarLeaseRelease,
        "lease_release",
        Lease,
        IdempotentWrite,
        sc::LeaseReleaseArgs => sc::ReleaseResult,
        sc::calls::lease_release,
        "Release a lease you hold (holder_id must match)."
    ),
    sidecar!(
        SidecarLeaseRenew,
        "lease_renew",
        Lease,
        Write,
        sc::LeaseArgs => sc::RenewResult,
        sc::calls::lease_renew,
        "Extend a lease you still hold to ttl_seconds from now."
    ),
    sidecar!(
        SidecarHealth,
        "sidecar_health",
        Admin,
        ReadOnly,
        sc::NoArgs => sc::HealthResult,
        sc::calls::sidecar_health,
        "Liveness, backend, uptime, key and workflow counts."
    ),
    sidecar!(
        SidecarReset,
        "sidecar_reset",
        Admin,
        Write,
        sc::NoArgs => sc::ResetResult,
        sc::calls::sidecar_reset,
        needs: WholeStoreAdmin,
        "Irreversibly wipe all data: keys, leases, workflows, steps, history and sessions."
    ),
    sidecar!(
        SidecarSessionSave,
        "session_save",
        Session,
        Write,
        sc::SessionSaveArgs => sc::SessionSaveResult,
        sc::calls::session_save,
        "Save the context object of a session (a new version each time)."
    ),
    sidecar!(
        SidecarSessionRestore,
        "session_restore",
        Session,
        ReadOnly,
        sc::SessionIdArgs => sc::SessionRestoreResult,
        sc::calls::session_restore,
        "Restore the latest context saved for a session."
    ),
    sidecar!(
        SidecarHistoryLog,
        "history_log",
        Kv,
        ReadOnly,
        sc::HistoryArgs => sc::HistoryLogResult,
        sc::calls::history_log,
        "The last n key writes (optionally of one key), newest first, with new and previous values and the writer."
    ),
    text!(
        CaxtonStore,
        Caxton,
        JsonText,
        "store",
        Write,
        cx::StoreArgs,
        cx::calls::store,
        "Store a JSON value under a key (returns null)."
    ),
    text!(
        CaxtonRetrieve,
        Caxton,
        JsonText,
        "retrieve",
        ReadOnly,
        cx::KeyArgs,
        cx::calls::retrieve,
        "The value stored under a key, or null."
    ),
    text!(
        CaxtonDelete,
        Caxton,
        JsonText,
        "delete",
        IdempotentWrite,
        cx::KeyArgs,
        cx::calls::delete,
        "Delete a key (returns null)."
    ),
    text!(
        CaxtonList,
        Caxton,
        JsonText,
        "list",
        ReadOnly,
        cx::ListArgs,
        cx::calls::list,
        "All keys starting with a prefix, as an array."
    ),
    text!(
        CaxtonExists,
        Caxton,
        JsonText,
        "exists",
        ReadOnly,
        cx::KeyArgs,
        cx::calls::exists,
        "true if the key exists."
    ),
    text!(
        CaxtonBatchStore,
        Caxton,
        JsonText,
        "batch_store",
        Write,
        cx::BatchStoreArgs,
        cx::calls::batch_store,
        "Store several [key, value] pairs atomically: all or none (returns null)."
    ),
    text!(
        CaxtonBatchRetrieve,
        Caxton,
        JsonText,
        "batch_retrieve",
        ReadOnly,
        cx::BatchRetrieveArgs,
        cx::calls::batch_retrieve,
        "Values of several keys, in order, null where missing."
    ),
    structured!(
        SageSaveCheckpoint,Sage,"save_checkpoint",Checkpoint,Write, sg::SaveCheckpointArgs => sg::SaveCheckpointResult, sg::calls::save_checkpoint,"Save a research checkpoint (core question, thesis, confidence, sources, tensions) at a synthesis or branch point."
    ),
    structured!(
        SageListCheckpoints,Sage,"list_checkpoints",Checkpoint,ReadOnly, sg::ListCheckpointsArgs => sg::ListCheckpointsResult, sg::calls::list_checkpoints,"Saved checkpoints, newest first."
    ),
    structured!(
        SageLoadCheckpoint,Sage,"load_checkpoint",Checkpoint,ReadOnly, sg::LoadCheckpointArgs => sg::LoadCheckpointResult, sg::calls::load_checkpoint,"Load a checkpoint by id or part of one, with context to inject."
    ),
    structured!(
        SageSaveKnowledge,Sage,"save_knowledge",Knowledge,Write, sg::SaveKnowledgeArgs => sg::SaveKnowledgeResult, sg::calls::save_knowledge,"Save an insight to the knowledge base."
    ),
    structured!(
        SageRecallKnowledge,Sage,"recall_knowledge",Knowledge,ReadOnly, sg::RecallKnowledgeArgs => sg::RecallKnowledgeResult, sg::calls::recall_knowledge,"Knowledge relevant to a query, within a token budget."
    ),
    spec!(
        GoldfishCheckpoint,
        Goldfish,
        "checkpoint",
        "checkpoint",
        Checkpoint,
        Write,
        PlainText,
        gf::CheckpointArgs,
        None,
        adapter!(gf::CheckpointArgs, unparsed: gf::calls::checkpoint),
        Needs::WholeStore,
        "Save progress (give description) or get context back (default: restore the latest). query searches, range shows a timeline. Save after finishing a task or before a break; restore when resuming."
    ),
    structured!(
        MemoryCreateEntities,Memory,"create_entities",titled "Create Entities",Knowledge,Additive, mm::CreateEntitiesArgs => mm::CreatedEntities, mm::calls::create_entities,"Add entities to the knowledge graph; a name already there is skipped. Returns those created."
    ),
    structured!(
        MemoryCreateRelations,Memory,"create_relations",titled "Create Relations",Knowledge,Additive, mm::RelationsArgs => mm::CreatedRelations, mm::calls::create_relations,"Add relations between entities, in active voice (from works_at to); existing ones are skipped. Returns those created."
    ),
    structured!(
        MemoryAddObservations,Memory,"add_observations",titled "Add Observations",Knowledge,Additive, mm::AddObservationsArgs => mm::AddedObservations, mm::calls::add_observations,"Add observations to existing entities; returns what each gained."
    ),
    structured!(
        MemoryDeleteEntities,Memory,"delete_entities",titled "Delete Entities",Knowledge,IdempotentWrite, mm::DeleteEntitiesArgs => mm::Done, mm::calls::delete_entities,"Delete entities and every relation to or from them."
    ),
    structured!(
        MemoryDeleteObservations,Memory,"delete_observations",titled "Delete Observations",Knowledge,IdempotentWrite, mm::DeleteObservationsArgs => mm::Done, mm::calls::delete_observations,"Delete observations from entities."
    ),
    structured!(
        MemoryDeleteRelations,Memory,"delete_relations",titled "Delete Relations",Knowledge,IdempotentWrite, mm::RelationsArgs => mm::Done, mm::calls::delete_relations,"Delete relations."
    ),
    structured!(
        MemoryReadGraph,Memory,"read_graph",titled "Read Graph",Knowledge,ReadOnly, mm::ReadGraphArgs => mm::Graph, mm::calls::read_graph,"The whole knowledge graph."
    ),
    structured!(
        MemorySearchNodes,Memory,"search_nodes",titled "Search Nodes",Knowledge,ReadOnly, mm::SearchNodesArgs => mm::Graph, mm::calls::search_nodes,"Entities whose name, type or observations contain the query, with their relations."
    ),
    structured!(
        MemoryOpenNodes,Memory,"open_nodes",titled "Open Nodes",Knowledge,ReadOnly, mm::OpenNodesArgs => mm::Graph, mm::calls::open_nodes,"Entities by name, with their relations."
    ),
    structured!(
        MemoryImport,Memory,"memory_import",Transfer,Write, mm::ImportArgs => mm::Imported, mm::calls::import,"Merge a memory server's graph file into the store, once per source (statectl import --from memory)."
    ),
];

/// Schema of what a request accepts (JSON Schema 2020-12), as the types derive it. Frontends
/// shape it for their protocol (MCP tool lists trim what costs tokens: `state_mcp::schema`).
pub fn input_schema<T: JsonSchema>() -> JsonObject {
    root_schema::<T>(SchemaSettings::draft2020_12().for_deserialize())
}

/// Schema of what a result contains.
pub fn output_schema<T: JsonSchema>() -> JsonObject {
    root_schema::<T>(SchemaSettings::draft2020_12().for_serialize())
}

fn root_schema<T: JsonSchema>(settings: SchemaSettings) -> JsonObject {
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut object = match schema.to_value() {
        Value::Object(object) => object,
        _ => Map::new(),
    };
    // The dialect is the default one, and the root title and description name the Rust type
    // and repeat the operation's own description.
    for noise in ["$schema", "title", "description"] {
        object.remove(noise);
    }
    object
}

mod reference;
pub use reference::tools_reference;

#[cfg(test)]
mod tests;
