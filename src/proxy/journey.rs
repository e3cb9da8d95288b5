//! One call's journey through strata, in named phases: **admit** (what is known of the
//! request before its body: Host and Origin checks, session, resumed calls) → **read** (a
//! POST's body into the replay buffer, or streamed past the request inspector) → **prepare**
//! (the head as it goes upstream: hop rules, Host, target) → **limit** (`limited.rs`: call
//! limits and the circuit, when set) → **claim** (an
//! `Idempotency-Key`'s record) → **attempts** (`attempts.rs`: the request out, the retry
//! loop) → **answer** (the upstream's response on its way to the agent, observed by the
//! call tracker). A call that ends early is answered by strata (`strata_error.rs`).
//!
//! The call's state lives in [`PendingCall`]: until the upstream answers, dropping it (the
//! agent left) still gives every request its outcome.

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use http::request::Parts;
use http::uri::PathAndQuery;
use http::{Method, Request, Response, Version};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::attempt::{BodyKind, add_attempts};
use super::attempts::Outgoing;
use super::idempotency_key::{KeyClaim, replay_record};
use super::pending::PendingCall;
use super::request_body::{self, Buffered, Observed, ReadError, RequestBody};
use super::sse_keepalive;
use super::strata_error::{self, StrataError};
use super::{AgentBody, AnswerFields, FromAgent, Proxy, RepeatedFields, keepalive_applies};
use crate::capture::Recorder;
use crate::http::fields::{HeadFields, Headers};
use crate::http::forward::{self, Hop, Peer};
use crate::http::names::Known;
use crate::idempotency::{Recording, Ticket, recordable_status};
use crate::metrics::{HttpMethod, Limit};
use crate::observe::call_trace::CallTrace;
use crate::observe::inspect::{InspectSink, Inspection};
use crate::observe::resume::Parked;
use crate::observe::session::Session;
use crate::observe::tracker::{CallTracker, SentAs};
use crate::proxy::body::{ObservedBody, ProxyBody, UpstreamBody};
use crate::proxy::head_timer::HeadTimer;

/// strata's answer to one agent request: the response, and the upstream's header fields
/// when they were kept as read (the response then has no header map, and strata's own agent
/// connection writes them: `agent_h1/response.rs`).
pub(crate) struct Answer {
    pub response: Response<AgentBody>,
    pub fields: Option<AnswerFields>,
}

/// What the admit phase learnt of a request.
struct Admitted {
    session: Option<Session>,
    protocol_version: Option<Arc<str>>,
    has_key: bool,
    /// The session a DELETE ends.
    ended_session: Option<Arc<str>>,
    /// Calls parked for a resumed stream that this GET may answer.
    resumed: Vec<Parked>,
    /// The trace context headers, kept while OpenTelemetry export is on.
    trace: Option<Box<CallTrace>>,
}

/// The request body as the read phase left it.
struct ReadBody {
    body: RequestBody,
    inspection: Option<Inspection>,
    /// The body, whole, in the replay buffer.
    replay: Option<Bytes>,
    kind: BodyKind,
    /// A streamed POST body, handed back if the upstream client drops it unsent.
    unsent: Option<oneshot::Receiver<Observed>>,
}

/// An `Idempotency-Key`'s first call: the ticket its answer is recorded under.
type Claimed = Option<(Ticket, Vec<String>)>;

impl Answer {
    /// strata's own answer, with no fields as read.
    fn own(response: Response<AgentBody>) -> Answer {
        Answer {
            response,
            fields: None,
        }
    }
}

impl Proxy {
    /// Serves one agent request.
    ///
    /// `fields`: the agent's header fields as strata's own connection read them, for a request
    /// its [`ReadPlan`](super::ReadPlan) reads so (`req` then has no header map); `None` when
    /// they are in `req`'s map. `head_timer` bounds each attempt's wait for the response
    /// head; the agent connection lends its own (`head_timer.rs`), and the MCP fields its
    /// last call carried (`repeated_fields.rs`).
    // Not `async fn`: an `async fn` moves each argument from its captured slot into a local
    // of its own as it starts, and the future keeps room for both; the block uses them
    // where they were captured.
    #[allow(clippy::manual_async_fn)]
    pub(crate) fn handle<'a>(
        self: &'a Arc<Self>,
        req: Request<FromAgent>,
        mut fields: Option<HeadFields>,
        // Borrowed: the agent connection's own, not a clone per call.
        peer: &'a Peer,
        head_timer: HeadTimer<'a>,
        repeated: &'a mut RepeatedFields,
    ) -> impl Future<Output = Answer> + Send + 'a {
        async move {
            let started = Instant::now();
            let (mut parts, body) = req.into_parts();
            let admitted = match self.admit(&parts, fields.as_ref(), repeated) {
                Ok(admitted) => admitted,
                Err(why) => return Answer::own(strata_error::response(why)),
            };
            let read_whole = matches!(body, FromAgent::Whole(_));
            let mut capture = self.begin_capture(&parts, fields.as_ref());
            let copy = capture.as_ref().map(|_| self.capture_max_body());
            let read = match self
                .read_body(&parts.method, body, admitted.has_key, peer, copy)
                .await
            {
                Ok(read) => read,
                Err(why) => return Answer::own(strata_error::response(why)),
            };
            if let (Some(recorder), Some(body)) = (&mut capture, &read.replay) {
                recorder.request_body(body);
            }
            if let Err(why) = self.prepare(&mut parts, &mut fields, read.kind) {
                return Answer::own(strata_error::response(why));
            }
            let hop = Hop::new(parts.version, peer);
            let agent_version = parts.version;
            // The upstream is spoken to in HTTP/1.1, whatever the agent's version.
            parts.version = Version::HTTP_11;
            let mut call = PendingCall::new(
                self,
                read.inspection,
                admitted.resumed,
                admitted.session,
                admitted.protocol_version,
                started,
            );
            if let Some(mut trace) = admitted.trace {
                trace.agent(peer.addr, agent_version);
                call.trace_with(trace);
            }
            if let Some(recorder) = capture {
                call.capture_into(recorder);
            }
            // Not boxed: a limiter boxes only a call's wait (`Limiter::admit`).
            if let Some(limits) = &self.limits
                && let Err(refused) = self
                    .limit(limits, &mut call, head(&parts, fields.as_ref()))
                    .await
            {
                return Answer::own(refused);
            }
            let claimed = match self
                .claim(&parts, fields.as_ref(), read.replay.as_ref(), &mut call)
                .await
            {
                Ok(claimed) => claimed,
                Err(answered) => return Answer::own(answered),
            };
            if let Some(body) = &read.replay {
                let target = parts.uri.path_and_query().map_or("/", PathAndQuery::as_str);
                call.remember(SentAs::new(target, body));
            }
            let outgoing = Outgoing {
                first: Some(Request::from_parts(parts, read.body)),
                fields,
                replay: read.replay,
                kind: read.kind,
                read_whole,
                has_key: admitted.has_key,
            };
            let (sent, upstream_fields) =
                self.attempts(&mut call, outgoing, &hop, head_timer).await;
            let response = match sent {
                Ok(response) => response,
                Err(why) => return Answer::own(self.failed(call, why, read.unsent).await),
            };
            self.answer(
                call,
                response,
                upstream_fields,
                claimed,
                admitted.ended_session,
                agent_version,
            )
        }
    }

    /// Admit: what is known of the request before a byte of its body is read. Refuses one
    /// that must not reach the upstream: `Host` twice (RFC 9112 §3.2), or a browser page
    /// from an origin not allowed (DNS rebinding; 2025-11-25 transports §Security Warning).
    fn admit(
        &self,
        parts: &Parts,
        fields: Option<&HeadFields>,
        repeated: &mut RepeatedFields,
    ) -> Result<Admitted, StrataError> {
        let metrics = &self.ctx().metrics;
        metrics.http_request(HttpMethod::from_http(&parts.method));
        let headers = head(parts, fields);
        if headers.repeats(Known::Host) {
            tracing::debug!("request refused: Host appears more than once");
            return Err(StrataError::BadRequestHead);
        }
        if !self.origin_allowed(headers) {
            metrics.limit_hit(Limit::Origin);
            tracing::debug!("request refused: its Origin is not in `origins`");
            return Err(StrataError::OriginForbidden);
        }
        let session = headers
            .get(Known::McpSessionId)
            .and_then(|id| repeated.session(id));
        // A GET with `Last-Event-ID` on a session resumes a stream: the calls parked for it.
        let resumed = match (parts.method == Method::GET, &session) {
            (true, Some(session)) => headers
                .get(Known::LastEventId)
                .map(|last| self.ctx().resume.take_for_resume(session.as_str(), last))
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        Ok(Admitted {
            ended_session: (parts.method == Method::DELETE)
                .then(|| session.as_ref().map(|s| s.id().clone()))
                .flatten(),
            protocol_version: headers
                .get(Known::McpProtocolVersion)
                .and_then(|version| repeated.protocol_version(version)),
            has_key: headers.contains(Known::IdempotencyKey),
            trace: self
                .ctx()
                .telemetry
                .as_ref()
                .map(|_| Box::new(CallTrace::headers(headers))),
            session,
            resumed,
        })
    }

    /// Read: a POST's body goes into the replay buffer when it may be re-sent (retries on,
    /// or an `Idempotency-Key`) or call limits read it (`limits.calls`, `circuit`) — up to
    /// the buffer's cap, the rest streamed after it — or
    /// streams past the request inspector. Any other method's body streams uninspected.
    async fn read_body(
        &self,
        method: &Method,
        body: FromAgent,
        has_key: bool,
        agent: &Peer,
        copy: Option<usize>,
    ) -> Result<ReadBody, StrataError> {
        if *method != Method::POST {
            let (body, _) = RequestBody::stream(ObservedBody::new(body, InspectSink::inert()));
            return Ok(ReadBody::streamed(body, None, None));
        }
        // Limits read the body before the first attempt, as retries do.
        if !(self.policy.retries_enabled() || has_key || self.limits.is_some()) {
            let (mut inspection, sink) = Inspection::streaming(self.inspect_cap);
            if let Some(max) = copy {
                inspection.copy_body(max);
            }
            let (body, back) = RequestBody::stream(ObservedBody::new(body, sink));
            return Ok(ReadBody::streamed(body, Some(inspection), Some(back)));
        }
        let cap = self.policy.replay_cap();
        // A body strata's own connection read is whole already; hyper's has frames to wait
        // for, boxed: that wait's room would be in every call's future. Taken, not cloned.
        let read = match body {
            FromAgent::Whole(whole) if whole.as_ref().is_none_or(|w| w.len() <= cap) => {
                Ok(Buffered::Whole(whole.unwrap_or_default()))
            }
            body => Box::pin(request_body::read_up_to(body, cap, self.request_body_idle)).await,
        };
        match read {
            Ok(Buffered::Whole(bytes)) => Ok(ReadBody {
                inspection: Some(Inspection::unread(bytes.clone(), self.inspect_cap)),
                replay: Some(bytes.clone()),
                body: RequestBody::Replay(Some(bytes)),
                kind: BodyKind::Whole,
                unsent: None,
            }),
            Ok(Buffered::Over { prefix, rest }) => {
                self.ctx().metrics.limit_hit(Limit::ReplayBuffer);
                let (mut inspection, sink) = Inspection::streaming(self.inspect_cap);
                if let Some(max) = copy {
                    inspection.copy_body(max);
                }
                Ok(ReadBody {
                    body: RequestBody::prefixed(prefix, rest, sink),
                    inspection: Some(inspection),
                    replay: None,
                    kind: BodyKind::Over,
                    unsent: None,
                })
            }
            // The agent's body broke: nothing can be forwarded.
            Err(ReadError::Broken) => Err(StrataError::BadRequestBody),
            Err(ReadError::Idle) => {
                self.ctx().metrics.limit_hit(Limit::RequestBodyTimeout);
                let agent = agent.addr;
                tracing::info!(%agent, "request body paused past timeouts.request_body_idle; 408");
                Err(StrataError::RequestBodyTimeout)
            }
        }
    }

    /// Prepare: the head as it goes upstream. Fields as read go out only through strata's own
    /// upstream connection, which takes a body known whole; anything else takes a map, with
    /// the hop rules applied (`http/forward.rs`). The target becomes the upstream's absolute
    /// URI for hyper's client; strata's own connection writes the origin form fields as read
    /// already have.
    fn prepare(
        &self,
        parts: &mut Parts,
        fields: &mut Option<HeadFields>,
        kind: BodyKind,
    ) -> Result<(), StrataError> {
        if kind != BodyKind::Whole
            && let Some(own) = fields.take()
        {
            parts.headers = own.to_map().ok_or(StrataError::BadRequestBody)?;
        }
        if let Some(fields) = fields {
            // Rewritten as they are written out (`h1_conns/wire.rs`).
            fields.set_host(self.rewrite_host, self.authority.as_str());
            return Ok(());
        }
        let uri = self
            .upstream_uri(parts.uri.path_and_query())
            .map_err(|_| StrataError::BadRequestTarget)?;
        // From the agent's target (an h2 agent's `:authority` when it sent no `Host`).
        forward::set_host(
            &mut parts.headers,
            &parts.uri,
            &self.authority,
            self.rewrite_host,
        );
        forward::apply_hop_rules(&mut parts.headers).map_err(|_| StrataError::BadRequestHead)?;
        parts.uri = uri;
        Ok(())
    }

    /// Claim: a call with an `Idempotency-Key` (and its body in the replay buffer) claims
    /// the key; a repeat is answered from the record, a conflict refused (409, 422).
    async fn claim(
        &self,
        parts: &Parts,
        fields: Option<&HeadFields>,
        replay: Option<&Bytes>,
        call: &mut PendingCall<'_>,
    ) -> Result<Claimed, Response<AgentBody>> {
        let headers = head(parts, fields);
        let (Some(body), Some(value)) = (replay, headers.get(Known::IdempotencyKey)) else {
            return Ok(None);
        };
        call.read_inspection();
        // Boxed: only calls with a key take this path, and its future would be a third of
        // every call's.
        match Box::pin(self.claim_key(parts, headers, value, body)).await {
            KeyClaim::None => Ok(None),
            KeyClaim::Fresh(ticket, ids) => Ok(Some((ticket, ids))),
            KeyClaim::Replay(record, ids) => {
                // Answered without the upstream: nothing for the circuit to learn.
                call.release_limits();
                call.mark_client_retry();
                Err(replay_record(call.take_tracker(), &record, &ids))
            }
            KeyClaim::Refuse(why) => {
                call.release_limits();
                if let Some(mut tracker) = call.take_tracker() {
                    tracker.no_response(why.status().as_u16());
                }
                Err(strata_error::response(why))
            }
        }
    }

    /// No answer from the upstream: strata's own, after the call's requests get their
    /// outcome (a streamed body never sent is read here for them).
    async fn failed(
        &self,
        mut call: PendingCall<'_>,
        why: StrataError,
        unsent: Option<oneshot::Receiver<Observed>>,
    ) -> Response<AgentBody> {
        if let Some(body) = unsent.and_then(|mut back| back.try_recv().ok()) {
            // Boxed: a rare path, whose room would be in every call's future.
            Box::pin(request_body::read_unsent(body, self.inspect_cap)).await;
        }
        if let Some(mut tracker) = call.take_tracker() {
            tracker.no_response(why.status().as_u16());
        } else if let Some(mut recorder) = call.take_capture()
            && let Some(capture) = &self.ctx().capture
        {
            recorder.response_head(why.status().as_u16(), None, None);
            capture.submit(recorder.finish(crate::capture::End::Complete));
        }
        let mut response = strata_error::response(why);
        add_attempts(response.headers_mut(), call.attempts());
        response
    }
}

/// The request's header fields: strata's own parse of the head when its connection read it,
/// else hyper's map.
fn head<'h>(parts: &'h Parts, fields: Option<&'h HeadFields>) -> Headers<'h> {
    match fields {
        Some(fields) => Headers::Own(fields),
        None => Headers::Map(&parts.headers),
    }
}

/// Whether an `Accept` value names `text/event-stream` and neither JSON nor a wildcard (read
/// for a refused call, which is answered in the form its agent asked for).
pub(super) fn accepts_only_sse(accept: Option<&[u8]>) -> bool {
    let Some(accept) = accept else {
        return false;
    };
    let mut sse = false;
    for item in accept.split(|&b| b == b',') {
        let media = item.split(|&b| b == b';').next().unwrap_or_default();
        let media = media.trim_ascii();
        if media.eq_ignore_ascii_case(b"application/json")
            || media == b"*/*"
            || media == b"application/*"
        {
            return false;
        }
        sse |= media.eq_ignore_ascii_case(b"text/event-stream");
    }
    sse
}

impl ReadBody {
    fn streamed(
        body: RequestBody,
        inspection: Option<Inspection>,
        unsent: Option<oneshot::Receiver<Observed>>,
    ) -> ReadBody {
        ReadBody {
            body,
            inspection,
            replay: None,
            kind: BodyKind::Other,
            unsent,
        }
    }
}

// === the answer phase ===

impl Proxy {
    /// Answer: the upstream's response on its way to the agent — the hop rules on its head
    /// (or its fields kept as read), this hop's `Via` and `strata-attempts`, and its body
    /// observed by the call tracker (and recorded for an `Idempotency-Key`).
    fn answer(
        &self,
        mut call: PendingCall<'_>,
        response: Response<super::FromUpstream>,
        upstream_fields: Option<HeadFields>,
        claimed: Claimed,
        ending: Option<Arc<str>>,
        agent_version: Version,
    ) -> Answer {
        let (mut parts, body) = response.into_parts();
        // This hop's `Via` names the version the upstream answered in.
        let via = forward::via(parts.version);
        if upstream_fields.is_none() {
            // Conflicting lengths (hyper's client and strata's own refuse them first).
            if forward::apply_hop_rules(&mut parts.headers).is_err() {
                return Answer::own(self.broken_answer(&mut call));
            }
            if agent_version == Version::HTTP_2 {
                forward::own_values(&mut parts.headers);
            }
            forward::add_via(&mut parts.headers, parts.version);
            add_attempts(&mut parts.headers, call.attempts());
        }
        parts.version = Version::HTTP_11;
        let headers = match &upstream_fields {
            Some(fields) => Headers::Own(fields),
            None => Headers::Map(&parts.headers),
        };
        let body = UpstreamBody::new(
            body,
            self.body_idle,
            self.ctx().metrics.response_bytes_here(),
        );
        let body = match call.take_tracker() {
            Some(mut tracker) => {
                tracker.response_head(parts.status.as_u16(), headers.get(Known::ContentType));
                if let Some((ticket, ids)) = claimed
                    && recordable_status(parts.status.as_u16())
                {
                    let cap = self.carried.idempotency.record_cap();
                    tracker.record_for(ticket, Recording::new(parts.status, headers, ids, cap));
                }
                if let Some(assigned) = headers.get_str(Known::McpSessionId) {
                    tracker.learn_session(assigned);
                }
                tracker.capture_fields(headers);
                ProxyBody::Observed(ObservedBody::new(body, tracker))
            }
            None => {
                if parts.status.is_success()
                    && let Some(session) = &ending
                {
                    self.ctx().clients.forget(session);
                }
                match self.capture_only(&mut call, parts.status.as_u16(), headers) {
                    Some(tracker) => ProxyBody::Observed(ObservedBody::new(body, tracker)),
                    None => ProxyBody::Plain(body),
                }
            }
        };
        let body = match self.sse_keepalive {
            Some(every) if keepalive_applies(parts.status, headers) => {
                ProxyBody::KeepAlive(Box::pin(sse_keepalive::KeepAlive::new(body, every)))
            }
            _ => body,
        };
        let fields = upstream_fields.map(|fields| AnswerFields {
            fields,
            via,
            attempts: call.attempts(),
        });
        Answer {
            response: Response::from_parts(parts, body),
            fields,
        }
    }

    /// An upstream answer strata cannot pass on (its head is not one message): 502, and the
    /// call's requests get that outcome.
    fn broken_answer(&self, call: &mut PendingCall<'_>) -> Response<AgentBody> {
        let why = StrataError::UpstreamBroken;
        if let Some(mut tracker) = call.take_tracker() {
            tracker.no_response(why.status().as_u16());
        }
        strata_error::response(why)
    }
}

// === traffic capture (`capture` on) ===

impl Proxy {
    /// A recorder for this request, when capture is on.
    fn begin_capture(&self, parts: &Parts, fields: Option<&HeadFields>) -> Option<Box<Recorder>> {
        let capture = self.ctx().capture.as_ref()?;
        let headers = match fields {
            Some(fields) => Headers::Own(fields),
            None => Headers::Map(&parts.headers),
        };
        let target = parts.uri.path_and_query().map_or("/", PathAndQuery::as_str);
        let url = format!("{}{target}", self.ctx().upstream);
        Some(capture.begin(parts.method.as_str(), url, headers))
    }

    fn capture_max_body(&self) -> usize {
        self.ctx().capture.as_ref().map_or(0, |c| c.max_body())
    }

    /// A tracker that only captures an exchange carrying no call (a GET stream, a DELETE, a
    /// POST of notifications), when capture is on.
    fn capture_only(
        &self,
        call: &mut PendingCall<'_>,
        status: u16,
        headers: Headers<'_>,
    ) -> Option<Box<CallTracker>> {
        let capture = self.ctx().capture.as_ref()?;
        let mut recorder = call.take_capture()?;
        let content_type = headers.get_str(Known::ContentType);
        recorder.response_head(status, content_type, Some(capture.fields(headers)));
        Some(Box::new(CallTracker::capture_only(
            self.ctx().clone(),
            recorder,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::accepts_only_sse;

    #[test]
    fn only_an_accept_without_json_or_a_wildcard_is_sse_only() {
        let only = |v: &str| accepts_only_sse(Some(v.as_bytes()));
        assert!(only("text/event-stream"));
        assert!(only(" Text/Event-Stream ; q=1"));
        assert!(!only("application/json, text/event-stream"));
        assert!(!only("text/event-stream, APPLICATION/JSON;q=0.5"));
        assert!(!only("text/event-stream, */*"));
        assert!(!only("text/event-stream,application/*"));
        assert!(!only("application/json"));
        assert!(!only(""));
        assert!(!accepts_only_sse(None));
    }
}
