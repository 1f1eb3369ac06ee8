use super::*;

fn refused(line: &str) -> (Option<RequestId>, i32) {
    match parse(line.as_bytes()) {
        Parsed::Refuse(id, error) => (id, error.code.0),
        Parsed::Message(message) => panic!("{line:?} was taken as {message:?}"),
        Parsed::Skip => panic!("{line:?} was skipped"),
    }
}

#[test]
fn a_line_that_is_not_json_is_a_parse_error_with_no_id() {
    assert_eq!(refused("{\"jsonrpc\":\"2.0\",\"id\":1,"), (None, -32700));
    assert_eq!(refused("hello"), (None, -32700));
}

#[test]
fn a_standard_method_with_params_that_do_not_fit_is_invalid_params() {
    let line = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"state_get","arguments":[1]}}"#;
    assert_eq!(refused(line), (Some(RequestId::Number(7)), -32602));
    let line = r#"{"jsonrpc":"2.0","id":"a","method":"resources/read","params":{"uri":5}}"#;
    assert_eq!(refused(line), (Some(RequestId::String("a".into())), -32602));
}

#[test]
fn json_that_is_no_message_is_an_invalid_request() {
    assert_eq!(refused("[1,2]").1, -32600);
    assert_eq!(refused("42").1, -32600);
    assert_eq!(refused(r#"{"jsonrpc":"2.0","id":3}"#), (Some(RequestId::Number(3)), -32600));
}

#[test]
fn good_messages_pass_and_blank_lines_and_unfit_notifications_are_skipped() {
    let line = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
    assert!(matches!(parse(line.as_bytes()), Parsed::Message(_)));
    let line = "\u{feff}{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\r\n";
    assert!(matches!(parse(line.as_bytes()), Parsed::Message(_)));
    assert!(matches!(parse(b"  \r\n"), Parsed::Skip));
    let line = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":"x"}}"#;
    assert!(matches!(parse(line.as_bytes()), Parsed::Skip | Parsed::Message(_)));
}
