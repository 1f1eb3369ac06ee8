use serde_json::json;

use super::*;
use crate::ops::kv::SetRequest;
use crate::view::MemoryView;

const NOW: UnixMillis = UnixMillis(1_000_000);

fn with_id(key: &str, value: Value, id: &str) -> SetRequest {
    SetRequest { request_id: Some(id.into()), ..SetRequest::new(key, value) }
}

fn store_record(view: &mut MemoryView, once: &Once, result: Value, window: u64) {
    let ctx = WriteContext { now: NOW, revision: view.revision };
    let Mutation::Put(entry) = record(once, result, &ctx, window) else { panic!("a record is a put") };
    view.entries.insert(entry.key.clone(), entry);
}

#[test]
fn requests_without_an_id_are_not_tracked() {
    assert_eq!(Once::of(&SetRequest::new("k", json!(1))).unwrap(), None);
}

#[test]
fn a_retry_replays_the_recorded_result_until_the_window_ends() {
    let mut view = MemoryView::default();
    let once = Once::of(&with_id("k", json!(1), "r-1")).unwrap().unwrap();
    assert_eq!(seen(&view, &once, NOW).unwrap(), Seen::New);
    store_record(&mut view, &once, json!({"version": 1}), 5_000);

    let retry = Once::of(&with_id("k", json!(1), "r-1")).unwrap().unwrap();
    assert_eq!(seen(&view, &retry, NOW.plus_millis(4_999)).unwrap(), Seen::Replay(json!({"version": 1})));
    assert_eq!(seen(&view, &retry, NOW.plus_millis(5_000)).unwrap(), Seen::New, "expired records are forgotten");
}

#[test]
fn an_id_reused_for_a_different_request_is_refused() {
    let mut view = MemoryView::default();
    let once = Once::of(&with_id("k", json!(1), "r-1")).unwrap().unwrap();
    store_record(&mut view, &once, json!({}), 5_000);
    let other = Once::of(&with_id("k", json!(2), "r-1")).unwrap().unwrap();
    let Seen::Reused(error) = seen(&view, &other, NOW).unwrap() else { panic!("must be refused") };
    assert_eq!(error.argument(), "request_id");
    assert!(error.to_string().contains("different request"), "{error}");
}

#[test]
fn request_ids_are_validated() {
    for (id, fragment) in [("", "is empty"), ("a\u{7}b", "control character"), (&"x".repeat(129)[..], "129 bytes")] {
        let error = Once::of(&with_id("k", json!(1), id)).unwrap_err();
        assert!(error.to_string().contains(fragment), "{id:?}: {error}");
    }
}

#[test]
fn records_live_in_the_system_keyspace() {
    let ctx = WriteContext { now: NOW, revision: 7 };
    let once = Once { request_id: "abc".into(), kind: "state_set", fingerprint: 1 };
    let Mutation::Put(entry) = record(&once, json!(null), &ctx, 10) else { panic!() };
    assert!(crate::keyspace::is_system(&entry.key));
    assert_eq!(crate::keyspace::classify(&entry.key), (crate::keyspace::Space::Request, "abc"));
    assert_eq!((entry.mod_revision, entry.expires_at), (8, Some(NOW.plus_millis(10))));
}

#[test]
fn scoped_ids_keep_callers_apart_and_give_back_what_the_caller_sent() {
    let a = scoped("team-a", "retry-1");
    let b = scoped("team-b", "retry-1");
    assert_ne!(a, b, "the same id of two tokens is two ids");
    assert_ne!(a, "retry-1");
    assert_eq!((unscoped(&a), unscoped(&b), unscoped("retry-1")), ("retry-1", "retry-1", "retry-1"));
    // A token cannot step into another's scope by sending a scoped-looking id.
    assert_ne!(scoped("team-a", &b), b);
    for odd in ["~", "~~", "~0123456789abcdefx", "~0123456789abcdef", "plain~id"] {
        assert_eq!(unscoped(odd), odd, "{odd:?}");
    }
    // The length limit counts what the caller chose.
    let longest = "x".repeat(MAX_REQUEST_ID_BYTES);
    assert!(validate_request_id(&scoped("a-very-long-token-name-indeed", &longest)).is_ok());
    assert!(validate_request_id(&scoped("t", &format!("{longest}x"))).is_err());
    assert!(validate_request_id(&scoped("t", "")).is_err());
}
