//! Who may call what: bearer tokens scoped to id prefixes and rights.
//!
//! A tokens file names each token, its secret, the prefixes it covers and its rights. Every
//! call made for a principal is checked here, before it runs, against what it touches: keys,
//! lease resources, session ids and workflow run names must lie under one of the token's
//! prefixes with the right the call needs. Frontends authenticate (find the principal for a
//! bearer token); the rule of what a principal may do lives here, once, for every frontend.
//!
//! - `read`: reads (get, list, history, status, restore) of ids under the prefixes;
//! - `write`: reads and changes of them;
//! - `admin`: everything, and store-wide operations (`state_reset`) when the prefix is "".

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::catalog::{Needs, Operation};
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use state_core::ops::history::HistoryKind;
use state_core::ops::txn::{TxnOp, TxnRequest};
use state_core::ops::watch::WatchRequest;
use state_core::ops::workflow::ClaimRequest;
use state_core::rate::Rate;

use crate::reply::{ApiError, ErrorCode};

mod grants;
mod quota;
mod storage;
pub use grants::{GrantEntry, Grants, Identity, OAUTH_NAME_PREFIX};
pub use quota::{QuotaFigures, WriteQuota};
pub(crate) use storage::StorageEffect;
pub use storage::{StorageLimits, StorageQuota, StorageUsage};

/// Shortest secret accepted: a guessable token protects nothing.
const MIN_SECRET_BYTES: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Right {
    Read,
    Write,
    Admin,
}

/// An authenticated caller: a token's name and what it may touch. Never holds the secret.
#[derive(Debug, Clone)]
pub struct Principal {
    pub name: String,
    prefixes: Vec<String>,
    /// The strongest right granted (rights are ordered: admin includes write includes read).
    right: Right,
    /// Writes per second, shared by every request made as this token.
    write_quota: Option<Arc<WriteQuota>>,
    /// Keys and bytes under its prefixes, shared likewise.
    storage_quota: Option<Arc<StorageQuota>>,
}

/// Who makes a call, always stated: there is no "unknown, so everything" caller.
#[derive(Debug, Clone, PartialEq)]
pub enum Caller {
    /// A process of the same OS user on this machine (a stdio server, `statectl`, a server
    /// serving loopback without tokens): every right, as the database file's owner has.
    LocalUser,
    /// A token, with what its entry grants and nothing more.
    Token(Principal),
}

impl Caller {
    /// An HTTP request that reached a handler without an authenticated caller (a path that
    /// needs none, or a bug): a token that covers nothing, so every call it makes is refused.
    pub fn nobody() -> Caller {
        Caller::Token(Principal {
            name: "unauthenticated".into(),
            prefixes: Vec::new(),
            right: Right::Read,
            write_quota: None,
            storage_quota: None,
        })
    }

    /// The token, for a caller that has one.
    pub fn token(&self) -> Option<&Principal> {
        match self {
            Caller::LocalUser => None,
            Caller::Token(principal) => Some(principal),
        }
    }
}

/// Two principals are the same token: name, scope and quota (its use so far aside).
impl PartialEq for Principal {
    fn eq(&self, other: &Principal) -> bool {
        let rate =
            |p: &Principal| p.write_quota.as_ref().map(|q| (q.figures().writes_per_second, q.figures().write_burst));
        let storage = |p: &Principal| p.storage_quota.as_ref().map(|q| q.limits());
        self.name == other.name
            && self.prefixes == other.prefixes
            && self.right == other.right
            && rate(self) == rate(other)
            && storage(self) == storage(other)
    }
}

impl Principal {
    /// The token's write quota, if it has one.
    pub fn write_quota(&self) -> Option<&WriteQuota> {
        self.write_quota.as_deref()
    }

    /// The token's storage quota, if it has one.
    pub fn storage_quota(&self) -> Option<&Arc<StorageQuota>> {
        self.storage_quota.as_ref()
    }

    /// Takes one write from the token's quota, holding a write that came back before its
    /// refusal said it could (see `auth/quota.rs`), or refuses the call.
    pub(crate) async fn take_write_in_turn(&self) -> Result<(), ApiError> {
        match &self.write_quota {
            Some(quota) => quota.take_in_turn(&self.name).await,
            None => Ok(()),
        }
    }

    /// Takes one write from the token's quota, or refuses the call, never holding it.
    #[cfg(test)]
    pub(crate) fn take_write(&self) -> Result<(), ApiError> {
        match &self.write_quota {
            Some(quota) => quota.take(&self.name),
            None => Ok(()),
        }
    }

    /// The id prefixes the token reaches ("" is everything): where a listing of everything
    /// this caller may see starts.
    pub fn prefixes(&self) -> &[String] {
        &self.prefixes
    }

    /// Whether the token may at least read id `id`: whether it may know the id exists.
    pub(crate) fn sees(&self, id: &str) -> bool {
        self.covers(id, Right::Read)
    }

    /// Whether the token covers id `id` with `right`.
    fn covers(&self, id: &str, right: Right) -> bool {
        self.right >= right && self.prefixes.iter().any(|p| id.starts_with(p.as_str()))
    }

    /// Whether every id under `prefix` is covered: `prefix` lies inside a granted prefix.
    fn covers_prefix(&self, prefix: &str, right: Right) -> bool {
        self.covers(prefix, right)
    }

    /// Whether the token may read everything: store-wide figures (key counts, the owner's
    /// process, metrics) are for such tokens only.
    pub fn reads_whole_store(&self) -> bool {
        self.covers_prefix("", Right::Read)
    }

    /// The strongest right the token grants.
    pub fn right(&self) -> Right {
        self.right
    }

    /// The prefixes, for messages.
    fn scope(&self) -> String {
        self.prefixes.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join(", ")
    }
}

/// The tokens of a tokens file, looked up by secret in constant time.
#[derive(Debug, Clone)]
pub struct Tokens {
    entries: Vec<(Principal, [u8; 32])>,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokensError {
    #[error("cannot read the tokens file {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("tokens file {}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    token: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    /// The bearer token itself.
    #[serde(default)]
    secret: Option<String>,
    /// Or its SHA-256, in hex, so the file need not hold the secret.
    #[serde(default)]
    secret_sha256: Option<String>,
    prefixes: Vec<String>,
    rights: Vec<Right>,
    /// Changes per second this token may make (every frontend together); no limit without.
    #[serde(default)]
    writes_per_second: Option<f64>,
    /// Changes it may make at once after a quiet spell (default: one second's worth).
    #[serde(default)]
    write_burst: Option<f64>,
    /// Most live keys under its prefixes; no limit without.
    #[serde(default)]
    max_keys: Option<u64>,
    /// Most bytes (ids and values of keys and named records) under its prefixes.
    #[serde(default)]
    max_bytes: Option<u64>,
}

impl Tokens {
    pub fn load(path: &Path) -> Result<Tokens, TokensError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokensError::Read { path: path.into(), source })?;
        Tokens::parse(&text).map_err(|message| TokensError::Invalid { path: path.into(), message })
    }

    /// Parses a tokens file (TOML); see docs/http.md for the format.
    pub fn parse(text: &str) -> Result<Tokens, String> {
        let file: File = parse_secret_toml(text)?;
        if file.token.is_empty() {
            return Err("defines no [[token]]".into());
        }
        let mut entries = Vec::new();
        for entry in file.token {
            let name = entry.name;
            let digest = match (entry.secret, entry.secret_sha256) {
                (Some(secret), None) if secret.len() >= MIN_SECRET_BYTES => sha256(secret.as_bytes()),
                (Some(_), None) => {
                    return Err(format!("token `{name}`: the secret is shorter than {MIN_SECRET_BYTES} bytes"));
                }
                (None, Some(hex)) => parse_digest(&hex).ok_or_else(|| {
                    format!("token `{name}`: secret_sha256 must be 64 hex digits (`sha256sum` of the secret)")
                })?,
                _ => return Err(format!("token `{name}`: give exactly one of `secret` and `secret_sha256`")),
            };
            if name.starts_with(OAUTH_NAME_PREFIX) {
                return Err(format!(
                    "token `{name}`: names starting with `{OAUTH_NAME_PREFIX}` are those of identity-provider subjects"
                ));
            }
            if entries.iter().any(|(p, _): &(Principal, _)| p.name == name) {
                return Err(format!("token name `{name}` is used twice"));
            }
            if entries.iter().any(|(_, d)| *d == digest) {
                return Err(format!("token `{name}` has the same secret as another token"));
            }
            let Some(right) = entry.rights.iter().copied().max() else {
                return Err(format!("token `{name}`: rights is empty; give read, write or admin"));
            };
            if entry.prefixes.is_empty() {
                return Err(format!("token `{name}`: prefixes is empty; \"\" covers everything"));
            }
            let rate = rate_of(&format!("token `{name}`"), entry.writes_per_second, entry.write_burst)?;
            let write_quota = rate.map(|rate| Arc::new(WriteQuota::new(rate)));
            let storage_quota = StorageLimits::of(&format!("token `{name}`"), entry.max_keys, entry.max_bytes)?
                .map(|limits| Arc::new(StorageQuota::new(limits)));
            entries.push((Principal { name, prefixes: entry.prefixes, right, write_quota, storage_quota }, digest));
        }
        Ok(Tokens { entries })
    }

    /// Gives every token without a write quota of its own `rate` (`--writes-per-second-per-token`).
    pub fn with_default_write_rate(mut self, rate: Rate) -> Result<Tokens, String> {
        rate.check()?;
        for (principal, _) in &mut self.entries {
            principal.write_quota.get_or_insert_with(|| Arc::new(WriteQuota::new(rate)));
        }
        Ok(self)
    }

    /// Every token's name and storage quota, for `/metrics`.
    pub fn storage_quotas(&self) -> impl Iterator<Item = (&str, &StorageQuota)> {
        self.entries.iter().filter_map(|(p, _)| p.storage_quota.as_deref().map(|q| (p.name.as_str(), q)))
    }

    /// Every token's name and write quota, for `/metrics`.
    pub fn write_quotas(&self) -> impl Iterator<Item = (&str, &WriteQuota)> {
        self.entries.iter().filter_map(|(p, _)| p.write_quota.as_deref().map(|q| (p.name.as_str(), q)))
    }

    /// The principal whose secret is `presented`. Every entry is compared, each in constant
    /// time, so the time taken says nothing about which secret came close.
    pub fn authenticate(&self, presented: &str) -> Option<&Principal> {
        let digest = sha256(presented.as_bytes());
        let mut found = None;
        for (principal, expected) in &self.entries {
            if constant_time_eq(&digest, expected) {
                found = Some(principal);
            }
        }
        found
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The write quota an entry (`what`) states, checked.
fn rate_of(what: &str, per_second: Option<f64>, burst: Option<f64>) -> Result<Option<Rate>, String> {
    match (per_second, burst) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err(format!("{what}: write_burst needs writes_per_second")),
        (Some(per_second), burst) => {
            let rate = Rate { burst: burst.unwrap_or(Rate::per_second(per_second).burst), per_second };
            rate.check().map_err(|why| format!("{what}: {why}"))?;
            Ok(Some(rate))
        }
    }
}

/// Parses a TOML file that may hold secrets (a tokens file, an OAuth client's): an error says
/// where and why, never quoting the file.
pub fn parse_secret_toml<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    toml::from_str(text).map_err(|e| describe_toml_error(text, &e))
}

/// Where a tokens file is malformed and why, without quoting it: the line at fault may hold a
/// secret, and startup errors end up in logs.
fn describe_toml_error(text: &str, error: &toml::de::Error) -> String {
    let line = error.span().map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
    let message = match unknown_field(error.message().trim()) {
        // A misspelt field's name is the file's structure, not a value: say which it is.
        Some(field) => {
            // The schema's own closing clause only, as `redact_strings` keeps it.
            let message = error.message().trim();
            let expected = message.rfind(", expected ").map(|at| redact_strings(&message[at..])).unwrap_or_default();
            format!("unknown field `{field}`{}", expected.trim_start_matches('…'))
        }
        None => redact_strings(error.message().trim()),
    };
    match line {
        Some(line) => format!("line {line}: {message}"),
        None => message,
    }
}

/// The field an "unknown field" error names, when it looks like a field name (a short word of
/// letters, digits, `_` and `-`): never a value that could be a secret in the wrong place.
fn unknown_field(message: &str) -> Option<&str> {
    let name = message.strip_prefix("unknown field `")?.split('`').next()?;
    let plain = !name.is_empty() && name.len() <= 40;
    (plain && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')).then_some(name)
}

/// `message` with nothing of the file's own text left in it. serde names a wrong value by
/// quoting it, unescaped, and that value can be a secret pasted in the wrong place, quotes
/// and all; so a quoted part is kept only when it is a word of the file's own format, and
/// everything from the first other quote on is dropped, save the schema's closing
/// ", expected …" clause when it is made of nothing but the format's words.
fn redact_strings(message: &str) -> String {
    const EXPECTED: &str = ", expected ";
    let (head, tail) = match message.rfind(EXPECTED) {
        Some(at) => message.split_at(at),
        None => (message, ""),
    };
    let (mut out, cut) = keep_format_words(head);
    if cut {
        out.push('…');
    }
    let (tail_kept, tail_cut) = keep_format_words(tail);
    let tail_is_schema = !tail_cut
        && tail_kept[EXPECTED.len().min(tail_kept.len())..]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ' ' | ',' | '_' | '`'));
    if tail_is_schema {
        out.push_str(&tail_kept);
    }
    out
}

/// The longest start of `text` whose quoted parts are all words of the tokens file's format,
/// and whether anything was cut after it.
fn keep_format_words(text: &str) -> (String, bool) {
    const WORDS: [&str; 13] = [
        "token",
        "name",
        "secret",
        "secret_sha256",
        "prefixes",
        "rights",
        "read",
        "write",
        "admin",
        "writes_per_second",
        "write_burst",
        "max_keys",
        "max_bytes",
    ];
    let mut kept = 0;
    let mut rest = text;
    while let Some(start) = rest.find(['"', '`']) {
        let quote = rest.as_bytes()[start] as char;
        let inner = &rest[start + 1..];
        let word = inner.find(quote).map(|end| &inner[..end]);
        match word {
            Some(word) if quote == '`' && WORDS.contains(&word) => {
                let taken = start + 1 + word.len() + 1;
                kept += taken;
                rest = &rest[taken..];
            }
            _ => return (text[..kept + start + 1].to_owned(), true),
        }
    }
    (text.to_owned(), false)
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

fn parse_digest(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 {
        return None;
    }
    let mut digest = [0u8; 32];
    for (i, byte) in digest.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(digest)
}

fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// What a call touches, and with which right.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Need {
    /// One id (key, lease resource, session id, run name).
    Id(String, Right),
    /// Every id under a prefix (listings, history by prefix).
    Prefix(String, Right),
    /// A run by id: its name decides, so it is looked up first.
    Run(String, Right),
    /// Calls that touch no id of anyone's: health.
    Nothing,
}

/// What `op` with `args` touches, as its declaration in the catalog says. Arguments that do
/// not parse yield no needs: the call then fails on its arguments without touching anything.
/// What a call needs its token to cover, read off its typed request: arguments that do not
/// parse are refused here, before anything is authorized or run (never taken to need nothing).
pub(crate) fn needs(op: Operation, args: &Value) -> Result<Vec<Need>, ApiError> {
    let whole_store = |right| vec![Need::Prefix(String::new(), right)];
    match op.spec().needs() {
        Needs::Typed(rule) => rule(args).map_err(|message| {
            ApiError::new(ErrorCode::InvalidArguments, format!("invalid arguments for `{}`: {message}", op.name()))
        }),
        Needs::WholeStore => Ok(whole_store(if op.is_mutating() { Right::Write } else { Right::Read })),
        Needs::WholeStoreAdmin => Ok(whole_store(Right::Admin)),
    }
}

/// A write guarded by a lease also reads the lease.
pub(crate) fn fenced(lease: &Option<String>) -> Vec<Need> {
    lease.iter().map(|l| Need::Id(l.clone(), Right::Read)).collect()
}

/// A transaction reads what it compares and gets, and writes what it puts and deletes.
pub(crate) fn txn_needs(request: &TxnRequest) -> Vec<Need> {
    let compares = request.compare.iter().map(|c| Need::Id(c.key.clone(), Right::Read));
    let ops = request.success.iter().chain(&request.failure).map(|op| match op {
        TxnOp::Get { key } => Need::Id(key.clone(), Right::Read),
        other => Need::Id(other.key().to_owned(), Right::Write),
    });
    compares.chain(ops).chain(fenced(&request.lease)).collect()
}

/// A claim of one run is checked by its name; of the next run of a name, by that name; of any
/// run at all, against the whole store.
pub(crate) fn claim_needs(request: &ClaimRequest) -> Vec<Need> {
    match (&request.run_id, &request.name) {
        (Some(run), _) => vec![Need::Run(run.clone(), Right::Write)],
        (None, Some(name)) => vec![Need::Id(name.clone(), Right::Write)],
        (None, None) => vec![Need::Prefix(String::new(), Right::Write)],
    }
}

/// Runs listed by name: one name's runs, or (no name) everyone's.
pub(crate) fn runs_named(name: Option<String>) -> Need {
    match name {
        Some(name) => Need::Id(name, Right::Read),
        None => Need::Prefix(String::new(), Right::Read),
    }
}

/// History (and a watch of it) is checked by the ids it names. One run's history is checked
/// by the run's name; runs by id prefix, and store history, belong to no one, so they need
/// the whole store.
/// What a watch reads: as history of the same selection.
pub(crate) fn watch_needs(request: &WatchRequest) -> Vec<Need> {
    history_needs(request.kind, request.key.clone(), request.prefix.clone())
}

pub(crate) fn history_needs(kind: Option<HistoryKind>, key: Option<String>, prefix: Option<String>) -> Vec<Need> {
    let by_id = matches!(
        kind,
        None | Some(
            HistoryKind::Kv
                | HistoryKind::Lease
                | HistoryKind::Semaphore
                | HistoryKind::Reservation
                | HistoryKind::Queue
                | HistoryKind::Session
        )
    );
    match (key, prefix) {
        (Some(key), _) if by_id => vec![Need::Id(key, Right::Read)],
        (Some(run_id), _) if kind == Some(HistoryKind::Workflow) => vec![Need::Run(run_id, Right::Read)],
        (None, Some(prefix)) if by_id => vec![Need::Prefix(prefix, Right::Read)],
        _ => vec![Need::Prefix(String::new(), Right::Read)],
    }
}

/// What `principal` may see of `op`'s result: health without the store-wide figures (how
/// many keys everyone has, the database's size, the owner's process) unless the token reads
/// the whole store.
pub(crate) fn redact(principal: &Principal, op: Operation, mut result: Value) -> Value {
    if op == Operation::StateHealth
        && !principal.reads_whole_store()
        && let Some(fields) = result.as_object_mut()
    {
        for store_wide in ["keys", "database_bytes", "owner", "writes", "watchers", "replicas"] {
            fields.remove(store_wide);
        }
    }
    result
}

/// `state_health` answered to a token with a quota says where it stands against it.
pub(crate) fn with_quota(principal: &Principal, op: Operation, mut result: Value) -> Value {
    if op == Operation::StateHealth
        && let (Some(quota), Some(fields)) = (principal.write_quota(), result.as_object_mut())
    {
        let figures = quota.figures();
        let quota = state_core::ops::health::TokenQuota {
            writes_per_second: figures.writes_per_second,
            write_burst: figures.write_burst,
            writes_refused: figures.writes_refused,
        };
        if let Ok(value) = serde_json::to_value(quota) {
            fields.insert("quota".into(), value);
        }
    }
    result
}

/// `state_health` answered to a token with a storage quota says what it holds against it
/// (`usage` measured now, or else the last figure).
pub(crate) fn with_storage(quota: &StorageQuota, usage: Option<StorageUsage>, result: &mut Value) {
    let Some(usage) = usage.or_else(|| quota.last_usage()) else { return };
    let limits = quota.limits();
    let storage = state_core::ops::health::TokenStorage {
        max_keys: limits.max_keys,
        max_bytes: limits.max_bytes,
        keys: usage.keys,
        bytes: usage.bytes,
        writes_refused: quota.refused(),
    };
    if let (Some(fields), Ok(value)) = (result.as_object_mut(), serde_json::to_value(storage)) {
        fields.insert("storage".into(), value);
    }
}

/// A token's request ids, in a namespace of its own: the `request_id` argument and the one
/// given beside the arguments (`Idempotency-Key`). Reads carry none.
pub(crate) fn scope_request_ids(
    principal: &Principal,
    op: Operation,
    mut args: Value,
    request_id: Option<String>,
) -> (Value, Option<String>) {
    if !op.is_mutating() {
        return (args, request_id);
    }
    let scope = |id: &str| state_core::idempotency::scoped(&principal.name, id);
    if let Some(id) = args.get_mut("request_id")
        && let Some(text) = id.as_str()
    {
        *id = Value::String(scope(text));
    }
    (args, request_id.map(|id| scope(&id)))
}

/// Refuses `need` for `principal`, or lets it through. `run_name` resolves a run's name.
pub(crate) fn check(principal: &Principal, op: Operation, need: &Need, run_name: Option<&str>) -> Result<(), ApiError> {
    let (what, allowed) = match need {
        Need::Nothing => return Ok(()),
        Need::Id(id, right) => (format!("`{id}` ({})", name(*right)), principal.covers(id, *right)),
        Need::Prefix(prefix, right) if prefix.is_empty() => {
            (format!("the whole store ({})", name(*right)), principal.covers_prefix(prefix, *right))
        }
        Need::Prefix(prefix, right) => {
            (format!("everything under `{prefix}` ({})", name(*right)), principal.covers_prefix(prefix, *right))
        }
        Need::Run(run, right) => match run_name {
            // The run's name is someone's id: a refusal never tells it.
            Some(run_name) => (format!("run `{run}` ({})", name(*right)), principal.covers(run_name, *right)),
            // A run that does not exist belongs to no one: the call answers not_found.
            None => return Ok(()),
        },
    };
    if allowed {
        return Ok(());
    }
    Err(not_covered(principal, op, &what))
}

/// The refusal of `op` on `what`, which `principal`'s token does not cover.
pub(crate) fn not_covered(principal: &Principal, op: Operation, what: &str) -> ApiError {
    ApiError::new(
        ErrorCode::Forbidden,
        format!(
            "token `{}` may not use `{}` on {what}: it covers {} with {} rights",
            principal.name,
            op.name(),
            principal.scope(),
            name(principal.right)
        ),
    )
}

impl Right {
    /// As a tokens file writes it.
    pub fn name(self) -> &'static str {
        name(self)
    }
}

fn name(right: Right) -> &'static str {
    match right {
        Right::Read => "read",
        Right::Write => "write",
        Right::Admin => "admin",
    }
}

#[cfg(test)]
mod tests;
