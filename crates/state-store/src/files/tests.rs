#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;

use super::*;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn new_directories_and_files_are_private_and_loose_files_are_tightened() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let nested = dir.path().join("a/b");
    create_private_dir_all(&nested).unwrap();
    assert_eq!((mode(&dir.path().join("a")), mode(&nested)), (0o700, 0o700));
    assert_eq!(mode(dir.path()), 0o755, "an existing directory is left alone");
    let file = nested.join("f");
    private_file().create(true).write(true).open(&file).unwrap();
    assert_eq!(mode(&file), 0o600);
    let loose = nested.join("loose");
    std::fs::write(&loose, "x").unwrap();
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(make_private(&loose).unwrap());
    assert_eq!(mode(&loose), 0o600);
    assert!(!make_private(&loose).unwrap());
}
