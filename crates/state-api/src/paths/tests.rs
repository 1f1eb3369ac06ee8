use std::os::unix::fs::PermissionsExt;

use super::*;

#[test]
fn the_socket_directory_is_created_private() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = dir.path().join("a/b/run");
    let found = Rendezvous::for_database(&dir.path().join("db/s.redb"), Some(&runtime)).unwrap();
    assert_eq!(std::fs::metadata(&runtime).unwrap().permissions().mode() & 0o777, 0o700);
    assert!(found.socket.starts_with(&runtime) && found.socket.to_string_lossy().ends_with(".sock"));
    assert!(found.socket.as_os_str().len() < 100, "fits a socket address");
    assert!(dir.path().join("db").is_dir(), "the database's directory is created too");
}

#[test]
fn one_database_has_one_socket_however_it_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = dir.path().join("run");
    std::fs::create_dir_all(dir.path().join("real")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("link")).unwrap();
    let direct = Rendezvous::for_database(&dir.path().join("real/s.redb"), Some(&runtime)).unwrap();
    let linked = Rendezvous::for_database(&dir.path().join("link/../real/./s.redb"), Some(&runtime)).unwrap();
    let via_symlink = Rendezvous::for_database(&dir.path().join("link/s.redb"), Some(&runtime)).unwrap();
    assert_eq!(direct, linked);
    assert_eq!(direct, via_symlink);
    // A link to the database file itself, made before the database is: the link's name and
    // the file's reach one owner.
    std::os::unix::fs::symlink(dir.path().join("real/s.redb"), dir.path().join("alias.redb")).unwrap();
    let via_file_link = Rendezvous::for_database(&dir.path().join("alias.redb"), Some(&runtime)).unwrap();
    assert_eq!(direct, via_file_link);
    std::fs::write(dir.path().join("real/s.redb"), b"").unwrap();
    assert_eq!(direct, Rendezvous::for_database(&dir.path().join("alias.redb"), Some(&runtime)).unwrap());
    let other = Rendezvous::for_database(&dir.path().join("real/t.redb"), Some(&runtime)).unwrap();
    assert_ne!(direct.socket, other.socket);
}

#[test]
fn unsafe_socket_directories_are_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.redb");
    let open = dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o770)).unwrap();
    let error = Rendezvous::for_database(&db, Some(&open)).unwrap_err().to_string();
    assert!(
        error.contains("mode 0770") && error.contains("chmod 700") && error.contains(&*open.to_string_lossy()),
        "{error}"
    );

    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&open, &link).unwrap();
    let error = Rendezvous::for_database(&db, Some(&link)).unwrap_err().to_string();
    assert!(error.contains("symbolic link"), "{error}");

    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let error = Rendezvous::for_database(&db, Some(&file)).unwrap_err().to_string();
    assert!(error.contains("not a directory"), "{error}");
}
