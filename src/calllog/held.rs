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

use std::borrow::Cow;
use std::cell::RefCell;
use std::future::Future;
use std::ops::Range;
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
            texts: String::new(),
        })
    };
}

struct Held {
    /// An [`AfterPoll`] is polling on this thread.
    active: bool,
    records: Vec<Kept>,
    /// The held records' texts, one after another: kept records borrow nothing, and holding
    /// one allocates nothing once warm (an owned copy of each text cost ~3.5k instructions a
    /// call in `malloc` and `free`, callgrind).
    texts: String,
}

/// A record held back: its texts as ranges of [`Held::texts`].
struct Kept {
    record: CallRecord<'static>,
    client: Option<Range<usize>>,
    protocol_version: Option<Range<usize>>,
    method: Range<usize>,
    tool: Option<Range<usize>>,
    jsonrpc_id: Range<usize>,
    content_type: Option<Range<usize>>,
    error_message: Option<Range<usize>>,
    result_type: Option<Range<usize>>,
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
        let taken = HELD.with(|held| match held.try_borrow_mut() {
            Ok(mut held) => {
                held.active = false;
                Some((
                    std::mem::take(&mut held.records),
                    std::mem::take(&mut held.texts),
                ))
            }
            Err(_) => None,
        });
        let Some((mut records, mut texts)) = taken else {
            return;
        };
        for kept in records.drain(..) {
            kept.emit(&texts);
        }
        texts.clear();
        // The buffers back, for the next poll (no allocation once warm).
        HELD.with(|held| {
            if let Ok(mut held) = held.try_borrow_mut()
                && held.records.capacity() == 0
            {
                held.records = records;
                held.texts = texts;
            }
        });
    }
}

// === impl Kept ===

impl Kept {
    fn new(record: CallRecord<'_>, texts: &mut String) -> Kept {
        let mut keep = |text: &str| {
            let start = texts.len();
            texts.push_str(text);
            start..texts.len()
        };
        let client = record.client.as_deref().map(&mut keep);
        let protocol_version = record.protocol_version.as_deref().map(&mut keep);
        let method = keep(&record.method);
        let tool = record.tool.as_deref().map(&mut keep);
        let jsonrpc_id = keep(&record.jsonrpc_id);
        let content_type = record.content_type.as_deref().map(&mut keep);
        let error_message = record.error_message.as_deref().map(&mut keep);
        let result_type = record.result_type.as_deref().map(&mut keep);
        let record = CallRecord {
            upstream: record.upstream,
            session: record.session,
            client: None,
            protocol_version: None,
            method: Cow::Borrowed(""),
            tool: None,
            jsonrpc_id: Cow::Borrowed(""),
            attempts: record.attempts,
            http_statuses: record.http_statuses,
            content_type: None,
            sse_events: record.sse_events,
            error_code: record.error_code,
            error_message_len: record.error_message_len,
            error_message: None,
            result_type: None,
            outcome: record.outcome,
            retry_origin: record.retry_origin,
            duration: record.duration,
        };
        Kept {
            record,
            client,
            protocol_version,
            method,
            tool,
            jsonrpc_id,
            content_type,
            error_message,
            result_type,
        }
    }

    fn emit(self, texts: &str) {
        let text = |range: Range<usize>| Cow::Borrowed(texts.get(range).unwrap_or(""));
        let Kept {
            record,
            client,
            protocol_version,
            method,
            tool,
            jsonrpc_id,
            content_type,
            error_message,
            result_type,
        } = self;
        CallRecord {
            client: client.map(text),
            protocol_version: protocol_version.map(text),
            method: text(method),
            tool: tool.map(text),
            jsonrpc_id: text(jsonrpc_id),
            content_type: content_type.map(text),
            error_message: error_message.map(text),
            result_type: result_type.map(text),
            ..record
        }
        .emit();
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
        let held = &mut *held;
        let kept = Kept::new(record, &mut held.texts);
        held.records.push(kept);
        None
    });
    if let Some(record) = now {
        record.emit();
    }
}
