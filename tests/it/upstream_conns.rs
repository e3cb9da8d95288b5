//! Connections to a plain-HTTP upstream (`src/proxy/h1_conns.rs`): reused across calls and
//! across agent connections, one per call in flight, by a retry after a 503 whose body came
//! whole, and never reused after a broken response.
#![cfg(test)]

use crate::support;

use http::StatusCode;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use strata::testbed::client::{McpClient, Transport};

use strata::app::Running;
use strata::config::{Glob, ToolRule, Workers};
use support::LIMIT;
use support::raw::{healthy_body, setup};
use tokio::task::JoinSet;
use tokio::time::Instant;

use Transport::{Http1, Http2};

fn agent(strata: &Running, transport: Transport) -> McpClient {
    McpClient::modern(strata.listen)
        .with_transport(transport)
        .with_timeout(LIMIT)
}

/// `n` calls over HTTP/1.1, then `n` over h2, each on an agent connection of its own; each
/// answered 200.
async fn calls_on_fresh_connections(strata: &Running, n: usize) {
    for transport in [Http1, Http2] {
        for _ in 0..n {
            let reply = agent(strata, transport)
                .call_tool("healthy", json!({}))
                .await
                .unwrap();
            assert_eq!(reply.status, StatusCode::OK);
        }
    }
}

/// Calls one after another — on one agent connection, then each on an agent connection of its
/// own, h1 and h2 — all go out on the one upstream connection the first call opened. One
/// worker: each worker keeps its own idle connections (`runtime/workers.rs`).
#[tokio::test]
async fn one_upstream_connection_serves_calls_one_after_another() {
    let (upstream, strata) = setup(|c| c.workers = Workers::Count(1)).await;
    let one = agent(&strata, Http1);
    for _ in 0..20 {
        let reply = one.call_tool("healthy", json!({})).await.unwrap();
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.body, healthy_body(&reply.id).as_bytes());
    }
    calls_on_fresh_connections(&strata, 10).await;
    assert_eq!(upstream.connections(), 1);
}

/// With two workers, calls each on a fresh agent connection land on either; each worker
/// reuses the upstream connection it opened, so no more than two are ever opened.
#[tokio::test]
async fn each_worker_reuses_its_own_upstream_connection() {
    let (upstream, strata) = setup(|c| c.workers = Workers::Count(2)).await;
    calls_on_fresh_connections(&strata, 15).await;
    assert!(
        (1..=2).contains(&upstream.connections()),
        "{} upstream connections",
        upstream.connections()
    );
}

/// Eight agents calling at once: at most one upstream connection per call in flight, and the
/// later rounds open none.
#[tokio::test]
async fn concurrent_calls_take_a_connection_each_and_give_it_back() {
    let (upstream, strata) = setup(|_| {}).await;
    let agents: Vec<Arc<McpClient>> = (0..8).map(|_| Arc::new(agent(&strata, Http1))).collect();
    let round = || async {
        let mut calls = JoinSet::new();
        for a in &agents {
            let a = a.clone();
            calls.spawn(async move { a.call_tool("healthy", json!({})).await.unwrap() });
        }
        while let Some(reply) = calls.join_next().await {
            let reply = reply.unwrap();
            assert_eq!(reply.status, StatusCode::OK);
            assert_eq!(reply.body, healthy_body(&reply.id).as_bytes());
        }
    };
    round().await;
    let opened = upstream.connections();
    assert!((1..=8).contains(&opened), "{opened}");
    for _ in 0..10 {
        round().await;
    }
    assert!(upstream.connections() <= 8, "{}", upstream.connections());
}

/// A response the upstream broke off (a reset mid-body) takes its connection with it: the next
/// call opens a new one and succeeds; a whole response gives its connection back.
#[tokio::test]
async fn a_broken_response_does_not_give_its_connection_back() {
    let (upstream, strata) = setup(|_| {}).await;
    let one = agent(&strata, Http1);
    let reply = one.call_tool("healthy", json!({})).await.unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(upstream.connections(), 1);
    let broken = one.call_tool("reset_json", json!({})).await.unwrap();
    assert!(broken.broken.is_some(), "{broken:?}");
    for _ in 0..3 {
        let reply = one.call_tool("healthy", json!({})).await.unwrap();
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.body, healthy_body(&reply.id).as_bytes());
    }
    // The first connection carried the reset; one new connection served the rest.
    assert_eq!(upstream.connections(), 2);
}

/// strata with one worker, every tool idempotent (so a 503 is retried), before a raw upstream.
async fn setup_retrying() -> (support::raw::RawUpstream, Running) {
    setup(|c| {
        c.workers = Workers::Count(1);
        c.policy.tools = vec![ToolRule {
            tool: Some(Glob::new("*")),
            method: None,
            idempotent: true,
        }];
    })
    .await
}

/// Each call's first attempt is answered 503 with a short body in the head's write (by length,
/// then chunked): the body is read past and the retry goes out on the same connection, so five
/// retried calls use one.
#[tokio::test]
async fn a_retry_after_a_503_reuses_its_connection() {
    for tool in ["busy_whole", "busy_chunked"] {
        let (upstream, strata) = setup_retrying().await;
        let one = agent(&strata, Http1);
        for _ in 0..5 {
            let reply = one.call_tool(tool, json!({})).await.unwrap();
            assert_eq!(reply.status, StatusCode::OK, "{tool}");
            assert_eq!(reply.headers["strata-attempts"], "2", "{tool}");
            assert_eq!(reply.body, healthy_body(&reply.id).as_bytes(), "{tool}");
        }
        assert_eq!(upstream.requests_of(tool), 10, "{tool}");
        assert_eq!(upstream.connections(), 1, "{tool}");
    }
}

/// A 503 whose body comes after its head is not waited for: its connection closes and the
/// retry goes out on a new one, which the next call's first attempt then reuses.
#[tokio::test]
async fn a_503_whose_body_is_still_arriving_closes_its_connection() {
    let (upstream, strata) = setup_retrying().await;
    let one = agent(&strata, Http1);
    for _ in 0..3 {
        let reply = one.call_tool("busy_body_apart", json!({})).await.unwrap();
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.headers["strata-attempts"], "2");
    }
    assert_eq!(upstream.requests_of("busy_body_apart"), 6);
    assert_eq!(upstream.connections(), 4);
}

/// A 503 that asks for a wait (`Retry-After: 1`) and whose body comes after its head: the body
/// is read during the wait, and the retry goes out on the same connection.
#[tokio::test]
async fn a_503_body_arriving_during_the_wait_keeps_its_connection() {
    let (upstream, strata) = setup_retrying().await;
    let one = agent(&strata, Http1);
    for _ in 0..2 {
        let started = Instant::now();
        let reply = one
            .call_tool("busy_wait_body_apart", json!({}))
            .await
            .unwrap();
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.headers["strata-attempts"], "2");
        assert!(
            started.elapsed() >= Duration::from_secs(1),
            "the wait is kept"
        );
    }
    assert_eq!(upstream.requests_of("busy_wait_body_apart"), 4);
    assert_eq!(upstream.connections(), 1);
}

/// A body the wait does not see to its end — one that never comes, or one longer than an error
/// page — is dropped when the wait is over or the body grows too long: its connection closes,
/// and the retry goes out on a new one, once the wait is over.
#[tokio::test]
async fn a_503_body_not_read_within_the_wait_closes_its_connection() {
    for tool in ["busy_wait_body_never", "busy_wait_body_long"] {
        let (upstream, strata) = setup_retrying().await;
        let one = agent(&strata, Http1);
        let started = Instant::now();
        let reply = one.call_tool(tool, json!({})).await.unwrap();
        assert_eq!(reply.status, StatusCode::OK, "{tool}");
        assert_eq!(reply.headers["strata-attempts"], "2", "{tool}");
        assert!(
            started.elapsed() >= Duration::from_secs(1),
            "{tool}: the wait is kept"
        );
        assert_eq!(upstream.requests_of(tool), 2, "{tool}");
        assert_eq!(upstream.connections(), 2, "{tool}");
    }
}
