//! The commands, each turned into one operation of the catalog and its JSON arguments: the
//! CLI adds no rule of its own (versions, leases and budgets are decided behind the seam).

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use state_api::catalog::Operation;
use state_core::ops::NameListRequest;
use state_core::ops::checkpoint::{
    CheckpointRestoreRequest, CheckpointSaveRequest, CheckpointSearchRequest, CheckpointTimelineRequest, TimelineFormat,
};
use state_core::ops::health::HealthRequest;
use state_core::ops::history::HistoryRequest;
use state_core::ops::knowledge::{
    KnowledgeDeleteRequest, KnowledgeListRequest, KnowledgeRecallRequest, KnowledgeSaveRequest,
};
use state_core::ops::kv::{DeleteRequest, GetRequest, ListRequest, SetRequest};
use state_core::ops::lease::{AcquireRequest, LeaseGetRequest, LeaseListRequest, ReleaseRequest, RenewRequest};
use state_core::ops::queue::{
    QueueAckRequest, QueueNackRequest, QueuePeekRequest, QueueReceiveRequest, QueueRedriveRequest, QueueSendRequest,
};
use state_core::ops::reservation::{
    PathCheckRequest, ReservationListRequest, ReservationReleaseRequest, ReservationRenewRequest, ReserveRequest,
};
use state_core::ops::semaphore::{
    SemaphoreAcquireRequest, SemaphoreGetRequest, SemaphoreReleaseRequest, SemaphoreRenewRequest,
};
use state_core::ops::session::{SessionListRequest, SessionRestoreRequest, SessionSaveRequest};
use state_core::ops::txn::TxnRequest;
use state_core::ops::usage::UsageRequest;
use state_core::ops::workflow::{AwaitSignalRequest, SignalRequest};
use state_core::ops::workflow::{
    CancelRequest, CheckpointRequest, ClaimRequest, CompleteRequest, CreateRunRequest, FailRequest, HeartbeatRequest,
    ListRunsRequest, RunRequest, RunStatusRequest,
};

use crate::input;

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Read a key: its value, version and revision
    Get {
        key: String,
        /// Print only the value: a string as it is, anything else as compact JSON
        #[arg(long)]
        raw: bool,
        /// Read it as it was at this version
        #[arg(long, conflicts_with = "revision")]
        version: Option<u64>,
        /// Read it as it was at this store revision
        #[arg(long)]
        revision: Option<u64>,
    },
    /// Write a key. VALUE is JSON (or text with --raw), @FILE, or - / nothing for stdin
    Put {
        key: String,
        value: Option<String>,
        /// Only if the key is at this version (compare-and-set); exit 4 if not
        #[arg(long, value_name = "N", conflicts_with = "create_only")]
        if_version: Option<u64>,
        /// Only if the key does not exist; exit 4 if it does
        #[arg(long)]
        create_only: bool,
        /// Expire the key after this long (e.g. 30s, 5m, 1h)
        #[arg(long, value_parser = state_boot::flags::parse_duration)]
        ttl: Option<std::time::Duration>,
        /// Store VALUE as a JSON string instead of parsing it as JSON
        #[arg(long)]
        raw: bool,
        #[command(flatten)]
        who: Who,
    },
    /// Delete a key
    Del {
        key: String,
        /// Only if the key is at this version; exit 4 if not
        #[arg(long, value_name = "N")]
        if_version: Option<u64>,
        #[command(flatten)]
        who: Who,
    },
    /// List keys under a prefix (every page)
    Ls {
        #[arg(default_value = "")]
        prefix: String,
        /// Include values
        #[arg(long)]
        values: bool,
        /// Stop after this many keys
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Changes of one key, a prefix or everything, oldest first
    History {
        /// Only this key (or lease resource, run id, ... with --kind)
        key: Option<String>,
        #[arg(long, conflicts_with = "key")]
        prefix: Option<String>,
        /// kv, lease, semaphore, reservation, queue, workflow, session, store, checkpoint or
        /// knowledge
        #[arg(long)]
        kind: Option<String>,
        /// Only changes after this revision
        #[arg(long, value_name = "REVISION")]
        since: Option<u64>,
        /// Most changes to show (1 to 1000)
        #[arg(short, long)]
        n: Option<usize>,
    },
    /// Run a transaction from a JSON file (or - for stdin): {"compare": [...], "success": [...], "failure": [...]}
    Txn { file: String },
    /// Print changes as they happen (one JSON line each with --json), until interrupted
    Watch {
        /// Keys starting with this (all keys when absent)
        prefix: Option<String>,
        /// Only this key
        #[arg(long, conflicts_with = "prefix")]
        key: Option<String>,
        /// lease, semaphore, reservation, queue, workflow, session, checkpoint, knowledge
        /// (default kv)
        #[arg(long)]
        kind: Option<String>,
        /// Start after this revision (default: from now on)
        #[arg(long, value_name = "REVISION")]
        from: Option<u64>,
        /// Stop after this many changes
        #[arg(long)]
        count: Option<u64>,
    },
    /// Write every record (keys, leases, runs, sessions, checkpoints, notes) as JSON lines
    Export(crate::transfer::ExportArgs),
    /// Check the database, its owner, the socket directory, versions and the disk, and say
    /// what to fix (exit 1 if something is broken)
    Doctor,
    /// Open a database whose write-ahead log was refused (missing after a crash, cut short,
    /// another database's, an older copy), without the writes only that log held. Without
    /// --accept-lost-writes it only says what would be lost (exit 1)
    Recover {
        /// Open it without the writes the log lacks: a log cut short is replayed as far as it
        /// goes, another database's log or an older copy is moved aside
        #[arg(long)]
        accept_lost_writes: bool,
    },
    /// Write a consistent copy of the store to FILE (a new file) while agents keep writing: a
    /// database of its own, as of one revision (open it with --db FILE, or put it in place of
    /// the store to restore)
    Backup { file: std::path::PathBuf },
    /// Load a dump, or agentcheckpoint's or mcp-state-sidecar's database, keeping versions;
    /// a key that differs here is reported (exit 4), never overwritten. Safe to run again
    Import(crate::transfer::ImportArgs),
    /// Browse the store interactively: keys by prefix, entries, history diffs, workflows,
    /// leases, checkpoints, semaphores, queues and path reservations, updated live (q quits, ?
    /// helps)
    Tui {
        /// Only what is under this prefix (a token scoped to a prefix can see only that)
        #[arg(default_value = "")]
        prefix: String,
    },
    /// Leases with fencing tokens
    #[command(subcommand)]
    Lease(LeaseCommand),
    /// Semaphores: up to N holders at once, each permit fenced
    #[command(subcommand)]
    Semaphore(SemaphoreCommand),
    /// Path reservations: claim files and globs of a repository, exclusive or shared
    #[command(subcommand)]
    Paths(PathsCommand),
    /// Queues and mailboxes between agents
    #[command(subcommand)]
    Queue(QueueCommand),
    /// Workflow runs
    #[command(subcommand)]
    Workflow(WorkflowCommand),
    /// Session snapshots
    #[command(subcommand)]
    Session(SessionCommand),
    /// Checkpoints: where work stands
    #[command(subcommand)]
    Checkpoint(CheckpointCommand),
    /// Knowledge notes
    #[command(subcommand)]
    Knowledge(KnowledgeCommand),
    /// The store's revision, size, owner and write statistics
    Health,
    /// Keys, named records and bytes stored under an id prefix (what a storage quota counts)
    Usage {
        /// Id prefix; omit it for the whole store
        #[arg(default_value = "")]
        prefix: String,
    },
    /// Any operation by id with JSON arguments, e.g. `call native/state_get '{"key":"k"}'`;
    /// without one, lists every operation and the command that runs it
    Call {
        /// `profile/name`, e.g. native/state_get, sidecar/state_set; a profile's name alone
        /// (native, sidecar, ...) lists its operations
        operation: Option<String>,
        /// JSON arguments, @FILE, or - for stdin (default {})
        args: Option<String>,
    },
}

/// Who a write is recorded as, and the lease it is fenced by.
#[derive(Debug, Args)]
pub struct Who {
    /// Recorded as the writer in history
    #[arg(long, env = "STATE_AGENT")]
    agent: Option<String>,
    /// Refuse the write (exit 5, fenced) unless --fencing-token is this lease's current token
    #[arg(long, value_name = "RESOURCE", requires = "fencing_token")]
    lease: Option<String>,
    /// Your fencing token for --lease, as `statectl lease acquire` handed it out
    #[arg(long, value_name = "N", requires = "lease")]
    fencing_token: Option<u64>,
}

#[derive(Debug, Subcommand)]
pub enum LeaseCommand {
    /// Take a lease, or learn who holds it (exit 4)
    Acquire {
        resource: String,
        #[arg(long)]
        holder: String,
        #[arg(long, value_parser = state_boot::flags::parse_duration)]
        ttl: std::time::Duration,
    },
    /// Extend a lease you hold
    Renew {
        resource: String,
        #[arg(long)]
        holder: String,
        /// The fencing token the grant or claim returned
        #[arg(long, value_name = "N")]
        fencing_token: u64,
        #[arg(long, value_parser = state_boot::flags::parse_duration)]
        ttl: std::time::Duration,
    },
    /// Give up a lease you hold
    Release {
        resource: String,
        #[arg(long)]
        holder: String,
        /// The fencing token the grant or claim returned
        #[arg(long, value_name = "N")]
        fencing_token: u64,
    },
    /// Who holds a lease and until when (status `free` if nobody does)
    Get { resource: String },
    /// Leases held now
    Ls {
        #[arg(default_value = "")]
        prefix: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum SemaphoreCommand {
    /// Take one of a semaphore's permits, waiting up to --wait; when all are held, lists the
    /// holders (exit 4)
    Acquire {
        name: String,
        #[arg(long)]
        holder: String,
        /// How many holders at once; every holder must give the same number
        #[arg(long)]
        capacity: u32,
        #[arg(long, value_parser = state_boot::flags::parse_duration)]
        ttl: std::time::Duration,
        /// Wait this long for a permit when all are held (at most 55s)
        #[arg(long, value_parser = state_boot::flags::parse_duration)]
        wait: Option<std::time::Duration>,
    },
    /// Extend a permit you hold
    Renew {
        name: String,
        #[arg(long)]
        holder: String,
        /// The fencing token the grant returned
        #[arg(long, value_name = "N")]
        fencing_token: u64,
        #[arg(long, value_parser = state_boot::flags::parse_duration)]
        ttl: std::time::Duration,
    },
    /// Give back a permit you hold
    Release {
        name: String,
        #[arg(long)]
        holder: String,
        /// The fencing token the grant returned
        #[arg(long, value_name = "N")]
        fencing_token: u64,
    },
    /// A semaphore's capacity, free permits and holders
    Get { name: String },
    /// Semaphores with a permit held, and their holders
    Ls {
        #[arg(default_value = "")]
        prefix: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum PathsCommand {
    /// Reserve paths or globs (`src/**`, `docs/*.md`, `docs/`) in a scope; refused, reserving
    /// nothing, when another holder's reservation overlaps (exit 4, naming it)
    Reserve {
        /// What the paths are relative to, e.g. the repository's path
        scope: String,
        #[arg(required = true)]
        patterns: Vec<String>,
        #[arg(long)]
        holder: String,
        #[arg(long, value_parser = state_boot::flags::parse_duration)]
        ttl: std::time::Duration,
        /// Others may reserve overlapping paths too, unless theirs is exclusive
        #[arg(long)]
        shared: bool,
        /// Why, shown to whoever it blocks
        #[arg(long)]
        reason: Option<String>,
    },
    /// Extend a reservation you hold
    Renew {
        scope: String,
        /// The id `reserve` returned
        reservation_id: u64,
        #[arg(long)]
        holder: String,
        #[arg(long, value_parser = state_boot::flags::parse_duration)]
        ttl: std::time::Duration,
    },
    /// Give back one reservation, or every one of yours in the scope
    Release {
        scope: String,
        reservation_id: Option<u64>,
        #[arg(long)]
        holder: String,
    },
    /// Live reservations of a scope
    Ls {
        scope: String,
        #[arg(long)]
        holder: Option<String>,
    },
    /// Scopes with live reservations, and their reservations
    Scopes {
        #[arg(default_value = "")]
        prefix: String,
    },
    /// Whether a holder may write a path now (`allowed`), and whose exclusive reservation
    /// stands in the way if not
    Check {
        scope: String,
        path: String,
        #[arg(long)]
        holder: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum QueueCommand {
    /// Put a message on a queue (an agent's inbox: inbox/<agent>)
    Send {
        queue: String,
        /// JSON body, @FILE or -
        body: String,
        /// 0 to 9; higher is received first
        #[arg(long)]
        priority: Option<u8>,
        /// Not receivable before this long from now
        #[arg(long, value_parser = state_boot::flags::parse_duration)]
        delay: Option<std::time::Duration>,
        /// While a message with this key is in the queue, return it instead of sending
        #[arg(long)]
        dedupe_key: Option<String>,
        /// Dropped this long from now unless acknowledged
        #[arg(long, value_parser = state_boot::flags::parse_duration)]
        ttl: Option<std::time::Duration>,
        /// Receives before it moves to <queue>.dead (default 5)
        #[arg(long)]
        max_attempts: Option<u32>,
        #[arg(long, env = "STATE_AGENT")]
        sender: Option<String>,
    },
    /// Take the next message, hidden from others for --visibility (exit 3 when none)
    Receive {
        queue: String,
        #[arg(long, env = "STATE_AGENT")]
        consumer: String,
        /// How long it stays hidden unless acknowledged (default 30s)
        #[arg(long, value_parser = state_boot::flags::parse_duration)]
        visibility: Option<std::time::Duration>,
        /// Wait this long for a message when none is visible (at most 55s)
        #[arg(long, value_parser = state_boot::flags::parse_duration)]
        wait: Option<std::time::Duration>,
    },
    /// Remove a received message for good (exit 5 if it was received again since)
    Ack {
        queue: String,
        message_id: String,
        #[arg(long, value_name = "N")]
        receipt: u64,
    },
    /// Give a received message back, now or after --delay
    Nack {
        queue: String,
        message_id: String,
        #[arg(long, value_name = "N")]
        receipt: u64,
        #[arg(long, value_parser = state_boot::flags::parse_duration)]
        delay: Option<std::time::Duration>,
    },
    /// Counts by state and the first messages, without receiving
    Peek {
        queue: String,
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Queues holding messages, with their counts (`inbox/` for every inbox)
    Ls {
        #[arg(default_value = "")]
        prefix: String,
    },
    /// Move dead letters (QUEUE.dead) back to QUEUE, their attempts starting over
    Redrive {
        /// The queue they go back to (not the .dead one)
        queue: String,
        /// Most messages moved (1 to 1000, default 100), oldest first
        #[arg(long)]
        limit: Option<usize>,
        #[command(flatten)]
        who: Who,
    },
}

#[derive(Debug, Subcommand)]
pub enum WorkflowCommand {
    /// Register a run for a worker to claim
    Create {
        name: String,
        /// JSON input, @FILE or -
        #[arg(long)]
        input: Option<String>,
        /// A tag, name=value (repeatable)
        #[arg(long = "tag", value_parser = tag)]
        tags: Vec<(String, String)>,
        #[arg(long)]
        max_attempts: Option<u32>,
        /// A run that must complete first (repeatable)
        #[arg(long = "depends-on", value_name = "RUN_ID")]
        depends_on: Vec<String>,
        /// 0 to 9; higher is claimed first
        #[arg(long)]
        priority: Option<u8>,
        /// Not claimable before this long from now
        #[arg(long, value_parser = state_boot::flags::parse_duration)]
        delay: Option<std::time::Duration>,
        /// While a run with this key is unfinished, return it instead of creating another
        #[arg(long)]
        dedupe_key: Option<String>,
        /// Runs sharing this key run at most --concurrency-limit at once
        #[arg(long)]
        concurrency_key: Option<String>,
        /// With --concurrency-key: how many may run at once (default 1)
        #[arg(long, requires = "concurrency_key")]
        concurrency_limit: Option<u32>,
    },
    /// Claim a run (one by id, or the highest-priority, oldest claimable matching --name and --tag)
    Claim {
        #[arg(long)]
        agent: String,
        #[arg(long)]
        run: Option<String>,
        #[arg(long)]
        name: Option<String>,
        #[arg(long = "tag", value_parser = tag)]
        tags: Vec<(String, String)>,
        /// How long the claim lasts unless renewed
        #[arg(long, value_parser = state_boot::flags::parse_duration)]
        ttl: Option<std::time::Duration>,
    },
    /// Record a finished step's output (JSON, @FILE or -)
    Checkpoint {
        #[command(flatten)]
        claim: Claimed,
        #[arg(long)]
        step: u64,
        output: Option<String>,
    },
    /// Renew your claim on a run before its lease lapses
    Heartbeat {
        #[command(flatten)]
        claim: Claimed,
        /// How long the renewed claim lasts
        #[arg(long, value_parser = state_boot::flags::parse_duration)]
        ttl: Option<std::time::Duration>,
    },
    /// Everything needed to continue a run
    Resume { run: String },
    /// A run's status, attempt, last step and holder; with --wait, once it finished (or the
    /// wait ran out)
    Status {
        run: String,
        /// Wait this long for the run to finish (at most 55s)
        #[arg(long, value_parser = state_boot::flags::parse_duration)]
        wait: Option<std::time::Duration>,
    },
    /// Finish a run you hold, with its result (JSON, @FILE or -; default null)
    Complete {
        #[command(flatten)]
        claim: Claimed,
        result: Option<String>,
    },
    /// Report that your attempt failed
    Fail {
        #[command(flatten)]
        claim: Claimed,
        #[arg(long)]
        error: String,
        /// Return the run to the queue (until its attempts run out)
        #[arg(long)]
        retryable: bool,
        /// With --retryable: not claimable again before this long from now (a backoff)
        #[arg(long, value_parser = state_boot::flags::parse_duration, requires = "retryable")]
        retry_delay: Option<std::time::Duration>,
    },
    /// Send a run a named signal (an approval, a result), with an optional JSON value
    Signal {
        run: String,
        name: String,
        /// JSON value, @FILE or -
        value: Option<String>,
        #[arg(long, env = "STATE_AGENT")]
        sender: Option<String>,
    },
    /// Park a run you hold until a named signal arrives (answered at once if it already has)
    AwaitSignal {
        #[command(flatten)]
        claim: Claimed,
        #[arg(long)]
        name: String,
        /// Only a signal with a larger id counts
        #[arg(long, value_name = "ID")]
        after: Option<u64>,
    },
    /// Cancel a run that has not finished
    Cancel {
        run: String,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Runs by status, name and tags
    Ls {
        /// pending, running, completed, failed or cancelled
        #[arg(long)]
        status: Option<String>,
        #[arg(long)]
        name: Option<String>,
    },
}

/// A run as its holder names it: the run, the claiming agent and the claim's fencing token.
#[derive(Debug, Args)]
pub struct Claimed {
    run: String,
    #[arg(long)]
    agent: String,
    /// The fencing token the claim returned
    #[arg(long, value_name = "N")]
    fencing_token: u64,
}

#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// Save a snapshot (JSON, @FILE or -)
    Save { id: String, context: Option<String> },
    /// The latest snapshot, or one version
    Restore {
        id: String,
        #[arg(long)]
        version: Option<u64>,
    },
    /// Sessions by id prefix
    Ls {
        #[arg(default_value = "")]
        prefix: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum CheckpointCommand {
    /// Save where work stands
    Save {
        description: String,
        /// A highlight (repeatable; they accumulate in the session)
        #[arg(long = "highlight")]
        highlights: Vec<String>,
        /// A file being worked on (repeatable)
        #[arg(long = "file")]
        files: Vec<String>,
        /// Next steps
        #[arg(long)]
        context: Option<String>,
        #[arg(long)]
        session: Option<String>,
        /// Default: the current directory
        #[arg(long)]
        workspace: Option<String>,
        #[arg(long)]
        global: bool,
    },
    /// The workspace's latest, or one by id (or unique prefix)
    Restore {
        id: Option<String>,
        #[arg(long)]
        session: Option<String>,
        /// Default: the current directory
        #[arg(long)]
        workspace: Option<String>,
        /// minimal, highlights or full
        #[arg(long)]
        depth: Option<String>,
    },
    /// Checkpoints matching words, best first
    Search {
        query: String,
        /// 24h, 7d, 1week or an RFC 3339 time
        #[arg(long)]
        since: Option<String>,
        #[arg(long)]
        workspace: Option<String>,
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Recent checkpoints by day and workspace
    Timeline {
        /// 1h, 24h, 7d, 30d
        #[arg(long)]
        range: Option<String>,
        #[arg(long)]
        detailed: bool,
        #[arg(long)]
        workspace: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum KnowledgeCommand {
    /// Save a note (markdown, @FILE or -)
    Save {
        id: String,
        content: Option<String>,
        /// A keyword (repeatable)
        #[arg(long = "keyword")]
        keywords: Vec<String>,
        #[arg(long)]
        scope: Option<String>,
        #[arg(long)]
        source: Option<String>,
        /// Only if the note is at this version (0 = create only)
        #[arg(long, value_name = "N")]
        if_version: Option<u64>,
    },
    /// The notes most relevant to a query, within a token budget
    Recall {
        query: String,
        #[arg(long)]
        scope: Option<String>,
        #[arg(long)]
        max_tokens: Option<usize>,
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Notes by id prefix and scope
    Ls {
        #[arg(default_value = "")]
        prefix: String,
        #[arg(long)]
        scope: Option<String>,
    },
    /// Delete a note
    Del {
        id: String,
        #[arg(long, value_name = "N")]
        if_version: Option<u64>,
    },
}

fn tag(text: &str) -> Result<(String, String), String> {
    text.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())).ok_or_else(|| format!("`{text}` is not name=value"))
}

fn typed<T: Serialize>(op: Operation, request: T) -> Result<(Operation, Value)> {
    Ok((op, input::request_args(request)?))
}

/// A flag's text as the request's own type reads it (an enum's variants, say).
fn choice<T: DeserializeOwned>(flag: &str, text: Option<&String>) -> Result<Option<T>> {
    text.map(|text| serde_json::from_value(Value::String(text.clone())).map_err(|e| anyhow::anyhow!("--{flag}: {e}")))
        .transpose()
}

fn tags(tags: &[(String, String)]) -> BTreeMap<String, String> {
    tags.iter().cloned().collect()
}

fn seconds(d: Option<std::time::Duration>) -> Option<f64> {
    d.map(|d| d.as_secs_f64())
}

fn optional_json(argument: Option<&str>, what: &str) -> Result<Value> {
    match argument {
        None => Ok(Value::Null),
        some => input::json(some, what, false),
    }
}

/// The operation a command runs and its arguments, built as the operation's typed request.
/// `ls` and `watch` are driven by the caller (paging, streaming); this gives their first request.
pub(crate) fn operation(command: &Command) -> Result<(Operation, Value)> {
    use Operation as Op;
    match command {
        Command::Get { key, version, revision, .. } => {
            typed(Op::StateGet, GetRequest { key: key.clone(), version: *version, revision: *revision })
        }
        Command::Put { key, value, if_version, create_only, ttl, raw, who } => {
            let value = input::json(value.as_deref(), "value", *raw)?;
            let request = SetRequest {
                key: key.clone(),
                value,
                expected_version: if *create_only { Some(0) } else { *if_version },
                ttl_seconds: seconds(*ttl),
                agent_id: who.agent.clone(),
                lease: who.lease.clone(),
                token: who.fencing_token,
                request_id: None,
            };
            typed(Op::StateSet, request)
        }
        Command::Del { key, if_version, who } => {
            let request = DeleteRequest {
                key: key.clone(),
                expected_version: *if_version,
                agent_id: who.agent.clone(),
                lease: who.lease.clone(),
                token: who.fencing_token,
                ..DeleteRequest::default()
            };
            typed(Op::StateDelete, request)
        }
        Command::Ls { prefix, values, .. } => {
            let request = ListRequest {
                prefix: prefix.clone(),
                include_values: *values,
                limit: Some(state_core::limits::MAX_PAGE),
                cursor: None,
                delimiter: None,
            };
            typed(Op::StateList, request)
        }
        Command::History { key, prefix, kind, since, n } => {
            let request = HistoryRequest {
                kind: choice("kind", kind.as_ref())?,
                key: key.clone(),
                prefix: prefix.clone(),
                since_revision: *since,
                n: *n,
                include_values: None,
            };
            typed(Op::HistoryLog, request)
        }
        Command::Txn { file } => {
            let text = input::json(Some(&as_input(file)), "transaction", false)?;
            let request: TxnRequest = serde_json::from_value(text).context("the transaction file")?;
            typed(Op::StateTxn, request)
        }
        Command::Watch { .. } => bail!("watch streams: it is not one call"),
        Command::Export(_) | Command::Import(_) => bail!("export and import page through the store: not one call"),
        Command::Tui { .. } => bail!("the inspector is interactive: not one call"),
        Command::Backup { .. } => bail!("a backup is not a call of the catalog"),
        Command::Doctor => bail!("doctor runs checks, not one call"),
        Command::Recover { .. } => bail!("recover opens the database itself, not one call"),
        Command::Lease(lease) => match lease {
            LeaseCommand::Acquire { resource, holder, ttl } => {
                let request = AcquireRequest {
                    resource_id: resource.clone(),
                    holder_id: holder.clone(),
                    ttl_seconds: ttl.as_secs_f64(),
                    request_id: None,
                };
                typed(Op::LeaseAcquire, request)
            }
            LeaseCommand::Renew { resource, holder, fencing_token, ttl } => {
                let request = RenewRequest {
                    resource_id: resource.clone(),
                    holder_id: holder.clone(),
                    token: *fencing_token,
                    ttl_seconds: ttl.as_secs_f64(),
                    request_id: None,
                };
                typed(Op::LeaseRenew, request)
            }
            LeaseCommand::Release { resource, holder, fencing_token } => {
                let request = ReleaseRequest {
                    resource_id: resource.clone(),
                    holder_id: holder.clone(),
                    token: *fencing_token,
                    request_id: None,
                };
                typed(Op::LeaseRelease, request)
            }
            LeaseCommand::Get { resource } => typed(Op::LeaseGet, LeaseGetRequest { resource_id: resource.clone() }),
            LeaseCommand::Ls { prefix } => {
                typed(Op::LeaseList, LeaseListRequest { prefix: prefix.clone(), ..LeaseListRequest::default() })
            }
        },
        Command::Semaphore(semaphore) => match semaphore {
            SemaphoreCommand::Acquire { name, holder, capacity, ttl, wait } => {
                let request = SemaphoreAcquireRequest {
                    name: name.clone(),
                    holder_id: holder.clone(),
                    capacity: *capacity,
                    ttl_seconds: ttl.as_secs_f64(),
                    wait_seconds: wait.map(|w| w.as_secs_f64()),
                    request_id: None,
                };
                typed(Op::SemaphoreAcquire, request)
            }
            SemaphoreCommand::Renew { name, holder, fencing_token, ttl } => {
                let request = SemaphoreRenewRequest {
                    name: name.clone(),
                    holder_id: holder.clone(),
                    token: *fencing_token,
                    ttl_seconds: ttl.as_secs_f64(),
                    request_id: None,
                };
                typed(Op::SemaphoreRenew, request)
            }
            SemaphoreCommand::Release { name, holder, fencing_token } => {
                let request = SemaphoreReleaseRequest {
                    name: name.clone(),
                    holder_id: holder.clone(),
                    token: *fencing_token,
                    request_id: None,
                };
                typed(Op::SemaphoreRelease, request)
            }
            SemaphoreCommand::Get { name } => typed(Op::SemaphoreGet, SemaphoreGetRequest { name: name.clone() }),
            SemaphoreCommand::Ls { prefix } => {
                typed(Op::SemaphoreList, NameListRequest { prefix: prefix.clone(), ..Default::default() })
            }
        },
        Command::Paths(paths) => match paths {
            PathsCommand::Reserve { scope, patterns, holder, ttl, shared, reason } => {
                let request = ReserveRequest {
                    scope: scope.clone(),
                    holder_id: holder.clone(),
                    patterns: patterns.clone(),
                    exclusive: Some(!*shared),
                    ttl_seconds: ttl.as_secs_f64(),
                    reason: reason.clone(),
                    request_id: None,
                };
                typed(Op::PathsReserve, request)
            }
            PathsCommand::Renew { scope, reservation_id, holder, ttl } => {
                let request = ReservationRenewRequest {
                    scope: scope.clone(),
                    holder_id: holder.clone(),
                    reservation_id: *reservation_id,
                    ttl_seconds: ttl.as_secs_f64(),
                    request_id: None,
                };
                typed(Op::PathsRenew, request)
            }
            PathsCommand::Release { scope, reservation_id, holder } => {
                let request = ReservationReleaseRequest {
                    scope: scope.clone(),
                    holder_id: holder.clone(),
                    reservation_id: *reservation_id,
                    request_id: None,
                };
                typed(Op::PathsRelease, request)
            }
            PathsCommand::Ls { scope, holder } => {
                typed(Op::PathsList, ReservationListRequest { scope: scope.clone(), holder_id: holder.clone() })
            }
            PathsCommand::Scopes { prefix } => {
                typed(Op::PathsScopes, NameListRequest { prefix: prefix.clone(), ..Default::default() })
            }
            PathsCommand::Check { scope, path, holder } => {
                let request = PathCheckRequest { scope: scope.clone(), holder_id: holder.clone(), path: path.clone() };
                typed(Op::PathsCheck, request)
            }
        },
        Command::Queue(queue) => match queue {
            QueueCommand::Send { queue, body, priority, delay, dedupe_key, ttl, max_attempts, sender } => {
                let request = QueueSendRequest {
                    queue: queue.clone(),
                    body: input::json(Some(body), "body", false)?,
                    priority: *priority,
                    delay_seconds: delay.map(|d| d.as_secs_f64()),
                    dedupe_key: dedupe_key.clone(),
                    ttl_seconds: ttl.map(|d| d.as_secs_f64()),
                    max_attempts: *max_attempts,
                    sender: sender.clone(),
                    request_id: None,
                };
                typed(Op::QueueSend, request)
            }
            QueueCommand::Receive { queue, consumer, visibility, wait } => {
                let request = QueueReceiveRequest {
                    queue: queue.clone(),
                    consumer_id: consumer.clone(),
                    visibility_seconds: visibility.map(|d| d.as_secs_f64()),
                    wait_seconds: wait.map(|d| d.as_secs_f64()),
                    request_id: None,
                };
                typed(Op::QueueReceive, request)
            }
            QueueCommand::Ack { queue, message_id, receipt } => {
                let request = QueueAckRequest {
                    queue: queue.clone(),
                    message_id: message_id.clone(),
                    receipt: *receipt,
                    request_id: None,
                };
                typed(Op::QueueAck, request)
            }
            QueueCommand::Nack { queue, message_id, receipt, delay } => {
                let request = QueueNackRequest {
                    queue: queue.clone(),
                    message_id: message_id.clone(),
                    receipt: *receipt,
                    delay_seconds: delay.map(|d| d.as_secs_f64()),
                    request_id: None,
                };
                typed(Op::QueueNack, request)
            }
            QueueCommand::Peek { queue, limit } => {
                typed(Op::QueuePeek, QueuePeekRequest { queue: queue.clone(), limit: *limit })
            }
            QueueCommand::Ls { prefix } => {
                typed(Op::QueueList, NameListRequest { prefix: prefix.clone(), ..Default::default() })
            }
            QueueCommand::Redrive { queue, limit, who } => {
                let request = QueueRedriveRequest {
                    queue: queue.clone(),
                    limit: *limit,
                    agent_id: who.agent.clone(),
                    request_id: None,
                };
                typed(Op::QueueRedrive, request)
            }
        },
        Command::Workflow(workflow) => match workflow {
            WorkflowCommand::Create {
                name,
                input,
                tags: t,
                max_attempts,
                depends_on,
                priority,
                delay,
                dedupe_key,
                concurrency_key,
                concurrency_limit,
            } => {
                let request = CreateRunRequest {
                    name: name.clone(),
                    tags: tags(t),
                    input: optional_json(input.as_deref(), "input")?,
                    max_attempts: *max_attempts,
                    depends_on: depends_on.clone(),
                    priority: *priority,
                    delay_seconds: delay.map(|d| d.as_secs_f64()),
                    dedupe_key: dedupe_key.clone(),
                    concurrency_key: concurrency_key.clone(),
                    concurrency_limit: *concurrency_limit,
                    agent_id: None,
                    request_id: None,
                };
                typed(Op::WorkflowCreate, request)
            }
            WorkflowCommand::Claim { agent, run, name, tags: t, ttl } => {
                let request = ClaimRequest {
                    agent_id: agent.clone(),
                    lease_ttl_seconds: seconds(*ttl),
                    run_id: run.clone(),
                    tags: tags(t),
                    name: name.clone(),
                    request_id: None,
                };
                typed(Op::WorkflowClaim, request)
            }
            WorkflowCommand::Checkpoint { claim, step, output } => {
                let request = CheckpointRequest {
                    run_id: claim.run.clone(),
                    agent_id: claim.agent.clone(),
                    token: claim.fencing_token,
                    step: *step,
                    output: input::json(output.as_deref(), "step output", false)?,
                    request_id: None,
                };
                typed(Op::WorkflowCheckpoint, request)
            }
            WorkflowCommand::Heartbeat { claim, ttl } => {
                let request = HeartbeatRequest {
                    run_id: claim.run.clone(),
                    agent_id: claim.agent.clone(),
                    token: claim.fencing_token,
                    lease_ttl_seconds: seconds(*ttl),
                    request_id: None,
                };
                typed(Op::WorkflowHeartbeat, request)
            }
            WorkflowCommand::Resume { run } => typed(Op::WorkflowResume, RunRequest { run_id: run.clone() }),
            WorkflowCommand::Status { run, wait } => {
                let request = RunStatusRequest { run_id: run.clone(), wait_seconds: wait.map(|w| w.as_secs_f64()) };
                typed(Op::WorkflowStatus, request)
            }
            WorkflowCommand::Complete { claim, result } => {
                let request = CompleteRequest {
                    run_id: claim.run.clone(),
                    agent_id: claim.agent.clone(),
                    token: claim.fencing_token,
                    result: optional_json(result.as_deref(), "result")?,
                    request_id: None,
                };
                typed(Op::WorkflowComplete, request)
            }
            WorkflowCommand::Fail { claim, error, retryable, retry_delay } => {
                let request = FailRequest {
                    run_id: claim.run.clone(),
                    agent_id: claim.agent.clone(),
                    token: claim.fencing_token,
                    error: error.clone(),
                    retryable: *retryable,
                    retry_delay_seconds: retry_delay.map(|d| d.as_secs_f64()),
                    request_id: None,
                };
                typed(Op::WorkflowFail, request)
            }
            WorkflowCommand::Signal { run, name, value, sender } => {
                let request = SignalRequest {
                    run_id: run.clone(),
                    name: name.clone(),
                    value: optional_json(value.as_deref(), "value")?,
                    sender: sender.clone(),
                    request_id: None,
                };
                typed(Op::WorkflowSignal, request)
            }
            WorkflowCommand::AwaitSignal { claim, name, after } => {
                let request = AwaitSignalRequest {
                    run_id: claim.run.clone(),
                    agent_id: claim.agent.clone(),
                    token: claim.fencing_token,
                    name: name.clone(),
                    after_signal_id: *after,
                    request_id: None,
                };
                typed(Op::WorkflowAwaitSignal, request)
            }
            WorkflowCommand::Cancel { run, reason } => {
                let request =
                    CancelRequest { run_id: run.clone(), reason: reason.clone(), agent_id: None, request_id: None };
                typed(Op::WorkflowCancel, request)
            }
            WorkflowCommand::Ls { status, name } => {
                let request = ListRunsRequest {
                    status: choice("status", status.as_ref())?,
                    name: name.clone(),
                    ..ListRunsRequest::default()
                };
                typed(Op::WorkflowList, request)
            }
        },
        Command::Session(session) => match session {
            SessionCommand::Save { id, context } => {
                let context = input::json(context.as_deref(), "context", false)?;
                let request = SessionSaveRequest { session_id: id.clone(), context, agent_id: None, request_id: None };
                typed(Op::SessionSave, request)
            }
            SessionCommand::Restore { id, version } => {
                typed(Op::SessionRestore, SessionRestoreRequest { session_id: id.clone(), version: *version })
            }
            SessionCommand::Ls { prefix } => {
                typed(Op::SessionList, SessionListRequest { prefix: prefix.clone(), ..SessionListRequest::default() })
            }
        },
        Command::Checkpoint(checkpoint) => match checkpoint {
            CheckpointCommand::Save { description, highlights, files, context, session, workspace, global } => {
                let request = CheckpointSaveRequest {
                    description: Some(description.clone()),
                    highlights: highlights.clone(),
                    active_files: files.clone(),
                    work_context: context.clone(),
                    session_id: session.clone(),
                    workspace: workspace.clone(),
                    global: *global,
                    ..CheckpointSaveRequest::default()
                };
                typed(Op::CheckpointSave, request)
            }
            CheckpointCommand::Restore { id, session, workspace, depth } => {
                let request = CheckpointRestoreRequest {
                    checkpoint_id: id.clone(),
                    query: None,
                    session_id: session.clone(),
                    workspace: workspace.clone(),
                    depth: choice("depth", depth.as_ref())?,
                };
                typed(Op::CheckpointRestore, request)
            }
            CheckpointCommand::Search { query, since, workspace, limit } => {
                let request = CheckpointSearchRequest {
                    query: query.clone(),
                    since: since.clone(),
                    workspace: workspace.clone(),
                    limit: *limit,
                };
                typed(Op::CheckpointSearch, request)
            }
            CheckpointCommand::Timeline { range, detailed, workspace } => {
                let format = if *detailed { TimelineFormat::Detailed } else { TimelineFormat::Compact };
                let request = CheckpointTimelineRequest {
                    range: range.clone(),
                    format: Some(format),
                    workspace: workspace.clone(),
                };
                typed(Op::CheckpointTimeline, request)
            }
        },
        Command::Knowledge(knowledge) => match knowledge {
            KnowledgeCommand::Save { id, content, keywords, scope, source, if_version } => {
                let request = KnowledgeSaveRequest {
                    id: id.clone(),
                    content: input::text(content.as_deref(), "note")?,
                    keywords: keywords.clone(),
                    scope: scope.clone(),
                    source: source.clone(),
                    expected_version: *if_version,
                    ..KnowledgeSaveRequest::default()
                };
                typed(Op::KnowledgeSave, request)
            }
            KnowledgeCommand::Recall { query, scope, max_tokens, limit } => {
                let request = KnowledgeRecallRequest {
                    query: query.clone(),
                    scope: scope.clone(),
                    max_tokens: *max_tokens,
                    limit: *limit,
                };
                typed(Op::KnowledgeRecall, request)
            }
            KnowledgeCommand::Ls { prefix, scope } => {
                let request = KnowledgeListRequest {
                    prefix: prefix.clone(),
                    scope: scope.clone(),
                    ..KnowledgeListRequest::default()
                };
                typed(Op::KnowledgeList, request)
            }
            KnowledgeCommand::Del { id, if_version } => {
                let request = KnowledgeDeleteRequest {
                    id: id.clone(),
                    expected_version: *if_version,
                    ..KnowledgeDeleteRequest::default()
                };
                typed(Op::KnowledgeDelete, request)
            }
        },
        Command::Health => typed(Op::StateHealth, HealthRequest {}),
        Command::Usage { prefix } => typed(Op::StoreUsage, UsageRequest { prefix: prefix.clone() }),
        Command::Call { operation: None, .. } => bail!("`call` without an operation lists them: not one call"),
        Command::Call { operation: Some(operation), args: given } => {
            let Some(op) = Operation::from_id(operation) else {
                bail!("no operation `{operation}`: give profile/name, e.g. native/state_get or sage/recall_knowledge");
            };
            let given = match given.as_deref() {
                None => json!({}),
                some => input::json(some, "arguments", false)?,
            };
            Ok((op, given))
        }
    }
}

/// Every operation: its id, the command that runs it (or why only `call` does), and what it
/// does, as the catalog declares them.
pub(crate) fn catalog_listing(profile: Option<&str>) -> Vec<Value> {
    use state_api::catalog::Cli;
    Operation::all()
        .filter(|op| profile.is_none_or(|p| op.spec().profile.name() == p))
        .map(|op| {
            let spec = op.spec();
            let (command, call_only) = match spec.cli {
                Cli::Command(words) => (Some(format!("statectl {words}")), None),
                Cli::CallOnly(why) => (None, Some(why)),
            };
            json!({"operation": op.id(), "command": command, "call_only": call_only, "description": spec.description})
        })
        .collect()
}

/// A file argument of `txn`: `-` is stdin, anything else a path.
fn as_input(file: &str) -> String {
    if file == "-" { file.to_owned() } else { format!("@{file}") }
}

#[cfg(test)]
mod tests;
