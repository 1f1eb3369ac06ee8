use std::time::Duration;

use super::*;

fn unreachable() -> JoinError {
    JoinError::Unreachable { db: "/d/s.redb".into(), waited: Duration::from_secs(20), detail: "nobody".into() }
}

/// What the settle loop answers when the owner could not be reached (`sent`: after a call
/// went out).
fn unsettled(op: Operation, request_id: Option<&str>, sent: bool, error: &JoinError) -> Reply {
    settle::unsettled(op, request_id, sent, &unreached(error))
}

#[test]
fn a_write_lost_in_flight_is_reported_as_unknown_with_how_to_settle_it() {
    let reply = unsettled(Operation::StateSet, Some("j1.2.3"), true, &unreachable());
    let error = reply.body.unwrap_err();
    assert_eq!((reply.outcome, error.code), (crate::Outcome::Unavailable, ErrorCode::OutcomeUnknown));
    for needle in ["outcome of `state_set` is unknown", "state_get", "workflow_status", "request_id \"j1.2.3\""] {
        assert!(error.message.contains(needle), "{needle}: {}", error.message);
    }
}

#[test]
fn a_call_that_never_left_is_reported_as_not_applied() {
    let error = unsettled(Operation::StateSet, Some("k"), false, &unreachable()).body.unwrap_err();
    assert_eq!(error.code, ErrorCode::Unavailable);
    assert!(error.message.contains("was not applied"), "{}", error.message);
    let read = unsettled(Operation::StateGet, None, true, &unreachable()).body.unwrap_err();
    assert!(read.message.contains("could not be run"), "{}", read.message);
}

#[test]
fn setup_problems_are_not_retried_or_called_unknown() {
    let skew = JoinError::VersionSkew {
        db: "/d/s.redb".into(),
        pid: 7,
        owner_version: "0.0.1".into(),
        owner_wire: 0,
        client: "state-mcp 0.1.0".into(),
    };
    let error = unsettled(Operation::StateSet, Some("k"), true, &skew).body.unwrap_err();
    assert_eq!(error.code, ErrorCode::Unavailable);
    assert!(error.message.contains("kill 7") && error.message.contains("version 0"), "{}", error.message);
}
