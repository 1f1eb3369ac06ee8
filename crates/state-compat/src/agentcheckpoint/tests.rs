use super::*;

#[test]
fn like_follows_sqlite_rules() {
    let cases = [
        ("%", "anything", true),
        ("%", "", true),
        ("project:%", "project:x:build", true),
        ("project:%", "PROJECT:x", true),
        ("project:%", "plan:project:", false),
        ("%:build", "project:x:build", true),
        ("%:build", "project:x:build2", false),
        ("a_c", "abc", true),
        ("a_c", "ac", false),
        ("a_c", "abbc", false),
        ("a%b%c", "axxbyyc", true),
        ("a%b%c", "axxbyy", false),
        ("%%", "x", true),
        ("_", "日", true),
        ("ключ%", "ключ/1", true),
        ("a\\%", "a\\anything", true),
        ("exact", "exact", true),
        ("exact", "exactly", false),
    ];
    for (pattern, text, expected) in cases {
        assert_eq!(LikePattern::new(pattern).matches(text), expected, "{pattern:?} vs {text:?}");
    }
}

#[test]
fn scan_prefix_only_when_case_cannot_matter() {
    assert_eq!(LikePattern::new("%").scan_prefix(), Some(String::new()));
    assert_eq!(LikePattern::new("42/%").scan_prefix(), Some("42/".into()));
    assert_eq!(LikePattern::new("project:%").scan_prefix(), None);
}

#[test]
fn set_request_maps_the_version_guard() {
    assert_eq!(set_request("k".into(), Value::Null, -1).expected_version, None);
    assert_eq!(set_request("k".into(), Value::Null, 0).expected_version, Some(0));
    assert_eq!(set_request("k".into(), Value::Null, 7).expected_version, Some(7));
    assert_eq!(set_request("k".into(), Value::Null, -5).expected_version, Some(u64::MAX));
}

#[test]
fn set_responses_have_that_servers_shapes() {
    let result = |status, version| SetResult {
        status,
        key: "k".into(),
        version,
        revision: 9,
        value: None,
        expected_version: None,
        message: None,
    };
    assert_eq!(set_response(-1, &result(WriteStatus::Ok, 3)), json!({"status": "ok", "key": "k", "version": 3}));
    let created_twice = set_response(0, &result(WriteStatus::Conflict, 2));
    assert_eq!(created_twice["status"], "conflict");
    assert_eq!(created_twice["actual_version"], 2);
    let missing = set_response(4, &result(WriteStatus::Conflict, 0));
    assert_eq!(missing["status"], "not_found");
    let stale = set_response(4, &result(WriteStatus::Conflict, 5));
    assert_eq!(
        (stale["status"].as_str(), stale["expected_version"].as_i64(), stale["actual_version"].as_u64()),
        (Some("conflict"), Some(4), Some(5))
    );
}

#[test]
fn values_travel_as_json_strings() {
    assert_eq!(parse_value(r#"{"a": 1}"#), Ok(json!({"a": 1})));
    let err = parse_value("{not json").unwrap_err();
    assert_eq!(err["status"], "error");
    assert!(err["message"].as_str().is_some_and(|m| m.contains("Invalid JSON")));
    assert_eq!(sql_datetime("2026-11-21T14:15:00.123Z"), "2026-11-21 14:15:00");
}
