//! The owner's wire protocol, as any process of the user may speak it on the socket: a hello,
//! then whatever lines. The owner neither panics nor stops serving: it answers each frame or
//! drops the connection that sent garbage, and a well-behaved client is served afterwards.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};
use state_api::Rendezvous;
use state_api::owner::{Owner, OwnerConfig};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

struct Serving {
    db: PathBuf,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

fn owner() -> &'static Serving {
    static OWNER: OnceLock<Serving> = OnceLock::new();
    OWNER.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("fuzz.redb");
        let runtime_dir = dir.path().join("run");
        let config = OwnerConfig {
            db: db.clone(),
            runtime_dir: Some(runtime_dir.clone()),
            idle: Duration::MAX,
            settings: state_api::Settings::default(),
            log_file: None,
            clock: std::sync::Arc::new(state_api::SystemClock),
        };
        let owner = crate::harness::runtime().block_on(Owner::start(config)).unwrap();
        crate::harness::runtime().spawn(owner.serve(std::future::pending()));
        let socket = Rendezvous::for_database(&db, Some(&runtime_dir)).unwrap().socket;
        Serving { db: Rendezvous::for_database(&db, Some(&runtime_dir)).unwrap().db, socket, _dir: dir }
    })
}

fn hello(db: &std::path::Path) -> String {
    json!({
        "protocol": "state-owner", "wire": state_api::WIRE_VERSION, "client": "fuzz", "pid": std::process::id(),
        "db": db, "options": state_api::Options::everything(), "settings": {}
    })
    .to_string()
}

/// Sends `lines` after a hello and reads what comes back until the frame with id `until`, or
/// the end of the connection. Returns whether that frame came.
async fn exchange(serving: &Serving, lines: &[u8], until: u64) -> bool {
    let stream = UnixStream::connect(&serving.socket).await.unwrap();
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read).lines();
    let mut frames = format!("{}\n", hello(&serving.db)).into_bytes();
    if !lines.is_empty() {
        frames.extend_from_slice(lines);
        frames.push(b'\n');
    }
    frames.extend_from_slice(format!("{}\n", json!({"id": until, "op": "native/state_health"})).as_bytes());
    // The owner may hang up mid-way on garbage: a failed write is an answer too.
    let _ = write.write_all(&frames).await;
    let read = async {
        while let Ok(Some(line)) = reader.next_line().await {
            let frame: Value = serde_json::from_str(&line).unwrap_or_else(|_| panic!("the owner sent {line:?}"));
            if frame.get("id") == Some(&json!(until)) {
                return true;
            }
        }
        false
    };
    tokio::time::timeout(Duration::from_secs(10), read).await.unwrap_or(false)
}

pub(crate) fn frames(data: &[u8]) {
    let serving = owner();
    crate::harness::runtime().block_on(async {
        // Whatever the input did to its own connection (a watch may keep it busy), the owner
        // serves the next one.
        let _ = exchange(serving, data, u64::MAX).await;
        assert!(exchange(serving, b"", u64::MAX - 1).await, "after that input, the owner no longer serves");
    });
}
