use serde_json::Value;
use state_api::catalog::Operation;

use super::{Direction, for_tool_list};

fn input(op: Operation) -> super::JsonObject {
    for_tool_list(op.spec().input_schema(), Direction::Input)
}

fn output(op: Operation) -> Option<super::JsonObject> {
    op.spec().output_schema().map(|s| for_tool_list(s, Direction::Output))
}

#[test]
fn schemas_carry_no_rust_type_formats() {
    for op in Operation::all() {
        let text = Value::Object(input(op)).to_string();
        assert!(!text.contains("uint64") && !text.contains("\"double\""), "{}: {text}", op.name());
    }
}

#[test]
fn property_schemas_are_objects() {
    fn check(value: &Value, path: &str) {
        if let Some(properties) = value.get("properties").and_then(Value::as_object) {
            for (name, schema) in properties {
                assert!(schema.is_object(), "{path}.{name} is {schema}");
                check(schema, &format!("{path}.{name}"));
            }
        }
        if let Some(defs) = value.get("$defs").and_then(Value::as_object) {
            for (name, schema) in defs {
                check(schema, &format!("{path}.$defs.{name}"));
            }
        }
    }
    for op in Operation::all() {
        let spec = op.spec();
        check(&Value::Object(input(op)), spec.name);
        if let Some(output) = output(op) {
            check(&Value::Object(output), spec.name);
        }
    }
}

#[test]
fn a_results_required_field_keeps_null_and_an_optional_one_loses_it() {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"holder": {"type": ["string", "null"]}, "note": {"type": ["string", "null"]}},
        "required": ["holder"],
    });
    let Value::Object(schema) = schema else { unreachable!() };
    let shaped = for_tool_list(schema.clone(), Direction::Output);
    assert_eq!(shaped["properties"]["holder"]["type"], serde_json::json!(["string", "null"]));
    assert_eq!(shaped["properties"]["note"]["type"], "string");
    let shaped = for_tool_list(schema, Direction::Input);
    assert_eq!(shaped["properties"]["holder"]["type"], "string", "an argument left out is absent");
}
