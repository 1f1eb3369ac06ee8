//! [`Api`]: the handle every frontend holds.

use crate::catalog::Operation;
use serde_json::Value;
use state_core::ops::watch::WatchRequest;

use crate::auth::{self, Caller, Need, Principal, StorageEffect, StorageUsage};
use crate::http::{HttpConfig, HttpError, HttpRemote};
use crate::local::Local;
use crate::remote::{self, JoinConfig, JoinError, Joined, Remote};
use crate::reply::{ApiError, ErrorCode, Outcome, Reply};
use crate::watch::Watcher;
use state_core::ops::usage::UsageResult;

/// The operation seam: the store in this process, or the database's owner in another.
#[derive(Clone)]
pub struct Api {
    inner: Inner,
}

#[derive(Clone)]
enum Inner {
    Local(Local),
    Remote(Remote),
    Http(Box<HttpRemote>),
}

impl Api {
    /// Serves calls with an engine in this process.
    pub fn local(local: Local) -> Api {
        Api { inner: Inner::Local(local) }
    }

    /// Serves calls through the owner of `config.db`, starting one when none answers.
    pub async fn join(config: JoinConfig) -> Result<(Api, Joined), JoinError> {
        let (remote, joined) = remote::join(config).await?;
        Ok((Api { inner: Inner::Remote(remote) }, joined))
    }

    /// Serves calls through a `state-http` server (its `/v1/call` route), checking the URL and
    /// token with a first call.
    pub async fn connect_http(config: HttpConfig) -> Result<Api, HttpError> {
        Ok(Api { inner: Inner::Http(Box::new(HttpRemote::connect(config).await?)) })
    }

    /// Runs one operation. Never fails outright: every failure is a [`Reply`] whose outcome
    /// says what kind of failure it is.
    pub async fn call(&self, op: Operation, args: Value) -> Reply {
        self.dispatch(op, args, None, None).await
    }

    /// Runs one operation for `caller`, after checking that its token (if it is one) covers
    /// everything the call touches.
    pub async fn call_as(&self, caller: &Caller, op: Operation, args: Value) -> Reply {
        self.call_with(caller, None, op, args).await
    }

    /// [`Api::call_as`], giving a mutating call `request_id` as its idempotency key unless its
    /// arguments carry one (the REST `Idempotency-Key` header, a client's own retries).
    pub async fn call_with(&self, caller: &Caller, request_id: Option<String>, op: Operation, args: Value) -> Reply {
        let principal = match caller {
            Caller::LocalUser => return self.dispatch(op, args, request_id, None).await,
            Caller::Token(principal) => principal,
        };
        // Parsed as the store will parse it (with the caller's defaults filled in), then
        // authorized: a call that does not parse is refused before anything else.
        let args = crate::workspace::fill(op, args);
        let needs = match auth::needs(op, &args) {
            Ok(needs) => needs,
            Err(invalid) => return Reply::error(invalid),
        };
        match self.authorize(principal, op, needs).await {
            Ok(()) => {}
            Err(Denied::Refused(refused)) => return Reply::error(refused),
            Err(Denied::NotYours(run_id)) => {
                return self.as_if_absent(principal, op, args, request_id, &run_id).await;
            }
        }
        // A write the token may make, if its quota has room: refused before it reaches the
        // store, so a tenant at its rate costs the writer nothing.
        if op.is_mutating()
            && let Err(limited) = principal.take_write_in_turn().await
        {
            return Reply::error(limited);
        }
        if op.is_mutating()
            && let Some(storage) = principal.storage_quota()
            && let Err(full) =
                storage.admit(&principal.name, StorageEffect::of(op, &args), self.measurer(principal)).await
        {
            return Reply::error(full);
        }
        let (args, request_id) = auth::scope_request_ids(principal, op, args, request_id);
        let mut reply = self.dispatch_filled(op, args, request_id, Some(&principal.name)).await;
        reply.body = reply.body.map(|result| auth::with_quota(principal, op, auth::redact(principal, op, result)));
        if op == Operation::StateHealth
            && let (Some(storage), Ok(result)) = (principal.storage_quota(), &mut reply.body)
        {
            let usage = storage.usage_now(self.measurer(principal)).await;
            auth::with_storage(storage, usage.ok(), result);
        }
        reply
    }

    /// How `principal`'s storage quota measures what it holds: a task of its own may run it.
    fn measurer(
        &self,
        principal: &Principal,
    ) -> impl FnOnce() -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<StorageUsage, ApiError>> + Send>>
    + Send
    + 'static {
        let (api, prefixes) = (self.clone(), principal.prefixes().to_vec());
        move || Box::pin(async move { api.usage(&prefixes).await })
    }

    /// What lies under `prefixes` together, each id counted once (a prefix inside another is
    /// measured with it).
    async fn usage(&self, prefixes: &[String]) -> Result<StorageUsage, ApiError> {
        let mut total = StorageUsage::default();
        let inside_another = |at: usize, p: &String| {
            prefixes.iter().enumerate().any(|(other, q)| p.starts_with(q.as_str()) && (q != p || other < at))
        };
        for (_, prefix) in prefixes.iter().enumerate().filter(|(at, p)| !inside_another(*at, p)) {
            let reply = self.dispatch(Operation::StoreUsage, serde_json::json!({ "prefix": prefix }), None, None).await;
            let measured: UsageResult = serde_json::from_value(reply.body?)
                .map_err(|e| ApiError::new(ErrorCode::Internal, format!("a usage figure did not read: {e}")))?;
            total.add(&measured);
        }
        Ok(total)
    }

    /// Runs a call on whichever side of the seam the store is, unchecked, its changes
    /// recorded as made by `by` (a server reached over HTTP records its own caller instead).
    async fn dispatch(&self, op: Operation, args: Value, request_id: Option<String>, by: Option<&str>) -> Reply {
        self.dispatch_filled(op, crate::workspace::fill(op, args), request_id, by).await
    }

    /// [`Api::dispatch`] of arguments whose workspace defaults are already filled in (a token's
    /// call fills them before it is authorized: looking for `.git` once is enough).
    async fn dispatch_filled(&self, op: Operation, args: Value, request_id: Option<String>, by: Option<&str>) -> Reply {
        match &self.inner {
            Inner::Local(local) if by.is_some() => local.on_behalf_of(by).call_with_id(op, args, request_id).await,
            Inner::Local(local) => local.call_with_id(op, args, request_id).await,
            Inner::Remote(remote) => remote.call_with_id(op, args, request_id, by).await,
            Inner::Http(http) => http.call_with_id(op, args, request_id).await,
        }
    }

    /// Watches the changes `request` covers, for `caller`. Fails at once if its token does not
    /// cover them or history after `after_revision` is compacted.
    pub async fn watch(&self, caller: &Caller, mut request: WatchRequest) -> Result<Watcher, ApiError> {
        if let Caller::Token(principal) = caller {
            match self.authorize(principal, Operation::StateWatch, auth::watch_needs(&request)).await {
                Ok(()) => {}
                Err(Denied::Refused(refused)) => return Err(refused),
                // Another tenant's run is watched as one that does not exist: nothing ever comes.
                Err(Denied::NotYours(_)) => {
                    request.key = Some(format!("absent-{:016x}{:016x}", rand_u64(), rand_u64()));
                }
            }
        }
        match &self.inner {
            Inner::Local(local) => local.watch(request).await.map(Watcher::local),
            Inner::Remote(remote) => remote.watch(request).await.map(Watcher::owner),
            Inner::Http(http) => http.watch(request).await.map(Watcher::http),
        }
    }

    /// [`Api::watch`], for a follower that wants every change and no `watch_lagged`: when the
    /// watch falls behind it watches again after the last revision it delivered (ending only
    /// if history was compacted past it), as an inspector or a resource subscription wants.
    pub async fn follow(&self, caller: &Caller, request: WatchRequest) -> Result<Watcher, ApiError> {
        let watcher = self.watch(caller, request.clone()).await?;
        let (api, caller) = (self.clone(), caller.clone());
        let again: crate::watch::WatchAgain = Box::new(move |request| {
            let (api, caller) = (api.clone(), caller.clone());
            Box::pin(async move { api.watch(&caller, request).await })
        });
        Ok(watcher.followed(again, request))
    }

    /// Writes a consistent copy of the store, as of its last commit, to a new file at `path`
    /// (absolute), while writes go on; `{revision, bytes, path}`. Only for a store on this
    /// machine: a server's store is backed up on the server.
    pub async fn backup(&self, path: std::path::PathBuf) -> Result<Value, ApiError> {
        match &self.inner {
            Inner::Local(local) => local.backup(path).await,
            Inner::Remote(remote) => remote.backup(path).await,
            Inner::Http(_) => Err(ApiError::new(
                ErrorCode::InvalidArguments,
                "a backup is written where the database is: run `statectl backup` on the server's machine",
            )),
        }
    }

    /// Refuses a call whose needs reach outside what `principal`'s token covers.
    async fn authorize(&self, principal: &Principal, op: Operation, needs: Vec<Need>) -> Result<(), Denied> {
        for need in needs {
            let run_name = match &need {
                Need::Run(run_id, _) => self.run_name(run_id).await.map_err(Denied::Refused)?,
                _ => None,
            };
            if let Err(refused) = auth::check(principal, op, &need, run_name.as_deref()) {
                // A run the token may read is refused openly (it knows the run exists); one it may
                // not even read is answered as if absent.
                return Err(match (need, run_name) {
                    (Need::Run(run_id, _), Some(name)) if !principal.sees(&name) => Denied::NotYours(run_id),
                    _ => Denied::Refused(refused),
                });
            }
        }
        Ok(())
    }

    /// The answer to a call on another tenant's run: the very answer a run that does not exist
    /// gets, so that run ids (which can be guessed) tell a token nothing of others' runs. The
    /// call runs against an id that names no run wherever it named that run (its subject, a
    /// history's or a watch's key), put back as the id asked about in the answer. A new run's
    /// dependency stays a refusal: a run waiting on a stand-in would show it when read back.
    async fn as_if_absent(
        &self,
        principal: &Principal,
        op: Operation,
        args: Value,
        request_id: Option<String>,
        run_id: &str,
    ) -> Reply {
        let refused = || Reply::error(auth::not_covered(principal, op, &format!("run `{run_id}`")));
        let depends = args.get("depends_on").and_then(Value::as_array);
        if depends.is_some_and(|runs| runs.iter().any(|run| run.as_str() == Some(run_id))) {
            return refused();
        }
        let absent = format!("absent-{:016x}{:016x}", rand_u64(), rand_u64());
        if !matches!(self.run_name(&absent).await, Ok(None)) {
            return refused();
        }
        let args = replace_strings(args, run_id, &absent);
        // The rest of what the call touches is checked as always.
        let needs = match auth::needs(op, &args) {
            Ok(needs) => needs,
            Err(invalid) => return Reply::error(invalid),
        };
        if let Err(denied) = Box::pin(self.authorize(principal, op, needs)).await {
            return match denied {
                Denied::Refused(refused) => Reply::error(refused),
                Denied::NotYours(other) => Box::pin(self.as_if_absent(principal, op, args, request_id, &other)).await,
            };
        }
        let (args, request_id) = auth::scope_request_ids(principal, op, args, request_id);
        let mut reply = self.dispatch_filled(op, args, request_id, Some(&principal.name)).await;
        reply.body = reply.body.map(|body| replace_strings(body, &absent, run_id));
        if let Err(error) = &mut reply.body {
            error.message = error.message.replace(&absent, run_id);
        }
        reply
    }

    /// A run's name, which decides who may touch it; `None` for a run that does not exist.
    /// Anything else that keeps it from being known refuses the call: a check that cannot be
    /// made must not let the call through.
    async fn run_name(&self, run_id: &str) -> Result<Option<String>, ApiError> {
        let status =
            self.dispatch(Operation::WorkflowStatus, serde_json::json!({ "run_id": run_id }), None, None).await;
        if status.outcome == Outcome::NotFound {
            return Ok(None);
        }
        let body = status.body?;
        match body.get("run").and_then(|run| run.get("name")).and_then(Value::as_str) {
            Some(name) => Ok(Some(name.to_owned())),
            None => Err(ApiError::new(ErrorCode::Internal, format!("cannot tell whose workflow run `{run_id}` is"))),
        }
    }

    /// For a process that is stopping: if its owner goes away meanwhile, calls still finishing
    /// rejoin another owner only if one answers, and none is started for them.
    pub fn stop_starting_owners(&self) {
        if let Inner::Remote(remote) = &self.inner {
            remote.stop_starting_owners();
        }
    }

    /// Ends this handle's use of the store: closes a local engine (letting queued writes
    /// commit), or leaves the owner.
    pub async fn close(&self) {
        match &self.inner {
            Inner::Local(local) => local.close().await,
            Inner::Remote(remote) => remote.close().await,
            // Connections are pooled and closed when the last handle goes.
            Inner::Http(_) => {}
        }
    }
}

/// Why a call was not let through.
enum Denied {
    Refused(ApiError),
    /// The call's run belongs to another tenant.
    NotYours(String),
}

/// `value` with every string equal to `from` replaced by `to`.
fn replace_strings(value: Value, from: &str, to: &str) -> Value {
    match value {
        Value::String(text) if text == from => Value::String(to.to_owned()),
        Value::Array(items) => Value::Array(items.into_iter().map(|v| replace_strings(v, from, to)).collect()),
        Value::Object(fields) => {
            Value::Object(fields.into_iter().map(|(k, v)| (k, replace_strings(v, from, to))).collect())
        }
        other => other,
    }
}

/// A number no caller can predict: the process's randomly keyed hasher, over the time.
fn rand_u64() -> u64 {
    use std::hash::BuildHasher;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    std::collections::hash_map::RandomState::new().hash_one(now.as_nanos())
}
