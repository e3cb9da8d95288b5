//! The last list answer a thread classified, kept so that the same bytes, when they come
//! again, are classified by comparing them rather than scanning them.
//!
//! A list request's answer (`tools/list`, `prompts/list`, `resources/list`,
//! `resources/templates/list`) is the same for every agent of a server until the server's
//! list changes, and every new session asks for it. On a large server it is megabytes of
//! input schemas: tokens every few bytes, the costliest body strata classifies per byte.
//!
//! What the JSON scanner makes of a body depends on its bytes alone, whatever the chunks (the
//! classifier's tests cut every body at every offset), and on one setting: whether it follows
//! tool entries. It hands its sink messages and tool entries, and ends with the document's
//! verdict. So a body equal byte for byte to one scanned before, with the same setting, is
//! classified by handing the sink what it was handed then. Every byte is still read: compared
//! with the byte at the same offset of a body the scanner validated. A body that differs
//! anywhere, or ends early, is scanned from its first byte, as if nothing were remembered.
//!
//! One answer per thread (strata's workers each run one), at most [`MAX_BYTES`] of it; a
//! list answer that differs from the remembered one replaces it once scanned whole.

use std::cell::RefCell;
use std::sync::Arc;

use super::capture::{Envelope, ToolEntry};
use super::json::{Document, Malformed, MessageSink};

/// Smaller answers are scanned every time: their scan costs about what keeping them would.
pub(super) const MIN_BYTES: usize = 16 * 1024;
/// Larger answers are not kept (a thread holds at most this much).
pub(super) const MAX_BYTES: usize = 8 << 20;
/// Answers whose scanner handed out more than this many messages and tool entries are not
/// kept (each is held as a copy, up to a few hundred bytes).
const MAX_EVENTS: usize = 16 * 1024;

thread_local! {
    static LAST: RefCell<Option<Arc<Remembered>>> = const { RefCell::new(None) };
}

/// A body the scanner read whole, and what it handed its sink.
pub(super) struct Remembered {
    body: Box<[u8]>,
    follow_tool_entries: bool,
    events: Box<[Event]>,
    document: Result<Document, Malformed>,
}

/// One call the scanner made on its sink.
enum Event {
    Message(Box<Envelope>),
    ToolEntry(ToolEntry),
}

/// The thread's remembered answer, when it was scanned with the same setting.
pub(super) fn last(follow_tool_entries: bool) -> Option<Arc<Remembered>> {
    LAST.try_with(|last| last.borrow().clone())
        .ok()
        .flatten()
        .filter(|known| known.follow_tool_entries == follow_tool_entries)
}

fn keep(known: Remembered) {
    let _ = LAST.try_with(|last| *last.borrow_mut() = Some(Arc::new(known)));
}

/// A body compared with a remembered one as it arrives.
pub(super) struct Matching {
    known: Arc<Remembered>,
    /// Bytes compared and equal so far.
    len: usize,
}

impl Matching {
    pub(super) fn new(known: Arc<Remembered>) -> Matching {
        Matching { known, len: 0 }
    }

    /// The setting the remembered body was scanned with.
    pub(super) fn follows_tool_entries(&self) -> bool {
        self.known.follow_tool_entries
    }

    /// Compares the next chunk: true while everything so far equals the remembered body.
    #[inline]
    pub(super) fn matches(&mut self, chunk: &[u8]) -> bool {
        let end = self.len + chunk.len();
        let equal = self.known.body.get(self.len..end) == Some(chunk);
        if equal {
            self.len = end;
        }
        equal
    }

    /// The bytes compared equal so far (the body's own, as they arrived).
    pub(super) fn prefix(&self) -> &[u8] {
        &self.known.body[..self.len]
    }

    /// The whole remembered body has arrived, and nothing else.
    pub(super) fn is_whole(&self) -> bool {
        self.len == self.known.body.len()
    }

    /// Hands `sink` what the scanner handed its own for this body; the document's verdict.
    pub(super) fn replay<S: MessageSink + ?Sized>(
        &self,
        sink: &mut S,
    ) -> Result<Document, Malformed> {
        for event in &self.known.events {
            match event {
                Event::Message(envelope) => sink.message(envelope),
                Event::ToolEntry(entry) => sink.tool_entry(entry),
            }
        }
        self.known.document
    }
}

/// A list answer being scanned, kept with what the scanner hands its sink, to be remembered
/// once it ends whole.
pub(super) struct Recording {
    body: Vec<u8>,
    events: Vec<Event>,
    follow_tool_entries: bool,
    /// Past [`MAX_BYTES`] or [`MAX_EVENTS`]: not to be kept.
    over: bool,
}

impl Recording {
    pub(super) fn new(follow_tool_entries: bool) -> Recording {
        Recording {
            body: Vec::new(),
            events: Vec::new(),
            follow_tool_entries,
            over: false,
        }
    }

    /// The next bytes of the body.
    pub(super) fn push(&mut self, chunk: &[u8]) {
        if self.over {
            return;
        }
        if self.body.len() + chunk.len() > MAX_BYTES {
            self.give_up();
            return;
        }
        self.body.extend_from_slice(chunk);
    }

    /// A sink that hands everything to `inner` and keeps a copy.
    pub(super) fn sink<'a, S: MessageSink + ?Sized>(
        &'a mut self,
        inner: &'a mut S,
    ) -> RecordingSink<'a, S> {
        RecordingSink {
            recording: self,
            inner,
        }
    }

    /// The body ended whole with this verdict: remembered, when within the bounds.
    pub(super) fn finish(self, document: Result<Document, Malformed>) {
        if self.over || self.body.len() < MIN_BYTES {
            return;
        }
        keep(Remembered {
            body: self.body.into_boxed_slice(),
            follow_tool_entries: self.follow_tool_entries,
            events: self.events.into_boxed_slice(),
            document,
        });
    }

    fn record(&mut self, event: impl FnOnce() -> Event) {
        if self.over {
            return;
        }
        if self.events.len() == MAX_EVENTS {
            self.give_up();
            return;
        }
        self.events.push(event());
    }

    fn give_up(&mut self) {
        self.over = true;
        self.body = Vec::new();
        self.events = Vec::new();
    }
}

/// [`Recording::sink`].
pub(super) struct RecordingSink<'a, S: ?Sized> {
    recording: &'a mut Recording,
    inner: &'a mut S,
}

impl<S: MessageSink + ?Sized> MessageSink for RecordingSink<'_, S> {
    fn message(&mut self, envelope: &Envelope) {
        self.recording
            .record(|| Event::Message(Box::new(envelope.clone())));
        self.inner.message(envelope);
    }

    fn tool_entry(&mut self, entry: &ToolEntry) {
        self.recording.record(|| Event::ToolEntry(entry.clone()));
        self.inner.tool_entry(entry);
    }
}

#[cfg(test)]
mod tests;
