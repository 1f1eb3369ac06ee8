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

#[test]
fn a_tool_call_reads_as_rmcp_reads_it() {
    let lines = [
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"state_get","arguments":{"key":"a"}}}"#,
        r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"state_set","arguments":{"key":"a","value":{"n":1.5}},"_meta":{"progressToken":7,"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"state_list"}}"#,
    ];
    for line in lines {
        let Parsed::Message(ours) = parse(line.as_bytes()) else { panic!("{line} was not taken") };
        let rmcp: RxJsonRpcMessage<RoleServer> = serde_json::from_str(line).unwrap();
        assert!(matches!(&*ours, JsonRpcMessage::Request(r) if matches!(r.request, ClientRequest::CallToolRequest(_))));
        // Same id, method, params and _meta, as the server will see them.
        assert_eq!(serde_json::to_value(&*ours).unwrap(), serde_json::to_value(&rmcp).unwrap(), "{line}");
    }
    // Not a request (a stray result), or no id: not the fast path's, and refused or skipped as before.
    let line = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","result":{},"params":{"name":"state_get"}}"#;
    assert_eq!(refused(line), (Some(RequestId::Number(1)), -32602));
    let line = r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"state_get"}}"#;
    assert!(!matches!(parse(line.as_bytes()), Parsed::Message(_)), "a null id is no request");
}
