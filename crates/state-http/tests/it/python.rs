//! The Python packages in `clients/python` against this binary: the client is current with the
//! server's OpenAPI document (a method per operation), drives every operation family, resends a
//! write whose answer was lost and resumes a cut watch; the LangGraph checkpointer passes
//! LangGraph's own conformance suite and keeps one writer per thread across real processes; the
//! LangGraph store keeps LangGraph's semantics.
//!
//! They run with the Python of `target/sdk` (tests/sdk/setup.sh installs httpx, LangGraph and
//! the conformance suite there) and the packages from source, and are skipped, saying so, when
//! it is missing, unless STATE_REQUIRE_SDKS is set.

use std::path::PathBuf;
use std::process::Command;

use state_e2e::HttpServer;
use state_e2e::sdk::{self, repository, run};

use crate::Place;

fn python(sdk: &std::path::Path, server: &HttpServer, script: &str) -> Command {
    let clients = repository().join("clients/python");
    let mut command = Command::new(sdk.join("venv/bin/python"));
    let path = [clients.join("state-client"), clients.join("langgraph-checkpoint-state")]
        .map(|p| p.to_string_lossy().into_owned())
        .join(":");
    command
        .arg(script_path(script))
        .env("PYTHONPATH", path)
        .env("STATE_URL", format!("http://{}", server.addr))
        .env_remove("STATE_TOKEN");
    command
}

fn script_path(name: &str) -> PathBuf {
    let clients = repository().join("clients/python");
    if name == "generate.py" { clients.join(name) } else { clients.join("tests").join(name) }
}

fn last_line(out: &str) -> &str {
    out.lines().last().unwrap_or("")
}

#[test]
fn the_python_client_is_generated_from_this_servers_openapi_document() {
    let Some(sdk) = sdk::dir() else { return };
    let place = Place::new();
    let server = place.serve(&["--tools", "all"]);
    let url = format!("http://{}/openapi.json", server.addr);
    // Stale or missing methods fail with the diff and the command that fixes them.
    run(python(&sdk, &server, "generate.py").args(["--from", &url, "--check"]));
}

#[test]
fn the_python_client_drives_every_operation_family() {
    let Some(sdk) = sdk::dir() else { return };
    let place = Place::new();
    let server = place.serve(&["--tools", "all"]);
    let out = run(&mut python(&sdk, &server, "client_test.py"));
    assert!(out.contains("ok: a write whose answer was lost is applied once"), "{out}");
    assert!(out.contains("ok: a cut watch resumes after its last event"), "{out}");
    assert!(last_line(&out).ends_with("client checks passed"), "{out}");
}

#[test]
fn the_langgraph_checkpointer_passes_langgraphs_conformance_suite() {
    let Some(sdk) = sdk::dir() else { return };
    let place = Place::new();
    let server = place.serve(&["--tools", "all"]);
    let out = run(&mut python(&sdk, &server, "conformance.py"));
    for capability in
        ["put", "put_writes", "get_tuple", "list", "delete_thread", "delete_for_runs", "copy_thread", "prune"]
    {
        assert!(out.contains(capability), "{capability} is not in the report:\n{out}");
    }
}

#[test]
fn two_langgraph_workers_never_fork_a_thread() {
    let Some(sdk) = sdk::dir() else { return };
    let place = Place::new();
    let server = place.serve(&["--tools", "all"]);
    run(&mut python(&sdk, &server, "two_writers.py"));
}

#[test]
fn the_langgraph_store_keeps_langgraphs_semantics() {
    let Some(sdk) = sdk::dir() else { return };
    let place = Place::new();
    let server = place.serve(&["--tools", "all"]);
    run(&mut python(&sdk, &server, "store_test.py"));
}
