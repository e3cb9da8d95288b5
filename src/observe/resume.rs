//! Calls whose resumable SSE stream closed before the response (2025-03-26 … 2025-11-25
//! transports §Resumability and Redelivery): they wait, for a bounded window, for the agent
//! to resume the stream with `GET` + `Last-Event-ID` on the same session. A response for them
//! on the resumed stream settles them; otherwise they are STREAM_INCOMPLETE when the window
//! ends. 2026-07-28 removed resumption, and a call without a session is never parked.
//!
//! Limits: at most [`MAX_PARKED`] calls wait at once; past that a call is STREAM_INCOMPLETE
//! at once and `strata_limit_hits_total{limit="pending_calls"}` counts it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use crate::classify::Outcome;
use crate::classify::envelope::Request;
use crate::classify::exchange::Verdict;
use crate::metrics::{GaugeGuard, Limit};

use super::session::Session;
use super::tracker::{CallContext, CallMeta, Facts, record_call};

/// Most calls parked at once, across sessions.
pub(crate) const MAX_PARKED: usize = 10_000;

/// A call waiting for its stream to resume.
pub struct Parked {
    pub request: Request,
    pub meta: CallMeta,
    pub session: Session,
    /// The last event id its stream carried: a resumption names it in `Last-Event-ID`.
    pub last_event_id: Box<[u8]>,
    pub protocol_version: Option<Arc<str>>,
    pub content_type: Option<std::borrow::Cow<'static, str>>,
    pub _pending: GaugeGuard,
    /// Its place among the calls in flight, as parked (only while the inspector is on).
    pub _watch: Option<super::recent::Watch>,
}

struct Entry {
    ticket: u64,
    parked: Parked,
}

/// The parked calls, by session.
pub struct ResumeRegistry {
    window: Duration,
    inner: Mutex<Inner>,
    me: Weak<ResumeRegistry>,
}

#[derive(Default)]
struct Inner {
    next_ticket: u64,
    count: usize,
    by_session: HashMap<Arc<str>, Vec<Entry>>,
}

// === impl ResumeRegistry ===

impl ResumeRegistry {
    pub fn new(window: Duration) -> Arc<Self> {
        Arc::new_cyclic(|me| ResumeRegistry {
            window,
            inner: Mutex::new(Inner::default()),
            me: me.clone(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Parks a call until a resumed stream settles it or the window ends. Gives the call back
    /// when it cannot wait (no window, or the registry is full).
    pub fn park(&self, ctx: &Arc<CallContext>, parked: Parked) -> Option<Parked> {
        if self.window.is_zero() {
            return Some(parked);
        }
        let ticket = {
            let mut inner = self.lock();
            if inner.count >= MAX_PARKED {
                drop(inner);
                ctx.metrics.limit_hit(Limit::PendingCalls);
                return Some(parked);
            }
            inner.next_ticket += 1;
            let ticket = inner.next_ticket;
            inner.count += 1;
            let session = parked.session.id().clone();
            inner
                .by_session
                .entry(session.clone())
                .or_default()
                .push(Entry { ticket, parked });
            ticket
        };
        let (me, ctx, window) = (self.me.clone(), ctx.clone(), self.window);
        tokio::spawn(async move {
            tokio::time::sleep(window).await;
            if let Some(registry) = me.upgrade()
                && let Some(parked) = registry.take_ticket(ticket)
            {
                settle(&ctx, parked, Verdict::of(Outcome::StreamIncomplete));
            }
        });
        None
    }

    /// The calls a resumed stream of `session` may answer: those whose stream ended at
    /// `last_event_id`, or — when none matches (servers may number events per session) —
    /// every call parked on the session.
    pub fn take_for_resume(&self, session: &str, last_event_id: &[u8]) -> Vec<Parked> {
        let mut inner = self.lock();
        let Some(entries) = inner.by_session.get_mut(session) else {
            return Vec::new();
        };
        let exact = entries
            .iter()
            .any(|e| &*e.parked.last_event_id == last_event_id);
        let (taken, kept): (Vec<Entry>, Vec<Entry>) = std::mem::take(entries)
            .into_iter()
            .partition(|e| !exact || &*e.parked.last_event_id == last_event_id);
        *entries = kept;
        if entries.is_empty() {
            inner.by_session.remove(session);
        }
        inner.count -= taken.len();
        taken.into_iter().map(|e| e.parked).collect()
    }

    fn take_ticket(&self, ticket: u64) -> Option<Parked> {
        let mut inner = self.lock();
        let (session, at) = inner.by_session.iter().find_map(|(s, entries)| {
            entries
                .iter()
                .position(|e| e.ticket == ticket)
                .map(|at| (s.clone(), at))
        })?;
        let entries = inner.by_session.get_mut(&session)?;
        let entry = entries.swap_remove(at);
        if entries.is_empty() {
            inner.by_session.remove(&session);
        }
        inner.count -= 1;
        Some(entry.parked)
    }

    /// Calls parked now (for tests and the gauge's cross-check).
    pub fn len(&self) -> usize {
        self.lock().count
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Records a parked call's final verdict.
pub(crate) fn settle(ctx: &CallContext, mut parked: Parked, verdict: Verdict) {
    let client = ctx.clients.get(parked.session.as_str());
    let facts = Facts {
        session: Some(parked.session.hash()),
        client: client.as_deref(),
        protocol_version: parked.protocol_version.as_deref(),
        content_type: parked.content_type.as_deref(),
        statuses: std::borrow::Cow::Borrowed(&parked.meta.statuses),
        sse_events: parked.meta.sse_events,
        attempts: parked.meta.attempts,
        client_retry: parked.meta.client_retry,
        trace: parked.meta.trace.take(),
        refused_by: None,
    };
    record_call(ctx, &parked.request, &verdict, parked.meta.started, facts);
}
