//! The request side of a POST: the agent's body streams to the upstream through an
//! [`ObservedBody`](super::body::ObservedBody) whose sink is the request inspector. The
//! response side takes what the inspector learnt when the upstream's head arrives (MCP servers
//! answer after reading the whole request, so by then it is complete).

use std::sync::{Arc, Mutex, MutexGuard};

use crate::classify::request::{Inspected, RequestInspector};

use super::body::{BodyEnd, BodySink};

#[derive(Default)]
struct State {
    inspector: Option<RequestInspector>,
    done: Option<Inspected>,
    cut: bool,
}

/// Shared between the request body (writer) and the handler (reader).
#[derive(Clone, Default)]
pub(super) struct Inspection(Arc<Mutex<State>>);

/// The request body's sink; inert for bodies that are not inspected (GET, DELETE).
pub struct InspectSink {
    shared: Option<Inspection>,
    cap: usize,
}

// === impl Inspection ===

impl Inspection {
    pub(super) fn new() -> Self {
        Inspection(Arc::new(Mutex::new(State {
            inspector: Some(RequestInspector::new()),
            done: None,
            cut: false,
        })))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What is known now. A body still streaming is read as far as it got.
    pub(super) fn take(&self) -> Inspected {
        let mut state = self.lock();
        if let Some(done) = state.done.take() {
            return done;
        }
        match state.inspector.take() {
            Some(inspector) => inspector.finish_partial(),
            None => Inspected::default(),
        }
    }

    /// Maps the requests found, when the body was read to its end (the replay path);
    /// nothing otherwise.
    pub(super) fn requests<T>(
        &self,
        f: impl Fn(&crate::classify::envelope::Request) -> T,
    ) -> Vec<T> {
        let state = self.lock();
        state
            .done
            .as_ref()
            .map(|done| done.requests.iter().map(f).collect())
            .unwrap_or_default()
    }

    /// True when the inspect cap stopped the inspector before the body's end.
    pub(super) fn was_cut(&self) -> bool {
        self.lock().cut
    }

    pub(super) fn sink(&self, cap: usize) -> InspectSink {
        InspectSink {
            shared: Some(self.clone()),
            cap,
        }
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
