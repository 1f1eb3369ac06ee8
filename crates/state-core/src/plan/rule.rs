//! Writes and reads the engine has no verb of its own for. A compatibility profile whose
//! server had rules ours do not (leases without tokens, steps anyone may overwrite) states
//! them here, built from the same planners, and the engine applies them like any other
//! request: one transaction, group commit, idempotency, history.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{Plan, WriteContext};
use crate::error::InvalidInput;
use crate::limits::Limits;
use crate::ops::once::Once;
use crate::time::UnixMillis;
use crate::view::StateView;

/// A write decided by a planner of the core.
pub trait Rule: Send + Sync + 'static {
    type Output: Serialize + DeserializeOwned + Send + 'static;

    /// Checks the request before it is queued; answers its idempotency key, if it has one.
    fn admit(&self, limits: &Limits) -> Result<Option<Once>, InvalidInput>;

    /// What to change, given what is stored now. May run more than once (a batch retried).
    fn plan<V: StateView + ?Sized>(&self, view: &V, ctx: &WriteContext) -> Result<Plan<Self::Output>, V::Error>;
}

/// The keys a request's plan reads before it decides anything. Where every read is a round
/// trip to another machine (PostgreSQL), the store fetches a whole batch's in one while it
/// takes the writer's lock, instead of one round trip per request with the lock held. A hint,
/// never a rule: a key missing here is read when the plan asks for it, and one listed but not
/// read costs a row.
pub trait ReadsFirst {
    fn reads_first(&self) -> Vec<String>;
}

/// A read of one snapshot.
pub trait Query: Send + 'static {
    type Output: Send + 'static;

    fn read<V: StateView + ?Sized>(&self, view: &V, now: UnixMillis) -> Result<Self::Output, V::Error>;
}
