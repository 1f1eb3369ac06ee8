//! `server.json` against the registry's own schema (the copy in packaging/registry), with
//! the validator the MCP Python SDK tests use, and against the release it describes.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::{Publisher, SCHEMA, server_json};
use crate::root;

/// The SDK venv's python, with jsonschema (tests/sdk/requirements.txt), or `None`, said.
fn python_with_jsonschema() -> Option<PathBuf> {
    let sdk = std::env::var_os("STATE_SDK_DIR").map_or_else(|| root().join("target/sdk"), PathBuf::from);
    let python = sdk.join("venv/bin/python3");
    if Command::new(&python).args(["-c", "import jsonschema"]).output().is_ok_and(|o| o.status.success()) {
        return Some(python);
    }
    assert!(std::env::var_os("STATE_REQUIRE_SDKS").is_none(), "jsonschema is not in {}", python.display());
    eprintln!("SKIPPED: bash tests/sdk/setup.sh installs jsonschema");
    None
}

/// The validator's complaints about `document` (empty when it is valid).
fn complaints(python: &Path, document: &Value) -> String {
    let check = r#"
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
document = json.loads(sys.stdin.read())
validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
for error in validator.iter_errors(document):
    print("/".join(map(str, error.absolute_path)), error.message)
"#;
    let mut child = Command::new(python)
        .args(["-c", check])
        .arg(root().join("packaging/registry/server.schema.json"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(document.to_string().as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn server_json_satisfies_the_registrys_schema_and_names_the_release() {
    let Some(python) = python_with_jsonschema() else { return };
    let scratch = tempfile::tempdir().unwrap();
    let bundle = scratch.path().join("state-9.8.7.mcpb");
    std::fs::write(&bundle, b"a bundle").unwrap();
    let publisher = Publisher::load().unwrap();
    let written = server_json(scratch.path(), "9.8.7", &bundle, &publisher).unwrap();
    let server: Value = serde_json::from_slice(&std::fs::read(written).unwrap()).unwrap();
    assert_eq!(complaints(&python, &server), "", "{server:#}");
    assert_eq!(server["$schema"], SCHEMA);
    assert_eq!(server["version"], "9.8.7");

    let packages = server["packages"].as_array().unwrap();
    let kinds: Vec<&str> = packages.iter().map(|p| p["registryType"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["pypi", "npm", "oci", "mcpb"]);
    let mcpb = &packages[3];
    // sha256 of "a bundle"
    let sum = format!("{:x}", <sha2::Sha256 as sha2::Digest>::digest(b"a bundle"));
    assert_eq!(mcpb["fileSha256"], Value::String(sum));
    assert!(mcpb["identifier"].as_str().unwrap().ends_with("/v9.8.7/state-9.8.7.mcpb"), "{mcpb}");
    assert_eq!(packages[2]["identifier"], format!("{}:9.8.7", publisher.image));

    // The validator does refuse: what the registry would reject, this test would too.
    let mut too_long = server.clone();
    too_long["description"] = Value::String("x".repeat(101));
    assert!(complaints(&python, &too_long).contains("description"), "a 101-character description passed");
    let mut unsummed = server.clone();
    unsummed["packages"][3]["fileSha256"] = Value::String("not-a-sum".into());
    assert!(!complaints(&python, &unsummed).is_empty(), "a malformed checksum passed");
    let mut bad_name = server;
    bad_name["name"] = Value::String("state".into());
    assert!(!complaints(&python, &bad_name).is_empty(), "a name without a namespace passed");
}

#[test]
fn the_container_image_carries_the_label_the_registry_matches() {
    let publisher = Publisher::load().unwrap();
    let dockerfile = std::fs::read_to_string(root().join("packaging/Dockerfile")).unwrap();
    assert!(
        dockerfile.contains(&format!("ARG MCP_NAME={}", publisher.name)),
        "packaging/Dockerfile's MCP_NAME default is not {}",
        publisher.name
    );
    assert!(dockerfile.contains("LABEL io.modelcontextprotocol.server.name=${MCP_NAME}"));
}
