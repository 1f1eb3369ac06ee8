//! Starting an owner: the joiner runs its own executable in `owner` mode (the launcher in
//! its [`super::JoinConfig`]), detached from it (own process group, stdio closed, not waited
//! for), and reads one readiness line. Its counterpart, ending an owner that hangs, is
//! `takeover.rs`; together they are the client's process supervision.

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::time::Instant;

use super::{Inner, JoinError};
use crate::paths::RUNTIME_DIR_ENV;
use crate::wire::Readiness;

/// What starting an owner came to.
pub(super) enum Launched {
    /// It is listening.
    Ready,
    /// Another process holds the database (in `role`, if it said).
    HeldBy { role: Option<String>, holder: String },
    /// It stopped, for a reason that may pass.
    Failed(String),
    /// It stopped for a reason that retrying will not fix (an unsafe socket directory, say).
    Fatal(String),
}

pub(super) async fn launch(inner: &Inner, deadline: Instant) -> Result<Launched, JoinError> {
    let launcher = &inner.config.launcher;
    let mut command = tokio::process::Command::new(&launcher.program);
    command
        .args(&launcher.args)
        .env(RUNTIME_DIR_ENV, &inner.rendezvous.dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        // The owner logs to its own file. Inheriting this process's stderr would keep the
        // client's pipe open for as long as the owner lives.
        .stderr(std::process::Stdio::null())
        // Its own process group: a signal meant for the client that started it (Ctrl-C in a
        // terminal, a client killing its server's group) leaves it alone.
        .process_group(0)
        .kill_on_drop(false);
    let mut child = command.spawn().map_err(|source| JoinError::Launch {
        db: inner.rendezvous.db.clone(),
        program: launcher.program.clone(),
        source,
    })?;
    tracing::debug!(pid = child.id(), "started an owner");
    let Some(stdout) = child.stdout.take() else { return Ok(Launched::Failed("no readiness pipe".into())) };
    let mut line = String::new();
    let read = tokio::time::timeout(
        deadline.saturating_duration_since(Instant::now()),
        BufReader::new(stdout).read_line(&mut line),
    )
    .await;
    // Not waited for: the owner outlives this process; tokio reaps it if it exits first.
    drop(child);
    match read {
        Ok(Ok(n)) if n > 0 => {}
        Ok(_) => return Ok(Launched::Failed("the owner it started stopped before it was ready".into())),
        Err(_) => return Ok(Launched::Failed("the owner it started was not ready in time".into())),
    }
    match serde_json::from_str::<Readiness>(line.trim_end()) {
        Ok(Readiness { ready: true, .. }) => Ok(Launched::Ready),
        Ok(Readiness { held: true, holder_role, message, .. }) => {
            Ok(Launched::HeldBy { role: holder_role, holder: message })
        }
        Ok(Readiness { fatal: true, message, .. }) => Ok(Launched::Fatal(message)),
        Ok(Readiness { message, .. }) => Ok(Launched::Failed(message)),
        Err(_) => Ok(Launched::Failed(format!("the owner it started said {:?}", line.trim_end()))),
    }
}
