//! A minute of every kind of client on one store (the soak of `cargo xtask soak`, short): the
//! servers' memory, open files and threads must stay flat after warm-up.

use std::time::Duration;

#[test]
fn a_minute_of_mixed_load_leaves_memory_files_and_threads_flat() {
    let dir = tempfile::tempdir().unwrap();
    let seconds = std::env::var("STATE_SOAK_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    let config = state_e2e::soak::SoakConfig {
        state_mcp: crate::state_mcp(),
        state_http: crate::binary().to_owned(),
        dir: dir.path().to_owned(),
        duration: Duration::from_secs(seconds),
        every: Duration::from_secs(2),
    };
    let report = state_e2e::soak::run(&config).unwrap();
    eprintln!("{}", state_e2e::soak::csv(&report));
    assert!(report.operations > 1000, "the load ran: {} operations", report.operations);
    assert!(report.errors * 100 <= report.operations, "{} of {} operations failed", report.errors, report.operations);
    let rises = report.rises();
    assert!(rises.is_empty(), "not flat after warm-up: {rises:?}");
}
