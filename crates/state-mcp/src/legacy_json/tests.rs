use serde_json::json;

use super::to_string;

#[test]
fn matches_python_json_dumps() {
    // Expected strings are what `python3 -c 'import json; print(json.dumps(v))'` prints.
    let cases = [
        (json!({"status": "ok", "key": "k", "version": 1}), r#"{"status": "ok", "key": "k", "version": 1}"#),
        (json!({"value": "{\"a\": [1, 2]}"}), r#"{"value": "{\"a\": [1, 2]}"}"#),
        (json!(["é", "日", "😀", "tab\t", "\u{1}"]), r#"["\u00e9", "\u65e5", "\ud83d\ude00", "tab\t", "\u0001"]"#),
        (
            json!({"keys": [], "deleted": true, "n": null, "f": 1.5}),
            r#"{"keys": [], "deleted": true, "n": null, "f": 1.5}"#,
        ),
    ];
    for (value, python) in cases {
        assert_eq!(to_string(&value), python);
    }
}
