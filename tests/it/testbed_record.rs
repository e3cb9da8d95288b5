//! The testbed's two soak hooks, against the testbed alone: `arguments.response_mode` picks
//! JSON or SSE per call, and `record_sent` keeps, per request id, the status and the exact
//! body bytes (length, hash, prefix) it sent.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};
use strata::testbed::client::{LEGACY_VERSION, McpClient, Reply};
use strata::testbed::{BodyHash, SentBody, SentEnd, Testbed};

/// The record of `reply`'s request, which must already be there: the testbed writes it
/// before the client can see the body's end.
fn sent_of(tb: &Testbed, reply: &Reply) -> SentBody {
    tb.take_sent(&reply.id.to_string())
        .unwrap_or_else(|| panic!("no record for id {}", reply.id))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_mode_argument_overrides_the_testbed_option() {
    let (addr, _tb, handle) = Testbed::spawn_local().await.unwrap();
    let client = McpClient::modern(addr);
    let sse = client
        .call_tool("tool_error", json!({"response_mode": "sse"}))
        .await
        .unwrap();
    assert_eq!(sse.content_type(), Some("text/event-stream"));
    let events = sse.sse_events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].json().unwrap()["result"]["isError"], true);

    let json = client
        .call_tool("tool_error", json!({"response_mode": "json"}))
        .await
        .unwrap();
    assert_eq!(json.content_type(), Some("application/json"));
    assert_eq!(json.json().unwrap()["result"]["isError"], true);
    // Unknown values fall back to the testbed's mode (JSON by default).
    let other = client
        .call_tool("ok", json!({"response_mode": "xml"}))
        .await
        .unwrap();
    assert_eq!(other.content_type(), Some("application/json"));
    handle.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_to_a_request_is_recorded_byte_for_byte() {
    let (addr, tb, handle) = Testbed::builder()
        .record_sent(true)
        .spawn_local()
        .await
        .unwrap();
    let mut legacy = McpClient::legacy(addr);
    let init = legacy.initialize(LEGACY_VERSION).await.unwrap();
    let sent = sent_of(&tb, &init);
    assert_eq!(sent.hash, BodyHash::of(&init.body));
    assert_eq!(sent.end, SentEnd::Complete);

    for (tool, args) in [
        ("ok", json!({"response_mode": "sse"})),
        ("sse_progress", json!({})),
        ("large_result", json!({"bytes": 300_000})),
        ("http_503_then_200", json!({})),
        ("empty_202", json!({})),
        ("sse_resumable", json!({})),
    ] {
        let reply = legacy.call_tool(tool, args).await.unwrap();
        assert!(reply.broken.is_none(), "{tool}");
        let sent = sent_of(&tb, &reply);
        assert_eq!(sent.status, reply.status.as_u16(), "{tool}");
        assert_eq!(sent.len, reply.body.len() as u64, "{tool}");
        assert_eq!(sent.hash, BodyHash::of(&reply.body), "{tool}");
        assert!(reply.body.starts_with(&sent.prefix), "{tool}");
        assert_eq!(sent.end, SentEnd::Complete, "{tool}");
    }
    assert_eq!(tb.sent_dropped(), 0);
    handle.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_body_is_recorded_as_aborted_with_the_bytes_before_the_break() {
    let (addr, tb, handle) = Testbed::builder()
        .record_sent(true)
        .spawn_local()
        .await
        .unwrap();
    let client = McpClient::modern(addr);
    for tool in ["json_reset", "sse_reset"] {
        let reply = client.call_tool(tool, json!({})).await.unwrap();
        assert!(reply.broken.is_some(), "{tool}");
        let sent = sent_of(&tb, &reply);
        assert_eq!(sent.end, SentEnd::Aborted, "{tool}");
        assert_eq!(&sent.prefix[..], &reply.body[..], "{tool}");
        assert_eq!(sent.hash, BodyHash::of(&reply.body), "{tool}");
    }
    // Notifications are not requests: nothing is recorded for them.
    let status = client
        .notify("notifications/initialized", Value::Null)
        .await
        .unwrap();
    assert_eq!(status.as_u16(), 202);
    assert_eq!(tb.take_sent("null"), None);
    handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn nothing_is_recorded_unless_asked() {
    let (addr, tb, handle) = Testbed::spawn_local().await.unwrap();
    let reply = McpClient::modern(addr)
        .call_tool("ok", json!({}))
        .await
        .unwrap();
    assert_eq!(tb.take_sent(&reply.id.to_string()), None);
    handle.shutdown().await.unwrap();
}
