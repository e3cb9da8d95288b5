//! Call limits and the circuit end to end: strata in front of the testbed, every refused
//! call answered without reaching the upstream (the testbed's own counts say so), counted
//! once and logged once with `refused_by`.
#![cfg(test)]

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use strata::config::{
    CallRule, CircuitConfig, CircuitOn, Config, Glob, Overrides, Rate, RefuseAs, ToolRule,
};
use strata::testbed::Testbed;
use strata::testbed::client::{McpClient, Reply, SseReader, Transport};
use support::post::{Agent, series};
use support::{LIMIT, Stack, records};
use tokio::time::{Instant, sleep, timeout};

use Transport::{Http1, Http2};

fn rule(tool: &str) -> CallRule {
    CallRule {
        tool: Some(Glob::new(tool)),
        method: None,
        max_concurrent: None,
        rate: None,
        burst: None,
        queue: Duration::ZERO,
        refuse_as: None,
    }
}

fn per_second(calls: u32) -> Option<Rate> {
    Some(Rate {
        calls,
        per: Duration::from_secs(1),
    })
}

fn metric(stack: &Stack, family: &str, labels: &[(&str, &str)]) -> f64 {
    series(&stack.strata.metrics.render(), family, labels)
}

/// The JSON-RPC message of a reply: its JSON body, or its SSE stream's last message.
fn message(reply: &Reply) -> Value {
    match reply.json() {
        Some(json) => json,
        None => reply
            .sse_events()
            .iter()
            .rev()
            .find_map(|e| e.json())
            .unwrap(),
    }
}

fn is_refusal(reply: &Reply) -> bool {
    reply.headers.contains_key("x-strata-error")
}

/// An agent of each era on each HTTP version.
async fn agents(stack: &Stack) -> Vec<(&'static str, McpClient)> {
    vec![
        ("2026-07-28 h1", stack.modern(Http1)),
        ("2026-07-28 h2", stack.modern(Http2)),
        ("2025-11-25 h1", stack.legacy(Http1).await),
        ("2025-11-25 h2", stack.legacy(Http2).await),
    ]
}

#[tokio::test]
async fn limits_a_call_past_its_rate_is_a_tool_error_in_both_eras_both_versions_and_bodies() {
    let (_guard, logs) = support::capture();
    let an_hour = Some(Rate {
        calls: 1,
        per: Duration::from_secs(3600),
    });
    let stack = Stack::start(|c| {
        let (mut json, mut sse) = (rule("ok"), rule("sse_progress"));
        (json.rate, json.burst) = (an_hour, Some(4));
        (sse.rate, sse.burst) = (an_hour, Some(4));
        c.limits.calls = vec![json, sse];
    })
    .await;
    let agents = agents(&stack).await;
    for tool in ["ok", "sse_progress"] {
        // The bucket's four tokens: one call of each agent passes.
        for (name, agent) in &agents {
            let reply = agent.call_tool(tool, json!({})).await.unwrap();
            assert!(!is_refusal(&reply), "{name} {tool}");
            assert_ne!(message(&reply)["result"]["isError"], true, "{name} {tool}");
        }
        for (name, agent) in &agents {
            let reply = agent.call_tool(tool, json!({})).await.unwrap();
            let msg = message(&reply);
            assert!(is_refusal(&reply), "{name} {tool}");
            assert_eq!(
                (reply.status.as_u16(), &msg["id"]),
                (200, &reply.id),
                "{name}"
            );
            assert_eq!(reply.content_type(), Some("application/json"));
            assert_eq!(msg["result"]["isError"], true, "{name} {tool}: {msg}");
            let text = msg["result"]["content"][0]["text"].as_str().unwrap();
            let limited = format!("strata: {tool} is limited to 1 calls/h; retry after ");
            assert!(text.starts_with(&limited), "{text}");
            assert!(reply.headers.contains_key("retry-after"));
        }
        assert_eq!(
            stack.testbed.calls_of(tool),
            4,
            "{tool}: refusals never went up"
        );
        let logged = wait_refusals(&logs, tool, 4).await;
        for record in &logged {
            assert_eq!(record["outcome"], "TOOL_ERROR", "{record}");
            assert_eq!(record["attempts"], 0, "{record}");
            assert_eq!(record["http_statuses"], "200", "{record}");
        }
        assert_eq!(logged.len(), 4, "{tool}: each refusal logged once");
    }
    let hits = metric(&stack, "strata_limit_hits_total", &[("limit", "rate")]);
    assert_eq!(hits, 8.0);
}

/// The call records of `tool` refused by the rate, once there are `n` (or after [`LIMIT`]).
async fn wait_refusals(logs: &strata::log::CapturedLogs, tool: &str, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + LIMIT;
    loop {
        let found: Vec<Value> = records(logs)
            .into_iter()
            .filter(|r| r["tool"] == tool && r["refused_by"] == "rate")
            .collect();
        if found.len() >= n || Instant::now() >= deadline {
            return found;
        }
        sleep(Duration::from_millis(10)).await;
    }
}

/// A POST of one tools/call whose `Accept` is `accept`: status, headers and body.
async fn post_accepting(at: std::net::SocketAddr, accept: &str) -> (u16, http::HeaderMap, Bytes) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let body = json!({
        "jsonrpc": "2.0", "id": "a", "method": "tools/call",
        "params": {"name": "ok", "arguments": {}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}
        }}
    });
    let request = http::Request::post(format!("http://{at}/mcp"))
        .header("content-type", "application/json")
        .header("accept", accept)
        .header("mcp-protocol-version", "2026-07-28")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let response = timeout(LIMIT, client.request(request))
        .await
        .unwrap()
        .unwrap();
    let (parts, body) = response.into_parts();
    let body = timeout(LIMIT, body.collect()).await.unwrap().unwrap();
    (parts.status.as_u16(), parts.headers, body.to_bytes())
}

#[tokio::test]
async fn limits_refusals_take_the_form_asked_for_and_the_agent_accepts() {
    let stack = Stack::start(|c| {
        let mut ok = rule("ok");
        (ok.rate, ok.burst) = (
            Some(Rate {
                calls: 1,
                per: Duration::from_secs(3600),
            }),
            Some(1),
        );
        ok.refuse_as = Some(RefuseAs::Http429);
        let mut ping = CallRule {
            method: Some(Glob::new("ping")),
            ..rule("x")
        };
        ping.tool = None;
        (ping.max_concurrent, ping.rate) = (None, per_second(1));
        ping.burst = Some(1);
        c.limits.calls = vec![ok, ping];
    })
    .await;
    let at = stack.strata.listen;
    let (status, _, _) = post_accepting(at, "application/json, text/event-stream").await;
    assert_eq!(status, 200, "the bucket's one token");
    let (status, headers, body) = post_accepting(at, "application/json").await;
    assert_eq!(status, 429);
    let retry_after: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((3000..=3600).contains(&retry_after), "{retry_after}");
    assert_eq!(headers["x-strata-error"], "downstream:rate_limited");
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (v["id"].clone(), v["error"]["code"].clone()),
        (json!("a"), json!(-32029))
    );
    assert_eq!(v["error"]["data"]["refused_by"], "rate");
    // An agent that accepts only SSE gets the refusal as one event.
    let (status, headers, body) = post_accepting(at, "text/event-stream").await;
    assert_eq!(status, 429);
    assert_eq!(headers["content-type"], "text/event-stream");
    let text = std::str::from_utf8(&body).unwrap();
    let data = text
        .strip_prefix("event: message\ndata: ")
        .unwrap()
        .trim_end();
    let v: Value = serde_json::from_str(data).unwrap();
    assert_eq!(v["error"]["code"], -32029);
    // Another method, by a `method` rule: a JSON-RPC error with the request's id.
    let agent = Agent::new(at);
    let ping = json!({"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {}});
    assert_eq!(agent.post(&ping, &[]).await.status, 200);
    let refused = agent.post(&ping, &[]).await;
    let v = refused.json();
    assert_eq!((refused.status, v["id"].clone()), (200, json!(7)));
    assert_eq!(v["error"]["code"], -32029, "{v}");
    assert_eq!(stack.testbed.calls_of("ok"), 1);
}

/// Opens an `sse_drip` call of `count` events 50 ms apart: its id and its stream.
async fn open_drip(agent: &McpClient, count: u64) -> SseReader {
    let args = json!({"count": count, "interval_ms": 50});
    let (_, response) = agent.open_tool("sse_drip", args).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    SseReader::new(response.into_body()).with_timeout(LIMIT)
}

#[tokio::test]
async fn limits_an_sse_stream_holds_its_slot_until_it_ends_and_an_agent_leaving_frees_it() {
    let stack = Stack::start(|c| {
        let mut drip = rule("sse_drip");
        drip.max_concurrent = Some(1);
        c.limits.calls = vec![drip];
    })
    .await;
    for transport in [Http1, Http2] {
        let (a, b) = (stack.modern(transport), stack.modern(transport));
        let mut stream = open_drip(&a, 4).await;
        let short = json!({"count": 1, "interval_ms": 1});
        let refused = b.call_tool("sse_drip", short.clone()).await.unwrap();
        assert!(
            is_refusal(&refused),
            "{transport:?}: the stream holds the slot"
        );
        assert_eq!(message(&refused)["result"]["isError"], true);
        while stream.next_event().await.unwrap().is_some() {}
        let passed = b.call_tool("sse_drip", short.clone()).await.unwrap();
        assert!(
            !is_refusal(&passed),
            "{transport:?}: the stream's end freed it"
        );
        // The agent leaves a stream of 200 events (10 s): its slot is free at once.
        let leaving = open_drip(&a, 200).await;
        drop(leaving);
        let started = Instant::now();
        loop {
            let reply = b.call_tool("sse_drip", short.clone()).await.unwrap();
            if !is_refusal(&reply) {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "{transport:?}: still held"
            );
            sleep(Duration::from_millis(10)).await;
        }
    }
    assert_eq!(
        metric(
            &stack,
            "strata_limit_hits_total",
            &[("limit", "concurrency")]
        ) as u64,
        metric(
            &stack,
            "strata_calls_total",
            &[("tool", "sse_drip"), ("outcome", "TOOL_ERROR")]
        ) as u64
    );
}

#[tokio::test]
async fn limits_a_queued_call_waits_for_the_slot_and_one_past_its_queue_is_refused() {
    let stack = Stack::start(|c| {
        let mut drip = rule("sse_drip");
        (drip.max_concurrent, drip.queue) = (Some(1), Duration::from_secs(2));
        let mut slow = rule("slow");
        (slow.max_concurrent, slow.queue) = (Some(1), Duration::from_millis(50));
        c.limits.calls = vec![drip, slow];
    })
    .await;
    let (a, b) = (stack.modern(Http1), stack.modern(Http2));
    let mut held = open_drip(&a, 4).await;
    let started = Instant::now();
    let short = json!({"count": 1, "interval_ms": 1});
    let queued = tokio::spawn(async move { b.call_tool("sse_drip", short).await.unwrap() });
    while held.next_event().await.unwrap().is_some() {}
    let reply = timeout(LIMIT, queued).await.unwrap().unwrap();
    assert!(!is_refusal(&reply), "it waited for the slot");
    assert!(
        started.elapsed() >= Duration::from_millis(150),
        "{:?}",
        started.elapsed()
    );
    // A call whose queue ends before the slot frees is refused.
    let long = stack.modern(Http1);
    let holder = tokio::spawn(async move { long.call_tool("slow", json!({"ms": 500})).await });
    sleep(Duration::from_millis(100)).await;
    let refused = stack
        .modern(Http1)
        .call_tool("slow", json!({"ms": 1}))
        .await
        .unwrap();
    assert!(is_refusal(&refused), "past its 50 ms queue");
    assert!(!is_refusal(
        &timeout(LIMIT, holder).await.unwrap().unwrap().unwrap()
    ));
    assert_eq!(stack.testbed.calls_of("slow"), 1);
}

#[tokio::test]
async fn limits_hold_exactly_under_64_agents() {
    let (_guard, logs) = support::capture();
    let born = Instant::now();
    let stack = Stack::start(|c| {
        let mut slow = rule("slow");
        (slow.max_concurrent, slow.rate, slow.burst) = (Some(4), per_second(50), Some(10));
        c.limits.calls = vec![slow];
    })
    .await;
    let (sent, accepted, refused) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let run_for = Duration::from_millis(1500);
    let until = Instant::now() + run_for;
    let mut agents = Vec::new();
    for n in 0..64u64 {
        let agent = Agent::new(stack.strata.listen);
        let (sent, accepted, refused) = (sent.clone(), accepted.clone(), refused.clone());
        agents.push(tokio::spawn(async move {
            for i in 0..100u64 {
                if Instant::now() >= until {
                    break;
                }
                sent.fetch_add(1, Ordering::Relaxed);
                let id = json!(n * 1000 + i);
                let answer = agent.call(id, "slow", json!({"ms": 10}), &[]).await;
                assert_eq!(answer.status, 200);
                if answer.header("x-strata-error").is_some() {
                    assert_eq!(answer.json()["result"]["isError"], true);
                    refused.fetch_add(1, Ordering::Relaxed);
                    sleep(Duration::from_millis(25)).await;
                } else {
                    accepted.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for agent in agents {
        timeout(LIMIT, agent).await.unwrap().unwrap();
    }
    let elapsed = born.elapsed().as_secs_f64();
    let (sent, accepted, refused) = (
        sent.load(Ordering::Relaxed),
        accepted.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed),
    );
    assert_eq!(accepted + refused, sent);
    assert!(
        refused > 0 && accepted > 10,
        "{accepted} accepted, {refused} refused"
    );
    assert!(
        accepted as f64 <= 10.0 + 50.0 * elapsed,
        "{accepted} accepted in {elapsed:.2} s: past burst + rate × time"
    );
    assert_eq!(
        stack.testbed.calls_of("slow"),
        accepted,
        "only accepted calls went up"
    );
    let max = stack.testbed.max_calls_in_flight();
    assert!((1..=4).contains(&max), "the upstream saw {max} at once");
    let hits = ["rate", "concurrency"]
        .map(|l| metric(&stack, "strata_limit_hits_total", &[("limit", l)]) as u64);
    let seen = format!("{sent} sent, {accepted} accepted in {elapsed:.2} s, refused {hits:?}");
    // 64 agents always find the slots taken; the bucket binds when strata passes more than
    // 50 calls a second (on a loaded machine a debug build may not).
    assert!(hits[1] > 0, "the slots bind: {seen}");
    assert_eq!(
        hits[0] + hits[1],
        refused,
        "each refusal counted once: {seen}"
    );
    let outcome = |o| {
        metric(
            &stack,
            "strata_calls_total",
            &[("tool", "slow"), ("outcome", o)],
        )
    };
    assert_eq!(outcome("TOOL_ERROR") as u64, refused);
    assert_eq!(outcome("TOOL_SUCCESS") as u64, accepted);
    let deadline = Instant::now() + LIMIT;
    let logged = loop {
        let slow: Vec<Value> = support::records_of(&logs, "slow");
        if slow.len() as u64 >= sent || Instant::now() >= deadline {
            break slow;
        }
        sleep(Duration::from_millis(20)).await;
    };
    let refused_logged = logged
        .iter()
        .filter(|r| r.get("refused_by").is_some())
        .count();
    assert_eq!(
        (logged.len() as u64, refused_logged as u64),
        (sent, refused)
    );
}

#[tokio::test]
async fn limits_failures_open_the_circuit_and_the_probe_closes_it() {
    let (testbed_addr, testbed, _handle) = Testbed::builder()
        .fail_first_n(3)
        .spawn_local()
        .await
        .unwrap();
    let strata = support::strata(testbed_addr, |c| {
        c.circuit = Some(CircuitConfig {
            consecutive_failures: 3,
            open_for: Duration::from_millis(300),
            ..CircuitConfig::default()
        });
        c.inspector.enabled = true;
    })
    .await;
    let state = || series(&strata.metrics.render(), "strata_circuit_state", &[]);
    let agent = Agent::new(strata.listen);
    // `write_flaky` is not idempotent: each 503 goes to the agent.
    for id in 1..=3 {
        let answer = agent.call(json!(id), "write_flaky", json!({}), &[]).await;
        assert_eq!(answer.status, 503);
    }
    assert_eq!(state(), 1.0, "open");
    let opened = Instant::now();
    let refused = agent.call(json!(4), "write_flaky", json!({}), &[]).await;
    assert_eq!(
        refused.header("x-strata-error"),
        Some("upstream:circuit_open")
    );
    let text = refused.json()["result"]["content"][0]["text"].clone();
    assert!(
        text.as_str()
            .unwrap()
            .contains("is failing; retry after 0."),
        "{text}"
    );
    assert_eq!(
        testbed.calls_of("write_flaky"),
        3,
        "the open circuit kept it from the upstream"
    );
    sleep(Duration::from_millis(300).saturating_sub(opened.elapsed()) + Duration::from_millis(20))
        .await;
    let probe = agent.call(json!(5), "write_flaky", json!({}), &[]).await;
    assert_eq!((probe.status, probe.header("x-strata-error")), (200, None));
    assert_eq!(testbed.calls_of("write_flaky"), 4);
    assert_eq!(state(), 0.0, "closed");
    let rendered = strata.metrics.render();
    for to in ["open", "half_open", "closed"] {
        let n = series(&rendered, "strata_circuit_transitions_total", &[("to", to)]);
        assert_eq!(n, 1.0, "{to}");
    }
    assert_eq!(
        series(
            &rendered,
            "strata_limit_hits_total",
            &[("limit", "circuit")]
        ),
        1.0
    );
    let after = agent.call(json!(6), "write_flaky", json!({}), &[]).await;
    assert_eq!(after.status, 200);
    // The inspector's record is the log line's: the refusal says what refused it.
    let records = recent_calls(strata.admin).await;
    let refused: Vec<&Value> = records
        .iter()
        .filter(|r| r["refused_by"] == "circuit")
        .collect();
    assert_eq!(refused.len(), 1, "{records:?}");
    assert_eq!(refused[0]["jsonrpc_id"], "4");
    assert_eq!(
        (&refused[0]["outcome"], &refused[0]["attempts"]),
        (&json!("TOOL_ERROR"), &json!(0))
    );
    assert_eq!(records.len(), 6);
}

/// The inspector's `/calls`, polled until it holds the six calls made.
async fn recent_calls(admin: std::net::SocketAddr) -> Vec<Value> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let deadline = Instant::now() + LIMIT;
    loop {
        let request = http::Request::get(format!("http://{admin}/calls"))
            .body(Full::new(Bytes::new()))
            .unwrap();
        let response = timeout(LIMIT, client.request(request))
            .await
            .unwrap()
            .unwrap();
        let body = timeout(LIMIT, response.into_body().collect())
            .await
            .unwrap()
            .unwrap();
        let records: Vec<Value> = serde_json::from_slice(&body.to_bytes()).unwrap();
        if records.len() >= 6 || Instant::now() >= deadline {
            return records;
        }
        sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn limits_no_retry_goes_into_an_open_circuit() {
    let (testbed_addr, testbed, _handle) = Testbed::builder()
        .fail_first_n(5)
        .spawn_local()
        .await
        .unwrap();
    let strata = support::strata(testbed_addr, |c| {
        retry_reads_at_once(c);
        c.circuit = Some(CircuitConfig {
            consecutive_failures: 2,
            open_for: Duration::from_secs(30),
            on: vec![CircuitOn::Http503],
            ..CircuitConfig::default()
        });
    })
    .await;
    let answer = Agent::new(strata.listen)
        .call(json!(1), "read_flaky", json!({}), &[])
        .await;
    assert_eq!(
        (answer.status, answer.header("strata-attempts")),
        (503, Some("2"))
    );
    assert_eq!(
        testbed.calls_of("read_flaky"),
        2,
        "the third attempt was not sent"
    );
    assert_eq!(retries_suppressed_by_limits(&strata), 1.0);
}

#[tokio::test]
async fn limits_a_retry_takes_a_token_and_without_one_is_not_made() {
    let (testbed_addr, testbed, _handle) = Testbed::builder()
        .fail_first_n(1)
        .spawn_local()
        .await
        .unwrap();
    let strata = support::strata(testbed_addr, |c| {
        retry_reads_at_once(c);
        let mut read = rule("read_*");
        (read.rate, read.burst) = (
            Some(Rate {
                calls: 1,
                per: Duration::from_secs(3600),
            }),
            Some(1),
        );
        c.limits.calls = vec![read];
    })
    .await;
    let answer = Agent::new(strata.listen)
        .call(json!(1), "read_flaky", json!({}), &[])
        .await;
    assert_eq!(
        (answer.status, answer.header("strata-attempts")),
        (503, None)
    );
    assert_eq!(
        testbed.calls_of("read_flaky"),
        1,
        "the retry found no token"
    );
    assert_eq!(retries_suppressed_by_limits(&strata), 1.0);
    let rendered = strata.metrics.render();
    assert_eq!(
        series(&rendered, "strata_limit_hits_total", &[("limit", "rate")]),
        0.0
    );
}

#[tokio::test]
async fn limits_a_reload_applies_new_limits_and_calls_in_flight_keep_their_slot() {
    let (testbed_addr, _testbed, _handle) = Testbed::spawn_local().await.unwrap();
    let mut drip = rule("sse_drip");
    drip.max_concurrent = Some(1);
    let mut config = Config::default_with_upstream(
        strata::config::Upstream::parse(&format!("http://{testbed_addr}")).unwrap(),
    );
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.admin = "127.0.0.1:0".parse().unwrap();
    config.limits.calls = vec![drip];
    let strata = strata::app::start(&config).await.unwrap();
    let client = |_| {
        McpClient::modern(strata.listen)
            .with_transport(Http1)
            .with_timeout(LIMIT)
    };
    let (a, b) = (client(0), client(1));
    let mut held = open_drip(&a, 6).await;
    let short = json!({"count": 1, "interval_ms": 1});
    assert!(is_refusal(
        &b.call_tool("sse_drip", short.clone()).await.unwrap()
    ));
    config.limits.calls[0].max_concurrent = Some(2);
    strata.reload(&config).unwrap();
    // The new limiter starts empty: the call in flight holds its slot in the old one.
    let mut second = open_drip(&b, 6).await;
    let mut third = open_drip(&b, 6).await;
    let refused = b.call_tool("sse_drip", short).await.unwrap();
    assert!(is_refusal(&refused), "two in the new limiter");
    for stream in [&mut held, &mut second, &mut third] {
        while stream.next_event().await.unwrap().is_some() {}
    }
}

#[test]
fn limits_are_read_from_yaml_and_checked_with_positions() {
    let text = "upstream: http://h:1\nlimits:\n  calls:\n    - match: \"search_*\"\n      max_concurrent: 4\n      rate: 10/s\n      burst: 20\n      queue: 0s\n      refuse_as: tool_error\n    - method: \"*\"\n      max_concurrent: 256\ncircuit:\n  consecutive_failures: 5\n  open_for: 10s\n  max_open_for: 2m\n  on: [connect_error, upstream_reset, http_502, http_503, http_504, stream_incomplete]\n  refuse_as: http_429\n";
    let config = Config::parse(text, "t.yaml", &Overrides::default()).unwrap();
    let calls = &config.limits.calls;
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].tool, Some(Glob::new("search_*")));
    assert_eq!(
        (calls[0].max_concurrent, calls[0].burst),
        (Some(4), Some(20))
    );
    assert_eq!(calls[0].rate.map(Rate::per_second), Some(10.0));
    assert_eq!(calls[0].refuse_as, Some(RefuseAs::ToolError));
    assert_eq!(calls[1].method, Some(Glob::new("*")));
    let circuit = config.circuit.unwrap();
    assert_eq!(circuit.max_open_for, Duration::from_secs(120));
    assert_eq!(circuit.on, CircuitOn::ALL);
    assert_eq!(circuit.refuse_as, Some(RefuseAs::Http429));

    let bad = "upstream: http://h:1\nlimits:\n  calls:\n    - match: \"a\"\n      rate: 10/week\n    - method: \"*\"\n      refuse_as: http_503\n      max_concurrent: 0\n    - match: \"b\"\ncircuit:\n  open_for: 1m\n  max_open_for: 10s\n  on: [http_500]\n";
    let errors: Vec<String> = match Config::parse(bad, "t.yaml", &Overrides::default()) {
        Ok(config) => panic!("expected errors, got {config:#?}"),
        Err(errors) => errors.iter().map(ToString::to_string).collect(),
    };
    let expected = [
        "t.yaml:5:13: limits.calls[0].rate: expected calls per time, like 10/s, 600/m or 5/100ms; got \"10/week\"",
        "t.yaml:7:18: limits.calls[1].refuse_as: unknown answer \"http_503\"; expected one of: tool_error, jsonrpc_error, http_429",
        "t.yaml:8:23: limits.calls[1].max_concurrent: expected a whole number in 1..=1000000, got \"0\"",
        "t.yaml:9:7: limits.calls[2]: give `max_concurrent` or `rate` (a rule that limits nothing)",
        "t.yaml:12:17: circuit.max_open_for: 10s is less than circuit.open_for 60s",
        "t.yaml:13:8: circuit.on: unknown failure \"http_500\"; expected some of: connect_error, upstream_reset, http_502, http_503, http_504, stream_incomplete",
    ];
    assert_eq!(errors, expected);
}

/// Retries `read_*` tools (idempotent), a millisecond or so apart.
fn retry_reads_at_once(c: &mut strata::config::Config) {
    c.policy.retry.initial_backoff = Duration::from_millis(1);
    c.policy.retry.max_backoff = Duration::from_millis(5);
    c.policy.tools = vec![ToolRule {
        tool: Some(Glob::new("read_*")),
        method: None,
        idempotent: true,
    }];
}

/// `strata_retries_suppressed_total{reason="limited"}`: retries a limit or the circuit stopped.
fn retries_suppressed_by_limits(strata: &strata::app::Running) -> f64 {
    let rendered = strata.metrics.render();
    let limited = [("reason", "limited")];
    series(&rendered, "strata_retries_suppressed_total", &limited)
}
