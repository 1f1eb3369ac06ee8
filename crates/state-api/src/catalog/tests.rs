use super::*;

#[test]
fn specs_are_indexed_by_operation() {
    for (i, spec) in SPECS.iter().enumerate() {
        assert_eq!(spec.operation as usize, i, "SPECS[{i}] ({}) is out of declaration order", spec.name);
        assert_eq!(spec.operation.spec().name, spec.name);
    }
}

#[test]
fn tool_names_are_unique_within_a_profile_and_valid_mcp_names() {
    let mut seen = std::collections::BTreeSet::new();
    for op in Operation::all() {
        let name = op.name();
        assert!(seen.insert((op.spec().profile.name(), name)), "duplicate tool name {name}");
        assert!(name.len() <= 128 && name.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c)), "{name}");
    }
}

#[test]
fn every_schema_is_an_object_schema() {
    for op in Operation::all() {
        let spec = op.spec();
        let input = spec.input_schema();
        assert_eq!(input.get("type"), Some(&Value::from("object")), "{} input", spec.name);
        assert!(!input.contains_key("$schema"));
        if let Some(output) = spec.output_schema() {
            assert_eq!(output.get("type"), Some(&Value::from("object")), "{} output", spec.name);
        }
        assert_eq!(spec.output_schema().is_some(), spec.presentation == Presentation::Structured, "{}", spec.name);
    }
}

#[test]
fn native_inputs_reject_unknown_arguments() {
    for op in Operation::all().filter(|op| op.spec().profile == Profile::Native) {
        let input = op.spec().input_schema();
        assert_eq!(input.get("additionalProperties"), Some(&Value::Bool(false)), "{}", op.name());
    }
}

#[test]
fn descriptions_stay_short() {
    // Tool definitions are sent to every client on every session: keep them cheap.
    for op in Operation::all() {
        let d = op.spec().description;
        assert!(d.len() <= 240, "{}: description is {} bytes", op.name(), d.len());
    }
}

#[test]
fn operation_ids_are_unique_and_round_trip() {
    let mut seen = std::collections::BTreeSet::new();
    for op in Operation::all() {
        let id = op.id();
        assert!(seen.insert(id.clone()), "duplicate id {id}");
        assert_eq!(Operation::from_id(&id), Some(op), "{id}");
    }
    assert_eq!(Operation::from_id("sidecar/state_get"), Some(Operation::SidecarStateGet));
    assert_eq!(Operation::from_id("native/nope"), None);
    assert_eq!(Operation::from_id("state_get"), None);
}

#[test]
fn every_native_mutating_tool_takes_a_request_id() {
    for op in Operation::all().filter(|op| op.spec().profile == Profile::Native) {
        let schema = op.spec().input_schema();
        let has = schema.get("properties").and_then(|p| p.get("request_id")).is_some();
        assert_eq!(has, op.is_mutating(), "{}: request_id present = {has}", op.name());
    }
}

#[test]
fn adapters_call_native_operations_with_their_declared_types() {
    // An adapter's typed handle on a native operation names it and its request and result
    // types; the declaration of that name must take and answer exactly those.
    let without_noise = |schema: Value| {
        let mut object = schema.as_object().cloned().unwrap_or_default();
        for noise in ["$schema", "title", "description"] {
            object.remove(noise);
        }
        object
    };
    for (name, request, result) in state_compat::seam::native::all() {
        let op = Operation::from_id(&format!("native/{name}")).unwrap_or_else(|| panic!("no native `{name}`"));
        assert_eq!(without_noise(request()), op.spec().input_schema(), "{name}: request type");
        assert_eq!(Some(without_noise(result())), op.spec().output_schema(), "{name}: result type");
    }
}

/// docs/tools.md is the catalog's own reference; `STATE_UPDATE_DOCS=1` writes it afresh.
#[test]
fn tools_reference_is_docs_tools_md() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/tools.md");
    let generated = super::tools_reference();
    if std::env::var_os("STATE_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        written == generated,
        "docs/tools.md is not the catalog's reference; regenerate it: STATE_UPDATE_DOCS=1 cargo nextest run -E 'test(tools_reference)'"
    );
}
