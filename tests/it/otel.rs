//! OpenTelemetry export end to end: the testbed's scenarios through strata, and what a real
//! OTLP receiver decodes (the official protobuf definitions, `support::otlp`): one SERVER span
//! per call counted by `strata_calls_total`, a CLIENT child per upstream attempt, the MCP
//! semantic conventions' attributes, `error.type` and status, parent linkage and sampling.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;
use strata::classify::Outcome;
use strata::config::{
    Config, Glob, OtlpProtocol, Propagate, SamplerConfig, SpanBatching, TelemetryConfig, ToolRule,
};
use strata::testbed::client::Transport;
use strata::testbed::{SCENARIOS, Scenario};
use support::otlp::{Mode, OtlpReceiver, ReceivedSpan};
use support::post::Agent;
use support::{LIMIT, Stack};

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
        headers: vec![("x-team".into(), "mcp".into())],
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

/// The `error.type` the README's table gives an outcome (`status`: the agent's HTTP status).
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
