//! A tenant's storage quota: how many keys and bytes may lie under its prefixes. The figure
//! held to it is measured (`store_usage` over each prefix), not counted on every write, so it
//! works the same for one server, a joined process and PostgreSQL replicas sharing a store:
//! every server measures the one store. A measurement is reused for at least a second, and
//! for twenty times as long as it took, so measuring a large tenant costs at most a twentieth
//! of a core; a stale one is measured again in the background while calls go on. Past its limit a tenant can still remove (delete, release, ack); every call
//! that could add is refused until it has made room. Between two measurements it may go past
//! the limit by what it writes meanwhile, which its write rate bounds.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use state_core::ops::usage::UsageResult;

use crate::catalog::Operation;
use crate::reply::{ApiError, ErrorCode};

/// The shortest time a measurement is reused for.
const REUSE_AT_LEAST: Duration = Duration::from_secs(1);
/// A measurement is reused for this many times as long as it took.
const REUSE_FACTOR: u32 = 20;

/// Calls that only take away: let through past the limit, since they are how a tenant makes
/// room. An operation missing here is refused past the limit, which errs on the safe side.
const FREES_SPACE: [Operation; 7] = [
    Operation::StateDelete,
    Operation::LeaseRelease,
    Operation::SemaphoreRelease,
    Operation::PathsRelease,
    Operation::QueueAck,
    Operation::KnowledgeDelete,
    Operation::AgentCheckpointDeleteState,
];

/// The limits an entry of a tokens file or a grant states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StorageLimits {
    pub max_keys: Option<u64>,
    pub max_bytes: Option<u64>,
}

impl StorageLimits {
    /// The limits, checked; `None` when neither is given.
    pub(crate) fn of(
        what: &str,
        max_keys: Option<u64>,
        max_bytes: Option<u64>,
    ) -> Result<Option<StorageLimits>, String> {
        if max_keys == Some(0) || max_bytes == Some(0) {
            return Err(format!("{what}: max_keys and max_bytes must be at least 1 (a read-only token holds nothing)"));
        }
        Ok((max_keys.is_some() || max_bytes.is_some()).then_some(StorageLimits { max_keys, max_bytes }))
    }
}

/// What a tenant was last measured to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StorageUsage {
    pub keys: u64,
    pub bytes: u64,
}

impl StorageUsage {
    pub(crate) fn add(&mut self, measured: &UsageResult) {
        self.keys += measured.keys;
        self.bytes += measured.bytes;
    }
}

#[derive(Debug, Clone, Copy)]
struct Measured {
    usage: StorageUsage,
    /// What calls let through since may have added.
    charged: StorageUsage,
    /// Whether a removal was let through since.
    shrunk: bool,
    at: Instant,
    took: Duration,
}

impl Measured {
    fn total(&self) -> StorageUsage {
        StorageUsage { keys: self.usage.keys + self.charged.keys, bytes: self.usage.bytes + self.charged.bytes }
    }

    fn stale(&self) -> bool {
        self.at.elapsed() >= REUSE_AT_LEAST.max(self.took * REUSE_FACTOR)
    }
}

/// One tenant's storage allowance and its last measurement.
#[derive(Debug)]
pub struct StorageQuota {
    limits: StorageLimits,
    figure: Mutex<Option<Measured>>,
    /// One measurement at a time: a call that must wait for a figure waits for the one running.
    measuring: tokio::sync::Mutex<()>,
    /// A stale figure is being measured again in the background.
    refreshing: AtomicBool,
    refused: AtomicU64,
}

/// What a call is decided on.
enum Figure<F> {
    /// The figure as it stands, fresh or being refreshed meanwhile.
    Standing,
    /// None yet, or one that would refuse only by estimates: measured (by this) before deciding.
    MeasureFirst(F),
}

impl StorageQuota {
    pub fn new(limits: StorageLimits) -> StorageQuota {
        StorageQuota {
            limits,
            figure: Mutex::new(None),
            measuring: tokio::sync::Mutex::new(()),
            refreshing: AtomicBool::new(false),
            refused: AtomicU64::new(0),
        }
    }

    pub fn limits(&self) -> StorageLimits {
        self.limits
    }

    /// Writes refused for the limits since the server started.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// The last measurement, if one was made.
    pub fn last_usage(&self) -> Option<StorageUsage> {
        self.figure().as_ref().map(|m| m.usage)
    }

    fn figure(&self) -> std::sync::MutexGuard<'_, Option<Measured>> {
        // A poisoned figure is still a figure: at worst one charge was lost.
        self.figure.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes `usage`, measured from `began`, as the figure to decide by. What calls were
    /// charged while it was measured stays charged: the measurement may not have seen them.
    fn settle(&self, usage: StorageUsage, began: Instant, charged_before: StorageUsage) {
        let mut figure = self.figure();
        let charged_since = figure.as_ref().map_or(StorageUsage::default(), |m| StorageUsage {
            keys: m.charged.keys.saturating_sub(charged_before.keys),
            bytes: m.charged.bytes.saturating_sub(charged_before.bytes),
        });
        *figure =
            Some(Measured { usage, charged: charged_since, shrunk: false, at: Instant::now(), took: began.elapsed() });
    }

    /// Measures now, one measurement at a time; a figure another call measured while this
    /// one waited is taken instead. Charges past `charged_before` (by default, those standing
    /// when the measurement starts) are kept.
    async fn measure_now<Fut>(
        &self,
        measure: impl FnOnce() -> Fut,
        charged_before: Option<StorageUsage>,
    ) -> Result<(), ApiError>
    where
        Fut: Future<Output = Result<StorageUsage, ApiError>>,
    {
        let waited_from = Instant::now();
        let _one = self.measuring.lock().await;
        if self.figure().is_some_and(|m| m.at >= waited_from && !self.unsure(&m)) {
            return Ok(());
        }
        let charged_before =
            charged_before.unwrap_or_else(|| self.figure().map_or(StorageUsage::default(), |m| m.charged));
        let began = Instant::now();
        let usage = measure().await?;
        self.settle(usage, began, charged_before);
        Ok(())
    }

    /// Takes `usage`, measured just now elsewhere (for `state_health`), as the figure to decide by.
    pub(crate) fn measured_now(&self, usage: StorageUsage, took: Duration) {
        *self.figure() =
            Some(Measured { usage, charged: StorageUsage::default(), shrunk: false, at: Instant::now(), took });
    }

    /// A figure full only by what calls may have added, or that removals may have shrunk: no
    /// reason to refuse until it is measured again. Measuring costs what the tenant holds,
    /// which its own limit bounds.
    fn unsure(&self, figure: &Measured) -> bool {
        (figure.charged != StorageUsage::default() || figure.shrunk) && self.full(figure.total()).is_some()
    }

    /// Lets `op` through, or refuses it because the tenant `name` holds its limit already.
    /// `charge` is what the call may add (one key, its arguments' bytes): calls let through on
    /// a standing figure are added to it. `measure` measures the tenant's prefixes: before
    /// the first call, before refusing on estimates, and in the background once the figure
    /// is stale (calls meanwhile are decided on the standing figure, so no call waits for a
    /// large tenant's scan).
    pub(crate) async fn admit<F, Fut>(
        self: &Arc<Self>,
        name: &str,
        op: Operation,
        charge: StorageUsage,
        measure: F,
    ) -> Result<(), ApiError>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<StorageUsage, ApiError>> + Send + 'static,
    {
        if FREES_SPACE.contains(&op) {
            if let Some(figure) = self.figure().as_mut() {
                figure.shrunk = true;
            }
            return Ok(());
        }
        let standing = *self.figure();
        let decide_on = match standing {
            Some(figure) if !self.unsure(&figure) => {
                if figure.stale() && !self.refreshing.swap(true, Ordering::AcqRel) {
                    let quota = Arc::clone(self);
                    // This call is charged before the scan runs, and the scan may miss its write.
                    let charged_before = Some(figure.charged);
                    tokio::spawn(async move {
                        // A failed refresh keeps the standing figure; the next stale call tries again.
                        let _ = quota.measure_now(measure, charged_before).await;
                        quota.refreshing.store(false, Ordering::Release);
                    });
                }
                Figure::Standing
            }
            _ => Figure::MeasureFirst(measure),
        };
        if let Figure::MeasureFirst(measure) = decide_on {
            self.measure_now(measure, None).await?;
        }
        let mut figure = self.figure();
        let Some(figure) = figure.as_mut() else {
            return Err(ApiError::new(ErrorCode::Internal, "a storage figure was measured and then lost"));
        };
        if let Some(held) = self.full(figure.total()) {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(ApiError::new(
                ErrorCode::QuotaExceeded,
                format!(
                    "token `{name}` holds {held} under its prefixes (its storage quota): nothing was changed; \
                     delete keys or ack messages to make room"
                ),
            ));
        }
        figure.charged.keys += charge.keys;
        figure.charged.bytes += charge.bytes;
        Ok(())
    }

    /// What `usage` fills to its limit, if it does.
    fn full(&self, usage: StorageUsage) -> Option<String> {
        match (self.limits.max_keys, self.limits.max_bytes) {
            (Some(max), _) if usage.keys >= max => Some(format!("{} keys of its {max}", usage.keys)),
            (_, Some(max)) if usage.bytes >= max => Some(format!("{} bytes of its {max}", usage.bytes)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota(max_keys: Option<u64>, max_bytes: Option<u64>) -> Arc<StorageQuota> {
        Arc::new(StorageQuota::new(StorageLimits::of("test", max_keys, max_bytes).unwrap().unwrap()))
    }

    const ONE_KEY: StorageUsage = StorageUsage { keys: 1, bytes: 10 };

    /// A store whose measurement answers what it holds, counting measurements.
    #[derive(Default)]
    struct Store {
        held: Mutex<StorageUsage>,
        measured: AtomicU64,
    }

    impl Store {
        fn holding(keys: u64, bytes: u64) -> Arc<Store> {
            Arc::new(Store { held: Mutex::new(StorageUsage { keys, bytes }), measured: AtomicU64::new(0) })
        }

        fn hold(&self, keys: u64, bytes: u64) {
            *self.held.lock().unwrap() = StorageUsage { keys, bytes };
        }

        fn measured(&self) -> u64 {
            self.measured.load(Ordering::SeqCst)
        }
    }

    /// A measurement of `store`, as `Api::usage` gives one.
    fn of(store: &Arc<Store>) -> impl FnOnce() -> std::future::Ready<Result<StorageUsage, ApiError>> + Send + 'static {
        let store = Arc::clone(store);
        move || {
            store.measured.fetch_add(1, Ordering::SeqCst);
            std::future::ready(Ok(*store.held.lock().unwrap()))
        }
    }

    #[tokio::test]
    async fn calls_are_charged_to_a_fresh_figure_and_a_figure_full_by_charges_is_measured_again() {
        let quota = quota(Some(3), None);
        let store = Store::holding(1, 10);
        quota.admit("t", Operation::StateSet, ONE_KEY, of(&store)).await.unwrap();
        quota.admit("t", Operation::StateSet, ONE_KEY, of(&store)).await.unwrap();
        assert_eq!(store.measured(), 1, "the second call is decided on the first figure and its charge");
        // 1 measured + 2 charged = 3: full by charges alone, so it is measured again. The two
        // calls were overwrites and the store still holds 1 key: let through.
        quota.admit("t", Operation::StateSet, ONE_KEY, of(&store)).await.unwrap();
        assert_eq!(store.measured(), 2);
        // Now the store really is full.
        store.hold(3, 30);
        quota.admit("t", Operation::StateSet, ONE_KEY, of(&store)).await.unwrap();
        let refused = quota.admit("t", Operation::StateSet, ONE_KEY, of(&store)).await.unwrap_err();
        assert_eq!(refused.code, ErrorCode::QuotaExceeded);
        assert!(refused.message.contains("holds 3 keys of its 3"), "{}", refused.message);
        assert!(refused.retry_after_ms.is_none(), "waiting does not make room");
        // A refusal on a measured figure is not measured again while it is fresh.
        let before = store.measured();
        quota.admit("t", Operation::QueueSend, ONE_KEY, of(&store)).await.unwrap_err();
        assert_eq!(store.measured(), before);
        // Removing is always let through, and the next call looks again.
        quota.admit("t", Operation::StateDelete, ONE_KEY, of(&store)).await.unwrap();
        store.hold(2, 20);
        quota.admit("t", Operation::StateSet, ONE_KEY, of(&store)).await.unwrap();
        assert_eq!(store.measured(), before + 1);
        assert_eq!(quota.refused(), 2);
        assert_eq!(quota.last_usage(), Some(StorageUsage { keys: 2, bytes: 20 }));
    }

    #[tokio::test]
    async fn a_stale_figure_is_measured_again_in_the_background_while_calls_go_on() {
        let quota = quota(Some(100), None);
        let store = Store::holding(10, 0);
        quota.admit("t", Operation::StateSet, ONE_KEY, of(&store)).await.unwrap();
        store.hold(50, 0);
        // The figure grows old: the next call is decided on it at once, and a measurement starts.
        if let Some(figure) = quota.figure().as_mut() {
            figure.at -= Duration::from_secs(5);
        }
        quota.admit("t", Operation::StateSet, ONE_KEY, of(&store)).await.unwrap();
        for _ in 0..1000 {
            if quota.last_usage() == Some(StorageUsage { keys: 50, bytes: 0 }) {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(quota.last_usage(), Some(StorageUsage { keys: 50, bytes: 0 }), "measured in the background");
        assert_eq!(store.measured(), 2);
        // The call let through while it measured stays charged: the scan may have missed it.
        assert_eq!(quota.figure().map(|f| f.charged.keys), Some(1));
    }

    #[tokio::test]
    async fn bytes_are_a_limit_of_their_own() {
        let quota = quota(None, Some(100));
        let store = Store::holding(1, 100);
        let refused = quota.admit("t", Operation::SessionSave, ONE_KEY, of(&store)).await.unwrap_err();
        assert!(refused.message.contains("100 bytes of its 100"), "{}", refused.message);
    }

    #[tokio::test]
    async fn a_failed_measurement_refuses_the_call_and_is_not_kept() {
        let quota = quota(Some(3), None);
        let down = || std::future::ready(Err(ApiError::new(ErrorCode::Unavailable, "owner gone")));
        assert_eq!(
            quota.admit("t", Operation::StateSet, ONE_KEY, down).await.unwrap_err().code,
            ErrorCode::Unavailable
        );
        assert_eq!(quota.last_usage(), None);
        quota.admit("t", Operation::StateSet, ONE_KEY, of(&Store::holding(0, 0))).await.unwrap();
    }

    #[test]
    fn limits_must_leave_room_for_something() {
        assert!(StorageLimits::of("token `t`", Some(0), None).unwrap_err().contains("at least 1"));
        assert_eq!(StorageLimits::of("t", None, None).unwrap(), None);
        assert_eq!(
            StorageLimits::of("t", None, Some(5)).unwrap(),
            Some(StorageLimits { max_keys: None, max_bytes: Some(5) })
        );
    }

    #[test]
    fn what_frees_space_is_a_change() {
        for op in FREES_SPACE {
            assert!(op.is_mutating(), "{op:?}");
        }
    }
}
