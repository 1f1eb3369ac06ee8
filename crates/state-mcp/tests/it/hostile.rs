//! What other local users, hung neighbours and hostile input can do to a store reached over
//! stdio: real processes, real files.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::json;
use state_e2e::{McpClient, ProtocolEra};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).permissions().mode() & 0o777
}

#[test]
fn another_local_user_can_read_none_of_the_stores_files() {
    let dir = tempfile::tempdir().unwrap();
    // As a home directory usually is: others may traverse it.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let data = dir.path().join("data/agents");
    let db = data.join("state.redb");
    let runtime = dir.path().join("run");
    let (db_arg, runtime_arg) = (db.to_string_lossy().into_owned(), runtime.to_string_lossy().into_owned());
    let mut client = McpClient::spawn_with_env(
        crate::binary(),
        &["--db", &db_arg, "--owner-idle", crate::TEST_OWNER_IDLE],
        &[("STATE_RUNTIME_DIR", runtime_arg.as_str())],
    )
    .unwrap();
    client.handshake(ProtocolEra::Legacy).unwrap();
    let set = client.call("state_set", json!({"key": "secret", "value": "s3cr3t"})).unwrap();
    assert!(!set.is_error, "{}", set.text);

    for made in [dir.path().join("data"), data.clone()] {
        assert_eq!(mode(&made), 0o700, "{}", made.display());
    }
    let holder = data.join("state.redb.holder");
    let log = data.join("state.redb.owner.log");
    for file in [&db, &holder, &log] {
        assert_eq!(mode(file), 0o600, "{}", file.display());
    }
    assert_eq!(mode(dir.path()), 0o755, "a directory the store did not make is left alone");
    client.shutdown().unwrap();
}
