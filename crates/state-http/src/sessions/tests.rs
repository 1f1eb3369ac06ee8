use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use super::*;

async fn open_as(sessions: &BoundedSessions<LocalSessionManager>, token: &str) -> Result<SessionId, String> {
    let caller = Caller { token: Some(token.to_owned()), refused: Mutex::new(None) };
    CALLER
        .scope(caller, async {
            match sessions.create_session().await {
                Ok((id, _transport)) => Ok(id),
                Err(error) => Err(error.to_string()),
            }
        })
        .await
}

#[tokio::test]
async fn a_token_at_its_cap_gives_up_its_least_used_session_and_a_full_server_refuses() {
    let sessions = BoundedSessions::new(LocalSessionManager::default(), SessionLimits { total: 3, per_token: 2 });
    let a1 = open_as(&sessions, "a").await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let a2 = open_as(&sessions, "a").await.unwrap();
    sessions.touch(&a1);
    // a2 is now the least recently used of a's sessions: a third one replaces it.
    let a3 = open_as(&sessions, "a").await.unwrap();
    assert!(sessions.has_session(&a1).await.unwrap());
    assert!(!sessions.has_session(&a2).await.unwrap(), "the least recently used session was closed");
    assert!(sessions.has_session(&a3).await.unwrap());
    let b1 = open_as(&sessions, "b").await.unwrap();
    // Three open: another token is refused rather than allowed to close anyone else's.
    let refused = open_as(&sessions, "c").await.unwrap_err();
    assert!(refused.contains("most MCP sessions (3)"), "{refused}");
    sessions.close_session(&b1).await.unwrap();
    assert!(open_as(&sessions, "c").await.is_ok(), "a closed session makes room");
}

/// Runs `work` as a request of `token` would.
async fn as_token<T>(token: &str, work: impl std::future::Future<Output = T>) -> T {
    CALLER.scope(Caller { token: Some(token.to_owned()), refused: Mutex::new(None) }, work).await
}

#[tokio::test]
async fn another_tokens_session_is_one_that_does_not_exist() {
    let sessions = BoundedSessions::new(LocalSessionManager::default(), SessionLimits { total: 8, per_token: 4 });
    let mine = open_as(&sessions, "a").await.unwrap();
    assert!(as_token("a", sessions.has_session(&mine)).await.unwrap());
    assert!(!as_token("b", sessions.has_session(&mine)).await.unwrap(), "b is told it does not exist");
    let closed = as_token("b", sessions.close_session(&mine)).await;
    assert!(matches!(closed, Err(SessionsError::NotYours)), "b cannot end it");
    assert!(as_token("a", sessions.has_session(&mine)).await.unwrap(), "it lives on for a");
    // The server's own closing (an idle session) runs outside any request.
    sessions.close_session(&mine).await.unwrap();
    assert!(!as_token("a", sessions.has_session(&mine)).await.unwrap());
}
