//! The `agentcheckpoint` server's tools. Values travel as JSON-encoded strings, results carry
//! `status` ok / conflict / not_found / error, and `list_state` takes a SQL LIKE pattern.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use state_core::ops::kv::{DeleteRequest, GetResult, ListedEntry, SetRequest, SetResult};
use state_core::ops::{ReadStatus, WriteStatus};

pub mod calls;

/// Read a checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct GetStateArgs {
    /// Checkpoint key, e.g. `workflow:plan-2026-06-12`.
    pub key: String,
}

/// Write a checkpoint with an optional version guard.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SetStateArgs {
    pub key: String,
    /// The value as a JSON-encoded string.
    pub value: String,
    /// -1 = unconditional, 0 = create only, N = only if the stored version is N.
    #[serde(default = "unconditional")]
    pub expected_version: i64,
}

fn unconditional() -> i64 {
    -1
}

/// Write a checkpoint unconditionally.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ForceSetStateArgs {
    pub key: String,
    /// The value as a JSON-encoded string.
    pub value: String,
}

/// List checkpoints by pattern.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ListStateArgs {
    /// SQL LIKE pattern (default `%` = all keys).
    #[serde(default = "everything")]
    pub pattern: String,
}

fn everything() -> String {
    "%".to_owned()
}

/// Delete a checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct DeleteStateArgs {
    pub key: String,
}

/// The `{"status": "error"}` result that server gives for input it cannot store.
pub fn error(message: impl std::fmt::Display) -> Value {
    json!({"status": "error", "message": message.to_string()})
}

/// Parses the JSON-encoded value string; the error result names the problem.
pub fn parse_value(value: &str) -> Result<Value, Value> {
    serde_json::from_str(value).map_err(|e| error(format!("Invalid JSON in `value`: {e}")))
}

/// The native request for `set_state`. A negative guard other than -1 can never match a
/// version, so it becomes one no key will ever reach.
pub fn set_request(key: String, value: Value, expected_version: i64) -> SetRequest {
    let expected_version = match expected_version {
        -1 => None,
        n => Some(u64::try_from(n).unwrap_or(u64::MAX)),
    };
    SetRequest { expected_version, ..SetRequest::new(key, value) }
}

pub fn set_response(expected_version: i64, result: &SetResult) -> Value {
    let key = &result.key;
    match result.status {
        WriteStatus::Ok => json!({"status": "ok", "key": key, "version": result.version}),
        WriteStatus::Conflict if expected_version == 0 => json!({
            "status": "conflict",
            "key": key,
            "message": format!("`{key}` already exists at version {}: pass expected_version={} to update it, or use force_set_state.", result.version, result.version),
            "actual_version": result.version,
        }),
        WriteStatus::Conflict if result.version == 0 => json!({
            "status": "not_found",
            "key": key,
            "message": format!("`{key}` does not exist: pass expected_version=0 to create it, or use force_set_state."),
        }),
        // That server had no fencing; its tools never send a lease, so nothing is fenced here.
        WriteStatus::Conflict | WriteStatus::Fenced => json!({
            "status": "conflict",
            "key": key,
            "expected_version": expected_version,
            "actual_version": result.version,
            "message": format!("`{key}` is at version {}, not {expected_version}: read it again with get_state and retry.", result.version),
        }),
    }
}

pub fn get_response(result: &GetResult) -> Value {
    match (&result.status, &result.value) {
        (ReadStatus::Ok, Some(value)) => json!({
            "status": "ok",
            "key": result.key,
            "value": value.to_string(),
            "version": result.version,
            "updated_at": result.updated_at.as_deref().map(sql_datetime),
        }),
        _ => json!({"status": "not_found", "key": result.key}),
    }
}

pub fn delete_request(key: String) -> DeleteRequest {
    DeleteRequest { key, ..DeleteRequest::default() }
}

/// That server reports every delete as done, whether or not the key existed.
pub fn delete_response(key: &str) -> Value {
    json!({"status": "ok", "key": key, "deleted": true})
}

pub fn list_response(entries: &[ListedEntry]) -> Value {
    let keys: Vec<Value> = entries
        .iter()
        .map(|e| json!({"key": e.key, "version": e.version, "updated_at": sql_datetime(&e.updated_at)}))
        .collect();
    json!({"status": "ok", "keys": keys})
}

/// `2026-11-21T14:15:00.123Z` -> `2026-11-21 14:15:00`, the SQLite `datetime()` shape.
fn sql_datetime(rfc3339: &str) -> String {
    rfc3339.get(..19).unwrap_or(rfc3339).replacen('T', " ", 1)
}

/// A compiled SQL LIKE pattern with SQLite's default rules: `%` matches any run of
/// characters, `_` exactly one, letters match case-insensitively in ASCII only, and there is
/// no escape character.
#[derive(Debug, Clone)]
pub struct LikePattern {
    tokens: Vec<LikeToken>,
}

#[derive(Debug, Clone, PartialEq)]
enum LikeToken {
    AnyRun,
    AnyOne,
    Literal(char),
}

impl LikePattern {
    pub fn new(pattern: &str) -> LikePattern {
        let tokens = pattern
            .chars()
            .map(|c| match c {
                '%' => LikeToken::AnyRun,
                '_' => LikeToken::AnyOne,
                c => LikeToken::Literal(c.to_ascii_lowercase()),
            })
            .collect();
        LikePattern { tokens }
    }

    /// The literal text every match must start with, usable as a range-scan prefix, or `None`
    /// when letters make the match case-insensitive (then every key must be examined).
    pub fn scan_prefix(&self) -> Option<String> {
        let mut prefix = String::new();
        for token in &self.tokens {
            match token {
                LikeToken::Literal(c) if c.is_ascii_alphabetic() => return None,
                LikeToken::Literal(c) => prefix.push(*c),
                _ => break,
            }
        }
        Some(prefix)
    }

    pub fn matches(&self, text: &str) -> bool {
        let chars: Vec<char> = text.chars().map(|c| c.to_ascii_lowercase()).collect();
        // Classic wildcard matching with backtracking to the last `%`: linear in practice.
        let (mut t, mut p) = (0usize, 0usize);
        let mut backtrack: Option<(usize, usize)> = None;
        while t < chars.len() {
            match self.tokens.get(p) {
                Some(LikeToken::AnyRun) => {
                    backtrack = Some((p, t));
                    p += 1;
                }
                Some(LikeToken::AnyOne) => {
                    t += 1;
                    p += 1;
                }
                Some(LikeToken::Literal(c)) if *c == chars[t] => {
                    t += 1;
                    p += 1;
                }
                _ => match backtrack {
                    Some((star, matched_from)) => {
                        p = star + 1;
                        t = matched_from + 1;
                        backtrack = Some((star, matched_from + 1));
                    }
                    None => return false,
                },
            }
        }
        self.tokens[p.min(self.tokens.len())..].iter().all(|tok| *tok == LikeToken::AnyRun)
    }
}

#[cfg(test)]
mod tests;
