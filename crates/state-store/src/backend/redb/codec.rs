//! Byte layout of entries and events in redb. A leading format byte lets later versions
//! change the layout without guessing.
//!
//! entry: format, version, create_revision, mod_revision, updated_at, flags,
//!        [expires_at], [agent_id], value JSON (rest)
//! event: format, kind, version, time, flags, [action], [agent_id], [by], key, [value JSON (rest)]
//!
//! An event that names who made it (`by`) is written as format 2, so a build that predates
//! `by` refuses it cleanly instead of misreading it; every other record stays format 1.
//! Integers are little-endian u64; strings are a u16 length plus UTF-8.

use serde_json::Value;
use state_core::{Action, Entry, Event, EventKind, UnixMillis};

use crate::error::StorageError;

const FORMAT: u8 = 1;
const HAS_EXPIRY: u8 = 1;
const HAS_AGENT: u8 = 2;
const HAS_VALUE: u8 = 4;
const HAS_ACTION: u8 = 8;
const HAS_BY: u8 = 16;
/// The format of an event with `by`.
const FORMAT_WITH_BY: u8 = 2;

pub(super) fn encode_entry(entry: &Entry) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + entry.key.len());
    out.push(FORMAT);
    for n in [entry.version, entry.create_revision, entry.mod_revision, entry.updated_at.0] {
        out.extend_from_slice(&n.to_le_bytes());
    }
    let flags = flag(entry.expires_at.is_some(), HAS_EXPIRY) | flag(entry.agent_id.is_some(), HAS_AGENT);
    out.push(flags);
    if let Some(at) = entry.expires_at {
        out.extend_from_slice(&at.0.to_le_bytes());
    }
    if let Some(agent) = &entry.agent_id {
        put_str(&mut out, agent);
    }
    put_json(&mut out, &entry.value);
    out
}

pub(super) fn decode_entry(key: &str, bytes: &[u8]) -> Result<Entry, StorageError> {
    let mut r = Reader::new(bytes, key)?;
    let version = r.u64()?;
    let create_revision = r.u64()?;
    let mod_revision = r.u64()?;
    let updated_at = UnixMillis(r.u64()?);
    let flags = r.u8()?;
    let expires_at = if flags & HAS_EXPIRY != 0 { Some(UnixMillis(r.u64()?)) } else { None };
    let agent_id = if flags & HAS_AGENT != 0 { Some(r.string()?) } else { None };
    let value = r.json()?;
    Ok(Entry { key: key.to_owned(), value, version, create_revision, mod_revision, updated_at, expires_at, agent_id })
}

/// Reads only when an encoded entry expires: replacing or deleting an entry needs its old
/// expiry to keep the expiry index right, not its value.
pub(super) fn entry_expiry(key: &str, bytes: &[u8]) -> Result<Option<UnixMillis>, StorageError> {
    let mut r = Reader::new(bytes, key)?;
    r.skip(4 * 8)?;
    let flags = r.u8()?;
    Ok(if flags & HAS_EXPIRY != 0 { Some(UnixMillis(r.u64()?)) } else { None })
}

pub(super) fn encode_event(event: &Event) -> Vec<u8> {
    let mut out = Vec::with_capacity(48 + event.key.len());
    out.push(if event.by.is_some() { FORMAT_WITH_BY } else { FORMAT });
    out.push(event.kind.code());
    out.extend_from_slice(&event.version.to_le_bytes());
    out.extend_from_slice(&event.time.0.to_le_bytes());
    out.push(
        flag(event.agent_id.is_some(), HAS_AGENT)
            | flag(event.value.is_some(), HAS_VALUE)
            | flag(event.action.is_some(), HAS_ACTION)
            | flag(event.by.is_some(), HAS_BY),
    );
    if let Some(action) = event.action {
        out.push(action.code());
    }
    if let Some(agent) = &event.agent_id {
        put_str(&mut out, agent);
    }
    if let Some(by) = &event.by {
        put_str(&mut out, by);
    }
    put_str(&mut out, &event.key);
    if let Some(value) = &event.value {
        put_json(&mut out, value);
    }
    out
}

pub(super) fn decode_event(revision: u64, bytes: &[u8]) -> Result<Event, StorageError> {
    let mut r = Reader::new_event(bytes)?;
    let code = r.u8()?;
    let kind = EventKind::from_code(code).ok_or_else(|| r.corrupt(&format!("unknown event kind {code}")))?;
    let version = r.u64()?;
    let time = UnixMillis(r.u64()?);
    let flags = r.u8()?;
    let action = if flags & HAS_ACTION != 0 {
        let code = r.u8()?;
        Some(Action::from_code(code).ok_or_else(|| r.corrupt(&format!("unknown action {code}")))?)
    } else {
        None
    };
    let agent_id = if flags & HAS_AGENT != 0 { Some(r.string()?) } else { None };
    let by = if flags & HAS_BY != 0 { Some(r.string()?) } else { None };
    let key = r.string()?;
    let value = if flags & HAS_VALUE != 0 { Some(r.json()?) } else { None };
    Ok(Event { revision, key, kind, action, version, agent_id, time, value, by })
}

/// Reads only the key of an encoded event, for index maintenance during compaction.
pub(super) fn event_key(bytes: &[u8]) -> Result<String, StorageError> {
    let mut r = Reader::new_event(bytes)?;
    r.skip(1 + 8 + 8)?;
    let flags = r.u8()?;
    if flags & HAS_ACTION != 0 {
        r.skip(1)?;
    }
    if flags & HAS_AGENT != 0 {
        r.string()?;
    }
    if flags & HAS_BY != 0 {
        r.string()?;
    }
    r.string()
}

fn flag(set: bool, bit: u8) -> u8 {
    if set { bit } else { 0 }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    // Keys and agent ids are validated to at most 512 bytes, far below u16::MAX.
    let len = u16::try_from(s.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&s.as_bytes()[..usize::from(len)]);
}

fn put_json(out: &mut Vec<u8>, value: &Value) {
    // Serializing a `Value` into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, value);
}

/// Reads the byte layouts of this backend (here, and the log's records in `logged.rs`).
pub(super) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    what: &'a str,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], what: &'a str) -> Result<Reader<'a>, StorageError> {
        let mut r = Reader::raw(bytes, what);
        match r.u8()? {
            FORMAT => Ok(r),
            other => Err(r.corrupt(&format!("unknown record format {other}"))),
        }
    }

    /// A reader of an event, of either format.
    fn new_event(bytes: &'a [u8]) -> Result<Reader<'a>, StorageError> {
        let mut r = Reader::raw(bytes, "history event");
        match r.u8()? {
            FORMAT | FORMAT_WITH_BY => Ok(r),
            other => Err(r.corrupt(&format!("unknown record format {other}"))),
        }
    }

    /// A reader of bytes without the format byte, naming them `what` in errors.
    pub(super) fn raw(bytes: &'a [u8], what: &'a str) -> Reader<'a> {
        Reader { bytes, at: 0, what }
    }

    /// Whether every byte has been read.
    pub(super) fn is_done(&self) -> bool {
        self.at >= self.bytes.len()
    }

    pub(super) fn corrupt(&self, problem: &str) -> StorageError {
        StorageError::Corrupt(format!("{} at byte {}: {problem}", self.what, self.at))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], StorageError> {
        let end = self.at.checked_add(n).filter(|end| *end <= self.bytes.len());
        let end = end.ok_or_else(|| self.corrupt("record is truncated"))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn skip(&mut self, n: usize) -> Result<(), StorageError> {
        self.take(n).map(|_| ())
    }

    pub(super) fn u8(&mut self) -> Result<u8, StorageError> {
        Ok(self.take(1)?[0])
    }

    pub(super) fn u64(&mut self) -> Result<u64, StorageError> {
        let mut buf = [0u8; 8];
        buf.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(buf))
    }

    fn string(&mut self) -> Result<String, StorageError> {
        let mut len = [0u8; 2];
        len.copy_from_slice(self.take(2)?);
        let bytes = self.take(usize::from(u16::from_le_bytes(len)))?;
        String::from_utf8(bytes.to_vec()).map_err(|_| self.corrupt("string is not UTF-8"))
    }

    /// A byte string with a u32 length before it.
    pub(super) fn sized(&mut self) -> Result<&'a [u8], StorageError> {
        let mut len = [0u8; 4];
        len.copy_from_slice(self.take(4)?);
        self.take(u32::from_le_bytes(len) as usize)
    }

    fn json(&mut self) -> Result<Value, StorageError> {
        let rest = &self.bytes[self.at..];
        self.at = self.bytes.len();
        serde_json::from_slice(rest).map_err(|e| self.corrupt(&format!("value is not JSON: {e}")))
    }
}

#[cfg(test)]
mod tests;
