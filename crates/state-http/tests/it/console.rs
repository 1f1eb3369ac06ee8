//! The web console in a real browser: `tests/sdk/console_test.py` drives Debian's headless
//! Chromium with Playwright (from tests/sdk) against this binary started with the test
//! tokens, and a state-mcp process writes beside it. Skipped, saying so, without the SDKs or
//! Chromium unless CI's STATE_REQUIRE_SDKS / STATE_REQUIRE_BROWSER are set.
//!
//! Screenshots of each view go to target/console, or to docs/console with
//! STATE_CONSOLE_SCREENSHOTS=docs (how the README's were made).

use std::process::Command;

use state_e2e::sdk::{self, repository, run};

use crate::browser::chromium;
use crate::{ADMIN, Place, READER, TEAM_A, expect, state_mcp};

#[test]
fn the_console_shows_the_store_live_to_each_token_as_its_scope_allows() {
    let Some(sdk) = sdk::dir() else { return };
    let Some(chromium) = chromium() else { return };
    let place = Place::new();
    let tokens = place.tokens.to_string_lossy().into_owned();
    let server = place.serve(&["--auth", &tokens, "--tools", "all"]);
    let page = server.client().get("/").unwrap();
    let policy = page.header("content-security-policy").unwrap_or("").to_owned();
    assert_eq!(page.status, 200);
    assert!(policy.contains("script-src 'self'") && !policy.contains("unsafe-inline"), "{policy}");
    expect(&server.client().with_token(TEAM_A).get("/v1/whoami").unwrap(), 200);
    // A link to the console from another site opens it (its files hold no data); what it then
    // asks for is refused from there as any request is.
    let linked = server.client().with_header("Sec-Fetch-Site", "cross-site");
    assert_eq!(linked.get("/").unwrap().status, 200);
    assert_eq!(linked.with_token(ADMIN).get("/v1/health").unwrap().status, 403);

    let shots = match std::env::var("STATE_CONSOLE_SCREENSHOTS").as_deref() {
        Ok("docs") => repository().join("docs/console"),
        _ => repository().join("target/console"),
    };
    let out = run(Command::new(sdk.join("venv/bin/python"))
        .arg(repository().join("tests/sdk/console_test.py"))
        .env("STATE_URL", format!("http://{}", server.addr))
        .env("ADMIN", ADMIN)
        .env("TEAM_A", TEAM_A)
        .env("READER", READER)
        .env("STATE_MCP", state_mcp())
        .env("STATE_DB", &place.db)
        .env("STATE_RUNTIME_DIR", &place.runtime)
        .env("CHROMIUM", chromium)
        .env("SCREENSHOTS", &shots));
    assert!(out.lines().last().unwrap_or("").ends_with("checks passed"), "{out}");
    assert!(out.contains("ok: a write by a state-mcp process appears in the open view"), "{out}");
}

/// What the console adds to the server, attacked without a browser: `/v1/whoami` answered
/// without a token reveals nothing but that one is needed; a wrong token, a foreign page or a
/// foreign Host get nothing; the files open from a link but only GET does, and a page of the
/// server's own origin is accepted where another origin's is not.
#[test]
fn whoami_and_the_console_files_give_an_attacker_nothing() {
    let place = Place::new();
    let tokens = place.tokens.to_string_lossy().into_owned();
    let server = place.serve(&["--auth", &tokens]);
    let http = server.client();
    let anonymous = expect(&http.get("/v1/whoami").unwrap(), 200);
    assert_eq!(anonymous, serde_json::json!({"name": null, "prefixes": [], "right": null, "token_required": true}));
    assert_eq!(http.with_token("not-a-token-0123456789").get("/v1/whoami").unwrap().status, 401);
    let me = expect(&http.with_token(TEAM_A).get("/v1/whoami").unwrap(), 200);
    assert_eq!((me["name"].as_str(), me["right"].as_str()), (Some("team-a"), Some("write")));
    assert!(!me.to_string().contains(TEAM_A), "the secret is never echoed: {me}");

    let foreign = http.with_header("Origin", "http://evil.example");
    assert_eq!(foreign.with_token(TEAM_A).get("/v1/whoami").unwrap().status, 403);
    let cross_site = http.with_header("Sec-Fetch-Site", "cross-site");
    assert_eq!(cross_site.get("/console/app.js").unwrap().status, 200, "a linked page loads its files");
    let posted = cross_site.request("POST", "/", &[("Content-Type", "application/json")], Some(b"{}")).unwrap();
    assert_ne!(posted.status, 200, "only GET of the files is exempt");
    // The server's own origin is accepted, another port of the same host is not.
    let own = format!("http://{}", server.addr);
    let same = http.with_header("Origin", &own).with_token(ADMIN);
    expect(&same.json("PUT", "/v1/kv/from-the-console", &serde_json::json!(1)).unwrap(), 200);
    let other_port = format!("http://127.0.0.1:{}", server.addr.port() + 1);
    let other = http.with_header("Origin", &other_port).with_token(ADMIN);
    assert_eq!(other.json("PUT", "/v1/kv/from-elsewhere", &serde_json::json!(1)).unwrap().status, 403);

    // Without tokens, a rebinding Host is refused even for the console's files.
    let open = place.serve(&["--listen", "127.0.0.1:0"]);
    let rebound = open.client().with_header("Host", "evil.example:7478");
    assert_eq!(rebound.get("/").unwrap().status, 403);
    assert_eq!(rebound.get("/v1/whoami").unwrap().status, 403);
    let local = expect(&open.client().get("/v1/whoami").unwrap(), 200);
    assert_eq!(local["right"], "admin");
}

/// `--no-console` serves no page and no file of it; the API beside it is unchanged.
#[test]
fn no_console_serves_no_page() {
    let place = Place::new();
    let server = place.serve(&["--no-console"]);
    let http = server.client();
    for path in ["/", "/console/app.js", "/console/style.css"] {
        assert_eq!(http.get(path).unwrap().status, 404, "{path}");
    }
    expect(&http.json("PUT", "/v1/kv/still-served", &serde_json::json!(1)).unwrap(), 200);
    expect(&http.get("/v1/health").unwrap(), 200);
}
