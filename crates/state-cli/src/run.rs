//! Running one `statectl` command: read its input, reach the store, run the command's
//! operation through the seam, print the result, and give the exit code of its outcome class.

use std::io::IsTerminal;

use anyhow::{Context, Result};
use serde_json::{Value, json};
use state_api::auth::Caller;
use state_api::catalog::Operation;
use state_api::{Api, HttpError, Reply};
use state_boot::reach::{self, ReachError};
use state_core::ops::watch::WatchRequest;

use crate::cli::{Cli, TopCommand};
use crate::commands::{self, Command};
use crate::{doctor, exit, output, transfer, tui};

/// The exit code of a store that could not be reached: the flags are wrong (2), the server
/// refused the token (7), or nothing answered (6).
fn connect_failure(error: &ReachError) -> u8 {
    match error {
        ReachError::Http(HttpError::Url { .. } | HttpError::Token) | ReachError::StandaloneWithServer => exit::USAGE,
        ReachError::Http(HttpError::Refused { outcome, .. }) => exit::of(*outcome),
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

/// `statectl recover`: the database alone, never through an owner (one holding it is refused).
fn recover(cli: &Cli, accept_lost_writes: bool) -> Result<u8> {
    anyhow::ensure!(cli.server.server.is_none(), "recover opens a database file; it cannot run against --server");
    let db = cli.store.database.database()?;
    anyhow::ensure!(db.exists(), "there is no database at {}", db.display());
    match state_api::recover_database(&db, accept_lost_writes) {
        Ok(state_api::Recovery::NotNeeded) => {
            outln!("{} opens as it is: nothing to recover", db.display());
            Ok(exit::OK)
        }
        Ok(state_api::Recovery::WouldLose { why, log }) => {
            outln!("{}: {why}.", db.display());
            outln!(
                "If this database's own log is elsewhere, put it at {} and open the database as usual. Otherwise run \
                 `statectl recover --db {} --accept-lost-writes` to open it with what it holds.",
                log.display(),
                db.display()
            );
            Ok(exit::FAILURE)
        }
        Ok(state_api::Recovery::Recovered { why }) => {
            outln!("recovered {}: {why}; it now opens with what it held", db.display());
            Ok(exit::OK)
        }
        Err(error) => {
            eprintln!("statectl: {error}");
            Ok(exit::FAILURE)
        }
    }
}

/// Runs the command; the exit code, or an error that is the command line's fault.
pub async fn run(cli: &Cli) -> Result<u8> {
    let TopCommand::Store(command) = &cli.command else {
        anyhow::bail!("`owner` and `generate` run before a store is reached");
    };
    if let Command::Doctor = command {
        return doctor::doctor(cli, cli.json).await;
    }
    if let Command::Recover { accept_lost_writes } = command {
        return recover(cli, *accept_lost_writes);
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
    if cli.server.server.is_none() && !writes {
        let db = cli.store.database.database()?;
        anyhow::ensure!(
            db.exists(),
            "there is no database at {}: reads never create one (check --db or STATE_DB; the first write, or state-mcp / state-http, creates it)",
            db.display()
        );
    }
    let api = match cli.connect().await {
        Ok(api) => api,
        Err(e) => {
            eprintln!("statectl: {e:#}");
            return Ok(connect_failure(&e));
        }
    };
    if let Command::Tui { prefix } = command {
        let mut target = reach::target(&cli.store, &cli.server);
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
        (Command::History { key: Some(key), prefix: None, .. }, Some((op, args))) if key.ends_with('/') => {
            let reply = api.call(op, args).await;
            let none = reply.body.as_ref().is_ok_and(|b| b["events"].as_array().is_some_and(Vec::is_empty));
            if none {
                // A key ending in `/` names one key, but its author likely meant everything under it.
                eprintln!("statectl: no changes of the key `{key}` itself; for everything under it: --prefix {key}");
            }
            print(reply, cli.json)
        }
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
async fn list_all(api: &Api, op: Operation, args: Value, limit: Option<usize>) -> Reply {
    let mut pages = state_api::Pages::new(api.clone(), op, args);
    let mut entries: Vec<Value> = Vec::new();
    let mut last = None;
    while let Some(reply) = pages.next().await {
        let Ok(mut page) = reply.body else { return reply };
        if let Some(Value::Array(more)) = page.get_mut("entries").map(Value::take) {
            entries.extend(more);
        }
        last = Some((reply.outcome, page));
        if limit.is_some_and(|l| entries.len() >= l) {
            break;
        }
    }
    let Some((outcome, mut page)) = last else { return Reply::result(state_api::Outcome::Ok, json!({})) };
    if let Some(l) = limit {
        entries.truncate(l);
    }
    page["entries"] = Value::Array(entries);
    if let Some(map) = page.as_object_mut() {
        map.remove("next_cursor");
    }
    Reply::result(outcome, page)
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
    let mut watcher = match api.watch(&Caller::LocalUser, request).await {
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
