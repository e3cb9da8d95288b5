//! The fault matrix, upstream side: an upstream that resets mid-body,
//! stalls, never answers, speaks something that is not HTTP, or closes a pooled connection;
//! and an agent that leaves mid-stream. Each fault states what the agent receives and the
//! outcome strata counts, and runs beside a loop of healthy calls on another connection that
//! must all succeed unchanged. Agent-side faults (slowloris, bad heads and framing, h2 abuse)
//! are in `faults_agent.rs`.
#![cfg(test)]

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use http::StatusCode;
use http_body_util::BodyExt;
use serde_json::json;
use strata::app::Running;
use strata::classify::Outcome;
use strata::testbed::client::{McpClient, Reply, SseReader, Transport};
use support::raw::{Beside, healthy_body, setup};
use support::{CallKey, LIMIT, just};
use tokio::time::{Instant, sleep, timeout};

use Outcome::*;
use Transport::{Http1, Http2};

fn client(strata: &Running, transport: Transport) -> McpClient {
    McpClient::modern(strata.listen)
        .with_transport(transport)
        .with_timeout(LIMIT)
}

/// The counter delta of `tool`'s calls since `before`, once it reaches `n` (or after
/// [`LIMIT`]): the healthy calls beside are left out.
async fn delta_of(
    strata: &Running,
    before: &BTreeMap<CallKey, u64>,
    tool: &str,
    n: u64,
) -> BTreeMap<CallKey, u64> {
    let deadline = Instant::now() + LIMIT;
    loop {
        let mut d = support::delta(before, &support::counts(strata));
        d.retain(|k, _| k.tool == tool);
        if d.values().sum::<u64>() >= n || Instant::now() >= deadline {
            return d;
        }
        sleep(Duration::from_millis(5)).await;
    }
}

/// A call to `tool` whose upstream body breaks. Over HTTP/1.1 the agent always reads the head
/// and the bytes before the break. Over h2 strata resets the stream (`INTERNAL_ERROR`), and an
/// h2 receiver drops what it buffered but had not handed out yet when a reset arrives (h2
/// crate, RFC 9113 §6.4 leaves it open): the agent then sees only the reset (`None`), or the
/// head and a prefix of the bytes strata sent (strata writes them before the reset).
async fn call_or_reset(strata: &Running, transport: Transport, tool: &str) -> Option<Reply> {
    match client(strata, transport).call_tool(tool, json!({})).await {
        Ok(reply) => Some(reply),
        Err(err) if transport == Http2 => {
            let text = format!("{err:?}");
            assert!(text.contains("INTERNAL_ERROR"), "{text}");
            None
        }
        Err(err) => panic!("{transport:?}: {err}"),
    }
}

/// The upstream resets the connection halfway through a JSON body: the agent gets the 200
/// head and the bytes sent before the reset, then a broken body; STREAM_INCOMPLETE.
#[tokio::test]
async fn upstream_reset_mid_json_body_is_stream_incomplete() {
    let (_upstream, strata) = setup(|_| {}).await;
    for transport in [Http1, Http2] {
        let beside = Beside::start(strata.listen, Http1);
        let before = support::counts(&strata);
        if let Some(reply) = call_or_reset(&strata, transport, "reset_json").await {
            assert_eq!(reply.status, StatusCode::OK, "{transport:?}");
            assert!(reply.broken.is_some(), "{transport:?}: {reply:?}");
            let whole = healthy_body(&reply.id);
            let sent = &whole.as_bytes()[..whole.len() / 2];
            match transport {
                Http1 => assert_eq!(&reply.body[..], sent),
                // What the h2 receiver had not handed out when the reset came is gone.
                _ => assert!(sent.starts_with(&reply.body), "{reply:?}"),
            }
        }
        let d = delta_of(&strata, &before, "reset_json", 1).await;
        assert_eq!(d, just("tools/call", "reset_json", StreamIncomplete));
        beside.check(&format!("reset mid-JSON {transport:?}")).await;
    }
}

/// The upstream resets mid-SSE stream, after a progress event and before the response: the
/// agent gets the event, then a broken body; STREAM_INCOMPLETE.
#[tokio::test]
async fn upstream_reset_mid_sse_stream_is_stream_incomplete() {
    let (_upstream, strata) = setup(|_| {}).await;
    for transport in [Http1, Http2] {
        let beside = Beside::start(strata.listen, Http2);
        let before = support::counts(&strata);
        if let Some(reply) = call_or_reset(&strata, transport, "reset_sse").await {
            assert_eq!(reply.status, StatusCode::OK);
            assert!(reply.broken.is_some(), "{transport:?}: {reply:?}");
            let events = reply.sse_events();
            // Over h2 the event may be among what the receiver drops at the reset.
            let expected = if transport == Http1 { 1..=1 } else { 0..=1 };
            assert!(
                expected.contains(&events.len()),
                "{transport:?}: {events:?}"
            );
            for event in &events {
                assert_eq!(event.json().unwrap()["method"], "notifications/progress");
            }
        }
        let d = delta_of(&strata, &before, "reset_sse", 1).await;
        assert_eq!(d, just("tools/call", "reset_sse", StreamIncomplete));
        beside.check(&format!("reset mid-SSE {transport:?}")).await;
    }
}

/// Over h2, what came before the break is written before the reset: the agent's connection
/// carries HEADERS, the progress event's DATA, then RST_STREAM (whatever an h2 receiver then
/// keeps of it, above). Two hundred rounds: which task runs first decides the order, so one
/// round shows little.
#[tokio::test]
async fn h2_data_before_a_break_goes_out_before_the_reset() {
    use support::h2raw::{self, END_HEADERS, END_STREAM, HEADERS, RST_STREAM, RawH2};
    const DATA: u8 = 0x0;
    let (_upstream, strata) = setup(|_| {}).await;
    for round in 0..200 {
        let mut h2 = RawH2::connect(strata.listen).await;
        let body = json!({"jsonrpc": "2.0", "id": round, "method": "tools/call",
            "params": {"name": "reset_sse", "arguments": {}}})
        .to_string();
        let block = h2raw::header_block(&[
            (":method", "POST"),
            (":scheme", "http"),
            (":authority", &strata.listen.to_string()),
            (":path", "/mcp"),
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", "2026-07-28"),
        ]);
        let mut out = h2raw::frame(HEADERS, END_HEADERS, 1, &block);
        out.extend(h2raw::frame(DATA, END_STREAM, 1, body.as_bytes()));
        h2.send(&out).await.unwrap();
        let mut seen = Vec::new();
        while let Some(f) = h2.next(LIMIT).await {
            if f.stream != 1 {
                continue;
            }
            let kind = f.kind;
            seen.push(f);
            if kind == RST_STREAM {
                break;
            }
        }
        let kinds: Vec<u8> = seen.iter().map(|f| f.kind).collect();
        let data: Vec<u8> = seen
            .iter()
            .filter(|f| f.kind == DATA)
            .flat_map(|f| f.payload.clone())
            .collect();
        assert_eq!(kinds.first(), Some(&HEADERS), "round {round}: {kinds:?}");
        assert_eq!(kinds.last(), Some(&RST_STREAM), "round {round}: {kinds:?}");
        let text = String::from_utf8_lossy(&data);
        assert!(
            text.contains("notifications/progress"),
            "round {round}: {kinds:?} {text:?}"
        );
    }
}

/// The upstream sends a head and a few bytes, then nothing. With `timeouts.body_idle` set,
/// strata cuts the body after that long: the agent's body breaks; STREAM_INCOMPLETE.
#[tokio::test]
async fn upstream_stall_after_head_is_cut_by_body_idle() {
    let idle = Duration::from_millis(300);
    let (_upstream, strata) = setup(|c| c.timeouts.body_idle = Some(idle)).await;
    for transport in [Http1, Http2] {
        let beside = Beside::start(strata.listen, Http1);
        let before = support::counts(&strata);
        let started = Instant::now();
        let reply = client(&strata, transport)
            .call_tool("stall", json!({}))
            .await
            .unwrap();
        let took = started.elapsed();
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(&reply.body[..], b"{\"jsonrpc\":");
        assert!(reply.broken.is_some(), "{transport:?}: {reply:?}");
        assert!(
            took >= idle && took < idle * 5,
            "{transport:?}: cut after {took:?}"
        );
        let d = delta_of(&strata, &before, "stall", 1).await;
        assert_eq!(d, just("tools/call", "stall", StreamIncomplete));
        beside
            .check(&format!("stall with body_idle {transport:?}"))
            .await;
    }
}

/// Without `timeouts.body_idle` (the default: quiet SSE streams are normal) a stalled body
/// stays open; the agent decides. Here it waits a second, sees no end, and leaves:
/// CLIENT_CANCELLED.
#[tokio::test]
async fn upstream_stall_after_head_stays_open_without_body_idle() {
    let (_upstream, strata) = setup(|_| {}).await;
    for transport in [Http1, Http2] {
        let beside = Beside::start(strata.listen, Http2);
        let before = support::counts(&strata);
        let (_, resp) = client(&strata, transport)
            .open_tool("stall", json!({}))
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let mut body = resp.into_body();
        let first = timeout(LIMIT, body.frame())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(first.into_data().unwrap(), &b"{\"jsonrpc\":"[..]);
        let next = timeout(Duration::from_secs(1), body.frame()).await;
        assert!(
            next.is_err(),
            "{transport:?}: the stalled body ended: {next:?}"
        );
        let d = delta_of(&strata, &before, "stall", 0).await;
        assert!(d.is_empty(), "no outcome while it is open: {d:?}");
        drop(body);
        let d = delta_of(&strata, &before, "stall", 1).await;
        assert_eq!(d, just("tools/call", "stall", ClientCancelled));
        beside
            .check(&format!("stall without body_idle {transport:?}"))
            .await;
    }
}

/// The upstream reads the request and never answers: strata's 504 after
/// `timeouts.response_head`, HTTP_ERROR.
#[tokio::test]
async fn upstream_that_never_answers_is_504_after_response_head() {
    let head = Duration::from_millis(300);
    let (_upstream, strata) = setup(|c| c.timeouts.response_head = head).await;
    for transport in [Http1, Http2] {
        let beside = Beside::start(strata.listen, Http1);
        let before = support::counts(&strata);
        let started = Instant::now();
        let reply = client(&strata, transport)
            .call_tool("never", json!({}))
            .await
            .unwrap();
        let took = started.elapsed();
        assert_eq!(reply.status, StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(
            reply.headers["x-strata-error"],
            "upstream:response_head_timeout"
        );
        assert_eq!(reply.json().unwrap()["error"]["code"], -32000);
        assert!(took >= head && took < head * 5, "{transport:?}: {took:?}");
        let d = delta_of(&strata, &before, "never", 1).await;
        assert_eq!(d, just("tools/call", "never", HttpError));
        beside.check(&format!("never answers {transport:?}")).await;
    }
}

/// The upstream answers with bytes that are not HTTP: strata's 502, HTTP_ERROR.
#[tokio::test]
async fn upstream_speaking_not_http_is_502() {
    let (_upstream, strata) = setup(|_| {}).await;
    for transport in [Http1, Http2] {
        let beside = Beside::start(strata.listen, Http2);
        let before = support::counts(&strata);
        let reply = client(&strata, transport)
            .call_tool("garbage", json!({}))
            .await
            .unwrap();
        assert_eq!(reply.status, StatusCode::BAD_GATEWAY);
        assert_eq!(
            reply.headers["x-strata-error"],
            "upstream:reset_before_response"
        );
        assert_eq!(reply.json().unwrap()["error"]["code"], -32000);
        let d = delta_of(&strata, &before, "garbage", 1).await;
        assert_eq!(d, just("tools/call", "garbage", HttpError));
        beside.check(&format!("not HTTP {transport:?}")).await;
    }
}

/// The upstream closes a pooled keep-alive connection between two calls: the next call goes
/// out on a new connection and succeeds.
#[tokio::test]
async fn pooled_connection_closed_between_calls_is_replaced() {
    let (upstream, strata) = setup(|_| {}).await;
    let beside = Beside::start(strata.listen, Http1);
    let agent = client(&strata, Http1);
    let before = support::counts(&strata);
    for round in 0..5 {
        let conns = upstream.connections();
        let reply = agent.call_tool("then_close", json!({})).await.unwrap();
        assert_eq!(reply.status, StatusCode::OK, "round {round}");
        assert_eq!(reply.body, healthy_body(&reply.id).as_bytes());
        // The upstream closes the connection once idle for 20 ms; the next call comes later.
        // (Calls beside may keep it busy, and so open; the first round cannot.)
        sleep(Duration::from_millis(60)).await;
        let reply = agent.call_tool("next", json!({})).await.unwrap();
        assert_eq!(reply.status, StatusCode::OK, "round {round}: {reply:?}");
        assert_eq!(reply.body, healthy_body(&reply.id).as_bytes());
        assert!(upstream.connections() > conns || round > 0, "round {round}");
    }
    let d = delta_of(&strata, &before, "next", 5).await;
    assert_eq!(
        d,
        BTreeMap::from([(support::key("tools/call", "next", ToolSuccess), 5)])
    );
    let d = delta_of(&strata, &before, "then_close", 5).await;
    assert_eq!(
        d,
        BTreeMap::from([(support::key("tools/call", "then_close", ToolSuccess), 5)])
    );
    beside.check("pooled connection closed").await;
}

/// The agent leaves mid-stream while the upstream is quiet: strata closes the upstream
/// request within 100 ms, measured at the upstream (from the agent's close to the upstream
/// reading end-of-stream on its connection); CLIENT_CANCELLED.
#[tokio::test]
async fn agent_gone_mid_stream_closes_the_upstream_request_within_100ms() {
    let (mut upstream, strata) = setup(|_| {}).await;
    for transport in [Http1, Http2] {
        let beside = Beside::start(strata.listen, Http1);
        let mut worst = Duration::ZERO;
        for round in 0..5 {
            let before = support::counts(&strata);
            let agent = client(&strata, transport);
            let (_, resp) = agent.open_tool("watch", json!({})).await.unwrap();
            let mut reader = SseReader::new(resp.into_body()).with_timeout(LIMIT);
            let (event, _) = reader.next_event().await.unwrap().unwrap();
            assert_eq!(event.json().unwrap()["method"], "notifications/progress");
            let left = Instant::now();
            drop(reader);
            drop(agent);
            let (tool, closed) = timeout(LIMIT, upstream.closed.recv())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(tool, "watch");
            let latency = closed.saturating_duration_since(left);
            worst = worst.max(latency);
            assert!(
                latency < Duration::from_millis(100),
                "{transport:?} round {round}: the upstream saw the close after {latency:?}"
            );
            let d = delta_of(&strata, &before, "watch", 1).await;
            assert_eq!(d, just("tools/call", "watch", ClientCancelled));
        }
        eprintln!("agent close -> upstream close, {transport:?}: worst of 5 {worst:?}");
        beside.check(&format!("agent gone {transport:?}")).await;
    }
}
