//! The request side of a POST: the agent's body streams to the upstream through an
//! [`ObservedBody`](crate::proxy::ObservedBody) whose sink is the request inspector. The
//! response side takes what the inspector learnt when the upstream's head arrives (MCP servers
//! answer after reading the whole request, so by then it is complete).

use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;

use crate::capture::BodyCopy;
use crate::classify::request::{Inspected, RequestInspector};

use crate::proxy::{BodyEnd, BodySink};

#[derive(Default)]
struct State {
    inspector: Option<RequestInspector>,
    done: Option<Inspected>,
    cut: bool,
    /// The body's first bytes, for traffic capture (only while it is on).
    copy: Option<BodyCopy>,
}

/// What the handler knows of a POST body's requests.
pub(crate) enum Inspection {
    /// Read whole before the exchange (the replay buffer's body), not inspected yet: that
    /// waits until the first attempt's request has gone out (`read`), so the upstream works
    /// on the call while strata reads it. Asked before, it is inspected then.
    Unread { body: Bytes, cap: usize },
    /// A whole body, inspected, with nothing shared and no lock.
    Whole { found: Inspected, cut: bool },
    /// Streaming: shared between the request body (writer) and the handler (reader).
    Streaming(Shared),
}

#[derive(Clone, Default)]
pub(crate) struct Shared(Arc<Mutex<State>>);

/// The request body's sink; inert for bodies that are not inspected (GET, DELETE).
pub struct InspectSink {
    shared: Option<Shared>,
    cap: usize,
}

// === impl Inspection ===

impl Inspection {
    /// A body read whole, to inspect (at most `cap` bytes of it) when first asked.
    pub(crate) fn unread(body: Bytes, cap: usize) -> Self {
        Inspection::Unread { body, cap }
    }

    /// Inspects a body read whole, if that is still to do.
    pub(crate) fn read(&mut self) {
        if let Inspection::Unread { body, cap } = self {
            *self = Inspection::whole(body, *cap);
        }
    }

    /// A body read whole, inspected now (at most `cap` bytes of it).
    fn whole(body: &[u8], cap: usize) -> Self {
        let mut inspector = RequestInspector::new();
        let cut = inspector.feed(body, cap);
        Inspection::Whole {
            found: inspector.finish(),
            cut,
        }
    }

    /// A body to inspect as it streams, and the sink it streams through.
    pub(crate) fn streaming(cap: usize) -> (Self, InspectSink) {
        let shared = Shared(Arc::new(Mutex::new(State {
            inspector: Some(RequestInspector::new()),
            done: None,
            cut: false,
            copy: None,
        })));
        let sink = InspectSink {
            shared: Some(shared.clone()),
            cap,
        };
        (Inspection::Streaming(shared), sink)
    }

    /// Keeps a streaming body's first `max` bytes for traffic capture, from its first chunk
    /// on (call before the body streams).
    pub(crate) fn copy_body(&mut self, max: usize) {
        if let Inspection::Streaming(shared) = self {
            shared.lock().copy = Some(BodyCopy::new(max));
        }
    }

    /// The copy [`copy_body`](Self::copy_body) kept, taken.
    pub(crate) fn take_copy(&mut self) -> Option<BodyCopy> {
        match self {
            Inspection::Streaming(shared) => shared.lock().copy.take(),
            _ => None,
        }
    }

    /// What is known now. A body still streaming is read as far as it got.
    pub(crate) fn take(self) -> Inspected {
        match self {
            Inspection::Unread { body, cap } => Inspection::whole(&body, cap).take(),
            Inspection::Whole { found, .. } => found,
            Inspection::Streaming(shared) => {
                let mut state = shared.lock();
                if let Some(done) = state.done.take() {
                    return done;
                }
                match state.inspector.take() {
                    Some(inspector) => inspector.finish_partial(),
                    None => Inspected::default(),
                }
            }
        }
    }

    /// `f` of the requests found, when the body was read to its end (the replay path); of
    /// none otherwise.
    pub(crate) fn with_requests<T>(
        &self,
        f: impl FnOnce(&[crate::classify::envelope::Request]) -> T,
    ) -> T {
        match self {
            Inspection::Unread { body, cap } => Inspection::whole(body, *cap).with_requests(f),
            Inspection::Whole { found, .. } => f(&found.requests),
            Inspection::Streaming(shared) => {
                let state = shared.lock();
                f(state.done.as_ref().map_or(&[][..], |done| &done.requests))
            }
        }
    }

    /// True when the inspect cap stopped the inspector before the body's end.
    pub(crate) fn was_cut(&self) -> bool {
        match self {
            Inspection::Unread { body, cap } => Inspection::whole(body, *cap).was_cut(),
            Inspection::Whole { cut, .. } => *cut,
            Inspection::Streaming(shared) => shared.lock().cut,
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

// === impl InspectSink ===

impl InspectSink {
    pub fn inert() -> Self {
        InspectSink {
            shared: None,
            cap: 0,
        }
    }
}

impl BodySink for InspectSink {
    fn on_data(&mut self, chunk: &[u8]) {
        let Some(shared) = &self.shared else { return };
        let mut state = shared.lock();
        if let Some(copy) = state.copy.as_mut() {
            copy.push(chunk);
        }
        if let Some(inspector) = state.inspector.as_mut()
            && inspector.feed(chunk, self.cap)
        {
            state.cut = true;
        }
    }

    fn on_end(&mut self, end: BodyEnd) {
        let Some(shared) = self.shared.take() else {
            return;
        };
        let mut state = shared.lock();
        if let Some(inspector) = state.inspector.take() {
            state.done = Some(match end {
                BodyEnd::Complete => inspector.finish(),
                BodyEnd::Error | BodyEnd::Dropped => inspector.finish_partial(),
            });
        }
    }
}
