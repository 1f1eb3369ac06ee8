use super::*;

#[test]
fn uris_name_keys_leases_and_runs_encoded_or_not() {
    let native = Options::default();
    let parse = |uri: &str| Target::parse(uri, &native);
    assert_eq!(parse("state://kv/project/x/status"), Some(Target::Key("project/x/status".into())));
    assert_eq!(parse("state://kv/project%2Fx%2Fstatus"), Some(Target::Key("project/x/status".into())));
    assert_eq!(parse("state://lease/gpu%20one"), Some(Target::Lease("gpu one".into())));
    assert_eq!(parse("state://workflow/r-1"), Some(Target::Run("r-1".into())));
    assert!(matches!(parse("state://docs/usage"), Some(Target::Doc(_))));
    for nothing in ["state://kv/", "state://kv/%zz", "state://kv/%ff", "state://other/x", "checkpoint://docs/usage"] {
        assert_eq!(parse(nothing), None, "{nothing}");
    }
}

#[test]
fn a_keys_uri_reads_back_as_the_key() {
    for key in ["project/x/status", "a b?c#d%e", "ü/ñ", "k:v@w"] {
        let uri = key_uri(key);
        assert!(!uri[11..].contains([' ', '?', '#']), "{uri}");
        assert_eq!(Target::parse(&uri, &Options::default()), Some(Target::Key(key.into())), "{uri}");
    }
    assert_eq!(key_uri("project/x"), "state://kv/project/x", "readable where it can be");
}

#[test]
fn a_resource_is_watched_as_its_kind_of_record() {
    let watch = |target: Target| target.watch().map(|w| (w.kind, w.key));
    assert_eq!(watch(Target::Key("k".into())), Some((Some(HistoryKind::Kv), Some("k".into()))));
    assert_eq!(watch(Target::Lease("l".into())), Some((Some(HistoryKind::Lease), Some("l".into()))));
    assert_eq!(watch(Target::Run("r".into())), Some((Some(HistoryKind::Workflow), Some("r".into()))));
}
