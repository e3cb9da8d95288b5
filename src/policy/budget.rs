//! The retry budget (Linkerd's: retries may add `ratio` of the calls plus `min_per_second`,
//! counted over a sliding window), so a failing upstream is not hammered by retries.
//!
//! The window is kept as one bucket per second; time is `tokio::time`, so tests can run on
//! paused time.

use std::sync::Mutex;

use tokio::time::Instant;

use crate::config::RetryBudget;

/// Per-second buckets of (calls, retries).
pub struct Budget {
    ratio: f64,
    min_per_second: u32,
    inner: Mutex<Window>,
}

struct Window {
    start: Instant,
    /// Bucket i counts second `start + i` modulo the window length.
    calls: Vec<u64>,
    retries: Vec<u64>,
    /// The last second (since `start`) a bucket was cleared for.
    last: u64,
}

impl Budget {
    pub fn new(config: &RetryBudget) -> Budget {
        let seconds = config.window.as_secs().max(1) as usize;
        Budget {
            ratio: config.ratio,
            min_per_second: config.min_per_second,
            inner: Mutex::new(Window {
                start: Instant::now(),
                calls: vec![0; seconds],
                retries: vec![0; seconds],
                last: 0,
            }),
        }
    }

    fn window(&self, now: Instant) -> std::sync::MutexGuard<'_, Window> {
        let mut w = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        w.advance(now);
        w
    }

    /// A call was made (its first attempt) at `now` (the caller's clock reading: one fewer
    /// per call).
    pub fn deposit(&self, now: Instant) {
        let mut w = self.window(now);
        let i = w.slot();
        w.calls[i] += 1;
    }

    /// Takes one retry from the budget; false when it is spent.
    pub fn withdraw(&self) -> bool {
        let mut w = self.window(Instant::now());
        let seconds = w.calls.len() as f64;
        let calls: u64 = w.calls.iter().sum();
        let retries: u64 = w.retries.iter().sum();
        let allowed = self.ratio * calls as f64 + f64::from(self.min_per_second) * seconds;
        if (retries as f64) < allowed.floor() {
            let i = w.slot();
            w.retries[i] += 1;
            true
        } else {
            false
        }
    }
}

impl Window {
    fn second(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.start).as_secs()
    }

    fn slot(&self) -> usize {
        (self.last % self.calls.len() as u64) as usize
    }

    /// Clears the buckets of the seconds that passed since the last call.
    fn advance(&mut self, now: Instant) {
        let second = self.second(now);
        let len = self.calls.len() as u64;
        let passed = second.saturating_sub(self.last).min(len);
        for k in 1..=passed {
            let i = ((self.last + k) % len) as usize;
            self.calls[i] = 0;
            self.retries[i] = 0;
        }
        self.last = second;
    }
}

/// The most retries a budget allows over one window of `calls` calls (for tests and docs).
pub fn bound(config: &RetryBudget, calls: u64) -> u64 {
    let seconds = config.window.as_secs().max(1) as f64;
    (config.ratio * calls as f64 + f64::from(config.min_per_second) * seconds).floor() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn budget(ratio: f64, min: u32) -> Budget {
        Budget::new(&RetryBudget {
            ratio,
            min_per_second: min,
            window: Duration::from_secs(10),
        })
    }

    #[tokio::test(start_paused = true)]
    async fn ratio_of_calls() {
        let b = budget(0.2, 0);
        for _ in 0..50 {
            b.deposit(Instant::now());
        }
        let granted = (0..100).filter(|_| b.withdraw()).count();
        assert_eq!(granted, 10);
    }

    #[tokio::test(start_paused = true)]
    async fn floor_per_second_and_window_slides() {
        let b = budget(0.0, 1);
        let granted = (0..100).filter(|_| b.withdraw()).count();
        assert_eq!(granted, 10, "1/s over a 10 s window");
        tokio::time::advance(Duration::from_secs(3)).await;
        assert!(
            !b.withdraw(),
            "the first second's retries are still in the window"
        );
        tokio::time::advance(Duration::from_secs(8)).await;
        assert_eq!((0..100).filter(|_| b.withdraw()).count(), 10);
    }
}
