//! Tool schemas as an MCP client is sent them. Every client pays for tool schemas in context
//! tokens on every session, so they say what a model needs and nothing else; the catalog's
//! schemas are what the types derive (REST's OpenAPI document uses those).

use serde_json::{Map, Value};

pub(crate) type JsonObject = Map<String, Value>;

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Direction {
    Input,
    Output,
}

/// `schema` shaped for a tool list.
pub(crate) fn for_tool_list(mut schema: JsonObject, direction: Direction) -> JsonObject {
    compact(&mut schema, direction, false);
    schema
}

/// Each rewrite keeps the schema's meaning for the values we accept
/// or produce:
/// - Rust type names in `format` (`uint64`, `double`) are not JSON Schema formats: dropped.
/// - Optional fields are simply absent when unset: `["integer", "null"]` becomes `"integer"`,
///   and `anyOf: [X, {"type": "null"}]` becomes X. Except in a result's required fields: those
///   are always present and may be `null` (a replaced server's shapes print `null`), and a
///   client validating the result against the schema must accept that.
/// - An enum documented per variant (a `oneOf` of string constants) becomes one `enum` with
///   the variants' notes folded into its description.
/// - Outputs are ours: their `minimum: 0` tells a reader nothing, and their field notes repeat
///   what the tool descriptions and the guides say (a model reads a result by its field
///   names); only their structure is kept. Input notes stay: they guide the call.
fn compact(object: &mut JsonObject, direction: Direction, may_be_null: bool) {
    // The 2025-11-25 protocol schema wants every property's schema to be an object: "any
    // value" is written `{}` rather than `true` (the same meaning).
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        for schema in properties.values_mut().filter(|s| **s == Value::Bool(true)) {
            *schema = Value::Object(Map::new());
        }
    }
    if object.get("items") == Some(&Value::Bool(true)) {
        object.insert("items".into(), Value::Object(Map::new()));
    }
    const RUST_FORMATS: [&str; 10] =
        ["uint", "uint8", "uint16", "uint32", "uint64", "int", "int32", "int64", "double", "float"];
    if object.get("format").and_then(Value::as_str).is_some_and(|f| RUST_FORMATS.contains(&f)) {
        object.remove("format");
    }
    if direction == Direction::Output && object.get("minimum") == Some(&Value::from(0)) {
        object.remove("minimum");
    }
    if let Some(Value::Array(types)) = object.get("type")
        && !may_be_null
    {
        let real: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        if real.len() == 1 {
            object.insert("type".into(), real[0].clone());
        }
    }
    if let Some(Value::Array(options)) = object.get("anyOf")
        && !may_be_null
    {
        let real: Vec<&Value> = options.iter().filter(|o| o.get("type") != Some(&Value::from("null"))).collect();
        if let [Value::Object(only)] = real.as_slice() {
            let only = only.clone();
            object.remove("anyOf");
            for (k, v) in only {
                object.entry(k).or_insert(v);
            }
        }
    }
    fold_documented_enum(object);
    if direction == Direction::Output {
        object.remove("description");
    }
    let required: Vec<String> = match object.get("required") {
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        _ => Vec::new(),
    };
    for (key, value) in object.iter_mut() {
        match value {
            Value::Object(properties) if key == "properties" => {
                for (name, property) in properties.iter_mut() {
                    if let Value::Object(property) = property {
                        let may_be_null = direction == Direction::Output && required.contains(name);
                        compact(property, direction, may_be_null);
                    }
                }
            }
            Value::Object(inner) => compact(inner, direction, false),
            Value::Array(items) => {
                for item in items.iter_mut().filter_map(Value::as_object_mut) {
                    compact(item, direction, false);
                }
            }
            _ => {}
        }
    }
}

fn fold_documented_enum(object: &mut JsonObject) {
    let Some(Value::Array(options)) = object.get("oneOf") else { return };
    let mut names = Vec::new();
    let mut notes = Vec::new();
    for option in options {
        let constants: Vec<&str> = match (option.get("const"), option.get("enum")) {
            (Some(Value::String(c)), _) => vec![c.as_str()],
            (_, Some(Value::Array(e))) => e.iter().filter_map(Value::as_str).collect(),
            _ => return,
        };
        if option.get("type") != Some(&Value::from("string")) || constants.is_empty() {
            return;
        }
        if let Some(Value::String(note)) = option.get("description") {
            notes.push(format!("{}: {}", constants.join("/"), note.trim_end_matches('.')));
        }
        names.extend(constants.into_iter().map(Value::from));
    }
    object.remove("oneOf");
    object.insert("type".into(), Value::from("string"));
    object.insert("enum".into(), Value::Array(names));
    if !notes.is_empty() {
        let folded = notes.join("; ");
        let description = match object.get("description").and_then(Value::as_str) {
            Some(own) => format!("{own} {folded}."),
            None => format!("{folded}."),
        };
        object.insert("description".into(), Value::from(description));
    }
}

#[cfg(test)]
mod tests;
