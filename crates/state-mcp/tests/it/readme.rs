//! The configuration table of docs/mcp.md is what `state-mcp --help` accepts, flag for flag,
//! with the same environment variables.

use state_e2e::readme::{doc, help_flags, table_after};

use crate::binary;

#[test]
fn the_documented_configuration_table_is_the_binarys() {
    let documented = table_after(&doc("docs/mcp.md"), "## Configuration");
    let accepted = help_flags(binary(), &[]);
    assert_eq!(documented, accepted, "docs/mcp.md's Configuration table against state-mcp --help");
}
