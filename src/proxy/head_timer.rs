//! The timer that bounds each attempt's wait for the upstream's response head
//! (`timeouts.response_head`).
//!
//! strata's own agent connection (`agent_h1.rs`) lends one timer for its life, reset for
//! each attempt, rather than `tokio::time::timeout` making one per call: a new timer is put
//! in tokio's timer wheel when first polled and taken out when dropped, each under the time
//! driver's lock, while resetting a registered one
//! to a later deadline — the next call's always is — only moves its expiry
//! (`extend_expiration` in tokio's time driver). Connections hyper serves get a timer of
//! their own per call, made at the first attempt.
//!
//! A lent timer is not even reset per call ([`Deadline`]): the next call's deadline is always
//! later, so the timer is left where it is, goes off early — once per timeout's length, not
//! once per call — and is moved on to the deadline then. A reset takes two atomic operations
//! on the timer's state, twice a call (this timer and `agent_h1`'s header timer).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};

pin_project! {
    /// A `Sleep` polled only when it may have gone off, or when the task polling it is not
    /// the one it would wake.
    ///
    /// Every poll of a `Sleep` registers the task's waker anew (tokio's `AtomicWaker`: a
    /// clone of the new waker, a drop of the old, and two atomic operations on its state;
    /// six atomic operations in all, twice a call — the header timer and the response head's),
    /// though an agent connection's task is the same one all its life. Here a timer
    /// registered for this task and still in tokio's timer wheel is left as it is: tokio
    /// wakes the task when it goes off, and the next poll finds it out of the wheel.
    pub(crate) struct Timer {
        #[pin]
        sleep: Sleep,
        // The waker the timer is registered with (`None` until polled, and after a reset or
        // going off: then the next poll registers).
        registered: Option<Waker>,
    }
}

impl Timer {
    /// A timer set to go off at `at`.
    pub(crate) fn new(at: Instant) -> Self {
        Timer {
            sleep: tokio::time::sleep_until(at),
            registered: None,
        }
    }

    pub(crate) fn deadline(&self) -> Instant {
        self.sleep.deadline()
    }

    /// Sets the timer to go off at `at`; the next poll registers it.
    pub(crate) fn reset(self: Pin<&mut Self>, at: Instant) {
        let this = self.project();
        this.sleep.reset(at);
        *this.registered = None;
    }

    /// Ready once the timer went off.
    pub(crate) fn poll_off(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.project();
        let ours = this
            .registered
            .as_ref()
            .is_some_and(|waker| waker.will_wake(cx.waker()));
        // Still in the wheel (not gone off), and set to wake this task: nothing to do.
        if ours && !this.sleep.is_elapsed() {
            return Poll::Pending;
        }
        match this.sleep.poll(cx) {
            Poll::Ready(()) => {
                *this.registered = None;
                Poll::Ready(())
            }
            Poll::Pending => {
                if !ours {
                    *this.registered = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

/// A timer that lives longer than one deadline, set to each in turn without resetting it
/// when the new one is later: it goes off early, and is moved on then.
pub(crate) struct Deadline<'t> {
    timer: Pin<&'t mut Timer>,
    at: Instant,
}

impl<'t> Deadline<'t> {
    /// `timer`, to go off at `at`: reset only if it would go off later.
    pub(crate) fn new(mut timer: Pin<&'t mut Timer>, at: Instant) -> Self {
        if timer.deadline() > at {
            timer.as_mut().reset(at);
        }
        Deadline { timer, at }
    }

    /// Ready once `at` has passed.
    pub(crate) fn poll_passed(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            std::task::ready!(self.timer.as_mut().poll_off(cx));
            if Instant::now() >= self.at {
                return Poll::Ready(());
            }
            // Off early (set for an earlier deadline): on to this one.
            self.timer.as_mut().reset(self.at);
        }
    }
}

pin_project! {
    /// [`HeadTimer::within`]'s future.
    pub(crate) struct Within<'t, F> {
        timer: Deadline<'t>,
        #[pin]
        attempt: F,
    }
}

impl<F: Future> Future for Within<'_, F> {
    type Output = Result<F::Output, HeadTimedOut>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        // The attempt first, as `tokio::time::timeout` does: an answer ready at the deadline
        // is taken.
        if let Poll::Ready(done) = this.attempt.poll(cx) {
            return Poll::Ready(Ok(done));
        }
        this.timer.poll_passed(cx).map(|()| Err(HeadTimedOut))
    }
}

/// The response head did not arrive by the deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HeadTimedOut;

/// The timer for one call's attempts: the connection's, or one of its own.
pub(crate) struct HeadTimer<'a> {
    lent: Option<Pin<&'a mut Timer>>,
    own: Option<Pin<Box<Timer>>>,
}

impl<'a> HeadTimer<'a> {
    /// `lent`: the agent connection's timer, when it has one.
    pub(crate) fn new(lent: Option<Pin<&'a mut Timer>>) -> Self {
        HeadTimer { lent, own: None }
    }

    /// `attempt` run until it finishes or `deadline` passes, whichever comes first.
    ///
    /// A future of its own rather than an `async fn`: one would hold the attempt twice (as
    /// its argument and pinned), and the attempt is most of `handle`'s future.
    pub(crate) fn within<F: Future>(&mut self, deadline: Instant, attempt: F) -> Within<'_, F> {
        Within {
            timer: self.armed(deadline),
            attempt,
        }
    }

    /// The timer, set to go off at `deadline`.
    fn armed(&mut self, deadline: Instant) -> Deadline<'_> {
        let timer = match &mut self.lent {
            Some(lent) => lent.as_mut(),
            None => self
                .own
                .get_or_insert_with(|| Box::pin(Timer::new(deadline)))
                .as_mut(),
        };
        Deadline::new(timer, deadline)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const HEAD: Duration = Duration::from_secs(300);

    /// A connection's timer serves call after call: each attempt gets its own deadline, one
    /// that fired leaves the next unaffected, and an answer in time is taken.
    #[tokio::test(start_paused = true)]
    async fn a_lent_timer_bounds_each_attempt_from_its_own_start() {
        let mut conn_timer = Box::pin(Timer::new(Instant::now()));
        for round in 0..3u64 {
            let mut timer = HeadTimer::new(Some(conn_timer.as_mut()));
            let begun = Instant::now();
            let answered = timer
                .within(begun + HEAD, async {
                    tokio::time::sleep(Duration::from_secs(10 * round)).await;
                    round
                })
                .await;
            assert_eq!(answered, Ok(round));
            assert_eq!(begun.elapsed(), Duration::from_secs(10 * round));
        }
        let mut timer = HeadTimer::new(Some(conn_timer.as_mut()));
        let begun = Instant::now();
        let silent = timer
            .within(begun + HEAD, std::future::pending::<()>())
            .await;
        assert_eq!(silent, Err(HeadTimedOut));
        assert_eq!(begun.elapsed(), HEAD);
        // After it fired, the next deadline is its own, not already past.
        let begun = Instant::now();
        let answered = timer
            .within(begun + HEAD, tokio::time::sleep(Duration::from_secs(1)))
            .await;
        assert_eq!(answered, Ok(()));
        assert_eq!(begun.elapsed(), Duration::from_secs(1));
    }

    /// A deadline earlier than the one the timer was last set to still fires on time (a
    /// shorter wait after a longer one: the timer is moved, not extended).
    #[tokio::test(start_paused = true)]
    async fn an_earlier_deadline_is_kept() {
        let mut timer = HeadTimer::new(None);
        let begun = Instant::now();
        let first = timer
            .within(begun + HEAD, tokio::time::sleep(Duration::from_secs(1)))
            .await;
        assert_eq!(first, Ok(()));
        let begun = Instant::now();
        let second = timer
            .within(begun + Duration::from_secs(5), std::future::pending::<()>())
            .await;
        assert_eq!(second, Err(HeadTimedOut));
        assert_eq!(begun.elapsed(), Duration::from_secs(5));
    }

    /// A later deadline leaves the timer where it was (no reset): it goes off there, early,
    /// and waits on to the deadline; an earlier one resets it.
    #[tokio::test(start_paused = true)]
    async fn a_deadline_moves_the_timer_only_when_it_goes_off_early() {
        let begun = Instant::now();
        let mut timer = Box::pin(Timer::new(begun + Duration::from_secs(10)));
        let later = begun + Duration::from_secs(25);
        let mut deadline = Deadline::new(timer.as_mut(), later);
        assert_eq!(deadline.timer.deadline(), begun + Duration::from_secs(10));
        std::future::poll_fn(|cx| deadline.poll_passed(cx)).await;
        assert_eq!(begun.elapsed(), Duration::from_secs(25));
        assert_eq!(deadline.timer.deadline(), later);

        let sooner = Instant::now() + Duration::from_secs(3);
        timer
            .as_mut()
            .reset(Instant::now() + Duration::from_secs(60));
        let mut deadline = Deadline::new(timer.as_mut(), sooner);
        assert_eq!(deadline.timer.deadline(), sooner);
        std::future::poll_fn(|cx| deadline.poll_passed(cx)).await;
        assert_eq!(begun.elapsed(), Duration::from_secs(28));
    }

    /// Polled again and again by its task while it waits (the connection's other work),
    /// a timer is registered once and still goes off on time.
    #[tokio::test(start_paused = true)]
    async fn a_timer_polled_again_by_its_task_goes_off_on_time() {
        let begun = Instant::now();
        let mut timer = Box::pin(Timer::new(begun + Duration::from_secs(10)));
        let mut ticks = tokio::time::interval(Duration::from_secs(1));
        let mut woken = 0;
        loop {
            tokio::select! {
                biased;
                () = std::future::poll_fn(|cx| timer.as_mut().poll_off(cx)) => break,
                _ = ticks.tick() => woken += 1,
            }
        }
        assert_eq!(begun.elapsed(), Duration::from_secs(10));
        assert!(woken >= 10, "{woken}");
    }

    /// Registered for another task first, a timer polled by this one wakes this one; reset
    /// after it went off, it is registered again and goes off at its new time.
    #[tokio::test(start_paused = true)]
    async fn a_timer_wakes_the_task_that_polled_it_last() {
        let begun = Instant::now();
        let mut timer = Box::pin(Timer::new(begun + Duration::from_secs(10)));
        let mut elsewhere = Context::from_waker(Waker::noop());
        assert!(timer.as_mut().poll_off(&mut elsewhere).is_pending());
        let off = tokio::time::timeout(
            Duration::from_secs(60),
            std::future::poll_fn(|cx| timer.as_mut().poll_off(cx)),
        )
        .await;
        assert!(off.is_ok(), "the timer woke the other task, not this one");
        assert_eq!(begun.elapsed(), Duration::from_secs(10));

        timer
            .as_mut()
            .reset(Instant::now() + Duration::from_secs(5));
        std::future::poll_fn(|cx| timer.as_mut().poll_off(cx)).await;
        assert_eq!(begun.elapsed(), Duration::from_secs(15));
    }
}
