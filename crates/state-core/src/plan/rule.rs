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

/// A read of one snapshot.
pub trait Query: Send + 'static {
    type Output: Send + 'static;

    fn read<V: StateView + ?Sized>(&self, view: &V, now: UnixMillis) -> Result<Self::Output, V::Error>;
}
