use std::process::Command;

use state_e2e::HttpServer;

use super::*;
use crate::dist::{target_dir, workspace_version};

/// What a user does with the release's Python wheels: pip installs them (offline here; their
/// one outside dependency each, httpx and langgraph-checkpoint, comes from the SDK venv), and
/// the installed packages, not the sources, talk to a live server.
#[test]
fn the_python_wheels_install_and_talk_to_a_server() {
    let Some(sdk) = state_e2e::sdk::dir() else { return };
    let server_binary = target_dir().join("debug/state-http");
    if !server_binary.exists() {
        assert!(std::env::var_os("STATE_REQUIRE_DIST").is_none(), "{} is not built", server_binary.display());
        eprintln!("SKIPPED: build the binaries first (cargo build --workspace)");
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let version = workspace_version().unwrap();
    let built = wheels(&scratch.path().join("release"), &version).unwrap();
    let names: Vec<String> = built.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(
        names,
        [
            format!("state_client-{version}-py3-none-any.whl"),
            format!("langgraph_checkpoint_state-{version}-py3-none-any.whl")
        ]
    );

    let site = scratch.path().join("site");
    let python = sdk.join("venv/bin/python");
    let mut pip = Command::new(&python);
    pip.args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index", "--no-deps", "--target"])
        .arg(&site)
        .args(&built);
    assert_success(&mut pip);
    assert!(site.join("state_client/_operations.py").is_file());
    assert!(site.join("langgraph/checkpoint/state/__init__.py").is_file());

    let db = scratch.path().join("s.redb");
    let run = scratch.path().join("run");
    let server = HttpServer::start(
        &server_binary,
        &["--db", db.to_str().unwrap(), "--tools", "all"],
        &[("STATE_RUNTIME_DIR", run.to_str().unwrap())],
    )
    .unwrap();
    let script = r#"
import importlib.metadata as md, os, sys
from state_client import Client
from langgraph.checkpoint.state import StateSaver
from langgraph.checkpoint.base import empty_checkpoint
for name in ("state-client", "langgraph-checkpoint-state"):
    assert md.version(name) == sys.argv[1], (name, md.version(name))
    for requirement in md.requires(name) or []:
        md.version(requirement.split(">")[0].split("=")[0].strip())  # installed, or this raises
with Client(os.environ["STATE_URL"]) as client:
    assert client.state_set("wheel/x", 1)["version"] == 1
    saver = StateSaver(client)
    config = {"configurable": {"thread_id": "wheel-thread", "checkpoint_ns": ""}}
    saved = saver.put(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
    assert saver.get_tuple(saved).checkpoint["id"] == saved["configurable"]["checkpoint_id"]
    saver.close()
print("installed wheels work")
"#;
    let mut check = Command::new(&python);
    check
        .args(["-c", script, &version])
        .env("PYTHONPATH", &site)
        .env("STATE_URL", format!("http://{}", server.addr))
        .current_dir(scratch.path());
    let out = assert_success(&mut check);
    assert!(out.contains("installed wheels work"), "{out}");
}

fn assert_success(command: &mut Command) -> String {
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{command:?}\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    stdout
}

#[test]
fn a_package_whose_version_is_not_the_releases_is_refused() {
    let scratch = tempfile::tempdir().unwrap();
    let error = wheels(scratch.path(), "9.9.9").unwrap_err().to_string();
    assert!(error.contains("the release is 9.9.9: make them one"), "{error}");
}
