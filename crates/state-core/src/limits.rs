//! Size limits. They are part of the contract with clients, so they live with the rules.

use serde_json::Value;

use crate::error::InvalidInput;

/// Longest key in bytes (UTF-8).
pub const MAX_KEY_BYTES: usize = 512;
/// Longest agent id / holder id in bytes.
pub const MAX_AGENT_ID_BYTES: usize = 256;
/// Default limit on one value, serialized as compact JSON.
pub const DEFAULT_MAX_VALUE_BYTES: usize = 1024 * 1024;
/// Compares, and operations per branch, in one transaction (etcd's default too).
pub const MAX_TXN_OPS: usize = 128;
/// Keys in one batch read.
pub const MAX_BATCH_KEYS: usize = 1000;
/// Largest page of a listing or of history.
pub const MAX_PAGE: usize = 1000;
/// Values one page of history or of a listing carries, at most (past one item): a thousand
/// large values would otherwise make one answer of a gigabyte. The page says there is more.
pub const MAX_PAGE_VALUE_BYTES: usize = 16 * 1024 * 1024;

/// The limits an engine enforces; the value limit is configurable per deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_value_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_value_bytes: DEFAULT_MAX_VALUE_BYTES }
    }
}

impl Limits {
    /// Rejects a value whose compact JSON form exceeds the limit. Returns the encoded size.
    pub fn check_value(&self, argument: impl Into<String>, value: &Value) -> Result<usize, InvalidInput> {
        let len = json_len(value);
        if len > self.max_value_bytes {
            return Err(InvalidInput::ValueTooLarge { argument: argument.into(), len, max: self.max_value_bytes });
        }
        Ok(len)
    }
}

/// Length of the compact JSON encoding, computed without allocating the text.
pub fn json_len(value: &Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing a `Value` into an infallible sink cannot fail.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

pub fn check_count(argument: &str, len: usize, max: usize) -> Result<(), InvalidInput> {
    if len > max {
        return Err(InvalidInput::TooMany { argument: argument.to_owned(), len, max });
    }
    Ok(())
}

/// A text argument of at most `max` bytes.
pub fn check_text(argument: &str, text: &str, max: usize) -> Result<(), InvalidInput> {
    if text.len() > max {
        return Err(InvalidInput::ValueTooLarge { argument: argument.to_owned(), len: text.len(), max });
    }
    Ok(())
}
