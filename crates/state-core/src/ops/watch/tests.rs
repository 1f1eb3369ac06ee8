use super::*;
use crate::keyspace;

#[test]
fn a_watch_selects_what_the_same_history_read_selects() {
    let key = WatchRequest::key(None, "plan/today");
    assert_eq!(key.filter(), KeyFilter::Exact("plan/today".into()));
    let lease = WatchRequest::key(Some(HistoryKind::Lease), "db/migrate");
    assert_eq!(lease.filter(), KeyFilter::Exact(keyspace::lease_key("db/migrate")));
    let prefix = WatchRequest { prefix: Some("team/".into()), ..WatchRequest::default() };
    assert_eq!(prefix.filter(), KeyFilter::Prefix("team/".into()));
    assert_eq!(WatchRequest::default().filter(), KeyFilter::All);
}

#[test]
fn waits_are_bounded_below_client_timeouts() {
    assert_eq!(WatchRequest::default().wait_millis().unwrap(), 25_000);
    let long = WatchRequest { timeout_seconds: Some(120.0), ..WatchRequest::default() };
    let error = long.validate().unwrap_err();
    assert_eq!(error.argument(), "timeout_seconds");
    let both = WatchRequest { key: Some("a".into()), prefix: Some("b".into()), ..WatchRequest::default() };
    assert!(both.validate().is_err());
}
