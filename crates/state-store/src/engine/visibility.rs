//! Reads see every acknowledged write. The writer acknowledges a batch as soon as it is
//! durable and only then publishes it to readers (for redb: its log record is synced, then the
//! commit that applies it runs while the callers already have their answers), so a read that
//! begins in between waits for the publication. That wait is at most one batch's apply; the
//! common read costs two atomic loads.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

/// Batches counted as the writer acknowledges and publishes them.
#[derive(Debug, Default)]
pub(super) struct Visibility {
    acknowledged: AtomicU64,
    published: AtomicU64,
    changed: Notify,
}

impl Visibility {
    /// The writer is about to acknowledge a durable batch it has not published: reads that
    /// begin from now on wait for it. Returns the batch's number, for [`Visibility::published`].
    pub(super) fn acknowledging(&self) -> u64 {
        self.acknowledged.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Batch `batch` is visible (or its backend will recover it before the next read).
    pub(super) fn published(&self, batch: u64) {
        self.published.store(batch, Ordering::Release);
        self.changed.notify_waiters();
    }

    /// Waits until every batch acknowledged so far is published.
    pub(super) async fn settled(&self) {
        let wanted = self.acknowledged.load(Ordering::Acquire);
        // The common case, without registering with the notifier (a lock).
        if self.published.load(Ordering::Acquire) >= wanted {
            return;
        }
        loop {
            let changed = self.changed.notified();
            let mut changed = std::pin::pin!(changed);
            // Registered before the check, so a publication between the two is not missed.
            changed.as_mut().enable();
            if self.published.load(Ordering::Acquire) >= wanted {
                return;
            }
            changed.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_read_after_an_acknowledgement_waits_for_its_publication() {
        let visibility = Arc::new(Visibility::default());
        visibility.settled().await;
        let batch = visibility.acknowledging();
        let read = tokio::spawn({
            let visibility = visibility.clone();
            async move { visibility.settled().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!read.is_finished(), "a read began before the acknowledged batch was visible");
        visibility.published(batch);
        tokio::time::timeout(Duration::from_secs(5), read).await.unwrap().unwrap();
    }
}
