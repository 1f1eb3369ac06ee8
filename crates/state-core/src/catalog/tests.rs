use super::*;

#[test]
fn specs_are_indexed_by_operation() {
    for (i, op) in Operation::ALL.iter().enumerate() {
        assert_eq!(SPECS[i].operation, *op, "SPECS[{i}] is out of order");
        assert_eq!(op.spec().operation, *op);
    }
}

#[test]
fn tool_names_are_unique_and_valid_mcp_names() {
    let mut seen = std::collections::BTreeSet::new();
    for op in Operation::ALL {
        let name = op.name();
        assert!(seen.insert(name), "duplicate tool name {name}");
        assert!(name.len() <= 128 && name.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c)), "{name}");
    }
}

#[test]
fn every_schema_is_an_object_schema() {
    for op in Operation::ALL {
        let spec = op.spec();
        let input = spec.input_schema();
        assert_eq!(input.get("type"), Some(&Value::from("object")), "{} input", spec.name);
        assert!(!input.contains_key("$schema"));
        if let Some(output) = spec.output_schema() {
            assert_eq!(output.get("type"), Some(&Value::from("object")), "{} output", spec.name);
        }
        assert_eq!(spec.output_schema().is_some(), spec.presentation == Presentation::Structured);
    }
}

#[test]
fn native_inputs_reject_unknown_arguments() {
    for op in Operation::in_profiles(&[Profile::Native]) {
        let input = op.spec().input_schema();
        assert_eq!(input.get("additionalProperties"), Some(&Value::Bool(false)), "{}", op.name());
    }
}

#[test]
fn descriptions_stay_short() {
    // Tool definitions are sent to every client on every session: keep them cheap.
    for op in Operation::ALL {
        let d = op.spec().description;
        assert!(d.len() <= 240, "{}: description is {} bytes", op.name(), d.len());
    }
}

#[test]
fn schemas_carry_no_rust_type_formats() {
    for op in Operation::ALL {
        let text = Value::Object(op.spec().input_schema()).to_string();
        assert!(!text.contains("uint64") && !text.contains("\"double\""), "{}: {text}", op.name());
    }
}
