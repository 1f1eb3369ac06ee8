//! The store as MCP resources: a key (`state://kv/{key}`), a workflow run
//! (`state://workflow/{run_id}`), a lease (`state://lease/{resource_id}`) and a checkpoint
//! (`state://checkpoint/{id}`, which stands where file-based servers returned a path), beside the usage
//! guides. Reading one is the matching read tool's result as JSON; subscribing to one
//! (`subscriptions`) is a watch of that record.

use rmcp::ErrorData as McpError;
use rmcp::model::{Resource, ResourceContents, ResourceTemplate};
use serde_json::{Value, json};
use state_api::auth::Caller;
use state_api::catalog::Operation;
use state_api::{Api, ApiError, Options, Outcome};
use state_core::ops::history::HistoryKind;
use state_core::ops::kv::ListResult;
use state_core::ops::watch::WatchRequest;

use crate::docs::{self, Doc};

const JSON: &str = "application/json";

/// Keys per page of `resources/list`.
const KEYS_PER_PAGE: usize = 100;

/// What a resource URI names.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Target {
    Doc(&'static Doc),
    Key(String),
    Lease(String),
    Run(String),
    Checkpoint(String),
}

/// The record kinds with a URI of their own: (scheme and path before the id, kind).
const RECORDS: [(&str, Option<HistoryKind>); 4] = [
    ("state://kv/", None),
    ("state://lease/", Some(HistoryKind::Lease)),
    ("state://workflow/", Some(HistoryKind::Workflow)),
    ("state://checkpoint/", Some(HistoryKind::Checkpoint)),
];

impl Target {
    /// The resource `uri` names, among the docs of `profiles` and the store's records. The id
    /// may be percent-encoded (as an RFC 6570 expansion of `{key}` encodes `/`) or not.
    /// Records of a kind whose read this server does not serve (`--tools`) are not resources
    /// here either.
    pub(crate) fn parse(uri: &str, options: &Options) -> Option<Target> {
        if let Some(doc) = docs::for_profiles(&options.profiles).find(|doc| doc.uri == uri) {
            return Some(Target::Doc(doc));
        }
        let (kind, id) = RECORDS.iter().find_map(|(base, kind)| Some((*kind, uri.strip_prefix(base)?)))?;
        let id = percent_decode(id)?;
        if id.is_empty() {
            return None;
        }
        let target = match kind {
            None => Target::Key(id),
            Some(HistoryKind::Lease) => Target::Lease(id),
            Some(HistoryKind::Checkpoint) => Target::Checkpoint(id),
            _ => Target::Run(id),
        };
        target.read().is_some_and(|(op, _)| options.serves_group(op.spec().group)).then_some(target)
    }

    /// The read behind `resources/read`.
    fn read(&self) -> Option<(Operation, Value)> {
        match self {
            Target::Doc(_) => None,
            Target::Key(key) => Some((Operation::StateGet, json!({ "key": key }))),
            Target::Lease(resource) => Some((Operation::LeaseGet, json!({ "resource_id": resource }))),
            Target::Run(run) => Some((Operation::WorkflowStatus, json!({ "run_id": run }))),
            Target::Checkpoint(id) => {
                Some((Operation::CheckpointRestore, json!({ "checkpoint_id": id, "depth": "full" })))
            }
        }
    }

    /// The watch that says when this resource changes; docs never do.
    pub(crate) fn watch(&self) -> Option<WatchRequest> {
        let (kind, id) = match self {
            Target::Doc(_) => return None,
            Target::Key(key) => (HistoryKind::Kv, key),
            Target::Lease(resource) => (HistoryKind::Lease, resource),
            Target::Run(run) => (HistoryKind::Workflow, run),
            Target::Checkpoint(id) => (HistoryKind::Checkpoint, id),
        };
        Some(WatchRequest { include_values: Some(false), ..WatchRequest::key(Some(kind), id.clone()) })
    }
}

/// The templates of the record kinds this server serves.
pub(crate) fn templates(options: &Options) -> Vec<ResourceTemplate> {
    let served = |template: &ResourceTemplate| {
        let example = template.uri_template.replace(['{', '}'], "");
        Target::parse(&example, options).is_some()
    };
    let all = vec![
        ResourceTemplate::new("state://kv/{key}", "key")
            .with_title("A key")
            .with_description("A key's value, version and revision (state_get). Subscribe to hear when it changes.")
            .with_mime_type(JSON),
        ResourceTemplate::new("state://workflow/{run_id}", "workflow run")
            .with_title("A workflow run")
            .with_description("A run's status, holder, attempt and checkpoints (workflow_status). Subscribe to hear when it moves, e.g. becomes claimable.")
            .with_mime_type(JSON),
        ResourceTemplate::new("state://lease/{resource_id}", "lease")
            .with_title("A lease")
            .with_description("Who holds a resource and until when (lease_get). Subscribe to hear when it is released or expires.")
            .with_mime_type(JSON),
        ResourceTemplate::new("state://checkpoint/{id}", "checkpoint")
            .with_title("A checkpoint")
            .with_description("A saved checkpoint with its session's highlights and markdown context (checkpoint_restore, depth full).")
            .with_mime_type(JSON),
    ];
    all.into_iter().filter(served).collect()
}

/// `resources/read`: a doc's text, or a record as the JSON its read tool returns.
pub(crate) async fn read(
    api: &Api,
    caller: &Caller,
    options: &Options,
    uri: &str,
) -> Result<ResourceContents, McpError> {
    let not_found =
        |why: &str| McpError::resource_not_found(format!("no resource `{uri}`: {why}"), Some(json!({"uri": uri})));
    let target = Target::parse(uri, options).ok_or_else(|| {
        not_found("resources are the docs in resources/list and the templates in resources/templates/list (those of the tools this server serves)")
    })?;
    let (op, args) = match (&target, target.read()) {
        (Target::Doc(doc), _) => return Ok(doc.contents()),
        (_, Some(read)) => read,
        (_, None) => return Err(not_found("it cannot be read")),
    };
    let reply = api.call_as(caller, op, args).await;
    match (reply.outcome, reply.body) {
        (Outcome::NotFound, _) => Err(not_found("it does not exist")),
        (_, Ok(body)) => {
            let text =
                serde_json::to_string_pretty(&body).map_err(|e| McpError::internal_error(e.to_string(), None))?;
            Ok(ResourceContents::text(text, uri).with_mime_type(JSON))
        }
        (_, Err(error)) => Err(error_for(uri, &error)),
    }
}

/// A failed read or watch as the JSON-RPC error a client can act on.
pub(crate) fn error_for(uri: &str, error: &ApiError) -> McpError {
    let data = Some(json!({"uri": uri, "code": error.code.name()}));
    match error.code.outcome() {
        Outcome::Invalid | Outcome::Forbidden => McpError::invalid_params(format!("`{uri}`: {}", error.message), data),
        Outcome::NotFound => McpError::resource_not_found(format!("`{uri}`: {}", error.message), data),
        _ => McpError::internal_error(format!("`{uri}`: {}", error.message), data),
    }
}

/// One page of `resources/list`: the docs first, then the keys this caller may read, a page
/// at a time. The cursor is `<prefix index>:<state_list cursor>`, opaque to clients.
pub(crate) async fn list(
    api: &Api,
    caller: &Caller,
    options: &Options,
    cursor: Option<&str>,
) -> Result<(Vec<Resource>, Option<String>), McpError> {
    let prefixes: Vec<String> = match caller.token() {
        // Keys are listed only where keys are served.
        _ if !options.serves_group(Operation::StateGet.spec().group) => Vec::new(),
        Some(principal) => principal.prefixes().to_vec(),
        None => vec![String::new()],
    };
    let bad_cursor = || McpError::invalid_params("this cursor did not come from this server's resources/list", None);
    let (mut index, mut inner) = match cursor {
        None => (0, None),
        Some(cursor) => {
            let (index, inner) = cursor.split_once(':').ok_or_else(bad_cursor)?;
            let index = index.parse::<usize>().map_err(|_| bad_cursor())?;
            (index, Some(inner.to_owned()).filter(|c| !c.is_empty()))
        }
    };
    let mut resources: Vec<Resource> = match cursor {
        None => docs::for_profiles(&options.profiles).map(Doc::resource).collect(),
        Some(_) => Vec::new(),
    };
    while let Some(prefix) = prefixes.get(index) {
        let args = json!({ "prefix": prefix, "limit": KEYS_PER_PAGE, "cursor": inner });
        let reply = api.call_as(caller, Operation::StateList, args).await;
        let page: ListResult = match reply.body.map(serde_json::from_value) {
            Ok(Ok(page)) => page,
            Ok(Err(e)) => return Err(McpError::internal_error(format!("cannot read a key listing: {e}"), None)),
            Err(error) => return Err(error_for(&format!("state://kv/{prefix}"), &error)),
        };
        resources.extend(
            page.entries.iter().map(|entry| Resource::new(key_uri(&entry.key), entry.key.clone()).with_mime_type(JSON)),
        );
        match page.next_cursor {
            Some(next) => return Ok((resources, Some(format!("{index}:{next}")))),
            None => {
                index += 1;
                inner = None;
            }
        }
    }
    Ok((resources, None))
}

/// A key's URI: readable (`/` stays), with anything a URI cannot hold percent-encoded.
pub(crate) fn key_uri(key: &str) -> String {
    let mut uri = String::from("state://kv/");
    for byte in key.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' | b':' | b'@' => {
                uri.push(char::from(byte));
            }
            _ => uri.push_str(&format!("%{byte:02X}")),
        }
    }
    uri
}

/// `%XX` escapes decoded; `None` when an escape is malformed or the result is not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let hex = text.get(at + 1..at + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            at += 3;
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests;
