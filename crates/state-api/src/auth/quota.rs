//! A token's write quota: how many changes per second it may make, whichever frontend it
//! calls through. The bucket lives with the token, so every request authenticated as it (REST,
//! `/mcp`, every connection) draws on one allowance; each server process keeps its own (two
//! replicas allow twice the rate).
//!
//! A refusal says when to retry. A write that comes back before then (a client that ignores
//! `Retry-After`, or many at once) is given the next free slot of the allowance, up to a second
//! ahead, and held until it, instead of being refused at once: a flood of writers that never pause is slowed to
//! the token's rate at the cost of held connections, not of a CPU answering refusals as fast
//! as they are asked. Writers that wait as told are never held.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use state_core::UnixMillis;
use state_core::rate::{Bucket, Rate};

use crate::reply::{ApiError, ErrorCode};

/// One token's allowance of writes and what it has been refused.
#[derive(Debug)]
pub struct WriteQuota {
    rate: Rate,
    bucket: Mutex<Bucket>,
    /// The bucket's time is milliseconds since this: monotonic, whatever the wall clock does.
    origin: Instant,
    refused: AtomicU64,
    /// Until when (milliseconds since `origin`) the last refusal told the token to wait.
    told_to_wait_until: AtomicU64,
}

/// The longest a write that came back early is held.
const MAX_HOLD: Duration = Duration::from_secs(1);

/// A token's quota as `state_health` and `/metrics` show it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuotaFigures {
    pub writes_per_second: f64,
    pub write_burst: f64,
    /// Writes refused for the rate since the server started.
    pub writes_refused: u64,
}

impl WriteQuota {
    pub fn new(rate: Rate) -> WriteQuota {
        WriteQuota {
            rate,
            bucket: Mutex::new(Bucket::full(&rate, UnixMillis(0))),
            origin: Instant::now(),
            refused: AtomicU64::new(0),
            told_to_wait_until: AtomicU64::new(0),
        }
    }

    /// Takes one write for the token `name`. A write that came back before the token was
    /// told it could is given the next free slot of the allowance, if one comes within
    /// [`MAX_HOLD`], and held until then: first come, first served, one wait each, and at
    /// most a second's worth of writes held. Refuses it, saying when to retry, otherwise.
    pub(crate) async fn take_in_turn(&self, name: &str) -> Result<(), ApiError> {
        let hold = self.try_take(name, true)?;
        if !hold.is_zero() {
            tokio::time::sleep(hold).await;
        }
        Ok(())
    }

    /// Takes one write for the token `name`, or refuses it saying when to retry, never holding it.
    #[cfg(test)]
    pub(crate) fn take(&self, name: &str) -> Result<(), ApiError> {
        self.try_take(name, false).map(|_| ())
    }

    /// Takes a write now, or (`may_hold`, for a write that came back early) reserves the next
    /// free slot: how long to hold it.
    fn try_take(&self, name: &str, may_hold: bool) -> Result<Duration, ApiError> {
        let now = UnixMillis(u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX));
        let came_early = may_hold && now.0 < self.told_to_wait_until.load(Ordering::Relaxed);
        let longest = if came_early { u64::try_from(MAX_HOLD.as_millis()).unwrap_or(u64::MAX) } else { 0 };
        let taken =
            self.bucket.lock().unwrap_or_else(std::sync::PoisonError::into_inner).reserve(&self.rate, now, longest);
        let wait = match taken {
            Ok(hold) => return Ok(Duration::from_millis(hold)),
            Err(wait) => wait,
        };
        self.told_to_wait_until.fetch_max(now.0.saturating_add(wait.millis), Ordering::Relaxed);
        self.refused.fetch_add(1, Ordering::Relaxed);
        let seconds = wait.millis as f64 / 1000.0;
        let mut error = ApiError::new(
            ErrorCode::QuotaExceeded,
            format!(
                "token `{name}` is past its quota of {} writes per second (bursts of {}): nothing was changed; \
                 retry in {seconds:.3} s",
                self.rate.per_second, self.rate.burst
            ),
        );
        error.retry_after_ms = Some(wait.millis);
        Err(error)
    }

    pub fn figures(&self) -> QuotaFigures {
        QuotaFigures {
            writes_per_second: self.rate.per_second,
            write_burst: self.rate.burst,
            writes_refused: self.refused.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn writes_that_come_back_early_are_held_and_served_in_turn_not_refused() {
        // One write every 100 ms, no burst beyond it.
        let quota = Arc::new(WriteQuota::new(Rate { per_second: 10.0, burst: 1.0 }));
        quota.take_in_turn("t").await.unwrap();
        let refused = quota.take_in_turn("t").await.unwrap_err();
        assert!(refused.retry_after_ms.is_some_and(|ms| ms <= 100), "{refused:?}");
        // Three writers that ignore the refusal and come straight back: each is held until
        // the allowance has room for it, and none is refused.
        let started = Instant::now();
        let writers: Vec<_> = (0..3)
            .map(|_| {
                let quota = Arc::clone(&quota);
                tokio::spawn(async move { quota.take_in_turn("t").await })
            })
            .collect();
        for writer in writers {
            writer.await.unwrap().unwrap();
        }
        assert!(started.elapsed() >= Duration::from_millis(200), "served at the rate: {:?}", started.elapsed());
        assert_eq!(quota.figures().writes_refused, 1, "only the first was refused");
        // A writer held its longest is refused after all: ten at once need a second.
        let crowd: Vec<_> = (0..14)
            .map(|_| {
                let quota = Arc::clone(&quota);
                tokio::spawn(async move { quota.take_in_turn("t").await })
            })
            .collect();
        let mut refused = 0;
        for writer in crowd {
            refused += usize::from(writer.await.unwrap().is_err());
        }
        assert!(refused >= 2, "{refused} of 14 refused after being held a second");
    }
}
