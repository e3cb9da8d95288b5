//! The attempts phase: the request goes to the upstream, and again while the retry policy
//! says so (`policy/`): only a call whose every request is idempotent, whose body is in the
//! replay buffer, and before a byte of an answer reached the agent.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response};
use tokio::time::Instant;

use super::attempt::{BodyKind, RetryPlan, Template, attempt_failure};
use super::h1_conns::SendError;
use super::head_timer::HeadTimedOut;
use super::in_flight::Sending;
use super::pending::PendingCall;
use super::request_body::RequestBody;
use super::strata_error::StrataError;
use super::{FromUpstream, H1Answer, Proxy};
use crate::http::fields::{HeadFields, Headers};
use crate::http::forward::Hop;
use crate::http::names::{Known, TRACEPARENT};
use crate::metrics::SuppressReason;
use crate::policy::{Attempt, Next};
use crate::proxy::head_timer::HeadTimer;

/// The request as the first attempt sends it, and what a retry needs.
pub(super) struct Outgoing {
    /// The first attempt's request (taken as it goes out).
    pub first: Option<Request<RequestBody>>,
    /// The agent's fields as read, when the head has no map (`journey.rs`, prepare).
    pub fields: Option<HeadFields>,
    /// The body, whole, in the replay buffer.
    pub replay: Option<Bytes>,
    pub kind: BodyKind,
    /// strata's own agent connection read the body whole before the call started.
    pub read_whole: bool,
    pub has_key: bool,
}

/// The last attempt's result, and the answer's fields when kept as read.
type Sent = (
    Result<Response<FromUpstream>, StrataError>,
    Option<HeadFields>,
);

/// After an attempt: another after a wait, or the answer.
#[allow(
    clippy::large_enum_variant,
    reason = "moved once per attempt, never stored: a box would be an allocation per call"
)]
enum Step {
    /// The wait, and the body of the answer passed over (a 503's, say).
    Retry(Duration, Option<FromUpstream>),
    Answer(Sent),
}

impl Proxy {
    /// Sends the request, and again while the policy says so. Each attempt's wait for its
    /// response head is bounded by `timeouts.response_head`.
    // Not `async fn`, and `outgoing` read field by field: an `async fn` keeps room for its
    // arguments and for the locals they are moved into, and this future is most of
    // `handle`'s, which is allocated and moved once per call.
    #[allow(clippy::manual_async_fn)]
    pub(super) fn attempts<'a, 'p: 'a>(
        &'a self,
        call: &'a mut PendingCall<'p>,
        mut outgoing: Outgoing,
        hop: &'a Hop<'a>,
        mut head_timer: HeadTimer<'a>,
    ) -> impl Future<Output = Sent> + Send + 'a {
        async move {
            // A retry can only happen for an idempotent call whose body is in the replay buffer,
            // which strata's own connection takes. It gives the head back once written; the
            // template for re-sending is made of it, moved, and only for a call the policy may
            // retry (it has said once the first attempt went out).
            let retries = outgoing.replay.is_some() && self.policy.retries_enabled();
            let mut template: Option<Template> = None;
            let mut plan = None;
            loop {
                let request = match (outgoing.first.take(), &template) {
                    (Some(request), _) => request,
                    (None, Some(template)) => {
                        template.request(RequestBody::Replay(outgoing.replay.clone()))
                    }
                    (None, None) => return (Err(StrataError::UpstreamBroken), None),
                };
                // This attempt's answer only (one that fails before a head leaves none).
                let mut upstream_fields = None;
                // A body read whole goes out as the call starts: its first attempt counts from
                // the call's start (a clock read fewer per call).
                let now = match call.attempts() == 1 && outgoing.read_whole {
                    true => call.started(),
                    false => Instant::now(),
                };
                call.attempt_started(now);
                let request = self.propagated(call, request);
                let (sent, decided) = {
                    let (sending, given_back) = self.send(
                        request,
                        outgoing.fields.as_ref(),
                        hop,
                        &mut upstream_fields,
                        now,
                    );
                    let mut sending =
                        pin!(head_timer.within(now + self.response_head_timeout, sending));
                    match plan {
                        Some(plan) => (sending.await, plan),
                        None => {
                            // The first attempt: its request goes out (the first poll writes it to a
                            // pooled connection) before the body is read for its calls, which then
                            // happens while the upstream works on the call — not in front of it.
                            // A body read ahead only for the limits (retries off, no key)
                            // is not the retry policy's.
                            let retryable =
                                matches!(outgoing.kind, BodyKind::Whole | BodyKind::Over)
                                    && (self.policy.retries_enabled() || outgoing.has_key);
                            let has_key = outgoing.has_key;
                            let mut decided = None;
                            let sent = poll_fn(|cx| {
                                let polled = sending.as_mut().poll(cx);
                                if decided.is_none() {
                                    decided = Some(call.plan(retryable, has_key));
                                }
                                polled
                            })
                            .await;
                            let decided = decided.unwrap_or_default();
                            if !(decided.applies && decided.idempotent) {
                                template = None;
                            } else if retries && let Some(parts) = given_back {
                                template.get_or_insert_with(|| Template::from_parts(parts));
                            }
                            (sent, decided)
                        }
                    }
                };
                plan = Some(decided);
                let replayable = outgoing.replay.is_some();
                match self.next_step(call, sent, decided, replayable, upstream_fields) {
                    // Boxed: a rare path, kept out of the future every call moves.
                    Step::Retry(wait, passed_over) => Box::pin(wait_out(wait, passed_over)).await,
                    Step::Answer(sent) => return sent,
                }
            }
        }
    }

    /// What the policy says after an attempt: the wait before the next one (the retry
    /// counted), or the result to answer with.
    fn next_step(
        &self,
        call: &mut PendingCall<'_>,
        sent: Result<Result<Response<FromUpstream>, SendError>, HeadTimedOut>,
        decided: RetryPlan,
        replayable: bool,
        upstream_fields: Option<HeadFields>,
    ) -> Step {
        let (failure, outcome) = attempt_failure(sent, &self.ctx().metrics);
        call.attempt_ended(failure, outcome.as_ref().ok().map(Response::status));
        let Some(failure) = failure.filter(|_| decided.applies) else {
            if let Some(failure) = failure {
                call.attempt_failed(failure, None, None);
            }
            return Step::Answer((outcome, upstream_fields));
        };
        let attempt = Attempt {
            made: call.attempts(),
            idempotent: decided.idempotent,
            replayable,
            elapsed: call.started().elapsed(),
            retry_after: retry_after(&outcome, upstream_fields.as_ref()),
        };
        match self.policy.next(failure, &attempt) {
            Next::Retry { .. } if !call.may_retry() => {
                call.attempt_failed(failure, None, Some(SuppressReason::Limited));
                call.count(&self.ctx().metrics, |h| {
                    h.suppressed(SuppressReason::Limited)
                });
                Step::Answer((outcome, upstream_fields))
            }
            Next::Retry { wait, reason } => {
                call.count(&self.ctx().metrics, |h| h.retry(reason));
                call.attempt_failed(failure, Some(reason), None);
                call.retried(failure.status());
                Step::Retry(wait, outcome.ok().map(Response::into_body))
            }
            Next::GiveUp(why) => {
                call.attempt_failed(failure, None, why);
                if let Some(why) = why {
                    call.count(&self.ctx().metrics, |h| h.suppressed(why));
                }
                Step::Answer((outcome, upstream_fields))
            }
        }
    }

    /// The request with the `traceparent` of its attempt, when strata propagates its spans
    /// (`telemetry.propagate: header`; the agent's own header is replaced).
    fn propagated(
        &self,
        call: &mut PendingCall<'_>,
        mut request: Request<RequestBody>,
    ) -> Request<RequestBody> {
        if self.propagate
            && let Some(traceparent) = call.traceparent()
        {
            request.headers_mut().insert(TRACEPARENT, traceparent);
        }
        request
    }

    /// One attempt: the request out, the response head back.
    ///
    /// `fields`: the agent's fields as read, when `request` has no map (only for a body known
    /// whole, which is what takes them here); the answer's fields
    /// are then kept as read too, into `answer_fields`. `now`: the attempt's start.
    fn send<'a>(
        &'a self,
        mut request: Request<RequestBody>,
        fields: Option<&'a HeadFields>,
        hop: &'a Hop<'a>,
        answer_fields: &'a mut Option<HeadFields>,
        now: Instant,
    ) -> (
        Sending<'a, impl Future<Output = Result<H1Answer, SendError>> + Send + 'a>,
        Option<Parts>,
    ) {
        // strata's own connections take a body known whole (the replay buffer's, or none).
        if let Some(body) = request.body_mut().take_whole() {
            // The head is written before the future is made: its parts come back, unchanged,
            // for a retry's template.
            let (parts, _taken) = request.into_parts();
            let sending = Sending::Own {
                sending: self.h1.send(&parts, fields, body, hop, now),
                answer_fields,
            };
            return (sending, Some(parts));
        }
        hop.apply(request.headers_mut());
        let sending = Sending::Pooled {
            sending: self.client.request(request),
        };
        (sending, None)
    }
}

/// The wait before the next attempt. The body of the answer passed over is read meanwhile,
/// so that its connection serves the retry ([`FromUpstream::drain`]). A zero wait
/// (`Retry-After: 0`) re-sends at once — a timer would round its deadline up to the next
/// millisecond tick — with only what of the body has arrived read past.
async fn wait_out(wait: Duration, passed_over: Option<FromUpstream>) {
    if wait.is_zero() {
        if let Some(body) = passed_over {
            body.discard();
        }
        return;
    }
    let deadline = Instant::now() + wait;
    if let Some(body) = passed_over {
        let _ = tokio::time::timeout_at(deadline, body.drain()).await;
    }
    tokio::time::sleep_until(deadline).await;
}

/// The upstream's `Retry-After`, from a failed attempt's answer.
fn retry_after<'a>(
    outcome: &'a Result<Response<FromUpstream>, StrataError>,
    fields: Option<&'a HeadFields>,
) -> Option<&'a [u8]> {
    let response = outcome.as_ref().ok()?;
    let headers = match fields {
        Some(fields) => Headers::Own(fields),
        None => Headers::Map(response.headers()),
    };
    headers.get(Known::RetryAfter)
}
