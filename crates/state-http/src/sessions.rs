//! MCP sessions (the 2025 protocol's `Mcp-Session-Id`), bounded: each token may hold a number
//! of them, and the server a number in all. A token at its cap gives up the session it used
//! least recently, so a client that leaks sessions hurts only itself; a server at its cap
//! refuses new sessions with 503 rather than grow. Sessions also end after a while unused.
//!
//! A session is its opener's: a request that names another token's session id is answered as
//! if the session did not exist (404), so a leaked id lets nobody else read its notifications,
//! post into it or end it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use futures_util::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::{EventStore, ServerSseMessage, SessionId, SessionManager};
use state_api::auth::Principal;
use tokio::time::Instant;

use crate::problem::http_problem;

/// How many sessions may be open.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    /// In all, for every caller together.
    pub total: usize,
    /// For one token (or, without tokens, for everyone).
    pub per_token: usize,
}

tokio::task_local! {
    /// Who is opening a session: set around each `/mcp` request, read when a session is made.
    static CALLER: Caller;
}

struct Caller {
    /// The token's name; `None` without tokens.
    token: Option<String>,
    /// Why a session was refused, for the response.
    refused: Mutex<Option<Refusal>>,
}

enum Refusal {
    /// The server or the token is at its cap.
    Full(String),
    /// The session named is another token's.
    NotYours,
}

/// A session manager that keeps the counts. Every session ends through `close_session` (a
/// DELETE, its idle timeout, the server stopping), which is where it is forgotten.
pub(crate) struct BoundedSessions<M> {
    inner: M,
    limits: SessionLimits,
    open: Mutex<HashMap<SessionId, Open>>,
}

struct Open {
    token: Option<String>,
    last_used: Instant,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionsError<E> {
    #[error("{0}")]
    Full(String),
    #[error("no such session")]
    NotYours,
    #[error(transparent)]
    Inner(E),
}

impl<M: SessionManager> BoundedSessions<M> {
    pub(crate) fn new(inner: M, limits: SessionLimits) -> Self {
        BoundedSessions { inner, limits, open: Mutex::new(HashMap::new()) }
    }

    /// Whether the calling request may use session `id`: it opened it. A session this table
    /// does not know is no request's (every one opened is entered here). Work of the server's
    /// own (an idle session timing out) runs outside any request and may.
    fn callers(&self, id: &SessionId) -> bool {
        let Ok(caller) = CALLER.try_with(|caller| caller.token.clone()) else { return true };
        let Ok(open) = self.open.lock() else { return false };
        open.get(id).is_some_and(|session| session.token == caller)
    }

    /// Refuses a request to use another token's session (rmcp asks `has_session` first; this
    /// holds even where it would not).
    fn owned<E>(&self, id: &SessionId) -> Result<(), SessionsError<E>> {
        if self.callers(id) {
            return Ok(());
        }
        self.refuse_foreign();
        Err(SessionsError::NotYours)
    }

    /// Notes on the request that it named another token's session.
    fn refuse_foreign(&self) {
        let _ = CALLER.try_with(|caller| {
            if let Ok(mut refused) = caller.refused.lock() {
                *refused = Some(Refusal::NotYours);
            }
        });
    }

    fn touch(&self, id: &SessionId) {
        if let Ok(mut open) = self.open.lock()
            && let Some(session) = open.get_mut(id)
        {
            session.last_used = Instant::now();
        }
    }

    /// Makes room for a session of `token`: past the token's cap, the session it used least
    /// recently is closed; past the server's, the new one is refused.
    async fn admit(&self, token: Option<&str>) -> Result<(), String> {
        let evict = {
            let Ok(open) = self.open.lock() else { return Err("the session table is unavailable".into()) };
            let mine: Vec<(&SessionId, &Open)> = open.iter().filter(|(_, s)| s.token.as_deref() == token).collect();
            if mine.len() >= self.limits.per_token {
                mine.iter().min_by_key(|(_, s)| s.last_used).map(|(id, _)| (*id).clone())
            } else if open.len() >= self.limits.total {
                return Err(format!(
                    "this server holds its most MCP sessions ({}); retry shortly, or use the stateless protocol (2026-07-28)",
                    self.limits.total
                ));
            } else {
                None
            }
        };
        if let Some(id) = evict {
            tracing::info!(token = token.unwrap_or("(none)"), session = %id, "closed the token's least recently used MCP session to open another");
            let _ = self.close_session(&id).await;
        }
        Ok(())
    }
}

impl<M: SessionManager> SessionManager for BoundedSessions<M> {
    type Error = SessionsError<M::Error>;
    type Transport = M::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let token = CALLER.try_with(|caller| caller.token.clone()).ok().flatten();
        if let Err(why) = self.admit(token.as_deref()).await {
            let _ = CALLER.try_with(|caller| {
                if let Ok(mut refused) = caller.refused.lock() {
                    *refused = Some(Refusal::Full(why.clone()));
                }
            });
            return Err(SessionsError::Full(why));
        }
        let (id, transport) = self.inner.create_session().await.map_err(SessionsError::Inner)?;
        if let Ok(mut open) = self.open.lock() {
            open.insert(id.clone(), Open { token, last_used: Instant::now() });
        }
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.touch(id);
        self.inner.initialize_session(id, message).await.map_err(SessionsError::Inner)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        // Another token's session is one this caller cannot tell from a closed one: 404.
        if !self.callers(id) {
            return Ok(false);
        }
        self.inner.has_session(id).await.map_err(SessionsError::Inner)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        // A DELETE names its session without rmcp asking `has_session` first.
        self.owned(id)?;
        if let Ok(mut open) = self.open.lock() {
            open.remove(id);
        }
        self.inner.close_session(id).await.map_err(SessionsError::Inner)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.owned(id)?;
        self.touch(id);
        self.inner.create_stream(id, message).await.map_err(SessionsError::Inner)
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        self.owned(id)?;
        self.touch(id);
        self.inner.accept_message(id, message).await.map_err(SessionsError::Inner)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.owned(id)?;
        self.touch(id);
        self.inner.create_standalone_stream(id).await.map_err(SessionsError::Inner)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.owned(id)?;
        self.touch(id);
        self.inner.resume(id, last_event_id).await.map_err(SessionsError::Inner)
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}

/// Around each `/mcp` request: says who is calling, so a session it opens is counted against
/// its token, and answers a refused session 503.
pub(crate) async fn admit(request: Request, next: Next) -> Response {
    let token = request.extensions().get::<Principal>().map(|p| p.name.clone());
    let caller = Caller { token, refused: Mutex::new(None) };
    let (response, refused) = CALLER
        .scope(caller, async {
            let response = next.run(request).await;
            let refused = CALLER.with(|caller| caller.refused.lock().ok().and_then(|mut r| r.take()));
            (response, refused)
        })
        .await;
    match refused {
        Some(Refusal::Full(why)) => {
            let mut response = http_problem(StatusCode::SERVICE_UNAVAILABLE, "too_many_sessions", &why);
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            response
        }
        Some(Refusal::NotYours) => {
            http_problem(StatusCode::NOT_FOUND, "session_not_found", "no such MCP session: start a new one")
        }
        None => response,
    }
}

#[cfg(test)]
mod tests;
