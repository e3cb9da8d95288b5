//! The retry policy end to end: strata in front of the testbed, counting the POSTs that reach
//! the upstream.
#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use strata::app::{Running, start};
use strata::config::{Config, Glob, ToolRule, Upstream};
use strata::testbed::{Testbed, TestbedHandle};
use support::post::Agent;

struct Bed {
    strata: Running,
    testbed: std::sync::Arc<Testbed>,
    _handle: TestbedHandle,
    client: Client<HttpConnector, Full<Bytes>>,
}

fn rule(pattern: &str) -> ToolRule {
    ToolRule {
        tool: Some(Glob::new(pattern)),
        method: None,
        idempotent: true,
    }
}

async fn bed(fail_first_n: u64, edit: impl FnOnce(&mut Config)) -> Bed {
    let (addr, testbed, handle) = Testbed::builder()
        .fail_first_n(fail_first_n)
        .spawn_local()
        .await
        .unwrap();
    let upstream = Upstream::parse(&format!("http://{addr}")).unwrap();
    let mut config = Config::default_with_upstream(upstream);
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.admin = "127.0.0.1:0".parse().unwrap();
    config.policy.retry.initial_backoff = Duration::from_millis(1);
    config.policy.retry.max_backoff = Duration::from_millis(5);
    config.policy.tools = vec![rule("read_*")];
    edit(&mut config);
    let strata = start(&config).await.unwrap();
    Bed {
        strata,
        testbed,
        _handle: handle,
        client: Client::builder(TokioExecutor::new()).build_http(),
    }
}

/// One 2026-07-28 (stateless) tools/call through strata: status, `strata-attempts`, body.
async fn call(bed: &Bed, tool: &str, args: Value) -> (u16, Option<String>, Vec<u8>) {
    call_at(bed.strata.listen, tool, args).await
}

async fn call_at(at: SocketAddr, tool: &str, args: Value) -> (u16, Option<String>, Vec<u8>) {
    let answer = Agent::new(at).call(json!(1), tool, args, &[]).await;
    let attempts = answer.header("strata-attempts").map(str::to_owned);
    (answer.status, attempts, answer.body)
}

/// The value of one series in strata's metrics, 0 when absent.
fn series(bed: &Bed, family: &str, labels: &[(&str, &str)]) -> f64 {
    support::post::series(&bed.strata.metrics.render(), family, labels)
}

#[tokio::test]
async fn idempotent_503_then_200_is_retried() {
    let bed = bed(1, |_| {}).await;
    let (status, attempts, body) = call(&bed, "read_flaky", json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(attempts.as_deref(), Some("2"));
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["result"]["isError"], false);
    assert_eq!(
        bed.testbed.calls_of("read_flaky"),
        2,
        "the upstream saw 2 POSTs"
    );
    let retried = [("tool", "read_flaky"), ("reason", "http_503")];
    assert_eq!(series(&bed, "strata_retries_total", &retried), 1.0);
    let success = [("tool", "read_flaky"), ("outcome", "TOOL_SUCCESS")];
    assert_eq!(series(&bed, "strata_calls_total", &success), 1.0);
    assert_eq!(
        series(&bed, "strata_calls_total", &[("tool", "read_flaky")]),
        1.0,
        "one call, one outcome"
    );
}

#[tokio::test]
async fn non_idempotent_503_reaches_the_agent() {
    let bed = bed(1, |_| {}).await;
    let (status, attempts, _) = call(&bed, "write_flaky", json!({})).await;
    assert_eq!(status, 503);
    assert_eq!(attempts, None);
    assert_eq!(
        bed.testbed.calls_of("write_flaky"),
        1,
        "the upstream saw 1 POST"
    );
    let suppressed = [("tool", "write_flaky"), ("reason", "not_idempotent")];
    assert_eq!(
        series(&bed, "strata_retries_suppressed_total", &suppressed),
        1.0
    );
    assert_eq!(series(&bed, "strata_retries_total", &[]), 0.0);
}

#[tokio::test]
async fn retry_after_is_waited_for() {
    let bed = bed(1, |_| {}).await;
    let started = tokio::time::Instant::now();
    let (status, attempts, _) = call(&bed, "read_rate_limited", json!({"retry_after": 1})).await;
    assert_eq!(status, 200);
    assert_eq!(attempts.as_deref(), Some("2"));
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "waited {:?}",
        started.elapsed()
    );
    let retried = [("tool", "read_rate_limited"), ("reason", "http_429")];
    assert_eq!(series(&bed, "strata_retries_total", &retried), 1.0);
}

#[tokio::test]
async fn retry_after_zero_re_sends_at_once() {
    let bed = bed(1, |_| {}).await;
    let (status, attempts, _) = call(&bed, "read_rate_limited", json!({"retry_after": 0})).await;
    assert_eq!(status, 200);
    assert_eq!(attempts.as_deref(), Some("2"));
    let retried = [("tool", "read_rate_limited"), ("reason", "http_429")];
    assert_eq!(series(&bed, "strata_retries_total", &retried), 1.0);
}

#[tokio::test]
async fn retry_after_over_the_cap_is_not_waited_for() {
    let bed = bed(1, |c| {
        c.policy.retry.max_retry_after = Duration::from_secs(5)
    })
    .await;
    let (status, _, _) = call(&bed, "read_rate_limited", json!({"retry_after": 10})).await;
    assert_eq!(status, 429, "the 429 reaches the agent as it came");
    assert_eq!(bed.testbed.calls_of("read_rate_limited"), 1);
    let suppressed = [
        ("tool", "read_rate_limited"),
        ("reason", "retry_after_too_long"),
    ];
    assert_eq!(
        series(&bed, "strata_retries_suppressed_total", &suppressed),
        1.0
    );
}

#[tokio::test]
async fn a_broken_sse_stream_is_never_retried() {
    let bed = bed(1, |c| c.policy.tools.push(rule("sse_reset"))).await;
    let (status, _, _) = call(&bed, "sse_reset", json!({})).await;
    assert_eq!(
        status, 200,
        "the head went to the agent: the call was committed"
    );
    assert_eq!(bed.testbed.calls_of("sse_reset"), 1);
    let incomplete = [("tool", "sse_reset"), ("outcome", "STREAM_INCOMPLETE")];
    assert_eq!(series(&bed, "strata_calls_total", &incomplete), 1.0);
    assert_eq!(series(&bed, "strata_retries_total", &[]), 0.0);
}

#[tokio::test]
async fn the_budget_bounds_retries_against_an_always_failing_upstream() {
    const CALLS: u64 = 40;
    let bed = bed(u64::MAX, |c| {
        c.policy.retry.budget.ratio = 0.25;
        c.policy.retry.budget.min_per_second = 0;
        c.policy.retry.max_attempts = 3;
    })
    .await;
    for _ in 0..CALLS {
        let (status, _, _) = call(&bed, "read_flaky", json!({})).await;
        assert_eq!(status, 503);
    }
    let retries = series(&bed, "strata_retries_total", &[("tool", "read_flaky")]) as u64;
    let bound = (0.25 * CALLS as f64) as u64;
    assert!(
        retries <= bound,
        "{retries} retries over a bound of {bound}"
    );
    assert!(retries > 0, "the budget allows some");
    assert_eq!(
        bed.testbed.calls_of("read_flaky"),
        CALLS + retries,
        "every retry reached the upstream"
    );
    let exhausted = [("tool", "read_flaky"), ("reason", "budget_exhausted")];
    assert!(series(&bed, "strata_retries_suppressed_total", &exhausted) > 0.0);
}

#[tokio::test]
async fn retries_stop_at_max_attempts() {
    let bed = bed(u64::MAX, |c| c.policy.retry.max_attempts = 3).await;
    let (status, attempts, _) = call(&bed, "read_flaky", json!({})).await;
    assert_eq!(status, 503);
    assert_eq!(attempts.as_deref(), Some("3"));
    assert_eq!(bed.testbed.calls_of("read_flaky"), 3);
    let suppressed = [("tool", "read_flaky"), ("reason", "attempts_exhausted")];
    assert_eq!(
        series(&bed, "strata_retries_suppressed_total", &suppressed),
        1.0
    );
}

#[tokio::test]
async fn connect_errors_are_retried_for_reads_only() {
    // A port nothing listens on: bind, note it, close.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let upstream = Upstream::parse(&format!("http://{dead}")).unwrap();
    let mut config = Config::default_with_upstream(upstream);
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.admin = "127.0.0.1:0".parse().unwrap();
    config.policy.retry.initial_backoff = Duration::from_millis(1);
    config.policy.retry.max_backoff = Duration::from_millis(2);
    config.policy.tools = vec![rule("read_*")];
    let strata = start(&config).await.unwrap();
    let (status, attempts, _) = call_at(strata.listen, "read_x", json!({})).await;
    assert_eq!(status, 502);
    assert_eq!(attempts.as_deref(), Some("3"));
    let (status, attempts, _) = call_at(strata.listen, "write_x", json!({})).await;
    assert_eq!(status, 502);
    assert_eq!(attempts, None);
    strata.stop().await;
}

#[tokio::test]
async fn a_body_over_the_replay_buffer_is_forwarded_but_not_retried() {
    let bed = bed(1, |c| c.policy.retry.replay_buffer = 64).await;
    let (status, _, _) = call(&bed, "read_flaky", json!({"padding": "x".repeat(500)})).await;
    assert_eq!(status, 503, "forwarded whole, answered, not retried");
    assert_eq!(bed.testbed.calls_of("read_flaky"), 1);
    let suppressed = [("reason", "body_too_large")];
    assert_eq!(
        series(&bed, "strata_retries_suppressed_total", &suppressed),
        1.0
    );
}

async fn list_tools(bed: &Bed) {
    let body = json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/list",
        "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}
        }}
    });
    let request = http::Request::post(format!("http://{}/mcp", bed.strata.listen))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let response = bed.client.request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert!(v["result"]["tools"].as_array().unwrap().len() > 5);
}

#[tokio::test]
async fn trusted_annotations_make_a_read_only_tool_retryable() {
    let bed = bed(1, |c| {
        c.policy.tools.clear();
        c.policy.trust_annotations = true;
    })
    .await;
    list_tools(&bed).await;
    let (status, attempts, _) = call(&bed, "read_flaky", json!({})).await;
    assert_eq!(
        (status, attempts.as_deref()),
        (200, Some("2")),
        "readOnlyHint: retried"
    );
    let (status, attempts, _) = call(&bed, "write_flaky", json!({})).await;
    assert_eq!((status, attempts), (503, None), "destructive: not retried");
}

#[tokio::test]
async fn untrusted_annotations_change_nothing() {
    let bed = bed(1, |c| {
        c.policy.tools.clear();
        c.policy.trust_annotations = false;
    })
    .await;
    list_tools(&bed).await;
    let (status, attempts, _) = call(&bed, "read_flaky", json!({})).await;
    assert_eq!((status, attempts), (503, None));
    assert_eq!(bed.testbed.calls_of("read_flaky"), 1);
}

#[tokio::test]
async fn retry_origin_says_who_re_sent_the_call() {
    let (_guard, logs) = support::capture();
    let bed = bed(1, |_| {}).await;
    let agent = Agent::new(bed.strata.listen);
    // The agent re-sends a failed, non-idempotent call itself (same request, new id).
    assert_eq!(
        agent
            .call(json!(1), "write_flaky", json!({"x": 1}), &[])
            .await
            .status,
        503
    );
    assert_eq!(
        agent
            .call(json!(2), "write_flaky", json!({"x": 1}), &[])
            .await
            .status,
        200
    );
    // strata re-sends an idempotent one.
    assert_eq!(
        agent
            .call(json!(3), "read_flaky", json!({}), &[])
            .await
            .status,
        200
    );
    let origins = |records: Vec<Value>| -> Vec<String> {
        records
            .iter()
            .map(|r| format!("{}:{}", r["retry_origin"].as_str().unwrap(), r["attempts"]))
            .collect()
    };
    let write = support::wait_records(&logs, "write_flaky", 2).await;
    assert_eq!(origins(write), ["none:1", "client:1"]);
    let read = support::wait_records(&logs, "read_flaky", 1).await;
    assert_eq!(origins(read), ["proxy:2"]);
    assert_eq!(read_statuses(&logs, "read_flaky"), "503,200");
}

fn read_statuses(logs: &strata::log::CapturedLogs, tool: &str) -> String {
    support::records_of(logs, tool)[0]["http_statuses"]
        .as_str()
        .unwrap()
        .to_owned()
}
