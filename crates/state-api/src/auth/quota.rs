//! A token's write quota: how many changes per second it may make, whichever frontend it
//! calls through. The bucket lives with the token, so every request authenticated as it (REST,
//! `/mcp`, every connection) draws on one allowance; each server process keeps its own (two
//! replicas allow twice the rate).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

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
}

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
        }
    }

    /// Takes one write for the token `name`, or refuses it saying when to retry.
    pub(crate) fn take(&self, name: &str) -> Result<(), ApiError> {
        let now = UnixMillis(u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX));
        let taken = self.bucket.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take(&self.rate, now);
        taken.map_err(|wait| {
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
            error
        })
    }

    pub fn figures(&self) -> QuotaFigures {
        QuotaFigures {
            writes_per_second: self.rate.per_second,
            write_burst: self.rate.burst,
            writes_refused: self.refused.load(Ordering::Relaxed),
        }
    }
}
