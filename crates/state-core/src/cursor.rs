//! Opaque page cursors. A cursor encodes the last key of a page; clients must not build one.

use crate::error::InvalidInput;

const TAG: char = 'k';

pub fn encode(last_key: &str) -> String {
    let mut out = String::with_capacity(1 + last_key.len() * 2);
    out.push(TAG);
    for byte in last_key.bytes() {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

pub fn decode(argument: &str, cursor: &str) -> Result<String, InvalidInput> {
    let invalid = || InvalidInput::Malformed {
        argument: argument.to_owned(),
        message: "is not a cursor this server issued: pass `next_cursor` from the previous page unchanged".into(),
    };
    let hex = cursor.strip_prefix(TAG).ok_or_else(invalid)?;
    if hex.len() % 2 != 0 {
        return Err(invalid());
    }
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| hex.get(i..i + 2).and_then(|pair| u8::from_str_radix(pair, 16).ok()))
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(invalid)?;
    String::from_utf8(bytes).map_err(|_| invalid())
}
