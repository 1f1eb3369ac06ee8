//! Multi-key transactions: compare, then one of two operation lists, all or nothing.

use std::collections::BTreeSet;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ReadStatus, present};
use crate::entry::Entry;
use crate::error::InvalidInput;
use crate::key::{validate_agent_id, validate_key};
use crate::limits::{Limits, MAX_TXN_OPS, check_count};
use crate::time::ttl_millis;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CompareOp {
    #[default]
    #[serde(alias = "=", alias = "==")]
    Eq,
    #[serde(alias = "!=")]
    Ne,
    #[serde(alias = "<")]
    Lt,
    #[serde(alias = ">")]
    Gt,
}

/// What a compare looks at. An absent key has version 0 and mod_revision 0, does not exist,
/// and has no value (so `value eq X` is false and `value ne X` is true).
#[derive(Debug, Clone, PartialEq)]
pub enum CompareTarget {
    Version(u64),
    ModRevision(u64),
    Exists(bool),
    Value(Value),
}

/// One condition of a transaction. Always valid once constructed: the wire form is checked
/// while parsing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "CompareWire", into = "CompareWire")]
pub struct Compare {
    pub key: String,
    pub op: CompareOp,
    pub target: CompareTarget,
}

/// A condition on one key. Give `key` and exactly one of `version`, `mod_revision`, `exists`, `value`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Compare")]
struct CompareWire {
    key: String,
    /// eq (default), ne, lt or gt; lt/gt only for version and mod_revision.
    #[serde(default)]
    op: CompareOp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    version: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mod_revision: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exists: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    value: Option<Value>,
}

impl TryFrom<CompareWire> for Compare {
    type Error = String;

    fn try_from(wire: CompareWire) -> Result<Compare, String> {
        let mut targets = Vec::with_capacity(1);
        if let Some(v) = wire.version {
            targets.push(CompareTarget::Version(v));
        }
        if let Some(r) = wire.mod_revision {
            targets.push(CompareTarget::ModRevision(r));
        }
        if let Some(e) = wire.exists {
            targets.push(CompareTarget::Exists(e));
        }
        if let Some(v) = wire.value {
            targets.push(CompareTarget::Value(v));
        }
        let target = match (targets.pop(), targets.is_empty()) {
            (Some(target), true) => target,
            _ => {
                return Err(format!(
                    "compare on `{}` must give exactly one of `version`, `mod_revision`, `exists`, `value`",
                    wire.key
                ));
            }
        };
        let ordered = matches!(wire.op, CompareOp::Lt | CompareOp::Gt);
        match &target {
            CompareTarget::Exists(_) if wire.op != CompareOp::Eq => {
                return Err(format!("compare on `{}`: `exists` takes no `op`; use exists true or false", wire.key));
            }
            CompareTarget::Value(_) if ordered => {
                return Err(format!("compare on `{}`: `value` supports op eq or ne only", wire.key));
            }
            _ => {}
        }
        Ok(Compare { key: wire.key, op: wire.op, target })
    }
}

impl From<Compare> for CompareWire {
    fn from(c: Compare) -> CompareWire {
        let mut wire =
            CompareWire { key: c.key, op: c.op, version: None, mod_revision: None, exists: None, value: None };
        match c.target {
            CompareTarget::Version(v) => wire.version = Some(v),
            CompareTarget::ModRevision(r) => wire.mod_revision = Some(r),
            CompareTarget::Exists(e) => wire.exists = Some(e),
            CompareTarget::Value(v) => wire.value = Some(v),
        }
        wire
    }
}

impl JsonSchema for Compare {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        CompareWire::schema_name()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        CompareWire::json_schema(generator)
    }
}

impl Compare {
    /// Evaluates the condition against the key's live entry (`None` = absent).
    pub fn holds(&self, live: Option<&Entry>) -> bool {
        let ordered = |actual: u64, wanted: u64| match self.op {
            CompareOp::Eq => actual == wanted,
            CompareOp::Ne => actual != wanted,
            CompareOp::Lt => actual < wanted,
            CompareOp::Gt => actual > wanted,
        };
        match &self.target {
            CompareTarget::Version(v) => ordered(live.map_or(0, |e| e.version), *v),
            CompareTarget::ModRevision(r) => ordered(live.map_or(0, |e| e.mod_revision), *r),
            CompareTarget::Exists(wanted) => live.is_some() == *wanted,
            CompareTarget::Value(wanted) => {
                let equal = live.is_some_and(|e| &e.value == wanted);
                if self.op == CompareOp::Ne { !equal } else { equal }
            }
        }
    }
}

/// One operation of a transaction branch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum TxnOp {
    Get {
        key: String,
    },
    Put {
        key: String,
        value: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ttl_seconds: Option<f64>,
    },
    Delete {
        key: String,
    },
}

impl TxnOp {
    pub fn key(&self) -> &str {
        match self {
            TxnOp::Get { key } | TxnOp::Put { key, .. } | TxnOp::Delete { key } => key,
        }
    }

    fn is_write(&self) -> bool {
        !matches!(self, TxnOp::Get { .. })
    }
}

/// If every compare holds, run `success`, else `failure`; atomically, under one revision.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TxnRequest {
    /// Conditions, all of which must hold (empty: always succeeds).
    #[serde(default)]
    pub compare: Vec<Compare>,
    /// Operations when every compare holds.
    #[serde(default)]
    pub success: Vec<TxnOp>,
    /// Operations otherwise.
    #[serde(default)]
    pub failure: Vec<TxnOp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Refuse the whole transaction (status fenced) unless `token` is this lease's current token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    /// Idempotency key: a retry with it returns the first result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl TxnRequest {
    pub fn validate(&self, limits: &Limits) -> Result<(), InvalidInput> {
        check_count("compare", self.compare.len(), MAX_TXN_OPS)?;
        for (i, c) in self.compare.iter().enumerate() {
            validate_key(&format!("compare[{i}].key"), &c.key)?;
            if let CompareTarget::Value(v) = &c.target {
                limits.check_value(format!("compare[{i}].value"), v)?;
            }
        }
        for (branch, ops) in [("success", &self.success), ("failure", &self.failure)] {
            check_count(branch, ops.len(), MAX_TXN_OPS)?;
            let mut written = BTreeSet::new();
            for (i, op) in ops.iter().enumerate() {
                validate_key(&format!("{branch}[{i}].key"), op.key())?;
                if let TxnOp::Put { value, ttl_seconds, .. } = op {
                    limits.check_value(format!("{branch}[{i}].value"), value)?;
                    if let Some(ttl) = ttl_seconds {
                        ttl_millis("ttl_seconds", *ttl)?;
                    }
                }
                if op.is_write() && !written.insert(op.key()) {
                    return Err(InvalidInput::DuplicateWrite { argument: branch.to_owned(), key: op.key().to_owned() });
                }
            }
        }
        if let Some(agent) = &self.agent_id {
            validate_agent_id("agent_id", agent)?;
        }
        super::kv::validate_fence(&self.lease, self.token)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TxnOpKind {
    Get,
    Put,
    Delete,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TxnOpResult {
    pub op: TxnOpKind,
    pub key: String,
    /// not_found: a get or delete of an absent key.
    pub status: ReadStatus,
    /// Version after the operation (put), the one read (get) or removed (delete).
    pub version: u64,
    /// The value read, for a get.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub value: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TxnStatus {
    Ok,
    /// The lease token was stale: nothing ran.
    Fenced,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TxnResult {
    pub status: TxnStatus,
    /// True if every compare held and `success` ran; false if `failure` ran.
    pub succeeded: bool,
    /// Revision of this transaction if it wrote anything, else the current store revision.
    pub revision: u64,
    /// Indexes of the compares that did not hold.
    pub failed_compares: Vec<usize>,
    /// One result per operation of the branch that ran.
    pub results: Vec<TxnOpResult>,
    /// Why the transaction was fenced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
