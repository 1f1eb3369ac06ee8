//! Every REST route, with the answers a client depends on.

use serde_json::json;

use crate::{Place, expect, problem};

#[test]
fn keys_with_etags_and_preconditions() {
    let place = Place::new();
    let server = place.in_process(&[]);
    let http = server.client();

    // Create only: If-None-Match: *.
    let created =
        http.request("PUT", "/v1/kv/project/x/status", &[("If-None-Match", "*")], Some(b"{\"step\":1}")).unwrap();
    let body = expect(&created, 200);
    assert_eq!((body["version"].clone(), created.header("etag")), (json!(1), Some("\"1\"")));
    let again = http.request("PUT", "/v1/kv/project/x/status", &[("If-None-Match", "*")], Some(b"2")).unwrap();
    let conflict = problem(&again, 412, "conflict");
    assert_eq!(conflict["result"]["value"], json!({"step": 1}), "the 412 carries the current entry");

    // Read: the ETag is the version; If-None-Match answers 304 while it is current.
    let got = http.get("/v1/kv/project/x/status").unwrap();
    assert_eq!((expect(&got, 200)["value"].clone(), got.header("etag")), (json!({"step": 1}), Some("\"1\"")));
    let unchanged = http.request("GET", "/v1/kv/project/x/status", &[("If-None-Match", "\"1\"")], None).unwrap();
    assert_eq!((unchanged.status, unchanged.body.len()), (304, 0));

    // Compare-and-set with If-Match; a stale one gets 412 with what to retry from.
    let cas = http.request("PUT", "/v1/kv/project/x/status", &[("If-Match", "\"1\"")], Some(b"{\"step\":2}")).unwrap();
    assert_eq!((expect(&cas, 200)["version"].clone(), cas.header("etag")), (json!(2), Some("\"2\"")));
    let stale =
        http.request("PUT", "/v1/kv/project/x/status", &[("If-Match", "\"1\"")], Some(b"{\"step\":9}")).unwrap();
    let refused = problem(&stale, 412, "conflict");
    assert_eq!((refused["result"]["version"].clone(), stale.header("etag")), (json!(2), Some("\"2\"")));
    assert_eq!(refused["result"]["value"], json!({"step": 2}));
    let changed = http.request("GET", "/v1/kv/project/x/status", &[("If-None-Match", "\"1\"")], None).unwrap();
    assert_eq!(expect(&changed, 200)["version"], 2, "an old ETag no longer matches");

    // TTL and agent from the query string; a past version by query.
    let ttl = http.request("PUT", "/v1/kv/tmp?ttl_seconds=60&agent_id=bot", &[], Some(b"true")).unwrap();
    assert_eq!(expect(&ttl, 200)["version"], 1);
    let tmp = expect(&http.get("/v1/kv/tmp").unwrap(), 200);
    assert!(tmp["expires_at"].is_string() && tmp["agent_id"] == "bot", "{tmp}");
    assert_eq!(expect(&http.get("/v1/kv/project/x/status?version=1").unwrap(), 200)["value"], json!({"step": 1}));

    // Listing, batch reads, transactions.
    let listed = expect(&http.get("/v1/kv?prefix=project/&include_values=true").unwrap(), 200);
    assert_eq!(listed["entries"][0]["value"], json!({"step": 2}));
    let batch = expect(&http.json("POST", "/v1/kv:batchGet", &json!({"keys": ["tmp", "nope"]})).unwrap(), 200);
    assert_eq!(
        (batch["entries"][0]["value"].clone(), batch["entries"][1]["status"].clone()),
        (json!(true), json!("not_found"))
    );
    let txn = json!({"compare": [{"key": "tmp", "version": 1}], "success": [{"op": "put", "key": "a", "value": 1}]});
    assert_eq!(expect(&http.json("POST", "/v1/kv:txn", &txn).unwrap(), 200)["succeeded"], true);
    let failed = json!({"compare": [{"key": "tmp", "version": 9}], "failure": [{"op": "get", "key": "a"}]});
    let ran_failure = expect(&http.json("POST", "/v1/kv:txn", &failed).unwrap(), 200);
    assert_eq!(
        (ran_failure["succeeded"].clone(), ran_failure["results"][0]["value"].clone()),
        (json!(false), json!(1))
    );

    // Deletes: If-Match guards, 404 when absent.
    let stale_delete = http.request("DELETE", "/v1/kv/a", &[("If-Match", "\"5\"")], None).unwrap();
    problem(&stale_delete, 412, "conflict");
    expect(&http.request("DELETE", "/v1/kv/a", &[("If-Match", "\"1\"")], None).unwrap(), 200);
    let gone = problem(&http.request("DELETE", "/v1/kv/a", &[], None).unwrap(), 404, "not_found");
    assert_eq!(gone["result"]["status"], "not_found");
    problem(&http.get("/v1/kv/a").unwrap(), 404, "not_found");

    let history = expect(&http.get("/v1/history?key=project/x/status").unwrap(), 200);
    assert_eq!(history["events"].as_array().unwrap().len(), 2);
}

#[test]
fn leases_workflows_sessions_health_and_reset() {
    let place = Place::new();
    let server = place.in_process(&[]);
    let http = server.client();

    let lease = json!({"resource_id": "db/migrate", "holder_id": "a", "ttl_seconds": 30});
    let granted = expect(&http.json("POST", "/v1/leases:acquire", &lease).unwrap(), 200);
    let token = granted["token"].as_u64().unwrap();
    let other = json!({"resource_id": "db/migrate", "holder_id": "b", "ttl_seconds": 30});
    let held = problem(&http.json("POST", "/v1/leases:acquire", &other).unwrap(), 409, "conflict");
    assert_eq!(held["result"]["holder"], "a");
    let renew = json!({"resource_id": "db/migrate", "holder_id": "a", "token": token, "ttl_seconds": 60});
    expect(&http.json("POST", "/v1/leases:renew", &renew).unwrap(), 200);
    assert_eq!(expect(&http.get("/v1/leases/db/migrate").unwrap(), 200)["holder"], "a");
    assert_eq!(expect(&http.get("/v1/leases?prefix=db/").unwrap(), 200)["leases"].as_array().unwrap().len(), 1);
    let fenced = http.request("PUT", &format!("/v1/kv/k?lease=db/migrate&token={}", token + 1), &[], Some(b"1"));
    problem(&fenced.unwrap(), 409, "fenced");
    let release = json!({"resource_id": "db/migrate", "holder_id": "a", "token": token});
    expect(&http.json("POST", "/v1/leases:release", &release).unwrap(), 200);
    problem(&http.json("POST", "/v1/leases:release", &release).unwrap(), 409, "fenced");

    let created =
        expect(&http.json("POST", "/v1/workflows", &json!({"name": "report", "input": {"day": 1}})).unwrap(), 200);
    let run = created["run_id"].as_str().unwrap().to_owned();
    assert_eq!(
        expect(&http.get("/v1/workflows:discover?name=report").unwrap(), 200)["runs"].as_array().unwrap().len(),
        1
    );
    let claim =
        expect(&http.json("POST", "/v1/workflows:claim", &json!({"agent_id": "w1", "name": "report"})).unwrap(), 200);
    let token = claim["token"].as_u64().unwrap();
    let by_w1 = |extra: serde_json::Value| {
        let mut args = json!({"agent_id": "w1", "token": token});
        args.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        args
    };
    expect(
        &http
            .json("POST", &format!("/v1/workflows/{run}/checkpoint"), &by_w1(json!({"step": 1, "output": "x"})))
            .unwrap(),
        200,
    );
    expect(&http.json("POST", &format!("/v1/workflows/{run}/heartbeat"), &by_w1(json!({}))).unwrap(), 200);
    let stale = json!({"agent_id": "w2", "token": token + 100, "step": 2, "output": "y"});
    problem(&http.json("POST", &format!("/v1/workflows/{run}/checkpoint"), &stale).unwrap(), 409, "fenced");
    assert_eq!(expect(&http.get(&format!("/v1/workflows/{run}")).unwrap(), 200)["run"]["last_step"], 1);
    let resumed = expect(&http.get(&format!("/v1/workflows/{run}/resume")).unwrap(), 200);
    assert_eq!((resumed["input"].clone(), resumed["steps"][0]["output"].clone()), (json!({"day": 1}), json!("x")));
    expect(
        &http.json("POST", &format!("/v1/workflows/{run}/complete"), &by_w1(json!({"result": "done"}))).unwrap(),
        200,
    );
    assert_eq!(expect(&http.get("/v1/workflows?status=completed").unwrap(), 200)["runs"][0]["run_id"], run);
    let second = expect(&http.json("POST", "/v1/workflows", &json!({"name": "other"})).unwrap(), 200);
    let second = second["run_id"].as_str().unwrap();
    let claim2 =
        expect(&http.json("POST", "/v1/workflows:claim", &json!({"agent_id": "w1", "run_id": second})).unwrap(), 200);
    let fail = json!({"agent_id": "w1", "token": claim2["token"], "error": "boom", "retryable": false});
    assert_eq!(
        expect(&http.json("POST", &format!("/v1/workflows/{second}/fail"), &fail).unwrap(), 200)["run_status"],
        "failed"
    );
    let third = expect(&http.json("POST", "/v1/workflows", &json!({"name": "third"})).unwrap(), 200);
    let third = third["run_id"].as_str().unwrap();
    expect(
        &http.json("POST", &format!("/v1/workflows/{third}/cancel"), &json!({"reason": "no longer needed"})).unwrap(),
        200,
    );
    problem(&http.json("POST", &format!("/v1/workflows/{third}/cancel"), &json!({})).unwrap(), 409, "conflict");
    problem(&http.get("/v1/workflows/no-such-run").unwrap(), 404, "not_found");
    problem(
        &http.json("POST", "/v1/workflows:claim", &json!({"agent_id": "w1", "name": "none"})).unwrap(),
        404,
        "not_found",
    );

    expect(&http.request("PUT", "/v1/sessions/agent/1", &[], Some(b"{\"plan\":\"a\"}")).unwrap(), 200);
    expect(&http.request("PUT", "/v1/sessions/agent/1?agent_id=me", &[], Some(b"{\"plan\":\"b\"}")).unwrap(), 200);
    assert_eq!(expect(&http.get("/v1/sessions/agent/1").unwrap(), 200)["context"], json!({"plan": "b"}));
    assert_eq!(expect(&http.get("/v1/sessions/agent/1?version=1").unwrap(), 200)["context"], json!({"plan": "a"}));
    assert_eq!(expect(&http.get("/v1/sessions?prefix=agent/").unwrap(), 200)["sessions"][0]["latest_version"], 2);

    let health = expect(&http.get("/v1/health").unwrap(), 200);
    assert_eq!((health["backend"].clone(), health["owner"]["mode"].clone()), (json!("redb"), json!("owner")));
    problem(&http.json("POST", "/v1/admin:reset", &json!({"confirm": "yes"})).unwrap(), 400, "invalid_input");
    let reset = expect(&http.json("POST", "/v1/admin:reset", &json!({"confirm": "DELETE EVERYTHING"})).unwrap(), 200);
    assert!(reset["removed"].as_u64().unwrap() > 0);
    problem(&http.get("/v1/sessions/agent/1").unwrap(), 404, "not_found");
}

#[test]
fn every_error_class_is_a_problem_document() {
    let place = Place::new();
    let server = place.in_process(&["--history-retention", "2"]);
    let http = server.client();
    // Arguments that do not fit the operation.
    let bad = problem(&http.get("/v1/kv?limit=many").unwrap(), 400, "invalid_arguments");
    assert!(bad["detail"].as_str().unwrap().contains("`limit`"), "{bad}");
    problem(&http.json("POST", "/v1/leases:acquire", &json!({"resource_id": "r"})).unwrap(), 400, "invalid_arguments");
    problem(&http.request("PUT", "/v1/kv/k", &[], Some(b"not json")).unwrap(), 400, "invalid_arguments");
    problem(&http.request("PUT", "/v1/kv/k", &[("If-Match", "*")], Some(b"1")).unwrap(), 400, "invalid_arguments");
    // Input that breaks a rule, naming the argument.
    let long = "k".repeat(600);
    let rule = problem(&http.request("PUT", &format!("/v1/kv/{long}"), &[], Some(b"1")).unwrap(), 400, "invalid_input");
    assert_eq!(rule["argument"], "key");
    // History compacted away: 410 with the revision to continue from.
    for i in 0..400 {
        http.request("PUT", "/v1/kv/churn", &[], Some(i.to_string().as_bytes())).unwrap();
    }
    let compacted = state_e2e::wait::until_some("history to be compacted", std::time::Duration::from_secs(20), || {
        Some(http.get("/v1/history?since_revision=1").unwrap()).filter(|response| response.status == 410)
    });
    let gone = problem(&compacted, 410, "compacted");
    assert!(gone["compacted_revision"].as_u64().unwrap() > 1, "{gone}");
    // The seam route answers an unknown operation with 404, and an operation with a reply.
    problem(&http.json("POST", "/v1/call/native/nope", &json!({})).unwrap(), 404, "unknown_operation");
    let reply = expect(&http.json("POST", "/v1/call/native/state_get", &json!({"key": "churn"})).unwrap(), 200);
    assert_eq!((reply["outcome"].clone(), reply["result"]["value"].clone()), (json!("ok"), json!(399)));
    let invalid = expect(&http.json("POST", "/v1/call/native/state_get", &json!({})).unwrap(), 400);
    assert_eq!(
        (invalid["outcome"].clone(), invalid["error"]["code"].clone()),
        (json!("invalid"), json!("invalid_arguments"))
    );
    // Compatibility operations are reachable there too.
    let caxton = expect(&http.json("POST", "/v1/call/caxton/exists", &json!({"key": "churn"})).unwrap(), 200);
    assert_eq!(caxton["result"], true);
}

#[test]
fn an_idempotency_key_makes_a_retried_write_apply_once() {
    let place = Place::new();
    let server = place.in_process(&[]);
    let http = server.client().with_header("Idempotency-Key", "deploy-42");
    let first = expect(&http.request("PUT", "/v1/kv/deploys", &[("If-None-Match", "*")], Some(b"42")).unwrap(), 200);
    let retry = expect(&http.request("PUT", "/v1/kv/deploys", &[("If-None-Match", "*")], Some(b"42")).unwrap(), 200);
    assert_eq!(first, retry, "the retry gets the first result, not a 412");
    let history = expect(&server.client().get("/v1/history?key=deploys").unwrap(), 200);
    assert_eq!(history["events"].as_array().unwrap().len(), 1);
    // The same key for a different request is refused, and changes nothing.
    let reused = problem(&http.json("POST", "/v1/workflows", &json!({"name": "job"})).unwrap(), 400, "invalid_input");
    assert_eq!(reused["argument"], "request_id");
    assert_eq!(expect(&server.client().get("/v1/workflows").unwrap(), 200)["runs"], json!([]));
}

#[test]
fn checkpoints_and_knowledge() {
    let place = Place::new();
    let server = place.in_process(&[]);
    let http = server.client();
    let saved = expect(
        &http
            .json(
                "POST",
                "/v1/checkpoints",
                &json!({"description": "Shipped the recall route", "workspace": "/srv/app", "highlights": ["GET /v1/knowledge:recall"]}),
            )
            .unwrap(),
        200,
    );
    let id = saved["checkpoint_id"].as_str().unwrap();
    assert!(id.ends_with("_shipped-the-recall-route"), "{saved}");
    let restored = expect(&http.get("/v1/checkpoints:restore?workspace=app&depth=full").unwrap(), 200);
    assert_eq!(restored["checkpoint"]["id"], id, "the latest of the workspace named app");
    assert_eq!(restored["session_highlights"], json!(["GET /v1/knowledge:recall"]));
    let missing = http.get("/v1/checkpoints:restore?workspace=/elsewhere").unwrap();
    problem(&missing, 404, "not_found");
    let found = expect(&http.get("/v1/checkpoints:search?query=recall%20routes&limit=5").unwrap(), 200);
    assert_eq!(found["checkpoints"][0]["id"], id);
    let timeline = expect(&http.get("/v1/checkpoints:timeline?range=24h&format=detailed").unwrap(), 200);
    assert_eq!(timeline["total"], 1);
    problem(&http.get("/v1/checkpoints:timeline?range=forever").unwrap(), 400, "invalid_input");

    let note = json!({"content": "PgBouncer in transaction mode breaks session-level prepared statements.", "keywords": ["pgbouncer"]});
    let created = expect(&http.json("PUT", "/v1/knowledge/db/pgbouncer", &note).unwrap(), 200);
    assert_eq!(created["version"], 1);
    let stale =
        http.json("PUT", "/v1/knowledge/db/pgbouncer", &json!({"content": "x", "expected_version": 0})).unwrap();
    assert_eq!(
        problem(&stale, 409, "conflict")["result"]["current_version"],
        1,
        "a conflict carries the current version"
    );
    let recalled = expect(&http.get("/v1/knowledge:recall?query=prepared%20statements&max_tokens=200").unwrap(), 200);
    assert_eq!(recalled["items"][0]["id"], "db/pgbouncer");
    assert!(recalled["context_tokens"].as_u64().unwrap() <= 200);
    let listed = expect(&http.get("/v1/knowledge?prefix=db/").unwrap(), 200);
    assert_eq!(listed["notes"][0]["tokens"], created["tokens"]);
    expect(&http.request("DELETE", "/v1/knowledge/db/pgbouncer", &[], None).unwrap(), 200);
    problem(&http.request("DELETE", "/v1/knowledge/db/pgbouncer", &[], None).unwrap(), 404, "not_found");
}
