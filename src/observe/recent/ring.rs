//! The kept records: oldest evicted first, bounded by count and by the bytes of their JSON.

use std::collections::VecDeque;
use std::sync::Arc;

use super::CallEntry;

/// Finished calls in `seq` order, oldest at the front.
#[derive(Debug)]
pub(super) struct Ring {
    entries: VecDeque<Arc<CallEntry>>,
    bytes: usize,
    max_count: usize,
    max_bytes: usize,
}

impl Ring {
    pub(super) fn new(max_count: usize, max_bytes: usize) -> Ring {
        Ring {
            entries: VecDeque::new(),
            bytes: 0,
            max_count: max_count.max(1),
            max_bytes,
        }
    }

    pub(super) fn max_count(&self) -> usize {
        self.max_count
    }

    /// Keeps `entry`, evicting the oldest until both bounds hold. An entry larger than the
    /// byte bound on its own is not kept.
    pub(super) fn push(&mut self, entry: Arc<CallEntry>) {
        if entry.bytes() > self.max_bytes {
            return;
        }
        self.bytes += entry.bytes();
        // Calls finishing on two threads at once may arrive out of order; by a place or two.
        let at = self
            .entries
            .iter()
            .rposition(|kept| kept.seq < entry.seq)
            .map_or(0, |i| i + 1);
        self.entries.insert(at, entry);
        self.evict();
    }

    /// New bounds; the oldest go until they hold.
    pub(super) fn resize(&mut self, max_count: usize, max_bytes: usize) {
        self.max_count = max_count.max(1);
        self.max_bytes = max_bytes;
        self.evict();
    }

    pub(super) fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }

    pub(super) fn newest_first(&self) -> impl Iterator<Item = &Arc<CallEntry>> {
        self.entries.iter().rev()
    }

    #[cfg(test)]
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    fn evict(&mut self) {
        while self.entries.len() > self.max_count || self.bytes > self.max_bytes {
            match self.entries.pop_front() {
                Some(old) => self.bytes -= old.bytes(),
                None => break,
            }
        }
    }
}
