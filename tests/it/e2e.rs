//! End to end: an agent (the testbed's MCP client) → strata → an upstream, all in-process on
//! `127.0.0.1:0`. Every outcome of the table is reached through strata and checked twice: on
//! strata's own counters (`strata_calls_total`, the exact delta the call caused) and on the
//! per-call log record it wrote. Every JSON-RPC request gets exactly one classification.
//!
//! Log records are read with `log::capture_json` (through `support::capture`, which
//! keeps tracing's callsite cache from switching records off; see there). The capture is
//! per-thread: every test here runs on tokio's default current-thread runtime, so strata, the
//! testbed and the client all log on the test's thread.
#![cfg(test)]

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use http_body_util::Full;
use serde_json::{Value, json};
use strata::classify::Outcome;
use strata::log::CapturedLogs;
use strata::testbed::client::{McpClient, Reply, SseReader, Transport};
use strata::testbed::{SCENARIOS, Scenario};
use support::upstream::{ScriptedUpstream, full, respond};
use support::{LIMIT, Stack, delta_after, just, key, records, wait_records};
use tokio::time::{Instant, sleep, timeout};

use Outcome::*;
use Transport::{Http1, Http2};

/// The seed article's eleven cases: (scenario, outcome of its first call).
const SEED: [(&str, Outcome); 11] = [
    ("ok", ToolSuccess),
    ("http_503_then_200", HttpError),
    ("jsonrpc_error", JsonRpcError),
    ("tool_error", ToolError),
    ("http_500_success_body", HttpError),
    ("malformed_json", MalformedJson),
    ("result_and_error", InvalidEnvelope),
    ("wrong_id", InvalidEnvelope),
    ("input_required", InputRequired),
    ("legacy_result", ToolSuccess),
    ("content_not_array", InvalidToolResult),
];

/// Arguments that keep the slow scenarios quick; the rest run with their defaults.
fn args(tool: &str) -> Value {
    match tool {
        "slow" => json!({"ms": 50}),
        "sse_drip" => json!({"count": 3, "interval_ms": 10}),
        _ => json!({}),
    }
}

fn expected(s: &Scenario) -> Outcome {
    Outcome::from_label(s.expected_outcome).unwrap()
}

/// Checks the one call record of a tools/call against what the agent saw.
fn check_record(record: &Value, tool: &str, outcome: Outcome, reply: &Reply, version: &str) {
    let ctx = format!("{tool}: {record}");
    assert_eq!(record["outcome"], outcome.as_str(), "{ctx}");
    assert_eq!(record["layer"], outcome.layer().as_str(), "{ctx}");
    assert_eq!(record["method"], "tools/call", "{ctx}");
    assert_eq!(record["tool"], tool, "{ctx}");
    assert_eq!(record["jsonrpc_id"], reply.id.to_string(), "{ctx}");
    assert_eq!(
        record["http_statuses"],
        reply.status.as_u16().to_string(),
        "{ctx}"
    );
    // The record describes the upstream's response: strata's own 502/504 (marked with
    // `x-strata-error`) had none, so no content type.
    let upstream_ct = match reply.headers.contains_key("x-strata-error") {
        true => None,
        false => reply.content_type(),
    };
    assert_eq!(
        record.get("content_type").and_then(Value::as_str),
        upstream_ct,
        "{ctx}"
    );
    let sse_events = match reply.content_type() {
        Some("text/event-stream") => reply
            .sse_events()
            .iter()
            .filter(|e| e.data.is_some())
            .count(),
        _ => 0,
    };
    assert_eq!(record["sse_events"], sse_events, "{ctx}");
    assert_eq!(record["protocol_version"], version, "{ctx}");
    assert_eq!(record["attempts"], 1, "{ctx}");
    // The agent's own re-send of a call that just failed is marked as such.
    let origin = match reply.status.is_success() && tool == "http_503_then_200" {
        true => "client",
        false => "none",
    };
    assert_eq!(record["retry_origin"], origin, "{ctx}");
}

/// Calls `s` once through strata and checks the counter delta and the log record.
async fn check_scenario(stack: &Stack, client: &McpClient, logs: &CapturedLogs, s: &Scenario) {
    let outcome = expected(s);
    let before = stack.counts();
    let seen = records_of_tool(logs, s.tool);
    let reply = client.call_tool(s.tool, args(s.tool)).await.unwrap();
    let d = stack.delta_after(&before, 1).await;
    assert_eq!(d, just("tools/call", s.tool, outcome), "{}", s.tool);
    let recs = wait_records(logs, s.tool, seen + 1).await;
    assert_eq!(recs.len(), seen + 1, "{}: one record per call", s.tool);
    check_record(
        &recs[seen],
        s.tool,
        outcome,
        &reply,
        client.protocol_version(),
    );
}

fn records_of_tool(logs: &CapturedLogs, tool: &str) -> usize {
    support::records_of(logs, tool).len()
}

#[tokio::test]
async fn every_scenario_through_strata_in_both_eras() {
    let (_guard, logs) = support::capture();
    // A resumable stream that closes early is STREAM_INCOMPLETE at once (its own test below
    // covers the window).
    let stack = Stack::start(|c| c.timeouts.resume_window = Duration::ZERO).await;
    let start = stack.counts();
    let mut requests = 0;

    // 2026-07-28, stateless, over HTTP/1.1.
    let modern = stack.modern(Http1);
    for s in SCENARIOS.iter().filter(|s| !s.legacy_only) {
        check_scenario(&stack, &modern, &logs, s).await;
        requests += 1;
    }
    // 2025-11-25, in a session, over h2: every scenario, legacy-only ones included.
    let legacy = stack.legacy(Http2).await;
    requests += 1; // initialize
    for s in SCENARIOS {
        check_scenario(&stack, &legacy, &logs, s).await;
        requests += 1;
    }

    // Every outcome the testbed can produce was reached, the seed's eleven among them.
    let all = support::delta(&start, &stack.counts());
    for (tool, outcome) in SEED {
        assert!(
            all.contains_key(&key("tools/call", tool, outcome)),
            "{tool}"
        );
    }
    let outcomes: std::collections::BTreeSet<&str> =
        all.keys().map(|k| k.outcome.as_str()).collect();
    for o in [
        HttpError,
        StreamIncomplete,
        MalformedJson,
        InvalidEnvelope,
        JsonRpcError,
        InvalidToolResult,
        InputRequired,
        ToolError,
        ToolSuccess,
        Success,
    ] {
        assert!(outcomes.contains(o.as_str()), "{o} not reached: {all:?}");
    }
    // Exactly one classification per request, and one record each.
    assert_eq!(all.values().sum::<u64>(), requests, "{all:?}");
    assert_eq!(records(&logs).len() as u64, requests);
}

#[tokio::test]
async fn the_seed_cases() {
    let (_guard, logs) = support::capture();
    let stack = Stack::start(|_| {}).await;
    let client = stack.modern(Http1);
    for (tool, outcome) in SEED {
        let s = SCENARIOS.iter().find(|s| s.tool == tool).unwrap();
        assert_eq!(expected(s), outcome, "{tool}");
        check_scenario(&stack, &client, &logs, s).await;
    }
    // "503 then 200": the second call is its own call, and succeeds; it repeats the failed
    // request (same session, method, tool, arguments), so the log says the agent retried.
    let before = stack.counts();
    let reply = client
        .call_tool("http_503_then_200", json!({}))
        .await
        .unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    let d = stack.delta_after(&before, 1).await;
    assert_eq!(d, just("tools/call", "http_503_then_200", ToolSuccess));
    let recs = wait_records(&logs, "http_503_then_200", 2).await;
    check_record(
        &recs[1],
        "http_503_then_200",
        ToolSuccess,
        &reply,
        "2026-07-28",
    );
}

#[tokio::test]
async fn other_methods_are_success_or_their_own_error() {
    let (_guard, logs) = support::capture();
    let stack = Stack::start(|_| {}).await;

    let before = stack.counts();
    let legacy = stack.legacy(Http1).await;
    for method in ["tools/list", "ping"] {
        let reply = legacy.request(method, Value::Null).await.unwrap();
        assert_eq!(reply.status, StatusCode::OK);
    }
    // Legacy SDK servers answer an unknown method in-band on 200.
    legacy.request("nope/nope", Value::Null).await.unwrap();
    // The initialized notification is not a call.
    let d = delta_after(&stack.strata, &before, 4).await;
    let want = BTreeMap::from([
        (key("initialize", "", Success), 1),
        (key("tools/list", "", Success), 1),
        (key("ping", "", Success), 1),
        (key("nope/nope", "", JsonRpcError), 1),
    ]);
    assert_eq!(d, want);

    let before = stack.counts();
    let modern = stack.modern(Http1);
    modern.request("server/discover", json!({})).await.unwrap();
    // 2026-07-28: an unknown method is 404.
    let reply = modern.request("nope/nope", json!({})).await.unwrap();
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    let d = delta_after(&stack.strata, &before, 2).await;
    let want = BTreeMap::from([
        (key("server/discover", "", Success), 1),
        (key("nope/nope", "", HttpError), 1),
    ]);
    assert_eq!(d, want);

    let recs = records(&logs);
    assert_eq!(recs.len(), 6);
    let init = &recs[0];
    assert_eq!(init["method"], "initialize");
    assert_eq!(init["outcome"], "SUCCESS");
    assert_eq!(init["layer"], "application");
    assert!(init.get("tool").is_none(), "{init}");
    assert_eq!(init["client"], "strata-testbed-client@0.1.0", "{init}");
    // Every legacy call carries the session, hashed; initialize the one its answer assigned.
    let list = &recs[1];
    let sid = legacy.session().unwrap();
    let hashed = list["session"].as_str().unwrap();
    assert_eq!(hashed.len(), 16);
    assert_ne!(hashed, sid, "the session id is logged hashed");
    assert_eq!(init["session"], hashed, "{init}");
    assert!(
        recs.iter().all(|r| !r.to_string().contains(sid)),
        "the raw session id never reaches a call record"
    );
}

/// The agent leaves in the middle of an SSE stream: CLIENT_CANCELLED, with the events seen.
#[tokio::test]
async fn agent_gone_mid_sse_is_client_cancelled() {
    let (_guard, logs) = support::capture();
    let stack = Stack::start(|_| {}).await;
    for (n, transport) in [Http1, Http2].into_iter().enumerate() {
        let client = stack.modern(transport);
        let before = stack.counts();
        let drip = json!({"count": 1000, "interval_ms": 20});
        let (_, resp) = client.open_tool("sse_drip", drip).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let mut reader = SseReader::new(resp.into_body()).with_timeout(LIMIT);
        for _ in 0..2 {
            let (event, _) = reader.next_event().await.unwrap().unwrap();
            assert!(event.json().unwrap()["method"] == "notifications/progress");
        }
        drop(reader);
        let d = stack.delta_after(&before, 1).await;
        assert_eq!(
            d,
            just("tools/call", "sse_drip", ClientCancelled),
            "{transport:?}"
        );
        let recs = wait_records(&logs, "sse_drip", n + 1).await;
        let rec = &recs[n];
        assert_eq!(rec["outcome"], "CLIENT_CANCELLED");
        assert_eq!(rec["layer"], "transport");
        assert_eq!(rec["http_statuses"], "200");
        assert_eq!(rec["content_type"], "text/event-stream");
        assert!(rec["sse_events"].as_u64().unwrap() >= 2, "{rec}");
    }
}

/// When the agent leaves mid-stream, strata drops the upstream exchange too: the upstream's
/// next writes fail instead of going on for nobody.
#[tokio::test]
async fn agent_gone_mid_stream_releases_the_upstream() {
    let (senders_tx, mut senders) = tokio::sync::mpsc::unbounded_channel();
    let upstream = ScriptedUpstream::spawn(move |_| {
        let (tx, body) = support::upstream::channel();
        let _ = senders_tx.send(tx);
        respond(200, &[("content-type", "text/event-stream")], body)
    })
    .await;
    let strata = support::strata(upstream.addr, |_| {}).await;
    for transport in [Http1, Http2] {
        let client = McpClient::modern(strata.listen)
            .with_transport(transport)
            .with_timeout(LIMIT);
        let before = support::counts(&strata);
        let (_, resp) = client.open_tool("t", json!({})).await.unwrap();
        let feed = timeout(LIMIT, senders.recv()).await.unwrap().unwrap();
        let keepalive = Bytes::from_static(b": keep-alive\n\n");
        feed.send(Ok(keepalive.clone())).await.unwrap();
        let mut reader = SseReader::new(resp.into_body()).with_timeout(LIMIT);
        reader.next_event().await.unwrap().unwrap();
        drop(reader);
        // The upstream keeps writing, as an SSE server's keep-alives do, until it notices.
        let released = async {
            while feed.send(Ok(keepalive.clone())).await.is_ok() {
                sleep(Duration::from_millis(10)).await;
            }
        };
        timeout(LIMIT, released)
            .await
            .unwrap_or_else(|_| panic!("{transport:?}: the upstream exchange was kept open"));
        let d = delta_after(&strata, &before, 1).await;
        assert_eq!(d, just("tools/call", "t", ClientCancelled), "{transport:?}");
    }
}

/// The agent leaves while strata waits for the upstream's head: CLIENT_CANCELLED, no status.
#[tokio::test]
async fn agent_gone_while_waiting_is_client_cancelled() {
    let (_guard, logs) = support::capture();
    let stack = Stack::start(|_| {}).await;
    for (n, transport) in [Http1, Http2].into_iter().enumerate() {
        let client = Arc::new(stack.modern(transport));
        let before = stack.counts();
        let calling = client.clone();
        let call =
            tokio::spawn(async move { calling.call_tool("slow", json!({"ms": 60_000})).await });
        // Leave only once the upstream is working on it.
        let deadline = Instant::now() + LIMIT;
        while stack.testbed.calls_of("slow") < n as u64 + 1 {
            assert!(
                Instant::now() < deadline,
                "the call never reached the testbed"
            );
            sleep(Duration::from_millis(5)).await;
        }
        call.abort();
        drop(client);
        let d = stack.delta_after(&before, 1).await;
        assert_eq!(
            d,
            just("tools/call", "slow", ClientCancelled),
            "{transport:?}"
        );
        let recs = wait_records(&logs, "slow", n + 1).await;
        let rec = &recs[n];
        assert_eq!(rec["outcome"], "CLIENT_CANCELLED");
        assert_eq!(rec["http_statuses"], "", "no response head yet: {rec}");
        assert!(rec.get("content_type").is_none(), "{rec}");
        assert_eq!(rec["sse_events"], 0);
    }
}

/// Upstream unreachable: strata's own 502, HTTP_ERROR, a connect error counted. Both with the
/// retry policy on (the body is read into the replay buffer first) and off (it streams).
#[tokio::test]
async fn upstream_down_is_strata_502() {
    let (_guard, logs) = support::capture();
    let closed = support::closed_port().await;
    for (n, retries) in [true, false].into_iter().enumerate() {
        let strata = support::strata(closed, |c| {
            if !retries {
                c.policy.retry.max_attempts = 1;
            }
        })
        .await;
        let client = McpClient::modern(strata.listen).with_timeout(LIMIT);
        let before = support::counts(&strata);
        let reply = client.call_tool("ok", json!({})).await.unwrap();
        assert_eq!(reply.status, StatusCode::BAD_GATEWAY);
        assert_eq!(reply.headers["x-strata-error"], "upstream:connect_error");
        assert_eq!(reply.json().unwrap()["error"]["code"], -32000);
        let d = delta_after(&strata, &before, 1).await;
        assert_eq!(d, just("tools/call", "ok", HttpError), "retries {retries}");
        let recs = wait_records(&logs, "ok", n + 1).await;
        check_record(&recs[n], "ok", HttpError, &reply, "2026-07-28");
        assert!(
            strata
                .metrics
                .render()
                .contains("strata_upstream_connect_errors_total 1"),
        );
    }
}

/// No response head within `timeouts.response_head`: strata's own 504, HTTP_ERROR.
#[tokio::test]
async fn no_head_in_time_is_strata_504() {
    let (_guard, logs) = support::capture();
    let stack = Stack::start(|c| c.timeouts.response_head = Duration::from_millis(200)).await;
    let client = stack.modern(Http1);
    let before = stack.counts();
    let started = Instant::now();
    let reply = client
        .call_tool("slow", json!({"ms": 5_000}))
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(reply.status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(
        reply.headers["x-strata-error"],
        "upstream:response_head_timeout"
    );
    let d = stack.delta_after(&before, 1).await;
    assert_eq!(d, just("tools/call", "slow", HttpError));
    let recs = wait_records(&logs, "slow", 1).await;
    check_record(&recs[0], "slow", HttpError, &reply, "2026-07-28");
}

fn gauge(stack: &Stack, name: &str) -> Option<i64> {
    let text = stack.strata.metrics.render();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// A resumable stream closes early; the agent resumes it with GET + Last-Event-ID through
/// strata: the call is classified once, TOOL_SUCCESS, with both exchanges in its record.
#[tokio::test]
async fn resumed_stream_completes_the_call_once() {
    let (_guard, logs) = support::capture();
    let window = Duration::from_millis(400);
    let stack = Stack::start(|c| c.timeouts.resume_window = window).await;
    let client = stack.legacy(Http1).await;
    let before = stack.counts();

    let post = client.call_tool("sse_resumable", json!({})).await.unwrap();
    assert_eq!(post.status, StatusCode::OK);
    assert!(post.broken.is_none());
    let events = post.sse_events();
    let last_id = events.iter().filter_map(|e| e.id.clone()).last().unwrap();
    assert!(
        events
            .iter()
            .all(|e| e.json().is_none_or(|m| m.get("result").is_none()))
    );
    // Pending, not yet classified.
    assert!(support::delta(&before, &stack.counts()).is_empty());
    assert_eq!(gauge(&stack, "strata_pending_resumable_calls"), Some(1));

    let resp = client.get_stream(Some(&last_id)).await.unwrap();
    let get = strata::testbed::client::collect(Value::Null, resp, LIMIT)
        .await
        .unwrap();
    assert_eq!(get.status, StatusCode::OK);
    let result = get.sse_events().iter().find_map(|e| e.json()).unwrap();
    assert_eq!(result["id"], post.id);

    let d = stack.delta_after(&before, 1).await;
    assert_eq!(d, just("tools/call", "sse_resumable", ToolSuccess));
    assert_eq!(gauge(&stack, "strata_pending_resumable_calls"), Some(0));
    // The window passes: nothing more is counted for it.
    sleep(window + Duration::from_millis(200)).await;
    let d = support::delta(&before, &stack.counts());
    assert_eq!(d, just("tools/call", "sse_resumable", ToolSuccess));

    let recs = wait_records(&logs, "sse_resumable", 1).await;
    assert_eq!(recs.len(), 1);
    let rec = &recs[0];
    assert_eq!(rec["outcome"], "TOOL_SUCCESS");
    assert_eq!(rec["jsonrpc_id"], post.id.to_string());
    assert_eq!(
        rec["http_statuses"], "200,200",
        "the POST and the GET: {rec}"
    );
    assert_eq!(rec["content_type"], "text/event-stream");
    // Priming + progress on the POST stream, the result on the resumed one.
    assert_eq!(rec["sse_events"], 3, "{rec}");
    assert_eq!(rec["protocol_version"], "2025-11-25");
}

/// Without the resumption, the call is STREAM_INCOMPLETE once the window ends, not before.
#[tokio::test]
async fn unresumed_stream_is_incomplete_after_the_window() {
    let (_guard, logs) = support::capture();
    let window = Duration::from_millis(300);
    let stack = Stack::start(|c| c.timeouts.resume_window = window).await;
    let client = stack.legacy(Http1).await;
    let before = stack.counts();
    let post = client.call_tool("sse_resumable", json!({})).await.unwrap();
    let ended = Instant::now();
    assert_eq!(post.status, StatusCode::OK);
    assert!(support::delta(&before, &stack.counts()).is_empty());
    let d = stack.delta_after(&before, 1).await;
    // Timers never fire early, and the window started before the agent saw the end.
    assert!(ended.elapsed() >= window / 2, "{:?}", ended.elapsed());
    assert_eq!(d, just("tools/call", "sse_resumable", StreamIncomplete));
    let recs = wait_records(&logs, "sse_resumable", 1).await;
    assert_eq!(recs[0]["outcome"], "STREAM_INCOMPLETE");
    assert_eq!(recs[0]["http_statuses"], "200");
    assert_eq!(recs[0]["sse_events"], 2);
    assert_eq!(gauge(&stack, "strata_pending_resumable_calls"), Some(0));
}

/// Concurrent calls of mixed outcomes on one h2 connection (and on an h1 pool): each gets
/// exactly its own outcome, none leaks into another.
#[tokio::test]
async fn concurrent_calls_each_get_one_outcome() {
    let stack = Stack::start(|_| {}).await;
    let tools = [
        "ok",
        "tool_error",
        "jsonrpc_error",
        "sse_progress",
        "sse_final_error",
        "sse_reset",
        "json_reset",
        "malformed_json",
        "http_429",
        "empty_202",
        "wrong_id",
        "content_not_array",
    ];
    for transport in [Http2, Http1] {
        let client = Arc::new(stack.modern(transport));
        let before = stack.counts();
        let mut calls = tokio::task::JoinSet::new();
        for round in 0..2 {
            for tool in tools {
                let client = client.clone();
                calls.spawn(async move { (round, tool, client.call_tool(tool, json!({})).await) });
            }
        }
        let mut n = 0;
        while let Some(done) = timeout(LIMIT, calls.join_next()).await.unwrap() {
            let (_, tool, reply) = done.unwrap();
            reply.unwrap_or_else(|e| panic!("{tool}: {e}"));
            n += 1;
        }
        let d = stack.delta_after(&before, n).await;
        let want: BTreeMap<_, _> = tools
            .iter()
            .map(|t| {
                let s = SCENARIOS.iter().find(|s| s.tool == *t).unwrap();
                (key("tools/call", t, expected(s)), 2)
            })
            .collect();
        assert_eq!(d, want, "{transport:?}");
    }
}

// --- Batches (2025-03-26): the testbed has none, so a scripted upstream answers. ---

const BATCH: &str = r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{}}},{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":"two","method":"tools/list"}]"#;

/// POSTs `body` through strata to an upstream that answers `status`, `content_type`,
/// `answer`; returns the counter delta once `n` calls are counted, and the call records.
async fn batch_case(
    body: &str,
    status: u16,
    content_type: &str,
    answer: &'static str,
    n: u64,
) -> (BTreeMap<support::CallKey, u64>, Vec<Value>) {
    let (_guard, logs) = support::capture();
    let ct = content_type.to_owned();
    let upstream =
        ScriptedUpstream::spawn(move |_| respond(status, &[("content-type", &ct)], full(answer)))
            .await;
    let strata = support::strata(upstream.addr, |_| {}).await;
    let client = McpClient::new(
        strata.listen,
        strata::testbed::client::Mode::Legacy {
            version: "2025-03-26".into(),
            session: Some("batch-session".into()),
        },
    )
    .with_timeout(LIMIT);
    let before = support::counts(&strata);
    let req = client
        .post_builder("tools/call", None)
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    let reply = client.exchange(Value::Null, req).await.unwrap();
    assert_eq!(reply.status.as_u16(), status);
    assert_eq!(&reply.body[..], answer.as_bytes(), "forwarded unchanged");
    assert_eq!(&upstream.last().body[..], body.as_bytes());
    let d = delta_after(&strata, &before, n).await;
    // Nothing more trickles in.
    sleep(Duration::from_millis(20)).await;
    assert_eq!(d, support::delta(&before, &support::counts(&strata)));
    (d, records(&logs))
}

#[tokio::test]
async fn batch_responses_are_classified_per_request() {
    let answer = r#"[{"jsonrpc":"2.0","id":"two","result":{"tools":[]}},{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":false}}]"#;
    let (d, recs) = batch_case(BATCH, 200, "application/json", answer, 2).await;
    let want = BTreeMap::from([
        (key("tools/call", "a", ToolSuccess), 1),
        (key("tools/list", "", Success), 1),
    ]);
    assert_eq!(d, want);
    assert_eq!(recs.len(), 2);
    let ids: Vec<&str> = recs
        .iter()
        .map(|r| r["jsonrpc_id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"1") && ids.contains(&"\"two\""), "{ids:?}");
}

#[tokio::test]
async fn batch_with_a_missing_response_is_stream_incomplete_for_it() {
    let answer = r#"[{"jsonrpc":"2.0","id":"two","result":{}}]"#;
    let (d, _) = batch_case(BATCH, 200, "application/json", answer, 2).await;
    let want = BTreeMap::from([
        (key("tools/call", "a", StreamIncomplete), 1),
        (key("tools/list", "", Success), 1),
    ]);
    assert_eq!(d, want);
}

#[tokio::test]
async fn batch_answered_on_sse_events() {
    let answer = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32603,\"message\":\"m\"}}\n\n\
                  data: [{\"jsonrpc\":\"2.0\",\"id\":\"two\",\"result\":{}}]\n\n";
    let (d, recs) = batch_case(BATCH, 200, "text/event-stream", answer, 2).await;
    let want = BTreeMap::from([
        (key("tools/call", "a", JsonRpcError), 1),
        (key("tools/list", "", Success), 1),
    ]);
    assert_eq!(d, want);
    assert!(recs.iter().all(|r| r["sse_events"] == 2), "{recs:?}");
}

#[tokio::test]
async fn batch_answered_with_an_error_status_is_http_error_for_each() {
    let (d, _) = batch_case(BATCH, 500, "application/json", "{}", 2).await;
    let want = BTreeMap::from([
        (key("tools/call", "a", HttpError), 1),
        (key("tools/list", "", HttpError), 1),
    ]);
    assert_eq!(d, want);
}

#[tokio::test]
async fn batch_answering_a_single_request_is_invalid_envelope() {
    let single = r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"a"}}"#;
    let answer = r#"[{"jsonrpc":"2.0","id":5,"result":{"content":[],"isError":false}}]"#;
    let (d, _) = batch_case(single, 200, "application/json", answer, 1).await;
    assert_eq!(d, just("tools/call", "a", InvalidEnvelope));
}
