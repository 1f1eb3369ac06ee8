//! The owner's wire protocol: newline-delimited JSON over a Unix socket.
//!
//! The client speaks first with a [`Hello`]; the owner answers [`Welcome`] or [`Refused`].
//! After that the client sends [`Call`]s and the owner answers each with a [`ReplyFrame`]
//! carrying the same id, in any order (calls run concurrently).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use state_core::ops::watch::{WatchBatch, WatchRequest};

use crate::options::Options;
use crate::reply::{ApiError, Outcome, Reply};

/// Names the protocol, so a listener that is not a state owner is told apart at once.
pub(crate) const PROTOCOL: &str = "state-owner";

/// Bumped on any incompatible change to these frames. Client and owner must agree exactly.
/// Calls one connection to an owner may have running at once (a long poll counts until its
/// reply is written). A joiner never sends more (it waits for a place); past it, a call from
/// anything else is answered `unavailable` at once, the connection still read (so its pings
/// are answered) and the owner holding nothing more.
pub(crate) const MAX_CALLS_IN_FLIGHT: usize = 1024;

pub const WIRE_VERSION: u32 = 2;

/// The longest handshake frame read before deciding the peer is not a state owner.
pub(crate) const MAX_HANDSHAKE_BYTES: usize = 64 * 1024;

/// The longest call or reply frame either side reads: far above any real one (a value is at
/// most what `--max-value-bytes` allows, a page of history 16 MiB of values), so a runaway
/// peer is cut off instead of filling memory.
pub(crate) const MAX_FRAME_BYTES: usize = 256 * 1024 * 1024;

/// Engine-wide settings. The owner's apply to everyone; a joiner says what it asked for so
/// a difference can be reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Settings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_value_bytes: Option<usize>,
    /// Revisions of history kept; 0 keeps all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_retention: Option<u64>,
    /// Bytes of changes held in memory for watchers, all of them together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch_buffer_bytes: Option<usize>,
    /// The database's page cache; absent: sized from the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Hello {
    pub protocol: String,
    pub wire: u32,
    /// The joining program and its version, e.g. `state-mcp 0.1.0`.
    pub client: String,
    pub pid: u32,
    /// The database the client means; the owner refuses if it holds another.
    pub db: PathBuf,
    /// The tools this connection is served.
    pub options: Options,
    /// What the client asked for; the owner's own settings apply.
    pub settings: Settings,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Greeting {
    Welcome(Welcome),
    Refused(Refused),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Welcome {
    pub protocol: String,
    pub wire: u32,
    /// The owner's software version.
    pub version: String,
    pub pid: u32,
    pub db: PathBuf,
    pub settings: Settings,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_file: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Refused {
    pub protocol: String,
    pub wire: u32,
    pub version: String,
    pub pid: u32,
    pub message: String,
}

/// A call, or the start or end of a watch. One frame type, so a call (the common case) is read
/// without trying other shapes first.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct Call {
    pub id: u64,
    /// `Operation::id()`, e.g. `native/state_set`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub op: String,
    #[serde(default)]
    pub args: Value,
    /// The idempotency key of a mutating call: the joiner resends it with the same key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// Who the call's changes are recorded as made by: the token the joiner authenticated
    /// (the socket is the machine's own user's, so the owner takes its word, as it takes the
    /// call). Absent: a local process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// Start a watch under this id: the owner answers with `{"position": N}` (or an error),
    /// then sends its batches and, when it ends, a frame with `end`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<WatchRequest>,
    /// Stop the watch with this id.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stop: bool,
    /// With `watch`: the bytes of batches the owner may send before the client grants more
    /// (flow control, so a client whose consumer is slow holds no more than this). Absent:
    /// no limit (clients older than flow control).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<u64>,
    /// The client took this many more bytes of the watch with this id: the owner may send
    /// that much more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credit: Option<u64>,
    /// Answer once the engine's writer has taken a turn: a client that has heard nothing for a
    /// while asks whether the owner is alive and committing, or hung. (An owner older than
    /// this answers with an error, which is an answer too.)
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ping: bool,
    /// Write a consistent copy of the store to this new file (an absolute path on the owner's
    /// machine, which is the client's: the socket is private to one user). The answer is
    /// `{"revision", "bytes", "path"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<std::path::PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ReplyFrame {
    pub id: u64,
    pub outcome: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ApiError>,
    /// One revision's changes for the watch with this id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<WatchBatch>,
    /// The watch with this id has ended (with `error`, if it failed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub end: bool,
}

impl ReplyFrame {
    pub(crate) fn new(id: u64, reply: Reply) -> ReplyFrame {
        let (result, error) = match reply.body {
            Ok(value) => (Some(value), None),
            Err(error) => (None, Some(error)),
        };
        ReplyFrame { id, outcome: reply.outcome, result, error, batch: None, end: false }
    }

    pub(crate) fn into_reply(self) -> Reply {
        let body = match self.error {
            Some(error) => Err(error),
            None => Ok(self.result.unwrap_or(Value::Null)),
        };
        Reply { outcome: self.outcome, body }
    }
}

/// One frame as a line of JSON, newline included.
pub(crate) fn encode<T: Serialize>(frame: &T) -> Result<Vec<u8>, serde_json::Error> {
    let mut line = serde_json::to_vec(frame)?;
    line.push(b'\n');
    Ok(line)
}

/// Reads one line into `buf` (cleared first), up to `limit` bytes. `Ok(false)` at end of
/// stream.
pub(crate) async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<bool> {
    buf.clear();
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(!buf.is_empty());
        }
        let (taken, done) = match available.iter().position(|b| *b == b'\n') {
            Some(end) => (end + 1, true),
            None => (available.len(), false),
        };
        buf.extend_from_slice(&available[..taken]);
        reader.consume(taken);
        if done {
            return Ok(true);
        }
        if buf.len() > limit {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "frame too long"));
        }
    }
}

/// The one line an owner started by a joiner prints on stdout (`--notify-ready`): whether it
/// is listening, and if not, why.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct Readiness {
    pub ready: bool,
    /// Another process holds the database.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub held: bool,
    /// The holder's role, when it left a note ("owner", "standalone").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder_role: Option<String>,
    /// Starting again would fail the same way.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fatal: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}
