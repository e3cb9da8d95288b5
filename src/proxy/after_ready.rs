//! A wait until the tasks ready to run on this worker have run.
//!
//! `tokio::task::yield_now` hands the waker to the scheduler, which wakes it only once it has
//! run out of ready tasks (or after its event interval) and polled the driver. But its future
//! completes on the *next poll*, whatever woke the task — and a body's task is woken from
//! elsewhere too (h2 notifies a stream of send capacity through the same waker). So
//! [`AfterReady`] completes only on the scheduler's own wake: it gives `yield_now` a waker
//! that marks the wake before passing it on.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// Completes once the scheduler has woken it after the tasks ready before it ran.
pub(super) struct AfterReady {
    /// `None` until first polled.
    mark: Option<Arc<Mark>>,
}

/// The scheduler's wake, seen: the flag, and the task to wake with it.
struct Mark {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl AfterReady {
    pub(super) fn new() -> Self {
        AfterReady { mark: None }
    }

    /// Pending until the scheduler's wake; the first poll hands the wake to the scheduler.
    pub(super) fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(mark) = &self.mark else {
            self.mark = Some(Mark::deferred(cx.waker()));
            return Poll::Pending;
        };
        // Registered before the look, so a wake in between is not missed.
        mark.task.register(cx.waker());
        match mark.is_woken() {
            true => Poll::Ready(()),
            false => Poll::Pending,
        }
    }
}

// === impl Mark ===

impl Mark {
    /// A mark for `task`, handed to the scheduler through `yield_now` (outside a runtime the
    /// scheduler is not there, and it is woken at once).
    fn deferred(task: &Waker) -> Arc<Mark> {
        let mark = Arc::new(Mark {
            woken: AtomicBool::new(false),
            task: AtomicWaker::new(),
        });
        mark.task.register(task);
        let waker = Waker::from(mark.clone());
        let mut yielded = std::pin::pin!(tokio::task::yield_now());
        let _ = yielded.as_mut().poll(&mut Context::from_waker(&waker));
        mark
    }

    fn is_woken(&self) -> bool {
        self.woken.load(Ordering::Acquire)
    }
}

impl Wake for Mark {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Counts its wakes.
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn a_wake_from_elsewhere_does_not_complete_it() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let mut wait = AfterReady::new();
        assert!(wait.poll_ready(&mut cx).is_pending());
        // Polled again before the scheduler woke it (as a spurious wake would): still pending.
        assert!(wait.poll_ready(&mut cx).is_pending());
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        // The scheduler wakes deferred tasks once this task gives way.
        tokio::task::yield_now().await;
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(wait.poll_ready(&mut cx).is_ready());
    }
}
