//! agentcheckpoint's tools over the seam.

use super::*;
use crate::seam::{Answer, Answered, Failure, Seam, all_keys, get, native};

/// That server reported unstorable input as a normal result with `status: error`, which its
/// users' prompts already handle.
fn legacy<S: Seam>(result: Result<Value, S::Error>) -> Answered<S::Error> {
    match result {
        Ok(value) => Answer::shaped(&value),
        Err(error) => match S::invalid(&error) {
            Some(invalid) => Answer::shaped(&self::error(invalid)),
            None => Err(Failure::Seam(error)),
        },
    }
}

pub async fn get_state<S: Seam>(seam: &S, args: GetStateArgs, _: Option<String>) -> Answered<S::Error> {
    legacy::<S>(seam.call(native::GET, get(args.key)).await.map(|r| get_response(&r)))
}

pub async fn set_state<S: Seam>(seam: &S, args: SetStateArgs, id: Option<String>) -> Answered<S::Error> {
    set(seam, args.key, &args.value, args.expected_version, id).await
}

pub async fn force_set_state<S: Seam>(seam: &S, args: ForceSetStateArgs, id: Option<String>) -> Answered<S::Error> {
    set(seam, args.key, &args.value, -1, id).await
}

async fn set<S: Seam>(seam: &S, key: String, value: &str, expected: i64, id: Option<String>) -> Answered<S::Error> {
    let value = match parse_value(value) {
        Ok(value) => value,
        Err(response) => return Answer::shaped(&response),
    };
    let request = SetRequest { request_id: id, ..set_request(key, value, expected) };
    legacy::<S>(seam.call(native::SET, request).await.map(|r| set_response(expected, &r)))
}

pub async fn list_state<S: Seam>(seam: &S, args: ListStateArgs, _: Option<String>) -> Answered<S::Error> {
    let like = LikePattern::new(&args.pattern);
    let prefix = like.scan_prefix().unwrap_or_default();
    legacy::<S>(all_keys(seam, &prefix).await.map(|entries| {
        let matched: Vec<ListedEntry> = entries.into_iter().filter(|e| like.matches(&e.key)).collect();
        list_response(&matched)
    }))
}

pub async fn delete_state<S: Seam>(seam: &S, args: DeleteStateArgs, id: Option<String>) -> Answered<S::Error> {
    let key = args.key.clone();
    let request = DeleteRequest { request_id: id, ..delete_request(args.key) };
    legacy::<S>(seam.call(native::DELETE, request).await.map(|_| delete_response(&key)))
}
