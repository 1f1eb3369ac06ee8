//! How answers that are not replies become outcomes: one mapping for calls and watches.

use hyper::StatusCode;
use serde_json::json;

use super::refusal;
use crate::reply::ErrorCode;

fn refused(status: u16, body: &serde_json::Value) -> Result<crate::ApiError, String> {
    refusal(StatusCode::from_u16(status).unwrap(), body.to_string().as_bytes())
}

#[test]
fn a_problem_with_one_of_the_seams_codes_keeps_it_and_its_details() {
    let gone = json!({"code": "compacted", "detail": "history before 41 is compacted", "compacted_revision": 41});
    let error = refused(410, &gone).unwrap();
    assert_eq!((error.code, error.compacted_revision), (ErrorCode::Compacted, Some(41)));
    assert_eq!(error.message, "history before 41 is compacted");
    let lagged = json!({"code": "watch_lagged", "detail": "fell behind", "resume_after": 9});
    assert_eq!(refused(503, &lagged).unwrap().resume_after, Some(9), "a seam code wins over the status");
    let bad = json!({"code": "invalid_arguments", "detail": "no key", "argument": "key"});
    assert_eq!(refused(400, &bad).unwrap().argument.as_deref(), Some("key"));
}

#[test]
fn http_s_own_problems_are_classed_by_status_and_say_so() {
    let cases = [
        (401, "unauthenticated", ErrorCode::Forbidden),
        (400, "bad_header", ErrorCode::InvalidArguments),
        (413, "too_large", ErrorCode::InvalidInput),
        (404, "unknown_operation", ErrorCode::InvalidArguments),
    ];
    for (status, code, expected) in cases {
        let error = refused(status, &json!({"code": code, "detail": "why"})).unwrap();
        assert_eq!(error.code, expected, "{status}");
        assert!(error.message.starts_with(&format!("the server answered {status}")), "{}", error.message);
    }
}

#[test]
fn a_request_timeout_is_an_unknown_outcome_not_a_usage_error() {
    let error = refused(408, &json!({"detail": "took too long"})).unwrap();
    assert_eq!(error.code, ErrorCode::OutcomeUnknown);
    assert!(error.message.contains("applied or not"), "{}", error.message);
}

#[test]
fn a_gateway_or_a_stopping_server_is_tried_again() {
    let stopping = json!({"code": "unavailable", "detail": "the server is stopping"});
    assert!(refused(503, &stopping).unwrap_err().contains("stopping"));
    let gateway = refusal(StatusCode::BAD_GATEWAY, b"<html>bad gateway</html>").unwrap_err();
    assert_eq!(gateway, "the server answered 502 Bad Gateway without a reply");
}
