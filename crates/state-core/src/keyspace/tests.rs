use super::*;

#[test]
fn system_keys_never_meet_user_keys() {
    // Every user key is printable, so it sorts after USER_KEYS_AFTER; every system key before.
    for system in [lease_key("x"), run_key("r"), step_key("r", 1), session_version_key("s", 2), RESET_KEY.to_owned()] {
        assert!(system.as_str() < USER_KEYS_AFTER, "{system:?}");
    }
    for user in [" ", "!", "a", "~", "日本"] {
        assert!(user > USER_KEYS_AFTER, "{user:?}");
    }
}

#[test]
fn prefixes_do_not_overlap_between_ids() {
    assert!(!session_version_key("a/b", 1).starts_with(&session_version_prefix("a")));
    assert!(step_key("r1", 2).starts_with(&step_prefix("r1")));
    assert!(step_key("r1", 2) < step_key("r1", 10), "steps sort numerically");
}

#[test]
fn classify_recovers_space_and_id() {
    assert_eq!(classify("plain/key"), (Space::Kv, "plain/key"));
    assert_eq!(classify(&lease_key("db/migrate")), (Space::Lease, "db/migrate"));
    assert_eq!(classify(&run_key("01ABC")), (Space::Run, "01ABC"));
    assert_eq!(classify(&step_key("01ABC", 3)), (Space::Step, "01ABC"));
    assert_eq!(classify(&session_version_key("s", 3)), (Space::SessionVersion, "s"));
    assert_eq!(classify(RESET_KEY), (Space::Store, ""));
}
