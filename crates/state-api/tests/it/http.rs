//! The client of a remote state-http against a server that accepts but never answers.

use std::time::Duration;

use state_api::{Api, HttpConfig, HttpError};

#[tokio::test]
async fn a_server_that_never_answers_is_reported_not_waited_on() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    // Accepts connections and holds them open without a word, like a hung server.
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((connection, _)) = listener.accept().await {
            held.push(connection);
        }
    });
    let config = HttpConfig { url: url.clone(), token: None, settle_timeout: Duration::from_millis(300) };
    let refused = tokio::time::timeout(Duration::from_secs(10), Api::connect_http(config)).await;
    let message = match refused {
        Ok(Err(HttpError::Unreachable { message, .. })) => message,
        Ok(Err(other)) => panic!("refused for another reason: {other}"),
        Ok(Ok(_)) => panic!("a silent server was accepted"),
        Err(_) => panic!("still waiting after 10 s"),
    };
    assert!(message.contains(&format!("{url} has not answered for 300ms")), "{message}");
    silent.abort();
}
