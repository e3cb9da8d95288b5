//! Calls in flight under one rule: a slot per call, held from the call's first byte upstream
//! to its final answer. The slot lives in the call's [`Admission`](super::Admission), which
//! the response body carries: an SSE stream holds its slot until it ends or the agent leaves.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// One rule's slots, shared by every worker.
#[derive(Debug)]
pub struct Slots {
    max: u32,
    semaphore: Arc<Semaphore>,
}

/// A call's slot: given back when dropped. It holds the semaphore it came from, so a reload
/// that renews a changed rule's limiter leaves the calls in flight in the old one.
#[derive(Debug)]
pub struct Slot(#[allow(dead_code, reason = "held for its drop")] OwnedSemaphorePermit);

impl Slots {
    pub fn new(max: u32) -> Slots {
        Slots {
            max,
            semaphore: Arc::new(Semaphore::new(max as usize)),
        }
    }

    /// The most calls in flight at once.
    pub fn max(&self) -> u32 {
        self.max
    }

    /// A slot now, if one is free.
    pub fn try_take(&self) -> Option<Slot> {
        self.semaphore.clone().try_acquire_owned().ok().map(Slot)
    }

    /// A slot, waiting at most `queue` for one.
    pub async fn take_within(&self, queue: Duration) -> Option<Slot> {
        if let Some(slot) = self.try_take() {
            return Some(slot);
        }
        let waited = tokio::time::timeout(queue, self.semaphore.clone().acquire_owned()).await;
        waited.ok()?.ok().map(Slot)
    }

    /// Slots taken now.
    pub fn taken(&self) -> u32 {
        self.max
            .saturating_sub(self.semaphore.available_permits() as u32)
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
}
