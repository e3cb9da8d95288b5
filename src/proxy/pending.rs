//! An exchange waiting for the upstream's answer: what it carries (a POST's requests, or
//! parked calls a resumed stream may settle), how many attempts it took, and the guarantee
//! that a dropped wait (the agent left) still gives every request its outcome.

use std::sync::Arc;

use tokio::time::Instant;

use crate::classify::exchange::Exchange;
use crate::metrics::{CallHandles, Limit, Metrics, RetryReason, SuppressReason};
use crate::observe::call_trace::CallTrace;
use crate::observe::telemetry::{Telemetry, new_span_id};
use crate::policy::Failure;
use crate::policy::limits::refusal::{Refusal, RefusalAnswer};
use crate::policy::limits::rules::Limiter;
use crate::policy::limits::{Admission, CallLimits};
use http::HeaderValue;

use super::Proxy;
use super::attempt::RetryPlan;
use crate::capture::Recorder;
use crate::observe::call_record::id_text;
use crate::observe::inspect::Inspection;
use crate::observe::recent::{InflightCall, InflightState, Watch};
use crate::observe::resume;
use crate::observe::session::Session;
use crate::observe::tracker::{CallMeta, CallTracker, Metas, SentAs};

/// An exchange waiting for the upstream's head. Dropped unconverted (the agent left): every
/// request it carried is CLIENT_CANCELLED.
pub(super) struct PendingCall<'a> {
    proxy: &'a Arc<Proxy>,
    inspection: Option<Inspection>,
    resumed: Vec<resume::Parked>,
    session: Option<Session>,
    protocol_version: Option<Arc<str>>,
    started: Instant,
    /// Upstream attempts so far, and the status of each failed one.
    attempts: u32,
    statuses: Vec<u16>,
    /// The agent re-sent the call (an idempotency-key repeat, or a repeat of a failure).
    client_retry: bool,
    /// The request's target and body (from the replay buffer), to remember a failure by.
    body: Option<SentAs>,
    /// What the call's trace needs (only while OpenTelemetry export is on).
    trace: Option<Box<CallTrace>>,
    /// The calls' places among those in flight, waiting for the head (inspector on).
    watch: Option<Watch>,
    /// The exchange being captured (`capture` on).
    capture: Option<Box<Recorder>>,
    /// The call's place under `limits.calls` and the circuit (limits on, one call).
    admission: Option<Box<Admission>>,
}

impl<'a> PendingCall<'a> {
    pub(super) fn new(
        proxy: &'a Arc<Proxy>,
        inspection: Option<Inspection>,
        resumed: Vec<resume::Parked>,
        session: Option<Session>,
        protocol_version: Option<Arc<str>>,
        started: Instant,
    ) -> Self {
        PendingCall {
            proxy,
            inspection,
            resumed,
            session,
            protocol_version,
            started,
            attempts: 1,
            statuses: Vec::new(),
            client_retry: false,
            body: None,
            trace: None,
            watch: None,
            capture: None,
            admission: None,
        }
    }
}

impl PendingCall<'_> {
    /// Once the first attempt's request has gone out: reads the body's requests (if that is
    /// still to do), decides what the retry policy says about the call (`retryable_body`: its
    /// body is in the replay buffer or was read as far as the cap), and notes whether the
    /// agent is re-sending a call that just failed (checked only for one request).
    pub(super) fn plan(&mut self, retryable_body: bool, has_key: bool) -> RetryPlan {
        self.read_inspection();
        self.watch_waiting();
        let plan = if retryable_body {
            self.retry_plan(has_key)
        } else {
            RetryPlan::default()
        };
        if plan.applies {
            self.proxy.policy.deposit(self.started);
        }
        let recent = &self.proxy.ctx().recent;
        // (Nothing failed lately, the usual case: the call's names are not even read.)
        if let Some(sent) = &self.body
            && !recent.none()
        {
            let session = self.session.as_ref().map(Session::as_str);
            let again = |method: &str, tool: &str| {
                recent.is_retry(session, method, tool, sent.target(), sent.body())
            };
            if self.single_call(again) == Some(true) {
                self.client_retry = true;
            }
        }
        plan
    }

    /// While the inspector is on, the calls read so far are in flight, waiting for the head
    /// (the tracker takes over from them when it comes).
    fn watch_waiting(&mut self) {
        let (Some(inspector), Some(inspection)) = (&self.proxy.ctx().inspector, &self.inspection)
        else {
            return;
        };
        let session = self.session.as_ref().map(Session::id);
        let client = session.and_then(|s| self.proxy.ctx().clients.get(s));
        let started = self.started;
        self.watch = Some(inspection.with_requests(|requests| {
            inspector.inflight().watch(requests.iter().map(|r| {
                let state = InflightState::Waiting;
                InflightCall::of(r, session, client.as_ref(), started, state)
            }))
        }));
    }

    /// Upstream attempts so far (1 until a retry).
    pub(super) fn attempts(&self) -> u32 {
        self.attempts
    }

    /// When the call started.
    pub(super) fn started(&self) -> Instant {
        self.started
    }

    /// An attempt failed with `status` and the call goes to the upstream again.
    pub(super) fn retried(&mut self, status: u16) {
        self.statuses.push(status);
        self.attempts += 1;
    }

    /// The agent re-sent the call (answered from an idempotency record).
    pub(super) fn mark_client_retry(&mut self) {
        self.client_retry = true;
        if let Some(trace) = &mut self.trace {
            trace.replayed = true;
        }
    }

    /// Keeps trace facts for this call (OpenTelemetry export is on).
    pub(super) fn trace_with(&mut self, trace: Box<CallTrace>) {
        self.trace = Some(trace);
    }

    /// An attempt goes out at `at`.
    pub(super) fn attempt_started(&mut self, at: Instant) {
        if let Some(trace) = &mut self.trace {
            trace.attempt_started(at);
        }
    }

    /// The `traceparent` the attempt going out carries (`telemetry.propagate: header`): the
    /// call's trace ids are decided at its first attempt — from the body's `params._meta`
    /// when it is read by then, else the agent's header — and each attempt names its own
    /// CLIENT span.
    pub(super) fn traceparent(&mut self) -> Option<HeaderValue> {
        let telemetry = self.proxy.ctx().telemetry.as_ref()?;
        if self.trace.as_ref()?.ids.is_none() {
            self.read_inspection();
            let meta = self.inspection.as_ref().and_then(|inspection| {
                inspection.with_requests(|requests| match requests {
                    [one] => one.context.clone(),
                    _ => None,
                })
            });
            let trace = self.trace.as_deref_mut()?;
            trace.ids = Some(telemetry.decide(Some(trace), meta.as_deref(), ""));
        }
        let trace = self.trace.as_deref_mut()?;
        let span = new_span_id();
        let attempt = trace.attempts.last_mut()?;
        attempt.span = Some(span);
        let ids = trace.ids.as_ref()?;
        HeaderValue::try_from(Telemetry::traceparent(ids, span)).ok()
    }

    /// The last attempt failed; the policy retried it or said why not.
    pub(super) fn attempt_failed(
        &mut self,
        failure: Failure,
        retried: Option<RetryReason>,
        suppressed: Option<SuppressReason>,
    ) {
        if let Some(trace) = &mut self.trace {
            trace.attempt_failed(failure, retried, suppressed);
        }
    }

    /// Captures the exchange into `recorder`.
    pub(super) fn capture_into(&mut self, recorder: Box<Recorder>) {
        self.capture = Some(recorder);
    }

    /// The recorder, when no tracker took it (the exchange carries no call).
    pub(super) fn take_capture(&mut self) -> Option<Box<Recorder>> {
        if let (Some(recorder), Some(inspection)) = (&mut self.capture, &mut self.inspection)
            && let Some(copy) = inspection.take_copy()
        {
            recorder.request_copy(copy);
        }
        self.capture.take()
    }

    /// The request's target and body, to remember a failure by.
    pub(super) fn remember(&mut self, sent: SentAs) {
        self.body = Some(sent);
    }

    /// Reads a body read whole for its calls, if that is still to do (`Inspection::read`).
    pub(super) fn read_inspection(&mut self) {
        if let Some(inspection) = &mut self.inspection {
            inspection.read();
        }
    }

    /// What the policy says about the call, from its (buffered, so fully inspected) body.
    /// `has_key`: the request carries an `Idempotency-Key`.
    fn retry_plan(&self, has_key: bool) -> RetryPlan {
        let Some(inspection) = &self.inspection else {
            return RetryPlan::default();
        };
        let policy = &self.proxy.policy;
        inspection.with_requests(|requests| RetryPlan {
            applies: !requests.is_empty(),
            idempotent: !requests.is_empty()
                && requests.iter().all(|r| {
                    policy
                        .verdict(&r.method.text_lossy(), &r.tool.text_lossy(), has_key)
                        .idempotent()
                }),
        })
    }

    /// Counts one retry (or suppression) for every request of the call.
    pub(super) fn count(&self, metrics: &Metrics, f: impl Fn(&CallHandles)) {
        if let Some(inspection) = &self.inspection {
            inspection.with_requests(|requests| {
                for r in requests {
                    metrics.with_call(&r.method.text_lossy(), &r.tool.text_lossy(), &f);
                }
            });
        }
    }

    /// `f` of the method and tool of the call, when the body carries exactly one request.
    pub(super) fn single_call<T>(&self, f: impl FnOnce(&str, &str) -> T) -> Option<T> {
        self.inspection
            .as_ref()?
            .with_requests(|requests| match requests {
                [r] => Some(f(&r.method.text_lossy(), &r.tool.text_lossy())),
                _ => None,
            })
    }

    /// The rule (if any) that limits this exchange's call, and whether it is a tools/call;
    /// `None` when the exchange is not one call with an id kept whole (a batch,
    /// notifications, a body past the replay buffer): those pass unlimited.
    pub(super) fn limited_by(&self, limits: &CallLimits) -> Option<(Option<Arc<Limiter>>, bool)> {
        let inspection = self.inspection.as_ref()?;
        inspection.with_requests(|requests| match requests {
            [r] if !r.id.truncated() => {
                let (method, tool) = (r.method.text_lossy(), r.tool.text_lossy());
                Some((limits.rule(&method, &tool), method == "tools/call"))
            }
            _ => None,
        })
    }

    /// The call passed the limits: it holds `admission` until its final answer.
    pub(super) fn admitted(&mut self, admission: Box<Admission>) {
        self.admission = Some(admission);
    }

    /// The call is answered without the upstream (an idempotency record, a conflict): its
    /// slot is freed, and a probe's pass goes to the next call.
    pub(super) fn release_limits(&mut self) {
        self.admission = None;
    }

    /// The answer to this exchange's one call, refused.
    pub(super) fn refusal_answer(&self, refusal: &Refusal, sse: bool) -> Option<RefusalAnswer> {
        let inspection = self.inspection.as_ref()?;
        inspection.with_requests(|requests| match requests {
            [r] => {
                let (method, tool) = (r.method.text_lossy(), r.tool.text_lossy());
                let subject = if tool.is_empty() { method } else { tool };
                Some(refusal.answer(&id_text(r), &subject, sse))
            }
            _ => None,
        })
    }

    /// An attempt ended: its failure, or the upstream's answer, goes to the circuit.
    pub(super) fn attempt_ended(
        &mut self,
        failure: Option<Failure>,
        status: Option<http::StatusCode>,
    ) {
        if let Some(admission) = &mut self.admission {
            let status = status.map(|s| s.as_u16());
            admission.attempt_ended(failure.and_then(Failure::circuit), status);
        }
    }

    /// Whether the limits let strata re-send the call (a token; the circuit closed).
    pub(super) fn may_retry(&self) -> bool {
        self.admission.as_ref().is_none_or(|a| a.may_retry())
    }

    /// The tracker for what this exchange carries, or `None` when it carries no call.
    pub(super) fn take_tracker(&mut self) -> Option<Box<CallTracker>> {
        // Borrowed until a tracker takes it: this runs again as `PendingCall` drops, after the
        // tracker was taken, and a clone for nothing is a reference count up and down.
        let ctx = self.proxy.ctx();
        if let Some(mut inspection) = self.inspection.take() {
            if let Some(recorder) = &mut self.capture
                && let Some(copy) = inspection.take_copy()
            {
                recorder.request_copy(copy);
            }
            // Not read yet only when the wait ended before the first attempt's first poll.
            inspection.read();
            if inspection.was_cut() {
                ctx.metrics.limit_hit(Limit::RequestInspectBytes);
            }
            let found = inspection.take();
            if found.overflow > 0 {
                ctx.metrics.limit_hit(Limit::BatchRequests);
            }
            if found.requests.is_empty() {
                return None;
            }
            let meta = Metas::repeat(
                CallMeta {
                    started: self.started,
                    statuses: std::mem::take(&mut self.statuses),
                    attempts: self.attempts,
                    client_retry: self.client_retry,
                    sse_events: 0,
                    trace: self.trace.take(),
                },
                found.requests.len(),
            );
            let exchange = Exchange::new(found.requests, found.batch);
            let mut tracker = Box::new(CallTracker::new(
                ctx.clone(),
                exchange,
                meta,
                self.session.clone(),
                self.protocol_version.take(),
            ));
            if let Some(sent) = self.body.take() {
                tracker.remember_body(sent);
            }
            // The tracker watches the calls now, and holds the call's slot.
            tracker.watch(self.watch.take());
            tracker.hold(self.admission.take());
            if let Some(recorder) = self.capture.take() {
                tracker.capture_into(recorder);
            }
            return Some(tracker);
        }
        if self.resumed.is_empty() {
            return None;
        }
        let parked = std::mem::take(&mut self.resumed);
        let protocol_version = parked.first().and_then(|p| p.protocol_version.clone());
        let started = self.started;
        let (requests, meta): (Vec<_>, Vec<_>) = parked
            .into_iter()
            .map(|mut p| {
                if let Some(trace) = &mut p.meta.trace {
                    trace.resumed(started);
                }
                (p.request, p.meta)
            })
            .unzip();
        let mut tracker = Box::new(CallTracker::new(
            ctx.clone(),
            Exchange::new(requests, false),
            meta.into_iter().collect(),
            self.session.clone(),
            protocol_version,
        ));
        tracker.watch(None);
        if let Some(recorder) = self.capture.take() {
            tracker.capture_into(recorder);
        }
        Some(tracker)
    }
}

impl Drop for PendingCall<'_> {
    fn drop(&mut self) {
        // Converting and dropping the tracker records CLIENT_CANCELLED for each request.
        drop(self.take_tracker());
    }
}
