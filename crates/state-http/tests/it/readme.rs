//! The documented flag tables are what `state-http --help` accepts: its own flags and the
//! PostgreSQL ones (docs/http.md), and those it shares with `state-mcp` (docs/mcp.md), with the
//! same environment variables.

use state_e2e::readme::{Flags, doc, help_flags, table_after};

#[test]
fn the_documented_flag_tables_are_the_binarys() {
    let text = doc("docs/http.md") + &doc("docs/mcp.md");
    let mut documented = Flags::new();
    for heading in ["### Flags", "## Several servers, one store: PostgreSQL", "## Configuration"] {
        documented.extend(table_after(&text, heading));
    }
    let accepted = help_flags(std::path::Path::new(env!("CARGO_BIN_EXE_state-http")), &[]);
    for (flag, env) in &accepted {
        assert_eq!(documented.get(flag), Some(env), "state-http {flag} (env {env:?}) in docs/http.md or docs/mcp.md");
    }
    let own = table_after(&text, "### Flags");
    for flag in own.keys().chain(table_after(&text, "## Several servers, one store: PostgreSQL").keys()) {
        assert!(accepted.contains_key(flag), "docs/http.md documents state-http {flag}, which it does not accept");
    }
}
