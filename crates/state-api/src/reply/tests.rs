use serde_json::json;

use super::*;

#[test]
fn every_error_code_has_its_class() {
    let table = [
        (ErrorCode::InvalidArguments, Outcome::Invalid),
        (ErrorCode::InvalidInput, Outcome::Invalid),
        (ErrorCode::NotEnabled, Outcome::Invalid),
        (ErrorCode::Forbidden, Outcome::Forbidden),
        (ErrorCode::NotFound, Outcome::NotFound),
        (ErrorCode::Compacted, Outcome::NotFound),
        (ErrorCode::Unavailable, Outcome::Unavailable),
        (ErrorCode::OutcomeUnknown, Outcome::Unavailable),
        (ErrorCode::Storage, Outcome::Unavailable),
        (ErrorCode::WatchLagged, Outcome::Unavailable),
        (ErrorCode::Internal, Outcome::Internal),
    ];
    for (code, outcome) in table {
        assert_eq!(code.outcome(), outcome, "{code:?}");
        assert_eq!(Reply::error(ApiError::new(code, "x")).outcome, outcome);
        assert_eq!(serde_json::to_value(code).unwrap(), json!(code.name()), "names are the wire names");
    }
}

#[test]
fn errors_render_as_an_error_object() {
    let error = ApiError { argument: Some("key".into()), ..ApiError::new(ErrorCode::InvalidInput, "bad key") };
    assert_eq!(
        Reply::error(error).to_json(),
        json!({"error": {"code": "invalid_input", "message": "bad key", "argument": "key"}})
    );
    assert_eq!(Reply::result(Outcome::Ok, json!({"a": 1})).to_json(), json!({"a": 1}));
}
