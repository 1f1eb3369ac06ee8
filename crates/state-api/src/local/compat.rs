//! Compatibility profiles: translate each replaced server's arguments into engine calls and
//! the results back into its shapes (the shapes themselves are defined in
//! `state_compat`).

use std::collections::BTreeMap;

use crate::catalog::{Operation, Profile};
use serde_json::{Value, json};
use state_compat::{agentcheckpoint as ac, caxton as cx, goldfish as gf, sage as sg, sidecar as sc};
use state_core::InvalidInput;
use state_core::limits::{MAX_PAGE, MAX_TXN_OPS};
use state_core::ops::ReadStatus;
use state_core::ops::admin::{RESET_CONFIRMATION, ResetRequest};
use state_core::ops::checkpoint::{CheckpointRestoreRequest, Depth, RestoreStatus};
use state_core::ops::history::{HistoryKind, HistoryOp, HistoryRequest};
use state_core::ops::knowledge::{KnowledgeRecallRequest, KnowledgeSaveRequest};
use state_core::ops::kv::{BatchGetRequest, DeleteRequest, GetRequest, ListRequest, ListedEntry, SetRequest};
use state_core::ops::lease::AcquireRequest;
use state_core::ops::session::{SessionRestoreRequest, SessionSaveRequest};
use state_core::ops::txn::{TxnOp, TxnRequest};
use state_core::ops::workflow::{CreateRunRequest, FoundStatus, ListRunsRequest, RunRequest, RunSummary};

use state_store::{Engine, EngineError};

use super::{CallError, compat_reply, encode, parse};
use crate::classify::Classify;
use crate::reply::{Outcome, Reply};

fn get(key: String) -> GetRequest {
    GetRequest { key, version: None, revision: None }
}

/// Every user key under `prefix`, read a page at a time.
async fn all_keys(engine: &Engine, prefix: &str) -> Result<Vec<ListedEntry>, EngineError> {
    let mut entries = Vec::new();
    let mut cursor = None;
    loop {
        let page = engine
            .list(ListRequest { prefix: prefix.to_owned(), limit: Some(MAX_PAGE), cursor, include_values: false })
            .await?;
        entries.extend(page.entries);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(entries),
        }
    }
}

/// Every workflow run, oldest first.
async fn all_runs(engine: &Engine) -> Result<Vec<RunSummary>, EngineError> {
    let mut runs = Vec::new();
    let mut cursor = None;
    loop {
        let page =
            engine.workflow_list(ListRunsRequest { limit: Some(MAX_PAGE), cursor, ..Default::default() }).await?;
        runs.extend(page.runs);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(runs),
        }
    }
}

/// Calls a compatibility operation; `id` is the idempotency key for a mutating one.
pub(super) async fn call(engine: &Engine, op: Operation, args: Value, id: Option<String>) -> Result<Reply, CallError> {
    let value = match op.spec().profile {
        Profile::AgentCheckpoint => agentcheckpoint(engine, op, args, id).await?,
        Profile::Sidecar => sidecar(engine, op, args, id).await?,
        Profile::Caxton => caxton(engine, op, args, id).await?,
        Profile::Sage => sage(engine, op, args, id).await?,
        Profile::Goldfish => return goldfish(engine, args, id).await,
        Profile::Native => return Err(CallError::Arguments(format!("`{}` is not a compatibility operation", op.id()))),
    };
    Ok(compat_reply(value))
}

/// A subject that server reported missing by raising an error: here, a not-found error.
fn missing(message: String) -> CallError {
    CallError::NotFound(message)
}

fn not_this_profile(op: Operation) -> CallError {
    CallError::Arguments(format!("`{}` is not an operation of this profile", op.id()))
}

async fn agentcheckpoint(engine: &Engine, op: Operation, args: Value, id: Option<String>) -> Result<Value, CallError> {
    // That server reported unstorable input as a normal result with `status: error`, which
    // its users' prompts already handle.
    let legacy = |result: Result<Value, EngineError>| match result {
        Ok(value) => Ok(value),
        Err(EngineError::Invalid(invalid)) => Ok(ac::error(invalid)),
        Err(other) => Err(CallError::from(other)),
    };
    match op {
        Operation::AgentCheckpointGetState => {
            let args: ac::GetStateArgs = parse(args)?;
            legacy(engine.get(get(args.key)).await.map(|r| ac::get_response(&r)))
        }
        Operation::AgentCheckpointSetState | Operation::AgentCheckpointForceSetState => {
            let (key, value, expected) = if op == Operation::AgentCheckpointSetState {
                let a: ac::SetStateArgs = parse(args)?;
                (a.key, a.value, a.expected_version)
            } else {
                let a: ac::ForceSetStateArgs = parse(args)?;
                (a.key, a.value, -1)
            };
            let value = match ac::parse_value(&value) {
                Ok(value) => value,
                Err(response) => return Ok(response),
            };
            let req = SetRequest { request_id: id, ..ac::set_request(key, value, expected) };
            legacy(engine.set(req).await.map(|r| ac::set_response(expected, &r)))
        }
        Operation::AgentCheckpointListState => {
            let args: ac::ListStateArgs = parse(args)?;
            let like = ac::LikePattern::new(&args.pattern);
            let prefix = like.scan_prefix().unwrap_or_default();
            legacy(all_keys(engine, &prefix).await.map(|entries| {
                let matched: Vec<ListedEntry> = entries.into_iter().filter(|e| like.matches(&e.key)).collect();
                ac::list_response(&matched)
            }))
        }
        Operation::AgentCheckpointDeleteState => {
            let args: ac::DeleteStateArgs = parse(args)?;
            let key = args.key.clone();
            let req = DeleteRequest { request_id: id, ..ac::delete_request(args.key) };
            legacy(engine.delete(req).await.map(|_| ac::delete_response(&key)))
        }
        other => Err(not_this_profile(other)),
    }
}

async fn sage(engine: &Engine, op: Operation, args: Value, id: Option<String>) -> Result<Value, CallError> {
    use Operation::*;
    match op {
        SageSaveCheckpoint => {
            let saved = engine.checkpoint_save(parse::<sg::SaveCheckpointArgs>(args)?.into_request(id)).await?;
            let path = saved.uri;
            encode(&sg::SaveCheckpointResult { checkpoint_id: saved.checkpoint_id, path })
        }
        SageListCheckpoints => {
            let a: sg::ListCheckpointsArgs = parse(args)?;
            let limit = state_core::ops::checkpoint::bounded_limit("limit", Some(a.limit), 10, MAX_PAGE)?;
            let recent = engine.checkpoint_recent(limit, a.skill).await?;
            encode(&sg::ListCheckpointsResult { checkpoints: recent.iter().map(sg::listed).collect() })
        }
        SageLoadCheckpoint => {
            let a: sg::LoadCheckpointArgs = parse(args)?;
            let request = CheckpointRestoreRequest {
                checkpoint_id: Some(a.checkpoint_id.clone()),
                depth: Some(Depth::Full),
                ..CheckpointRestoreRequest::default()
            };
            let restored = engine.checkpoint_restore(request).await?;
            match (restored.status, restored.checkpoint) {
                (RestoreStatus::Ok, Some(checkpoint)) => {
                    let formatted_context =
                        state_core::checkpoint::context(sg::RESTORED_TITLE, &checkpoint, &restored.session_highlights);
                    encode(&sg::LoadCheckpointResult { checkpoint: encode(&checkpoint)?, formatted_context })
                }
                (RestoreStatus::Ambiguous, _) => Err(CallError::Arguments(format!(
                    "`checkpoint_id` `{}` matches several checkpoints: {}; give more of the id",
                    a.checkpoint_id,
                    restored.candidates.join(", ")
                ))),
                _ => Err(missing(format!("no checkpoint matches `{}`", a.checkpoint_id))),
            }
        }
        SageSaveKnowledge => {
            let a: sg::SaveKnowledgeArgs = parse(args)?;
            let request = KnowledgeSaveRequest {
                id: a.id,
                content: a.content,
                keywords: a.keywords,
                scope: a.skill,
                source: a.source,
                request_id: id,
                ..KnowledgeSaveRequest::default()
            };
            let saved = engine.knowledge_save(request).await?;
            encode(&sg::SaveKnowledgeResult { id: saved.id, version: saved.version, tokens: saved.tokens })
        }
        SageRecallKnowledge => {
            let a: sg::RecallKnowledgeArgs = parse(args)?;
            let request =
                KnowledgeRecallRequest { query: a.query, scope: a.skill, ..KnowledgeRecallRequest::default() };
            let recalled = engine.knowledge_recall(request).await?;
            let items: Vec<sg::RecalledItem> = recalled
                .items
                .into_iter()
                .map(|i| sg::RecalledItem {
                    id: i.id,
                    content: i.content,
                    source: i.source.unwrap_or_default(),
                    tokens: i.tokens,
                })
                .collect();
            let formatted_context =
                if items.is_empty() { sg::NOTHING_RECALLED.to_owned() } else { recalled.formatted_context };
            encode(&sg::RecallKnowledgeResult { items, total_tokens: recalled.total_tokens, formatted_context })
        }
        other => Err(not_this_profile(other)),
    }
}

/// Goldfish's `checkpoint`: every answer is text in the asked format, failures included, as
/// that server wrote them; the outcome class still says what happened.
async fn goldfish(engine: &Engine, args: Value, id: Option<String>) -> Result<Reply, CallError> {
    let text = |outcome, text: String| Ok(Reply::result(outcome, Value::String(text)));
    let args: gf::CheckpointArgs = match parse(args) {
        Ok(args) => args,
        Err(CallError::Arguments(message)) => return text(Outcome::Invalid, gf::error_text(&message)),
        Err(other) => return Err(other),
    };
    let action = match gf::action(&args) {
        Ok(action) => action,
        Err(unknown) => return text(Outcome::Invalid, gf::unknown_action(&unknown)),
    };
    let format = args.output();
    let answer = match action {
        gf::Action::Save => {
            let description = args.description.clone().unwrap_or_default();
            engine
                .checkpoint_save(args.save_request(id))
                .await
                .map(|r| (Outcome::Ok, gf::saved(format, &description, &r)))
        }
        gf::Action::Restore => match args.restore_request() {
            Err(message) => return text(Outcome::Invalid, gf::error_text(&message)),
            Ok(request) => engine.checkpoint_restore(request).await.map(|r| (r.outcome(), gf::restored(format, &r))),
        },
        gf::Action::Search => match args.search_request() {
            Err(message) => return text(Outcome::Invalid, gf::error_text(&message)),
            Ok(request) => {
                let query = request.query.clone();
                engine.checkpoint_search(request).await.map(|r| (Outcome::Ok, gf::found(format, &query, &r)))
            }
        },
        gf::Action::Timeline => {
            engine.checkpoint_timeline(args.timeline_request()).await.map(|r| (Outcome::Ok, gf::timeline(format, &r)))
        }
    };
    match answer {
        Ok((outcome, answer)) => text(outcome, answer),
        Err(EngineError::Invalid(invalid)) => text(Outcome::Invalid, gf::error_text(&invalid.to_string())),
        Err(other) => Err(other.into()),
    }
}

async fn sidecar(engine: &Engine, op: Operation, args: Value, id: Option<String>) -> Result<Value, CallError> {
    use Operation::*;
    match op {
        SidecarStateSet => {
            let a: sc::StateSetArgs = parse(args)?;
            let ttl_seconds = a.ttl_seconds.map(|s| s as f64);
            engine
                .set(SetRequest {
                    ttl_seconds,
                    agent_id: a.agent_id,
                    request_id: id,
                    ..SetRequest::new(a.key, a.value)
                })
                .await?;
            encode(&sc::OkResult { ok: true })
        }
        SidecarStateGet => {
            let a: sc::KeyArgs = parse(args)?;
            let got = engine.get(get(a.key)).await?;
            let found = got.status == ReadStatus::Ok;
            encode(&sc::GetResult { key: got.key, value: got.value, found })
        }
        SidecarStateDelete => {
            let a: sc::KeyArgs = parse(args)?;
            let deleted =
                engine.delete(DeleteRequest { key: a.key, request_id: id, ..DeleteRequest::default() }).await?;
            encode(&sc::OkResult { ok: deleted.status == state_core::ops::DeleteStatus::Ok })
        }
        SidecarStateList => {
            let a: sc::StateListArgs = parse(args)?;
            let keys = all_keys(engine, a.prefix.as_deref().unwrap_or("")).await?.into_iter().map(|e| e.key).collect();
            encode(&sc::KeysResult { keys })
        }
        SidecarWorkflowCreate => {
            let a: sc::WorkflowCreateArgs = parse(args)?;
            let req = CreateRunRequest {
                name: a.name,
                tags: a.tags.unwrap_or_default(),
                input: Value::Null,
                max_attempts: None,
                agent_id: None,
                request_id: id,
            };
            let created = engine.workflow_create(req).await?;
            encode(&sc::CreateResult { run_id: created.run_id, name: created.name, status: "created".into() })
        }
        SidecarWorkflowDiscover => {
            let a: sc::DiscoverArgs = parse(args)?;
            encode(&sc::runs_newest_first(&all_runs(engine).await?, a.status.as_deref(), a.tags.as_ref()))
        }
        SidecarWorkflowList => {
            parse::<sc::NoArgs>(args)?;
            encode(&sc::runs_newest_first(&all_runs(engine).await?, None, None))
        }
        SidecarWorkflowClaim => {
            let a: sc::ClaimArgs = parse(args)?;
            let result = engine.workflow_claim_without_lease(a.run_id.clone(), a.agent_id.clone(), id).await?;
            let current = engine.workflow_status(RunRequest { run_id: a.run_id.clone() }).await?.run;
            encode(&sc::claim_result(&a.run_id, &a.agent_id, &result, current.as_ref()))
        }
        SidecarWorkflowCheckpoint => {
            let a: sc::CheckpointArgs = parse(args)?;
            let done = engine.workflow_checkpoint_unfenced(a.run_id.clone(), a.step, a.output, id).await?;
            if done.status == state_core::ops::workflow::CheckpointStatus::NotFound {
                return Err(missing(format!("Workflow '{}' not found", a.run_id)));
            }
            encode(&sc::CheckpointResultShape { ok: true, run_id: a.run_id, step: a.step })
        }
        SidecarWorkflowResume => {
            let a: sc::RunIdArgs = parse(args)?;
            let resumed = engine.workflow_resume(RunRequest { run_id: a.run_id.clone() }).await?;
            match (&resumed.status, &resumed.run) {
                (FoundStatus::Ok, Some(run)) => encode(&sc::resume_context(&resumed, run)),
                _ => Err(missing(format!("Workflow '{}' not found", a.run_id))),
            }
        }
        SidecarWorkflowStatus => {
            let a: sc::RunIdArgs = parse(args)?;
            match engine.workflow_status(RunRequest { run_id: a.run_id.clone() }).await?.run {
                Some(run) => encode(&sc::status_result(&run)),
                None => Err(missing(format!("Workflow '{}' not found", a.run_id))),
            }
        }
        SidecarLeaseAcquire => {
            let a: sc::LeaseArgs = parse(args)?;
            let req = AcquireRequest {
                resource_id: a.resource_id,
                holder_id: a.holder_id,
                ttl_seconds: a.ttl_seconds as f64,
                request_id: id,
            };
            encode(&sc::lease_result(&engine.lease_acquire(req).await?))
        }
        SidecarLeaseRelease => {
            let a: sc::LeaseReleaseArgs = parse(args)?;
            encode(&sc::release_result(&engine.lease_release_by_holder(a.resource_id, a.holder_id, id).await?))
        }
        SidecarLeaseRenew => {
            let a: sc::LeaseArgs = parse(args)?;
            encode(&sc::renew_result(
                &engine.lease_renew_by_holder(a.resource_id, a.holder_id, a.ttl_seconds as f64, id).await?,
            ))
        }
        SidecarHealth => {
            parse::<sc::NoArgs>(args)?;
            let health = engine.health().await?;
            let workflow_count = engine.run_count().await?;
            encode(&sc::HealthResult {
                status: "ok".into(),
                backend: health.backend,
                uptime_s: health.uptime_seconds as f64,
                key_count: health.keys.unwrap_or(0),
                workflow_count,
                version: health.server_version,
            })
        }
        SidecarReset => {
            parse::<sc::NoArgs>(args)?;
            // That server wiped on request without confirmation; its users' calls carry none.
            let reset = engine
                .reset(ResetRequest { confirm: RESET_CONFIRMATION.into(), agent_id: None, request_id: id })
                .await?;
            encode(&sc::ResetResult { ok: true, cleared: reset.removed })
        }
        SidecarSessionSave => {
            let a: sc::SessionSaveArgs = parse(args)?;
            let req = SessionSaveRequest {
                session_id: a.session_id.clone(),
                context: Value::Object(a.context),
                agent_id: None,
                request_id: id,
            };
            engine.session_save(req).await?;
            encode(&sc::SessionSaveResult { ok: true, session_id: a.session_id })
        }
        SidecarSessionRestore => {
            let a: sc::SessionIdArgs = parse(args)?;
            let restored = engine
                .session_restore(SessionRestoreRequest { session_id: a.session_id.clone(), version: None })
                .await?;
            let found = restored.status == ReadStatus::Ok;
            encode(&sc::SessionRestoreResult { found, session_id: a.session_id, context: restored.context })
        }
        SidecarHistoryLog => {
            let a: sc::HistoryArgs = parse(args)?;
            encode(&sidecar_history(engine, a).await?)
        }
        other => Err(not_this_profile(other)),
    }
}

/// That server logged key writes only, newest first, each with the value it replaced. Our
/// history also holds deletes and expiries, so a few times `n` events are read to find `n`
/// writes (at most one page, 1000 events).
async fn sidecar_history(engine: &Engine, args: sc::HistoryArgs) -> Result<sc::HistoryLogResult, CallError> {
    if args.n == 0 {
        return Err(InvalidInput::OutOfRange { argument: "n", message: "must be 1 or more".into() }.into());
    }
    let req = HistoryRequest {
        kind: Some(HistoryKind::Kv),
        key: args.key,
        n: Some(MAX_PAGE.min(args.n * 4)),
        ..Default::default()
    };
    let events = engine.history(req).await?.events;
    let mut entries = Vec::new();
    for event in events.iter().rev().filter(|e| e.op == HistoryOp::Put).take(args.n) {
        let previous = if event.version > 1 {
            let at = GetRequest { key: event.key.clone(), version: Some(event.version - 1), revision: None };
            engine.get(at).await.ok().and_then(|r| r.value)
        } else {
            None
        };
        entries.push(sc::HistoryEntry::new(event, previous));
    }
    let total = entries.len();
    Ok(sc::HistoryLogResult { entries, total })
}

async fn caxton(engine: &Engine, op: Operation, args: Value, id: Option<String>) -> Result<Value, CallError> {
    use Operation::*;
    match op {
        CaxtonStore => {
            let a: cx::StoreArgs = parse(args)?;
            engine.set(SetRequest { request_id: id, ..SetRequest::new(a.key, a.value) }).await?;
            Ok(Value::Null)
        }
        CaxtonRetrieve => {
            let a: cx::KeyArgs = parse(args)?;
            Ok(engine.get(get(a.key)).await?.value.unwrap_or(Value::Null))
        }
        CaxtonDelete => {
            let a: cx::KeyArgs = parse(args)?;
            engine.delete(DeleteRequest { key: a.key, request_id: id, ..DeleteRequest::default() }).await?;
            Ok(Value::Null)
        }
        CaxtonList => {
            let a: cx::ListArgs = parse(args)?;
            let keys: Vec<String> = all_keys(engine, &a.prefix).await?.into_iter().map(|e| e.key).collect();
            Ok(json!(keys))
        }
        CaxtonExists => {
            let a: cx::KeyArgs = parse(args)?;
            Ok(json!(engine.get(get(a.key)).await?.status == ReadStatus::Ok))
        }
        CaxtonBatchStore => {
            let a: cx::BatchStoreArgs = parse(args)?;
            if a.items.len() > MAX_TXN_OPS {
                return Err(
                    InvalidInput::TooMany { argument: "items".into(), len: a.items.len(), max: MAX_TXN_OPS }.into()
                );
            }
            // The same key twice: the last value wins, as storing them one by one would do.
            let mut last: BTreeMap<String, usize> = BTreeMap::new();
            for (i, (key, _)) in a.items.iter().enumerate() {
                last.insert(key.clone(), i);
            }
            let success = a
                .items
                .into_iter()
                .enumerate()
                .filter(|(i, (key, _))| last.get(key) == Some(i))
                .map(|(_, (key, value))| TxnOp::Put { key, value, ttl_seconds: None })
                .collect();
            engine.txn(TxnRequest { success, request_id: id, ..TxnRequest::default() }).await?;
            Ok(Value::Null)
        }
        CaxtonBatchRetrieve => {
            let a: cx::BatchRetrieveArgs = parse(args)?;
            if a.keys.is_empty() {
                return Ok(json!([]));
            }
            let got = engine.batch_get(BatchGetRequest { keys: a.keys }).await?;
            Ok(Value::Array(got.entries.into_iter().map(|e| e.value.unwrap_or(Value::Null)).collect()))
        }
        other => Err(not_this_profile(other)),
    }
}
