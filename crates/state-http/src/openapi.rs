//! The OpenAPI 3.1 document, generated from the route table and the catalog's JSON schemas
//! (the same types the MCP tools publish). OpenAPI 3.1 speaks JSON Schema 2020-12, so the
//! schemas go in as they are; only their local `$defs` move to `components/schemas`.

use serde_json::{Map, Value, json};
use state_api::catalog::Operation;

use crate::rest::routes::{Body, Flavor, Route, routes};

/// The routes `selection` serves (`--tools`, `--compat`).
pub(crate) fn document(selection: &state_api::Options) -> Value {
    let mut components = Map::new();
    components.insert("Problem".into(), problem_schema());
    components.insert("Reply".into(), reply_schema());
    let mut paths = Map::new();
    for route in routes().into_iter().filter(|route| selection.covers(route.op)) {
        let operation = operation(&route, &mut components);
        let item = paths.entry(route.openapi_path()).or_insert_with(|| json!({}));
        item[route.method.as_str().to_ascii_lowercase()] = operation;
    }
    paths.insert("/v1/call/{profile}/{name}".into(), json!({"post": seam_operation()}));
    if selection.covers(Operation::StateWatch) {
        paths.insert("/v1/watch".into(), json!({"get": watch_operation()}));
    }
    paths.insert("/v1/whoami".into(), json!({"get": {
        "operationId": "whoami", "summary": "The token this request carries: its name, prefixes and right", "security": [],
        "responses": {"200": {"description": "the caller", "content": {"application/json": {"schema": {
            "type": "object",
            "properties": {"name": {"type": ["string", "null"]}, "prefixes": {"type": "array", "items": {"type": "string"}},
                "right": {"type": ["string", "null"], "enum": ["read", "write", "admin", null]},
                "token_required": {"type": "boolean", "description": "Asked without a token: whether this server needs one."}},
            "required": ["name", "prefixes", "right", "token_required"]}}}}}
    }}));
    paths.insert("/healthz".into(), json!({"get": {
        "operationId": "healthz", "summary": "Liveness and readiness for probes", "security": [],
        "responses": {"200": {"description": "the store answers"}, "503": problem_response("the store does not answer")}
    }}));
    paths.insert(
        "/metrics".into(),
        json!({"get": {
            "operationId": "metrics", "summary": "Prometheus metrics (text exposition format)",
            "responses": {"200": {"description": "metrics", "content": {"text/plain": {"schema": {"type": "string"}}}}}
        }}),
    );
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "state",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Durable, atomic, shared state for AI agents. Every write is on disk before it is \
                acknowledged. Keys carry versions (ETag) and the store a global revision. The same operations \
                are MCP tools at /mcp."
        },
        "security": [{"bearer": []}, {}],
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                "description": "A token from the server's --auth file; required when the server has one."}}
        }
    })
}

fn operation(route: &Route, components: &mut Map<String, Value>) -> Value {
    let spec = route.op.spec();
    let input = hoist(Value::Object(spec.input_schema()), components);
    let properties = input.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
    let required: Vec<&str> = input
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let path_params = route.path_params();
    let mut parameters: Vec<Value> = path_params
        .iter()
        .map(|name| {
            let description = if route.path.contains(&format!("{{*{name}}}")) {
                "The id; it may contain `/`, which is sent as is."
            } else {
                "The id."
            };
            json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}, "description": description})
        })
        .collect();
    let body_field = match route.body {
        Body::Field(field) => Some(field),
        _ => None,
    };
    if route.body != Body::Args {
        for (name, schema) in &properties {
            if path_params.contains(&name.as_str()) || Some(name.as_str()) == body_field {
                continue;
            }
            let mut parameter = json!({"name": name, "in": "query", "required": required.contains(&name.as_str())});
            if let Some(description) = schema.get("description") {
                parameter["description"] = description.clone();
            }
            let mut schema = schema.clone();
            if let Some(s) = schema.as_object_mut() {
                s.remove("description");
            }
            parameter["schema"] = schema;
            if matches!(parameter["schema"].get("type").and_then(Value::as_str), Some("object" | "array")) {
                parameter["description"] = json!("Given as JSON.");
            }
            parameters.push(parameter);
        }
    }
    match route.flavor {
        Flavor::KvRead => parameters.push(header("If-None-Match", "An ETag (version): 304 when it is still current.")),
        Flavor::KvWrite => {
            parameters
                .push(header("If-Match", "Write only if the current version is this ETag (the version you read)."));
            parameters.push(header("If-None-Match", "`*`: create only, if the key does not exist."));
        }
        Flavor::Plain(_) => {}
    }
    if route.op.is_mutating() {
        parameters.push(header(
            "Idempotency-Key",
            "Resending the request with the same key returns the first result instead of applying it twice.",
        ));
    }
    let mut operation = json!({
        "operationId": spec.name,
        "summary": spec.title,
        "description": spec.description,
        "tags": [spec.group.name()],
        "parameters": parameters,
        "responses": responses(route, components),
    });
    match route.body {
        Body::Args => {
            let mut schema = input.clone();
            if let Some(object) = schema.as_object_mut() {
                if let Some(props) = object.get_mut("properties").and_then(Value::as_object_mut) {
                    props.retain(|name, _| !path_params.contains(&name.as_str()));
                }
                if let Some(req) = object.get_mut("required").and_then(Value::as_array_mut) {
                    req.retain(|name| !name.as_str().is_some_and(|n| path_params.contains(&n)));
                }
            }
            operation["requestBody"] = json!({"required": false, "content": {"application/json": {"schema": schema}}});
        }
        Body::Field(field) => {
            let schema = properties.get(field).cloned().unwrap_or_else(|| json!({}));
            operation["requestBody"] = json!({
                "required": true,
                "description": format!("The {field}, as JSON."),
                "content": {"application/json": {"schema": schema}},
                // Which argument the body is, for generated clients (an OpenAPI extension).
                "x-argument": field
            });
        }
        Body::None => {}
    }
    operation
}

fn responses(route: &Route, components: &mut Map<String, Value>) -> Value {
    let output = route.op.spec().output_schema().map(|s| hoist(Value::Object(s), components)).unwrap_or(json!({}));
    let mut responses = json!({
        "200": {"description": "the result", "content": {"application/json": {"schema": output}}},
        "400": problem_response("bad arguments or input; nothing was changed"),
        "401": problem_response("a token is required"),
        "403": problem_response("the token does not cover what the call touches"),
        "503": problem_response("the store is unavailable; `outcome_unknown` names the request to resend"),
    });
    let conflict = match route.flavor {
        Flavor::KvWrite => Some("412"),
        Flavor::Plain(crate::problem::OnConflict::Conflict) => Some("409"),
        _ => None,
    };
    if let Some(status) = conflict {
        responses[status] = problem_response("a precondition did not hold; `result` carries the current state");
    }
    if route.flavor == Flavor::KvRead {
        responses["304"] = json!({"description": "the version in If-None-Match is still current"});
    }
    if reads_one(route.op) {
        responses["404"] = problem_response("it does not exist; `result` says so with the current revision");
    }
    responses
}

fn reads_one(op: Operation) -> bool {
    use Operation::*;
    matches!(
        op,
        StateGet
            | StateDelete
            | WorkflowStatus
            | WorkflowResume
            | WorkflowCheckpoint
            | WorkflowHeartbeat
            | WorkflowComplete
            | WorkflowFail
            | WorkflowCancel
            | WorkflowClaim
            | SessionRestore
            | HistoryLog
    )
}

/// `GET /v1/watch`, whose answer is an event stream rather than one JSON document.
fn watch_operation() -> Value {
    let query = |name: &str, schema: Value, description: &str| json!({"name": name, "in": "query", "required": false, "schema": schema, "description": description});
    json!({
        "operationId": "state_watch",
        "summary": "Follow changes as server-sent events",
        "description": "Every change under a key or prefix after a revision, in order, then live ones as they \
            commit. The stream opens with a `position` event whose id is the revision it starts after. Each \
            revision with changes is one event: its id is the revision and its data `{\"revision\", \"events\"}` \
            (events as in /v1/history). Reconnect with `Last-Event-ID` to resume exactly after the last event. \
            A watch that cannot go on ends with a `problem` event holding a problem document: `watch_lagged` \
            (resume after its `resume_after`) or `unavailable` (the server is stopping; reconnect). A comment \
            line is sent on an idle stream every keep-alive interval.",
        "tags": ["watch"],
        "parameters": [
            query("key", json!({"type": "string"}), "Only this key (or lease resource, run id, session id, per `kind`)."),
            query("prefix", json!({"type": "string"}), "Only keys (or ids) under this prefix."),
            query("kind", json!({"type": "string", "enum": ["kv", "lease", "workflow", "session", "store"]}),
                "What to watch; with `key` or `prefix` and no kind, kv."),
            query("from_revision", json!({"type": "integer", "minimum": 0}),
                "Changes after this revision; absent, from now on."),
            query("include_values", json!({"type": "boolean"}), "Include the values of puts (default true)."),
            header("Last-Event-ID", "The last event id received: resume after it (wins over from_revision).")
        ],
        "responses": {
            "200": {"description": "the event stream", "content": {"text/event-stream": {"schema": {"type": "string"}}}},
            "400": problem_response("bad parameters"),
            "401": problem_response("a token is required"),
            "403": problem_response("the token does not cover what the watch covers"),
            "410": problem_response("history after that revision was compacted; `compacted_revision` is the newest gone"),
            "503": problem_response("the store is unavailable")
        }
    })
}

fn header(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "header", "required": false, "schema": {"type": "string"}, "description": description})
}

fn problem_response(description: &str) -> Value {
    json!({"description": description, "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}})
}

fn problem_schema() -> Value {
    json!({
        "type": "object",
        "description": "An RFC 9457 problem. `code` is stable for programs; `detail` says what to do.",
        "properties": {
            "type": {"type": "string"}, "title": {"type": "string"}, "status": {"type": "integer"},
            "detail": {"type": "string"}, "code": {"type": "string"},
            "argument": {"type": "string"}, "compacted_revision": {"type": "integer"},
            "result": {"description": "For conflicts, fences and not-founds: the operation's result."}
        },
        "required": ["type", "title", "status", "detail", "code"]
    })
}

fn reply_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "outcome": {"type": "string",
                "enum": ["ok", "conflict", "not_found", "fenced", "forbidden", "invalid", "unavailable", "internal"]},
            "result": {"description": "The operation's result."},
            "error": {"type": "object", "properties": {
                "code": {"type": "string"}, "message": {"type": "string"},
                "argument": {"type": "string"}, "compacted_revision": {"type": "integer"}}}
        },
        "required": ["outcome"]
    })
}

fn seam_operation() -> Value {
    json!({
        "operationId": "call",
        "summary": "Call any operation of the catalog by id",
        "description": "The operation seam over HTTP: every operation, compatibility profiles included, \
            with the arguments its MCP tool takes. `profile` is native, agentcheckpoint, sidecar or caxton.",
        "parameters": [
            {"name": "profile", "in": "path", "required": true, "schema": {"type": "string"}},
            {"name": "name", "in": "path", "required": true, "schema": {"type": "string"}},
            header("Idempotency-Key", "For a mutating operation: a retry with this key returns the first result.")
        ],
        "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}},
        "responses": {
            "200": {"description": "the reply", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Reply"}}}},
            "404": problem_response("no such operation")
        }
    })
}

/// Moves a schema's `$defs` into the document's components and points its references there.
fn hoist(mut schema: Value, components: &mut Map<String, Value>) -> Value {
    if let Some(defs) = schema.as_object_mut().and_then(|o| o.remove("$defs")).and_then(|d| d.as_object().cloned()) {
        for (name, def) in defs {
            let def = rewrite_refs(def);
            components.entry(name).or_insert(def);
        }
    }
    rewrite_refs(schema)
}

fn rewrite_refs(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| match (k.as_str(), &v) {
                    ("$ref", Value::String(r)) if r.starts_with("#/$defs/") => {
                        (k, Value::String(r.replace("#/$defs/", "#/components/schemas/")))
                    }
                    _ => (k, rewrite_refs(v)),
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(rewrite_refs).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests;
