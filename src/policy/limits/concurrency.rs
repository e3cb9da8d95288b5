//! Calls in flight under one rule: a slot per call, held from the call's first byte upstream
//! to its final answer. The slot lives in the call's [`Admission`](super::Admission), which
//! the response body carries: an SSE stream holds its slot until it ends or the agent leaves.
//!
//! Every worker takes slots from the same count without a lock: taking one is a
//! compare-and-swap below `max`, giving it back a subtraction, so the count is exact. Only
//! a call that queues for a slot (`queue` above zero) and finds none waits on a [`Notify`];
//! a slot given back wakes one such call, and only when one waits.

use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// One rule's slots, shared by every worker.
#[derive(Debug)]
pub struct Slots {
    max: u32,
    count: Arc<Count>,
}

/// The slots taken, and the calls queued for one.
#[derive(Debug, Default)]
struct Count {
    taken: AtomicU32,
    queued: AtomicU32,
    freed: Notify,
}

/// A call's slot: given back when dropped. It holds the count it came from, so a reload
/// that renews a changed rule's limiter leaves the calls in flight in the old one.
#[derive(Debug)]
pub struct Slot(Arc<Count>);

/// One call queued for a slot, counted while it waits.
struct Queued<'a>(&'a Count);

impl Slots {
    pub fn new(max: u32) -> Slots {
        Slots {
            max,
            count: Arc::default(),
        }
    }

    /// The most calls in flight at once.
    pub fn max(&self) -> u32 {
        self.max
    }

    /// A slot now, if one is free.
    pub fn try_take(&self) -> Option<Slot> {
        let below_max = |taken: u32| (taken < self.max).then_some(taken + 1);
        let count = &self.count;
        let taken = count
            .taken
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, below_max);
        taken.ok().map(|_| Slot(count.clone()))
    }

    /// A slot, waiting at most `queue` for one.
    pub async fn take_within(&self, queue: Duration) -> Option<Slot> {
        if let Some(slot) = self.try_take() {
            return Some(slot);
        }
        if queue.is_zero() {
            return None;
        }
        let deadline = Instant::now().checked_add(queue)?;
        let _queued = Queued::new(&self.count);
        loop {
            // Enabled before the slots are looked at: a slot given back after the look
            // wakes this call (or leaves the notice for it).
            let mut freed = pin!(self.count.freed.notified());
            freed.as_mut().enable();
            if let Some(slot) = self.try_take() {
                return Some(slot);
            }
            tokio::time::timeout_at(deadline, freed).await.ok()?;
        }
    }

    /// Slots taken now.
    pub fn taken(&self) -> u32 {
        self.count.taken.load(Ordering::Acquire)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let count = &self.0;
        count.taken.fetch_sub(1, Ordering::SeqCst);
        // Sequentially consistent with `Queued::new` and `try_take`: either the queued call's
        // count is seen here, or its look at the slots sees this one given back.
        if count.queued.load(Ordering::SeqCst) > 0 {
            count.freed.notify_one();
        }
    }
}

impl<'a> Queued<'a> {
    fn new(count: &'a Count) -> Queued<'a> {
        count.queued.fetch_add(1, Ordering::SeqCst);
        Queued(count)
    }
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.queued.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_slot_is_given_back_when_dropped() {
        let slots = Slots::new(2);
        let a = slots.try_take();
        let b = slots.try_take();
        assert!(a.is_some() && b.is_some());
        assert!(slots.try_take().is_none());
        assert_eq!(slots.taken(), 2);
        drop(a);
        assert!(slots.try_take().is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_queued_call_gets_the_slot_freed_within_its_queue() {
        let slots = Arc::new(Slots::new(1));
        let held = slots.try_take();
        let freed = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            drop(held);
        });
        assert!(slots.take_within(Duration::from_millis(10)).await.is_none());
        assert!(
            slots
                .take_within(Duration::from_millis(100))
                .await
                .is_some()
        );
        freed.await.unwrap();
    }

    #[test]
    fn takes_on_many_threads_at_once_never_pass_the_max() {
        let slots = Slots::new(8);
        let peak = std::sync::atomic::AtomicU32::new(0);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..5000 {
                        if let Some(slot) = slots.try_take() {
                            peak.fetch_max(slots.taken(), Ordering::SeqCst);
                            drop(slot);
                        }
                    }
                });
            }
        });
        assert!(peak.load(Ordering::SeqCst) <= 8);
        assert_eq!(slots.taken(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_queued_call_gets_a_slot_as_they_are_given_back() {
        let slots = Arc::new(Slots::new(2));
        let calls: Vec<_> = (0..32)
            .map(|_| {
                let slots = slots.clone();
                tokio::spawn(async move {
                    let slot = slots.take_within(Duration::from_secs(30)).await;
                    assert!(slots.taken() <= 2);
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    slot.is_some()
                })
            })
            .collect();
        for call in calls {
            assert!(call.await.unwrap(), "a queued call went without a slot");
        }
        assert_eq!(slots.taken(), 0);
    }
}
