use super::*;

fn events(text: &str) -> Vec<Event> {
    let mut buffer = BytesMut::from(text);
    std::iter::from_fn(|| parse_event(&mut buffer)).collect()
}

#[test]
fn events_are_split_at_blank_lines_and_comments_are_skipped() {
    let text = "retry: 1000\n\nevent: position\nid: 7\ndata: {\"revision\":7}\n\n: keep-alive\n\nid: 9\ndata: {\"a\":\ndata: 1}\n\nid: 10\ndata: partial";
    let parsed = events(text);
    assert_eq!(
        parsed,
        vec![
            Event { id: Some("7".into()), kind: Some("position".into()), data: "{\"revision\":7}".into() },
            Event { id: Some("9".into()), kind: None, data: "{\"a\":\n1}".into() },
        ],
        "an unfinished event waits for the rest of it"
    );
}

#[test]
fn crlf_line_ends_are_read_too() {
    let parsed = events("id: 3\r\ndata: x\r\n\r\n");
    assert_eq!(parsed, vec![Event { id: Some("3".into()), kind: None, data: "x".into() }]);
}

#[test]
fn the_query_encodes_every_part_of_the_watch() {
    let request = WatchRequest {
        kind: Some(state_core::ops::history::HistoryKind::Lease),
        prefix: Some("team a/é&x".into()),
        after_revision: Some(41),
        include_values: Some(false),
        ..WatchRequest::default()
    };
    assert_eq!(query(&request), "kind=lease&prefix=team%20a%2F%C3%A9%26x&from_revision=41&include_values=false");
}

#[test]
fn problems_become_the_seams_errors() {
    let lagged = problem_error(r#"{"code":"watch_lagged","detail":"fell behind","resume_after":12}"#);
    assert_eq!(
        (lagged.code, lagged.resume_after, lagged.message.as_str()),
        (ErrorCode::WatchLagged, Some(12), "fell behind")
    );
    let http =
        problem_to_error(&serde_json::json!({"code": "unauthorized", "detail": "no token"}), ErrorCode::Forbidden);
    assert_eq!(http.code, ErrorCode::Forbidden);
}
