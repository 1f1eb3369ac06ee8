//! Background upkeep: sweep expired keys (so history and watchers record their expiry and disk
//! space is reclaimed), release the runs left waiting on a finished run with many dependents,
//! compact history beyond the retention window, and give a mostly free file's space back to
//! the file system. All go through the writer queue like any other write.
//!
//! The sweeper sleeps until the soonest stored expiry (so an expiry is recorded when it falls,
//! not up to a sweep interval later), woken early when a write stores a sooner one; the
//! interval bounds the sleep, for releases, compaction and expiries written by other
//! processes sharing the database.

use std::sync::Weak;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use state_core::UnixMillis;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::{Engine, EngineConfig, Inner};
use crate::error::EngineError;

const SWEEP_BATCH: usize = 1000;

/// The least time between two sweeps woken by expiries: each sweep is a commit (and a sync), so
/// keys expiring a millisecond apart are swept together, not one commit each.
const MIN_SWEEP_GAP: Duration = Duration::from_millis(100);

/// The soonest expiry the writer stored since the sweeper last looked, and the sweeper's bell.
#[derive(Debug)]
pub(crate) struct ExpiryHint {
    soonest: AtomicU64,
    /// When the sweeper will wake anyway (engine time); a write expiring no sooner does not
    /// ring. 0 while it sweeps, so nothing stored meanwhile is missed.
    planned: AtomicU64,
    wake: Notify,
}

impl Default for ExpiryHint {
    fn default() -> ExpiryHint {
        ExpiryHint { soonest: AtomicU64::new(u64::MAX), planned: AtomicU64::new(0), wake: Notify::new() }
    }
}

impl ExpiryHint {
    /// A committed write stored an entry expiring `at`: wakes the sweeper if that is sooner
    /// than it means to wake. Most writes with an expiry (idempotency records, a day out)
    /// ring nothing.
    pub(crate) fn note(&self, at: UnixMillis) {
        if at.0 < self.planned.load(Ordering::SeqCst) && at.0 < self.soonest.fetch_min(at.0, Ordering::SeqCst) {
            self.wake.notify_one();
        }
    }

    /// What was noted since the last look, and starts over.
    fn take(&self) -> Option<UnixMillis> {
        let soonest = self.soonest.swap(u64::MAX, Ordering::SeqCst);
        (soonest != u64::MAX).then_some(UnixMillis(soonest))
    }
}

/// Stops the background task when dropped.
#[derive(Debug)]
pub struct MaintenanceHandle(JoinHandle<()>);

impl Drop for MaintenanceHandle {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub(super) fn spawn(engine: Weak<Inner>, config: EngineConfig) -> MaintenanceHandle {
    MaintenanceHandle(tokio::spawn(async move {
        // Looked at once a sweep interval, not at every sweep an expiry wakes.
        let mut space_looked_at: Option<tokio::time::Instant> = None;
        loop {
            // Holding only a weak reference lets the engine shut down while we sleep.
            let Some(inner) = engine.upgrade() else { return };
            let engine = Engine { inner, author: None };
            let (hint, clock) = (engine.inner.expiries.clone(), engine.inner.clock.clone());
            hint.planned.store(0, Ordering::SeqCst);
            let swept_at = clock.now();
            if sweep(&engine).await.is_err() || release(&engine).await.is_err() {
                return; // closed
            }
            if let Some(keep) = config.history_retention {
                compact(&engine, keep).await;
            }
            if space_looked_at.is_none_or(|at| at.elapsed() >= config.sweep_interval) {
                space_looked_at = Some(tokio::time::Instant::now());
                match engine.give_back_space().await {
                    Ok(_) => {}
                    Err(EngineError::Closed) => return,
                    Err(error) => {
                        tracing::warn!(%error, "could not give the database file's free space back; will retry")
                    }
                }
            }
            // Anything stored from here on rings the bell; anything before is in the index.
            hint.take();
            let due = match engine.next_expiry().await {
                Ok(due) => due,
                Err(error) => {
                    tracing::warn!(%error, "cannot read the next expiry; sweeping again at the next interval");
                    None
                }
            };
            // One due before the sweep began and still there is one it could not take (a
            // failed write): the next tick retries it, rather than a sweep every millisecond.
            let mut due = due.filter(|at| at.0 > swept_at.0);
            drop(engine);
            let tick = tokio::time::Instant::now() + config.sweep_interval;
            let earliest = tick.min(tokio::time::Instant::now() + MIN_SWEEP_GAP);
            let tick_at =
                clock.now().0.saturating_add(u64::try_from(config.sweep_interval.as_millis()).unwrap_or(u64::MAX));
            loop {
                hint.planned.store(due.map_or(tick_at, |at| at.0.min(tick_at)), Ordering::SeqCst);
                // A millisecond past the expiry: the sweep takes what expired at or before now.
                let until_due = due.map(|at| Duration::from_millis(at.0.saturating_sub(clock.now().0) + 1));
                let wake = until_due.map_or(tick, |d| tick.min(tokio::time::Instant::now() + d)).max(earliest);
                tokio::select! {
                    () = tokio::time::sleep_until(wake) => break,
                    () = hint.wake.notified() => {
                        due = due.into_iter().chain(hint.take()).min();
                    }
                }
            }
        }
    }))
}

/// Sweeps until nothing more is due. `Err` only when the engine has been closed.
async fn sweep(engine: &Engine) -> Result<(), EngineError> {
    loop {
        match engine.expire_due(SWEEP_BATCH).await {
            Ok(removed) if removed == SWEEP_BATCH => continue,
            Ok(removed) => {
                if removed > 0 {
                    tracing::debug!(removed, "expired keys swept");
                }
                return Ok(());
            }
            Err(EngineError::Closed) => return Err(EngineError::Closed),
            Err(error) => {
                tracing::warn!(%error, "expiry sweep failed; will retry");
                return Ok(());
            }
        }
    }
}

/// Releases the runs left waiting on finished runs until none is left. `Err` only when the
/// engine has been closed.
async fn release(engine: &Engine) -> Result<(), EngineError> {
    loop {
        match engine.release_dependents().await {
            Ok(0) => return Ok(()),
            Ok(_) => continue,
            Err(EngineError::Closed) => return Err(EngineError::Closed),
            Err(error) => {
                tracing::warn!(%error, "releasing waiting runs failed; will retry");
                return Ok(());
            }
        }
    }
}

async fn compact(engine: &Engine, keep: u64) {
    let Ok(health) = engine.health().await else { return };
    let target = health.revision.saturating_sub(keep);
    // Compact in steps of about 1% of the window, not on every new revision.
    let step = (keep / 100).max(1);
    if target < health.compacted_revision + step {
        return;
    }
    match engine.compact_history(target).await {
        Ok(compacted) => tracing::debug!(compacted, "history compacted"),
        Err(error) => tracing::warn!(%error, "history compaction failed; will retry"),
    }
}
