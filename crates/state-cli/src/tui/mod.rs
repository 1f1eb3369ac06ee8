//! `statectl tui`: the inspector. `app` holds the state and the key handling, `render` draws
//! it, `keys` is the browser's data, `diff` compares versions; this file drives them: the
//! terminal, key presses, the pages of key names loaded in the background, the watch that
//! keeps them current, and the loads each screen asks for, all through the seam.

mod app;
mod diff;
mod keys;
mod render;
mod terminal;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use ratatui::crossterm::event::{self, Event, KeyEventKind};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use state_api::Api;
use state_api::auth::Caller;
use state_api::catalog::Operation;
use state_core::UnixMillis;
use state_core::ops::NameListRequest;
use state_core::ops::checkpoint::{CheckpointTimelineRequest, TimelineFormat};
use state_core::ops::history::{HistoryOp, HistoryRequest, HistoryResult};
use state_core::ops::kv::{BatchGetRequest, BatchGetResult, GetRequest, GetResult, ListRequest, ListResult};
use state_core::ops::lease::{LeaseListRequest, LeaseListResult};
use state_core::ops::queue::QueueListResult;
use state_core::ops::reservation::ScopeListResult;
use state_core::ops::semaphore::SemaphoreListResult;
use state_core::ops::watch::{WatchBatch, WatchRequest};
use state_core::ops::workflow::{ListRunsRequest, ListRunsResult, ResumeResult, RunRequest};
use state_core::time::parse_rfc3339;
use tokio::sync::mpsc;

pub(crate) use self::app::App;
use self::app::{Coordination, Load, Loaded};
use self::keys::{Change, KeyRow};
use crate::exit;

/// Key names per listing page: the largest the store serves.
const PAGE: usize = 1000;
/// How often countdowns redraw and the workflow and lease views reload.
const TICK: Duration = Duration::from_secs(1);
/// Inputs handled between two frames at most, so a flood of changes still lets keys through.
const DRAIN: usize = 256;

enum Input {
    Key(event::KeyEvent),
    Redraw,
    Loaded(Loaded),
}

pub(crate) fn now() -> UnixMillis {
    state_api::Clock::now(&state_api::SystemClock)
}

/// Inspects the store through `api`: `target` names it on screen; `scope` is the prefix of
/// the keys and leases shown ("" for all).
pub(crate) async fn run(api: Api, target: String, scope: String) -> Result<u8> {
    let api = Arc::new(api);
    let code = inspect(&api, target, Arc::from(scope)).await;
    api.close().await;
    code
}

async fn inspect(api: &Arc<Api>, target: String, scope: Arc<str>) -> Result<u8> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    // Watch first, then list: a change made while the pages load is not missed, and one the
    // pages already show is recognised by its revision.
    let watch_request =
        WatchRequest { prefix: Some(scope.to_string()), include_values: Some(false), ..WatchRequest::default() };
    // Followed: a burst of writes that outruns the watch does not stop live updates.
    let watcher = api.follow(&Caller::LocalUser, watch_request).await;
    let mut terminal = terminal::Terminal::enter()?;
    spawn_input(tx.clone());
    tokio::spawn(load_keys(Arc::clone(api), Arc::clone(&scope), tx.clone()));
    match watcher {
        Ok(watcher) => {
            tokio::spawn(follow(Arc::clone(api), watcher, tx.clone()));
        }
        Err(error) => {
            let _ = tx.send(Input::Loaded(Loaded::Failed(format!("live updates are off: {}", error.message))));
        }
    }
    let mut app = App::new(target);
    let mut tick = tokio::time::interval(TICK);
    let mut ticks = 0u64;
    let terminate = terminate_signal();
    tokio::pin!(terminate);
    while !app.quit {
        terminal.draw(&mut app, now())?;
        let mut loads = tokio::select! {
            input = rx.recv() => match input {
                Some(input) => handle(&mut app, input),
                None => break,
            },
            _ = tick.tick() => {
                ticks += 1;
                // Reload what only time changes (leases, claims) every other second.
                app.refresh().filter(|_| ticks.is_multiple_of(2)).into_iter().collect()
            }
            _ = &mut terminate => break,
        };
        // Take whatever else has arrived before drawing again: a burst of changes or key
        // repeats costs one frame, not one each.
        for _ in 0..DRAIN {
            match rx.try_recv() {
                Ok(input) => loads.extend(handle(&mut app, input)),
                Err(_) => break,
            }
        }
        for load in loads {
            let (api, scope) = (Arc::clone(api), Arc::clone(&scope));
            let tx = tx.clone();
            tokio::spawn(async move {
                let _ = tx.send(Input::Loaded(perform(&api, &scope, load).await));
            });
        }
    }
    drop(terminal);
    Ok(exit::OK)
}

fn handle(app: &mut App, input: Input) -> Vec<Load> {
    match input {
        Input::Key(key) if key.kind != KeyEventKind::Release => app.key(key),
        Input::Loaded(loaded) => app.loaded(loaded),
        _ => Vec::new(),
    }
}

/// Key presses, read on their own thread (crossterm's read blocks). The thread ends with the
/// process; it holds nothing that needs closing.
fn spawn_input(tx: mpsc::UnboundedSender<Input>) {
    std::thread::spawn(move || {
        loop {
            let input = match event::read() {
                Ok(Event::Key(key)) => Input::Key(key),
                Ok(Event::Resize(..)) => Input::Redraw,
                Ok(_) => continue,
                Err(_) => return,
            };
            if tx.send(input).is_err() {
                return;
            }
        }
    });
}

async fn terminate_signal() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut signal) => {
            signal.recv().await;
        }
        Err(_) => std::future::pending().await,
    }
}

fn row_of(entry: &state_core::ops::kv::ListedEntry) -> KeyRow {
    KeyRow {
        key: entry.key.clone(),
        version: entry.version,
        mod_revision: entry.mod_revision,
        expires_at: entry.expires_at.as_deref().and_then(parse_rfc3339),
    }
}

/// Every key name, a page at a time, so the browser is usable after the first page.
async fn load_keys(api: Arc<Api>, scope: Arc<str>, tx: mpsc::UnboundedSender<Input>) {
    let request = ListRequest {
        prefix: scope.to_string(),
        limit: Some(PAGE),
        cursor: None,
        include_values: false,
        delimiter: None,
    };
    let mut pages = match crate::input::request_args(request) {
        Ok(args) => state_api::Pages::new((*api).clone(), Operation::StateList, args),
        Err(_) => return,
    };
    while let Some(reply) = pages.next().await {
        let page = reply
            .body
            .map_err(|e| e.message)
            .and_then(|body| serde_json::from_value::<ListResult>(body).map_err(|e| format!("unexpected answer: {e}")));
        let page = match page {
            Ok(page) => page,
            Err(message) => {
                let _ = tx.send(Input::Loaded(Loaded::Failed(format!("cannot list keys: {message}"))));
                let _ = tx.send(Input::Loaded(Loaded::KeysPage { rows: Vec::new(), done: true }));
                return;
            }
        };
        let done = page.next_cursor.is_none();
        let rows = page.entries.iter().map(row_of).collect();
        if tx.send(Input::Loaded(Loaded::KeysPage { rows, done })).is_err() || done {
            return;
        }
    }
}

async fn follow(api: Arc<Api>, mut watcher: state_api::Watcher, tx: mpsc::UnboundedSender<Input>) {
    while let Some(batch) = watcher.next().await {
        match batch {
            Ok(batch) => {
                let mut changes = changes_of(batch);
                with_expiry(&api, &mut changes).await;
                if tx.send(Input::Loaded(Loaded::Changed(changes))).is_err() {
                    return;
                }
            }
            Err(error) => {
                let _ = tx.send(Input::Loaded(Loaded::Failed(format!("live updates stopped: {}", error.message))));
                return;
            }
        }
    }
}

/// Fills in when written keys expire: a change carries no expiry, and a key written while the
/// browser is open would show none. One snapshot read per batch, of its written keys only.
async fn with_expiry(api: &Api, changes: &mut [Change]) {
    let keys: Vec<String> = changes
        .iter()
        .filter_map(|c| c.row.as_ref().map(|r| r.key.clone()))
        .take(state_core::limits::MAX_BATCH_KEYS)
        .collect();
    if keys.is_empty() {
        return;
    }
    let Ok(read) = call::<BatchGetResult>(api, Operation::StateBatchGet, BatchGetRequest { keys }).await else {
        return; // the rows show no expiry rather than nothing at all
    };
    for entry in read.entries {
        let expires_at = entry.expires_at.as_deref().and_then(parse_rfc3339);
        for row in changes.iter_mut().filter_map(|c| c.row.as_mut()).filter(|r| r.key == entry.key) {
            // Only if still the version the change wrote: a later write brings its own.
            if row.version == entry.version {
                row.expires_at = expires_at;
            }
        }
    }
}

/// A watch batch as the browser's changes: a put brings a row, a delete or an expiry takes
/// the key away.
fn changes_of(batch: WatchBatch) -> Vec<Change> {
    batch
        .events
        .into_iter()
        .map(|event| Change {
            row: (event.op == HistoryOp::Put).then(|| KeyRow {
                key: event.key.clone(),
                version: event.version,
                mod_revision: event.revision,
                expires_at: None,
            }),
            key: event.key,
            revision: event.revision,
        })
        .collect()
}

/// `op` with its typed request; its answer as the type it is read as.
async fn call<T: DeserializeOwned>(api: &Api, op: Operation, request: impl Serialize) -> Result<T, String> {
    let args = crate::input::request_args(request).map_err(|e| format!("{}: {e}", op.name()))?;
    let reply = api.call(op, args).await;
    match reply.body {
        Ok(body) => serde_json::from_value(body).map_err(|e| format!("{}: unexpected answer: {e}", op.name())),
        Err(error) => Err(error.message),
    }
}

/// The semaphores, queues and reservation scopes under `scope`: the first 1,000 of each.
async fn coordination(api: &Api, scope: &str) -> Result<Coordination, String> {
    let semaphores = NameListRequest { prefix: scope.to_owned(), limit: Some(1000), cursor: None };
    let queues = NameListRequest { prefix: scope.to_owned(), limit: Some(1000), cursor: None };
    let scopes = NameListRequest { prefix: scope.to_owned(), limit: Some(1000), cursor: None };
    let semaphores = call::<SemaphoreListResult>(api, Operation::SemaphoreList, semaphores).await?;
    let queues = call::<QueueListResult>(api, Operation::QueueList, queues).await?;
    let scopes = call::<ScopeListResult>(api, Operation::PathsScopes, scopes).await?;
    let truncated = [&semaphores.next_cursor, &queues.next_cursor, &scopes.next_cursor].map(Option::is_some);
    Ok(Coordination { semaphores: semaphores.semaphores, queues: queues.queues, scopes: scopes.scopes, truncated })
}

/// Runs one load the browser asked for; `scope` bounds the listings that take a prefix.
async fn perform(api: &Api, scope: &str, load: Load) -> Loaded {
    let outcome = match load {
        Load::Entry(key) => {
            let request = GetRequest { key, ..GetRequest::default() };
            call::<GetResult>(api, Operation::StateGet, request).await.map(|e| Loaded::Entry(Box::new(e)))
        }
        Load::History(key) => {
            let request = HistoryRequest {
                key: Some(key.clone()),
                n: Some(1000),
                include_values: Some(true),
                ..HistoryRequest::default()
            };
            call::<HistoryResult>(api, Operation::HistoryLog, request).await.map(|h| Loaded::History {
                key,
                events: h.events,
                revision: h.revision,
            })
        }
        Load::Workflows => call::<ListRunsResult>(
            api,
            Operation::WorkflowList,
            ListRunsRequest { limit: Some(1000), ..ListRunsRequest::default() },
        )
        .await
        .map(|r| Loaded::Workflows(r.runs)),
        Load::Run(run_id) => call::<ResumeResult>(api, Operation::WorkflowResume, RunRequest { run_id })
            .await
            .map(|r| Loaded::Run(Box::new(r))),
        Load::Leases => call::<LeaseListResult>(
            api,
            Operation::LeaseList,
            LeaseListRequest { prefix: scope.to_owned(), limit: Some(1000), cursor: None },
        )
        .await
        .map(|l| Loaded::Leases(l.leases)),
        Load::Coordination => coordination(api, scope).await.map(|c| Loaded::Coordination(Box::new(c))),
        Load::Checkpoints => {
            let request = CheckpointTimelineRequest {
                range: Some("30d".into()),
                format: Some(TimelineFormat::Detailed),
                workspace: None,
            };
            call::<Value>(api, Operation::CheckpointTimeline, request)
                .await
                .map(|t| Loaded::Checkpoints(t["formatted"].as_str().unwrap_or_default().to_owned()))
        }
    };
    outcome.unwrap_or_else(Loaded::Failed)
}
