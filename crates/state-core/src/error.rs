//! Input errors. Every message names the argument at fault and says how to fix it, because
//! the reader is often a language model deciding what to send next.

/// A request that cannot be executed as given. Nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidInput {
    #[error("`{argument}` is empty: give a key of 1 to {max} bytes, such as `project/x/status`")]
    EmptyKey { argument: String, max: usize },
    #[error(
        "`{argument}` is {len} bytes long, over the {max}-byte key limit: shorten it (for example, hash the long part)"
    )]
    KeyTooLong { argument: String, len: usize, max: usize },
    #[error("`{argument}` contains the control character U+{code:04X} at byte {index}: keys must be printable text")]
    KeyControlCharacter { argument: String, index: usize, code: u32 },
    #[error(
        "`{argument}` is {len} bytes as JSON, over the {max}-byte value limit: split it across several keys or store a reference to it"
    )]
    ValueTooLarge { argument: String, len: usize, max: usize },
    #[error("`{argument}` has {len} items, over the limit of {max}: split the request")]
    TooMany { argument: String, len: usize, max: usize },
    #[error("`{argument}` {message}")]
    OutOfRange { argument: &'static str, message: String },
    #[error("`{argument}`: {message}")]
    Malformed { argument: String, message: String },
    #[error("give either `{first}` or `{second}`, not both")]
    MutuallyExclusive { first: &'static str, second: &'static str },
    #[error("`{argument}` writes key `{key}` more than once in one transaction: merge those operations into one")]
    DuplicateWrite { argument: String, key: String },
}

impl InvalidInput {
    /// The name of the argument at fault, for frontends that report it separately.
    pub fn argument(&self) -> String {
        match self {
            InvalidInput::EmptyKey { argument, .. }
            | InvalidInput::KeyTooLong { argument, .. }
            | InvalidInput::KeyControlCharacter { argument, .. }
            | InvalidInput::ValueTooLarge { argument, .. }
            | InvalidInput::TooMany { argument, .. }
            | InvalidInput::Malformed { argument, .. }
            | InvalidInput::DuplicateWrite { argument, .. } => argument.clone(),
            InvalidInput::OutOfRange { argument, .. } => (*argument).to_owned(),
            InvalidInput::MutuallyExclusive { first, second } => format!("{first}/{second}"),
        }
    }
}
