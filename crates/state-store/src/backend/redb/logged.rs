//! What a log record carries: a write transaction's calls, in order. Replaying them on the
//! database as of its last durable commit redoes the batch exactly: each call reads only what
//! the calls before it left, so the same calls on the same state make the same changes.

use state_core::{Entry, Event};

use super::codec::{self, Reader};
use crate::backend::WriteTxn;
use crate::error::StorageError;

const PUT: u8 = 1;
const DELETE: u8 = 2;
const APPEND: u8 = 3;
const SET_REVISION: u8 = 4;
const CLEAR: u8 = 5;
const COMPACT: u8 = 6;

/// A write transaction's calls, encoded as they are made.
#[derive(Debug, Default)]
pub(super) struct Calls(Vec<u8>);

impl Calls {
    pub(super) fn put(&mut self, entry: &Entry, encoded: &[u8]) {
        self.0.push(PUT);
        self.bytes(entry.key.as_bytes());
        self.bytes(encoded);
    }

    pub(super) fn delete(&mut self, key: &str) {
        self.0.push(DELETE);
        self.bytes(key.as_bytes());
    }

    pub(super) fn append(&mut self, event: &Event, encoded: &[u8]) {
        self.0.push(APPEND);
        self.0.extend_from_slice(&event.revision.to_le_bytes());
        self.bytes(encoded);
    }

    pub(super) fn set_revision(&mut self, revision: u64) {
        self.0.push(SET_REVISION);
        self.0.extend_from_slice(&revision.to_le_bytes());
    }

    pub(super) fn clear(&mut self, compacted_through: u64) {
        self.0.push(CLEAR);
        self.0.extend_from_slice(&compacted_through.to_le_bytes());
    }

    pub(super) fn compact(&mut self, through: u64, limit: usize) {
        self.0.push(COMPACT);
        self.0.extend_from_slice(&through.to_le_bytes());
        self.0.extend_from_slice(&(limit as u64).to_le_bytes());
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn into_bytes(self) -> Vec<u8> {
        self.0
    }

    fn bytes(&mut self, bytes: &[u8]) {
        // Entries and events are bounded far below 4 GiB (values by the engine's limit).
        self.0.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        self.0.extend_from_slice(bytes);
    }
}

/// Makes the calls `payload` records on `txn`, in order.
pub(super) fn replay(payload: &[u8], txn: &mut dyn WriteTxn) -> Result<(), StorageError> {
    let mut r = Reader::raw(payload, "write-ahead log record");
    let text = |r: &mut Reader<'_>| {
        let bytes = r.sized()?;
        String::from_utf8(bytes.to_vec()).map_err(|_| r.corrupt("a key is not UTF-8"))
    };
    while !r.is_done() {
        match r.u8()? {
            PUT => {
                let key = text(&mut r)?;
                let entry = codec::decode_entry(&key, r.sized()?)?;
                txn.put(&entry)?;
            }
            DELETE => txn.delete(&text(&mut r)?)?,
            APPEND => {
                let revision = r.u64()?;
                txn.append(&codec::decode_event(revision, r.sized()?)?)?;
            }
            SET_REVISION => txn.set_revision(r.u64()?)?,
            CLEAR => {
                txn.clear(r.u64()?)?;
            }
            COMPACT => {
                let through = r.u64()?;
                let limit = usize::try_from(r.u64()?).unwrap_or(usize::MAX);
                txn.compact(through, limit)?;
            }
            other => return Err(r.corrupt(&format!("unknown call {other}"))),
        }
    }
    Ok(())
}
