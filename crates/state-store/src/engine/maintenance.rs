//! Background upkeep: sweep expired keys (so history records their expiry and disk space is
//! reclaimed), release the runs left waiting on a finished run with many dependents, and
//! compact history beyond the retention window. Both go through the writer
//! queue like any other write.

use std::sync::Weak;

use tokio::task::JoinHandle;

use super::{Engine, EngineConfig, Inner};
use crate::error::EngineError;

const SWEEP_BATCH: usize = 1000;

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
        let mut ticker = tokio::time::interval(config.sweep_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            // Holding only a weak reference lets the engine shut down while we sleep.
            let Some(inner) = engine.upgrade() else { return };
            let engine = Engine { inner };
            if sweep(&engine).await.is_err() || release(&engine).await.is_err() {
                return; // closed
            }
            if let Some(keep) = config.history_retention {
                compact(&engine, keep).await;
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
