//! Pauses between retries that double up to a ceiling: the writer retrying a batch, clients
//! reaching an owner or a server, a watch reopening, a replica relistening all use it, so a
//! retry loop reads the same way wherever it is.

use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    next: Duration,
    ceiling: Duration,
}

impl Backoff {
    pub const fn new(first: Duration, ceiling: Duration) -> Backoff {
        Backoff { first, next: first, ceiling }
    }

    /// The pause to take now; the one after is twice as long, up to the ceiling.
    pub fn next_pause(&mut self) -> Duration {
        let pause = self.next;
        self.next = (self.next * 2).min(self.ceiling);
        pause
    }

    /// Starts over from the first pause (after a success).
    pub fn reset(&mut self) {
        self.next = self.first;
    }

    /// Sleeps the next pause and says to try again; or, when that pause would reach
    /// `deadline`, returns false at once: give up now rather than sleep to no purpose.
    pub async fn pause_before(&mut self, deadline: Instant) -> bool {
        let pause = self.next_pause();
        if Instant::now() + pause >= deadline {
            return false;
        }
        tokio::time::sleep(pause).await;
        true
    }

    /// Sleeps the next pause, cut short at `deadline`: the caller tries once more then.
    pub async fn pause_until(&mut self, deadline: Instant) {
        let pause = self.next_pause().min(deadline.saturating_duration_since(Instant::now()));
        tokio::time::sleep(pause).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_up_to_the_ceiling_and_start_over_after_a_reset() {
        let mut backoff = Backoff::new(Duration::from_millis(20), Duration::from_millis(100));
        let pauses: Vec<u64> = (0..5).map(|_| backoff.next_pause().as_millis() as u64).collect();
        assert_eq!(pauses, [20, 40, 80, 100, 100]);
        backoff.reset();
        assert_eq!(backoff.next_pause(), Duration::from_millis(20));
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_that_would_reach_the_deadline_is_not_taken() {
        let mut backoff = Backoff::new(Duration::from_millis(20), Duration::from_secs(1));
        let start = Instant::now();
        let deadline = start + Duration::from_millis(50);
        assert!(backoff.pause_before(deadline).await, "20 ms fits");
        assert!(!backoff.pause_before(deadline).await, "40 more would pass the deadline");
        assert_eq!(start.elapsed(), Duration::from_millis(20), "and was not slept");
        backoff.pause_until(deadline).await;
        assert_eq!(start.elapsed(), Duration::from_millis(50), "cut short at the deadline");
    }
}
