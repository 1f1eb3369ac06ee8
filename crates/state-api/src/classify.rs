//! The outcome class of each result type: read off the status the core decided, never
//! re-derived here. One table, so HTTP status codes and CLI exit codes agree for every
//! operation.

use state_core::ops::admin::ResetResult;
use state_core::ops::checkpoint::{
    CheckpointRestoreResult, CheckpointSaveResult, CheckpointSearchResult, CheckpointTimelineResult, RestoreStatus,
};
use state_core::ops::health::HealthResult;
use state_core::ops::history::HistoryResult;
use state_core::ops::knowledge::{
    KnowledgeDeleteResult, KnowledgeListResult, KnowledgeRecallResult, KnowledgeSaveResult,
};
use state_core::ops::kv::{BatchGetResult, DeleteResult, GetResult, ListResult, SetResult};
use state_core::ops::lease::{AcquireResult, AcquireStatus, HoldResult, HoldStatus, LeaseGetResult, LeaseListResult};
use state_core::ops::queue::{
    QueueListResult, QueuePeekResult, QueueReceiveResult, QueueRedriveResult, QueueSendResult, QueueSettleResult,
    ReceiveStatus, SendStatus, SettleStatus,
};
use state_core::ops::reservation::{
    PathCheckResult, ReservationListResult, ReservationResult, ReservationStatus, ReserveResult, ReserveStatus,
    ScopeListResult,
};
use state_core::ops::semaphore::{
    PermitResult, PermitStatus, SemaphoreAcquireResult, SemaphoreGetResult, SemaphoreListResult, SemaphoreStatus,
};
use state_core::ops::session::{SessionListResult, SessionRestoreResult, SessionSaveResult};
use state_core::ops::transfer::{ExportResult, ImportResult};
use state_core::ops::txn::{TxnResult, TxnStatus};
use state_core::ops::usage::UsageResult;
use state_core::ops::watch::WatchResult;
use state_core::ops::workflow::{AwaitSignalResult, AwaitStatus, SignalResult, SignalStatus};
use state_core::ops::workflow::{
    CancelResult, CancelStatus, CheckpointResult, CheckpointStatus, ClaimResult, ClaimStatus, CreateRunResult,
    FinishResult, FoundStatus, HeartbeatResult, HolderStatus, ListRunsResult, ResumeResult, RunStatusResult,
};
use state_core::ops::{DeleteStatus, ReadStatus, WriteStatus};

use crate::reply::Outcome;

/// A result type whose status decides its outcome class.
pub trait Classify {
    fn outcome(&self) -> Outcome;
}

/// Results that are answers whatever they say (listings, health, creations).
macro_rules! always_ok {
    ($($result:ty),* $(,)?) => {
        $(impl Classify for $result {
            fn outcome(&self) -> Outcome {
                Outcome::Ok
            }
        })*
    };
}

always_ok!(
    ExportResult,
    UsageResult,
    ListResult,
    BatchGetResult,
    HistoryResult,
    LeaseGetResult,
    LeaseListResult,
    SemaphoreGetResult,
    SemaphoreListResult,
    ReservationListResult,
    ScopeListResult,
    PathCheckResult,
    QueuePeekResult,
    QueueListResult,
    QueueRedriveResult,
    CreateRunResult,
    ListRunsResult,
    SessionSaveResult,
    SessionListResult,
    HealthResult,
    ResetResult,
    WatchResult,
    CheckpointSaveResult,
    CheckpointSearchResult,
    CheckpointTimelineResult,
    KnowledgeRecallResult,
    KnowledgeListResult,
);

impl Classify for CheckpointRestoreResult {
    fn outcome(&self) -> Outcome {
        match self.status {
            RestoreStatus::Ok => Outcome::Ok,
            RestoreStatus::NotFound => Outcome::NotFound,
            RestoreStatus::Ambiguous => Outcome::Invalid,
        }
    }
}

fn write(status: WriteStatus) -> Outcome {
    match status {
        WriteStatus::Ok => Outcome::Ok,
        WriteStatus::Conflict => Outcome::Conflict,
        WriteStatus::Fenced => Outcome::Fenced,
    }
}

fn delete(status: DeleteStatus) -> Outcome {
    match status {
        DeleteStatus::Ok => Outcome::Ok,
        DeleteStatus::NotFound => Outcome::NotFound,
        DeleteStatus::Conflict => Outcome::Conflict,
        DeleteStatus::Fenced => Outcome::Fenced,
    }
}

/// Records that were written still were: the reply says so beside the conflicts.
impl Classify for ImportResult {
    fn outcome(&self) -> Outcome {
        if self.conflicts.is_empty() { Outcome::Ok } else { Outcome::Conflict }
    }
}

impl Classify for KnowledgeSaveResult {
    fn outcome(&self) -> Outcome {
        write(self.status)
    }
}

impl Classify for KnowledgeDeleteResult {
    fn outcome(&self) -> Outcome {
        delete(self.status)
    }
}

fn read(status: ReadStatus) -> Outcome {
    match status {
        ReadStatus::Ok => Outcome::Ok,
        ReadStatus::NotFound => Outcome::NotFound,
    }
}

fn found(status: FoundStatus) -> Outcome {
    match status {
        FoundStatus::Ok => Outcome::Ok,
        FoundStatus::NotFound => Outcome::NotFound,
    }
}

fn holder(status: HolderStatus) -> Outcome {
    match status {
        HolderStatus::Ok => Outcome::Ok,
        HolderStatus::Fenced => Outcome::Fenced,
        HolderStatus::NotFound => Outcome::NotFound,
    }
}

impl Classify for GetResult {
    fn outcome(&self) -> Outcome {
        read(self.status)
    }
}

impl Classify for SessionRestoreResult {
    fn outcome(&self) -> Outcome {
        read(self.status)
    }
}

impl Classify for SetResult {
    fn outcome(&self) -> Outcome {
        write(self.status)
    }
}

impl Classify for DeleteResult {
    fn outcome(&self) -> Outcome {
        delete(self.status)
    }
}

/// A transaction whose compares failed ran its `failure` branch: a normal result, but the
/// caller's preconditions did not hold, which scripts branch on like a conflict.
impl Classify for TxnResult {
    fn outcome(&self) -> Outcome {
        match (self.status, self.succeeded) {
            (TxnStatus::Fenced, _) => Outcome::Fenced,
            (TxnStatus::Ok, true) => Outcome::Ok,
            (TxnStatus::Ok, false) => Outcome::Conflict,
        }
    }
}

impl Classify for AcquireResult {
    fn outcome(&self) -> Outcome {
        match self.status {
            AcquireStatus::Acquired => Outcome::Ok,
            AcquireStatus::Held => Outcome::Conflict,
        }
    }
}

impl Classify for HoldResult {
    fn outcome(&self) -> Outcome {
        match self.status {
            HoldStatus::Ok => Outcome::Ok,
            HoldStatus::Lost => Outcome::Fenced,
        }
    }
}

impl Classify for SemaphoreAcquireResult {
    fn outcome(&self) -> Outcome {
        match self.status {
            SemaphoreStatus::Acquired => Outcome::Ok,
            SemaphoreStatus::Full | SemaphoreStatus::CapacityMismatch => Outcome::Conflict,
        }
    }
}

impl Classify for PermitResult {
    fn outcome(&self) -> Outcome {
        match self.status {
            PermitStatus::Ok => Outcome::Ok,
            PermitStatus::Lost => Outcome::Fenced,
        }
    }
}

impl Classify for ReserveResult {
    fn outcome(&self) -> Outcome {
        match self.status {
            ReserveStatus::Granted => Outcome::Ok,
            // Refused by what is stored, like a conflict: nothing reserved, retry after a change.
            ReserveStatus::Conflict | ReserveStatus::LimitReached => Outcome::Conflict,
        }
    }
}

impl Classify for ReservationResult {
    fn outcome(&self) -> Outcome {
        match self.status {
            ReservationStatus::Ok => Outcome::Ok,
            ReservationStatus::Lost => Outcome::Fenced,
        }
    }
}

impl Classify for QueueSendResult {
    fn outcome(&self) -> Outcome {
        // A duplicate is the message already sent: the send's purpose is met.
        match self.status {
            SendStatus::Sent | SendStatus::Duplicate => Outcome::Ok,
        }
    }
}

impl Classify for QueueReceiveResult {
    fn outcome(&self) -> Outcome {
        match self.status {
            ReceiveStatus::Received => Outcome::Ok,
            ReceiveStatus::Empty => Outcome::NotFound,
        }
    }
}

impl Classify for QueueSettleResult {
    fn outcome(&self) -> Outcome {
        match self.status {
            SettleStatus::Ok => Outcome::Ok,
            SettleStatus::Stale => Outcome::Fenced,
        }
    }
}

impl Classify for SignalResult {
    fn outcome(&self) -> Outcome {
        match self.status {
            SignalStatus::Ok => Outcome::Ok,
            SignalStatus::NotFound => Outcome::NotFound,
            SignalStatus::Finished | SignalStatus::Full => Outcome::Conflict,
        }
    }
}

impl Classify for AwaitSignalResult {
    fn outcome(&self) -> Outcome {
        match self.status {
            AwaitStatus::Signaled | AwaitStatus::Waiting => Outcome::Ok,
            AwaitStatus::Fenced => Outcome::Fenced,
            AwaitStatus::NotFound => Outcome::NotFound,
        }
    }
}

impl Classify for ClaimResult {
    fn outcome(&self) -> Outcome {
        match self.status {
            ClaimStatus::Claimed => Outcome::Ok,
            ClaimStatus::NoneAvailable | ClaimStatus::NotFound => Outcome::NotFound,
            // Pending, not claimable yet: like a held run, a state of the run, not an error.
            ClaimStatus::Waiting => Outcome::Conflict,
            ClaimStatus::Held | ClaimStatus::Finished => Outcome::Conflict,
        }
    }
}

impl Classify for CheckpointResult {
    fn outcome(&self) -> Outcome {
        match self.status {
            CheckpointStatus::Ok | CheckpointStatus::Duplicate => Outcome::Ok,
            CheckpointStatus::Conflict => Outcome::Conflict,
            CheckpointStatus::Fenced => Outcome::Fenced,
            CheckpointStatus::NotFound => Outcome::NotFound,
        }
    }
}

impl Classify for HeartbeatResult {
    fn outcome(&self) -> Outcome {
        holder(self.status)
    }
}

impl Classify for FinishResult {
    fn outcome(&self) -> Outcome {
        holder(self.status)
    }
}

impl Classify for CancelResult {
    fn outcome(&self) -> Outcome {
        match self.status {
            CancelStatus::Ok => Outcome::Ok,
            CancelStatus::Finished => Outcome::Conflict,
            CancelStatus::NotFound => Outcome::NotFound,
        }
    }
}

impl Classify for RunStatusResult {
    fn outcome(&self) -> Outcome {
        found(self.status)
    }
}

impl Classify for ResumeResult {
    fn outcome(&self) -> Outcome {
        found(self.status)
    }
}
