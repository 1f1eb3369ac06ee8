use super::*;

#[test]
fn key_rules() {
    let long = "k".repeat(MAX_KEY_BYTES);
    let too_long = "k".repeat(MAX_KEY_BYTES + 1);
    let cases: &[(&str, bool)] = &[
        ("a", true),
        ("workflow:daily", true),
        ("project/x/status", true),
        ("ключ/日本", true),
        (&long, true),
        ("", false),
        (&too_long, false),
        ("a\nb", false),
        ("tab\there", false),
        ("nul\0", false),
        ("del\u{7f}", false),
        ("c1\u{85}", false),
    ];
    for (key, ok) in cases {
        assert_eq!(validate_key("key", key).is_ok(), *ok, "key {key:?}");
    }
}

#[test]
fn multibyte_length_is_counted_in_bytes() {
    // 171 three-byte characters = 513 bytes.
    let key = "日".repeat(171);
    let err = validate_key("key", &key).unwrap_err();
    assert_eq!(err, InvalidInput::KeyTooLong { argument: "key".into(), len: 513, max: 512 });
}

#[test]
fn errors_name_the_argument_and_the_fix() {
    let err = validate_key("success[1].key", "bad\u{1}").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("success[1].key") && text.contains("U+0001") && text.contains("printable"), "{text}");
    assert!(validate_prefix("prefix", "").is_ok());
}
