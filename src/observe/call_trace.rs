//! What a call's trace needs beyond its record: the agent's connection and trace context, and
//! each upstream attempt's times and fate. Kept only while OpenTelemetry export is on
//! (`telemetry/`); a call without it costs nothing here.

use std::net::SocketAddr;

use http::Version;
use opentelemetry::trace::{SpanId, TraceId, TraceState};
use tokio::time::Instant;

use crate::http::fields::Headers;
use crate::http::names::Known;
use crate::metrics::{RetryReason, SuppressReason};
use crate::policy::Failure;

use super::telemetry::new_span_id;

/// The trace facts of one call (boxed in the call's state: one allocation a call, and none
/// while export is off).
#[derive(Clone, Debug)]
pub struct CallTrace {
    /// The agent's end of the connection.
    pub agent: SocketAddr,
    /// The HTTP version the agent spoke.
    pub agent_version: Version,
    /// The agent's `traceparent` and `tracestate` headers, as sent.
    pub traceparent: Option<Box<str>>,
    pub tracestate: Option<Box<str>>,
    /// Upstream attempts, in order; empty when none was made (an idempotency replay, a call
    /// refused before it was sent).
    pub attempts: Vec<AttemptTimes>,
    /// The answer came from an `Idempotency-Key`'s record: no upstream call was made.
    pub replayed: bool,
    /// The trace's ids, once decided: before the first attempt when strata propagates its
    /// CLIENT span to the server (`telemetry.propagate: header`), else when the call ends.
    pub ids: Option<TraceIds>,
}

/// A call's place in its trace.
#[derive(Clone, Debug)]
pub struct TraceIds {
    pub trace: TraceId,
    /// The SERVER span's own id.
    pub server: SpanId,
    /// The agent's span, when it sent one (`SpanId::INVALID` otherwise).
    pub parent: SpanId,
    pub state: TraceState,
    pub sampled: bool,
}

/// One upstream attempt.
#[derive(Clone, Debug)]
pub struct AttemptTimes {
    pub started: Instant,
    /// Its CLIENT span's id, when chosen as it went out (propagation).
    pub span: Option<SpanId>,
    /// Its response head (first byte) arrived.
    pub head: Option<Instant>,
    /// It ended (a failed attempt, once the policy spoke); `None` for the answer's attempt,
    /// which ends with the call.
    pub ended: Option<Instant>,
    /// The response's HTTP status, when one came.
    pub status: Option<u16>,
    /// How it failed, when it failed in a way the retry policy knows.
    pub failure: Option<Failure>,
    /// It was retried, for this reason.
    pub retried: Option<RetryReason>,
    /// A retry was not made, for this reason.
    pub suppressed: Option<SuppressReason>,
    /// A GET that resumed the call's stream (`Last-Event-ID`), not a POST of it.
    pub resumed: bool,
}

// === impl CallTrace ===

impl CallTrace {
    /// The trace facts of a request with these headers (the agent's connection is filled in
    /// by [`CallTrace::agent`]).
    pub(crate) fn headers(headers: Headers<'_>) -> CallTrace {
        CallTrace {
            agent: SocketAddr::from(([0, 0, 0, 0], 0)),
            agent_version: Version::HTTP_11,
            traceparent: headers.get_str(Known::Traceparent).map(Box::from),
            tracestate: headers.get_str(Known::Tracestate).map(Box::from),
            attempts: Vec::new(),
            replayed: false,
            ids: None,
        }
    }

    /// The agent's end of the connection, and the HTTP version it spoke.
    pub fn agent(&mut self, agent: SocketAddr, version: Version) {
        self.agent = agent;
        self.agent_version = version;
    }

    /// An attempt goes out now.
    pub fn attempt_started(&mut self, at: Instant) {
        self.attempts.push(AttemptTimes {
            span: None,
            started: at,
            head: None,
            ended: None,
            status: None,
            failure: None,
            retried: None,
            suppressed: None,
            resumed: false,
        });
    }

    /// The call's stream closed early and it waits for a resumption: its attempt ends now.
    pub fn parked(&mut self, at: Instant) {
        if let Some(last) = self.attempts.last_mut() {
            last.ended.get_or_insert(at);
        }
    }

    /// A GET resumes the call's stream, starting at `at`.
    pub fn resumed(&mut self, at: Instant) {
        self.attempt_started(at);
        if let Some(last) = self.attempts.last_mut() {
            last.resumed = true;
        }
    }

    /// The last attempt failed as `failure` and ends now; `retried` or `suppressed` say what
    /// the policy made of it.
    pub fn attempt_failed(
        &mut self,
        failure: Failure,
        retried: Option<RetryReason>,
        suppressed: Option<SuppressReason>,
    ) {
        let now = Instant::now();
        if let Some(last) = self.attempts.last_mut() {
            last.failure = Some(failure);
            if let Failure::Status(status) = failure {
                last.status = Some(status.as_u16());
                last.head.get_or_insert(now);
            }
            last.retried = retried;
            last.suppressed = suppressed;
            // The answer's attempt (given up on) ends with the call.
            if retried.is_some() {
                last.ended = Some(now);
            }
        }
    }

    /// This trace for another call of the same exchange (a batch): with ids decided already
    /// (propagation), the same trace — one request carries one `traceparent` — but spans of
    /// its own.
    pub fn for_another_call(&self) -> CallTrace {
        let mut other = self.clone();
        if let Some(ids) = &mut other.ids {
            ids.server = new_span_id();
            for attempt in &mut other.attempts {
                attempt.span = attempt.span.map(|_| new_span_id());
            }
        }
        other
    }

    /// The answer's response head arrived now, with `status`.
    pub fn response_head(&mut self, status: u16, at: Instant) {
        if let Some(last) = self.attempts.last_mut() {
            last.head.get_or_insert(at);
            last.status = Some(status);
        }
    }
}
