use serde_json::json;

use super::*;

#[test]
fn entries_round_trip() {
    let full = Entry {
        key: "project/日本".into(),
        value: json!({"b": [1, 2.5, null], "a": "x"}),
        version: 7,
        create_revision: 3,
        mod_revision: 99,
        updated_at: UnixMillis(1_795_270_500_123),
        expires_at: Some(UnixMillis(1_795_270_600_000)),
        agent_id: Some("agent-7".into()),
    };
    let bare = Entry { expires_at: None, agent_id: None, value: json!(null), ..full.clone() };
    for entry in [full, bare] {
        let encoded = encode_entry(&entry);
        assert_eq!(decode_entry(&entry.key, &encoded).unwrap(), entry);
        assert_eq!(entry_expiry(&entry.key, &encoded).unwrap(), entry.expires_at);
    }
}

#[test]
fn events_round_trip() {
    let put = Event {
        revision: 12,
        key: "k".into(),
        kind: EventKind::Put,
        action: None,
        version: 2,
        agent_id: Some("a".into()),
        time: UnixMillis(5),
        value: Some(json!([1, {"z": 0, "a": 1}])),
        by: None,
    };
    let expired = Event { kind: EventKind::Expired, agent_id: None, value: None, ..put.clone() };
    let claimed = Event { action: Some(Action::RunClaim), value: Some(json!({"attempt": 1})), ..put.clone() };
    let authored = Event { by: Some("team-a".into()), ..claimed.clone() };
    assert_eq!(encode_event(&put)[0], 1, "an event without `by` keeps the format older builds read");
    assert_eq!(encode_event(&authored)[0], 2, "one with `by` is refused by them, not misread");
    for event in [put, expired, claimed, authored] {
        let bytes = encode_event(&event);
        assert_eq!(decode_event(12, &bytes).unwrap(), event);
        assert_eq!(event_key(&bytes).unwrap(), event.key);
    }
}

#[test]
fn damaged_records_are_errors_not_panics() {
    let entry = Entry {
        key: "k".into(),
        value: json!({"a": 1}),
        version: 1,
        create_revision: 1,
        mod_revision: 1,
        updated_at: UnixMillis(0),
        expires_at: None,
        agent_id: Some("x".into()),
    };
    let bytes = encode_entry(&entry);
    for cut in 0..bytes.len() - 1 {
        assert!(decode_entry("k", &bytes[..cut]).is_err(), "truncated at {cut}");
    }
    let mut wrong_format = bytes.clone();
    wrong_format[0] = 9;
    assert!(matches!(decode_entry("k", &wrong_format), Err(StorageError::Corrupt(_))));
}
