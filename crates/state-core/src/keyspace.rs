//! Where each kind of record lives. User keys are printable text (validation rejects control
//! characters), so records the store keeps for itself live under keys that begin with U+0001
//! and can never collide with, or be listed among, user keys. Storing leases, runs and
//! sessions as entries gives them revisions, history and TTL expiry from the same machinery
//! as user keys.
//!
//! Identifiers inside system keys are separated by U+0002, which ids cannot contain either,
//! so `session "a"` version 3 and `session "a/b"` can never share a prefix.

const SYSTEM: char = '\u{1}';
const SEP: char = '\u{2}';

/// User keys sort after this: scans of the user keyspace start here.
pub const USER_KEYS_AFTER: &str = "\u{1f}";

/// The one key a store reset records its event under.
pub const RESET_KEY: &str = "\u{1}*";

/// Whether a stored key is one of the store's own records rather than a user key.
pub fn is_system(raw: &str) -> bool {
    raw.starts_with(SYSTEM)
}

/// What a stored key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Space {
    /// A user key.
    Kv,
    /// A lease on a resource (entry TTL = lease expiry).
    Lease,
    /// One permit of a semaphore: a lease on one of its slots, under the semaphore's name
    /// and the holder's id (entry TTL = the permit's expiry).
    Permit,
    /// A reservation of path patterns by one holder, under its scope (a repository), its
    /// holder and its id (entry TTL = the reservation's expiry).
    Reservation,
    /// A queue's message, under the queue and an id that sorts in receive order (priority,
    /// then age).
    Message,
    /// A queue's dedupe key, naming the message that carries it.
    MessageDedupe,
    /// A run's dedupe key, under the run's name, naming the run that carries it.
    RunDedupe,
    /// Index of unfinished runs with a priority that wait on no dependency, highest first,
    /// then in creation order (runs of priority 0 stay in `Queue`, as stores written before
    /// priorities have them).
    PriorityQueue,
    /// A signal sent to a run, under the run and the signal's id.
    Signal,
    /// A run that waits on a dependency, under the dependency and the waiting run: the
    /// completion of the dependency looks here for the runs it may make ready.
    Dependent,
    /// A finished run whose waiting runs are not all released yet: a completion releases a
    /// bounded number in its own write, and the sweeper the rest.
    Release,
    /// The claim on a workflow run: a lease whose expiry returns the run to the queue.
    Claim,
    /// A workflow run record.
    Run,
    /// One step output of a run.
    Step,
    /// Index of runs that are not finished and wait on no dependency, in creation order.
    Queue,
    /// A session's latest context (entry version = session version).
    Session,
    /// One saved version of a session.
    SessionVersion,
    /// Store-wide events (reset).
    Store,
    /// The record of an applied request, by its idempotency key (see `idempotency`).
    Request,
    /// A saved checkpoint, by id (ids begin with their UTC time, so key order is time order).
    Checkpoint,
    /// A checkpoint session: its accumulated highlights and latest checkpoint.
    CheckpointSession,
    /// The latest checkpoint of a workspace (and of global checkpoints).
    CheckpointLatest,
    /// A knowledge note, by id.
    Note,
    /// Search index: one posting (a term in a document) of a corpus.
    Posting,
    /// Search index: a corpus's document count and total length, and each term's document count.
    IndexStats,
    /// Search index: the terms a document was indexed under, to unindex it exactly.
    IndexedTerms,
}

/// What the search index covers; each corpus ranks against its own statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Corpus {
    Checkpoints,
    Knowledge,
}

impl Corpus {
    fn tag(self) -> char {
        match self {
            Corpus::Checkpoints => 'c',
            Corpus::Knowledge => 'k',
        }
    }
}

const TAGS: [(Space, char); 25] = [
    (Space::PriorityQueue, 'B'),
    (Space::Dependent, 'D'),
    (Space::Release, 'Z'),
    (Space::Signal, 'O'),
    (Space::RunDedupe, 'J'),
    (Space::Message, 'G'),
    (Space::MessageDedupe, 'U'),
    (Space::Lease, 'L'),
    (Space::Permit, 'M'),
    (Space::Reservation, 'F'),
    (Space::Claim, 'C'),
    (Space::Run, 'R'),
    (Space::Step, 'S'),
    (Space::Queue, 'Q'),
    (Space::Session, 'H'),
    (Space::SessionVersion, 'V'),
    (Space::Store, '*'),
    (Space::Request, 'I'),
    (Space::Checkpoint, 'K'),
    (Space::CheckpointSession, 'E'),
    (Space::CheckpointLatest, 'W'),
    (Space::Note, 'N'),
    (Space::Posting, 'P'),
    (Space::IndexStats, 'X'),
    (Space::IndexedTerms, 'Y'),
];

fn tag(space: Space) -> char {
    TAGS.iter().find(|(s, _)| *s == space).map_or('?', |(_, c)| *c)
}

/// The key prefix of every record of a space (empty for user keys).
pub fn prefix(space: Space) -> String {
    match space {
        Space::Kv => String::new(),
        other => format!("{SYSTEM}{}", tag(other)),
    }
}

/// Whether a system key from outside (a dump, another server's database) is shaped as this
/// store writes keys of its space: as many parts as the space's keys have, each one non-empty
/// text without control characters. Names with a separator or a control character in them
/// would otherwise reach into another run's, queue's or holder's records.
pub fn check_shape(raw: &str) -> Result<(), String> {
    let space = classify(raw).0;
    // Everything after the space's tag (`classify` gives a shorter, readable id for some).
    let id = raw.get(prefix(space).len()..).unwrap_or("");
    let parts = match space {
        Space::Lease
        | Space::PriorityQueue
        | Space::Release
        | Space::Claim
        | Space::Run
        | Space::Queue
        | Space::Session
        | Space::Checkpoint
        | Space::CheckpointSession
        | Space::Note => 1,
        // A workspace's pointer, or the global one: the separator alone.
        Space::CheckpointLatest if id == SEP.to_string() => return Ok(()),
        Space::CheckpointLatest => 1,
        Space::Permit
        | Space::Message
        | Space::MessageDedupe
        | Space::RunDedupe
        | Space::Signal
        | Space::Dependent
        | Space::Step
        | Space::SessionVersion => 2,
        Space::Reservation => 3,
        Space::Kv | Space::Store | Space::Request | Space::Posting | Space::IndexStats | Space::IndexedTerms => {
            return Err(format!("{raw:?} is not a record this store takes from outside"));
        }
    };
    let found: Vec<&str> = id.split(SEP).collect();
    if found.len() != parts {
        return Err(format!("{raw:?} has {} parts where a key of its kind has {parts}", found.len()));
    }
    for part in found {
        if part.is_empty() {
            return Err(format!("{raw:?} has an empty part"));
        }
        if let Some(c) = part.chars().find(|c| c.is_control()) {
            return Err(format!("{raw:?} holds the control character U+{:04X} in a name", u32::from(c)));
        }
    }
    Ok(())
}

pub fn key(space: Space, id: &str) -> String {
    format!("{}{id}", prefix(space))
}

pub fn lease_key(resource: &str) -> String {
    key(Space::Lease, resource)
}

/// Every permit of the semaphore `name`, and nothing of another semaphore.
pub fn permit_prefix(name: &str) -> String {
    format!("{}{name}{SEP}", prefix(Space::Permit))
}

pub fn permit_key(name: &str, holder: &str) -> String {
    format!("{}{holder}", permit_prefix(name))
}

/// The holder a permit key names (after the semaphore's name and the separator).
pub fn permit_holder(raw: &str) -> Option<&str> {
    raw.strip_prefix(&prefix(Space::Permit))?.split_once(SEP).map(|(_, holder)| holder)
}

/// Every reservation in `scope`, and nothing of another scope.
pub fn reservation_prefix(scope: &str) -> String {
    format!("{}{scope}{SEP}", prefix(Space::Reservation))
}

/// Ids are zero-padded so a holder's reservations list in the order they were granted.
pub fn reservation_key(scope: &str, holder: &str, id: u64) -> String {
    format!("{}{holder}{SEP}{id:020}", reservation_prefix(scope))
}

/// Every reservation of `holder` in `scope`.
pub fn reservation_holder_prefix(scope: &str, holder: &str) -> String {
    format!("{}{holder}{SEP}", reservation_prefix(scope))
}

/// Every message of `queue`, in receive order, and nothing of another queue.
pub fn message_prefix(queue: &str) -> String {
    format!("{}{queue}{SEP}", prefix(Space::Message))
}

pub fn message_key(queue: &str, message_id: &str) -> String {
    format!("{}{message_id}", message_prefix(queue))
}

pub fn message_dedupe_key(queue: &str, dedupe_key: &str) -> String {
    format!("{}{queue}{SEP}{dedupe_key}", prefix(Space::MessageDedupe))
}

/// Every signal of a run, oldest first.
pub fn signal_prefix(run_id: &str) -> String {
    format!("{}{run_id}{SEP}", prefix(Space::Signal))
}

pub fn signal_key(run_id: &str, signal_id: u64) -> String {
    format!("{}{signal_id:020}", signal_prefix(run_id))
}

/// Every run noted as waiting on `dependency`.
pub fn dependent_prefix(dependency: &str) -> String {
    format!("{}{dependency}{SEP}", prefix(Space::Dependent))
}

pub fn dependent_key(dependency: &str, dependent: &str) -> String {
    format!("{}{dependent}", dependent_prefix(dependency))
}

pub fn release_key(dependency: &str) -> String {
    key(Space::Release, dependency)
}

/// The waiting run a `Dependent` key names (after the dependency and the separator).
pub fn dependent_run_id(raw: &str) -> Option<&str> {
    raw.strip_prefix(&prefix(Space::Dependent))?.split_once(SEP).map(|(_, dependent)| dependent)
}

/// Where an unfinished run of `priority` is indexed for claiming.
pub fn queue_key_for(run_id: &str, priority: u8) -> String {
    match priority {
        0 => queue_key(run_id),
        p => format!("{}{}{run_id}", prefix(Space::PriorityQueue), 9u8.saturating_sub(p.min(9))),
    }
}

/// The run an index entry of `Queue` or `PriorityQueue` names.
pub fn queued_run_id(raw: &str) -> &str {
    let priority_prefix = prefix(Space::PriorityQueue);
    match raw.strip_prefix(&priority_prefix) {
        // One digit of inverted priority, then the run id.
        Some(rest) => rest.get(1..).unwrap_or(""),
        None => classify(raw).1,
    }
}

/// A dedupe key belongs to the runs of one name: runs of other names (another tenant's) never
/// meet it.
pub fn run_dedupe_key(name: &str, dedupe_key: &str) -> String {
    format!("{}{name}{SEP}{dedupe_key}", prefix(Space::RunDedupe))
}

pub fn claim_key(run_id: &str) -> String {
    key(Space::Claim, run_id)
}

pub fn run_key(run_id: &str) -> String {
    key(Space::Run, run_id)
}

pub fn queue_key(run_id: &str) -> String {
    key(Space::Queue, run_id)
}

pub fn step_prefix(run_id: &str) -> String {
    format!("{}{run_id}{SEP}", prefix(Space::Step))
}

/// Steps sort numerically because the number is zero-padded.
pub fn step_key(run_id: &str, step: u64) -> String {
    format!("{}{step:020}", step_prefix(run_id))
}

pub fn session_key(session_id: &str) -> String {
    key(Space::Session, session_id)
}

pub fn session_version_prefix(session_id: &str) -> String {
    format!("{}{session_id}{SEP}", prefix(Space::SessionVersion))
}

pub fn session_version_key(session_id: &str, version: u64) -> String {
    format!("{}{version:020}", session_version_prefix(session_id))
}

pub fn request_key(request_id: &str) -> String {
    key(Space::Request, request_id)
}

pub fn checkpoint_key(id: &str) -> String {
    key(Space::Checkpoint, id)
}

pub fn checkpoint_session_key(session_id: &str) -> String {
    key(Space::CheckpointSession, session_id)
}

/// The latest-checkpoint pointer of a workspace; `None` is the pointer of global checkpoints
/// (an empty workspace name followed by the separator, which no workspace can be).
pub fn checkpoint_latest_key(workspace: Option<&str>) -> String {
    match workspace {
        Some(workspace) => key(Space::CheckpointLatest, workspace),
        None => format!("{}{SEP}", prefix(Space::CheckpointLatest)),
    }
}

pub fn note_key(id: &str) -> String {
    key(Space::Note, id)
}

/// Every posting of `term` in `corpus`: scanning it yields the documents containing the term.
pub fn postings_prefix(corpus: Corpus, term: &str) -> String {
    format!("{}{}{term}{SEP}", prefix(Space::Posting), corpus.tag())
}

pub fn posting_key(corpus: Corpus, term: &str, document: &str) -> String {
    format!("{}{document}", postings_prefix(corpus, term))
}

pub fn index_stats_key(corpus: Corpus) -> String {
    format!("{}{}", prefix(Space::IndexStats), corpus.tag())
}

/// How many documents of `corpus` contain `term`.
pub fn term_stats_key(corpus: Corpus, term: &str) -> String {
    format!("{}{}{SEP}{term}", prefix(Space::IndexStats), corpus.tag())
}

pub fn indexed_terms_key(corpus: Corpus, document: &str) -> String {
    format!("{}{}{document}", prefix(Space::IndexedTerms), corpus.tag())
}

/// Splits a stored key into its space and the identifier a person would recognise.
pub fn classify(raw: &str) -> (Space, &str) {
    let Some(rest) = raw.strip_prefix(SYSTEM) else { return (Space::Kv, raw) };
    let mut chars = rest.chars();
    let space = chars.next().and_then(|c| TAGS.iter().find(|(_, t)| *t == c)).map_or(Space::Store, |(s, _)| *s);
    let id = chars.as_str();
    (space, id.split(SEP).next().unwrap_or(id))
}

#[cfg(test)]
mod tests;
