//! `statectl`: the state store from the shell. Wiring only: parse the command line, reach the
//! store (join the database's owner, starting it if needed; or a `state-http` with
//! `--server`), run the command's operation through the seam, print the result, and exit with
//! the code of its outcome class.

/// `println!`, except that a reader that went away (`statectl ls | head`) ends the program
/// quietly, as it ends `cat`, instead of a panic and a backtrace.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(error) = writeln!(std::io::stdout().lock(), $($arg)*) {
            crate::stdout_failed(&error)
        }
    }};
}

mod commands;
mod doctor;
mod exit;
mod foreign;
mod input;
mod output;
mod transfer;
mod tui;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{CommandFactory, Parser, Subcommand};
use serde_json::{Value, json};
use state_api::catalog::Operation;
use state_api::cli::{OwnerArgs, StoreArgs};
use state_api::{Api, HttpConfig, HttpError, Local, Options, Reply, owner};
use state_core::ops::watch::WatchRequest;
use tracing_subscriber::fmt::writer::{BoxMakeWriter, MakeWriterExt};

use crate::commands::Command;

/// Read and change the state store from the shell: keys, leases, semaphores, path
/// reservations, queues, workflow runs, sessions, checkpoints and knowledge.
///
/// By default statectl joins the owner of the local database (--db, STATE_DB; starting one
/// if none is running), so it works beside running agents. With --server it talks to a
/// state-http anywhere. Output is text for people; --json prints the result as JSON for
/// scripts, and the exit code says what happened.
#[derive(Debug, Parser)]
#[command(name = "statectl", version, about, long_about, max_term_width = 100, after_help = AFTER_HELP, after_long_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: TopCommand,

    #[command(flatten)]
    store: StoreArgs,

    /// A state-http to use instead of a local database, e.g. http://10.0.0.5:7478
    #[arg(long, global = true, env = "STATE_SERVER", value_name = "URL")]
    server: Option<String>,

    /// Bearer token for --server (prefer the environment: a command line is visible to others)
    #[arg(long, global = true, env = "STATE_TOKEN", value_name = "TOKEN", hide_env_values = true)]
    token: Option<String>,

    /// Print results as JSON
    #[arg(long, global = true)]
    json: bool,

    /// Log filter for stderr, e.g. "info" or "state_api=debug"
    #[arg(long, global = true, env = "STATE_LOG", default_value = "warn")]
    log: String,
}

#[derive(Debug, Subcommand)]
enum TopCommand {
    #[command(flatten)]
    Store(Command),
    /// Hold a database and serve every process on it (started by clients when none runs)
    #[command(hide = true)]
    Owner(OwnerArgs),
    /// Write shell completions (bash, zsh, fish, elvish, PowerShell) and the man page into DIR
    Generate(state_api::cli::GenerateArgs),
}

const AFTER_HELP: &str = "Examples:
  statectl put jobs/42 '{\"step\": 1}' --create-only
  statectl get jobs/42 --json | jq .version
  statectl put jobs/42 @state.json --if-version 3 || echo \"changed meanwhile\"
  echo '\"done\"' | statectl put jobs/42/status
  statectl ls jobs/ --values
  statectl watch jobs/ --json
  statectl lease acquire printer --holder me --ttl 30s
  statectl lease release printer --holder me --fencing-token 7
  statectl knowledge recall \"why is the build slow\"
  statectl export --history -o backup.jsonl
  statectl import backup.jsonl --dry-run
  statectl import --from agentcheckpoint ~/.hermes/checkpoints.db
  STATE_TOKEN=... statectl --server http://host:7478 health

Exit codes:
  0  success
  1  failure (storage, internal)
  2  usage error: bad flags or invalid input
  3  not found
  4  conflict: a version, compare or lease precondition did not hold
  5  fenced: the lease or claim token is no longer current
  6  unavailable: the store could not be reached, or a write's outcome is unknown
  7  forbidden: the token does not cover it";

/// How long a command keeps trying to reach an owner or server before giving up (exit 6):
/// long enough for an owner to be started or replaced, short for a person at a prompt.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(5);

fn main() -> ExitCode {
    let cli = Cli::parse();
    let command = match cli.command {
        TopCommand::Owner(args) => return run_owner(args),
        TopCommand::Generate(args) => {
            return match state_api::cli::generate(Cli::command(), &args.dir) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(&e.into(), exit::FAILURE),
            };
        }
        TopCommand::Store(ref command) => command,
    };
    // The inspector owns the terminal: a log line would tear its screen.
    let writer = if matches!(command, Command::Tui { .. }) {
        BoxMakeWriter::new(std::io::sink)
    } else {
        BoxMakeWriter::new(std::io::stderr)
    };
    tracing_subscriber::fmt()
        .with_writer(writer)
        .with_ansi(false)
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(&cli.log).unwrap_or_else(|_| "warn".into()))
        .init();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => return fail(&anyhow::Error::new(e).context("cannot start the async runtime"), exit::FAILURE),
    };
    match runtime.block_on(run(&cli, command)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => fail(&e, exit::USAGE),
    }
}

/// stdout could not be written: a closed pipe is the reader's choice (exit 0); anything else is
/// a failure.
fn stdout_failed(error: &std::io::Error) -> ! {
    if error.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(i32::from(exit::OK));
    }
    eprintln!("statectl: cannot write to standard output: {error}");
    std::process::exit(i32::from(exit::FAILURE));
}

fn fail(error: &anyhow::Error, code: u8) -> ExitCode {
    eprintln!("statectl: {error:#}");
    ExitCode::from(code)
}

pub(crate) async fn connect(cli: &Cli) -> Result<Api> {
    if let Some(url) = &cli.server {
        anyhow::ensure!(!cli.store.standalone, "--standalone holds a local database; it cannot go with --server");
        let config = HttpConfig { url: url.clone(), token: cli.token.clone(), settle_timeout: SETTLE_TIMEOUT };
        return Ok(Api::connect_http(config).await?);
    }
    let db = cli.store.database.database()?;
    if cli.store.standalone {
        return Ok(Api::local(Local::open_standalone(&db, cli.store.engine.settings())?));
    }
    let client = format!("statectl {}", env!("CARGO_PKG_VERSION"));
    let config = cli
        .store
        .join_config(&db, Options::everything(), client, SETTLE_TIMEOUT)
        .context("cannot find this program to start an owner with")?;
    let (api, joined) = Api::join(config).await?;
    joined.report(&db, cli.store.engine.settings());
    Ok(api)
}

/// The exit code of a store that could not be reached: the URL or token given is wrong (2), the
/// server refused the token (7), or nothing answered (6).
fn connect_failure(error: &anyhow::Error) -> u8 {
    match error.downcast_ref::<HttpError>() {
        Some(HttpError::Url { .. } | HttpError::Token) => exit::USAGE,
        Some(HttpError::Refused { outcome, .. }) => exit::of(*outcome),
        _ => exit::UNAVAILABLE,
    }
}

/// `statectl call` alone (or with a profile's name): the catalog, as it declares each operation.
fn list_operations(cli: &Cli, profile: Option<&str>) -> Result<u8> {
    let listing = commands::catalog_listing(profile);
    if cli.json {
        outln!("{}", serde_json::Value::Array(listing));
        return Ok(exit::OK);
    }
    for entry in &listing {
        let how = entry["command"]
            .as_str()
            .map_or_else(|| format!("call only: {}", entry["call_only"].as_str().unwrap_or_default()), str::to_owned);
        outln!(
            "{}\n    {how}\n    {}",
            entry["operation"].as_str().unwrap_or_default(),
            entry["description"].as_str().unwrap_or_default()
        );
    }
    Ok(exit::OK)
}

/// Runs the command; the exit code, or an error that is the command line's fault.
async fn run(cli: &Cli, command: &Command) -> Result<u8> {
    if let Command::Doctor = command {
        return doctor::doctor(cli, cli.json).await;
    }
    if let Command::Call { operation, .. } = command
        && operation.as_deref().is_none_or(|o| state_api::catalog::Profile::from_name(o).is_some())
    {
        return list_operations(cli, operation.as_deref());
    }
    // Read input before reaching the store, so a bad value never starts an owner.
    let call = match command {
        Command::Watch { .. }
        | Command::Export(_)
        | Command::Import(_)
        | Command::Tui { .. }
        | Command::Backup { .. } => None,
        other => Some(commands::operation(other)?),
    };
    let loaded = match command {
        Command::Import(args) => Some(transfer::load(args)?),
        _ => None,
    };
    // A read of a database that is not there is a mistyped path, not a new store: creating one
    // (and an owner for it) would answer "not found" for everything and leave files behind.
    let writes = match (command, &call) {
        (Command::Import(_), _) => true,
        (_, Some((op, _))) => op.is_mutating(),
        _ => false,
    };
    if cli.server.is_none() && !writes {
        let db = cli.store.database.database()?;
        anyhow::ensure!(
            db.exists(),
            "there is no database at {}: reads never create one (check --db or STATE_DB; the first write, or state-mcp / state-http, creates it)",
            db.display()
        );
    }
    let api = match connect(cli).await {
        Ok(api) => api,
        Err(e) => {
            eprintln!("statectl: {e:#}");
            return Ok(connect_failure(&e));
        }
    };
    if let Command::Tui { prefix } = command {
        let mut target = match &cli.server {
            Some(url) => url.clone(),
            None => cli.store.database.database().map(|db| db.display().to_string()).unwrap_or_default(),
        };
        if !prefix.is_empty() {
            target = format!("{target} {prefix}*");
        }
        return tui::run(api, target, prefix.clone()).await;
    }
    let code = match (command, call) {
        (Command::Watch { prefix, key, kind, from, count }, _) => {
            let request = WatchRequest {
                kind: kind.as_deref().map(kind_of).transpose()?,
                key: key.clone(),
                prefix: prefix.clone().or_else(|| key.is_none().then(String::new)),
                after_revision: *from,
                ..WatchRequest::default()
            };
            watch(&api, request, *count, cli.json).await
        }
        (Command::Export(args), _) => transfer::export(&api, args, cli.json).await?,
        (Command::Backup { file }, _) => backup(&api, file, cli.json).await?,
        (Command::Import(args), _) => match loaded {
            Some(loaded) => transfer::import(&api, args, loaded, cli.json).await?,
            None => exit::USAGE,
        },
        (Command::Ls { limit, .. }, Some((op, args))) => {
            let reply = list_all(&api, op, args, *limit).await;
            print(reply, cli.json)
        }
        (Command::Get { raw: true, .. }, Some((op, args))) if !cli.json => print_raw(api.call(op, args).await),
        (_, Some((op, args))) => print(api.call(op, args).await, cli.json),
        (_, None) => exit::USAGE,
    };
    api.close().await;
    Ok(code)
}

fn kind_of(name: &str) -> Result<state_core::ops::history::HistoryKind> {
    serde_json::from_value(json!(name)).map_err(|_| {
        anyhow::anyhow!("unknown kind `{name}`: use kv, lease, semaphore, reservation, queue, workflow, session, store, checkpoint or knowledge")
    })
}

/// Every page of a listing (up to `limit` entries) as one result.
async fn list_all(api: &Api, op: Operation, mut args: Value, limit: Option<usize>) -> Reply {
    let mut entries: Vec<Value> = Vec::new();
    loop {
        let reply = api.call(op, args.clone()).await;
        let Ok(mut page) = reply.body.clone() else { return reply };
        let next = page.get("next_cursor").cloned().filter(|c| !c.is_null());
        if let Some(Value::Array(more)) = page.get_mut("entries").map(Value::take) {
            entries.extend(more);
        }
        let full = limit.is_some_and(|l| entries.len() >= l);
        match next {
            Some(cursor) if !full => args["cursor"] = cursor,
            _ => {
                if let Some(l) = limit {
                    entries.truncate(l);
                }
                page["entries"] = Value::Array(entries);
                if let Some(map) = page.as_object_mut() {
                    map.remove("next_cursor");
                }
                return Reply::result(reply.outcome, page);
            }
        }
    }
}

/// Prints a reply and gives its exit code: the result on stdout; an error's message on
/// stderr (and, with --json, its JSON on stdout).
fn print(reply: Reply, json: bool) -> u8 {
    match reply.body {
        Ok(body) => {
            outln!("{}", if json { output::json(&body) } else { output::text(&body) });
        }
        Err(error) => {
            if json {
                outln!("{}", output::json(&serde_json::to_value(&error).unwrap_or(Value::Null)));
            }
            eprintln!("statectl: {}", error.message);
        }
    }
    exit::of(reply.outcome)
}

/// `backup FILE`: the owner writes the copy (the path made absolute for it).
async fn backup(api: &Api, file: &std::path::Path, json: bool) -> Result<u8> {
    let path = std::path::absolute(file).with_context(|| format!("cannot resolve {}", file.display()))?;
    anyhow::ensure!(!path.exists(), "{} exists: a backup never overwrites a file", path.display());
    match api.backup(path).await {
        Ok(taken) => {
            if json {
                outln!("{}", output::json(&taken));
            } else {
                let megabytes = taken["bytes"].as_u64().unwrap_or(0) as f64 / 1e6;
                outln!(
                    "backed up revision {} ({megabytes:.1} MB) to {}",
                    taken["revision"],
                    taken["path"].as_str().unwrap_or("")
                );
            }
            Ok(exit::OK)
        }
        Err(error) => {
            eprintln!("statectl: {}", error.message);
            Ok(exit::of(error.code.outcome()))
        }
    }
}

/// `get --raw`: only the value, for a script to use as it is (a string unquoted, anything else
/// as compact JSON); a missing key prints nothing and exits 3.
fn print_raw(reply: Reply) -> u8 {
    match &reply.body {
        Ok(body) if reply.outcome == state_api::Outcome::Ok => match body.get("value") {
            Some(Value::String(text)) => outln!("{text}"),
            Some(value) => outln!("{value}"),
            None => {}
        },
        Ok(_) => {}
        Err(error) => eprintln!("statectl: {}", error.message),
    }
    exit::of(reply.outcome)
}

/// Prints each change as it is committed until `count` changes or Ctrl-C.
async fn watch(api: &Api, request: WatchRequest, count: Option<u64>, json: bool) -> u8 {
    let mut watcher = match api.watch(None, request).await {
        Ok(watcher) => watcher,
        Err(error) => {
            eprintln!("statectl: {}", error.message);
            return exit::of(error.code.outcome());
        }
    };
    if std::io::stderr().is_terminal() {
        eprintln!("watching from revision {} (Ctrl-C stops)", watcher.position());
    }
    let mut seen = 0u64;
    loop {
        let batch = tokio::select! {
            _ = tokio::signal::ctrl_c() => return exit::OK,
            batch = watcher.next() => batch,
        };
        match batch {
            None => return exit::UNAVAILABLE,
            Some(Err(error)) => {
                eprintln!("statectl: {}", error.message);
                return exit::of(error.code.outcome());
            }
            Some(Ok(batch)) => {
                for event in batch.events {
                    if json {
                        outln!("{}", serde_json::to_string(&event).unwrap_or_default());
                    } else {
                        let value = event.value.as_ref().map(|v| format!(" {v}")).unwrap_or_default();
                        // The operation by the name JSON gives it (`put`, not `Put`).
                        let op = serde_json::to_value(event.op).ok();
                        let op = op.as_ref().and_then(Value::as_str).unwrap_or("?");
                        outln!("{} {op} {} {}{value}", event.revision, event.key, event.version);
                    }
                    seen += 1;
                    if count.is_some_and(|c| seen >= c) {
                        return exit::OK;
                    }
                }
            }
        }
    }
}

/// Completions for every shell clap knows and the man page, for packagers (`cargo xtask dist`).
fn run_owner(args: OwnerArgs) -> ExitCode {
    let filter = args.log.clone();
    let served = owner::main(&args, |log| {
        // A detached owner has no terminal (its stderr is /dev/null); one run by hand shows its log.
        let to_terminal = std::io::stderr().is_terminal();
        let writer = (move || log.clone()).and(std::io::stderr.with_filter(move |_| to_terminal));
        let filter = tracing_subscriber::EnvFilter::try_new(&filter).unwrap_or_else(|_| "info".into());
        tracing_subscriber::fmt().with_writer(writer).with_ansi(false).with_env_filter(filter).init();
    });
    match served {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => fail(&anyhow::Error::new(e), exit::FAILURE),
    }
}
