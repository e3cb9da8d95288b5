//! A token bucket: `burst` tokens at most, refilled at `rate`; a call takes one. A call that
//! may wait (`queue`) reserves the next token and sleeps until it is due: the bucket then
//! holds a debt, which later refills pay first, so reservations never exceed the rate.
//!
//! Calls let through in any window of `t` seconds are at most `burst + rate × t`.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::config::Rate;

/// One rule's bucket, shared by every worker (a short lock per call).
#[derive(Debug)]
pub struct Bucket {
    per_second: f64,
    burst: f64,
    fill: Mutex<Fill>,
}

#[derive(Debug)]
struct Fill {
    /// Below zero: tokens reserved ahead of their refill.
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// A full bucket.
    pub fn new(rate: Rate, burst: u32, now: Instant) -> Bucket {
        let burst = f64::from(burst.max(1));
        Bucket {
            per_second: rate.per_second(),
            burst,
            fill: Mutex::new(Fill {
                tokens: burst,
                at: now,
            }),
        }
    }

    /// Takes a token: `Ok(wait)` (zero when one was there; else the wait, at most `queue`,
    /// after which the reserved token is due), or `Err(retry_after)` when the next token is
    /// further away than `queue` (nothing taken).
    pub fn take(&self, now: Instant, queue: Duration) -> Result<Duration, Duration> {
        let mut fill = self.fill.lock().unwrap_or_else(|e| e.into_inner());
        let elapsed = now.saturating_duration_since(fill.at).as_secs_f64();
        fill.tokens = (fill.tokens + elapsed * self.per_second).min(self.burst);
        fill.at = now;
        if fill.tokens >= 1.0 {
            fill.tokens -= 1.0;
            return Ok(Duration::ZERO);
        }
        // A rate validation let through is above zero; a config built in code may not be.
        let due = Duration::try_from_secs_f64((1.0 - fill.tokens) / self.per_second)
            .unwrap_or(Duration::MAX);
        if due > queue {
            return Err(due);
        }
        fill.tokens -= 1.0;
        Ok(due)
    }

    /// Gives back a token taken for a call that did not go (another limit refused it).
    pub fn give_back(&self) {
        let mut fill = self.fill.lock().unwrap_or_else(|e| e.into_inner());
        fill.tokens = (fill.tokens + 1.0).min(self.burst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ten_a_second(burst: u32) -> Bucket {
        let rate = Rate {
            calls: 10,
            per: Duration::from_secs(1),
        };
        Bucket::new(rate, burst, Instant::now())
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_bucket_lets_its_burst_through_then_the_rate() {
        let bucket = ten_a_second(3);
        let now = Instant::now();
        for _ in 0..3 {
            assert_eq!(bucket.take(now, Duration::ZERO), Ok(Duration::ZERO));
        }
        let refused = bucket.take(now, Duration::ZERO);
        assert_eq!(refused, Err(Duration::from_millis(100)));
        tokio::time::advance(Duration::from_millis(100)).await;
        assert_eq!(
            bucket.take(Instant::now(), Duration::ZERO),
            Ok(Duration::ZERO)
        );
        assert!(bucket.take(Instant::now(), Duration::ZERO).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn a_queued_call_reserves_the_next_token() {
        let bucket = ten_a_second(1);
        let now = Instant::now();
        assert_eq!(bucket.take(now, Duration::ZERO), Ok(Duration::ZERO));
        let queue = Duration::from_millis(250);
        assert_eq!(bucket.take(now, queue), Ok(Duration::from_millis(100)));
        assert_eq!(bucket.take(now, queue), Ok(Duration::from_millis(200)));
        // The third reservation would be due in 300 ms, past the queue.
        assert_eq!(bucket.take(now, queue), Err(Duration::from_millis(300)));
    }

    #[tokio::test(start_paused = true)]
    async fn over_any_window_at_most_burst_plus_rate_times_time_pass() {
        let bucket = ten_a_second(5);
        let start = Instant::now();
        let mut passed = 0u32;
        for _ in 0..2000 {
            if bucket.take(Instant::now(), Duration::ZERO).is_ok() {
                passed += 1;
            }
            tokio::time::advance(Duration::from_millis(1)).await;
        }
        let elapsed = start.elapsed().as_secs_f64();
        assert!(
            f64::from(passed) <= 5.0 + 10.0 * elapsed,
            "{passed} in {elapsed}s"
        );
        assert!(passed >= 20, "{passed}: the rate is let through");
    }

    #[tokio::test(start_paused = true)]
    async fn a_token_given_back_is_taken_again() {
        let bucket = ten_a_second(1);
        let now = Instant::now();
        assert!(bucket.take(now, Duration::ZERO).is_ok());
        bucket.give_back();
        assert!(bucket.take(now, Duration::ZERO).is_ok());
    }
}
