//! A mutating request's idempotency key: what kind of request it is, the id it may carry,
//! and a fingerprint that tells a retry from another request reusing the id. Part of the data
//! model every request type shares; the records that make retries answer alike are
//! in the idempotency module.

use serde::Serialize;

use crate::error::InvalidInput;

/// Longest accepted `request_id`, in bytes.
pub const MAX_REQUEST_ID_BYTES: usize = 128;

/// A mutating request type: what kind of request it is, and the id it may carry.
pub trait Mutating: Serialize {
    /// Names the request kind in its record, so an id reused for another kind is caught.
    const KIND: &'static str;

    fn request_id(&self) -> Option<&str>;
}

/// What the store needs to recognise a retry: the id, and a fingerprint of the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Once {
    pub request_id: String,
    pub kind: &'static str,
    pub fingerprint: u64,
}

impl Once {
    /// The idempotency key of `request`, if it carries one, validated.
    pub fn of<R: Mutating>(request: &R) -> Result<Option<Once>, InvalidInput> {
        let Some(id) = request.request_id() else { return Ok(None) };
        validate_request_id(id)?;
        Ok(Some(Once { request_id: id.to_owned(), kind: R::KIND, fingerprint: fingerprint(R::KIND, request) }))
    }
}

/// Marks a request id scoped to one caller: `~<16 hex digits>~<the caller's own id>`.
const SCOPE_MARK: char = '~';

/// `id` as stored for the caller named `scope` (a token's name): callers with different tokens
/// never share an id, so no tenant can replay, block or probe another's requests. Callers with
/// full access (no token) use ids as given.
pub fn scoped(scope: &str, id: &str) -> String {
    let tag = scope
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3));
    format!("{SCOPE_MARK}{tag:016x}{SCOPE_MARK}{id}")
}

/// The caller's own part of a (possibly) scoped id: what the caller sent, and should resend.
pub fn unscoped(id: &str) -> &str {
    let mut chars = id.char_indices();
    match chars.next() {
        Some((_, SCOPE_MARK)) => {}
        _ => return id,
    }
    let tag_end = 1 + 16;
    let is_scope = id.len() > tag_end
        && id.as_bytes()[1..tag_end].iter().all(u8::is_ascii_hexdigit)
        && id[tag_end..].starts_with(SCOPE_MARK);
    if is_scope { &id[tag_end + 1..] } else { id }
}

pub fn validate_request_id(id: &str) -> Result<(), InvalidInput> {
    // A scoped id is checked by the part its caller chose.
    let own = unscoped(id);
    if own.is_empty() {
        return Err(InvalidInput::Malformed {
            argument: "request_id".into(),
            message: "is empty: omit it, or give an id unique to this request (a UUID, say)".into(),
        });
    }
    if own.len() > MAX_REQUEST_ID_BYTES {
        return Err(InvalidInput::KeyTooLong {
            argument: "request_id".into(),
            len: own.len(),
            max: MAX_REQUEST_ID_BYTES,
        });
    }
    if let Some((index, c)) = own.char_indices().find(|(_, c)| c.is_control()) {
        return Err(InvalidInput::KeyControlCharacter { argument: "request_id".into(), index, code: c as u32 });
    }
    Ok(())
}

/// FNV-1a over the request's JSON form. Not a security measure: it only has to tell a retry
/// (byte-identical arguments) from a different request that reused the id by mistake.
pub fn fingerprint<R: Serialize>(kind: &str, request: &R) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let json = serde_json::to_vec(request).unwrap_or_default();
    kind.as_bytes()
        .iter()
        .chain([0u8].iter())
        .chain(json.iter())
        .fold(OFFSET, |hash, byte| (hash ^ u64::from(*byte)).wrapping_mul(PRIME))
}

/// Implements [`Mutating`] for request types with a `request_id` field.
macro_rules! mutating {
    ($($request:ty => $kind:literal),* $(,)?) => {
        $(impl $crate::ops::once::Mutating for $request {
            const KIND: &'static str = $kind;
            fn request_id(&self) -> Option<&str> {
                self.request_id.as_deref()
            }
        })*
    };
}
pub(crate) use mutating;
