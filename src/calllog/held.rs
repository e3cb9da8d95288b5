//! Call records held back until the connection's poll that settled them ends.
//!
//! A call's record is settled while hyper polls its response body, before hyper writes that
//! body's last bytes to the agent (it writes once the body has nothing more to give): written
//! there, the record's formatting and its `write(2)` came between the upstream's answer and
//! the agent's (`strace`, `bench/README.md`), ~8k instructions on every call's path. Inside
//! an [`AfterPoll`] scope the record is kept and written when the poll ends — after hyper's
//! flush, in the same poll, on the same thread. Counters are not held: they move when the
//! outcome is reached, as before. Outside a scope (h2 streams run in tasks of their own,
//! tests that classify without a server), records are written at once.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::CallRecord;

/// Records held at most in one poll; past this they are written at once.
const MAX_HELD: usize = 256;

thread_local! {
    static HELD: RefCell<Held> = const {
        RefCell::new(Held {
            active: false,
            records: Vec::new(),
        })
    };
}

struct Held {
    /// An [`AfterPoll`] is polling on this thread.
    active: bool,
    records: Vec<CallRecord<'static>>,
}

pin_project_lite::pin_project! {
    /// Writes the call records its inner future settles when each of its polls ends.
    pub struct AfterPoll<F> {
        #[pin]
        inner: F,
    }
}

/// Writes the held records when dropped: at the poll's end, or while unwinding from a panic
/// in it (the thread's next scope then starts clean).
struct Scope;

// === impl AfterPoll ===

impl<F> AfterPoll<F> {
    pub fn new(inner: F) -> Self {
        AfterPoll { inner }
    }
}

impl<F: Future> Future for AfterPoll<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let opened = HELD.with(|held| match held.try_borrow_mut() {
            Ok(mut held) if !held.active => {
                held.active = true;
                true
            }
            // Nested in another scope: that one writes them.
            _ => false,
        });
        let _scope = opened.then_some(Scope);
        self.project().inner.poll(cx)
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        let mut records = HELD.with(|held| match held.try_borrow_mut() {
            Ok(mut held) => {
                held.active = false;
                std::mem::take(&mut held.records)
            }
            Err(_) => Vec::new(),
        });
        for record in records.drain(..) {
            record.emit();
        }
        // The buffer back, for the next poll (no allocation once warm).
        HELD.with(|held| {
            if let Ok(mut held) = held.try_borrow_mut()
                && held.records.capacity() == 0
            {
                held.records = records;
            }
        });
    }
}

/// Writes `record` now, or at the end of the [`AfterPoll`] poll this thread is in.
pub(super) fn emit_after_poll(record: CallRecord<'_>) {
    let now = HELD.with(|held| {
        let Ok(mut held) = held.try_borrow_mut() else {
            return Some(record);
        };
        if !held.active || held.records.len() >= MAX_HELD {
            return Some(record);
        }
        held.records.push(record.into_owned());
        None
    });
    if let Some(record) = now {
        record.emit();
    }
}
