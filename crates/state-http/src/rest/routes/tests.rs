use std::collections::BTreeSet;

use state_api::catalog::{Operation, Profile};

use super::*;

#[test]
fn every_native_operation_has_exactly_one_route() {
    let routed: Vec<Operation> = routes().iter().map(|r| r.op).collect();
    // A watch streams: it is rest::watch's event stream, not a route of this table.
    for op in Operation::all().filter(|op| op.spec().profile == Profile::Native && *op != Operation::StateWatch) {
        let count = routed.iter().filter(|r| **r == op).count();
        assert_eq!(count, 1, "{} has {count} routes", op.name());
    }
    let unique: BTreeSet<(String, &str)> = routes().iter().map(|r| (r.method.to_string(), r.path)).collect();
    assert_eq!(unique.len(), routes().len(), "a method and path pair is used twice");
}

#[test]
fn path_parameters_and_body_fields_are_arguments_of_the_operation() {
    for route in routes() {
        let schema = route.op.spec().input_schema();
        let properties = schema.get("properties").and_then(|p| p.as_object()).cloned().unwrap_or_default();
        for name in route.path_params() {
            assert!(
                properties.contains_key(name),
                "{}: `{name}` is not an argument of {}",
                route.path,
                route.op.name()
            );
        }
        if let Body::Field(field) = route.body {
            assert!(properties.contains_key(field), "{}: `{field}`", route.path);
        }
    }
}

#[test]
fn catch_all_ids_become_plain_openapi_parameters() {
    let get = routes().into_iter().find(|r| r.op == Operation::StateGet).unwrap();
    assert_eq!(get.path_params(), ["key"]);
    assert_eq!(get.openapi_path(), "/v1/kv/{key}");
}
