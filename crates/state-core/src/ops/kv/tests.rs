use serde_json::json;

use super::*;

#[test]
fn set_request_parsing_is_strict() {
    let ok: SetRequest = serde_json::from_value(json!({"key": "a", "value": null})).unwrap();
    assert_eq!(ok.value, Value::Null);
    let missing_value = serde_json::from_value::<SetRequest>(json!({"key": "a"})).unwrap_err();
    assert!(missing_value.to_string().contains("value"), "{missing_value}");
    let unknown = serde_json::from_value::<SetRequest>(json!({"key": "a", "value": 1, "ttl": 5})).unwrap_err();
    assert!(unknown.to_string().contains("unknown field `ttl`"), "{unknown}");
    let negative =
        serde_json::from_value::<SetRequest>(json!({"key": "a", "value": 1, "expected_version": -1})).unwrap_err();
    assert!(negative.to_string().contains("invalid value"), "{negative}");
}

#[test]
fn validation_names_the_argument() {
    let limits = Limits { max_value_bytes: 10 };
    let big = SetRequest::new("a", json!("0123456789"));
    let err = big.validate(&limits).unwrap_err();
    assert_eq!(err, InvalidInput::ValueTooLarge { argument: "value".into(), len: 12, max: 10 });

    let both = GetRequest { key: "a".into(), version: Some(1), revision: Some(2) };
    assert!(matches!(both.validate(), Err(InvalidInput::MutuallyExclusive { .. })));
    let zero = DeleteRequest { key: "a".into(), expected_version: Some(0), ..DeleteRequest::default() };
    assert_eq!(zero.validate().unwrap_err().argument(), "expected_version");
    let list = ListRequest { limit: Some(0), ..Default::default() };
    assert_eq!(list.validate().unwrap_err().argument(), "limit");
    let cursor = ListRequest { cursor: Some("zz".into()), ..Default::default() };
    assert_eq!(cursor.validate().unwrap_err().argument(), "cursor");
    let batch = BatchGetRequest { keys: vec!["ok".into(), String::new()] };
    assert_eq!(batch.validate().unwrap_err().argument(), "keys[1]");
}

#[test]
fn cursor_round_trips_any_key() {
    for key in ["a", "project/x", "日本/ключ", "with space"] {
        let page =
            ListResult::page(vec![Listed::Entry(entry(key)), Listed::Entry(entry(&format!("{key}~")))], 1, false, 5);
        let cursor = page.next_cursor.expect("a second page exists");
        let req = ListRequest { cursor: Some(cursor), ..Default::default() };
        assert_eq!(req.start_after().unwrap().as_deref(), Some(key));
    }
}

#[test]
fn a_delimiter_is_one_printable_character() {
    for bad in ["", "//", "\n"] {
        let req = ListRequest { delimiter: Some(bad.into()), ..Default::default() };
        assert_eq!(req.validate().unwrap_err().argument(), "delimiter", "{bad:?}");
    }
    assert!(ListRequest { delimiter: Some("/".into()), ..Default::default() }.validate().is_ok());
}

#[test]
fn a_delimiter_groups_keys_into_folders_below_the_prefix() {
    let req = ListRequest { prefix: "team/".into(), delimiter: Some("/".into()), ..Default::default() };
    assert_eq!(req.folder_of("team/a/b/c"), Some("team/a/"));
    assert_eq!(req.folder_of("team/a/"), Some("team/a/"));
    assert_eq!(req.folder_of("team/leaf"), None);
    assert_eq!(req.folder_of("other/a/b"), None);
    assert_eq!(ListRequest::default().folder_of("a/b"), None, "no delimiter, no folders");
}

#[test]
fn a_page_that_ends_on_a_folder_goes_on_past_everything_in_it() {
    let req = ListRequest {
        prefix: "p/".into(),
        delimiter: Some("/".into()),
        cursor: Some(crate::cursor::encode("p/a/")),
        ..Default::default()
    };
    let after = req.scan_after().unwrap().unwrap();
    let longest_inside = format!("p/a/{}", "\u{10FFFF}".repeat((crate::limits::MAX_KEY_BYTES - 4) / 4));
    for inside in ["p/a/", "p/a/z", "p/a/\u{10FFFF}x", longest_inside.as_str()] {
        assert!(inside < after.as_str(), "{inside:?} is skipped");
    }
    assert!("p/a0" > after.as_str() && "p/b" > after.as_str(), "what follows the folder is not");
    // A cursor on a key (not a folder) resumes right after that key.
    let key = ListRequest { cursor: Some(crate::cursor::encode("p/k")), ..req };
    assert_eq!(key.scan_after().unwrap().as_deref(), Some("p/k"));
}

fn entry(key: &str) -> Entry {
    Entry {
        key: key.into(),
        value: json!(1),
        version: 1,
        create_revision: 1,
        mod_revision: 1,
        updated_at: UnixMillis(0),
        expires_at: None,
        agent_id: None,
    }
}

#[test]
fn a_listing_of_everything_starts_past_the_stores_own_records_whatever_the_cursor() {
    let floor = crate::keyspace::USER_KEYS_AFTER;
    for crafted in ["", "\u{1}lease/r", "\u{1}", "\u{1e}"] {
        let req = ListRequest { cursor: Some(crate::cursor::encode(crafted)), ..Default::default() };
        assert_eq!(req.scan_after().unwrap().as_deref(), Some(floor), "{crafted:?}");
    }
    let none = ListRequest::default();
    assert_eq!(none.scan_after().unwrap().as_deref(), Some(floor));
    let user = ListRequest { cursor: Some(crate::cursor::encode("b")), ..Default::default() };
    assert_eq!(user.scan_after().unwrap().as_deref(), Some("b"));
    // Under a prefix the scan never leaves the prefix, so the cursor is taken as given.
    let scoped =
        ListRequest { prefix: "p/".into(), cursor: Some(crate::cursor::encode("\u{1}x")), ..Default::default() };
    assert_eq!(scoped.scan_after().unwrap().as_deref(), Some("\u{1}x"));
}
