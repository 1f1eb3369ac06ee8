//! A tenant's storage quota: how many keys and bytes may lie under its prefixes. The figure
//! held to it is measured (`store_usage` over each prefix), not counted on every write, so it
//! works the same for one server, a joined process and PostgreSQL replicas sharing a store:
//! every server measures the one store.
//!
//! - A measurement is reused for a second, or twenty times as long as it took if that is
//!   longer, so measuring a large tenant costs at most a twentieth of a core; a stale one is
//!   measured again in a background task while calls go on. One measurement runs at a time,
//!   in a task of its own, so a client that hangs up does not leave a scan behind it.
//! - Calls let through are charged to the figure: the keys they may create and their bytes.
//!   A figure that would refuse only because of those charges, or after a removal, is measured
//!   again first, but no sooner than twenty times the last scan's time after it.
//! - Past its limit a tenant can still remove (delete, release, ack) and work with what it
//!   holds (receive, renew, run its workflows); every call that could add is refused until it
//!   has made room. Between two measurements it may pass the limit by what it writes
//!   meanwhile, which its write rate bounds.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use state_core::ops::usage::UsageResult;

use crate::catalog::Operation;
use crate::reply::{ApiError, ErrorCode};

/// The shortest time a measurement is reused for.
const REUSE_AT_LEAST: Duration = Duration::from_secs(1);
/// A measurement is reused for this many times as long as it took.
const REUSE_FACTOR: u32 = 20;

/// How an operation bears on what a storage quota counts. Decided for every operation, with
/// no catch-all: a new operation does not compile until someone says which it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bearing {
    /// A read: it changes nothing.
    Reads,
    /// It only takes away: let through past the limit, since it is how a tenant makes room.
    Frees,
    /// It adds nothing a quota counts: it moves, renews or settles what is held, or writes
    /// workflow runs, which are not counted (their ids are drawn by the store, not named under
    /// a prefix). Let through past the limit, uncharged.
    Neutral,
    /// It may add keys and bytes, charged by its arguments.
    Adds,
}

fn bearing(op: Operation) -> Bearing {
    use Bearing::{Adds, Frees, Neutral, Reads};
    use Operation as Op;
    match op {
        Op::StateDelete
        | Op::StateReset
        | Op::LeaseRelease
        | Op::SemaphoreRelease
        | Op::PathsRelease
        | Op::QueueAck
        | Op::KnowledgeDelete
        | Op::AgentCheckpointDeleteState
        | Op::SidecarStateDelete
        | Op::SidecarLeaseRelease
        | Op::CaxtonDelete
        | Op::MemoryDeleteEntities
        | Op::MemoryDeleteObservations
        | Op::MemoryDeleteRelations => Frees,
        Op::LeaseRenew
        | Op::SemaphoreRenew
        | Op::PathsRenew
        | Op::QueueReceive
        | Op::QueueNack
        | Op::QueueRedrive
        | Op::WorkflowCreate
        | Op::WorkflowClaim
        | Op::WorkflowCheckpoint
        | Op::WorkflowHeartbeat
        | Op::WorkflowComplete
        | Op::WorkflowFail
        | Op::WorkflowCancel
        | Op::WorkflowSignal
        | Op::WorkflowAwaitSignal
        | Op::SidecarWorkflowCreate
        | Op::SidecarWorkflowClaim
        | Op::SidecarWorkflowCheckpoint
        | Op::SidecarLeaseRenew
        | Op::SidecarReset => Neutral,
        Op::StateSet
        | Op::StateTxn
        | Op::LeaseAcquire
        | Op::SemaphoreAcquire
        | Op::PathsReserve
        | Op::QueueSend
        | Op::SessionSave
        | Op::CheckpointSave
        | Op::KnowledgeSave
        | Op::StoreImport
        | Op::AgentCheckpointSetState
        | Op::AgentCheckpointForceSetState
        | Op::SidecarStateSet
        | Op::SidecarLeaseAcquire
        | Op::SidecarSessionSave
        | Op::CaxtonStore
        | Op::CaxtonBatchStore
        | Op::SageSaveCheckpoint
        | Op::SageSaveKnowledge
        | Op::GoldfishCheckpoint
        | Op::MemoryCreateEntities
        | Op::MemoryCreateRelations
        | Op::MemoryAddObservations
        | Op::MemoryImport => Adds,
        Op::StateGet
        | Op::StateList
        | Op::StateBatchGet
        | Op::HistoryLog
        | Op::LeaseGet
        | Op::LeaseList
        | Op::SemaphoreGet
        | Op::SemaphoreList
        | Op::PathsList
        | Op::PathsCheck
        | Op::PathsScopes
        | Op::QueuePeek
        | Op::QueueList
        | Op::WorkflowResume
        | Op::WorkflowStatus
        | Op::WorkflowList
        | Op::WorkflowDiscover
        | Op::SessionRestore
        | Op::SessionList
        | Op::StateHealth
        | Op::StateWatch
        | Op::CheckpointRestore
        | Op::CheckpointSearch
        | Op::CheckpointTimeline
        | Op::KnowledgeRecall
        | Op::KnowledgeList
        | Op::StoreExport
        | Op::StoreUsage
        | Op::AgentCheckpointGetState
        | Op::AgentCheckpointListState
        | Op::SidecarStateGet
        | Op::SidecarStateList
        | Op::SidecarWorkflowDiscover
        | Op::SidecarWorkflowResume
        | Op::SidecarWorkflowStatus
        | Op::SidecarWorkflowList
        | Op::SidecarHealth
        | Op::SidecarSessionRestore
        | Op::SidecarHistoryLog
        | Op::CaxtonRetrieve
        | Op::CaxtonList
        | Op::CaxtonExists
        | Op::CaxtonBatchRetrieve
        | Op::SageListCheckpoints
        | Op::SageLoadCheckpoint
        | Op::SageRecallKnowledge
        | Op::MemoryReadGraph
        | Op::MemorySearchNodes
        | Op::MemoryOpenNodes => Reads,
    }
}

/// What a change may do to what a tenant holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StorageEffect {
    /// It only takes away.
    Frees,
    /// It adds nothing counted.
    Neutral,
    /// It may add up to this much.
    Adds(StorageUsage),
}

impl StorageEffect {
    /// What `op` called with `args` may do: a transaction may create a key for each put it
    /// holds, an import one for each record, a batch store one for each item; any other change
    /// one key, and as many bytes as its arguments carry.
    pub(crate) fn of(op: Operation, args: &Value) -> StorageEffect {
        match bearing(op) {
            Bearing::Frees => return StorageEffect::Frees,
            Bearing::Neutral | Bearing::Reads => return StorageEffect::Neutral,
            Bearing::Adds => {}
        }
        let count = |field: &str| args.get(field).and_then(Value::as_array).map_or(0, Vec::len) as u64;
        let keys = match op {
            Operation::StateTxn => {
                let ops = ["success", "failure"]
                    .into_iter()
                    .flat_map(|branch| args.get(branch).and_then(Value::as_array).into_iter().flatten());
                let (mut puts, mut deletes) = (0, 0);
                for item in ops {
                    match item.get("op").and_then(Value::as_str) {
                        Some("put") => puts += 1,
                        Some("delete") => deletes += 1,
                        _ => {}
                    }
                }
                match (puts, deletes) {
                    (0, 0) => return StorageEffect::Neutral,
                    (0, _) => return StorageEffect::Frees,
                    (puts, _) => puts,
                }
            }
            Operation::StoreImport => count("records"),
            Operation::CaxtonBatchStore => count("items"),
            _ => 1,
        };
        StorageEffect::Adds(StorageUsage { keys: keys.max(1), bytes: state_core::limits::json_len(args) as u64 })
    }
}

/// The limits an entry of a tokens file or a grant states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StorageLimits {
    /// Live keys and named records (leases, queue messages, sessions and their versions, ...).
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

/// What a tenant holds: its keys and named records, and their bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StorageUsage {
    pub keys: u64,
    pub bytes: u64,
}

impl StorageUsage {
    /// Adds what one prefix was measured to hold: its keys and its named records count alike.
    pub(crate) fn add(&mut self, measured: &UsageResult) {
        self.keys += measured.keys + measured.records;
        self.bytes += measured.bytes;
    }

    fn plus(self, other: StorageUsage) -> StorageUsage {
        StorageUsage { keys: self.keys + other.keys, bytes: self.bytes + other.bytes }
    }

    fn minus(self, other: StorageUsage) -> StorageUsage {
        StorageUsage { keys: self.keys.saturating_sub(other.keys), bytes: self.bytes.saturating_sub(other.bytes) }
    }

    fn least(self, other: StorageUsage) -> StorageUsage {
        StorageUsage { keys: self.keys.min(other.keys), bytes: self.bytes.min(other.bytes) }
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
        self.usage.plus(self.charged)
    }

    /// Past its reuse: measured again in the background.
    fn stale(&self) -> bool {
        self.at.elapsed() >= REUSE_AT_LEAST.max(self.took * REUSE_FACTOR)
    }

    /// Long enough ago, for what its scan cost, to be measured again before a refusal.
    fn may_measure_again(&self) -> bool {
        self.at.elapsed() >= self.took * REUSE_FACTOR
    }
}

/// One tenant's storage allowance and its last measurement.
#[derive(Debug)]
pub struct StorageQuota {
    limits: StorageLimits,
    figure: Mutex<Option<Measured>>,
    /// Held by the one measurement running, in its own task.
    measuring: Arc<tokio::sync::Mutex<()>>,
    /// A stale figure is being measured again in the background.
    refreshing: AtomicBool,
    refused: AtomicU64,
}

impl StorageQuota {
    pub fn new(limits: StorageLimits) -> StorageQuota {
        StorageQuota {
            limits,
            figure: Mutex::new(None),
            measuring: Arc::new(tokio::sync::Mutex::new(())),
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

    /// Measures, one measurement at a time, in a task of its own that finishes even if this
    /// call is dropped; a figure measured by another while this one waited is taken instead.
    /// Charges made since `charged_before` (by default, those standing when it starts) stay.
    async fn measure_now<F, Fut>(
        self: &Arc<Self>,
        measure: F,
        charged_before: Option<StorageUsage>,
    ) -> Result<(), ApiError>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<StorageUsage, ApiError>> + Send + 'static,
    {
        let waited_from = Instant::now();
        let one_at_a_time = Arc::clone(&self.measuring).lock_owned().await;
        if self.figure().is_some_and(|m| m.at >= waited_from) {
            return Ok(());
        }
        let quota = Arc::clone(self);
        let measurement = tokio::spawn(async move {
            let _one_at_a_time = one_at_a_time;
            let standing = quota.figure().map_or(StorageUsage::default(), |m| m.charged);
            let charged_before = charged_before.map_or(standing, |before| before.least(standing));
            let began = Instant::now();
            let usage = measure().await?;
            let mut figure = quota.figure();
            let charged_since = figure.map_or(StorageUsage::default(), |m| m.charged.minus(charged_before));
            *figure = Some(Measured {
                usage,
                charged: charged_since,
                shrunk: false,
                at: Instant::now(),
                took: began.elapsed(),
            });
            Ok(())
        });
        measurement
            .await
            .map_err(|e| ApiError::new(ErrorCode::Internal, format!("measuring a storage quota failed: {e}")))?
    }

    /// What the tenant holds, for its `state_health`: the standing figure while it is fresh
    /// and unchanged, else measured now, no sooner than the last scan's cost allows (so
    /// asking for health costs no more scans than writing does).
    pub(crate) async fn usage_now<F, Fut>(self: &Arc<Self>, measure: F) -> Result<StorageUsage, ApiError>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<StorageUsage, ApiError>> + Send + 'static,
    {
        let standing = *self.figure();
        let changed = |f: &Measured| f.charged != StorageUsage::default() || f.shrunk;
        if standing.is_none_or(|figure| figure.stale() || (changed(&figure) && figure.may_measure_again())) {
            self.measure_now(measure, None).await?;
        }
        self.last_usage()
            .ok_or_else(|| ApiError::new(ErrorCode::Internal, "a storage figure was measured and then lost"))
    }

    /// Why a call that adds `charge` is refused at `total`, if it is: its keys would pass
    /// `max_keys`, or the tenant holds `max_bytes` already (one value's bytes are bounded by
    /// the value size limit).
    fn refusal(&self, total: StorageUsage, charge: StorageUsage) -> Option<String> {
        match (self.limits.max_keys, self.limits.max_bytes) {
            (Some(max), _) if total.keys + charge.keys > max => {
                Some(format!("{} keys and records of its {max}", total.keys))
            }
            (_, Some(max)) if total.bytes >= max => Some(format!("{} bytes of its {max}", total.bytes)),
            _ => None,
        }
    }

    /// Whether `figure` would refuse `charge` only because of charges or before a removal
    /// was seen: no reason to refuse until it is measured again.
    fn unsure(&self, figure: &Measured, charge: StorageUsage) -> bool {
        (figure.charged != StorageUsage::default() || figure.shrunk) && self.refusal(figure.total(), charge).is_some()
    }

    /// Lets a change with `effect` through for the tenant `name`, or refuses it because the
    /// tenant holds its limit. `measure` measures the tenant's prefixes: before the first call,
    /// before refusing on estimates (no sooner than the last scan's cost allows), and in the
    /// background once the figure is stale.
    pub(crate) async fn admit<F, Fut>(
        self: &Arc<Self>,
        name: &str,
        effect: StorageEffect,
        measure: F,
    ) -> Result<(), ApiError>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<StorageUsage, ApiError>> + Send + 'static,
    {
        let charge = match effect {
            StorageEffect::Neutral => return Ok(()),
            StorageEffect::Frees => {
                if let Some(figure) = self.figure().as_mut() {
                    figure.shrunk = true;
                }
                return Ok(());
            }
            StorageEffect::Adds(charge) => charge,
        };
        let standing = *self.figure();
        match standing {
            Some(figure) if !(self.unsure(&figure, charge) && figure.may_measure_again()) => {
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
            }
            _ => self.measure_now(measure, None).await?,
        }
        let mut figure = self.figure();
        let Some(figure) = figure.as_mut() else {
            return Err(ApiError::new(ErrorCode::Internal, "a storage figure was measured and then lost"));
        };
        if let Some(held) = self.refusal(figure.total(), charge) {
            self.refused.fetch_add(1, Ordering::Relaxed);
            let estimated = if figure.charged == StorageUsage::default() {
                ""
            } else {
                " (by its last measurement and the writes since)"
            };
            return Err(ApiError::new(
                ErrorCode::QuotaExceeded,
                format!(
                    "token `{name}` holds {held} under its prefixes{estimated} (its storage quota): nothing was \
                     changed; delete keys or ack messages to make room"
                ),
            ));
        }
        figure.charged = figure.charged.plus(charge);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota(max_keys: Option<u64>, max_bytes: Option<u64>) -> Arc<StorageQuota> {
        Arc::new(StorageQuota::new(StorageLimits::of("test", max_keys, max_bytes).unwrap().unwrap()))
    }

    const ADD_ONE: StorageEffect = StorageEffect::Adds(StorageUsage { keys: 1, bytes: 10 });

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

    /// Makes the figure older by `millis`: long enough ago, for a scan this cheap, to be measured
    /// again before a refusal (twenty times its cost), not yet stale (a second).
    fn age(quota: &StorageQuota, millis: u64) {
        if let Some(figure) = quota.figure().as_mut() {
            figure.at -= Duration::from_millis(millis);
        }
    }

    #[tokio::test]
    async fn calls_are_charged_to_a_fresh_figure_and_a_figure_full_by_charges_is_measured_again() {
        let quota = quota(Some(3), None);
        let store = Store::holding(1, 10);
        quota.admit("t", ADD_ONE, of(&store)).await.unwrap();
        quota.admit("t", ADD_ONE, of(&store)).await.unwrap();
        assert_eq!(store.measured(), 1, "the second call is decided on the first figure and its charge");
        // 1 measured + 2 charged + 1 = 4: over by charges alone. Measured again as soon as the
        // last scan's cost allows; until then refused on the estimate.
        if let Some(figure) = quota.figure().as_mut() {
            figure.took = Duration::from_millis(10);
        }
        let estimated = quota.admit("t", ADD_ONE, of(&store)).await.unwrap_err();
        assert!(estimated.message.contains("by its last measurement and the writes since"), "{}", estimated.message);
        assert_eq!(store.measured(), 1, "not within twenty times the 10 ms the scan took");
        age(&quota, 300);
        // The two calls were overwrites and the store still holds 1 key: let through.
        quota.admit("t", ADD_ONE, of(&store)).await.unwrap();
        assert_eq!(store.measured(), 2);
        // Now the store really is full.
        store.hold(3, 30);
        quota.admit("t", ADD_ONE, of(&store)).await.unwrap();
        age(&quota, 300);
        let refused = quota.admit("t", ADD_ONE, of(&store)).await.unwrap_err();
        assert_eq!(refused.code, ErrorCode::QuotaExceeded);
        assert!(refused.message.contains("holds 3 keys and records of its 3"), "{}", refused.message);
        assert!(refused.retry_after_ms.is_none(), "waiting does not make room");
        // A refusal on a measured figure is not measured again while it is fresh.
        let before = store.measured();
        age(&quota, 300);
        quota.admit("t", ADD_ONE, of(&store)).await.unwrap_err();
        assert_eq!(store.measured(), before);
        // Removing is always let through, and the next call looks again.
        quota.admit("t", StorageEffect::Frees, of(&store)).await.unwrap();
        store.hold(2, 20);
        age(&quota, 300);
        quota.admit("t", ADD_ONE, of(&store)).await.unwrap();
        assert_eq!(store.measured(), before + 1);
        assert_eq!(quota.refused(), 3);
        assert_eq!(quota.last_usage(), Some(StorageUsage { keys: 2, bytes: 20 }));
    }

    #[tokio::test]
    async fn a_stale_figure_is_measured_again_in_the_background_while_calls_go_on() {
        let quota = quota(Some(100), None);
        let store = Store::holding(10, 0);
        quota.admit("t", ADD_ONE, of(&store)).await.unwrap();
        store.hold(50, 0);
        // The figure grows old: the next call is decided on it at once, and a measurement starts.
        if let Some(figure) = quota.figure().as_mut() {
            figure.at -= Duration::from_secs(5);
        }
        quota.admit("t", ADD_ONE, of(&store)).await.unwrap();
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
        let refused = quota.admit("t", ADD_ONE, of(&store)).await.unwrap_err();
        assert!(refused.message.contains("100 bytes of its 100"), "{}", refused.message);
    }

    #[tokio::test]
    async fn a_failed_measurement_refuses_the_call_and_is_not_kept() {
        let quota = quota(Some(3), None);
        let down = || std::future::ready(Err(ApiError::new(ErrorCode::Unavailable, "owner gone")));
        assert_eq!(quota.admit("t", ADD_ONE, down).await.unwrap_err().code, ErrorCode::Unavailable);
        assert_eq!(quota.last_usage(), None);
        quota.admit("t", ADD_ONE, of(&Store::holding(0, 0))).await.unwrap();
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
    fn what_reads_is_exactly_what_the_catalog_says_changes_nothing() {
        for op in Operation::all() {
            assert_eq!(bearing(op) == Bearing::Reads, !op.is_mutating(), "{op:?}");
        }
    }

    #[test]
    fn a_change_is_charged_for_the_keys_it_may_create() {
        use serde_json::json;
        let puts = json!({"success": [{"op": "put", "key": "a", "value": 1}, {"op": "put", "key": "b", "value": 2},
            {"op": "delete", "key": "c"}], "failure": [{"op": "put", "key": "d", "value": 3}]});
        assert!(matches!(StorageEffect::of(Operation::StateTxn, &puts), StorageEffect::Adds(c) if c.keys == 3));
        let deletes = json!({"success": [{"op": "delete", "key": "a"}, {"op": "get", "key": "b"}]});
        assert_eq!(StorageEffect::of(Operation::StateTxn, &deletes), StorageEffect::Frees);
        let reads = json!({"compare": [], "success": [{"op": "get", "key": "b"}]});
        assert_eq!(StorageEffect::of(Operation::StateTxn, &reads), StorageEffect::Neutral);
        let import = json!({"records": [{}, {}, {}, {}]});
        assert!(matches!(StorageEffect::of(Operation::StoreImport, &import), StorageEffect::Adds(c) if c.keys == 4));
        let set = json!({"key": "k", "value": "v"});
        assert_eq!(
            StorageEffect::of(Operation::StateSet, &set),
            StorageEffect::Adds(StorageUsage { keys: 1, bytes: state_core::limits::json_len(&set) as u64 })
        );
        for settles in [Operation::QueueReceive, Operation::LeaseRenew, Operation::WorkflowComplete] {
            assert_eq!(StorageEffect::of(settles, &json!({})), StorageEffect::Neutral, "{settles:?}");
        }
        assert_eq!(StorageEffect::of(Operation::CaxtonDelete, &json!({})), StorageEffect::Frees);
    }
}
