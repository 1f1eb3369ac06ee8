//! Values from the command line, a file or standard input.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// Where a JSON value comes from: the argument itself, `@FILE`, or `-` / nothing for stdin.
pub(crate) fn json(argument: Option<&str>, what: &str, raw: bool) -> Result<Value> {
    let text = text(argument, what)?;
    if raw {
        return Ok(Value::String(text));
    }
    if let Some(wide) = state_core::numbers::first_wide_integer(text.as_bytes()) {
        bail!("the {what} holds {}", state_core::numbers::wide_integer_message(&wide));
    }
    serde_json::from_str(&text).with_context(|| {
        format!("the {what} is not JSON; quote a string as '\"text\"', or pass --raw to store the text as a string")
    })
}

/// Text from the argument, `@FILE`, or `-` / nothing for stdin.
pub(crate) fn text(argument: Option<&str>, what: &str) -> Result<String> {
    match argument {
        Some("-") | None => {
            if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
                bail!("no {what} given: pass it as an argument, as @FILE, or on standard input");
            }
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).with_context(|| format!("cannot read the {what} from stdin"))?;
            Ok(text)
        }
        Some(at) if at.starts_with('@') => file(Path::new(&at[1..]), what),
        Some(text) => Ok(text.to_owned()),
    }
}

pub(crate) fn file(path: &Path, what: &str) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read the {what} from {}", path.display()))
}

/// Arguments without the absent options (JSON nulls), so every operation sees only what was given.
pub(crate) fn args(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(map.into_iter().filter(|(_, v)| !v.is_null()).collect()),
        other => other,
    }
}

/// A typed request as the seam takes it: JSON, without the options left out (absent, not
/// null, so a joiner's own idempotency key still goes in).
pub(crate) fn request_args<T: serde::Serialize>(request: T) -> Result<Value, serde_json::Error> {
    Ok(args(serde_json::to_value(request)?))
}
