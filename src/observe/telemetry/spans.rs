//! A finished call as spans (OpenTelemetry MCP semantic conventions, `docs/gen-ai/mcp.md`):
//! one SERVER span facing the agent, and one CLIENT child per upstream attempt, named
//! `{mcp.method.name} {target}` and carrying the conventions' attributes plus strata's own
//! (`strata.layer`, `strata.outcome`, `strata.retry_origin`, `strata.attempts`). Built after
//! the fact from the call's record, so nothing of a span lives on the call's path.

use std::borrow::Cow;
use std::time::SystemTime;

use opentelemetry::trace::{Event, SpanContext, SpanId, SpanKind, Status, TraceFlags};
use std::sync::Arc;

use opentelemetry::{InstrumentationScope, KeyValue, StringValue, Value};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use tokio::time::Instant;

use super::FinishedCall;
use super::error_type;
use crate::observe::call_trace::{AttemptTimes, TraceIds};

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

    pub(super) fn at(&self, instant: Instant) -> SystemTime {
        self.wall - self.now.saturating_duration_since(instant)
    }

    pub(super) fn end(&self) -> SystemTime {
        self.wall
    }
}

/// What the call's spans share.
pub(super) struct Shared<'a> {
    pub call: &'a FinishedCall<'a>,
    pub name: Cow<'static, str>,
    pub scope: &'a InstrumentationScope,
    pub clock: Clock,
    pub ids: TraceIds,
    pub error_type: Option<Cow<'static, str>>,
    /// The attributes every span of the call carries ([`common`]).
    pub common: Vec<KeyValue>,
}

/// The span's name: `{mcp.method.name} {target}`, the target being the tool or prompt.
pub(super) fn name(call: &FinishedCall<'_>) -> Cow<'static, str> {
    let method = &*call.record.method;
    match call.record.tool.as_deref().or(call.prompt()) {
        Some(target) => Cow::Owned(format!("{method} {target}")),
        None => Cow::Owned(method.to_owned()),
    }
}

/// The SERVER span.
pub(super) fn server(shared: &Shared<'_>) -> SpanData {
    let call = shared.call;
    let record = call.record;
    let mut attributes = shared.common.clone();
    if let Some(trace) = call.trace {
        attributes.push(KeyValue::new(
            "client.address",
            trace.agent.ip().to_string(),
        ));
        attributes.push(KeyValue::new("client.port", i64::from(trace.agent.port())));
        attributes.push(KeyValue::new(
            "network.protocol.version",
            protocol_version(trace.agent_version),
        ));
    }
    if let Some(status) = record.http_statuses.last() {
        attributes.push(KeyValue::new(
            "http.response.status_code",
            i64::from(*status),
        ));
    }
    if let Some(code) = record.error_code {
        attributes.push(KeyValue::new("rpc.response.status_code", code.to_string()));
    }
    attributes.push(KeyValue::new(
        "strata.layer",
        record.outcome.layer().as_str(),
    ));
    attributes.push(KeyValue::new("strata.outcome", record.outcome.as_str()));
    attributes.push(KeyValue::new(
        "strata.retry_origin",
        record.retry_origin.as_str(),
    ));
    attributes.push(KeyValue::new("strata.attempts", i64::from(attempts(call))));
    if record.sse_events > 0 {
        attributes.push(KeyValue::new(
            "strata.sse.events",
            i64::from(record.sse_events),
        ));
    }
    if let Some(client) = record.client.as_deref() {
        attributes.push(KeyValue::new("strata.client", client.to_owned()));
    }
    let mut events = Vec::new();
    if call.trace.is_some_and(|t| t.replayed) {
        events.push(Event::new(
            "strata.idempotency.replay",
            shared.clock.end(),
            vec![KeyValue::new("strata.upstream_calls", 0_i64)],
            0,
        ));
    }
    let (status, error) = status(shared.error_type.as_ref(), record.error_message.as_deref());
    attributes.extend(error);
    let mut span = shared.span(
        SpanKind::Server,
        shared.ids.server,
        attributes,
        events,
        status,
    );
    span.parent_span_id = shared.ids.parent;
    span.parent_span_is_remote = shared.ids.parent != SpanId::INVALID;
    span.start_time = shared.clock.at(call.started);
    span
}

/// The CLIENT span of attempt `n` (1-based); `last`: the attempt that answered the call.
pub(super) fn client(
    shared: &Shared<'_>,
    attempt: &AttemptTimes,
    n: usize,
    last: bool,
) -> SpanData {
    let call = shared.call;
    let mut attributes = shared.common.clone();
    let (address, port) = server_address(&call.record.upstream);
    attributes.push(KeyValue::new("server.address", address.to_owned()));
    if let Some(port) = port {
        attributes.push(KeyValue::new("server.port", i64::from(port)));
    }
    if let Some(status) = attempt.status {
        attributes.push(KeyValue::new(
            "http.response.status_code",
            i64::from(status),
        ));
    }
    attributes.push(KeyValue::new("strata.attempt", n as i64));
    if let Some(reason) = attempt.retried {
        attributes.push(KeyValue::new("strata.retry.reason", reason.as_str()));
    }
    if let Some(why) = attempt.suppressed {
        attributes.push(KeyValue::new("strata.retry.suppressed", why.as_str()));
    }
    if attempt.resumed {
        attributes.push(KeyValue::new("strata.resumed", true));
    }
    let error_type = match (attempt.failure, last) {
        (Some(failure), _) => Some(error_type::of_failure(failure)),
        (None, true) => shared.error_type.clone(),
        (None, false) => None,
    };
    let mut events = Vec::new();
    if let Some(head) = attempt.head {
        events.push(Event::new(
            "strata.first_byte",
            shared.clock.at(head),
            Vec::new(),
            0,
        ));
    }
    if last && call.record.sse_events > 0 {
        let count = i64::from(call.record.sse_events);
        attributes.push(KeyValue::new("strata.sse.events", count));
    }
    let message = last
        .then_some(call.record.error_message.as_deref())
        .flatten();
    let (status, error) = status(error_type.as_ref(), message);
    attributes.extend(error);
    let id = attempt.span.unwrap_or_else(super::new_span_id);
    let mut span = shared.span(SpanKind::Client, id, attributes, events, status);
    span.parent_span_id = shared.ids.server;
    span.start_time = shared.clock.at(attempt.started);
    if let Some(ended) = attempt.ended {
        span.end_time = shared.clock.at(ended);
    }
    span
}

impl Shared<'_> {
    /// A span of the call: no parent, starting and ending at the call's end (the caller sets what
    /// differs).
    fn span(
        &self,
        kind: SpanKind,
        id: SpanId,
        attributes: Vec<KeyValue>,
        events: Vec<Event>,
        status: Status,
    ) -> SpanData {
        let mut all = SpanEvents::default();
        all.events = events;
        SpanData {
            span_context: SpanContext::new(
                self.ids.trace,
                id,
                TraceFlags::SAMPLED,
                false,
                self.ids.state.clone(),
            ),
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: kind,
            name: self.name.clone(),
            start_time: self.clock.end(),
            end_time: self.clock.end(),
            attributes,
            dropped_attributes_count: 0,
            events: all,
            links: SpanLinks::default(),
            status,
            instrumentation_scope: self.scope.clone(),
        }
    }
}

/// The attributes both kinds carry.
/// Made once per call and cloned into each of its spans: a text is one shared allocation,
/// not one a span.
pub(super) fn common(call: &FinishedCall<'_>) -> Vec<KeyValue> {
    let record = call.record;
    let shared = |text: &str| Value::String(StringValue::from(Arc::<str>::from(text)));
    let mut attributes = Vec::with_capacity(24);
    attributes.push(KeyValue::new("mcp.method.name", shared(&record.method)));
    if let Some(tool) = record.tool.as_deref() {
        attributes.push(KeyValue::new("gen_ai.tool.name", shared(tool)));
        attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
    }
    if let Some(prompt) = call.prompt() {
        attributes.push(KeyValue::new("gen_ai.prompt.name", shared(prompt)));
    }
    if let Some(uri) = call.context.and_then(|c| c.resource_uri.as_deref()) {
        attributes.push(KeyValue::new("mcp.resource.uri", shared(uri)));
    }
    let id = request_id(&record.jsonrpc_id);
    attributes.push(KeyValue::new("jsonrpc.request.id", shared(&id)));
    if let Some(session) = &record.session {
        attributes.push(KeyValue::new("mcp.session.id", shared(session.as_str())));
    }
    if let Some(version) = record.protocol_version.as_deref() {
        attributes.push(KeyValue::new("mcp.protocol.version", shared(version)));
    }
    attributes.push(KeyValue::new("network.transport", "tcp"));
    attributes.push(KeyValue::new("network.protocol.name", "http"));
    attributes
}

/// Status ERROR exactly when `error.type` is set, described by the JSON-RPC error message
/// (when the operator lets messages be logged); the `error.type` attribute with it.
fn status(
    error_type: Option<&Cow<'static, str>>,
    message: Option<&str>,
) -> (Status, Option<KeyValue>) {
    match error_type {
        Some(ty) => (
            Status::error(message.unwrap_or_default().to_owned()),
            Some(KeyValue::new("error.type", Value::from(ty.clone()))),
        ),
        None => (Status::Unset, None),
    }
}

/// Upstream attempts made (none for an answer from an idempotency record).
fn attempts(call: &FinishedCall<'_>) -> u32 {
    match call.trace {
        Some(trace) if trace.replayed => 0,
        _ => call.record.attempts,
    }
}

/// The id as the conventions want it: a string's content (the record keeps its JSON text).
fn request_id(text: &str) -> String {
    text.strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(text)
        .to_owned()
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
mod tests {
    use super::*;

    #[test]
    fn the_upstream_splits_into_address_and_port() {
        assert_eq!(
            server_address("http://127.0.0.1:8000"),
            ("127.0.0.1", Some(8000))
        );
        assert_eq!(server_address("https://[::1]:443"), ("::1", Some(443)));
        assert_eq!(server_address("https://mcp.example"), ("mcp.example", None));
    }

    #[test]
    fn a_string_id_loses_its_quotes() {
        assert_eq!(request_id("\"abc\""), "abc");
        assert_eq!(request_id("7"), "7");
    }
}
