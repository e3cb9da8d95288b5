use std::time::Duration;

use http::StatusCode;
use opentelemetry::trace::{TraceId, TraceState};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::{ScopeSpans, Span, status};
use prost::Message;

use super::*;
use crate::classify::Outcome;
use crate::metrics::RetryReason;
use crate::policy::Failure;

fn attempt(started: Instant, status: u16) -> AttemptTimes {
    AttemptTimes {
        started,
        span: None,
        head: Some(started + Duration::from_millis(2)),
        ended: None,
        status: Some(status),
        failure: None,
        retried: None,
        suppressed: None,
        resumed: false,
    }
}

/// A tools/call that failed once with a 503, was retried, and answered `isError: true`.
fn retried_tool_error() -> TracedCall {
    let started = Instant::now();
    let mut record = CallRecord::new(
        "http://127.0.0.1:8000",
        "tools/call",
        "\"a7\"",
        Outcome::ToolError,
        Duration::from_millis(30),
    );
    record.tool = Some("search".into());
    record.attempts = 2;
    record.http_statuses = vec![503, 200].into();
    let mut first = attempt(started, 503);
    first.failure = Some(Failure::Status(StatusCode::SERVICE_UNAVAILABLE));
    first.retried = Some(RetryReason::Http503);
    first.ended = Some(started + Duration::from_millis(5));
    let trace = CallTrace {
        agent: "127.0.0.1:5555".parse().unwrap_or_else(|e| panic!("{e}")),
        agent_version: http::Version::HTTP_11,
        traceparent: None,
        tracestate: None,
        attempts: vec![first, attempt(started + Duration::from_millis(10), 200)],
        replayed: false,
        ids: None,
    };
    TracedCall {
        record: record.into_owned(),
        trace: Some(Box::new(trace)),
        prompt: None,
        resource_uri: None,
        ids: TraceIds {
            trace: TraceId::from(0x0af7651916cd43dd8448eb211c80319c_u128),
            server: SpanId::from(0x1111_u64),
            parent: SpanId::from(0xb7ad6b7169203331_u64),
            state: TraceState::default(),
            sampled: true,
        },
        error_type: Some("tool_error".into()),
        started,
    }
}

fn decoded(call: &TracedCall) -> Vec<Span> {
    let mut wire = Wire::default();
    write(&mut wire, call, &Clock::now());
    match ScopeSpans::decode(wire.into_bytes().as_slice()) {
        Ok(scope) => scope.spans,
        Err(e) => panic!("undecodable: {e}"),
    }
}

fn attribute<'a>(span: &'a Span, key: &str) -> Option<&'a Value> {
    let kv = span.attributes.iter().find(|kv| kv.key == key)?;
    kv.value.as_ref()?.value.as_ref()
}

fn text(span: &Span, key: &str) -> Option<String> {
    match attribute(span, key) {
        Some(Value::StringValue(s)) => Some(s.clone()),
        _ => None,
    }
}

fn int(span: &Span, key: &str) -> Option<i64> {
    match attribute(span, key) {
        Some(Value::IntValue(i)) => Some(*i),
        _ => None,
    }
}

#[test]
fn a_retried_call_is_a_server_span_with_a_client_span_per_attempt() {
    let call = retried_tool_error();
    let spans = decoded(&call);
    assert_eq!(spans.len(), 3);
    let (server, first, second) = (&spans[0], &spans[1], &spans[2]);
    assert_eq!(server.name, "tools/call search");
    assert_eq!(server.kind, 2);
    assert_eq!(server.parent_span_id, 0xb7ad6b7169203331_u64.to_be_bytes());
    assert_eq!(server.flags, 0x301, "sampled, with a remote parent");
    assert_eq!(text(server, "jsonrpc.request.id").as_deref(), Some("a7"));
    assert_eq!(
        text(server, "strata.outcome").as_deref(),
        Some("TOOL_ERROR")
    );
    assert_eq!(int(server, "strata.attempts"), Some(2));
    assert_eq!(text(server, "error.type").as_deref(), Some("tool_error"));
    let code = server.status.as_ref().map(|s| s.code);
    assert_eq!(code, Some(status::StatusCode::Error as i32));
    assert_eq!(
        server.end_time_unix_nano - server.start_time_unix_nano,
        30_000_000
    );

    for client in [first, second] {
        assert_eq!(client.kind, 3);
        assert_eq!(client.parent_span_id, 0x1111_u64.to_be_bytes());
        assert_eq!(client.trace_id, server.trace_id);
        assert_eq!(client.flags, 0x101);
        assert_eq!(text(client, "server.address").as_deref(), Some("127.0.0.1"));
        assert_eq!(int(client, "server.port"), Some(8000));
        assert_eq!(client.events.len(), 1, "strata.first_byte");
    }
    assert_eq!(int(first, "http.response.status_code"), Some(503));
    assert_eq!(text(first, "error.type").as_deref(), Some("503"));
    assert_eq!(
        text(first, "strata.retry.reason").as_deref(),
        Some("http_503")
    );
    assert_eq!(
        first.end_time_unix_nano - first.start_time_unix_nano,
        5_000_000
    );
    assert_eq!(int(second, "http.response.status_code"), Some(200));
    assert_eq!(text(second, "error.type").as_deref(), Some("tool_error"));
    assert_eq!(
        second.end_time_unix_nano, server.end_time_unix_nano,
        "the answer's attempt ends with the call"
    );
}

#[test]
fn a_successful_call_has_no_error_and_an_unset_status() {
    let mut call = retried_tool_error();
    call.record.outcome = Outcome::ToolSuccess;
    call.error_type = None;
    if let Some(trace) = &mut call.trace {
        trace.attempts.remove(0);
    }
    let spans = decoded(&call);
    assert_eq!(spans.len(), 2);
    for span in &spans {
        assert_eq!(text(span, "error.type"), None);
        let code = span.status.as_ref().map(|s| s.code);
        assert_eq!(code, Some(status::StatusCode::Unset as i32));
    }
}

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
