//! Resource subscriptions, in both protocol generations. Each subscribed resource is a watch of
//! its record through the seam; every revision that changes it becomes one
//! `notifications/resources/updated`, and the client reads the resource again.
//!
//! - 2026-07-28 `subscriptions/listen`: the listen request's own stream carries the updates
//!   until the client cancels it (stdio) or closes it (HTTP). Works on every transport,
//!   stateless HTTP included.
//! - 2025-11-25 `resources/subscribe`: updates go to the session's peer until
//!   `resources/unsubscribe` or the session ends. Over HTTP that needs a session (the
//!   standalone GET stream); a stateless request has no peer left to push to.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ErrorData as McpError;
use state_api::auth::Caller;
use state_api::{Api, ErrorCode, Options, Watcher};
use state_core::ops::watch::WatchRequest;
use tokio::task::AbortHandle;

use crate::resources::{self, Target};

/// One session's `resources/subscribe` subscriptions, by URI. Dropped with the session's
/// handler, which stops them all.
#[derive(Default)]
pub(crate) struct Subscriptions {
    tasks: Mutex<HashMap<String, AbortHandle>>,
}

/// Most resources one session may subscribe to at once: each holds a watch open on the store.
pub(crate) const MAX_SUBSCRIBED: usize = 256;

impl Subscriptions {
    /// Whether one more subscription, to `uri`, fits: a URI already subscribed is replaced,
    /// so it always does.
    pub(crate) fn has_room_for(&self, uri: &str) -> bool {
        self.tasks.lock().is_ok_and(|tasks| tasks.contains_key(uri) || tasks.len() < MAX_SUBSCRIBED)
    }

    /// Records a subscription, replacing (and stopping) an earlier one to the same URI. Past
    /// the cap (a race between two subscribes) the new one is stopped instead.
    pub(crate) fn add(&self, uri: String, task: AbortHandle) {
        let Ok(mut tasks) = self.tasks.lock() else {
            task.abort();
            return;
        };
        if !tasks.contains_key(&uri) && tasks.len() >= MAX_SUBSCRIBED {
            task.abort();
            return;
        }
        if let Some(earlier) = tasks.insert(uri, task) {
            earlier.abort();
        }
    }

    pub(crate) fn remove(&self, uri: &str) {
        if let Some(task) = self.tasks.lock().ok().and_then(|mut tasks| tasks.remove(uri)) {
            task.abort();
        }
    }
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        if let Ok(tasks) = self.tasks.get_mut() {
            tasks.drain().for_each(|(_, task)| task.abort());
        }
    }
}

/// Most resources one `subscriptions/listen` may follow: each holds a watch open on the store.
const MAX_LISTENED: usize = 256;

/// The resources a `subscriptions/listen` request follows, started before rmcp acknowledged
/// it (see [`crate::service`]) and taken by the handler's `listen`.
#[derive(Clone)]
pub(crate) struct Started(Arc<Mutex<Option<Vec<Changes>>>>);

impl Started {
    pub(crate) fn new(followed: Vec<Changes>) -> Started {
        Started(Arc::new(Mutex::new(Some(followed))))
    }

    pub(crate) fn take(&self) -> Option<Vec<Changes>> {
        self.0.lock().ok().and_then(|mut started| started.take())
    }
}

/// Follows each of `uris` that this server can follow; an error if there are too many, or one
/// of them names nothing or something the caller may not read. URIs that are not resources
/// of this server are left out, as the acknowledgment leaves them out.
pub(crate) async fn follow_all(
    api: &Api,
    caller: &Caller,
    options: &Options,
    uris: &[String],
) -> Result<Vec<Changes>, McpError> {
    if uris.len() > MAX_LISTENED {
        return Err(McpError::invalid_params(
            format!(
                "a listen follows at most {MAX_LISTENED} resources and this one names {}: \
                 split them across several listen requests",
                uris.len()
            ),
            Some(serde_json::json!({"limit": MAX_LISTENED, "requested": uris.len()})),
        ));
    }
    let mut followed: Vec<Changes> = Vec::new();
    for uri in uris {
        if Target::parse(uri, options).is_none() || followed.iter().any(|changes| &changes.uri == uri) {
            continue;
        }
        if let Some(changes) = follow(api, caller, options, uri).await? {
            followed.push(changes);
        }
    }
    Ok(followed)
}

/// The changes to one subscribed resource.
pub(crate) struct Changes {
    api: Api,
    caller: Caller,
    uri: String,
    request: WatchRequest,
    watcher: Watcher,
    ended: bool,
}

/// Starts following `uri` for `principal`. `None` for a resource that never changes (a doc);
/// an error for a URI that names nothing or that the caller may not read.
pub(crate) async fn follow(
    api: &Api,
    caller: &Caller,
    options: &Options,
    uri: &str,
) -> Result<Option<Changes>, McpError> {
    let target = Target::parse(uri, options).ok_or_else(|| {
        McpError::invalid_params(
            format!("cannot subscribe to `{uri}`: subscribe to a resource of a template in resources/templates/list"),
            Some(serde_json::json!({"uri": uri})),
        )
    })?;
    let Some(request) = target.watch() else { return Ok(None) };
    // Followed: a subscriber that falls behind a burst of writes watches on from where it
    // stopped, and only hears that the resource changed.
    let watcher = api.follow(caller, request.clone()).await.map_err(|e| resources::error_for(uri, &e))?;
    let caller = caller.clone();
    Ok(Some(Changes { api: api.clone(), caller, uri: uri.to_owned(), request, watcher, ended: false }))
}

impl Changes {
    pub(crate) fn uri(&self) -> &str {
        &self.uri
    }

    /// Tells `notify` the resource's URI after each change, until it answers false (nobody
    /// is listening any more) or the resource can no longer be followed.
    pub(crate) async fn forward<F, Sent>(mut self, mut notify: F)
    where
        F: FnMut(String) -> Sent,
        Sent: std::future::Future<Output = bool>,
    {
        while self.changed().await {
            if !notify(self.uri.clone()).await {
                break;
            }
        }
    }

    /// Waits until the resource changes again. False once it cannot be followed any more
    /// (the store closed, the token lost access). Changes that are already waiting make one
    /// change: the client reads the resource as it is now, so a hot key costs it one notice
    /// per read, not one per write.
    pub(crate) async fn changed(&mut self) -> bool {
        if self.ended || !self.next_change().await {
            self.ended = true;
            return false;
        }
        // A zero timeout polls once: it takes what is ready and never waits.
        while let Ok(more) = tokio::time::timeout(Duration::ZERO, self.next_change()).await {
            if !more {
                self.ended = true;
                break;
            }
        }
        true
    }

    async fn next_change(&mut self) -> bool {
        match self.watcher.next().await {
            Some(Ok(_)) => true,
            // It fell so far behind that history no longer holds what it missed: the resource
            // changed, and following on from now is enough, since the client reads it as it is.
            Some(Err(error)) if error.code == ErrorCode::Compacted => {
                let request = WatchRequest { after_revision: None, ..self.request.clone() };
                match self.api.follow(&self.caller, request).await {
                    Ok(watcher) => {
                        self.watcher = watcher;
                        true
                    }
                    Err(error) => self.stop(&error.message),
                }
            }
            Some(Err(error)) => self.stop(&error.message),
            None => self.stop("the store closed"),
        }
    }

    fn stop(&self, why: &str) -> bool {
        tracing::warn!(uri = %self.uri, "a resource subscription ended: {why}");
        false
    }
}

#[cfg(test)]
mod tests;
