//! Capped exponential backoff with full jitter (AWS "Exponential Backoff and Jitter"; Envoy's
//! retry back-off): retry n waits a uniformly random time in [0, min(max, initial · 2^(n−1))].

use std::time::Duration;

/// The wait before retry number `retry` (1 for the first retry).
pub fn full_jitter(initial: Duration, max: Duration, retry: u32) -> Duration {
    let cap = ceiling(initial, max, retry);
    let nanos = u64::try_from(cap.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(fastrand::u64(0..=nanos))
}

/// The upper bound of the wait before retry number `retry`.
pub fn ceiling(initial: Duration, max: Duration, retry: u32) -> Duration {
    let doublings = retry.saturating_sub(1).min(32);
    initial.saturating_mul(1u32 << doublings.min(31)).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceiling_doubles_then_caps() {
        let (i, m) = (Duration::from_millis(200), Duration::from_secs(2));
        assert_eq!(ceiling(i, m, 1), Duration::from_millis(200));
        assert_eq!(ceiling(i, m, 2), Duration::from_millis(400));
        assert_eq!(ceiling(i, m, 4), Duration::from_millis(1600));
        assert_eq!(ceiling(i, m, 5), Duration::from_secs(2));
        assert_eq!(ceiling(i, m, 40), Duration::from_secs(2));
    }

    #[test]
    fn jitter_stays_within_the_ceiling() {
        let (i, m) = (Duration::from_millis(10), Duration::from_millis(100));
        for retry in 1..8 {
            for _ in 0..100 {
                assert!(full_jitter(i, m, retry) <= ceiling(i, m, retry));
            }
        }
    }
}
