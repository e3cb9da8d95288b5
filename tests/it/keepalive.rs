//! Opt-in SSE keep-alive (`timeouts.sse_keepalive`): comments in quiet spells of an SSE
//! stream, never inside an event, never on JSON, never when off (the default).
#![cfg(test)]

use crate::support;

use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::json;
use strata::classify::Outcome;
use strata::testbed::client::{McpClient, Transport};
use support::upstream::{ScriptedUpstream, channel, full, respond};
use support::{LIMIT, delta_after, just};
use tokio::sync::mpsc;
use tokio::time::{sleep, timeout};

const EVERY: Duration = Duration::from_millis(100);

/// Each call's SSE body is fed by the test through the channel it receives.
async fn sse_upstream() -> (
    ScriptedUpstream,
    mpsc::UnboundedReceiver<mpsc::Sender<Result<Bytes, std::io::Error>>>,
) {
    let (feeds_tx, feeds) = mpsc::unbounded_channel();
    let upstream = ScriptedUpstream::spawn(move |req| {
        if req.body.windows(10).any(|w| w == b"plain_json") {
            let body = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": []}});
            return respond(
                200,
                &[("content-type", "application/json")],
                full(body.to_string()),
            );
        }
        let (tx, body) = channel();
        let _ = feeds_tx.send(tx);
        respond(200, &[("content-type", "text/event-stream")], body)
    })
    .await;
    (upstream, feeds)
}

/// Feeds: half an event, a pause (no comment may come: it would land inside the event), the
/// rest of it, a pause (comments come), the response. Returns what the agent received.
async fn play(
    agent: &McpClient,
    feeds: &mut mpsc::UnboundedReceiver<mpsc::Sender<Result<Bytes, std::io::Error>>>,
) -> (String, String) {
    let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
        "params": {"progressToken": 1, "progress": 1}});
    let (id, resp) = agent.open_tool("t", json!({})).await.unwrap();
    let feed = timeout(LIMIT, feeds.recv()).await.unwrap().unwrap();
    let response = json!({"jsonrpc": "2.0", "id": id,
        "result": {"content": [], "isError": false}});
    let first = format!("event: message\ndata: {progress}\n");
    let pieces = [
        (first.clone(), EVERY * 4),
        ("\n".to_owned(), EVERY * 4),
        (
            format!("event: message\ndata: {response}\n\n"),
            Duration::ZERO,
        ),
    ];
    let sent: String = pieces.iter().map(|(p, _)| p.as_str()).collect();
    let feeding = tokio::spawn(async move {
        for (piece, pause) in pieces {
            feed.send(Ok(Bytes::from(piece))).await.unwrap();
            sleep(pause).await;
        }
    });
    let body = timeout(LIMIT, resp.into_body().collect())
        .await
        .unwrap()
        .unwrap()
        .to_bytes();
    feeding.await.unwrap();
    (sent, String::from_utf8(body.to_vec()).unwrap())
}

#[tokio::test]
async fn keepalive_comments_fill_quiet_spells_between_events_only() {
    let (upstream, mut feeds) = sse_upstream().await;
    let strata = support::strata(upstream.addr, |c| c.timeouts.sse_keepalive = Some(EVERY)).await;
    for transport in [Transport::Http1, Transport::Http2] {
        let agent = McpClient::modern(strata.listen)
            .with_transport(transport)
            .with_timeout(LIMIT);
        let before = support::counts(&strata);
        let (sent, got) = play(&agent, &mut feeds).await;
        // Nothing was inserted into the first event, although it stalled halfway through.
        let (event, rest) = sent.split_at(sent.find("\n\n").unwrap() + 2);
        assert!(got.starts_with(event), "{transport:?}: {got:?}");
        // Its quiet spell after it is filled with comments (about four), nothing else added.
        let after = &got[event.len()..];
        let comments = after.matches(":\n\n").count();
        assert!(
            (2..=6).contains(&comments),
            "{transport:?}: {comments} in {after:?}"
        );
        assert_eq!(after.replace(":\n\n", ""), rest, "{transport:?}");
        // The classification is the upstream's alone.
        let d = delta_after(&strata, &before, 1).await;
        assert_eq!(d, just("tools/call", "t", Outcome::ToolSuccess));
        // JSON bodies are never touched.
        let reply = agent.call_tool("plain_json", json!({})).await.unwrap();
        let json = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": []}});
        assert_eq!(reply.body, json.to_string().as_bytes());
    }
}

#[tokio::test]
async fn keepalive_is_off_by_default() {
    let (upstream, mut feeds) = sse_upstream().await;
    let strata = support::strata(upstream.addr, |_| {}).await;
    let agent = McpClient::modern(strata.listen).with_timeout(LIMIT);
    let (sent, got) = play(&agent, &mut feeds).await;
    assert_eq!(got, sent, "byte for byte");
}
