//! Architecture rules, checked as tests (run by `cargo xtask ci` through nextest).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use crate::{cargo, root};

mod modules;

/// Normal (non-dev) dependencies of every workspace package, by package name.
fn dependency_graph() -> BTreeMap<String, BTreeSet<String>> {
    dependencies(false)
}

/// Every package's dependencies by name; with `dev`, its tests' dependencies too.
fn dependencies(dev: bool) -> BTreeMap<String, BTreeSet<String>> {
    let metadata = metadata();
    let mut graph = BTreeMap::new();
    for package in metadata["packages"].as_array().expect("packages") {
        let deps = package["dependencies"]
            .as_array()
            .expect("dependencies")
            .iter()
            .filter(|d| d["kind"].is_null() || (dev && d["kind"] == "dev"))
            .filter_map(|d| d["name"].as_str().map(str::to_owned))
            .collect();
        graph.insert(package["name"].as_str().expect("name").to_owned(), deps);
    }
    graph
}

/// `cargo metadata` of the workspace, run once per test process.
fn metadata() -> &'static Value {
    static METADATA: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    METADATA.get_or_init(|| {
        let output = cargo().args(["metadata", "--format-version", "1", "--no-deps", "--offline"]).output();
        let output = output.expect("cargo metadata runs");
        assert!(output.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice(&output.stdout).expect("cargo metadata JSON")
    })
}

#[test]
fn core_stays_pure() {
    // An allowlist: anything new in the core has to be argued for here.
    // state-text is ours: pure text rules (token counts, stemming, BM25), kept apart for its
    // compiled-in vocabulary.
    let allowed = ["serde", "serde_json", "schemars", "thiserror", "state-text"];
    let graph = dependency_graph();
    for dependency in &graph["state-core"] {
        assert!(
            allowed.contains(&dependency.as_str()),
            "state-core depends on {dependency}: the core does no IO and holds no frontend concerns; \
             it may use only {allowed:?}"
        );
    }
}

#[test]
fn layers_point_one_way() {
    let graph = dependency_graph();
    let frontends = ["state-mcp", "state-http", "state-cli"];
    let ours =
        |package: &str| -> Vec<String> { graph[package].iter().filter(|d| d.starts_with("state-")).cloned().collect() };
    assert_eq!(ours("state-os"), Vec::<String>::new(), "the platform seam depends on none of ours");
    let mut store = ours("state-store");
    store.sort();
    assert_eq!(store, ["state-core", "state-os"], "the engine builds on the core and the platform seam alone");
    assert_eq!(ours("state-compat"), ["state-core"], "the replaced servers' shapes map onto the core's, nothing else");
    let mut api = ours("state-api");
    api.sort();
    assert_eq!(
        api,
        ["state-compat", "state-core", "state-os", "state-store"],
        "the seam builds on the engine, the core, the platform and the replaced servers' shapes alone"
    );
    assert_eq!(
        ours("state-boot"),
        ["state-api"],
        "the binaries' shared start (flags, logging, reaching the store) holds the seam alone"
    );
    for frontend in frontends.iter().filter(|f| graph.contains_key(**f)) {
        for dependency in ours(frontend) {
            // The one named exception: state-http mounts state-mcp's MCP handler at /mcp
            // (one protocol, two transports).
            let mounts_mcp = *frontend == "state-http" && dependency == "state-mcp";
            // statectl reads the replaced servers' databases to import them.
            let imports = *frontend == "state-cli" && dependency == "state-compat";
            assert!(
                dependency == "state-api"
                    || dependency == "state-boot"
                    || dependency == "state-core"
                    || mounts_mcp
                    || imports,
                "{frontend} depends on {dependency}: frontends hold the seam (state-api), never the engine, \
                 a backend or another frontend"
            );
        }
        assert!(!graph[*frontend].contains("redb"), "{frontend} touches redb directly; go through state-api");
    }
    // Their tests too: a frontend's tests drive it as a user would, and check the database
    // through the seam, so the seam is what they prove.
    let with_tests = dependencies(true);
    for frontend in frontends.iter().filter(|f| with_tests.contains_key(**f)) {
        for engine_side in ["state-store", "redb"] {
            assert!(
                !with_tests[*frontend].contains(engine_side),
                "{frontend}'s tests depend on {engine_side}: reach the database through state-api"
            );
        }
    }
}

#[test]
fn libraries_do_not_use_anyhow_in_their_api() {
    let graph = dependency_graph();
    for library in ["state-core", "state-store", "state-api"] {
        assert!(!graph[library].contains("anyhow"), "{library} returns typed errors (thiserror), not anyhow");
    }
}

#[test]
fn the_mcp_server_never_prints_to_stdout() {
    // stdout carries the protocol; one stray println! corrupts a client's session.
    let src = root().join("crates/state-mcp/src");
    for file in rust_files(&src) {
        let text = std::fs::read_to_string(&file).expect("readable source");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for macro_name in ["println!", "print!"] {
                let stdout_print = code.match_indices(macro_name).any(|(at, _)| {
                    // `eprintln!` and `eprint!` write to stderr, which is where logs belong.
                    !code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_')
                });
                assert!(!stdout_print, "{}:{}: prints to stdout", file.display(), n + 1);
            }
        }
    }
}

#[test]
fn the_core_holds_no_protocol_and_each_operation_is_declared_in_one_place() {
    // The catalog (names, tool groups, routes, what a token must cover) is the seam's; how a
    // tool list trims schemas to save tokens is MCP's. Neither belongs to the domain.
    let core = root().join("crates/state-core/src");
    assert!(!core.join("compat").exists(), "the replaced servers' shapes live in state-compat, not the core");
    for file in rust_files(&core) {
        let text = std::fs::read_to_string(&file).expect("readable source");
        for word in ["enum Operation", "ToolGroup", "outputSchema", "tools/list"] {
            assert!(!text.contains(word), "{}: `{word}` is a frontend concern, not the core's", file.display());
        }
    }
    // Dispatch and authorization read the declaration: no second table of operations.
    for file in ["crates/state-api/src/local/mod.rs", "crates/state-api/src/auth.rs"] {
        let text = std::fs::read_to_string(root().join(file)).expect("readable source");
        assert!(!text.contains("StateGet =>"), "{file} matches on operations again; declare it in catalog.rs");
    }
    let http = std::fs::read_to_string(root().join("crates/state-http/src/rest/routes.rs")).expect("routes.rs");
    assert!(!http.contains("\"/v1/kv"), "REST routes are declared in the catalog, not in state-http");
}

#[test]
fn crates_follow_the_layout() {
    for entry in std::fs::read_dir(root().join("crates")).expect("crates/") {
        let dir = entry.expect("entry").path();
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("every crate has a manifest");
        let folder = dir.file_name().and_then(|n| n.to_str()).expect("folder name");
        assert!(
            manifest.contains(&format!("name = \"{folder}\"")),
            "crates/{folder}: folder name and package name differ"
        );
        assert!(manifest.contains("[lints]\nworkspace = true"), "crates/{folder} must use the workspace lints");
    }
}

/// Product code names no operating system outside the platform seam, so a Linux-only call
/// cannot slip in anywhere else (CI also builds the workspace for macOS). Tests and benchmarks
/// run on Linux and may read /proc.
#[test]
fn only_the_platform_seam_names_an_operating_system() {
    for entry in std::fs::read_dir(root().join("crates")).expect("crates/") {
        let src = entry.expect("entry").path().join("src");
        if src.ends_with("state-os/src") || !src.is_dir() {
            continue;
        }
        for file in rust_files(&src) {
            let text = std::fs::read_to_string(&file).expect("readable source");
            for os_specific in
                ["target_os", "target_vendor", "\"/proc", "pidfd", "OFlags::DIRECT", "RDHUP", "F_FULLFSYNC"]
            {
                let in_code =
                    text.lines().filter(|l| !l.trim_start().starts_with("//")).any(|l| l.contains(os_specific));
                assert!(!in_code, "{} names `{os_specific}`: put it behind state-os", file.display());
            }
        }
    }
}

/// `unsafe` is denied everywhere; one file of the platform seam allows it, for the one call
/// nothing safe wraps.
#[test]
fn unsafe_code_lives_in_one_file() {
    let allowed = root().join("crates/state-os/src/process/macos.rs");
    for dir in ["crates", "tests", "xtask"] {
        for file in rust_files(&root().join(dir)) {
            let text = std::fs::read_to_string(&file).expect("readable source");
            let allows = |l: &str| l.trim_start().starts_with("#") && l.contains("(unsafe_code)");
            if text.lines().any(allows) {
                assert_eq!(file, allowed, "{} allows unsafe code", file.display());
            }
        }
    }
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).expect("Cargo.toml");
    assert!(manifest.contains("unsafe_code = \"deny\""), "the workspace denies unsafe code");
}

/// Tests wait for what they wait for (`state_e2e::wait::until`), not for time: a sleep in a
/// test is an exception that says why on its line or the three before it, and there are few.
#[test]
fn tests_sleep_rarely_and_say_why() {
    const MOST: usize = 20;
    let mut dirs: Vec<std::path::PathBuf> = std::fs::read_dir(root().join("crates"))
        .expect("crates")
        .map(|entry| entry.expect("entry").path().join("tests"))
        .filter(|dir| dir.is_dir())
        .collect();
    dirs.push(root().join("tests/src"));
    let mut sleeps = Vec::new();
    for path in dirs.iter().flat_map(|dir| rust_files(dir)) {
        // The benchmark paces its load on purpose; it is not a test.
        if path.components().any(|c| c.as_os_str() == "state-bench") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("test source");
        let lines: Vec<&str> = text.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            if !line.contains("sleep(") || line.trim_start().starts_with("//") {
                continue;
            }
            let place = format!("{}:{}", path.strip_prefix(root()).unwrap_or(&path).display(), n + 1);
            let said = lines[n.saturating_sub(3)..=n].iter().any(|l| l.contains("//"));
            assert!(
                said,
                "{place}: a sleep in a test says why (a comment on it or just above), or waits for an event instead (state_e2e::wait::until)"
            );
            sleeps.push(place);
        }
    }
    assert!(
        sleeps.len() <= MOST,
        "{} sleeps in tests, more than {MOST}: wait for the event instead (state_e2e::wait::until)\n{}",
        sleeps.len(),
        sleeps.join("\n")
    );
}

fn rust_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("readable dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

#[test]
fn every_engine_verb_is_a_native_operation() {
    // A profile's rule the native operations lack is a `state_core::plan::Rule` its adapter
    // hands to `Engine::apply`; a verb of the engine that no native declaration runs is one
    // kept for somebody's compatibility, which is what adapters are for.
    let catalog = std::fs::read_to_string(root().join("crates/state-api/src/catalog.rs")).expect("the catalog");
    let declared: BTreeSet<&str> = catalog
        .lines()
        .filter_map(|line| line.trim().strip_prefix("engine: "))
        .map(|rest| rest.trim_end_matches(','))
        .filter(|name| name.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .collect();
    // What the engine offers besides operations: its generic entries, its change feed, and
    // what hosts and maintenance call.
    let services = [
        "apply",
        "query",
        "watch",
        "backup",
        "ping",
        "health",
        "close",
        "revision",
        "compact_history",
        "expire_due",
        "release_dependents",
        "give_back_space",
    ];
    // Every file of the engine, every `impl Engine` block in it: a verb added in a new file
    // is checked like the others.
    let engine = root().join("crates/state-store/src/engine");
    let mut blocks = 0;
    for path in rust_files(&engine) {
        let name = path.strip_prefix(&engine).unwrap_or(&path).display().to_string();
        let text = std::fs::read_to_string(&path).expect("engine source");
        for (start, _) in text.match_indices("impl Engine {") {
            blocks += 1;
            let body = &text[start..];
            let body = &body[..body.find("\n}\n").unwrap_or(body.len())];
            for line in body.lines() {
                let Some(rest) = line.trim().strip_prefix("pub async fn ") else { continue };
                let verb: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                assert!(
                    declared.contains(verb.as_str()) || services.contains(&verb.as_str()),
                    "Engine::{verb} ({name}) is run by no native declaration: a compatibility profile's \
                     rule belongs in an adapter (state_compat::<profile>::calls, with a plan::Rule if it must \
                     write)"
                );
            }
        }
    }
    assert!(blocks >= 4, "the engine's `impl Engine` blocks were not found ({blocks}): has it moved?");
}

/// The fuzzers build with `--locked` from their own lock file, so a workspace crate that gains
/// a path dependency has to be recorded there too, or CI fails minutes in at the fuzz step.
/// Checked here from the two lock files alone, without the network.
#[test]
fn the_fuzz_lock_follows_the_workspace() {
    let fuzz = local_packages(&root().join("fuzz/Cargo.lock"));
    for package in metadata()["packages"].as_array().expect("packages") {
        let name = package["name"].as_str().expect("name");
        let Some(recorded) = fuzz.get(name) else { continue };
        let declared = package["dependencies"].as_array().expect("dependencies").iter().filter(|d| {
            // What every build of the package needs: not its tests', not an optional feature's.
            (d["kind"].is_null() || d["kind"] == "build") && d["optional"] != true
        });
        for dependency in declared.filter_map(|d| d["name"].as_str()) {
            assert!(
                recorded.contains(dependency),
                "{name} depends on {dependency}, which fuzz/Cargo.lock does not record: run \
                 `cargo metadata --manifest-path fuzz/Cargo.toml --format-version 1 >/dev/null` and commit fuzz/Cargo.lock"
            );
        }
    }
}

/// Packages without a `source` (the path crates) in a Cargo.lock, with the names they depend on.
fn local_packages(lock: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let text = std::fs::read_to_string(lock).expect("readable Cargo.lock");
    let mut packages = BTreeMap::new();
    for block in text.split("[[package]]").skip(1) {
        if block.lines().any(|l| l.starts_with("source = ")) {
            continue;
        }
        let field = |key: &str| block.lines().find_map(|l| l.strip_prefix(key)).map(|v| v.trim_matches('"').to_owned());
        let name = field("name = ").expect("every package has a name");
        let deps = block
            .split_once("dependencies = [")
            .map(|(_, rest)| rest.split(']').next().unwrap_or(""))
            .unwrap_or("")
            .lines()
            .filter_map(|l| l.trim().trim_end_matches(',').trim_matches('"').split(' ').next().map(str::to_owned))
            .filter(|d| !d.is_empty())
            .collect();
        packages.insert(name, deps);
    }
    packages
}
