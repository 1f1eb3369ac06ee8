//! Caxton's StateTool interface as tools. Results are the interface's return values as
//! serde serializes them: unit is `null`, `Option<Value>` is the value or `null`, and
//! `batch_store` takes `[key, value]` pairs, the way its tuples serialize.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub mod calls;

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StoreArgs {
    pub key: String,
    pub value: Value,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct KeyArgs {
    pub key: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ListArgs {
    /// Keys starting with this ("" = all).
    #[serde(default)]
    pub prefix: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct BatchStoreArgs {
    /// `[key, value]` pairs, stored atomically (all or none).
    pub items: Vec<(String, Value)>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct BatchRetrieveArgs {
    pub keys: Vec<String>,
}
