//! Every tool's schema tells the truth about its numeric bounds: for each top-level argument
//! with a declared `minimum` or `maximum`, a call at the bound is accepted and a call just past
//! it is refused as invalid, everything else in the call being the same. A client (or a model)
//! that reads the schema and stays inside it is never refused for it, and the schema claims no
//! room the validator does not give.
//!
//! Each call starts from the tool's required arguments filled in from their types (strings
//! "x", numbers at their minimum, one element for a non-empty array), with `BASE` overriding
//! where a rule needs more; a base call that is itself refused fails the test.

use std::time::Duration;

use serde_json::{Map, Value, json};
use state_api::catalog::Operation;
use state_api::{Api, Local, Outcome, Settings};

/// Arguments a tool's required fields need beyond their types.
const BASE: &[(&str, &str)] = &[("state_reset", r#"{"confirm": "wipe everything"}"#)];

/// Arguments that are only accepted beside another: (argument, its companion, a value for it).
const COMPANIONS: &[(&str, &str, &str)] = &[("token", "lease", "x"), ("concurrency_limit", "concurrency_key", "x")];

/// A call's verdict: refused as invalid, or not (answered, or still waiting after 300 ms: a
/// wait is only begun once the arguments passed).
async fn refused(api: &Api, op: Operation, args: Value) -> Option<String> {
    match tokio::time::timeout(Duration::from_millis(300), api.call(op, args)).await {
        Ok(reply) if reply.outcome == Outcome::Invalid => {
            Some(reply.body.err().map(|e| e.message).unwrap_or_else(|| "invalid".into()))
        }
        _ => None,
    }
}

/// A value of `schema`'s type: its first enum value, its minimum, "x", one element.
fn filler(schema: &Value) -> Value {
    if let Some(first) = schema.get("enum").and_then(|e| e.get(0)) {
        return first.clone();
    }
    if let Some(constant) = schema.get("const") {
        return constant.clone();
    }
    let kind = match schema.get("type") {
        Some(Value::String(kind)) => kind.as_str(),
        Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).find(|k| *k != "null").unwrap_or("null"),
        _ => "object",
    };
    match kind {
        "string" => json!("x"),
        "integer" => json!(schema.get("minimum").and_then(Value::as_i64).unwrap_or(1).max(1)),
        "number" => json!(schema.get("minimum").and_then(Value::as_f64).unwrap_or(1.0).max(1.0)),
        "boolean" => json!(false),
        "array" => {
            let wants_one = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0) > 0;
            if wants_one { json!([filler(schema.get("items").unwrap_or(&Value::Null))]) } else { json!([]) }
        }
        "null" => Value::Null,
        _ => json!({}),
    }
}

fn base(op: Operation, schema: &Value) -> Map<String, Value> {
    let mut args = Map::new();
    for name in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        args.insert(name.to_owned(), filler(&schema["properties"][name]));
    }
    if let Some((_, extra)) = BASE.iter().find(|(tool, _)| *tool == op.name())
        && let Ok(Value::Object(extra)) = serde_json::from_str::<Value>(extra)
    {
        args.extend(extra);
    }
    args
}

/// The bounds `property` declares: (the bound, a value past it), each as JSON.
fn bounds(property: &Value) -> Vec<(&'static str, Value, Value)> {
    let integer = property
        .get("type")
        .is_some_and(|t| t == "integer" || t.as_array().is_some_and(|a| a.contains(&json!("integer"))));
    let mut found = Vec::new();
    if let Some(max) = property.get("maximum").and_then(Value::as_f64) {
        let past = if integer { json!(max as i64 + 1) } else { json!(max + max.abs().max(1.0) * 1e-6) };
        found.push(("maximum", if integer { json!(max as i64) } else { json!(max) }, past));
    }
    if let Some(min) = property.get("minimum").and_then(Value::as_f64) {
        let past = if integer { json!(min as i64 - 1) } else { json!(min - min.abs().max(1.0) * 1e-6) };
        found.push(("minimum", if integer { json!(min as i64) } else { json!(min) }, past));
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_declared_numeric_bound_is_the_validators() {
    let dir = tempfile::tempdir().unwrap();
    let api = Api::local(Local::open_standalone(&dir.path().join("s.redb"), Settings::default()).unwrap());
    let mut checked = 0;
    let mut untrue = Vec::new();
    for op in Operation::all() {
        let schema = Value::Object(op.spec().input_schema());
        let Some(properties) = schema["properties"].as_object() else { continue };
        let base = base(op, &schema);
        let tool = op.id();
        let mut bounded =
            properties.iter().flat_map(|(name, p)| bounds(p).into_iter().map(move |b| (name, b))).peekable();
        if bounded.peek().is_none() {
            continue;
        }
        if let Some(why) = refused(&api, op, Value::Object(base.clone())).await {
            panic!("{tool}: the base call {base:?} is refused ({why}); add what it needs to BASE");
        }
        for (name, (which, at, past)) in bounded {
            let with = |value: &Value| {
                let mut args = base.clone();
                args.insert(name.clone(), value.clone());
                for (argument, companion, needed) in COMPANIONS {
                    if name == argument && properties.contains_key(*companion) {
                        args.entry(companion.to_string()).or_insert_with(|| json!(needed));
                    }
                }
                Value::Object(args)
            };
            if let Some(why) = refused(&api, op, with(&at)).await {
                untrue.push(format!("{tool}.{name}: the declared {which} {at} is refused: {why}"));
            }
            if refused(&api, op, with(&past)).await.is_none() {
                untrue.push(format!("{tool}.{name}: {past}, past the declared {which} {at}, is accepted"));
            }
            checked += 1;
        }
    }
    assert!(untrue.is_empty(), "schemas that do not tell the truth:\n{}", untrue.join("\n"));
    assert!(checked >= 20, "only {checked} bounds were found to check");
    eprintln!("{checked} declared bounds checked");
}
