//! The documented flag tables (docs/http.md, docs/mcp.md) against the binaries' own `--help`,
//! so the documentation cannot drift from what the programs accept.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// A flag and the environment variable that sets it, if any.
pub type Flags = BTreeMap<String, Option<String>>;

/// A document of the repository (`docs/http.md`), from its root.
pub fn doc(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The first table of flags after the heading `heading` (`| `--flag ARG` | `ENV` | ... |`).
pub fn table_after(readme: &str, heading: &str) -> Flags {
    let start = readme.find(heading).unwrap_or_else(|| panic!("the document has no `{heading}`"));
    let mut flags = Flags::new();
    let mut in_table = false;
    for line in readme[start..].lines().skip(1) {
        if let Some(row) = line.strip_prefix("| `--") {
            in_table = true;
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let flag = cells[0].split(['`', ' ']).next().unwrap_or_default();
            let env = cells.get(1).map(|c| c.trim_matches('`')).filter(|c| !c.is_empty());
            flags.insert(format!("--{flag}"), env.map(str::to_owned));
        } else if in_table && !line.starts_with('|') {
            break;
        }
    }
    assert!(!flags.is_empty(), "no flag table after `{heading}`");
    flags
}

/// The flags `program --help` lists (subcommands aside), with their `[env: ...]`.
pub fn help_flags(program: &Path, args: &[&str]) -> Flags {
    let output = Command::new(program).args(args).arg("--help").output().expect("runs --help");
    let help = String::from_utf8_lossy(&output.stdout);
    let mut flags = Flags::new();
    let mut last: Option<String> = None;
    for line in help.lines() {
        let trimmed = line.trim_start();
        if let Some(rest) =
            trimmed.strip_prefix("--").filter(|_| line.starts_with("      --") || line.starts_with("  -"))
        {
            let name = rest.split([' ', '=', '<', ',']).next().unwrap_or_default();
            let flag = format!("--{name}");
            flags.insert(flag.clone(), None);
            last = Some(flag);
        } else if let Some((_, short_long)) = trimmed.split_once(", --").filter(|_| trimmed.starts_with('-')) {
            let flag = format!("--{}", short_long.split([' ', '<']).next().unwrap_or_default());
            flags.insert(flag.clone(), None);
            last = Some(flag);
        } else if let Some(env) = trimmed.strip_prefix("[env: ") {
            let env = env.split(['=', ']']).next().unwrap_or_default().to_owned();
            if let Some(flag) = &last {
                flags.insert(flag.clone(), Some(env));
            }
        }
    }
    flags.remove("--help");
    flags.remove("--version");
    flags
}
