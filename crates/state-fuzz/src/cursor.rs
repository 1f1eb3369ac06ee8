//! List cursors: any cursor, under any prefix, lists user keys under that prefix only, never
//! the store's own records; and a cursor the server issued decodes to the key it names.

use serde_json::json;
use state_api::catalog::Operation;

pub(crate) fn listing(data: &[u8]) {
    let (prefix, cursor) = match data.split_first() {
        Some((n, rest)) => {
            let cut = usize::from(*n).min(rest.len());
            (crate::harness::text(&rest[..cut]), crate::harness::text(&rest[cut..]))
        }
        None => return,
    };
    let key = crate::harness::text(data);
    assert_eq!(state_core::cursor::decode("cursor", &state_core::cursor::encode(&key)).unwrap(), key);
    let api = crate::harness::api();
    for cursor in [cursor.clone(), state_core::cursor::encode(&cursor)] {
        let args = json!({"prefix": prefix, "cursor": cursor, "include_values": true, "limit": 1000});
        let reply = crate::harness::runtime().block_on(api.call(Operation::StateList, args));
        let Ok(page) = reply.body else { continue };
        for entry in page["entries"].as_array().unwrap() {
            let listed = entry["key"].as_str().unwrap();
            assert!(listed.starts_with(&prefix), "{listed:?} is not under {prefix:?}");
            assert!(!state_core::keyspace::is_system(listed), "a listing showed a system record: {listed:?}");
        }
    }
}
