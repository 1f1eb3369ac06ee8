//! Rates a caller may not exceed: a token bucket, refilled continuously at `per_second` and
//! holding at most `burst`. Pure: the caller passes the time, so quotas are tested without
//! waiting.

use crate::time::UnixMillis;

/// At most `per_second` on average, and `burst` at once after a quiet spell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub per_second: f64,
    pub burst: f64,
}

impl Rate {
    /// A rate of `per_second`, with a burst of one second's worth (at least one).
    pub fn per_second(per_second: f64) -> Rate {
        Rate { per_second, burst: per_second.max(1.0) }
    }

    /// Whether the figures make a rate: positive and finite, a burst of at least one.
    pub fn check(&self) -> Result<(), String> {
        if !(self.per_second.is_finite() && self.per_second > 0.0) {
            return Err(format!("the rate must be a positive number per second; got {}", self.per_second));
        }
        if !(self.burst.is_finite() && self.burst >= 1.0) {
            return Err(format!("the burst must be a number of at least 1; got {}", self.burst));
        }
        Ok(())
    }
}

/// What is left of a rate now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    tokens: f64,
    at: UnixMillis,
}

impl Bucket {
    /// A full bucket: a caller starts with its burst.
    pub fn full(rate: &Rate, now: UnixMillis) -> Bucket {
        Bucket { tokens: rate.burst, at: now }
    }

    /// Takes one unit at `now`; or, when none is left, takes nothing and says how long until
    /// one is there.
    pub fn take(&mut self, rate: &Rate, now: UnixMillis) -> Result<(), RetryAfter> {
        // Time that went backwards (a clock stepped) refills nothing and owes nothing.
        let elapsed = now.0.saturating_sub(self.at.0) as f64 / 1000.0;
        self.tokens = (self.tokens + elapsed * rate.per_second).min(rate.burst);
        self.at = UnixMillis(self.at.0.max(now.0));
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(());
        }
        let seconds = (1.0 - self.tokens) / rate.per_second;
        Err(RetryAfter { millis: (seconds * 1000.0).ceil() as u64 })
    }

    /// Takes one unit at `now`, or reserves the next one if it comes within `max_wait_millis`:
    /// the bucket goes into debt, so each reservation gets the slot after the one before it
    /// (first come, first served, one wait each). Answers how long the caller waits for its
    /// unit (0 when one was there); when the next free one is further away than
    /// `max_wait_millis`, reserves nothing and says when one would be there.
    pub fn reserve(&mut self, rate: &Rate, now: UnixMillis, max_wait_millis: u64) -> Result<u64, RetryAfter> {
        match self.take(rate, now) {
            Ok(()) => Ok(0),
            Err(wait) if wait.millis <= max_wait_millis => {
                self.tokens -= 1.0;
                Ok(wait.millis)
            }
            Err(wait) => Err(wait),
        }
    }
}

/// How long to wait before one more unit of a rate is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryAfter {
    pub millis: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_taken_then_the_rate_holds() {
        let rate = Rate { per_second: 10.0, burst: 3.0 };
        let mut bucket = Bucket::full(&rate, UnixMillis(1_000));
        for _ in 0..3 {
            assert_eq!(bucket.take(&rate, UnixMillis(1_000)), Ok(()));
        }
        assert_eq!(bucket.take(&rate, UnixMillis(1_000)), Err(RetryAfter { millis: 100 }));
        assert_eq!(bucket.take(&rate, UnixMillis(1_040)), Err(RetryAfter { millis: 60 }), "refilling meanwhile");
        assert_eq!(bucket.take(&rate, UnixMillis(1_100)), Ok(()), "one refilled after 100 ms");
        // A long quiet spell refills the burst, not more.
        let taken = (0..10).filter(|_| bucket.take(&rate, UnixMillis(60_000)).is_ok()).count();
        assert_eq!(taken, 3);
    }

    #[test]
    fn reservations_take_the_next_slots_in_turn_and_none_beyond_the_longest_wait() {
        let rate = Rate { per_second: 10.0, burst: 1.0 };
        let mut bucket = Bucket::full(&rate, UnixMillis(0));
        assert_eq!(bucket.reserve(&rate, UnixMillis(0), 1_000), Ok(0), "one is there");
        // Then one every 100 ms, each caller the slot after the one before.
        let waits: Vec<_> = (0..10).map(|_| bucket.reserve(&rate, UnixMillis(0), 1_000)).collect();
        assert_eq!(waits, (1..=10).map(|n| Ok(n * 100)).collect::<Vec<_>>());
        // The next free slot is 1.1 s away: nothing is reserved, and a plain take agrees.
        assert_eq!(bucket.reserve(&rate, UnixMillis(0), 1_000), Err(RetryAfter { millis: 1_100 }));
        assert_eq!(bucket.take(&rate, UnixMillis(0)), Err(RetryAfter { millis: 1_100 }));
        // As time passes the debt is paid off at the rate.
        assert_eq!(bucket.reserve(&rate, UnixMillis(500), 1_000), Ok(600));
        assert_eq!(bucket.reserve(&rate, UnixMillis(500), 0), Err(RetryAfter { millis: 700 }));
    }

    #[test]
    fn over_a_long_run_the_average_is_the_rate() {
        let rate = Rate { per_second: 50.0, burst: 5.0 };
        let mut bucket = Bucket::full(&rate, UnixMillis(0));
        // A caller that tries every millisecond for ten seconds.
        let taken = (0..10_000).filter(|ms| bucket.take(&rate, UnixMillis(*ms)).is_ok()).count();
        assert!((500..=506).contains(&taken), "{taken}");
    }

    #[test]
    fn a_clock_that_steps_back_refills_nothing() {
        let rate = Rate::per_second(1.0);
        let mut bucket = Bucket::full(&rate, UnixMillis(10_000));
        assert!(bucket.take(&rate, UnixMillis(10_000)).is_ok());
        assert!(bucket.take(&rate, UnixMillis(5_000)).is_err());
        assert!(bucket.take(&rate, UnixMillis(10_500)).is_err(), "half a second after the latest time seen");
        assert!(bucket.take(&rate, UnixMillis(11_000)).is_ok());
    }

    #[test]
    fn rates_that_are_not_rates_are_refused() {
        for bad in [
            Rate { per_second: 0.0, burst: 1.0 },
            Rate { per_second: f64::NAN, burst: 1.0 },
            Rate { per_second: 1.0, burst: 0.5 },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
        assert!(Rate::per_second(0.5).check().is_ok());
    }
}
