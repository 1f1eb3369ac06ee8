//! Key rules: UTF-8, 1..=512 bytes, no control characters. Hierarchy (`a/b`, `a:b`) is a
//! naming convention only; the store sees flat, byte-ordered keys.

use crate::error::InvalidInput;
use crate::limits::{MAX_AGENT_ID_BYTES, MAX_KEY_BYTES};

pub fn validate_key(argument: &str, key: &str) -> Result<(), InvalidInput> {
    if key.is_empty() {
        return Err(InvalidInput::EmptyKey { argument: argument.to_owned(), max: MAX_KEY_BYTES });
    }
    validate_text(argument, key, MAX_KEY_BYTES)
}

/// A prefix may be empty (everything) but otherwise follows the key rules.
pub fn validate_prefix(argument: &str, prefix: &str) -> Result<(), InvalidInput> {
    validate_text(argument, prefix, MAX_KEY_BYTES)
}

/// Agent and holder ids are free text, bounded and printable like keys.
pub fn validate_agent_id(argument: &str, id: &str) -> Result<(), InvalidInput> {
    if id.is_empty() {
        return Err(InvalidInput::Malformed {
            argument: argument.to_owned(),
            message: "is empty: omit it or give a name that identifies the agent".to_owned(),
        });
    }
    validate_text(argument, id, MAX_AGENT_ID_BYTES)
}

fn validate_text(argument: &str, text: &str, max: usize) -> Result<(), InvalidInput> {
    if text.len() > max {
        return Err(InvalidInput::KeyTooLong { argument: argument.to_owned(), len: text.len(), max });
    }
    if let Some((index, c)) = text.char_indices().find(|(_, c)| c.is_control()) {
        return Err(InvalidInput::KeyControlCharacter { argument: argument.to_owned(), index, code: c as u32 });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
