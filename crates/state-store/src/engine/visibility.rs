//! Reads see every acknowledged write. The writer acknowledges a batch as soon as it is
//! durable and only then publishes it to readers (for redb: its log record is synced, then the
//! commit that applies it runs while the callers already have their answers), so a read that
//! begins in between waits for the publication. That wait is at most one batch's apply (or,
//! while the writer stages more batches before publishing them together, the batch it is
//! logging: a waiting read makes it publish next); the common read costs two atomic loads.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use tokio::sync::Notify;

/// Batches counted as the writer acknowledges and publishes them.
#[derive(Debug, Default)]
pub(super) struct Visibility {
    acknowledged: AtomicU64,
    published: AtomicU64,
    changed: Notify,
    /// Reads waiting for a publication right now.
    waiting: AtomicUsize,
}

impl Visibility {
    /// The writer is about to acknowledge a durable batch it has not published: reads that
    /// begin from now on wait for it until the returned guard is dropped, which says the batch
    /// is visible (or that its backend will recover it before the next read). Dropped by a
    /// panic too, so a writer that dies never leaves readers waiting.
    pub(super) fn acknowledging(&self) -> ReadsHeld<'_> {
        let batch = self.acknowledged.fetch_add(1, Ordering::AcqRel) + 1;
        ReadsHeld { visibility: self, batch }
    }

    /// Waits until every batch acknowledged so far is published.
    pub(super) async fn settled(&self) {
        let wanted = self.acknowledged.load(Ordering::Acquire);
        // The common case, without registering with the notifier (a lock).
        if self.published.load(Ordering::Acquire) >= wanted {
            return;
        }
        self.waiting.fetch_add(1, Ordering::AcqRel);
        // Counted out however the wait ends, a dropped future included.
        let _waiting = Waiting(&self.waiting);
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

    /// Whether a read is waiting for a publication: the writer publishes next instead of
    /// staging another batch first.
    pub(super) fn readers_waiting(&self) -> bool {
        self.waiting.load(Ordering::Acquire) > 0
    }
}

struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Reads held back until an acknowledged batch is visible; dropping it lets them through.
pub(super) struct ReadsHeld<'a> {
    visibility: &'a Visibility,
    batch: u64,
}

impl Drop for ReadsHeld<'_> {
    fn drop(&mut self) {
        self.visibility.published.fetch_max(self.batch, Ordering::AcqRel);
        self.visibility.changed.notify_waiters();
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
        let (acknowledged, published) = std::sync::mpsc::channel::<()>();
        let writer = std::thread::spawn({
            let visibility = visibility.clone();
            move || {
                let held = visibility.acknowledging();
                acknowledged.send(()).unwrap();
                std::thread::sleep(Duration::from_millis(50));
                drop(held);
            }
        });
        published.recv().unwrap();
        let read = tokio::spawn({
            let visibility = visibility.clone();
            async move { visibility.settled().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!read.is_finished(), "a read went ahead of an acknowledged batch still unpublished");
        tokio::time::timeout(Duration::from_secs(5), read).await.unwrap().unwrap();
        writer.join().unwrap();
    }

    #[tokio::test]
    async fn a_writer_that_dies_before_publishing_leaves_no_read_waiting() {
        let visibility = Arc::new(Visibility::default());
        let died = std::thread::spawn({
            let visibility = visibility.clone();
            move || {
                let _held = visibility.acknowledging();
                panic!("the writer dies between its answers and the publication");
            }
        });
        assert!(died.join().is_err());
        tokio::time::timeout(Duration::from_secs(5), visibility.settled()).await.expect("the read went ahead");
    }
}
