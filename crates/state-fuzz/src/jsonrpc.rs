//! The stdio server's JSON-RPC lines: after a proper handshake, whatever line arrives, the
//! server neither panics nor stops serving: a ping after it is still answered.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

pub(crate) fn line(data: &[u8]) {
    // A line is what the transport frames: the input up to its first newline, then the rest
    // as further lines.
    let server = state_mcp::StateServer::new(crate::harness::api().clone(), state_api::Options::everything());
    crate::harness::runtime().block_on(async {
        let (client, served) = tokio::io::duplex(1 << 20);
        let (read, write) = tokio::io::split(served);
        let serving = tokio::spawn(state_mcp::serve(server, read, write));
        let (reader, mut writer) = tokio::io::split(client);
        let mut reader = BufReader::new(reader).lines();
        let init = json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}});
        let mut frames = format!("{init}\n{}\n", json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        let mut fuzzed = data.to_vec();
        fuzzed.retain(|b| *b != b'\r');
        frames.push_str(&String::from_utf8_lossy(&fuzzed));
        frames.push_str(&format!("\n{}\n", json!({"jsonrpc": "2.0", "id": "last", "method": "ping"})));
        writer.write_all(frames.as_bytes()).await.unwrap();
        let answered = tokio::time::timeout(Duration::from_secs(10), async {
            while let Ok(Some(line)) = reader.next_line().await {
                let Ok(message) = serde_json::from_str::<Value>(&line) else {
                    panic!("the server wrote something that is not JSON: {line:?}");
                };
                if message.get("id") == Some(&json!("last")) {
                    return true;
                }
            }
            false
        })
        .await;
        drop((writer, reader));
        // The input itself may ask for a long wait (a watch) or end the session; neither is a
        // failure. A panic in the server is.
        if let Ok(Err(join)) = tokio::time::timeout(Duration::from_secs(10), serving).await {
            assert!(!join.is_panic(), "the server panicked: {join}");
        }
        let waits = String::from_utf8_lossy(data).contains("watch");
        assert!(answered.unwrap_or(waits) || waits || ends_session(data), "a ping after the input went unanswered");
    });
}

/// Whether the input itself may end the session before the ping (a response to nothing, a
/// cancellation, a second initialize).
fn ends_session(data: &[u8]) -> bool {
    let text = String::from_utf8_lossy(data);
    text.contains("initialize") || text.contains("cancel") || text.contains("\"result\"") || text.contains("\"error\"")
}
