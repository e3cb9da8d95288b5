//! A token bucket: `burst` tokens at most, refilled at `rate`; a call takes one. A call that
//! may wait (`queue`) reserves the next token and sleeps until it is due: the bucket then
//! holds a debt, which later refills pay first, so reservations never exceed the rate.
//!
//! Calls let through in any window of `t` seconds are at most `burst + rate × t`.
//!
//! Every worker takes from the same bucket without a lock: the bucket is one atomic, the
//! time at which it is full again (the generic cell rate algorithm's theoretical arrival
//! time). A token moves that time one interval (`1 / rate`) later; the bucket holds
//! `burst` tokens while that time is at most `burst` intervals ahead of now. A take is a
//! compare-and-swap, so concurrent takes never lose one another: the bound above is exact.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::config::{MAX_DURATION, Rate};

/// One rule's bucket, shared by every worker.
#[derive(Debug)]
pub struct Bucket {
    /// Nanoseconds between two tokens' refills.
    interval: u64,
    /// `burst` intervals: how far ahead of now the full time may be with a token left.
    tolerance: u128,
    /// The origin of `full_at`.
    origin: Instant,
    /// Nanoseconds after `origin` at which the bucket is full again (at or before now: full).
    full_at: AtomicU64,
}

impl Bucket {
    /// A full bucket.
    pub fn new(rate: Rate, burst: u32, now: Instant) -> Bucket {
        // A rate validation let through names calls over at most a year; a config built in
        // code may name none, and then a token is refilled once a year.
        let interval = rate.per.checked_div(rate.calls).unwrap_or(MAX_DURATION);
        let interval = nanos(interval.min(MAX_DURATION));
        let burst = u128::from(burst.max(1));
        Bucket {
            interval,
            tolerance: burst * u128::from(interval),
            origin: now,
            full_at: AtomicU64::new(0),
        }
    }

    /// Takes a token: `Ok(wait)` (zero when one was there; else the wait, at most `queue`,
    /// after which the reserved token is due), or `Err(retry_after)` when the next token is
    /// further away than `queue` (nothing taken).
    pub fn take(&self, now: Instant, queue: Duration) -> Result<Duration, Duration> {
        let now = u128::from(nanos(now.saturating_duration_since(self.origin)));
        let mut full_at = self.full_at.load(Ordering::Acquire);
        loop {
            let next = u128::from(full_at).max(now) + u128::from(self.interval);
            let due = duration(next.saturating_sub(now + self.tolerance));
            // Past `u64` nanoseconds (centuries) the debt is never paid: refused.
            let (false, Ok(next)) = (due > queue, u64::try_from(next)) else {
                return Err(due);
            };
            match self.full_at.compare_exchange_weak(
                full_at,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(due),
                Err(seen) => full_at = seen,
            }
        }
    }

    /// Gives back a token taken for a call that did not go (another limit refused it).
    pub fn give_back(&self) {
        let earlier = |full_at: u64| Some(full_at.saturating_sub(self.interval));
        // The closure always gives a value: the update cannot fail.
        let _ = self
            .full_at
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, earlier);
    }
}

/// A duration in whole nanoseconds, `u64::MAX` past that.
fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

fn duration(nanos: u128) -> Duration {
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
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

    #[test]
    fn takes_on_many_threads_at_once_let_exactly_the_burst_through() {
        let now = Instant::now();
        let rate = Rate {
            calls: 1,
            per: Duration::from_secs(3600),
        };
        let bucket = Bucket::new(rate, 1000, now);
        let passed: usize = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    let bucket = &bucket;
                    scope.spawn(move || {
                        (0..1000)
                            .filter(|_| bucket.take(now, Duration::ZERO).is_ok())
                            .count()
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).sum()
        });
        assert_eq!(passed, 1000);
    }

    #[test]
    fn a_rate_of_no_calls_lets_the_burst_through_and_then_nothing() {
        let now = Instant::now();
        let rate = Rate {
            calls: 0,
            per: Duration::from_secs(1),
        };
        let bucket = Bucket::new(rate, 2, now);
        assert!(bucket.take(now, Duration::ZERO).is_ok());
        assert!(bucket.take(now, Duration::ZERO).is_ok());
        let later = now + Duration::from_secs(3600);
        assert!(bucket.take(later, Duration::from_secs(60)).is_err());
    }
}
