use serde_json::json;
use state_api::Local;
use state_api::Settings;
use state_api::catalog::Operation;

use super::*;

#[tokio::test]
async fn changes_waiting_together_make_one_notice_and_later_ones_another() {
    let dir = tempfile::tempdir().unwrap();
    let api = Api::local(Local::open_standalone(&dir.path().join("s.redb"), Settings::default()).unwrap());
    let set = |value: i64| {
        let api = api.clone();
        async move {
            let reply = api.call(Operation::StateSet, json!({"key": "hot", "value": value})).await;
            assert_eq!(reply.outcome, state_api::Outcome::Ok);
        }
    };
    let mut changes = follow(&api, &state_api::auth::Caller::LocalUser, &Options::default(), "state://kv/hot")
        .await
        .unwrap()
        .unwrap();
    for value in 0..10 {
        set(value).await;
    }
    // A write is answered before the writer hands its events to watchers; the writer answers
    // the next batch only after that, so one more write (of a key not followed) means all ten
    // are waiting together.
    let reply = api.call(Operation::StateSet, json!({"key": "elsewhere", "value": 0})).await;
    assert_eq!(reply.outcome, state_api::Outcome::Ok);
    assert!(changes.changed().await, "ten writes are a change");
    // They were all taken by that one: nothing is left until the next write.
    let waiting = tokio::time::timeout(Duration::from_millis(100), changes.changed()).await;
    assert!(waiting.is_err(), "no second notice for the same ten writes");
    set(10).await;
    assert!(changes.changed().await);
}
