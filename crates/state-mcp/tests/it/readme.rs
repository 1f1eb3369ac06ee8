//! The README's configuration table is what `state-mcp --help` accepts, flag for flag, with
//! the same environment variables.

use state_e2e::readme::{help_flags, readme, table_after};

use crate::binary;

#[test]
fn the_readmes_configuration_table_is_the_binarys() {
    let documented = table_after(&readme(), "## Configuration");
    let accepted = help_flags(binary(), &[]);
    assert_eq!(documented, accepted, "README's Configuration table against state-mcp --help");
}
