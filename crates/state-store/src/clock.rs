//! The engine's source of time. Production uses the system clock; tests drive a manual one,
//! so TTL and expiry are tested without sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use state_core::UnixMillis;

pub trait Clock: std::fmt::Debug + Send + Sync + 'static {
    fn now(&self) -> UnixMillis;
}

#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> UnixMillis {
        // A clock before 1970 is a broken host; treat it as the epoch rather than panic.
        let millis = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        UnixMillis(millis)
    }
}

/// A clock that moves only when told to. Cloning shares the same time.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    pub fn new(start: UnixMillis) -> ManualClock {
        ManualClock(Arc::new(AtomicU64::new(start.0)))
    }

    pub fn advance_millis(&self, millis: u64) {
        self.0.fetch_add(millis, Ordering::SeqCst);
    }

    pub fn now_millis(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }

    pub fn set(&self, to: UnixMillis) {
        self.0.store(to.0, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> UnixMillis {
        UnixMillis(self.0.load(Ordering::SeqCst))
    }
}
