//! Module circles: modules of one crate that import each other in a loop cannot be read,
//! tested or moved one at a time. Every crate's modules are read here, and the modules of
//! each directory module among themselves, and a circle fails the test unless it is one of
//! the few written down below with the reason it is still there.
//!
//! Imports are read from the source with comments and string literals taken out, so a
//! grouped `use crate::{a, b::c}` counts each module it names, and a path in an expression
//! (`crate::a::f()`) counts as much as a `use`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::rust_files;
use crate::root;

/// Circles still there, each with why. The test fails if one grows, shrinks or goes away, so
/// this list is kept true.
const KNOWN: [(&str, &str, &[&str], &str); 1] = [(
    "state-api",
    "",
    &["auth", "catalog", "local", "options", "wire"],
    "the declarations hold their runners, and a replaced server's runner is its adapter over \
     `local`'s seam, which runs native operations by the same declarations: operations defined \
     by other operations through one table. Untying it would take a table filled in at runtime, \
     which the compiler could no longer check",
)];

/// Source text with comments, string and char literals blanked, so only code remains.
fn code_of(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < bytes.len() {
                    if bytes[i] == b'/' && bytes.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        i += 2;
                    } else if bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
                out.push(' ');
            }
            // A raw string: r"…" or r#"…"#.
            b'r' if matches!(bytes.get(i + 1), Some(b'"' | b'#')) && starts_a_literal(bytes, i) => {
                let hashes = bytes[i + 1..].iter().take_while(|&&b| b == b'#').count();
                if bytes.get(i + 1 + hashes) != Some(&b'"') {
                    out.push('r');
                    i += 1;
                    continue;
                }
                let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
                let start = i + 2 + hashes;
                let end = bytes[start..].windows(close.len()).position(|w| w == close.as_slice());
                i = end.map_or(bytes.len(), |at| start + at + close.len());
                out.push_str("\"\"");
            }
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("\"\"");
            }
            // A char literal ('a', '\n', '\u{1}'), not a lifetime ('a).
            b'\'' if bytes.get(i + 2) == Some(&b'\'') || bytes.get(i + 1) == Some(&b'\\') => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'\'' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("' '");
            }
            _ => {
                let c = text[i..].chars().next().unwrap_or(' ');
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    out
}

/// Whether the `r` at `at` begins a raw string (`r"`, `br"`, `cr"`), not ends a name (`for"`).
fn starts_a_literal(bytes: &[u8], at: usize) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    match at.checked_sub(1).map(|before| bytes[before]) {
        None => true,
        Some(b'b' | b'c') => at.checked_sub(2).is_none_or(|before| !word(bytes[before])),
        Some(before) => !word(before),
    }
}

/// The code before the file's test module (`#[cfg(test)] mod tests { … }`, written last):
/// tests may reach anywhere. A `mod tests;` declaration is not cut at.
fn without_tests(code: &str) -> &str {
    code.find("#[cfg(test)]\nmod tests {").map_or(code, |at| &code[..at])
}

fn ident(text: &str) -> &str {
    let end = text.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(text.len());
    &text[..end]
}

/// The first segment of every path `code` names after `root` (`crate::`, `super::`):
/// `root a::b`, and each item of `root {a, b::c, d as e}`.
fn named_after(code: &str, root: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (at, _) in code.match_indices(root) {
        // `xcrate::` is not `crate::`, and `super::super::` is not the parent's sibling.
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
            || (root == "super::" && code[..at].ends_with("super::"))
        {
            continue;
        }
        let rest = code[at + root.len()..].trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut item_start = true;
            for (offset, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && !c.is_whitespace() => {
                        item_start = false;
                        let name = ident(&group[offset..]);
                        if !name.is_empty() {
                            names.insert(name.to_owned());
                        }
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                names.insert(name.to_owned());
            }
        }
    }
    names
}

/// The items a crate root re-exports from its own modules (`pub use api::Api;`, `pub use
/// http::{HttpConfig, HttpError};`), by the name they are reached under (`crate::Api`).
fn reexports(code: &str) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    for (at, _) in code.match_indices("use ") {
        if code[..at].chars().next_back().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let rest = code[at + "use ".len()..].trim_start();
        let module = ident(rest);
        let Some(tail) = rest[module.len()..].strip_prefix("::") else { continue };
        let statement = &tail[..tail.find(';').unwrap_or(tail.len())];
        let group = statement.find('{').map_or(statement, |open| &statement[open + 1..]);
        for item in group.split([',', '{', '}']) {
            let item = item.trim();
            // `a::b::Item`, or `Item as Name`: reached by its last name.
            let reached = item.rsplit(" as ").next().unwrap_or(item).rsplit("::").next().unwrap_or(item).trim();
            if !reached.is_empty() && ident(reached) == reached {
                found.insert(reached.to_owned(), module.to_owned());
            }
        }
    }
    found
}

/// Every set of modules that reach each other (Tarjan's strongly connected components), each
/// of more than one module.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct Search<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        found: Vec<BTreeSet<String>>,
    }
    impl<'g> Search<'g> {
        fn visit(&mut self, node: &'g str) {
            let n = self.index.len();
            self.index.insert(node, n);
            self.low.insert(node, n);
            self.stack.push(node);
            for next in self.graph.get(node).into_iter().flatten() {
                let next = next.as_str();
                if !self.graph.contains_key(next) {
                    continue;
                }
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.stack.contains(&next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut circle = BTreeSet::new();
                while let Some(member) = self.stack.pop() {
                    circle.insert(member.to_owned());
                    if member == node {
                        break;
                    }
                }
                if circle.len() > 1 {
                    self.found.push(circle);
                }
            }
        }
    }
    let mut search =
        Search { graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), found: Vec::new() };
    for node in graph.keys() {
        if !search.index.contains_key(node.as_str()) {
            search.visit(node);
        }
    }
    search.found
}

/// The module a file under `dir` belongs to (its first path component), unless it is test code
/// or the directory's own root file.
fn module_of(dir: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(dir).ok()?.to_string_lossy().into_owned();
    let first = relative.split('/').next()?.trim_end_matches(".rs");
    let is_root = matches!(first, "lib" | "main" | "mod");
    let is_test = relative.ends_with("tests.rs") || relative.contains("/tests/") || first == "tests";
    (!is_root && !is_test).then(|| first.to_owned())
}

/// The import graph among the modules directly under `dir`: `crate_path` is how the crate
/// names `dir` (`""` for `src`, `engine::` for `src/engine`).
fn graph_of(dir: &Path, crate_path: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    // `crate::Item` names the module the crate root re-exports it from.
    let mut reexported = BTreeMap::new();
    if crate_path.is_empty() {
        for root in ["lib.rs", "main.rs"] {
            if let Ok(text) = std::fs::read_to_string(dir.join(root)) {
                reexported.extend(reexports(&code_of(&text)));
            }
        }
    }
    for file in rust_files(dir) {
        let Some(module) = module_of(dir, &file) else { continue };
        let text = std::fs::read_to_string(&file).expect("readable source");
        let code = code_of(&text);
        let code = without_tests(&code);
        let mut named = named_after(code, &format!("crate::{crate_path}"));
        // A file directly in `dir` names its siblings as `super::x`.
        if file.parent() == Some(dir) && !crate_path.is_empty() {
            named.extend(named_after(code, "super::"));
        }
        let named = named.into_iter().map(|name| reexported.get(&name).cloned().unwrap_or(name));
        let uses = graph.entry(module.clone()).or_default();
        uses.extend(named.filter(|name| *name != module));
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for uses in graph.values_mut() {
        uses.retain(|name| modules.contains(name));
    }
    graph
}

#[test]
fn no_crate_has_a_module_circle() {
    let mut found = Vec::new();
    for krate in std::fs::read_dir(root().join("crates")).expect("crates") {
        let krate = krate.expect("entry").path();
        let name = krate.file_name().expect("name").to_string_lossy().into_owned();
        let src = krate.join("src");
        if !src.is_dir() {
            continue;
        }
        let mut dirs = vec![(src.clone(), String::new())];
        for file in rust_files(&src) {
            let dir = file.with_extension("");
            if dir.is_dir() || file.file_name().is_some_and(|f| f == "mod.rs") {
                let dir = if file.file_name().is_some_and(|f| f == "mod.rs") {
                    file.parent().expect("parent").to_path_buf()
                } else {
                    dir
                };
                let path = dir.strip_prefix(&src).expect("under src").to_string_lossy().replace('/', "::");
                if !dirs.iter().any(|(d, _)| *d == dir) {
                    dirs.push((dir, format!("{path}::")));
                }
            }
        }
        for (dir, path) in dirs {
            for circle in circles(&graph_of(&dir, &path)) {
                found.push((name.clone(), path.trim_end_matches("::").to_owned(), circle));
            }
        }
    }
    let mut known: Vec<_> =
        KNOWN.iter().map(|(c, p, m, _)| (*c, *p, m.iter().map(|s| s.to_string()).collect())).collect();
    let mut unknown = Vec::new();
    for (krate, path, circle) in &found {
        let at =
            known.iter().position(|(c, p, m): &(&str, &str, BTreeSet<String>)| c == krate && p == path && m == circle);
        match at {
            Some(at) => drop(known.remove(at)),
            None => unknown.push(format!(
                "{krate}{}: {circle:?}",
                if path.is_empty() { String::new() } else { format!(" ({path})") }
            )),
        }
    }
    assert!(
        unknown.is_empty(),
        "modules that import each other in a circle (move what they share down into a module of its own \
         that imports none of them):\n  {}",
        unknown.join("\n  ")
    );
    assert!(known.is_empty(), "circles written down as known are gone; take them off KNOWN: {known:?}");
}

#[test]
fn imports_are_read_from_code_not_comments_and_groups_count_each_module() {
    let code = code_of(
        "use crate::{a, b::{c, d}, e as f};\n// crate::commented\nlet s = \"crate::quoted\";\n\
         let r = r#\"crate::raw\"#;\nlet c = '\\'';\ncrate::g::call();\n",
    );
    let named = named_after(&code, "crate::");
    assert_eq!(named, ["a", "b", "e", "g"].map(String::from).into_iter().collect());
    assert!(named_after(&code_of("let x = br#\"crate::q\"#; xcrate::z::f();"), "crate::").is_empty());
    let roots = reexports(&code_of(
        "pub use api::Api;\npub use http::{HttpConfig, HttpError as Failed};\npub use state_store::Clock;",
    ));
    assert_eq!(roots.get("Api").map(String::as_str), Some("api"));
    assert_eq!(roots.get("Failed").map(String::as_str), Some("http"));
    assert_eq!(roots.get("HttpConfig").map(String::as_str), Some("http"));
    let declared = code_of("mod tests;\nuse crate::x;\n#[cfg(test)]\nmod tests {\n use crate::y;\n}\n");
    assert_eq!(named_after(without_tests(&declared), "crate::"), BTreeSet::from(["x".to_owned()]));
    let graph = BTreeMap::from([
        ("x".to_owned(), BTreeSet::from(["y".to_owned()])),
        ("y".to_owned(), BTreeSet::from(["z".to_owned()])),
        ("z".to_owned(), BTreeSet::from(["x".to_owned()])),
        ("w".to_owned(), BTreeSet::from(["x".to_owned()])),
    ]);
    assert_eq!(circles(&graph), [BTreeSet::from(["x", "y", "z"].map(String::from))]);
}
