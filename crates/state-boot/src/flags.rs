//! Command-line flags the frontends share, so `--db`, `--compat` and `--tools` mean the same in
//! every binary, and the `owner` mode every binary can run.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use state_api::catalog::{Profile, ToolGroup};
use state_api::{JoinConfig, Options, OwnerLauncher, Settings};

/// A `state-http` to use instead of a local database.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// A state-http to use instead of a local database, e.g. http://10.0.0.5:7478 (not with
    /// --standalone)
    #[arg(long, env = "STATE_SERVER", value_name = "URL")]
    pub server: Option<String>,

    /// Bearer token for --server (prefer the environment: a command line is visible to others)
    #[arg(long, env = "STATE_TOKEN", value_name = "TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// The log filter for stderr. Its default is each binary's ([`with_log_default`]).
#[derive(Debug, Clone, clap::Args)]
pub struct LogArgs {
    /// Log filter for stderr, e.g. "info" or "state_api=debug"
    #[arg(long, env = "STATE_LOG", value_name = "FILTER", default_value = "info")]
    pub log: String,
}

/// `command` with `--log` defaulting to `filter`: a server logs what it does, `statectl`
/// only what went wrong.
pub fn with_log_default(command: clap::Command, filter: &'static str) -> clap::Command {
    command.mut_arg("log", |arg| arg.default_value(filter))
}

/// Parses the command line against `command` (a binary's own, adjusted), exiting with clap's
/// message and code on a bad one, as `Parser::parse` does.
pub fn parse<T: clap::FromArgMatches>(command: clap::Command) -> T {
    let matches = command.get_matches();
    T::from_arg_matches(&matches).unwrap_or_else(|error| error.exit())
}

/// Which database, and where its owner's socket lives.
#[derive(Debug, Clone, clap::Args)]
pub struct DatabaseArgs {
    /// Database file [default: state/state.redb in the data directory: ~/.local/share ($XDG_DATA_HOME) on Linux, ~/Library/Application Support on macOS]
    #[arg(long, env = "STATE_DB", value_name = "PATH")]
    pub db: Option<PathBuf>,

    /// Directory for owner sockets, private to this user [default: $XDG_RUNTIME_DIR/state, else state-<uid> in $TMPDIR or /tmp]
    #[arg(long, env = "STATE_RUNTIME_DIR", value_name = "DIR")]
    pub runtime_dir: Option<PathBuf>,
}

impl DatabaseArgs {
    /// The database path, or the per-user default.
    pub fn database(&self) -> Result<PathBuf, NoDataDir> {
        database_path(self.db.as_deref())
    }
}

/// Engine-wide settings. Several processes share one engine, the owner's: its settings apply.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct EngineArgs {
    /// Largest value accepted, in bytes of JSON [default: 1048576]; the owner's setting applies
    #[arg(long, env = "STATE_MAX_VALUE_BYTES", value_name = "BYTES")]
    pub max_value_bytes: Option<usize>,

    /// Revisions of history to keep, older ones are compacted; 0 keeps all [default: 100000];
    /// the owner's setting applies
    #[arg(long, env = "STATE_HISTORY_RETENTION", value_name = "N")]
    pub history_retention: Option<u64>,

    /// Memory for changes watchers have not taken yet, all watchers together [default:
    /// 67108864]; past it they catch up from history. The owner's setting applies
    #[arg(long, env = "STATE_WATCH_BUFFER_BYTES", value_name = "BYTES")]
    pub watch_buffer_bytes: Option<usize>,

    /// The database's page cache in bytes [default: half the file at open, 8 to 64 MiB]; the
    /// kernel caches the rest of the file. The owner's setting applies
    #[arg(long, env = "STATE_CACHE_SIZE", value_name = "BYTES")]
    pub cache_size: Option<u64>,
}

impl EngineArgs {
    pub fn settings(&self) -> Settings {
        Settings {
            max_value_bytes: self.max_value_bytes,
            history_retention: self.history_retention,
            watch_buffer_bytes: self.watch_buffer_bytes,
            cache_bytes: self.cache_size,
        }
    }
}

/// Where and how a client reaches the database.
#[derive(Debug, Clone, clap::Args)]
pub struct StoreArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,

    #[command(flatten)]
    pub engine: EngineArgs,

    /// Hold the database in this process alone instead of sharing it through its owner (for
    /// embedding and tests); other processes cannot open it meanwhile
    #[arg(long)]
    pub standalone: bool,

    /// An owner this process starts exits after this long without clients (e.g. 30s, 5m, 1h)
    #[arg(long, env = "STATE_OWNER_IDLE", value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    pub owner_idle: Duration,

    /// An owner that answers nothing for this long (not even a ping) is hung: it is ended
    /// (SIGTERM, then SIGKILL) and another started
    #[arg(long, env = "STATE_OWNER_HANG_TIMEOUT", value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub owner_hang_timeout: Duration,
}

impl StoreArgs {
    /// How `client` (e.g. `state-mcp 0.1.0`) joins the owner of `db`, starting one with these
    /// settings if none answers.
    pub fn join_config(
        &self,
        db: &Path,
        options: Options,
        client: String,
        settle_timeout: Duration,
    ) -> std::io::Result<JoinConfig> {
        Ok(JoinConfig {
            db: db.to_owned(),
            runtime_dir: self.database.runtime_dir.clone(),
            options,
            settings: self.engine.settings(),
            client,
            launcher: self.owner_launcher(db)?,
            settle_timeout,
            hang_timeout: self.owner_hang_timeout,
        })
    }

    /// How to start an owner of `db` with these settings: this very binary, in owner mode.
    pub fn owner_launcher(&self, db: &Path) -> std::io::Result<OwnerLauncher> {
        let program = std::env::current_exe()?;
        let mut args: Vec<OsString> = vec!["owner".into(), "--notify-ready".into(), "--db".into(), db.into()];
        args.extend(["--idle".into(), format!("{}ms", self.owner_idle.as_millis()).into()]);
        if let Some(bytes) = self.engine.max_value_bytes {
            args.extend(["--max-value-bytes".into(), bytes.to_string().into()]);
        }
        if let Some(keep) = self.engine.history_retention {
            args.extend(["--history-retention".into(), keep.to_string().into()]);
        }
        if let Some(bytes) = self.engine.watch_buffer_bytes {
            args.extend(["--watch-buffer-bytes".into(), bytes.to_string().into()]);
        }
        if let Some(bytes) = self.engine.cache_size {
            args.extend(["--cache-size".into(), bytes.to_string().into()]);
        }
        Ok(OwnerLauncher { program, args })
    }
}

/// `<binary> owner`: hold a database and serve every process on it.
#[derive(Debug, Clone, clap::Args)]
pub struct OwnerArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,

    #[command(flatten)]
    pub engine: EngineArgs,

    /// Exit after this long without clients (e.g. 30s, 5m, 1h); 0s exits when the last one
    /// leaves (a new owner waits at least 1s for its first); `never` keeps it up (under a
    /// service manager)
    #[arg(long, env = "STATE_OWNER_IDLE", value_name = "DURATION", default_value = "5m", value_parser = parse_idle)]
    pub idle: Duration,

    /// Log filter for the owner's log file, e.g. "info" or "state_api=debug"
    #[arg(long, env = "STATE_LOG", default_value = "info")]
    pub log: String,

    /// Print one JSON readiness line on stdout once serving (used by the client that starts it)
    #[arg(long, hide = true)]
    pub notify_ready: bool,
}

/// Which tools a client is served.
#[derive(Debug, Clone, clap::Args)]
pub struct ToolArgs {
    /// Serve the tools of a server this one replaces, with its names and result shapes, instead
    /// of ours (add `--tools default` or groups to serve ours beside them)
    #[arg(long, value_enum, value_delimiter = ',', value_name = "PROFILE")]
    pub compat: Vec<ProfileArg>,

    /// Which of our tools to serve. `default`: a short list (state_get, state_set,
    /// state_delete, state_list, state_txn, state_watch) and state_tools, which lists the other groups and enables them
    /// for the session; every operation stays callable. Groups named alone are served and
    /// listed in full, and nothing else; `all` is every group; `none` (or "") serves none of
    /// ours (with --compat: only the replaced server's tools)
    #[arg(long, value_enum, value_delimiter = ',', value_name = "GROUPS", env = "STATE_TOOLS")]
    pub tools: Vec<GroupArg>,
}

impl ToolArgs {
    pub fn options(&self) -> Options {
        let profiles = self.compat.iter().map(|p| Profile::from(*p));
        let groups = self.tools.iter().flat_map(|g| g.groups());
        let default = self.tools.contains(&GroupArg::Default) || (self.tools.is_empty() && self.compat.is_empty());
        if default { Options::discovering(profiles, groups) } else { Options::only(profiles, groups) }
    }
}

/// A compatibility profile selectable on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProfileArg {
    /// The agentcheckpoint server's tools: get_state, set_state, force_set_state, list_state, delete_state.
    Agentcheckpoint,
    /// mcp-state-sidecar's tools by name and shape (state_*, workflow_*, lease_*, session_*,
    /// history_log, sidecar_health, sidecar_reset), replacing ours of the same name.
    Sidecar,
    /// Caxton's StateTool interface: store, retrieve, delete, list, exists, batch_store, batch_retrieve.
    Caxton,
    /// The Sage MCP design: save_checkpoint, list_checkpoints, load_checkpoint, save_knowledge,
    /// recall_knowledge.
    Sage,
    /// COA Goldfish's one `checkpoint` tool (save, restore, search, timeline inferred).
    Goldfish,
    /// The official MCP memory server's knowledge graph tools (create_entities,
    /// add_observations, read_graph, search_nodes, ...), safe across processes; imports
    /// MEMORY_FILE_PATH once.
    Memory,
}

impl From<ProfileArg> for Profile {
    fn from(arg: ProfileArg) -> Profile {
        match arg {
            ProfileArg::Agentcheckpoint => Profile::AgentCheckpoint,
            ProfileArg::Sidecar => Profile::Sidecar,
            ProfileArg::Caxton => Profile::Caxton,
            ProfileArg::Sage => Profile::Sage,
            ProfileArg::Goldfish => Profile::Goldfish,
            ProfileArg::Memory => Profile::Memory,
        }
    }
}

/// A tool group selectable on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GroupArg {
    /// Keys: get, set, delete, list, batch get, transactions, history.
    Kv,
    /// Leases with fencing tokens.
    Lease,
    /// Semaphores: permits shared by up to N holders, each fenced.
    Semaphore,
    /// Path reservations: exclusive or shared claims on files and globs of a repository.
    Paths,
    /// Queues and mailboxes: send, receive with a receipt, ack, nack, dead letters.
    Queue,
    /// Workflow runs: create, claim, checkpoint, resume, finish.
    Workflow,
    /// Versioned session snapshots.
    Session,
    /// Health and reset.
    Admin,
    /// state_watch: wait for changes instead of polling.
    Watch,
    /// Checkpoints: save, restore, search, timeline.
    Checkpoint,
    /// Knowledge notes: save, recall within a token budget, list, delete.
    Knowledge,
    /// Export and import of every record (what statectl export/import use).
    Transfer,
    /// Every group, listed in full.
    All,
    /// The short list with state_tools to discover the rest (what no --tools means).
    Default,
    /// None of ours.
    #[value(alias = "")]
    None,
}

impl GroupArg {
    /// The groups this choice lists in full: `all`, the catalog's group of the same name, or
    /// none (`default`, `none`).
    pub fn groups(self) -> Vec<ToolGroup> {
        match self {
            GroupArg::All => return ToolGroup::ALL.to_vec(),
            GroupArg::Default | GroupArg::None => return Vec::new(),
            _ => {}
        }
        let name = clap::ValueEnum::to_possible_value(&self);
        name.and_then(|n| ToolGroup::from_name(n.get_name())).into_iter().collect()
    }
}

/// `<binary> generate --dir DIR`: writes shell completions (bash, zsh, fish, elvish,
/// PowerShell) and the man page of the program `command` describes into `dir`, naming each
/// file written on stderr.
pub fn generate(command: clap::Command, dir: &Path) -> std::io::Result<()> {
    let written = write_completions_and_man_page(command, dir)
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot write into {}: {e}", dir.display())))?;
    for path in written {
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

fn write_completions_and_man_page(mut command: clap::Command, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    use clap_complete::Shell;
    std::fs::create_dir_all(dir)?;
    let name = command.get_name().to_owned();
    let mut written = Vec::new();
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish, Shell::Elvish, Shell::PowerShell] {
        written.push(clap_complete::generate_to(shell, &mut command, &name, dir)?);
    }
    let mut page = Vec::new();
    clap_mangen::Man::new(command).render(&mut page)?;
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, page)?;
    written.push(path);
    Ok(written)
}

/// The `generate` subcommand every binary has.
#[derive(Debug, Clone, clap::Args)]
pub struct GenerateArgs {
    /// Where to write them
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
}

#[derive(Debug, thiserror::Error)]
#[error(
    "no data directory is known for this user (set $HOME or $XDG_DATA_HOME), so there is no default database: pass --db PATH"
)]
pub struct NoDataDir;

/// `path`, or `$XDG_DATA_HOME/state/state.redb`.
pub fn database_path(path: Option<&Path>) -> Result<PathBuf, NoDataDir> {
    match path {
        Some(path) => Ok(path.to_owned()),
        None => Ok(dirs::data_dir().ok_or(NoDataDir)?.join("state").join("state.redb")),
    }
}

/// An idle period: a duration, or `never` (no deadline at all).
pub fn parse_idle(text: &str) -> Result<Duration, String> {
    if text.trim() == "never" { Ok(Duration::MAX) } else { parse_duration(text) }
}

/// A duration such as `250ms`, `30s`, `5m` or `1h`; a bare number is seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse().map_err(|_| format!("`{text}` is not a duration such as 500ms, 30s, 5m or 1h"))?;
    let seconds = match unit.trim() {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => return Err(format!("unknown unit `{other}` in `{text}`: use ms, s, m or h")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("`{text}`: {e}"))
}

#[cfg(test)]
mod tests;
