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
