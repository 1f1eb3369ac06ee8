use axum::http::{HeaderMap, HeaderValue, header};

use super::*;

fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
    pairs.iter().map(|(k, v)| (k.clone(), HeaderValue::from_str(v).unwrap())).collect()
}

#[test]
fn preconditions_become_expected_versions() {
    assert_eq!(expected_version(&headers(&[])).unwrap(), None);
    assert_eq!(expected_version(&headers(&[(header::IF_MATCH, "\"7\"")])).unwrap(), Some(7));
    assert_eq!(expected_version(&headers(&[(header::IF_MATCH, "W/\"7\"")])).unwrap(), Some(7));
    assert_eq!(expected_version(&headers(&[(header::IF_NONE_MATCH, "*")])).unwrap(), Some(0));
    for bad in [
        headers(&[(header::IF_MATCH, "*")]),
        headers(&[(header::IF_MATCH, "\"1\", \"2\"")]),
        headers(&[(header::IF_MATCH, "\"x\"")]),
        headers(&[(header::IF_NONE_MATCH, "\"3\"")]),
        headers(&[(header::IF_MATCH, "\"1\""), (header::IF_NONE_MATCH, "*")]),
    ] {
        let error = expected_version(&bad).unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidArguments, "{bad:?}");
    }
}

#[test]
fn entity_tag_lists_parse() {
    assert_eq!(entity_tags("\"3\", W/\"4\""), Some(vec![3, 4]));
    assert_eq!(entity_tags("\"a\""), None);
}
