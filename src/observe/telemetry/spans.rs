//! A finished call as spans (OpenTelemetry MCP semantic conventions, `docs/gen-ai/mcp.md`):
//! one SERVER span facing the agent, and one CLIENT child per upstream attempt, named
//! `{mcp.method.name} {target}` and carrying the conventions' attributes plus strata's own
//! (`strata.layer`, `strata.outcome`, `strata.retry_origin`, `strata.attempts`).
//!
//! A sampled call reaches the export thread as a [`TracedCall`], the facts it owns; its spans
//! are written there, straight into the export request (`wire.rs`, OTLP `trace.proto`), so
//! nothing of a span is made on a worker or on the call's path.

use std::borrow::Cow;
use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry::trace::SpanId;
use tokio::time::Instant;

use super::error_type;
use super::wire::{AnyValue, Wire};
use crate::observe::call_record::CallRecord;
use crate::observe::call_trace::{AttemptTimes, CallTrace, TraceIds};

/// `Span` fields (`opentelemetry/proto/trace/v1/trace.proto`).
mod field {
    pub(super) const TRACE_ID: u32 = 1;
    pub(super) const SPAN_ID: u32 = 2;
    pub(super) const TRACE_STATE: u32 = 3;
    pub(super) const PARENT_SPAN_ID: u32 = 4;
    pub(super) const NAME: u32 = 5;
    pub(super) const KIND: u32 = 6;
    pub(super) const START: u32 = 7;
    pub(super) const END: u32 = 8;
    pub(super) const ATTRIBUTES: u32 = 9;
    pub(super) const EVENTS: u32 = 11;
    pub(super) const STATUS: u32 = 15;
    pub(super) const FLAGS: u32 = 16;
}

/// `SpanKind` values.
const SERVER: u64 = 2;
const CLIENT: u64 = 3;
/// `SpanFlags`: the trace flags' sampled bit, and whether the parent is known to be remote.
const SAMPLED: u32 = 0x01;
const HAS_IS_REMOTE: u32 = 0x100;
const IS_REMOTE: u32 = 0x200;
/// `Status.code` ERROR.
const STATUS_ERROR: u64 = 2;

/// A sampled call, as its spans are made of: what it owns after the call is gone.
#[derive(Debug)]
pub(super) struct TracedCall {
    pub record: CallRecord<'static>,
    /// Attempt times and the agent's connection (present while export is on).
    pub trace: Option<Box<CallTrace>>,
    /// The prompt of a prompts/get, the URI of a resources/read.
    pub prompt: Option<Box<str>>,
    pub resource_uri: Option<Box<str>>,
    pub ids: TraceIds,
    pub error_type: Option<Cow<'static, str>>,
    pub started: Instant,
}

impl TracedCall {
    /// Spans this call makes: its SERVER span and a CLIENT span per attempt.
    pub(super) fn spans(&self) -> u64 {
        1 + self.attempts().len() as u64
    }

    fn attempts(&self) -> &[AttemptTimes] {
        self.trace.as_ref().map_or(&[], |t| &t.attempts)
    }

    fn ended(&self) -> Instant {
        self.started + self.record.duration
    }

    /// Upstream attempts made (none for an answer from an idempotency record).
    fn attempt_count(&self) -> u32 {
        match &self.trace {
            Some(trace) if trace.replayed => 0,
            _ => self.record.attempts,
        }
    }
}

/// Wall-clock times for the monotonic instants strata measures with.
pub(super) struct Clock {
    wall: SystemTime,
    now: Instant,
}

impl Clock {
    pub(super) fn now() -> Clock {
        Clock {
            wall: SystemTime::now(),
            now: Instant::now(),
        }
    }

    /// Nanoseconds since the Unix epoch at `instant`.
    fn nanos(&self, instant: Instant) -> u64 {
        let at = match instant.checked_duration_since(self.now) {
            Some(ahead) => self.wall + ahead,
            None => self.wall - self.now.duration_since(instant),
        };
        at.duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}

/// Appends the call's spans to the `ScopeSpans` message being written (its field 2).
pub(super) fn write(spans: &mut Wire, call: &TracedCall, clock: &Clock) {
    spans.message(2, |span| server(span, call, clock));
    let attempts = call.attempts();
    for (i, attempt) in attempts.iter().enumerate() {
        let last = i + 1 == attempts.len();
        spans.message(2, |span| client(span, call, clock, attempt, i + 1, last));
    }
}

/// The SERVER span.
fn server(span: &mut Wire, call: &TracedCall, clock: &Clock) {
    let ids = &call.ids;
    let remote = ids.parent != SpanId::INVALID;
    let times = (clock.nanos(call.started), clock.nanos(call.ended()));
    head(span, call, ids.server, ids.parent, SERVER, times);
    common(span, call);
    let record = &call.record;
    if let Some(trace) = &call.trace {
        let ip = trace.agent.ip().to_string();
        attr(span, "client.address", AnyValue::Str(&ip));
        attr(
            span,
            "client.port",
            AnyValue::Int(i64::from(trace.agent.port())),
        );
        let version = protocol_version(trace.agent_version);
        attr(span, "network.protocol.version", AnyValue::Str(version));
    }
    if let Some(status) = record.http_statuses.last() {
        attr(
            span,
            "http.response.status_code",
            AnyValue::Int(i64::from(*status)),
        );
    }
    if let Some(code) = record.error_code {
        attr(
            span,
            "rpc.response.status_code",
            AnyValue::Str(&code.to_string()),
        );
    }
    attr(
        span,
        "strata.layer",
        AnyValue::Str(record.outcome.layer().as_str()),
    );
    attr(
        span,
        "strata.outcome",
        AnyValue::Str(record.outcome.as_str()),
    );
    attr(
        span,
        "strata.retry_origin",
        AnyValue::Str(record.retry_origin.as_str()),
    );
    attr(
        span,
        "strata.attempts",
        AnyValue::Int(i64::from(call.attempt_count())),
    );
    if record.sse_events > 0 {
        attr(
            span,
            "strata.sse.events",
            AnyValue::Int(i64::from(record.sse_events)),
        );
    }
    if let Some(client) = record.client.as_deref() {
        attr(span, "strata.client", AnyValue::Str(client));
    }
    let error_type = call.error_type.as_deref();
    if let Some(ty) = error_type {
        attr(span, "error.type", AnyValue::Str(ty));
    }
    if call.trace.as_ref().is_some_and(|t| t.replayed) {
        event(span, "strata.idempotency.replay", times.1, |event| {
            let zero = AnyValue::Int(0);
            event.attribute(3, "strata.upstream_calls", zero);
        });
    }
    status(span, error_type, record.error_message.as_deref());
    flags(span, remote);
}

/// The CLIENT span of attempt `n` (1-based); `last`: the attempt that answered the call.
fn client(
    span: &mut Wire,
    call: &TracedCall,
    clock: &Clock,
    attempt: &AttemptTimes,
    n: usize,
    last: bool,
) {
    let ended = attempt.ended.unwrap_or_else(|| call.ended());
    let times = (clock.nanos(attempt.started), clock.nanos(ended));
    let id = attempt.span.unwrap_or_else(super::new_span_id);
    head(span, call, id, call.ids.server, CLIENT, times);
    common(span, call);
    let (address, port) = server_address(&call.record.upstream);
    attr(span, "server.address", AnyValue::Str(address));
    if let Some(port) = port {
        attr(span, "server.port", AnyValue::Int(i64::from(port)));
    }
    if let Some(status) = attempt.status {
        attr(
            span,
            "http.response.status_code",
            AnyValue::Int(i64::from(status)),
        );
    }
    attr(span, "strata.attempt", AnyValue::Int(n as i64));
    if let Some(reason) = attempt.retried {
        attr(span, "strata.retry.reason", AnyValue::Str(reason.as_str()));
    }
    if let Some(why) = attempt.suppressed {
        attr(span, "strata.retry.suppressed", AnyValue::Str(why.as_str()));
    }
    if attempt.resumed {
        attr(span, "strata.resumed", AnyValue::Bool(true));
    }
    if last && call.record.sse_events > 0 {
        let count = i64::from(call.record.sse_events);
        attr(span, "strata.sse.events", AnyValue::Int(count));
    }
    let failed = attempt.failure.map(error_type::of_failure);
    let error_type = match (&failed, last) {
        (Some(failed), _) => Some(failed.as_ref()),
        (None, true) => call.error_type.as_deref(),
        (None, false) => None,
    };
    if let Some(ty) = error_type {
        attr(span, "error.type", AnyValue::Str(ty));
    }
    if let Some(head) = attempt.head {
        event(span, "strata.first_byte", clock.nanos(head), |_| {});
    }
    let message = last
        .then_some(call.record.error_message.as_deref())
        .flatten();
    status(span, error_type, message);
    flags(span, false);
}

/// An attribute of the span.
fn attr(span: &mut Wire, key: &str, value: AnyValue<'_>) {
    span.attribute(field::ATTRIBUTES, key, value);
}

/// The fields every span of the call has: ids, name, kind, times.
fn head(
    span: &mut Wire,
    call: &TracedCall,
    id: SpanId,
    parent: SpanId,
    kind: u64,
    times: (u64, u64),
) {
    let ids = &call.ids;
    span.bytes(field::TRACE_ID, &ids.trace.to_bytes());
    span.bytes(field::SPAN_ID, &id.to_bytes());
    let state = ids.state.header();
    if !state.is_empty() {
        span.str(field::TRACE_STATE, &state);
    }
    if parent != SpanId::INVALID {
        span.bytes(field::PARENT_SPAN_ID, &parent.to_bytes());
    }
    name(span, call);
    span.uint(field::KIND, kind);
    span.fixed64(field::START, times.0);
    span.fixed64(field::END, times.1);
}

/// The span's name: `{mcp.method.name} {target}`, the target being the tool or prompt.
fn name(span: &mut Wire, call: &TracedCall) {
    let method = &*call.record.method;
    match call.record.tool.as_deref().or(call.prompt.as_deref()) {
        Some(target) => span.str(field::NAME, &format!("{method} {target}")),
        None => span.str(field::NAME, method),
    }
}

/// The attributes both kinds carry.
fn common(span: &mut Wire, call: &TracedCall) {
    let record = &call.record;
    attr(span, "mcp.method.name", AnyValue::Str(&record.method));
    if let Some(tool) = record.tool.as_deref() {
        attr(span, "gen_ai.tool.name", AnyValue::Str(tool));
        attr(span, "gen_ai.operation.name", AnyValue::Str("execute_tool"));
    }
    if let Some(prompt) = call.prompt.as_deref() {
        attr(span, "gen_ai.prompt.name", AnyValue::Str(prompt));
    }
    if let Some(uri) = call.resource_uri.as_deref() {
        attr(span, "mcp.resource.uri", AnyValue::Str(uri));
    }
    let id = request_id(&record.jsonrpc_id);
    attr(span, "jsonrpc.request.id", AnyValue::Str(id));
    if let Some(session) = &record.session {
        attr(span, "mcp.session.id", AnyValue::Str(session.as_str()));
    }
    if let Some(version) = record.protocol_version.as_deref() {
        attr(span, "mcp.protocol.version", AnyValue::Str(version));
    }
    attr(span, "network.transport", AnyValue::Str("tcp"));
    attr(span, "network.protocol.name", AnyValue::Str("http"));
}

/// An `Event` at `at` (nanoseconds), its attributes written by `attributes` (field 3).
fn event(span: &mut Wire, name: &str, at: u64, attributes: impl FnOnce(&mut Wire)) {
    span.message(field::EVENTS, |event| {
        event.fixed64(1, at);
        event.str(2, name);
        attributes(event);
    });
}

/// Status ERROR exactly when `error.type` is set, described by the JSON-RPC error message
/// (when the operator lets messages be logged); UNSET otherwise.
fn status(span: &mut Wire, error_type: Option<&str>, message: Option<&str>) {
    span.message(field::STATUS, |status| {
        if error_type.is_some() {
            if let Some(message) = message.filter(|m| !m.is_empty()) {
                status.str(2, message);
            }
            status.uint(3, STATUS_ERROR);
        }
    });
}

/// The span's flags: sampled, and whether its parent is remote (the SERVER span's, when the
/// agent sent one).
fn flags(span: &mut Wire, remote_parent: bool) {
    let remote = if remote_parent { IS_REMOTE } else { 0 };
    span.fixed32(field::FLAGS, SAMPLED | HAS_IS_REMOTE | remote);
}

/// The id as the conventions want it: a string's content (the record keeps its JSON text).
fn request_id(text: &str) -> &str {
    text.strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(text)
}

/// `server.address` and `server.port` from the upstream as logged (`http://host:port`).
fn server_address(upstream: &str) -> (&str, Option<u16>) {
    let authority = upstream.split_once("://").map_or(upstream, |(_, a)| a);
    match authority.rsplit_once(':') {
        Some((host, port)) if !port.contains(']') => (
            host.trim_start_matches('[').trim_end_matches(']'),
            port.parse().ok(),
        ),
        _ => (authority, None),
    }
}

fn protocol_version(version: http::Version) -> &'static str {
    match version {
        http::Version::HTTP_2 => "2",
        http::Version::HTTP_10 => "1.0",
        _ => "1.1",
    }
}

#[cfg(test)]
mod tests;
