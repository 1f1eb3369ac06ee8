use std::sync::Arc;

use crate::catalog::Operation;
use serde_json::json;
use state_store::{Engine, EngineConfig, ManualClock, RedbBackend};

use super::*;
use crate::reply::{ErrorCode, Outcome};

fn local() -> Local {
    let backend = RedbBackend::in_memory().unwrap();
    let clock = ManualClock::new(state_core::UnixMillis(1_800_000_000_000));
    Local::without_maintenance(Engine::new(Arc::new(backend), Arc::new(clock), EngineConfig::default()).unwrap())
}

#[tokio::test]
async fn outcomes_are_classed_from_the_result() {
    let l = local();
    let missing = l.call(Operation::StateGet, json!({"key": "k"})).await;
    assert_eq!(missing.outcome, Outcome::NotFound);
    assert_eq!(missing.body.unwrap()["status"], "not_found");
    let set = l.call(Operation::StateSet, json!({"key": "k", "value": 1, "expected_version": 0})).await;
    assert_eq!(set.outcome, Outcome::Ok);
    let again = l.call(Operation::StateSet, json!({"key": "k", "value": 2, "expected_version": 0})).await;
    assert_eq!(again.outcome, Outcome::Conflict);
    assert_eq!(again.body.unwrap()["value"], 1, "a conflict is a result carrying the current value");
    let lease = json!({"resource_id": "r", "holder_id": "a", "ttl_seconds": 10});
    assert_eq!(l.call(Operation::LeaseAcquire, lease).await.outcome, Outcome::Ok);
    let taken = json!({"resource_id": "r", "holder_id": "b", "ttl_seconds": 10});
    assert_eq!(l.call(Operation::LeaseAcquire, taken).await.outcome, Outcome::Conflict);
    let fenced = json!({"key": "k", "value": 3, "lease": "r", "token": 1});
    assert_eq!(l.call(Operation::StateSet, fenced).await.outcome, Outcome::Fenced);
}

#[tokio::test]
async fn bad_arguments_and_bad_input_are_told_apart() {
    let l = local();
    let shape = l.call(Operation::StateSet, json!({"key": "k"})).await;
    let error = shape.body.unwrap_err();
    assert_eq!((shape.outcome, error.code), (Outcome::Invalid, ErrorCode::InvalidArguments));
    assert!(error.message.contains("invalid arguments for `state_set`") && error.message.contains("value"));
    let rule = l.call(Operation::StateSet, json!({"key": "", "value": 1})).await;
    let error = rule.body.unwrap_err();
    assert_eq!((error.code, error.argument.as_deref()), (ErrorCode::InvalidInput, Some("key")));
    assert!(error.message.ends_with("Nothing was changed."), "{}", error.message);
}

#[tokio::test]
async fn a_compatibility_not_found_is_not_found() {
    let l = local();
    let reply = l.call(Operation::SidecarWorkflowResume, json!({"run_id": "nope"})).await;
    let error = reply.body.unwrap_err();
    assert_eq!((reply.outcome, error.code), (Outcome::NotFound, ErrorCode::NotFound));
    assert_eq!(error.message, "Workflow 'nope' not found");
}

#[tokio::test]
async fn a_callers_request_id_makes_any_mutating_call_idempotent() {
    let l = local();
    let store = json!({"key": "k", "value": 1});
    l.call_with_id(Operation::CaxtonStore, store.clone(), Some("c-1".into())).await;
    l.call_with_id(Operation::CaxtonStore, store, Some("c-1".into())).await;
    let got = l.call(Operation::StateGet, json!({"key": "k"})).await.body.unwrap();
    assert_eq!(got["version"], 1, "the compatibility write was applied once");
    // An id in the arguments wins over the caller's.
    let args = json!({"key": "n", "value": 1, "request_id": "mine"});
    l.call_with_id(Operation::StateSet, args.clone(), Some("joiner".into())).await;
    let replay = l.call(Operation::StateSet, args).await;
    assert_eq!(replay.body.unwrap()["version"], 1);
    // Reads never take one.
    let read = l.call_with_id(Operation::StateGet, json!({"key": "n"}), Some("x".into())).await;
    assert_eq!(read.outcome, Outcome::Ok);
}

#[test]
fn an_encoding_bug_is_internal_not_storage() {
    let error = api_error(Operation::StateSet, CallError::Encode("NaN".into()));
    assert_eq!(error.code, ErrorCode::Internal);
    assert!(error.message.contains("may have been applied") && !error.message.contains("storage"), "{}", error.message);
}

#[tokio::test]
async fn health_names_the_process_holding_the_database() {
    let l = local();
    let health = l.call(Operation::StateHealth, json!({})).await.body.unwrap();
    assert_eq!(health["owner"]["pid"], std::process::id());
    assert_eq!(health["owner"]["mode"], "standalone");
}
