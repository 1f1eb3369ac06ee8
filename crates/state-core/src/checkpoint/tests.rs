use super::*;

#[test]
fn slugs_are_short_readable_ascii() {
    assert_eq!(slug("Wired the BM25 index into knowledge recall!"), "wired-the-bm25-index-into-knowledge");
    assert_eq!(slug("über 🙂"), "ber");
    assert_eq!(slug("🙂"), "checkpoint");
    assert!(slug(&"abcdefghij ".repeat(10)).len() <= 48);
}

#[test]
fn workspace_names_are_the_last_path_component() {
    assert_eq!(workspace_name("/home/me/state/"), "state");
    assert_eq!(workspace_name("C:\\src\\app"), "app");
    assert_eq!(workspace_name("plain"), "plain");
    assert_eq!(workspace_name("/"), "/");
}

#[test]
fn default_sessions_are_named_after_the_workspace_and_the_day() {
    let day = UnixMillis(1_795_270_500_123);
    assert_eq!(default_session("/home/me/state", day), "state-2026-11-21");
    assert_eq!(default_session("/", day), "workspace-2026-11-21");
    assert_eq!(default_session("/srv/my app", day), "my-app-2026-11-21");
}
