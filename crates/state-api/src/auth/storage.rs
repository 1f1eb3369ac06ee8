//! A tenant's storage quota: how many keys and bytes may lie under its prefixes. The figure
//! held to it is measured (`store_usage` over each prefix), not counted on every write, so it
//! works the same for one server, a joined process and PostgreSQL replicas sharing a store:
//! every server measures the one store. A measurement is reused for at least a second, and
//! for twenty times as long as it took, so measuring a large tenant costs at most a twentieth
//! of a core. Past its limit a tenant can still remove (delete, release, ack); every call
//! that could add is refused until it has made room. Between two measurements it may go past
//! the limit by what it writes meanwhile, which its write rate bounds.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
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

#[derive(Debug)]
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
}

/// One tenant's storage allowance and its last measurement.
#[derive(Debug)]
pub struct StorageQuota {
    limits: StorageLimits,
    /// One measurement at a time: calls that arrive while it runs wait for its figure.
    measured: tokio::sync::Mutex<Option<Measured>>,
    refused: AtomicU64,
}

impl StorageQuota {
    pub fn new(limits: StorageLimits) -> StorageQuota {
        StorageQuota { limits, measured: tokio::sync::Mutex::new(None), refused: AtomicU64::new(0) }
    }

    pub fn limits(&self) -> StorageLimits {
        self.limits
    }

    /// Writes refused for the limits since the server started.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Takes `usage`, measured just now elsewhere (for `state_health`), as the figure to decide by.
    pub(crate) async fn measured_now(&self, usage: StorageUsage, took: Duration) {
        *self.measured.lock().await =
            Some(Measured { usage, charged: StorageUsage::default(), shrunk: false, at: Instant::now(), took });
    }

    /// The last measurement, if one was made.
    pub fn last_usage(&self) -> Option<StorageUsage> {
        self.measured.try_lock().ok().and_then(|m| m.as_ref().map(|m| m.usage))
    }

    /// Lets `op` through, or refuses it because the tenant `name` holds its limit already.
    /// `charge` is what the call may add (one key, its arguments' bytes): calls let through on
    /// a reused figure are added to it, and a figure full only by such charges is measured
    /// again before anything is refused. `measure` measures the tenant's prefixes; it runs
    /// only when the figure is stale, or full by charges alone.
    pub(crate) async fn admit<F, Fut>(
        &self,
        name: &str,
        op: Operation,
        charge: StorageUsage,
        measure: F,
    ) -> Result<(), ApiError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<StorageUsage, ApiError>>,
    {
        let mut measured = self.measured.lock().await;
        if FREES_SPACE.contains(&op) {
            if let Some(last) = measured.as_mut() {
                last.shrunk = true;
            }
            return Ok(());
        }
        let fresh =
            measured.as_ref().is_some_and(|last| last.at.elapsed() < REUSE_AT_LEAST.max(last.took * REUSE_FACTOR));
        // A figure full only by what calls may have added, or that removals may have shrunk, is
        // no reason to refuse: it is measured again. Measuring costs what the tenant holds,
        // which its own limit bounds.
        let unsure = measured.as_ref().is_some_and(|last| {
            (last.charged != StorageUsage::default() || last.shrunk) && self.full(last.total()).is_some()
        });
        if !fresh || unsure {
            let started = Instant::now();
            let usage = measure().await?;
            *measured = Some(Measured {
                usage,
                charged: StorageUsage::default(),
                shrunk: false,
                at: Instant::now(),
                took: started.elapsed(),
            });
        }
        let Some(last) = measured.as_mut() else {
            return Err(ApiError::new(ErrorCode::Internal, "a storage figure was measured and then lost"));
        };
        if let Some(held) = self.full(last.total()) {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(ApiError::new(
                ErrorCode::QuotaExceeded,
                format!(
                    "token `{name}` holds {held} under its prefixes (its storage quota): nothing was changed; \
                     delete keys or ack messages to make room"
                ),
            ));
        }
        last.charged.keys += charge.keys;
        last.charged.bytes += charge.bytes;
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
    use std::sync::Mutex;

    use super::*;

    fn quota(max_keys: Option<u64>, max_bytes: Option<u64>) -> StorageQuota {
        StorageQuota::new(StorageLimits::of("test", max_keys, max_bytes).unwrap().unwrap())
    }

    const ONE_KEY: StorageUsage = StorageUsage { keys: 1, bytes: 10 };

    /// A store whose measurement answers what `held` holds, counting measurements.
    struct Store {
        held: Mutex<StorageUsage>,
        measured: Mutex<usize>,
    }

    impl Store {
        fn holding(keys: u64, bytes: u64) -> Store {
            Store { held: Mutex::new(StorageUsage { keys, bytes }), measured: Mutex::new(0) }
        }

        async fn measure(&self) -> Result<StorageUsage, ApiError> {
            *self.measured.lock().unwrap() += 1;
            Ok(*self.held.lock().unwrap())
        }

        fn measured(&self) -> usize {
            *self.measured.lock().unwrap()
        }
    }

    #[tokio::test]
    async fn calls_are_charged_to_a_fresh_figure_and_a_figure_full_by_charges_is_measured_again() {
        let quota = quota(Some(3), None);
        let store = Store::holding(1, 10);
        quota.admit("t", Operation::StateSet, ONE_KEY, || store.measure()).await.unwrap();
        quota.admit("t", Operation::StateSet, ONE_KEY, || store.measure()).await.unwrap();
        assert_eq!(store.measured(), 1, "the second call is decided on the first figure and its charge");
        // 1 measured + 2 charged = 3: full by charges alone, so it is measured again. The two
        // calls were overwrites and the store still holds 1 key: let through.
        quota.admit("t", Operation::StateSet, ONE_KEY, || store.measure()).await.unwrap();
        assert_eq!(store.measured(), 2);
        // Now the store really is full.
        *store.held.lock().unwrap() = StorageUsage { keys: 3, bytes: 30 };
        quota.admit("t", Operation::StateSet, ONE_KEY, || store.measure()).await.unwrap();
        let refused = quota.admit("t", Operation::StateSet, ONE_KEY, || store.measure()).await.unwrap_err();
        assert_eq!(refused.code, ErrorCode::QuotaExceeded);
        assert!(refused.message.contains("holds 3 keys of its 3"), "{}", refused.message);
        assert!(refused.retry_after_ms.is_none(), "waiting does not make room");
        // A refusal on a measured figure is not measured again while it is fresh.
        let before = store.measured();
        quota.admit("t", Operation::QueueSend, ONE_KEY, || store.measure()).await.unwrap_err();
        assert_eq!(store.measured(), before);
        // Removing is always let through, and the next call looks again.
        quota.admit("t", Operation::StateDelete, ONE_KEY, || store.measure()).await.unwrap();
        *store.held.lock().unwrap() = StorageUsage { keys: 2, bytes: 20 };
        quota.admit("t", Operation::StateSet, ONE_KEY, || store.measure()).await.unwrap();
        assert_eq!(store.measured(), before + 1);
        assert_eq!(quota.refused(), 2);
        assert_eq!(quota.last_usage(), Some(StorageUsage { keys: 2, bytes: 20 }));
    }

    #[tokio::test]
    async fn bytes_are_a_limit_of_their_own() {
        let quota = quota(None, Some(100));
        let store = Store::holding(1, 100);
        let refused = quota.admit("t", Operation::SessionSave, ONE_KEY, || store.measure()).await.unwrap_err();
        assert!(refused.message.contains("100 bytes of its 100"), "{}", refused.message);
    }

    #[tokio::test]
    async fn a_failed_measurement_refuses_the_call_and_is_not_kept() {
        let quota = quota(Some(3), None);
        let down = || async { Err(ApiError::new(ErrorCode::Unavailable, "owner gone")) };
        assert_eq!(
            quota.admit("t", Operation::StateSet, ONE_KEY, down).await.unwrap_err().code,
            ErrorCode::Unavailable
        );
        assert_eq!(quota.last_usage(), None);
        let store = Store::holding(0, 0);
        quota.admit("t", Operation::StateSet, ONE_KEY, || store.measure()).await.unwrap();
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
