//! Caxton's StateTool over the seam.

use std::collections::BTreeMap;

use serde_json::json;
use state_core::InvalidInput;
use state_core::limits::MAX_TXN_OPS;
use state_core::ops::ReadStatus;
use state_core::ops::kv::{BatchGetRequest, DeleteRequest, SetRequest};
use state_core::ops::txn::{TxnOp, TxnRequest};

use super::*;
use crate::seam::{Answer, Answered, Failure, Outcome, Seam, all_keys, get, native};

fn value<E>(body: Value) -> Answered<E> {
    Ok(Answer::plain(Outcome::Ok, body))
}

pub async fn store<S: Seam>(seam: &S, a: StoreArgs, id: Option<String>) -> Answered<S::Error> {
    seam.call(native::SET, SetRequest { request_id: id, ..SetRequest::new(a.key, a.value) }).await?;
    value(Value::Null)
}

pub async fn retrieve<S: Seam>(seam: &S, a: KeyArgs, _: Option<String>) -> Answered<S::Error> {
    value(seam.call(native::GET, get(a.key)).await?.value.unwrap_or(Value::Null))
}

pub async fn delete<S: Seam>(seam: &S, a: KeyArgs, id: Option<String>) -> Answered<S::Error> {
    seam.call(native::DELETE, DeleteRequest { key: a.key, request_id: id, ..DeleteRequest::default() }).await?;
    value(Value::Null)
}

pub async fn list<S: Seam>(seam: &S, a: ListArgs, _: Option<String>) -> Answered<S::Error> {
    let keys: Vec<String> = all_keys(seam, &a.prefix).await?.into_iter().map(|e| e.key).collect();
    value(json!(keys))
}

pub async fn exists<S: Seam>(seam: &S, a: KeyArgs, _: Option<String>) -> Answered<S::Error> {
    value(json!(seam.call(native::GET, get(a.key)).await?.status == ReadStatus::Ok))
}

pub async fn batch_store<S: Seam>(seam: &S, a: BatchStoreArgs, id: Option<String>) -> Answered<S::Error> {
    if a.items.len() > MAX_TXN_OPS {
        let too_many = InvalidInput::TooMany { argument: "items".into(), len: a.items.len(), max: MAX_TXN_OPS };
        return Err(Failure::Invalid(too_many));
    }
    // The same key twice: the last value wins, as storing them one by one would do.
    let mut last: BTreeMap<String, usize> = BTreeMap::new();
    for (i, (key, _)) in a.items.iter().enumerate() {
        last.insert(key.clone(), i);
    }
    let success = a
        .items
        .into_iter()
        .enumerate()
        .filter(|(i, (key, _))| last.get(key) == Some(i))
        .map(|(_, (key, value))| TxnOp::Put { key, value, ttl_seconds: None })
        .collect();
    seam.call(native::TXN, TxnRequest { success, request_id: id, ..TxnRequest::default() }).await?;
    value(Value::Null)
}

pub async fn batch_retrieve<S: Seam>(seam: &S, a: BatchRetrieveArgs, _: Option<String>) -> Answered<S::Error> {
    if a.keys.is_empty() {
        return value(json!([]));
    }
    let got = seam.call(native::BATCH_GET, BatchGetRequest { keys: a.keys }).await?;
    value(Value::Array(got.entries.into_iter().map(|e| e.value.unwrap_or(Value::Null)).collect()))
}
