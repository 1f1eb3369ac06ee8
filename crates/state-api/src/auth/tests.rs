use serde_json::json;

use super::*;

const FILE: &str = r#"
[[token]]
name = "team-a"
secret = "team-a-secret-0123456789"
prefixes = ["team-a/"]
rights = ["read", "write"]

[[token]]
name = "reader"
secret_sha256 = "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"
prefixes = ["team-a/", "shared/"]
rights = ["read"]

[[token]]
name = "root"
secret = "root-secret-0123456789ab"
prefixes = [""]
rights = ["admin"]
"#;

fn principal(secret: &str) -> Principal {
    Tokens::parse(FILE).unwrap().authenticate(secret).cloned().unwrap()
}

fn allowed(secret: &str, op: Operation, args: serde_json::Value) -> bool {
    let principal = principal(secret);
    needs(op, &args).unwrap().iter().all(|need| check(&principal, op, need, Some("team-a/job")).is_ok())
}

#[test]
fn secrets_identify_tokens_and_nothing_else_does() {
    let tokens = Tokens::parse(FILE).unwrap();
    assert_eq!(tokens.authenticate("team-a-secret-0123456789").unwrap().name, "team-a");
    assert_eq!(tokens.authenticate("password").unwrap().name, "reader", "by its SHA-256");
    assert!(tokens.authenticate("team-a-secret-012345678").is_none());
    assert!(tokens.authenticate("").is_none());
}

#[test]
fn a_token_reaches_only_under_its_prefixes() {
    use Operation::*;
    let a = "team-a-secret-0123456789";
    assert!(allowed(a, StateGet, json!({"key": "team-a/x"})));
    assert!(allowed(a, StateSet, json!({"key": "team-a/x", "value": 1})));
    assert!(!allowed(a, StateGet, json!({"key": "team-b/x"})));
    assert!(!allowed(a, StateSet, json!({"key": "team-b/x", "value": 1})));
    assert!(allowed(a, StateList, json!({"prefix": "team-a/"})));
    assert!(!allowed(a, StateList, json!({"prefix": "team-"})), "a prefix wider than the token's");
    assert!(!allowed(a, StateList, json!({})), "listing everything");
    assert!(allowed(a, HistoryLog, json!({"prefix": "team-a/"})));
    assert!(!allowed(a, HistoryLog, json!({})), "history of everything");
    assert!(!allowed(a, HistoryLog, json!({"key": "team-b/x"})));
    assert!(allowed(a, HistoryLog, json!({"kind": "workflow", "key": "r1"})), "one run, by its name");
    assert!(!allowed(a, HistoryLog, json!({"kind": "workflow", "prefix": "team-a/"})), "run ids name no prefix");
    assert!(allowed(a, StateWatch, json!({"prefix": "team-a/"})));
    assert!(allowed(a, StateWatch, json!({"kind": "lease", "key": "team-a/gpu"})));
    assert!(!allowed(a, StateWatch, json!({"key": "team-b/x"})));
    assert!(!allowed(a, StateWatch, json!({})), "watching everything");
    let txn = json!({"compare": [{"key": "team-a/x", "version": 1}], "success": [{"op": "put", "key": "team-b/y", "value": 1}]});
    assert!(!allowed(a, StateTxn, txn), "one key outside refuses the whole transaction");
    assert!(!allowed(a, StateSet, json!({"key": "team-a/x", "value": 1, "lease": "team-b/l", "token": 3})));
    assert!(allowed(a, WorkflowCheckpoint, json!({"run_id": "r1", "agent_id": "w", "token": 1, "step": 1})));
    assert!(!allowed(a, StateReset, json!({"confirm": "DELETE EVERYTHING"})));
    assert!(!allowed(a, SidecarStateGet, json!({"key": "team-a/x"})), "compatibility tools need the whole store");
    assert!(allowed(a, StateHealth, json!({})));
}

#[test]
fn coordination_records_belong_to_the_prefix_of_their_name() {
    use Operation::*;
    let a = "team-a-secret-0123456789";
    let permit = |name: &str| json!({"name": name, "holder_id": "h", "capacity": 2, "ttl_seconds": 5});
    assert!(allowed(a, SemaphoreAcquire, permit("team-a/gpu")));
    assert!(!allowed(a, SemaphoreAcquire, permit("team-b/gpu")), "another tenant's semaphore");
    assert!(!allowed(a, SemaphoreGet, json!({"name": "team-b/gpu"})));
    let reserve = |scope: &str| json!({"scope": scope, "holder_id": "h", "patterns": ["**"], "ttl_seconds": 5});
    assert!(allowed(a, PathsReserve, reserve("team-a/repo")));
    assert!(!allowed(a, PathsReserve, reserve("team-b/repo")), "another tenant's repository");
    assert!(!allowed(a, PathsCheck, json!({"scope": "team-b/repo", "holder_id": "h", "path": "x"})));
    assert!(allowed(a, QueueSend, json!({"queue": "team-a/inbox", "body": 1})));
    assert!(!allowed(a, QueueSend, json!({"queue": "team-b/inbox", "body": 1})), "another tenant's inbox");
    assert!(!allowed(a, QueueReceive, json!({"queue": "team-b/inbox", "consumer_id": "c"})));
    assert!(!allowed(a, QueuePeek, json!({"queue": "team-b/inbox.dead"})), "nor its dead letters");
    let create = |extra: serde_json::Value| {
        let mut args = json!({"name": "team-a/job"});
        args.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        args
    };
    assert!(allowed(a, WorkflowCreate, create(json!({"concurrency_key": "team-a/gpu"}))));
    assert!(
        !allowed(a, WorkflowCreate, create(json!({"concurrency_key": "gpu"}))),
        "a concurrency key outside the token's prefixes would throttle other tenants' runs"
    );
    assert!(allowed(a, QueueList, json!({"prefix": "team-a/"})));
    assert!(!allowed(a, QueueList, json!({})), "listing every queue reads other tenants' names");
    assert!(!allowed(a, SemaphoreList, json!({"prefix": "team-b/"})));
    assert!(!allowed(a, PathsScopes, json!({"prefix": "team"})), "a prefix wider than the token's");
    assert!(!allowed(a, StateWatch, json!({"kind": "queue", "key": "team-b/inbox"})), "nor its traffic");
    assert!(allowed(a, StateWatch, json!({"kind": "semaphore", "key": "team-a/gpu"})));
    assert!(!allowed(a, HistoryLog, json!({"kind": "reservation", "prefix": "team-b/"})));
    assert!(
        !allowed("password", QueueAck, json!({"queue": "shared/q", "message_id": "1", "receipt": 1})),
        "reading is not acking"
    );
}

#[test]
fn rights_are_ordered() {
    use Operation::*;
    let reader = "password";
    assert!(allowed(reader, StateGet, json!({"key": "shared/x"})));
    assert!(!allowed(reader, StateSet, json!({"key": "shared/x", "value": 1})));
    let root = "root-secret-0123456789ab";
    assert!(allowed(root, StateReset, json!({"confirm": "DELETE EVERYTHING"})));
    assert!(allowed(root, SidecarStateSet, json!({"key": "k", "value": 1})));
}

#[test]
fn refusals_name_the_token_the_operation_and_its_scope() {
    let a = principal("team-a-secret-0123456789");
    let need = Need::Id("team-b/x".into(), Right::Read);
    let error = check(&a, Operation::StateGet, &need, None).unwrap_err();
    assert_eq!(error.code, ErrorCode::Forbidden);
    assert!(
        error.message.contains("token `team-a`")
            && error.message.contains("`state_get`")
            && error.message.contains("`team-b/x`")
            && error.message.contains("`team-a/`"),
        "{}",
        error.message
    );
}

#[test]
fn bad_tokens_files_are_explained() {
    let cases = [
        ("[[token]]\nname='a'\nsecret='short'\nprefixes=['']\nrights=['read']", "shorter than 16"),
        ("[[token]]\nname='a'\nprefixes=['']\nrights=['read']", "exactly one of"),
        ("[[token]]\nname='a'\nsecret='0123456789abcdef'\nprefixes=[]\nrights=['read']", "prefixes is empty"),
        ("[[token]]\nname='a'\nsecret='0123456789abcdef'\nprefixes=['']\nrights=['root']", "unknown variant"),
        ("token = []", "no [[token]]"),
    ];
    for (text, fragment) in cases {
        let error = Tokens::parse(text).unwrap_err();
        assert!(error.contains(fragment), "{fragment}: {error}");
    }
}

#[test]
fn a_malformed_tokens_file_never_echoes_a_secret() {
    const SECRET: &str = "hunter2-very-secret-value-0123";
    let malformed = [
        format!("[[token]]\nname = \"a\"\nsecret = \"{SECRET}\nprefixes = [\"\"]\nrights = [\"read\"]\n"),
        format!("[[token]]\nname = \"a\"\nsecret = \"{SECRET}\"\nprefixes = \"\"\nrights = [\"read\"]\n"),
        format!("[[token]]\nname = \"a\"\nsecret = [\"{SECRET}\"]\nprefixes = [\"\"]\nrights = [\"read\"]\n"),
        format!("[[token]]\nname = \"a\"\nrights = \"{SECRET}\"\nprefixes = [\"\"]\nsecret = \"{SECRET}\"\n"),
        format!("[[token]]\nname = \"a\"\nsecrt = \"{SECRET}\"\nprefixes = [\"\"]\nrights = [\"read\"]\n"),
        format!("[[token]]\nname = \"a\"\nsecret = \"{SECRET}\" garbage\n"),
        format!("{SECRET}\n"),
        // Pasted into the wrong field: serde names the wrong value in backquotes.
        format!(
            "[[token]]\nname = \"a\"\nsecret = \"x-0123456789abcdef\"\nprefixes = [\"\"]\nrights = [\"{SECRET}\"]\n"
        ),
        // A quote inside the wrong value must not end the redaction early: serde does not
        // escape what it names.
        format!("[[token]]\nname = \"a\"\nsecret = \"{SECRET}\"\nprefixes = [\"a/\"]\nrights = [\"x`{SECRET}`y\"]\n"),
        format!("[[token]]\nname = \"a\"\nsecret = \"{SECRET}\"\nprefixes = [\"a/\"]\nrights = [\"x\\\"{SECRET}\"]\n"),
        format!(
            "[[token]]\nname = \"a\"\nsecret = \"{SECRET}\"\nprefixes = [\"a/\"]\nrights = [\"x, expected {SECRET}\"]\n"
        ),
        format!("[[token]]\nname = \"a\"\nsecret = \"{SECRET}\"\n\"x`, expected {SECRET}\" = 1\n"),
    ];
    for text in &malformed {
        let error = Tokens::parse(text).map(|_| ()).unwrap_err();
        assert!(!error.contains("hunter2"), "the error quotes the secret: {error}");
        assert!(error.starts_with("line "), "the error says where: {error}");
    }
    // What the file's own words are still named, so a typo is easy to find.
    let typo = Tokens::parse("[[token]]\nname = \"a\"\nsecrt = \"x\"\n").map(|_| ()).unwrap_err();
    assert!(typo.contains("`secret`") && typo.contains("`prefixes`"), "{typo}");
    assert!(typo.contains("unknown field `secrt`"), "the misspelt field itself is named: {typo}");
    let wrong_right = Tokens::parse("[[token]]\nname='a'\nsecret='0123456789abcdef'\nprefixes=['']\nrights=['root']")
        .map(|_| ())
        .unwrap_err();
    assert!(wrong_right.contains("expected one of `read`, `write`, `admin`"), "{wrong_right}");
}

#[test]
fn a_wipe_in_a_replaced_servers_shape_needs_admin_like_ours() {
    // A write token over the whole store may write, not wipe: sidecar_reset is state_reset.
    let file = "[[token]]\nname = \"writer\"\nsecret = \"writer-secret-0123456789\"\nprefixes = [\"\"]\nrights = [\"read\", \"write\"]\n";
    let writer = Tokens::parse(file).unwrap().authenticate("writer-secret-0123456789").cloned().unwrap();
    for op in [Operation::StateReset, Operation::SidecarReset] {
        let args = json!({"confirm": "DELETE EVERYTHING"});
        let refused = needs(op, &args).unwrap().iter().any(|need| check(&writer, op, need, None).is_err());
        assert!(refused, "{} with a write token", op.id());
    }
    assert!(allowed("root-secret-0123456789ab", Operation::SidecarReset, json!({})));
}

#[test]
fn the_documented_tokens_example_is_a_valid_tokens_file() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/http.md")).unwrap();
    let start = readme.find("```toml\n# tokens.toml").expect("docs/http.md shows a tokens file");
    let block = &readme[start + "```toml\n".len()..];
    let block = &block[..block.find("```").unwrap()];
    let tokens = Tokens::parse(block).unwrap_or_else(|e| panic!("the tokens file of docs/http.md: {e}"));
    let curl_secret = readme.split("Authorization: Bearer ").nth(1).and_then(|s| s.split('\'').next()).unwrap();
    assert_eq!(
        tokens.authenticate(curl_secret).map(|p| p.name.as_str()),
        Some("team-a-ci"),
        "the curl example's token"
    );
}

/// A tokens file of one writing token `t` over `prefix`, with `extra` lines in its entry.
fn token_t(prefix: &str, extra: &str) -> String {
    format!(
        "[[token]]\nname = \"t\"\nsecret = \"t-secret-0123456789ab\"\nprefixes = [\"{prefix}\"]\nrights = [\"write\"]\n{extra}"
    )
}

#[test]
fn a_token_may_carry_a_write_quota_and_bad_ones_are_refused_by_name() {
    let with = |extra: &str| token_t("", extra);
    let tokens = Tokens::parse(&with("writes_per_second = 20\n")).unwrap();
    let quota = tokens.authenticate("t-secret-0123456789ab").unwrap().write_quota().unwrap().figures();
    assert_eq!((quota.writes_per_second, quota.write_burst), (20.0, 20.0), "a second's worth by default");
    let burst = Tokens::parse(&with("writes_per_second = 0.5\nwrite_burst = 3\n")).unwrap();
    assert_eq!(burst.write_quotas().next().unwrap().1.figures().write_burst, 3.0);
    for (bad, says) in [
        ("writes_per_second = 0\n", "positive"),
        ("writes_per_second = -3\n", "positive"),
        ("writes_per_second = 5\nwrite_burst = 0.5\n", "at least 1"),
        ("write_burst = 5\n", "needs writes_per_second"),
    ] {
        let error = Tokens::parse(&with(bad)).unwrap_err();
        assert!(error.contains("token `t`") && error.contains(says), "{bad}: {error}");
    }
    // A server-wide default fills in for tokens without their own, and only for them.
    let two = format!(
        "{}\n[[token]]\nname = \"u\"\nsecret = \"u-secret-0123456789ab\"\nprefixes = [\"\"]\nrights = [\"read\"]\n",
        with("writes_per_second = 20\n")
    );
    let defaulted =
        Tokens::parse(&two).unwrap().with_default_write_rate(state_core::rate::Rate::per_second(7.0)).unwrap();
    let rates: Vec<_> =
        defaulted.write_quotas().map(|(name, q)| (name.to_owned(), q.figures().writes_per_second)).collect();
    assert_eq!(rates, [("t".to_owned(), 20.0), ("u".to_owned(), 7.0)]);
}

#[test]
fn a_token_may_carry_a_storage_quota_and_a_bad_one_is_refused_by_name() {
    let with = |extra: &str| token_t("t/", extra);
    let tokens = Tokens::parse(&with("max_keys = 100\nmax_bytes = 5000\n")).unwrap();
    let limits = tokens.authenticate("t-secret-0123456789ab").unwrap().storage_quota().unwrap().limits();
    assert_eq!((limits.max_keys, limits.max_bytes), (Some(100), Some(5000)));
    assert_eq!(tokens.storage_quotas().map(|(name, _)| name).collect::<Vec<_>>(), ["t"]);
    assert!(Tokens::parse(&with("")).unwrap().authenticate("t-secret-0123456789ab").unwrap().storage_quota().is_none());
    let error = Tokens::parse(&with("max_bytes = 0\n")).unwrap_err();
    assert!(error.contains("token `t`") && error.contains("at least 1"), "{error}");
    let error = Tokens::parse(&with("max_keys = -1\n")).unwrap_err();
    assert!(error.contains("line"), "{error}");
}

#[test]
fn a_write_past_the_quota_is_refused_and_reads_are_not_counted() {
    let file = "[[token]]\nname = \"t\"\nsecret = \"t-secret-0123456789ab\"\nprefixes = [\"\"]\nrights = [\"write\"]\nwrites_per_second = 0.001\nwrite_burst = 2\n";
    let principal = Tokens::parse(file).unwrap().authenticate("t-secret-0123456789ab").cloned().unwrap();
    assert!(principal.take_write().is_ok() && principal.take_write().is_ok());
    let refused = principal.take_write().unwrap_err();
    assert_eq!(refused.code, ErrorCode::QuotaExceeded);
    assert!(refused.retry_after_ms.is_some_and(|ms| ms > 900_000), "{refused:?}");
    // A clone (every request's copy of the principal) draws on the same allowance.
    assert!(principal.clone().take_write().is_err());
    assert_eq!(principal.write_quota().unwrap().figures().writes_refused, 2);
}

#[test]
fn a_caller_nobody_authenticated_may_do_nothing() {
    let Caller::Token(nobody) = Caller::nobody() else { panic!("nobody is a token that covers nothing") };
    for (op, args) in [
        (Operation::StateGet, json!({"key": "x"})),
        (Operation::StateList, json!({"prefix": ""})),
        (Operation::StateSet, json!({"key": "team-a/x", "value": 1})),
        (Operation::StateReset, json!({"confirm": "wipe everything"})),
    ] {
        let needs = needs(op, &args).unwrap();
        assert!(!needs.is_empty(), "{op:?} needs something");
        assert!(needs.iter().any(|need| check(&nobody, op, need, None).is_err()), "{op:?} is refused");
    }
    assert_eq!(Caller::LocalUser.token(), None);
}

#[test]
fn arguments_that_do_not_parse_need_no_less_they_are_refused() {
    for (op, args) in [
        (Operation::StateGet, json!({"key": 5})),
        (Operation::StateSet, json!({"key": "team-a/x"})),
        (Operation::StateTxn, json!({"success": "not a list"})),
        (Operation::WorkflowClaim, json!({"agent_id": "w", "run_id": ["a", "b"]})),
    ] {
        let refused = needs(op, &args).unwrap_err();
        assert_eq!(refused.code, ErrorCode::InvalidArguments, "{op:?}");
        assert!(refused.message.contains(op.name()), "{}", refused.message);
    }
}

#[test]
fn a_tokens_file_cannot_take_the_name_of_an_identity_providers_subject() {
    let file =
        "[[token]]\nname = \"oauth:alice\"\nsecret = \"0123456789abcdef0\"\nprefixes = [\"\"]\nrights = [\"admin\"]\n";
    assert!(Tokens::parse(file).unwrap_err().contains("identity-provider subjects"));
}
