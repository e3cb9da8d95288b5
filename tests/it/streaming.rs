//! Streaming: strata forwards each piece of a response as it arrives — no batching of SSE
//! events, no waiting for event boundaries — keeps the testbed's event spacing, carries a
//! 64 MiB result whole, and lets a slow agent's back-pressure reach the upstream instead of
//! buffering.
#![cfg(test)]

use crate::support;

use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::{Value, json};
use strata::classify::Outcome;
use strata::testbed::client::{McpClient, SseReader, Transport};
use support::upstream::{ScriptedUpstream, channel, respond};
use support::{Fnv, LIMIT, Stack, just};
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout};

use Transport::{Http1, Http2};

/// How long the agent waits for a piece the upstream has sent. A proxy that holds bytes back
/// until more arrive never delivers it (the upstream sends nothing more until it is
/// delivered), so it fails here rather than hangs.
const LOCKSTEP_WAIT: Duration = Duration::from_secs(3);

/// An SSE response whose pieces the test sends one at a time; each piece must reach the
/// agent before the next is sent. Pieces include half events, so strata may not wait for an
/// event's end either.
#[tokio::test]
async fn each_piece_reaches_the_agent_before_the_next_is_sent() {
    let (senders_tx, mut senders) = mpsc::unbounded_channel();
    let upstream = ScriptedUpstream::spawn(move |_| {
        let (tx, body) = channel();
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
        let (id, resp) = client.open_tool("t", json!({})).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let feed = timeout(LIMIT, senders.recv()).await.unwrap().unwrap();
        let mut body = resp.into_body();

        let mut pieces: Vec<String> = Vec::new();
        for i in 0..8 {
            let note = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": id, "progress": i}});
            let event = format!("event: message\ndata: {note}\n\n");
            if i % 3 == 2 {
                // Half an event, then the rest.
                let (a, b) = event.split_at(event.len() / 2);
                pieces.extend([a.to_owned(), b.to_owned()]);
            } else {
                pieces.push(event);
            }
        }
        let result = json!({"jsonrpc": "2.0", "id": id,
            "result": {"content": [], "isError": false, "resultType": "complete"}});
        pieces.push(format!("event: message\ndata: {result}\n\n"));

        for (i, piece) in pieces.iter().enumerate() {
            feed.send(Ok(Bytes::from(piece.clone()))).await.unwrap();
            let got = timeout(LOCKSTEP_WAIT, read_exactly(&mut body, piece.len()))
                .await
                .unwrap_or_else(|_| {
                    panic!("{transport:?}: piece {i} was held back by strata ({piece:?})")
                });
            assert_eq!(got, piece.as_bytes(), "{transport:?}: piece {i}");
        }
        drop(feed);
        // The body ends cleanly with nothing more (h2 may close with an empty DATA frame).
        while let Some(frame) = timeout(LIMIT, body.frame()).await.unwrap() {
            let frame = frame.unwrap();
            assert!(
                frame.data_ref().is_none_or(|d| d.is_empty()),
                "{transport:?}"
            );
        }
        let d = support::delta_after(&strata, &before, 1).await;
        assert_eq!(d, just("tools/call", "t", Outcome::ToolSuccess));
    }
}

/// Reads frames until exactly `n` bytes came (more would mean a later piece came early,
/// which the lock-step makes impossible).
async fn read_exactly(body: &mut Incoming, n: usize) -> Vec<u8> {
    let mut got = Vec::new();
    while got.len() < n {
        let frame = body.frame().await.unwrap().unwrap();
        if let Some(data) = frame.data_ref() {
            got.extend_from_slice(data);
        }
    }
    got
}

/// The testbed's `sse_drip` sends an event every 100 ms; through strata they arrive with the
/// same spacing, each in a read of its own. The gaps are printed (`--nocapture`); the
/// assertion is deliberately loose (≥ 50 ms) so a busy machine cannot fail it.
#[tokio::test]
async fn drip_events_keep_their_spacing_through_strata() {
    let stack = Stack::start(|_| {}).await;
    let direct = McpClient::modern(stack.testbed_addr).with_timeout(LIMIT);
    for (label, client) in [
        ("direct", direct),
        ("strata h1", stack.modern(Http1)),
        ("strata h2", stack.modern(Http2)),
    ] {
        let args = json!({"count": 5, "interval_ms": 100});
        let (_, resp) = client.open_tool("sse_drip", args).await.unwrap();
        let mut reader = SseReader::new(resp.into_body()).with_timeout(LIMIT);
        let mut arrivals = Vec::new();
        while let Some((event, at)) = reader.next_event().await.unwrap() {
            arrivals.push((event, at));
        }
        assert_eq!(
            arrivals.len(),
            6,
            "{label}: five progress events and the result"
        );
        let gaps: Vec<Duration> = arrivals.windows(2).map(|w| w[1].1 - w[0].1).collect();
        println!(
            "{label:>9}: gaps between events (ms): {:?}",
            gaps.iter().map(Duration::as_millis).collect::<Vec<_>>()
        );
        for (i, gap) in gaps.iter().enumerate() {
            assert!(
                *gap >= Duration::from_millis(50),
                "{label}: events {i} and {} arrived {gap:?} apart (sent 100 ms apart)",
                i + 1
            );
        }
        let frames: Vec<u64> = arrivals.iter().map(|(e, _)| e.frame).collect();
        let mut distinct = frames.clone();
        distinct.dedup();
        assert_eq!(frames, distinct, "{label}: two events in one read");
    }
}

/// A 64 MiB result passes whole: same length and hash as direct, classified TOOL_SUCCESS.
#[tokio::test]
async fn a_64_mib_result_arrives_whole() {
    let stack = Stack::start(|_| {}).await;
    let bytes: u64 = 64 << 20;
    let args = json!({"bytes": bytes});
    let direct = McpClient::modern(stack.testbed_addr).with_timeout(LIMIT);
    let (len_direct, hash_direct) = digest(&direct, args.clone()).await;
    for transport in [Http1, Http2] {
        let before = stack.counts();
        let (len, hash) = digest(&stack.modern(transport), args.clone()).await;
        assert!(len > bytes, "{transport:?}: {len}");
        assert_eq!(len, len_direct, "{transport:?}");
        assert_eq!(hash, hash_direct, "{transport:?}");
        let d = stack.delta_after(&before, 1).await;
        assert_eq!(d, just("tools/call", "large_result", Outcome::ToolSuccess));
    }
}

/// Length and FNV-1a of a `large_result` body, read as it streams (never held whole).
async fn digest(client: &McpClient, args: Value) -> (u64, Fnv) {
    let (_, resp) = client.open_tool("large_result", args).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut body = resp.into_body();
    let (mut len, mut hash) = (0u64, Fnv::default());
    while let Some(frame) = timeout(LIMIT, body.frame()).await.unwrap() {
        if let Some(data) = frame.unwrap().data_ref() {
            len += data.len() as u64;
            hash.update(data);
        }
    }
    (len, hash)
}

/// An agent that stops reading: the upstream's writes stall after a bounded amount (socket
/// and hyper buffers), instead of strata reading on and buffering the rest.
#[tokio::test]
async fn a_slow_agent_holds_back_the_upstream() {
    let (senders_tx, mut senders) = mpsc::unbounded_channel();
    let upstream = ScriptedUpstream::spawn(move |_| {
        let (tx, body) = channel();
        let _ = senders_tx.send(tx);
        respond(200, &[("content-type", "text/event-stream")], body)
    })
    .await;
    let strata = support::strata(upstream.addr, |_| {}).await;
    let client = McpClient::modern(strata.listen).with_timeout(LIMIT);
    let (_, resp) = client.open_tool("t", json!({})).await.unwrap();
    let feed = timeout(LIMIT, senders.recv()).await.unwrap().unwrap();

    // 64 KiB events until a send has waited 300 ms: nobody takes more.
    let event = Bytes::from(format!("data: \"{}\"\n\n", "x".repeat(64 * 1024 - 10)));
    let cap: u64 = 256 << 20;
    let mut sent = 0u64;
    let started = Instant::now();
    while sent < cap {
        match timeout(Duration::from_millis(300), feed.send(Ok(event.clone()))).await {
            Ok(r) => {
                r.unwrap();
                sent += event.len() as u64;
            }
            Err(_) => break,
        }
        assert!(
            started.elapsed() < LIMIT,
            "the upstream was never held back"
        );
    }
    println!("upstream held back after {} KiB in flight", sent / 1024);
    assert!(
        sent < 64 << 20,
        "{sent} bytes went out to an agent that reads nothing"
    );

    // Reading resumes the flow: everything sent arrives.
    drop(feed);
    let mut body = resp.into_body();
    let mut got = 0u64;
    while let Some(frame) = timeout(LIMIT, body.frame()).await.unwrap() {
        got += frame.unwrap().data_ref().map_or(0, |d| d.len() as u64);
    }
    assert_eq!(got, sent);
}
