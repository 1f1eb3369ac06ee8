//! Commits made through other replicas, turned into calls of the engine's `on_commit`.
//!
//! NOTIFY is only a doorbell carrying a revision: a missed one (the listener was reconnecting,
//! the engine has no LISTEN) costs latency, never data, because the engine reads what it
//! missed from the history table, which is the truth. So after every (re)connect the revision
//! is read at once, and a timer reads it again now and then whatever the doorbell says.

use crate::backoff::Backoff;
use std::time::Duration;

use futures_util::StreamExt;
use tokio_postgres::AsyncMessage;

use super::txn::meta_of;
use super::{FollowMode, PostgresBackend, pooled};
use crate::backend::Follower;

/// How often the revision is read even when NOTIFY works.
const SAFETY_NET: Duration = Duration::from_secs(2);
/// Longest pause between attempts to reconnect the listener.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub(super) fn spawn(backend: &PostgresBackend, on_commit: Box<dyn Fn(u64) + Send + Sync>) -> Follower {
    let (config, tls) = (backend.config.clone(), backend.tls.clone());
    let (pool, sql) = (backend.pool.clone(), backend.sql.clone());
    let listen = format!("LISTEN {}", sql.channel);
    let mode = backend.options.follow;
    let task = backend.handle.spawn(async move {
        // A failed read is skipped: the next tick or doorbell reads again.
        let read_revision = || async {
            let client = pooled(&pool).await.ok()?;
            meta_of(&client.query(&sql.read_meta, &[]).await.ok()?).ok().map(|(revision, _, _)| revision)
        };
        let mut backoff = Backoff::new(Duration::from_millis(100), MAX_BACKOFF);
        loop {
            let interval = match mode {
                FollowMode::Poll(every) => every,
                FollowMode::Notify => SAFETY_NET,
            };
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let listener = match mode {
                FollowMode::Poll(_) => None,
                FollowMode::Notify => match config.connect(tls.clone()).await {
                    Ok((client, mut connection)) => {
                        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                        tokio::spawn(async move {
                            let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
                            while let Some(Ok(message)) = messages.next().await {
                                if let AsyncMessage::Notification(n) = message
                                    && let Ok(revision) = n.payload().parse::<u64>()
                                    && tx.send(revision).is_err()
                                {
                                    break;
                                }
                            }
                        });
                        match client.batch_execute(&listen).await {
                            Ok(()) => Some((client, rx)),
                            Err(error) => {
                                tracing::warn!(%error, "cannot LISTEN for commits; retrying");
                                None
                            }
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%error, "cannot connect the commit listener; retrying");
                        None
                    }
                },
            };
            if mode == FollowMode::Notify && listener.is_none() {
                if let Some(revision) = read_revision().await {
                    on_commit(revision);
                }
                tokio::time::sleep(backoff.next_pause()).await;
                continue;
            }
            backoff.reset();
            let (_client, mut doorbell) = match listener {
                Some((client, rx)) => (Some(client), Some(rx)),
                None => (None, None),
            };
            loop {
                tokio::select! {
                    rung = async { match doorbell.as_mut() { Some(rx) => rx.recv().await, None => std::future::pending().await } } => {
                        match rung {
                            Some(revision) => on_commit(revision),
                            // The listener's connection ended: reconnect (and catch up).
                            None => break,
                        }
                    }
                    _ = ticker.tick() => {
                        if let Some(revision) = read_revision().await {
                            on_commit(revision);
                        }
                    }
                }
            }
            tracing::warn!("the commit listener's connection ended; reconnecting");
        }
    });
    Follower(Box::new(AbortOnDrop(task)))
}
