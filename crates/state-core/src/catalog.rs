//! The operation catalog: every operation's name, description, effect and JSON schemas,
//! defined once. MCP tools, REST routes and CLI commands are all generated from it, so they
//! cannot drift apart.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

use crate::compat::agentcheckpoint as ac;
use crate::ops::health::{HealthRequest, HealthResult};
use crate::ops::history::{HistoryRequest, HistoryResult};
use crate::ops::kv::{
    BatchGetRequest, BatchGetResult, DeleteRequest, DeleteResult, GetRequest, GetResult, ListRequest, ListResult,
    SetRequest, SetResult,
};
use crate::ops::txn::{TxnRequest, TxnResult};

pub type JsonObject = Map<String, Value>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    StateGet,
    StateSet,
    StateDelete,
    StateList,
    StateBatchGet,
    StateTxn,
    HistoryLog,
    StateHealth,
    AgentCheckpointGetState,
    AgentCheckpointSetState,
    AgentCheckpointForceSetState,
    AgentCheckpointListState,
    AgentCheckpointDeleteState,
}

/// Which tool surface an operation belongs to. Compatibility profiles reproduce the tool names
/// and shapes of servers we replace, so their users switch without changing prompts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Profile {
    Native,
    /// The `agentcheckpoint` server: get_state, set_state, force_set_state, list_state, delete_state.
    AgentCheckpoint,
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::Native => "native",
            Profile::AgentCheckpoint => "agentcheckpoint",
        }
    }
}

/// Groups a client can enable or leave out to keep its tool list short.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolGroup {
    Kv,
    Admin,
}

/// What an operation does to the store, for clients deciding whether to ask before calling it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    ReadOnly,
    /// Changes state; repeating it with the same arguments changes nothing more.
    IdempotentWrite,
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
}

impl OperationSpec {
    pub fn input_schema(&self) -> JsonObject {
        (self.input_schema)()
    }

    pub fn output_schema(&self) -> Option<JsonObject> {
        self.output_schema.map(|f| f())
    }
}

impl Operation {
    pub const ALL: [Operation; 13] = [
        Operation::StateGet,
        Operation::StateSet,
        Operation::StateDelete,
        Operation::StateList,
        Operation::StateBatchGet,
        Operation::StateTxn,
        Operation::HistoryLog,
        Operation::StateHealth,
        Operation::AgentCheckpointGetState,
        Operation::AgentCheckpointSetState,
        Operation::AgentCheckpointForceSetState,
        Operation::AgentCheckpointListState,
        Operation::AgentCheckpointDeleteState,
    ];

    pub fn spec(self) -> &'static OperationSpec {
        let index = Operation::ALL.iter().position(|op| *op == self).unwrap_or_default();
        &SPECS[index]
    }

    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// Operations of the given profiles, in catalog order (stable, as MCP list results must be).
    pub fn in_profiles(profiles: &[Profile]) -> impl Iterator<Item = Operation> + '_ {
        Operation::ALL.into_iter().filter(|op| profiles.contains(&op.spec().profile))
    }
}

/// Native tool (structured result with an output schema).
macro_rules! native {
    ($op:ident, $name:literal, $title:literal, $group:ident, $effect:ident, $req:ty, $res:ty, $desc:literal) => {
        OperationSpec {
            operation: Operation::$op,
            name: $name,
            title: $title,
            description: $desc,
            profile: Profile::Native,
            group: ToolGroup::$group,
            effect: Effect::$effect,
            presentation: Presentation::Structured,
            input_schema: input_schema::<$req>,
            output_schema: Some(output_schema::<$res>),
        }
    };
}

/// Compatibility tool (text result exactly as the replaced server printed it).
macro_rules! legacy {
    ($op:ident, $profile:ident, $name:literal, $effect:ident, $req:ty, $desc:literal) => {
        OperationSpec {
            operation: Operation::$op,
            name: $name,
            title: $name,
            description: $desc,
            profile: Profile::$profile,
            group: ToolGroup::Kv,
            effect: Effect::$effect,
            presentation: Presentation::LegacyText,
            input_schema: input_schema::<$req>,
            output_schema: None,
        }
    };
}

static SPECS: [OperationSpec; 13] = [
    native!(
        StateGet,
        "state_get",
        "Get a key",
        Kv,
        ReadOnly,
        GetRequest,
        GetResult,
        "Read a key's JSON value, version and store revision. Pass `version` or `revision` to read it as it was earlier."
    ),
    native!(
        StateSet,
        "state_set",
        "Set a key",
        Kv,
        Write,
        SetRequest,
        SetResult,
        "Write a JSON value. Pass `expected_version` from your last read (0 = create only) so you never overwrite another agent's change; a conflict returns the current version and value to retry with."
    ),
    native!(
        StateDelete,
        "state_delete",
        "Delete a key",
        Kv,
        IdempotentWrite,
        DeleteRequest,
        DeleteResult,
        "Delete a key, optionally only if `expected_version` matches."
    ),
    native!(
        StateList,
        "state_list",
        "List keys",
        Kv,
        ReadOnly,
        ListRequest,
        ListResult,
        "List keys under a prefix in key order with their versions (values if asked), a page at a time."
    ),
    native!(
        StateBatchGet,
        "state_batch_get",
        "Get several keys",
        Kv,
        ReadOnly,
        BatchGetRequest,
        BatchGetResult,
        "Read several keys from one consistent snapshot."
    ),
    native!(
        StateTxn,
        "state_txn",
        "Transaction",
        Kv,
        Write,
        TxnRequest,
        TxnResult,
        "Atomic multi-key transaction: if every `compare` holds run the `success` ops, else the `failure` ops (get/put/delete), all under one revision."
    ),
    native!(
        HistoryLog,
        "history_log",
        "Change history",
        Kv,
        ReadOnly,
        HistoryRequest,
        HistoryResult,
        "Changes (put/delete/expired) with revision, version, agent and time, for a key, a prefix or everything; page forward with `since_revision`."
    ),
    native!(
        StateHealth,
        "state_health",
        "Store health",
        Admin,
        ReadOnly,
        HealthRequest,
        HealthResult,
        "Store status: backend, revision, key count, database size, uptime."
    ),
    legacy!(
        AgentCheckpointGetState,
        AgentCheckpoint,
        "get_state",
        ReadOnly,
        ac::GetStateArgs,
        "Read a checkpoint by key: its JSON value (as a string), version and update time, or status not_found."
    ),
    legacy!(
        AgentCheckpointSetState,
        AgentCheckpoint,
        "set_state",
        Write,
        ac::SetStateArgs,
        "Write a checkpoint (value is a JSON-encoded string) with a version guard: expected_version -1 or omitted = unconditional, 0 = create only, N = only if the stored version is N (else status conflict)."
    ),
    legacy!(
        AgentCheckpointForceSetState,
        AgentCheckpoint,
        "force_set_state",
        Write,
        ac::ForceSetStateArgs,
        "Write a checkpoint unconditionally (value is a JSON-encoded string). For concurrent writers use set_state with expected_version."
    ),
    legacy!(
        AgentCheckpointListState,
        AgentCheckpoint,
        "list_state",
        ReadOnly,
        ac::ListStateArgs,
        "List checkpoint keys matching a SQL LIKE pattern (% any run, _ one character; default % = all) with version and update time."
    ),
    legacy!(
        AgentCheckpointDeleteState,
        AgentCheckpoint,
        "delete_state",
        IdempotentWrite,
        ac::DeleteStateArgs,
        "Delete a checkpoint key permanently."
    ),
];

/// Schema of what a request accepts (JSON Schema 2020-12, the MCP default dialect).
pub fn input_schema<T: JsonSchema>() -> JsonObject {
    object_schema::<T>(SchemaSettings::draft2020_12().for_deserialize())
}

/// Schema of what a result contains.
pub fn output_schema<T: JsonSchema>() -> JsonObject {
    object_schema::<T>(SchemaSettings::draft2020_12().for_serialize())
}

fn object_schema<T: JsonSchema>(settings: SchemaSettings) -> JsonObject {
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut object = match schema.to_value() {
        Value::Object(object) => object,
        _ => Map::new(),
    };
    // The dialect is the protocol's default and the root title/description repeat the tool's
    // own; every client pays for these tokens, so drop them.
    for noise in ["$schema", "title", "description"] {
        object.remove(noise);
    }
    strip_numeric_formats(&mut object);
    object
}

/// schemars annotates integers with Rust type names (`"format": "uint64"`); they are not JSON
/// Schema formats, validators ignore them, and `minimum` already says what matters.
fn strip_numeric_formats(object: &mut JsonObject) {
    const RUST_FORMATS: [&str; 10] =
        ["uint", "uint8", "uint16", "uint32", "uint64", "int", "int32", "int64", "double", "float"];
    if object.get("format").and_then(Value::as_str).is_some_and(|f| RUST_FORMATS.contains(&f)) {
        object.remove("format");
    }
    for value in object.values_mut() {
        match value {
            Value::Object(inner) => strip_numeric_formats(inner),
            Value::Array(items) => {
                for item in items.iter_mut().filter_map(Value::as_object_mut) {
                    strip_numeric_formats(item);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
