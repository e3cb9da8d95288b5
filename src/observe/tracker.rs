//! The call tracker: the response-body sink that feeds the classifier and, as each request's
//! verdict is reached, counts it and writes its log record — exactly once per request.

use std::borrow::Cow;
use std::sync::Arc;

use tokio::time::Instant;

use crate::capture::{Capture, End, Recorder};
use crate::classify::envelope::Request;
use crate::classify::exchange::{self, ContentKind, Exchange, Resolution, Verdict};
use crate::classify::{Kind, Outcome};
use crate::idempotency::{Record, Recording, Ticket};
use crate::metrics::{GaugeGuard, Metrics};
use crate::observe::call_record::{CallRecord, RetryOrigin, SessionHash, id_text};
use crate::observe::call_trace::CallTrace;
use crate::observe::recent::{InflightCall, InflightState, Inspector, Watch};
use crate::observe::telemetry::{FinishedCall, Telemetry};
use crate::policy::Annotations;
use crate::policy::limits::Admission;
use crate::policy::limits::refusal::RefusedBy;

use super::client_retry::RecentFailures;
use super::resume::{Parked, ResumeRegistry};
use super::session::Session;
use super::session_clients::SessionClients;
use crate::proxy::{BodyEnd, BodySink, Settling};

/// What every tracker of one proxy shares.
#[derive(Clone)]
pub struct CallContext {
    pub metrics: Arc<Metrics>,
    /// The upstream as logged (`http://host:port`).
    pub upstream: Arc<str>,
    pub log_error_messages: bool,
    pub resume: Arc<ResumeRegistry>,
    pub clients: Arc<SessionClients>,
    /// Where tool annotations from `tools/list` results go; `None` unless they are trusted.
    pub annotations: Option<Arc<Annotations>>,
    pub recent: Arc<RecentFailures>,
    /// OpenTelemetry export, when on.
    pub telemetry: Option<Arc<Telemetry>>,
    /// The recent calls inspector, when on.
    pub inspector: Option<Arc<Inspector>>,
    /// Traffic capture, when on.
    pub capture: Option<Arc<Capture>>,
}

/// Per-request facts that outlive one HTTP exchange (a resumed stream carries them on).
#[derive(Clone, Debug)]
pub struct CallMeta {
    pub started: Instant,
    /// Statuses of earlier HTTP exchanges of this call (a resumed stream's POST).
    pub statuses: Vec<u16>,
    /// Upstream attempts strata made (1 without retries).
    pub attempts: u32,
    /// The agent re-sent this call (an idempotency-key repeat answered from the record).
    pub client_retry: bool,
    pub sse_events: u32,
    /// What the call's trace needs (only while OpenTelemetry export is on).
    pub trace: Option<Box<CallTrace>>,
}

impl CallMeta {
    /// This meta for another request of the same exchange (its trace's spans its own).
    fn for_another_call(&self) -> CallMeta {
        CallMeta {
            trace: self.trace.as_ref().map(|t| Box::new(t.for_another_call())),
            statuses: self.statuses.clone(),
            ..*self
        }
    }
}

/// Each request's [`CallMeta`], in the exchange's order, the first inline: an exchange
/// carries one request as a rule, and a `Vec` of one was an allocation and a free a call.
pub struct Metas {
    first: Option<CallMeta>,
    rest: Vec<CallMeta>,
}

impl Metas {
    /// `meta` for each of `n` requests.
    pub fn repeat(meta: CallMeta, n: usize) -> Metas {
        let rest = (1..n.max(1)).map(|_| meta.for_another_call()).collect();
        Metas {
            first: (n > 0).then_some(meta),
            rest,
        }
    }

    pub fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// The answer's head arrived: each call's trace notes it.
    fn response_head(&mut self, status: u16) {
        let now = Instant::now();
        for trace in self.iter_mut().filter_map(|m| m.trace.as_mut()) {
            trace.response_head(status, now);
        }
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = &mut CallMeta> {
        self.first.iter_mut().chain(self.rest.iter_mut())
    }

    fn get(&self, i: usize) -> Option<&CallMeta> {
        match i {
            0 => self.first.as_ref(),
            _ => self.rest.get(i - 1),
        }
    }

    fn get_mut(&mut self, i: usize) -> Option<&mut CallMeta> {
        match i {
            0 => self.first.as_mut(),
            _ => self.rest.get_mut(i - 1),
        }
    }
}

impl FromIterator<CallMeta> for Metas {
    fn from_iter<I: IntoIterator<Item = CallMeta>>(metas: I) -> Self {
        let mut metas = metas.into_iter();
        Metas {
            first: metas.next(),
            rest: metas.collect(),
        }
    }
}

/// What a call with an `Idempotency-Key` keeps of its answer.
enum KeyRecord {
    /// The answer being recorded as it streams to the agent.
    Recording(Ticket, Recording),
    /// The finished record on its way to a store out of this process (Redis), until the body
    /// takes it to settle before its last frame (or, when none does, a task).
    Storing(Ticket, Record),
}

/// Tracks the requests of one HTTP exchange until each has its outcome.
pub struct CallTracker {
    ctx: Arc<CallContext>,
    exchange: Exchange,
    meta: Metas,
    /// The `Mcp-Session-Id`, to park a call whose resumable stream closed early.
    session: Option<Session>,
    /// The session's client, as its initialize named it.
    client: Option<Arc<str>>,
    protocol_version: Option<Arc<str>>,
    status: Option<u16>,
    content_type: Option<Cow<'static, str>>,
    /// The exchange's calls, counted in flight until the tracker drops.
    _inflight: GaugeGuard,
    sse_stream: Option<GaugeGuard>,
    /// An idempotency-key claim: the answer being recorded for it, then the record on its
    /// way to the store. Boxed: only calls with a key have one, and inline it was 200 of the
    /// tracker's 624 bytes, which the response body carries (and hyper keeps room for) for
    /// an SSE stream's life.
    idempotency: Option<Box<KeyRecord>>,
    /// The request's target and body, to remember a failed call by.
    body: Option<SentAs>,
    /// The calls' places among those in flight (only while the inspector is on). Boxed: the
    /// response body carries the tracker for an SSE stream's life.
    watch: Option<Box<Watch>>,
    /// The exchange being captured (`capture` on).
    capture: Option<Box<Recorder>>,
    /// The call's place under `limits.calls` and the circuit (its slot is held until the
    /// tracker drops: the body's end, or the agent leaving). Boxed: only with limits on.
    admission: Option<Box<Admission>>,
    /// The limit that refused the call, when strata answers it itself.
    refused_by: Option<RefusedBy>,
    done: bool,
}

// === impl CallTracker ===

impl CallTracker {
    pub fn new(
        ctx: Arc<CallContext>,
        mut exchange: Exchange,
        meta: Metas,
        session: Option<Session>,
        protocol_version: Option<Arc<str>>,
    ) -> Self {
        let inflight = ctx.metrics.inflight_guard(meta.len());
        let client = session.as_ref().and_then(|s| ctx.clients.get(s.as_str()));
        if ctx.annotations.is_some()
            && exchange
                .requests()
                .any(|r| r.method.is_string("tools/list"))
        {
            exchange.learn_tools();
        }
        CallTracker {
            ctx,
            exchange,
            meta,
            session,
            client,
            protocol_version,
            status: None,
            content_type: None,
            _inflight: inflight,
            sse_stream: None,
            idempotency: None,
            body: None,
            watch: None,
            capture: None,
            admission: None,
            refused_by: None,
            done: false,
        }
    }

    /// While the inspector is on, the calls are in flight, streaming: `waiting` is their
    /// registration from before the head (kept when it names them all, else replaced).
    pub fn watch(&mut self, waiting: Option<Watch>) {
        let Some(inspector) = &self.ctx.inspector else {
            return;
        };
        if let Some(watch) = waiting.filter(|w| w.len() == self.meta.len()) {
            watch.set_state(InflightState::Streaming);
            self.watch = Some(Box::new(watch));
            return;
        }
        let (session, client) = (self.session.as_ref().map(Session::id), self.client.as_ref());
        let calls = self.exchange.requests().zip(0..).map(|(request, i)| {
            let started = self.meta.get(i).map_or_else(Instant::now, |m| m.started);
            InflightCall::of(request, session, client, started, InflightState::Streaming)
        });
        self.watch = Some(Box::new(inspector.inflight().watch(calls)));
    }

    /// A tracker for an exchange that carries no call, only to capture it.
    pub fn capture_only(ctx: Arc<CallContext>, recorder: Box<Recorder>) -> Self {
        let mut tracker = CallTracker::new(
            ctx,
            Exchange::new(Vec::new(), false),
            std::iter::empty().collect(),
            None,
            None,
        );
        tracker.capture = Some(recorder);
        tracker
    }

    /// Holds the call's admission under the limits until the tracker drops.
    pub(crate) fn hold(&mut self, admission: Option<Box<Admission>>) {
        self.admission = admission;
    }

    /// strata refuses the call itself (`by` that limit): its answer follows as a body.
    pub(crate) fn refused(&mut self, by: RefusedBy) {
        self.refused_by = Some(by);
        for meta in self.meta.iter_mut() {
            meta.attempts = 0;
        }
    }

    /// Captures this exchange into `recorder`.
    pub fn capture_into(&mut self, recorder: Box<Recorder>) {
        self.capture = Some(recorder);
    }

    /// The upstream's response header fields, for the capture (when on).
    pub(crate) fn capture_fields(&mut self, headers: crate::http::fields::Headers<'_>) {
        if let (Some(recorder), Some(capture), Some(status)) =
            (&mut self.capture, &self.ctx.capture, self.status)
        {
            let fields = capture.fields(headers);
            recorder.response_head(status, self.content_type.as_deref(), Some(fields));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.exchange.is_empty()
    }

    /// An initialize in this exchange named its client, and the response assigned a session:
    /// remember the pair for the session's later calls.
    pub fn learn_session(&mut self, assigned: &str) {
        if let Some(client) = self.exchange.initialize_client() {
            self.ctx.clients.remember(assigned, &client);
            self.client = Some(Arc::from(&*client));
            self.session = Some(Session::new(assigned));
        }
    }

    /// Keeps the (replay-buffered) request's target and body, so a failure can be told from
    /// the agent's retry of it.
    pub(crate) fn remember_body(&mut self, sent: SentAs) {
        self.body = Some(sent);
    }

    /// Records the answer for an idempotency-key claim as it streams to the agent.
    pub fn record_for(&mut self, ticket: Ticket, recording: Recording) {
        self.idempotency = Some(Box::new(KeyRecord::Recording(ticket, recording)));
    }

    /// The upstream's response head arrived.
    pub fn response_head(&mut self, status: u16, content_type: Option<&[u8]>) {
        let kind = ContentKind::from_header(content_type);
        self.status = Some(status);
        self.content_type = content_type.and_then(content_type_text);
        if kind == ContentKind::Sse && (200..300).contains(&status) {
            self.sse_stream = Some(self.ctx.metrics.sse_stream_guard());
        }
        self.exchange.response_head(status, kind);
        if let Some(recorder) = &mut self.capture {
            recorder.response_head(status, self.content_type.as_deref(), None);
        }
        if self.ctx.telemetry.is_some() {
            self.meta.response_head(status);
        }
        self.report_settled();
    }

    /// strata answered itself (502/504): there was no upstream response.
    pub fn no_response(&mut self, status: u16) {
        self.status = Some(status);
        if let Some(recorder) = &mut self.capture {
            recorder.response_head(status, None, None);
        }
        self.exchange.no_response();
        self.finish(exchange::BodyEnd::Complete);
    }

    fn report_settled(&mut self) {
        let mut settled = Vec::new();
        self.exchange.drain_settled(|i, request, verdict| {
            settled.push((i, request.clone(), verdict.clone()))
        });
        for (i, request, verdict) in settled {
            self.record(i, &request, &verdict);
        }
    }

    fn finish(&mut self, how: exchange::BodyEnd) {
        if self.done {
            return;
        }
        self.done = true;
        self.report_settled();
        let mut answered = how == exchange::BodyEnd::Complete;
        let mut ended = self.exchange.end(how);
        while let Some((i, request, resolution)) = ended.next_resolution() {
            if !matches!(&resolution, Resolution::Final(v) if !matches!(v.outcome, Outcome::StreamIncomplete | Outcome::ClientCancelled))
            {
                answered = false;
            }
            match resolution {
                Resolution::Final(verdict) => self.record(i, request, &verdict),
                Resolution::Pending { last_event_id } => {
                    let parked = self.park(i, request.clone(), last_event_id.bytes());
                    if let Some((request, verdict)) = parked {
                        self.record(i, &request, &verdict);
                    }
                }
            }
        }
        // The key's record: only a whole, final answer answers repeats; otherwise the claim
        // is released (dropping the ticket does it) so the agent may try again. Here, before
        // the last frame is handed on (`ObservedBody`): the memory store has the record
        // before the agent has the answer, and so has Redis — the body holds its last frame
        // until the record is stored (`settle`), within the store's timeout.
        if let Some(KeyRecord::Recording(ticket, recording)) = self.idempotency.take().map(|c| *c)
            && answered
            && let Some(record) = recording.finish()
            && let Err(later) = ticket.complete_here(record)
        {
            let (ticket, record) = *later;
            self.idempotency = Some(Box::new(KeyRecord::Storing(ticket, record)));
        }
        self.sse_stream = None;
        if let (Some(recorder), Some(capture)) = (self.capture.take(), &self.ctx.capture) {
            capture.submit(recorder.finish(match how {
                exchange::BodyEnd::Complete => End::Complete,
                exchange::BodyEnd::UpstreamError => End::UpstreamBroke,
                exchange::BodyEnd::AgentGone => End::AgentGone,
            }));
        }
    }

    /// Parks a call whose resumable stream closed early; without a session (or when the
    /// registry is full) it is STREAM_INCOMPLETE at once.
    fn park(
        &mut self,
        i: usize,
        request: Request,
        last_event_id: &[u8],
    ) -> Option<(Request, Verdict)> {
        let incomplete = Verdict::of(Outcome::StreamIncomplete);
        let Some(session) = self.session.clone() else {
            return Some((request, incomplete));
        };
        let mut meta = self.meta.get(i).cloned()?;
        meta.statuses.extend(self.status);
        if let Some(trace) = &mut meta.trace {
            trace.parked(Instant::now());
        }
        meta.sse_events += self.exchange.sse_events();
        let watch = self.ctx.inspector.as_ref().map(|inspector| {
            let (client, started) = (self.client.as_ref(), meta.started);
            let state = InflightState::Parked;
            let call = InflightCall::of(&request, Some(session.id()), client, started, state);
            inspector.inflight().watch([call])
        });
        if let Some(watch) = &mut self.watch {
            watch.done(i);
        }
        let parked = Parked {
            request,
            meta,
            session,
            last_event_id: last_event_id.into(),
            protocol_version: self.protocol_version.clone(),
            content_type: self.content_type.clone(),
            _pending: self.ctx.metrics.pending_resumable_guard(),
            _watch: watch,
        };
        self.ctx
            .resume
            .park(&self.ctx, parked)
            .map(|given_back| (given_back.request, incomplete))
    }

    fn record(&mut self, i: usize, request: &Request, verdict: &Verdict) {
        let failed = !matches!(
            verdict.outcome,
            Outcome::Success | Outcome::ToolSuccess | Outcome::InputRequired
        );
        if failed && let Some(sent) = &self.body {
            self.ctx.recent.failed(
                self.session.as_ref().map(Session::as_str),
                &request.method.text_lossy(),
                &request.tool.text_lossy(),
                sent.target(),
                sent.body(),
            );
        }
        if let Some(annotations) = &self.ctx.annotations
            && verdict.outcome == Outcome::Success
            && request.method.is_string("tools/list")
        {
            for hint in self.exchange.take_tool_hints().iter() {
                annotations.learn(hint.name, hint.read_only, hint.idempotent);
            }
        }
        if let Some(watch) = &mut self.watch {
            watch.done(i);
        }
        let Some(meta) = self.meta.get_mut(i) else {
            return;
        };
        // The usual call made one attempt: its status alone, borrowed.
        let statuses = if meta.statuses.is_empty() {
            Cow::Borrowed(self.status.as_slice())
        } else {
            let mut all = meta.statuses.clone();
            all.extend(self.status);
            Cow::Owned(all)
        };
        let facts = Facts {
            session: self.session.as_ref().map(Session::hash),
            client: self.client.as_deref(),
            protocol_version: self.protocol_version.as_deref(),
            content_type: self.content_type.as_deref(),
            statuses,
            sse_events: meta.sse_events + self.exchange.sse_events(),
            attempts: meta.attempts,
            client_retry: meta.client_retry,
            trace: meta.trace.take(),
            refused_by: self.refused_by,
        };
        if let Some(admission) = &mut self.admission {
            admission.finished(verdict.outcome);
        }
        record_call(&self.ctx, request, verdict, meta.started, facts);
    }
}

impl BodySink for CallTracker {
    #[inline]
    fn on_data(&mut self, chunk: &[u8]) {
        self.exchange.data(chunk);
        if let Some(recorder) = &mut self.capture {
            recorder.response_data(chunk);
        }
        if let Some(KeyRecord::Recording(_, claim)) = self.idempotency.as_deref_mut() {
            claim.push(chunk);
        }
        if self.exchange.content() == ContentKind::Sse {
            // SSE: a final event settles its call now, though the stream may stay open.
            self.report_settled();
        }
    }

    fn on_end(&mut self, end: BodyEnd) {
        self.finish(match end {
            BodyEnd::Complete => exchange::BodyEnd::Complete,
            BodyEnd::Error => exchange::BodyEnd::UpstreamError,
            BodyEnd::Dropped => exchange::BodyEnd::AgentGone,
        });
    }

    fn settle(&mut self) -> Option<Settling> {
        let Some(KeyRecord::Storing(ticket, record)) = self.idempotency.take().map(|c| *c) else {
            return None;
        };
        Some(Box::pin(async move {
            if let Err(err) = ticket.complete(record).await {
                tracing::warn!(error = %err, "idempotency record not stored");
            }
        }))
    }
}

impl Drop for CallTracker {
    fn drop(&mut self) {
        // Dropped before any body ended it: the agent left while strata waited for the
        // upstream's head (hyper dropped the request future).
        self.finish(exchange::BodyEnd::AgentGone);
    }
}

/// What the log record says about the exchange(s) behind a call.
pub(crate) struct Facts<'a> {
    /// The session's hash: the raw id is never logged.
    pub session: Option<&'a SessionHash>,
    pub client: Option<&'a str>,
    pub protocol_version: Option<&'a str>,
    pub content_type: Option<&'a str>,
    pub statuses: Cow<'a, [u16]>,
    pub sse_events: u32,
    pub attempts: u32,
    pub client_retry: bool,
    pub trace: Option<Box<CallTrace>>,
    /// The limit that refused the call (strata answered it).
    pub refused_by: Option<RefusedBy>,
}

impl<'a> Facts<'a> {
    /// Fills in what `record` says beyond its fixed facts: session, client, protocol
    /// version, tool (`tool`: the request's, as text), statuses, retries, content type and
    /// what the verdict tells of the response. `error_messages`: keep the error text
    /// (`log.error_messages`). Shared by the live path and `strata classify`.
    #[inline]
    pub(crate) fn fill(
        self,
        record: &mut CallRecord<'a>,
        request: &'a Request,
        verdict: &'a Verdict,
        tool: Cow<'a, str>,
        error_messages: bool,
    ) {
        record.session = self.session.cloned();
        // The request's own words win (initialize, 2026-07-28 `_meta`), then the session's.
        record.client = match request.client.kind {
            Kind::String => Some(request.client.text_lossy()),
            _ => self.client.map(Cow::Borrowed),
        };
        record.protocol_version = match self.protocol_version {
            Some(header) => Some(Cow::Borrowed(header)),
            None => (request.protocol_version.kind == Kind::String)
                .then(|| request.protocol_version.text_lossy()),
        };
        record.tool = (request.tool.kind == Kind::String).then_some(tool);
        record.http_statuses = self.statuses;
        record.attempts = self.attempts;
        if self.client_retry {
            record.retry_origin = RetryOrigin::Client;
        } else if self.attempts > 1 {
            record.retry_origin = RetryOrigin::Proxy;
        }
        record.content_type = self.content_type.map(Cow::Borrowed);
        record.sse_events = self.sse_events;
        record.error_code = verdict.error_code;
        record.error_message_len = verdict.error_message_len;
        if error_messages {
            record.error_message = verdict.error_message.as_ref().map(|m| m.text_lossy());
        }
        record.result_type = verdict.result_type.as_ref().map(|r| r.text_lossy());
        record.refused_by = self.refused_by;
    }
}

/// Counts one call and writes its record.
pub(crate) fn record_call(
    ctx: &CallContext,
    request: &Request,
    verdict: &Verdict,
    started: Instant,
    mut facts: Facts<'_>,
) {
    let duration = started.elapsed();
    let method = request.method.text_lossy();
    let tool = request.tool.text_lossy();
    ctx.metrics
        .with_call(&method, &tool, |h| h.record(verdict.outcome, duration));

    let mut record = CallRecord::new(
        &*ctx.upstream,
        method.clone(),
        id_text(request),
        verdict.outcome,
        duration,
    );
    let trace = facts.trace.take();
    facts.fill(&mut record, request, verdict, tool, ctx.log_error_messages);
    match &ctx.inspector {
        Some(inspector) => {
            // Rendered once, for the log line and the recent calls.
            let fields = record.fields_text();
            record.emit_fields(&fields);
            inspector.finished(&record, fields);
        }
        None => record.emit(),
    }
    if let Some(telemetry) = &ctx.telemetry {
        telemetry.finished(FinishedCall {
            record: &record,
            trace,
            context: request.context.as_deref(),
            started,
        });
    }
}

/// A request's target and body, kept to remember the call by should it fail
/// ([`RecentFailures`](super::client_retry::RecentFailures)), in one allocation.
///
/// A copy: the body is usually a slice of the agent connection's read buffer, and a slice
/// kept for the call's life (an SSE stream: hours) would keep that buffer, 8 KiB or more,
/// alive beside the one the connection reads into next (`bench/README.md`, memory per open
/// stream).
pub(crate) struct SentAs {
    text: Box<[u8]>,
    target_len: usize,
}

impl SentAs {
    pub(crate) fn new(target: &str, body: &[u8]) -> Self {
        let mut text = Vec::with_capacity(target.len() + body.len());
        text.extend_from_slice(target.as_bytes());
        text.extend_from_slice(body);
        SentAs {
            text: text.into_boxed_slice(),
            target_len: target.len(),
        }
    }

    pub(crate) fn target(&self) -> &str {
        // Written from a `&str` (`new`).
        std::str::from_utf8(&self.text[..self.target_len]).unwrap_or_default()
    }

    pub(crate) fn body(&self) -> &[u8] {
        &self.text[self.target_len..]
    }
}

/// A `Content-Type` value as the call record logs it: the usual MCP ones without an
/// allocation, another copied (`None` when it is not UTF-8).
pub(crate) fn content_type_text(value: &[u8]) -> Option<Cow<'static, str>> {
    const USUAL: [&str; 3] = [
        "application/json",
        "text/event-stream",
        "application/json; charset=utf-8",
    ];
    if let Some(usual) = USUAL
        .iter()
        .copied()
        .find(|usual| usual.as_bytes() == value)
    {
        return Some(Cow::Borrowed(usual));
    }
    std::str::from_utf8(value)
        .ok()
        .map(|text| Cow::Owned(text.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_are_logged_as_sent() {
        for usual in ["application/json", "text/event-stream"] {
            let text = content_type_text(usual.as_bytes());
            assert!(
                matches!(text, Some(Cow::Borrowed(t)) if t == usual),
                "{usual}"
            );
        }
        let other = content_type_text(b"application/json;charset=UTF-8");
        assert_eq!(other.as_deref(), Some("application/json;charset=UTF-8"));
        assert_eq!(content_type_text(b"text/\xff"), None);
    }

    #[test]
    fn a_call_is_remembered_by_its_target_and_body() {
        let sent = SentAs::new("/mcp?x=é", br#"{"id":1}"#);
        assert_eq!(
            (sent.target(), sent.body()),
            ("/mcp?x=é", &br#"{"id":1}"#[..])
        );
        let bare = SentAs::new("/", b"");
        assert_eq!((bare.target(), bare.body()), ("/", &b""[..]));
    }

    #[test]
    fn each_request_has_its_meta_in_order() {
        let meta = |attempts| CallMeta {
            started: Instant::now(),
            statuses: vec![503],
            attempts,
            client_retry: false,
            sse_events: 0,
            trace: None,
        };
        let none = Metas::repeat(meta(1), 0);
        assert!(none.is_empty());
        assert!(none.get(0).is_none());
        for n in [1, 3] {
            let metas = Metas::repeat(meta(2), n);
            assert_eq!(metas.len(), n);
            assert!((0..n).all(|i| metas.get(i).is_some_and(|m| m.attempts == 2)));
            assert_eq!(
                metas.get(n - 1).map(|m| m.statuses.clone()),
                Some(vec![503])
            );
            assert!(metas.get(n).is_none());
        }
        let parked: Metas = (1..=3).map(meta).collect();
        assert_eq!(parked.len(), 3);
        let order: Vec<u32> = (0..3)
            .filter_map(|i| parked.get(i))
            .map(|m| m.attempts)
            .collect();
        assert_eq!(order, [1, 2, 3]);
    }
}
