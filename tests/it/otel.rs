//! OpenTelemetry export end to end: the testbed's scenarios through strata, and what a real
//! OTLP receiver decodes (the official protobuf definitions, `support::otlp`): one SERVER span
//! per call counted by `strata_calls_total`, a CLIENT child per upstream attempt, the MCP
//! semantic conventions' attributes, `error.type` and status, parent linkage and sampling.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use http_body_util::Full;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_proto::tonic::metrics::v1::number_data_point;
use opentelemetry_proto::tonic::metrics::v1::{AggregationTemporality, Metric};
use serde_json::{Value, json};
use strata::classify::Outcome;
use strata::config::{
    Config, Glob, OtlpProtocol, Propagate, SamplerConfig, SpanBatching, TelemetryConfig, ToolRule,
    Upstream,
};
use strata::log::CapturedLogs;
use strata::testbed::client::{McpClient, SseReader, Transport};
use strata::testbed::{SCENARIOS, Scenario, Testbed};
use support::otlp::{Attr, Mode, OtlpReceiver, ReceivedSpan, TOKEN_HEADER};
use support::post::Agent;
use support::upstream::{ScriptedUpstream, full, respond};
use support::{CallKey, LIMIT, Stack, just};
use tokio::time::{Instant, sleep, timeout};

use crate::support;

/// Export to `rx` over `protocol`, spans sent in small batches and soon.
pub fn export_to(rx: &OtlpReceiver, protocol: OtlpProtocol) -> TelemetryConfig {
    let (traces, metrics) = match protocol {
        OtlpProtocol::HttpProtobuf => (
            format!("{}/v1/traces", rx.endpoint()),
            format!("{}/v1/metrics", rx.endpoint()),
        ),
        OtlpProtocol::Grpc => (rx.endpoint(), rx.endpoint()),
    };
    TelemetryConfig {
        protocol,
        traces_endpoint: Some(traces),
        metrics_endpoint: Some(metrics),
        headers: vec![
            ("x-team".into(), "mcp".into()),
            (TOKEN_HEADER.into(), rx.token().into()),
        ],
        timeout: Duration::from_secs(2),
        ca_file: None,
        sampler: SamplerConfig::default(),
        batching: SpanBatching {
            schedule_delay: Duration::from_millis(20),
            ..SpanBatching::default()
        },
        metrics_interval: Duration::from_millis(200),
        propagate: Propagate::None,
        resource: vec![("service.name".into(), "strata-test".into())],
    }
}

fn with_export(rx: &OtlpReceiver, protocol: OtlpProtocol) -> impl FnOnce(&mut Config) {
    let telemetry = export_to(rx, protocol);
    move |c: &mut Config| {
        c.timeouts.resume_window = Duration::ZERO;
        c.telemetry = Some(telemetry);
    }
}

fn expected(s: &Scenario) -> Outcome {
    Outcome::from_label(s.expected_outcome).unwrap()
}

/// The `error.type` docs/opentelemetry.md's table gives an outcome (`status`: the agent's HTTP
/// status).
fn error_type(outcome: Outcome, status: u16, code: Option<i64>) -> Option<String> {
    use Outcome::*;
    match outcome {
        Success | ToolSuccess | InputRequired => None,
        ToolError => Some("tool_error".into()),
        JsonRpcError => code.map(|c| c.to_string()),
        HttpError => Some(status.to_string()),
        StreamIncomplete => Some("stream_incomplete".into()),
        MalformedJson => Some("malformed_json".into()),
        InvalidEnvelope => Some("invalid_envelope".into()),
        InvalidToolResult => Some("invalid_tool_result".into()),
        ClientCancelled => Some("client_cancelled".into()),
    }
}

/// Spans by kind, the SERVER ones keyed by tool.
fn servers(spans: &[ReceivedSpan]) -> BTreeMap<String, Vec<&ReceivedSpan>> {
    let mut by_tool: BTreeMap<String, Vec<&ReceivedSpan>> = BTreeMap::new();
    for span in spans.iter().filter(|s| s.kind_name() == "SERVER") {
        let tool = span.str_attr("gen_ai.tool.name").unwrap_or("").to_owned();
        by_tool.entry(tool).or_default().push(span);
    }
    by_tool
}

/// Checks a tools/call SERVER span and its CLIENT children against the scenario's outcome.
fn check_call(spans: &[ReceivedSpan], server: &ReceivedSpan, s: &Scenario, version: &str) {
    let outcome = expected(s);
    let ctx = format!("{}: {server:?}", s.tool);
    assert_eq!(server.name, format!("tools/call {}", s.tool), "{ctx}");
    assert_eq!(
        server.str_attr("mcp.method.name"),
        Some("tools/call"),
        "{ctx}"
    );
    assert_eq!(
        server.str_attr("gen_ai.operation.name"),
        Some("execute_tool"),
        "{ctx}"
    );
    assert_eq!(
        server.str_attr("mcp.protocol.version"),
        Some(version),
        "{ctx}"
    );
    assert_eq!(
        server.str_attr("strata.outcome"),
        Some(outcome.as_str()),
        "{ctx}"
    );
    assert_eq!(
        server.str_attr("strata.layer"),
        Some(outcome.layer().as_str()),
        "{ctx}"
    );
    assert_eq!(server.str_attr("network.transport"), Some("tcp"), "{ctx}");
    assert_eq!(
        server.str_attr("network.protocol.name"),
        Some("http"),
        "{ctx}"
    );
    assert_eq!(
        server.str_attr("client.address"),
        Some("127.0.0.1"),
        "{ctx}"
    );
    assert!(
        server.int_attr("client.port").is_some_and(|p| p > 0),
        "{ctx}"
    );
    assert!(server.str_attr("jsonrpc.request.id").is_some(), "{ctx}");
    assert_eq!(
        server
            .resource
            .get("service.name")
            .map(|a| format!("{a:?}")),
        Some("Str(\"strata-test\")".into()),
        "{ctx}"
    );
    let status = server.int_attr("http.response.status_code").unwrap() as u16;
    let code = server
        .str_attr("rpc.response.status_code")
        .map(|c| c.parse::<i64>().unwrap());
    let want = error_type(outcome, status, code);
    assert_eq!(
        server.str_attr("error.type").map(str::to_owned),
        want,
        "{ctx}"
    );
    // Status ERROR exactly when error.type is set.
    assert_eq!(server.status_code == 2, want.is_some(), "{ctx}");
    assert!(
        server.parent_span_id.is_empty(),
        "a root: no parent sent: {ctx}"
    );
    let children: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|c| c.parent_span_id == server.span_id)
        .collect();
    assert_eq!(children.len(), 1, "one attempt: {ctx}");
    let child = children[0];
    assert_eq!(child.kind_name(), "CLIENT", "{ctx}");
    assert_eq!(child.trace_id, server.trace_id, "{ctx}");
    assert_eq!(child.name, server.name, "{ctx}");
    assert_eq!(child.str_attr("server.address"), Some("127.0.0.1"), "{ctx}");
    assert_eq!(child.int_attr("strata.attempt"), Some(1), "{ctx}");
    assert!(
        child.start_ns >= server.start_ns && child.end_ns <= server.end_ns,
        "{ctx}"
    );
    if child.int_attr("http.response.status_code").is_some() {
        assert!(
            child
                .events
                .iter()
                .any(|(name, _)| name == "strata.first_byte"),
            "{ctx}"
        );
    }
}

#[tokio::test]
async fn every_scenario_is_one_server_span_with_its_attempt_in_both_eras() {
    let rx = OtlpReceiver::http().await;
    let stack = Stack::start(with_export(&rx, OtlpProtocol::HttpProtobuf)).await;
    let start = stack.counts();

    let modern = stack.modern(Transport::Http1);
    let mut calls = Vec::new();
    for s in SCENARIOS.iter().filter(|s| !s.legacy_only) {
        let args = match s.tool {
            "slow" => json!({"ms": 20}),
            "sse_drip" => json!({"count": 2, "interval_ms": 5}),
            _ => json!({}),
        };
        modern.call_tool(s.tool, args).await.unwrap();
        calls.push((s, "2026-07-28"));
    }
    let counted: u64 = support::delta(&start, &stack.counts()).values().sum();
    let spans = rx.wait_spans(2 * counted as usize, LIMIT).await;
    let by_tool = servers(&spans);
    let total: usize = by_tool.values().map(Vec::len).sum();
    assert_eq!(total as u64, counted, "one SERVER span per counted call");
    for (s, version) in calls {
        let server = by_tool[s.tool][0];
        check_call(&spans, server, s, version);
    }
}

#[tokio::test]
async fn a_parent_from_meta_wins_over_the_header_and_sampling_follows_it() {
    let rx = OtlpReceiver::http().await;
    let stack = Stack::start(with_export(&rx, OtlpProtocol::HttpProtobuf)).await;
    let agent = Agent::new(stack.strata.listen);
    let meta_parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let header_parent = "00-11111111111111111111111111111111-2222222222222222-01";
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "ok", "arguments": {}, "_meta": {
            "traceparent": meta_parent, "tracestate": "team=mcp",
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}
        }}
    });
    agent.post(&body, &[("traceparent", header_parent)]).await;
    let spans = rx.wait_spans(2, LIMIT).await;
    let server = spans.iter().find(|s| s.kind_name() == "SERVER").unwrap();
    assert_eq!(server.trace_id, "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(server.parent_span_id, "b7ad6b7169203331");

    // The header, when the body has no parent; a parent not sampled: no spans at all.
    agent
        .call(json!(2), "ok", json!({}), &[("traceparent", header_parent)])
        .await;
    let unsampled = "00-33333333333333333333333333333333-4444444444444444-00";
    agent
        .call(json!(3), "ok", json!({}), &[("traceparent", unsampled)])
        .await;
    agent.call(json!(4), "ok", json!({}), &[]).await;
    let spans = rx.wait_spans(8, LIMIT).await;
    let traces: Vec<&str> = spans
        .iter()
        .filter(|s| s.kind_name() == "SERVER")
        .map(|s| s.trace_id.as_str())
        .collect();
    assert_eq!(traces.len(), 3, "{traces:?}");
    assert!(traces.contains(&"11111111111111111111111111111111"));
    assert!(!traces.contains(&"33333333333333333333333333333333"));
}

#[tokio::test]
async fn grpc_export_carries_the_same_spans_and_the_duration_histogram() {
    let rx = OtlpReceiver::grpc().await;
    let stack = Stack::start(with_export(&rx, OtlpProtocol::Grpc)).await;
    let client = stack.modern(Transport::Http1);
    client.call_tool("tool_error", json!({})).await.unwrap();
    let spans = rx.wait_spans(2, LIMIT).await;
    let server = spans.iter().find(|s| s.kind_name() == "SERVER").unwrap();
    assert_eq!(server.str_attr("error.type"), Some("tool_error"));
    assert_eq!(server.status_code, 2);
    let metric = rx
        .wait_metric("mcp.server.operation.duration", LIMIT)
        .await
        .expect("the server duration histogram");
    assert_eq!(metric.unit, "s");
    assert!(
        rx.last_headers()
            .iter()
            .any(|(k, v)| k == "x-team" && v == "mcp")
    );
}

#[tokio::test]
async fn a_stalled_collector_drops_spans_counted_and_never_slows_calls() {
    let rx = OtlpReceiver::http().await;
    rx.set_mode(Mode::Stall);
    let mut telemetry = export_to(&rx, OtlpProtocol::HttpProtobuf);
    telemetry.batching.max_queue_size = 16;
    telemetry.batching.max_export_batch_size = 4;
    let stack = Stack::start(move |c| c.telemetry = Some(telemetry)).await;
    let agent = Agent::new(stack.strata.listen);
    let started = tokio::time::Instant::now();
    for id in 0..200 {
        let answer = agent.call(json!(id), "ok", json!({}), &[]).await;
        assert_eq!(answer.status, 200);
    }
    // 200 calls with a collector that never answers: each was answered at once (the bound is
    // loose on purpose; the export timeout alone is 2 s).
    assert!(started.elapsed() < Duration::from_secs(8));
    let rendered = stack.strata.metrics.render();
    let dropped = rendered
        .lines()
        .find(|l| l.starts_with("strata_telemetry_dropped_total{signal=\"traces\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap();
    assert!(dropped >= 200.0, "dropped {dropped} of 400 spans");
}

/// A tools/call answer: 503 for the first request, then a tool result.
fn fail_once()
-> impl Fn(&support::upstream::Recorded) -> http::Response<support::upstream::ScriptBody> {
    let calls = std::sync::atomic::AtomicUsize::new(0);
    move |_| {
        if calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            return support::upstream::respond(503, &[], support::upstream::full("busy"));
        }
        let body = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}"#;
        support::upstream::respond(
            200,
            &[("content-type", "application/json")],
            support::upstream::full(body),
        )
    }
}

#[tokio::test]
async fn a_retried_call_shows_its_attempts_side_by_side_and_propagates_each() {
    let rx = OtlpReceiver::http().await;
    let upstream = support::upstream::ScriptedUpstream::spawn(fail_once()).await;
    let mut telemetry = export_to(&rx, OtlpProtocol::HttpProtobuf);
    telemetry.propagate = Propagate::Header;
    let strata = support::strata(upstream.addr, move |c| {
        c.telemetry = Some(telemetry);
        c.policy.retry.initial_backoff = Duration::from_millis(1);
        c.policy.retry.max_backoff = Duration::from_millis(2);
        c.policy.tools = vec![ToolRule {
            tool: Some(Glob::new("search")),
            method: None,
            idempotent: true,
        }];
    })
    .await;
    let agent = Agent::new(strata.listen);
    let answer = agent.call(json!(1), "search", json!({}), &[]).await;
    assert_eq!(answer.status, 200);
    let spans = rx.wait_spans(3, LIMIT).await;
    let server = spans.iter().find(|s| s.kind_name() == "SERVER").unwrap();
    assert_eq!(server.int_attr("strata.attempts"), Some(2));
    assert_eq!(server.str_attr("strata.retry_origin"), Some("proxy"));
    assert_eq!(server.status_code, 0, "the call succeeded: {server:?}");
    let mut clients: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|s| s.parent_span_id == server.span_id)
        .collect();
    clients.sort_by_key(|c| c.int_attr("strata.attempt"));
    assert_eq!(clients.len(), 2, "{spans:?}");
    let (first, second) = (clients[0], clients[1]);
    assert_eq!(first.int_attr("http.response.status_code"), Some(503));
    assert_eq!(first.str_attr("error.type"), Some("503"));
    assert_eq!(first.str_attr("strata.retry.reason"), Some("http_503"));
    assert_eq!(first.status_code, 2);
    assert_eq!(second.int_attr("http.response.status_code"), Some(200));
    assert_eq!(second.str_attr("error.type"), None);
    assert!(first.end_ns <= second.start_ns, "side by side, in order");
    // Each attempt told the server its own CLIENT span.
    let seen: Vec<String> = upstream
        .requests()
        .iter()
        .map(|r| r.headers["traceparent"].to_str().unwrap().to_owned())
        .collect();
    let want: Vec<String> = [first, second]
        .iter()
        .map(|c| format!("00-{}-{}-01", c.trace_id, c.span_id))
        .collect();
    assert_eq!(seen, want);
}

#[tokio::test]
async fn without_propagation_the_request_goes_out_as_sent() {
    let rx = OtlpReceiver::http().await;
    let upstream = support::upstream::ScriptedUpstream::spawn(fail_once()).await;
    let telemetry = export_to(&rx, OtlpProtocol::HttpProtobuf);
    let strata = support::strata(upstream.addr, move |c| c.telemetry = Some(telemetry)).await;
    let agent = Agent::new(strata.listen);
    let header = "00-11111111111111111111111111111111-2222222222222222-01";
    agent
        .call(json!(1), "search", json!({}), &[("traceparent", header)])
        .await;
    agent.call(json!(2), "search", json!({}), &[]).await;
    let seen = upstream.requests();
    assert_eq!(seen[0].headers["traceparent"], header);
    assert!(!seen[1].headers.contains_key("traceparent"));
}

// --- Sessions, counts, cancellations, resumptions, replays, reloads, shutdown. ---

/// How long a span that should not exist gets to show up: many times the 20 ms schedule delay
/// of [`export_to`]. Only ever waited to see that nothing more came.
const SETTLE: Duration = Duration::from_millis(300);

/// Arguments that keep the slow scenarios quick; the rest run with their defaults.
fn scenario_args(tool: &str) -> Value {
    match tool {
        "slow" => json!({"ms": 20}),
        "sse_drip" => json!({"count": 2, "interval_ms": 5}),
        _ => json!({}),
    }
}

/// The SERVER spans.
fn server_spans(spans: &[ReceivedSpan]) -> Vec<&ReceivedSpan> {
    spans.iter().filter(|s| s.kind_name() == "SERVER").collect()
}

/// The CLIENT children of `server`, in attempt order.
fn children_of<'a>(spans: &'a [ReceivedSpan], server: &ReceivedSpan) -> Vec<&'a ReceivedSpan> {
    let mut children: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|c| c.trace_id == server.trace_id && c.parent_span_id == server.span_id)
        .collect();
    children.sort_by_key(|c| c.int_attr("strata.attempt"));
    children
}

fn has_event(span: &ReceivedSpan, name: &str) -> bool {
    span.events.iter().any(|(n, _)| n == name)
}

/// The series key a SERVER span stands for, as `strata_calls_total` labels it.
fn span_key(span: &ReceivedSpan) -> CallKey {
    CallKey {
        method: span.str_attr("mcp.method.name").unwrap_or("").to_owned(),
        tool: span.str_attr("gen_ai.tool.name").unwrap_or("").to_owned(),
        layer: span.str_attr("strata.layer").unwrap_or("").to_owned(),
        outcome: span.str_attr("strata.outcome").unwrap_or("").to_owned(),
    }
}

/// SERVER spans per series key.
fn span_counts(spans: &[ReceivedSpan]) -> BTreeMap<CallKey, u64> {
    let mut counts = BTreeMap::new();
    for span in server_spans(spans) {
        *counts.entry(span_key(span)).or_insert(0) += 1;
    }
    counts
}

/// The spans once there are `n`, and whatever else came in [`SETTLE`] more.
async fn settled_spans(rx: &OtlpReceiver, n: usize) -> Vec<ReceivedSpan> {
    rx.wait_spans(n, LIMIT).await;
    sleep(SETTLE).await;
    rx.spans()
}

/// The per-call log records, once there are `n` (or whatever there is after [`LIMIT`]).
async fn wait_all_records(logs: &CapturedLogs, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + LIMIT;
    loop {
        let found = support::records(logs);
        if found.len() >= n || Instant::now() >= deadline {
            return found;
        }
        sleep(Duration::from_millis(5)).await;
    }
}

/// The `jsonrpc.request.id` of each span, sorted.
fn request_ids(spans: &[ReceivedSpan]) -> Vec<String> {
    let mut ids: Vec<String> = spans
        .iter()
        .map(|s| s.str_attr("jsonrpc.request.id").unwrap_or("").to_owned())
        .collect();
    ids.sort();
    ids
}

/// 1. The legacy era, in one session over h2, through every scenario (the legacy-only ones
/// too): one SERVER span per counted call, initialize included, each carrying the session in
/// the hashed form of its log record, the era's protocol version and the agent's HTTP/2.
#[tokio::test]
async fn a_legacy_session_over_h2_through_every_scenario_carries_its_session() {
    let (_guard, logs) = support::capture();
    let rx = OtlpReceiver::http().await;
    let stack = Stack::start(with_export(&rx, OtlpProtocol::HttpProtobuf)).await;
    let start = stack.counts();
    let legacy = stack.legacy(Transport::Http2).await;
    for s in SCENARIOS {
        legacy
            .call_tool(s.tool, scenario_args(s.tool))
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", s.tool));
    }
    let requests = SCENARIOS.len() as u64 + 1; // and initialize
    let counted = stack.delta_after(&start, requests).await;
    assert_eq!(counted.values().sum::<u64>(), requests, "{counted:?}");
    let spans = rx.wait_spans(2 * requests as usize, LIMIT).await;
    let recs = wait_all_records(&logs, requests as usize).await;
    assert_eq!(recs.len() as u64, requests);
    assert_eq!(
        span_counts(&spans),
        counted,
        "one SERVER span per counted call"
    );

    // The session as the log line carries it (hashed), the same on every record.
    let session = recs[0]["session"].as_str().expect("a session").to_owned();
    assert!(
        recs.iter().all(|r| r["session"] == session.as_str()),
        "{recs:?}"
    );
    let raw = legacy.session().unwrap();
    assert_ne!(session, raw);
    for span in &spans {
        let ctx = format!("{span:?}");
        assert_eq!(
            span.str_attr("mcp.session.id"),
            Some(session.as_str()),
            "{ctx}"
        );
        assert_eq!(
            span.str_attr("mcp.protocol.version"),
            Some("2025-11-25"),
            "{ctx}"
        );
        assert!(!ctx.contains(raw), "the raw session id was exported: {ctx}");
    }
    for server in server_spans(&spans) {
        assert_eq!(
            server.str_attr("network.protocol.version"),
            Some("2"),
            "{server:?}"
        );
        // The record with the same id agrees on the session and the outcome.
        let id = server.str_attr("jsonrpc.request.id").unwrap();
        let rec = recs
            .iter()
            .find(|r| r["jsonrpc_id"] == id)
            .unwrap_or_else(|| panic!("no record with id {id}: {recs:?}"));
        assert_eq!(rec["session"], session.as_str(), "{rec}");
        assert_eq!(server.str_attr("strata.outcome"), rec["outcome"].as_str());
    }

    let initialize: Vec<&ReceivedSpan> = server_spans(&spans)
        .into_iter()
        .filter(|s| s.str_attr("mcp.method.name") == Some("initialize"))
        .collect();
    assert_eq!(initialize.len(), 1, "{spans:?}");
    let init = initialize[0];
    assert_eq!(init.name, "initialize");
    assert_eq!(init.str_attr("gen_ai.tool.name"), None);
    assert_eq!(init.str_attr("strata.outcome"), Some("SUCCESS"));
    assert_eq!(init.str_attr("error.type"), None);
    assert_eq!(init.status_code, 0);
    assert_eq!(children_of(&spans, init).len(), 1, "its one attempt");

    let by_tool = servers(&spans);
    for s in SCENARIOS {
        assert_eq!(by_tool[s.tool].len(), 1, "{}", s.tool);
        check_call(&spans, by_tool[s.tool][0], s, "2025-11-25");
    }
}

/// A batch of three requests, answered in one array by a scripted upstream.
const BATCH3: &str = r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{}}},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"b","arguments":{}}},{"jsonrpc":"2.0","id":"three","method":"tools/list"}]"#;
const BATCH3_ANSWER: &str = r#"[{"jsonrpc":"2.0","id":"three","result":{"tools":[]}},{"jsonrpc":"2.0","id":2,"result":{"content":[],"isError":true}},{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":false}}]"#;

/// Strata in front of an upstream that answers [`BATCH3`], exporting to `rx`.
async fn batch_strata(
    rx: &OtlpReceiver,
    propagate: Propagate,
) -> (ScriptedUpstream, strata::app::Running) {
    let upstream = ScriptedUpstream::spawn(|_| {
        respond(
            200,
            &[("content-type", "application/json")],
            full(BATCH3_ANSWER),
        )
    })
    .await;
    let mut telemetry = export_to(rx, OtlpProtocol::HttpProtobuf);
    telemetry.propagate = propagate;
    let strata = support::strata(upstream.addr, move |c| c.telemetry = Some(telemetry)).await;
    (upstream, strata)
}

/// POSTs [`BATCH3`] in a 2025-03-26 session.
async fn post_batch(strata: &strata::app::Running) {
    let client = McpClient::new(
        strata.listen,
        strata::testbed::client::Mode::Legacy {
            version: "2025-03-26".into(),
            session: Some("batch-session".into()),
        },
    )
    .with_timeout(LIMIT);
    let request = client
        .post_builder("tools/call", None)
        .body(Full::new(Bytes::from_static(BATCH3.as_bytes())))
        .unwrap();
    let reply = client.exchange(Value::Null, request).await.unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(&reply.body[..], BATCH3_ANSWER.as_bytes());
}

/// The batch's three SERVER spans: each its own span (and, `own_traces`, its own trace), with
/// the exchange's one attempt as its CLIENT child.
fn check_batch(spans: &[ReceivedSpan], own_traces: bool) {
    let batch: Vec<&ReceivedSpan> = server_spans(spans)
        .into_iter()
        .filter(|s| s.str_attr("mcp.protocol.version") == Some("2025-03-26"))
        .collect();
    assert_eq!(batch.len(), 3, "{spans:?}");
    let want = [
        ("1", "tools/call a", "TOOL_SUCCESS"),
        ("2", "tools/call b", "TOOL_ERROR"),
        ("three", "tools/list", "SUCCESS"),
    ];
    for (id, name, outcome) in want {
        let server = batch
            .iter()
            .find(|s| s.str_attr("jsonrpc.request.id") == Some(id))
            .unwrap_or_else(|| panic!("no SERVER span for id {id}: {batch:?}"));
        assert_eq!(server.name, name);
        assert_eq!(server.str_attr("strata.outcome"), Some(outcome));
        assert_eq!(server.int_attr("strata.attempts"), Some(1));
        let children = children_of(spans, server);
        assert_eq!(
            children.len(),
            1,
            "{id}: the exchange's attempt: {children:?}"
        );
        assert_eq!(children[0].int_attr("strata.attempt"), Some(1));
        assert_eq!(children[0].int_attr("http.response.status_code"), Some(200));
    }
    let ids: BTreeSet<&str> = batch.iter().map(|s| s.span_id.as_str()).collect();
    assert_eq!(ids.len(), 3, "each call its own SERVER span: {batch:?}");
    if own_traces {
        let traces: BTreeSet<&str> = batch.iter().map(|s| s.trace_id.as_str()).collect();
        assert_eq!(traces.len(), 3, "each call its own trace: {batch:?}");
    }
    let clients: BTreeSet<(&str, &str)> = spans
        .iter()
        .filter(|s| s.kind_name() == "CLIENT")
        .filter(|c| batch.iter().any(|s| s.span_id == c.parent_span_id))
        .map(|c| (c.trace_id.as_str(), c.span_id.as_str()))
        .collect();
    assert_eq!(clients.len(), 3, "three distinct CLIENT spans: {spans:?}");
}

/// 2. Over a mixed run — both eras, other methods, a batch of three — the SERVER spans, the
/// `strata_calls_total` delta and the log lines agree, series by series; a batch's calls are
/// each their own trace.
#[tokio::test]
async fn spans_counted_calls_and_log_lines_agree_over_a_mixed_run() {
    let (_guard, logs) = support::capture();
    let rx = OtlpReceiver::http().await;
    let stack = Stack::start(with_export(&rx, OtlpProtocol::HttpProtobuf)).await;
    let start = stack.counts();

    let modern = stack.modern(Transport::Http1);
    for tool in [
        "ok",
        "tool_error",
        "sse_progress",
        "http_429",
        "malformed_json",
    ] {
        modern.call_tool(tool, json!({})).await.unwrap();
    }
    modern.request("server/discover", json!({})).await.unwrap();
    modern.request("tools/list", json!({})).await.unwrap();
    let legacy = stack.legacy(Transport::Http1).await;
    legacy.request("tools/list", Value::Null).await.unwrap();
    legacy.request("ping", Value::Null).await.unwrap();
    for tool in ["ok", "jsonrpc_error", "sse_closed_early", "empty_202"] {
        legacy.call_tool(tool, json!({})).await.unwrap();
    }
    let testbed_calls = 7 + 7; // initialize among the legacy ones
    let mut counted = stack.delta_after(&start, testbed_calls).await;

    let (_upstream, batch) = batch_strata(&rx, Propagate::None).await;
    let batch_start = support::counts(&batch);
    post_batch(&batch).await;
    let batch_counted = support::delta_after(&batch, &batch_start, 3).await;
    for (key, n) in batch_counted {
        *counted.entry(key).or_insert(0) += n;
    }

    let total: u64 = counted.values().sum();
    assert_eq!(total, testbed_calls + 3, "{counted:?}");
    // One attempt each: a SERVER and a CLIENT span per call.
    let spans = settled_spans(&rx, 2 * total as usize).await;
    let recs = wait_all_records(&logs, total as usize).await;
    assert_eq!(
        span_counts(&spans),
        counted,
        "SERVER spans = strata_calls_total"
    );
    assert_eq!(server_spans(&spans).len() as u64, total);
    assert_eq!(spans.len() as u64, 2 * total, "{spans:?}");
    assert_eq!(recs.len() as u64, total, "log lines = strata_calls_total");
    let mut from_logs: BTreeMap<CallKey, u64> = BTreeMap::new();
    for r in &recs {
        let key = CallKey {
            method: r["method"].as_str().unwrap().to_owned(),
            tool: r
                .get("tool")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            layer: r["layer"].as_str().unwrap().to_owned(),
            outcome: r["outcome"].as_str().unwrap().to_owned(),
        };
        *from_logs.entry(key).or_insert(0) += 1;
    }
    assert_eq!(from_logs, counted, "log lines, series by series");
    check_batch(&spans, true);
}

/// A batch while strata propagates its CLIENT span to the server: the calls still each have
/// their own SERVER span and CLIENT child. The one upstream request can name only one CLIENT
/// span, so the calls may share a trace; but three spans with one span id are one span to
/// every backend.
#[tokio::test]
async fn a_batch_under_propagation_is_still_three_server_spans() {
    let rx = OtlpReceiver::http().await;
    let (upstream, batch) = batch_strata(&rx, Propagate::Header).await;
    let start = support::counts(&batch);
    post_batch(&batch).await;
    let counted = support::delta_after(&batch, &start, 3).await;
    assert_eq!(counted.values().sum::<u64>(), 3);
    let spans = settled_spans(&rx, 6).await;
    assert_eq!(span_counts(&spans), counted);
    assert!(upstream.last().headers.contains_key("traceparent"));
    check_batch(&spans, false);
}

/// 3a. The agent leaves: a SERVER span typed `client_cancelled`, whether it left mid-stream
/// (after the answer's head) or while strata still waited for the head.
#[tokio::test]
async fn an_agent_that_leaves_is_a_client_cancelled_span() {
    let rx = OtlpReceiver::http().await;
    let stack = Stack::start(with_export(&rx, OtlpProtocol::HttpProtobuf)).await;

    // Mid-SSE, over h2.
    let before = stack.counts();
    let client = stack.modern(Transport::Http2);
    let drip = json!({"count": 1000, "interval_ms": 20});
    let (_, resp) = client.open_tool("sse_drip", drip).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut reader = SseReader::new(resp.into_body()).with_timeout(LIMIT);
    for _ in 0..2 {
        reader.next_event().await.unwrap().unwrap();
    }
    drop(reader);
    let d = stack.delta_after(&before, 1).await;
    assert_eq!(d, just("tools/call", "sse_drip", Outcome::ClientCancelled));

    // Before the head, over HTTP/1.1.
    let before = stack.counts();
    let client = Arc::new(stack.modern(Transport::Http1));
    let calling = client.clone();
    let call = tokio::spawn(async move { calling.call_tool("slow", json!({"ms": 60_000})).await });
    let deadline = Instant::now() + LIMIT;
    while stack.testbed.calls_of("slow") < 1 {
        assert!(
            Instant::now() < deadline,
            "the call never reached the testbed"
        );
        sleep(Duration::from_millis(5)).await;
    }
    call.abort();
    drop(client);
    let d = stack.delta_after(&before, 1).await;
    assert_eq!(d, just("tools/call", "slow", Outcome::ClientCancelled));

    let spans = settled_spans(&rx, 4).await;
    assert_eq!(spans.len(), 4, "{spans:?}");
    let by_tool = servers(&spans);
    for tool in ["sse_drip", "slow"] {
        assert_eq!(by_tool[tool].len(), 1, "{tool}");
        let server = by_tool[tool][0];
        let ctx = format!("{tool}: {server:?}");
        assert_eq!(
            server.str_attr("strata.outcome"),
            Some("CLIENT_CANCELLED"),
            "{ctx}"
        );
        assert_eq!(server.str_attr("strata.layer"), Some("transport"), "{ctx}");
        assert_eq!(
            server.str_attr("error.type"),
            Some("client_cancelled"),
            "{ctx}"
        );
        assert_eq!(server.status_code, 2, "{ctx}");
        let children = children_of(&spans, server);
        assert_eq!(children.len(), 1, "{ctx}");
        assert_eq!(
            children[0].str_attr("error.type"),
            Some("client_cancelled"),
            "{ctx}"
        );
    }
    let drip = by_tool["sse_drip"][0];
    assert_eq!(drip.int_attr("http.response.status_code"), Some(200));
    assert!(
        drip.int_attr("strata.sse.events").is_some_and(|n| n >= 2),
        "{drip:?}"
    );
    assert_eq!(drip.str_attr("network.protocol.version"), Some("2"));
    assert!(has_event(children_of(&spans, drip)[0], "strata.first_byte"));
    let slow = by_tool["slow"][0];
    assert_eq!(
        slow.int_attr("http.response.status_code"),
        None,
        "no head: {slow:?}"
    );
    assert_eq!(slow.str_attr("network.protocol.version"), Some("1.1"));
    let attempt = children_of(&spans, slow)[0];
    assert_eq!(attempt.int_attr("http.response.status_code"), None);
    assert!(!has_event(attempt, "strata.first_byte"), "{attempt:?}");
}

/// 3b. A resumable stream that closes early and is never resumed: STREAM_INCOMPLETE once the
/// resume window has passed, one attempt.
#[tokio::test]
async fn an_unresumed_stream_is_a_stream_incomplete_span_after_the_window() {
    let rx = OtlpReceiver::http().await;
    let telemetry = export_to(&rx, OtlpProtocol::HttpProtobuf);
    let stack = Stack::start(move |c| {
        c.timeouts.resume_window = Duration::from_millis(200);
        c.telemetry = Some(telemetry);
    })
    .await;
    let client = stack.legacy(Transport::Http1).await;
    let before = stack.counts();
    let post = client.call_tool("sse_resumable", json!({})).await.unwrap();
    assert_eq!(post.status, StatusCode::OK);
    let d = stack.delta_after(&before, 1).await;
    assert_eq!(
        d,
        just("tools/call", "sse_resumable", Outcome::StreamIncomplete)
    );
    let spans = settled_spans(&rx, 4).await; // initialize and the call, one attempt each
    let by_tool = servers(&spans);
    assert_eq!(by_tool["sse_resumable"].len(), 1, "{spans:?}");
    let server = by_tool["sse_resumable"][0];
    assert_eq!(server.str_attr("strata.outcome"), Some("STREAM_INCOMPLETE"));
    assert_eq!(server.str_attr("error.type"), Some("stream_incomplete"));
    assert_eq!(server.status_code, 2);
    assert_eq!(server.str_attr("mcp.protocol.version"), Some("2025-11-25"));
    let children = children_of(&spans, server);
    assert_eq!(children.len(), 1, "the POST only: {children:?}");
    assert_eq!(children[0].attr("strata.resumed"), None);
    assert_eq!(children[0].int_attr("http.response.status_code"), Some(200));
}

/// 3c. A resumed call: the POST's stream closes early, the agent resumes it with GET and
/// Last-Event-ID and gets the answer. One SERVER span, TOOL_SUCCESS, and two CLIENT children:
/// the POST, then the resuming GET marked `strata.resumed`.
#[tokio::test]
async fn a_resumed_call_is_one_server_span_with_the_resumption_as_second_attempt() {
    let (_guard, logs) = support::capture();
    let rx = OtlpReceiver::http().await;
    let telemetry = export_to(&rx, OtlpProtocol::HttpProtobuf);
    // A window long enough for the GET on a busy machine: nothing here waits for it to end.
    let stack = Stack::start(move |c| {
        c.timeouts.resume_window = Duration::from_secs(5);
        c.telemetry = Some(telemetry);
    })
    .await;
    let client = stack.legacy(Transport::Http1).await;
    let before = stack.counts();
    let post = client.call_tool("sse_resumable", json!({})).await.unwrap();
    assert_eq!(post.status, StatusCode::OK);
    let last_id = post
        .sse_events()
        .iter()
        .filter_map(|e| e.id.clone())
        .last()
        .unwrap();
    let resp = client.get_stream(Some(&last_id)).await.unwrap();
    let get = strata::testbed::client::collect(Value::Null, resp, LIMIT)
        .await
        .unwrap();
    assert_eq!(get.status, StatusCode::OK);
    let d = stack.delta_after(&before, 1).await;
    assert_eq!(d, just("tools/call", "sse_resumable", Outcome::ToolSuccess));

    let spans = settled_spans(&rx, 5).await; // initialize + its attempt, the call + two
    assert_eq!(spans.len(), 5, "{spans:?}");
    let by_tool = servers(&spans);
    assert_eq!(by_tool["sse_resumable"].len(), 1, "{spans:?}");
    let server = by_tool["sse_resumable"][0];
    let ctx = format!("{server:?}");
    assert_eq!(
        server.str_attr("strata.outcome"),
        Some("TOOL_SUCCESS"),
        "{ctx}"
    );
    assert_eq!(
        server.str_attr("strata.layer"),
        Some("application"),
        "{ctx}"
    );
    assert_eq!(server.str_attr("error.type"), None, "{ctx}");
    assert_eq!(server.status_code, 0, "{ctx}");
    assert_eq!(
        server.int_attr("http.response.status_code"),
        Some(200),
        "{ctx}"
    );
    let rec = &support::wait_records(&logs, "sse_resumable", 1).await[0];
    assert_eq!(
        server.int_attr("strata.sse.events"),
        rec["sse_events"].as_i64(),
        "as the log line: {rec}"
    );
    assert_eq!(server.str_attr("mcp.session.id"), rec["session"].as_str());
    assert_eq!(
        server.int_attr("strata.attempts"),
        rec["attempts"].as_i64(),
        "as the log line: {rec}"
    );
    let children = children_of(&spans, server);
    assert_eq!(children.len(), 2, "the POST and the GET: {children:?}");
    let (first, second) = (children[0], children[1]);
    assert_eq!(first.int_attr("strata.attempt"), Some(1));
    assert_eq!(first.attr("strata.resumed"), None, "{first:?}");
    assert_eq!(first.int_attr("http.response.status_code"), Some(200));
    assert_eq!(second.int_attr("strata.attempt"), Some(2));
    assert_eq!(
        second.attr("strata.resumed"),
        Some(&Attr::Bool(true)),
        "{second:?}"
    );
    assert_eq!(second.int_attr("http.response.status_code"), Some(200));
    assert_eq!(second.str_attr("error.type"), None);
    assert!(first.end_ns <= second.start_ns, "the GET follows the POST");
    for child in [first, second] {
        assert!(
            child.start_ns >= server.start_ns && child.end_ns <= server.end_ns,
            "{child:?} within {server:?}"
        );
    }
}

/// 4. An Idempotency-Key repeat answered from the record: a SERVER span with no attempt, the
/// replay event, the agent as the retry's origin, and no CLIENT child.
#[tokio::test]
async fn an_idempotency_replay_is_a_server_span_without_an_attempt() {
    let rx = OtlpReceiver::http().await;
    let stack = Stack::start(with_export(&rx, OtlpProtocol::HttpProtobuf)).await;
    let agent = Agent::new(stack.strata.listen);
    let key = ("idempotency-key", "otel-order-7");
    let first = agent.call(json!(1), "ok", json!({}), &[key]).await;
    assert_eq!(first.status, 200);
    let repeat = agent.call(json!("two"), "ok", json!({}), &[key]).await;
    assert_eq!(repeat.status, 200);
    assert_eq!(repeat.header("idempotent-replayed"), Some("true"));
    assert_eq!(stack.testbed.calls_of("ok"), 1, "one upstream execution");

    let spans = settled_spans(&rx, 3).await;
    assert_eq!(spans.len(), 3, "{spans:?}");
    let server = |id: &str| {
        *server_spans(&spans)
            .iter()
            .find(|s| s.str_attr("jsonrpc.request.id") == Some(id))
            .unwrap_or_else(|| panic!("no SERVER span for {id}: {spans:?}"))
    };
    let (executed, replayed) = (server("1"), server("two"));
    assert_eq!(executed.int_attr("strata.attempts"), Some(1));
    assert_eq!(executed.str_attr("strata.retry_origin"), Some("none"));
    assert!(!has_event(executed, "strata.idempotency.replay"));
    let children = children_of(&spans, executed);
    assert_eq!(children.len(), 1, "{children:?}");
    assert_eq!(children[0].int_attr("strata.attempt"), Some(1));

    let ctx = format!("{replayed:?}");
    assert_eq!(replayed.name, "tools/call ok", "{ctx}");
    assert_eq!(replayed.int_attr("strata.attempts"), Some(0), "{ctx}");
    assert_eq!(
        replayed.str_attr("strata.retry_origin"),
        Some("client"),
        "{ctx}"
    );
    assert_eq!(
        replayed.str_attr("strata.outcome"),
        Some("TOOL_SUCCESS"),
        "{ctx}"
    );
    assert_eq!(replayed.str_attr("error.type"), None, "{ctx}");
    let replay = replayed
        .events
        .iter()
        .find(|(name, _)| name == "strata.idempotency.replay")
        .unwrap_or_else(|| panic!("no replay event: {ctx}"));
    assert_eq!(replay.1.get("strata.upstream_calls"), Some(&Attr::Int(0)));
    assert!(
        children_of(&spans, replayed).is_empty(),
        "no CLIENT child: {spans:?}"
    );
    assert_ne!(replayed.trace_id, executed.trace_id);
}

/// strata's defaults in front of `upstream`, on loopback port 0 (as `support::strata`).
fn config_for(upstream: SocketAddr) -> Config {
    let up = Upstream::parse(&format!("http://{upstream}")).unwrap();
    let mut config = Config::default_with_upstream(up);
    config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    config.admin = SocketAddr::from(([127, 0, 0, 1], 0));
    config.timeouts.drain = Duration::from_millis(500);
    config
}

/// 5a. A reload that points export at another collector: later calls' spans reach the new one
/// and not the old; a reload without telemetry: no spans anywhere.
#[tokio::test]
async fn a_reload_moves_export_to_the_new_collector_then_turns_it_off() {
    let (addr, _testbed, _handle) = Testbed::spawn_local().await.unwrap();
    let (a, b) = (OtlpReceiver::http().await, OtlpReceiver::http().await);
    let mut config = config_for(addr);
    config.telemetry = Some(export_to(&a, OtlpProtocol::HttpProtobuf));
    let running = timeout(LIMIT, strata::app::start(&config))
        .await
        .unwrap()
        .unwrap();
    // One agent, one pooled connection throughout: the reload must reach it.
    let agent = Agent::new(running.listen);
    assert_eq!(agent.call(json!(1), "ok", json!({}), &[]).await.status, 200);
    assert_eq!(a.wait_spans(2, LIMIT).await.len(), 2);

    config.telemetry = Some(export_to(&b, OtlpProtocol::HttpProtobuf));
    running.reload(&config).unwrap();
    assert_eq!(agent.call(json!(2), "ok", json!({}), &[]).await.status, 200);
    let at_b = settled_spans(&b, 2).await;
    assert_eq!(request_ids(&at_b), ["2", "2"], "{at_b:?}");
    assert_eq!(
        request_ids(&a.spans()),
        ["1", "1"],
        "the old collector got nothing new"
    );

    config.telemetry = None;
    running.reload(&config).unwrap();
    let before = support::counts(&running);
    assert_eq!(agent.call(json!(3), "ok", json!({}), &[]).await.status, 200);
    let d = support::delta_after(&running, &before, 1).await;
    assert_eq!(d, just("tools/call", "ok", Outcome::ToolSuccess));
    sleep(SETTLE).await;
    assert_eq!(request_ids(&a.spans()), ["1", "1"]);
    assert_eq!(request_ids(&b.spans()), ["2", "2"], "export is off");
    let text = running.metrics.render();
    assert!(
        text.contains("strata_config_reloads_total{result=\"ok\"} 2"),
        "{text}"
    );
    timeout(LIMIT, running.stop()).await.unwrap();
}

/// The metric `name` in one export request.
fn metric_in<'a>(request: &'a ExportMetricsServiceRequest, name: &str) -> Option<&'a Metric> {
    request
        .resource_metrics
        .iter()
        .flat_map(|r| &r.scope_metrics)
        .flat_map(|s| &s.metrics)
        .find(|m| m.name == name)
}

/// `strata.calls`: the sum over its data points, and its temporality and monotonicity.
fn calls_sum(metric: &Metric) -> (i64, i32, bool) {
    let Some(Data::Sum(sum)) = &metric.data else {
        panic!("strata.calls is not a sum: {metric:?}");
    };
    let total = sum
        .data_points
        .iter()
        .map(|p| match p.value {
            Some(number_data_point::Value::AsInt(n)) => n,
            Some(number_data_point::Value::AsDouble(d)) => d as i64,
            None => 0,
        })
        .sum();
    (total, sum.aggregation_temporality, sum.is_monotonic)
}

/// A histogram's count over its data points, and its temporality.
fn histogram_count(metric: &Metric) -> (u64, i32) {
    let Some(Data::Histogram(histogram)) = &metric.data else {
        panic!("{} is not a histogram: {metric:?}", metric.name);
    };
    let count = histogram.data_points.iter().map(|p| p.count).sum();
    (count, histogram.aggregation_temporality)
}

/// The latest export request that carries `strata.calls`, once its sum is at least `n`.
async fn wait_calls(rx: &OtlpReceiver, n: i64) -> Option<ExportMetricsServiceRequest> {
    let deadline = Instant::now() + LIMIT;
    loop {
        let latest = rx
            .metric_requests()
            .into_iter()
            .rev()
            .find(|r| metric_in(r, "strata.calls").is_some());
        if let Some(request) = &latest
            && calls_sum(metric_in(request, "strata.calls").unwrap()).0 >= n
        {
            return latest;
        }
        if Instant::now() >= deadline {
            return latest;
        }
        sleep(Duration::from_millis(20)).await;
    }
}

/// 5b. After N calls the latest export says N: `strata.calls` summed over its data points,
/// the server histogram's count, and (one attempt each) the client histogram's; cumulative,
/// so the next export says N again.
#[tokio::test]
async fn the_metrics_count_every_call_once_cumulatively() {
    let rx = OtlpReceiver::http().await;
    let stack = Stack::start(with_export(&rx, OtlpProtocol::HttpProtobuf)).await;
    let client = stack.modern(Transport::Http1);
    let before = stack.counts();
    let tools = [
        "ok",
        "ok",
        "ok",
        "tool_error",
        "tool_error",
        "sse_progress",
        "http_429",
    ];
    for tool in tools {
        client.call_tool(tool, json!({})).await.unwrap();
    }
    let n = tools.len() as u64;
    assert_eq!(stack.delta_after(&before, n).await.values().sum::<u64>(), n);

    let check = |request: &ExportMetricsServiceRequest| {
        let cumulative = AggregationTemporality::Cumulative as i32;
        let calls = metric_in(request, "strata.calls").expect("strata.calls");
        assert_eq!(calls_sum(calls), (n as i64, cumulative, true), "{calls:?}");
        let server = metric_in(request, "mcp.server.operation.duration").expect("server");
        assert_eq!(histogram_count(server), (n, cumulative), "{server:?}");
        assert_eq!(server.unit, "s");
        let upstream = metric_in(request, "mcp.client.operation.duration").expect("client");
        assert_eq!(histogram_count(upstream), (n, cumulative), "{upstream:?}");
        // The tool errors, under their own attributes.
        let Some(Data::Sum(sum)) = &calls.data else {
            unreachable!()
        };
        let errors: i64 = sum
            .data_points
            .iter()
            .filter(|p| {
                p.attributes.iter().any(|kv| {
                    kv.key == "error.type" && format!("{:?}", kv.value).contains("tool_error")
                })
            })
            .map(|p| match p.value {
                Some(number_data_point::Value::AsInt(n)) => n,
                _ => 0,
            })
            .sum();
        assert_eq!(errors, 2, "{calls:?}");
    };
    let latest = wait_calls(&rx, n as i64).await.expect("a metrics export");
    check(&latest);
    // The next export: the same totals, nothing counted twice or forgotten.
    let seen = rx.metric_requests().len();
    let deadline = Instant::now() + LIMIT;
    while rx.metric_requests().len() <= seen {
        assert!(Instant::now() < deadline, "no further metrics export");
        sleep(Duration::from_millis(20)).await;
    }
    check(rx.metric_requests().last().unwrap());
}

/// 6. Spans held by a long schedule delay go out when strata stops, within the drain time.
#[tokio::test]
async fn stop_flushes_the_spans_a_long_schedule_delay_holds() {
    let rx = OtlpReceiver::http().await;
    let mut telemetry = export_to(&rx, OtlpProtocol::HttpProtobuf);
    telemetry.batching.schedule_delay = Duration::from_secs(60);
    telemetry.metrics_interval = Duration::from_secs(60);
    let stack = Stack::start(move |c| c.telemetry = Some(telemetry)).await;
    let client = stack.modern(Transport::Http1);
    let before = stack.counts();
    for tool in ["ok", "tool_error", "sse_progress"] {
        client.call_tool(tool, json!({})).await.unwrap();
    }
    assert_eq!(stack.delta_after(&before, 3).await.values().sum::<u64>(), 3);
    sleep(SETTLE).await;
    assert_eq!(
        rx.requests(),
        0,
        "nothing is sent on its own before 60 s: {:?}",
        rx.last_headers()
    );

    let strata = stack.strata;
    // `support::strata`'s drain is 500 ms; the flush gets at least 1 s. Generous on top.
    timeout(Duration::from_secs(5), strata.stop())
        .await
        .expect("stop within the drain bound");
    // Sent before `stop` returned: no waiting here.
    let spans = rx.spans();
    assert_eq!(spans.len(), 6, "3 SERVER + 3 CLIENT: {spans:?}");
    let servers = server_spans(&spans);
    assert_eq!(servers.len(), 3);
    for server in servers {
        assert_eq!(children_of(&spans, server).len(), 1, "{server:?}");
    }
    // And the points, in the same flush.
    let calls = rx
        .metric_requests()
        .iter()
        .rev()
        .find_map(|r| metric_in(r, "strata.calls").cloned())
        .expect("the metrics flushed at stop");
    assert_eq!(calls_sum(&calls).0, 3);
}
