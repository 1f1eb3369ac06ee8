//! The README's flag tables are what `state-http --help` accepts: its own flags, the PostgreSQL
//! ones, and those it shares with `state-mcp`, with the same environment variables.

use state_e2e::readme::{Flags, help_flags, readme, table_after};

#[test]
fn the_readmes_flag_tables_are_the_binarys() {
    let text = readme();
    let mut documented = Flags::new();
    for heading in ["### Flags", "## Several servers, one store: PostgreSQL", "## Configuration"] {
        documented.extend(table_after(&text, heading));
    }
    let accepted = help_flags(std::path::Path::new(env!("CARGO_BIN_EXE_state-http")), &[]);
    for (flag, env) in &accepted {
        assert_eq!(documented.get(flag), Some(env), "state-http {flag} (env {env:?}) in the README");
    }
    let own = table_after(&text, "### Flags");
    for flag in own.keys().chain(table_after(&text, "## Several servers, one store: PostgreSQL").keys()) {
        assert!(accepted.contains_key(flag), "the README documents state-http {flag}, which it does not accept");
    }
}
