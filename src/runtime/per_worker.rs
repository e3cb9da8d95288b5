//! State every call writes, kept once per worker, so that no cache line is written by two
//! cores on every call.
//!
//! Why: a counter, a lock or a reference count that both workers write on every call moves
//! its cache line between their cores each time. Every call writes several — the metrics'
//! counters, histogram and gauges, the retry budget's lock, the reference counts of the call
//! context — and, shared at 64 agents, they add markedly to a call's user time (measured in
//! `bench/README.md`). Each worker's own copy stays on its core; whoever reads the whole
//! (a Prometheus scrape, a retry asking the budget) sums the copies.
//!
//! A thread uses the copy [`enter`] gave it (a worker's own), or copy 0 (the main thread,
//! tests). At most [`COPIES`]: workers past the third share one, which only costs them the
//! contention there was before, while each thing kept so costs [`COPIES`] times its memory.

use std::cell::Cell;

/// Copies of each: one for threads that are not workers, three for workers.
pub const COPIES: usize = 4;

thread_local! {
    static COPY: Cell<usize> = const { Cell::new(0) };
}

/// Makes this thread use worker `worker`'s copies from now on.
pub fn enter(worker: usize) {
    COPY.set(1 + worker % (COPIES - 1));
}

/// The number of the copy this thread uses (what [`PerWorker::nth`] takes).
pub fn copy_here() -> usize {
    COPY.get() % COPIES
}

/// One `T` per worker. The copies sit side by side: a `T` written in place (not through a
/// pointer to its own allocation) needs [`Line`] around it.
#[derive(Clone, Debug)]
pub struct PerWorker<T>([T; COPIES]);

impl<T> PerWorker<T> {
    /// Each copy made by `make`.
    pub fn new(mut make: impl FnMut() -> T) -> Self {
        PerWorker(std::array::from_fn(|_| make()))
    }

    /// Each copy made by `make`, or its first error.
    pub fn try_new<E>(mut make: impl FnMut() -> Result<T, E>) -> Result<Self, E> {
        Ok(PerWorker([make()?, make()?, make()?, make()?]))
    }

    /// This thread's copy.
    #[inline]
    pub fn here(&self) -> &T {
        &self.0[copy_here()]
    }

    /// Copy `n` (of [`copy_here`]), wrapping past [`COPIES`].
    pub fn nth(&self, n: usize) -> &T {
        &self.0[n % COPIES]
    }

    /// Each copy's `f`.
    pub fn map<U>(&self, f: impl FnMut(&T) -> U) -> PerWorker<U> {
        PerWorker(self.0.each_ref().map(f))
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.0.iter()
    }
}

/// A value alone on its cache lines (128 bytes: two lines, which x86's adjacent-line
/// prefetcher fetches together).
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct Line<T>(pub T);

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread uses copy 0 until it enters a worker's; workers past the third share.
    #[test]
    fn each_worker_thread_uses_its_own_copy() {
        let copies = PerWorker::new({
            let mut next = 0;
            move || {
                next += 1;
                next - 1
            }
        });
        assert_eq!(*copies.here(), 0);
        let seen: Vec<usize> = (0..4)
            .map(|worker| {
                let copies = &copies;
                std::thread::scope(|s| {
                    s.spawn(move || {
                        enter(worker);
                        assert_eq!(copies.nth(copy_here()), copies.here());
                        *copies.here()
                    })
                    .join()
                    .unwrap()
                })
            })
            .collect();
        assert_eq!(seen, [1, 2, 3, 1]);
        assert_eq!(std::mem::align_of::<Line<u8>>(), 128);
    }
}
