//! The retry budget (Linkerd's: retries may add `ratio` of the calls plus `min_per_second`,
//! counted over a sliding window), so a failing upstream is not hammered by retries.
//!
//! The window is kept as one bucket per second; time is `tokio::time`, so tests can run on
//! paused time.

use std::sync::Mutex;

use tokio::time::Instant;

use crate::config::RetryBudget;
use crate::runtime::per_worker::{Line, PerWorker};

/// Per-second buckets of calls and of retries.
///
/// Every call deposits, few withdraw: the calls are counted in a window per worker
/// (`runtime/per_worker.rs`), each on lines of its own, so the lock every call takes is one
/// only its worker takes; a withdrawal sums them.
pub struct Budget {
    ratio: f64,
    min_per_second: u32,
    calls: PerWorker<Line<Mutex<Window>>>,
    retries: Mutex<Window>,
}

/// A count per second over the budget's window.
struct Window {
    start: Instant,
    /// Bucket i counts second `start + i` modulo the window length.
    counts: Vec<u64>,
    /// The last second (since `start`) a bucket was cleared for.
    last: u64,
}

impl Budget {
    pub fn new(config: &RetryBudget) -> Budget {
        let seconds = config.window.as_secs().max(1) as usize;
        let start = Instant::now();
        Budget {
            ratio: config.ratio,
            min_per_second: config.min_per_second,
            calls: PerWorker::new(|| Line(Mutex::new(Window::new(start, seconds)))),
            retries: Mutex::new(Window::new(start, seconds)),
        }
    }

    /// A call was made (its first attempt) at `now` (the caller's clock reading: one fewer
    /// per call).
    pub fn deposit(&self, now: Instant) {
        lock(&self.calls.here().0).add(now);
    }

    /// Takes one retry from the budget; false when it is spent.
    pub fn withdraw(&self) -> bool {
        let now = Instant::now();
        let calls: u64 = self.calls.iter().map(|w| lock(&w.0).sum(now)).sum();
        let mut retries = lock(&self.retries);
        let seconds = retries.counts.len() as f64;
        let allowed = self.ratio * calls as f64 + f64::from(self.min_per_second) * seconds;
        if (retries.sum(now) as f64) < allowed.floor() {
            retries.add(now);
            true
        } else {
            false
        }
    }
}

// A poisoned lock only means a thread panicked holding it; the counts are still counts.
fn lock(window: &Mutex<Window>) -> std::sync::MutexGuard<'_, Window> {
    window.lock().unwrap_or_else(|e| e.into_inner())
}

impl Window {
    fn new(start: Instant, seconds: usize) -> Window {
        // 64 bytes unused after the buckets: the windows of two workers, allocated one after
        // the other, then write no cache line in common.
        let mut counts = Vec::with_capacity(seconds + 8);
        counts.resize(seconds, 0);
        Window {
            start,
            counts,
            last: 0,
        }
    }

    /// Counts one at `now`.
    fn add(&mut self, now: Instant) {
        self.advance(now);
        let len = self.counts.len() as u64;
        if let Some(count) = self.counts.get_mut((self.last % len) as usize) {
            *count += 1;
        }
    }

    /// The count over the window that ends at `now`.
    fn sum(&mut self, now: Instant) -> u64 {
        self.advance(now);
        self.counts.iter().sum()
    }

    /// Clears the buckets of the seconds that passed since the last count.
    fn advance(&mut self, now: Instant) {
        let second = now.saturating_duration_since(self.start).as_secs();
        let len = self.counts.len() as u64;
        let passed = second.saturating_sub(self.last).min(len);
        for k in 1..=passed {
            if let Some(count) = self.counts.get_mut(((self.last + k) % len) as usize) {
                *count = 0;
            }
        }
        self.last = self.last.max(second);
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

    /// Each worker counts its calls in a window of its own; a withdrawal, on any thread,
    /// counts them all.
    #[test]
    fn calls_deposited_on_every_worker_count() {
        let b = budget(0.5, 0);
        std::thread::scope(|s| {
            for worker in 0..3 {
                let b = &b;
                s.spawn(move || {
                    crate::runtime::per_worker::enter(worker);
                    for _ in 0..10 {
                        b.deposit(Instant::now());
                    }
                });
            }
        });
        let granted = (0..100).filter(|_| b.withdraw()).count();
        assert_eq!(granted, 15, "half of 30 calls");
    }
}
