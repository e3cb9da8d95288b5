//! The fault matrix, agent side: slowloris heads, connections that never
//! start a request, oversized heads, request framing a smuggler would use, paused bodies.
//! (h2 stream limits, rapid reset and the connection cap: `faults_conns.rs`.) Raw sockets write what hyper's client will not. Each fault
//! runs beside a loop of healthy calls on another connection that must all succeed unchanged,
//! and each asserts what reached the upstream (for a refused request: nothing).
#![cfg(test)]

use crate::support;

use std::time::Duration;

use strata::testbed::client::Transport;
use support::agent::{
    FAULT_PATH, call_body, fault_heads, limit_hits, raw_exchange, raw_exchange_then, setup,
    wait_limit_hits,
};
use support::h2raw::{self, GOAWAY, HEADERS, RST_STREAM, RawH2};
use support::raw::Beside;
use support::{LIMIT, delta_after, just};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, sleep, timeout};

use Transport::{Http1, Http2};
use strata::classify::Outcome::ToolSuccess;

/// A slowloris agent trickles its head a byte every 100 ms: strata closes the connection
/// after `timeouts.header_read`, counted once as `header_timeout`. So do an agent that
/// connects and sends nothing, one that stops inside the h2 preface, and an h2 agent that
/// opens no stream.
#[tokio::test]
async fn slow_or_silent_heads_are_closed_after_header_read() {
    let header_read = Duration::from_millis(500);
    let (upstream, strata) = setup(|c| c.timeouts.header_read = header_read).await;
    let beside = Beside::start(strata.listen, Http1);
    let mut h2_hello = h2raw::PREFACE.to_vec();
    h2_hello.extend(h2raw::frame(h2raw::SETTINGS, 0, 0, &[]));
    let openings: [&[u8]; 4] = [
        b"POST /mcp-fault HTTP/1.1\r\nhost: strata\r\nx-slow: ",
        b"",
        b"PRI * HTTP/2.0\r\n",
        // A whole h2 preface and settings, then no stream.
        &h2_hello,
    ];
    for opening in openings {
        let hits = limit_hits(&strata, "header_timeout");
        let mut io = TcpStream::connect(strata.listen).await.unwrap();
        let started = Instant::now();
        io.write_all(opening).await.unwrap();
        let (mut read, mut write) = io.into_split();
        let trickle = !opening.is_empty() && opening.starts_with(b"POST");
        let writer = tokio::spawn(async move {
            // Bounded: the connection is closed long before 100 bytes.
            for _ in 0..100 {
                if !trickle || write.write_all(b"a").await.is_err() {
                    break;
                }
                sleep(Duration::from_millis(100)).await;
            }
            // Keep the write side open (no FIN) until the test aborts this task.
            sleep(LIMIT).await;
            drop(write);
        });
        let mut got = Vec::new();
        let closed = timeout(LIMIT, read.read_to_end(&mut got)).await;
        let took = started.elapsed();
        writer.abort();
        assert!(closed.is_ok(), "{opening:?}: still open after {LIMIT:?}");
        assert!(
            took >= header_read - Duration::from_millis(50) && took < header_read * 3,
            "{opening:?}: closed after {took:?}"
        );
        assert_eq!(
            wait_limit_hits(&strata, "header_timeout", hits + 1).await,
            hits + 1,
            "{opening:?}"
        );
    }
    // A keep-alive connection left idle after a request is closed by the same timer, but
    // that is normal agent behaviour: not counted.
    let hits = limit_hits(&strata, "header_timeout");
    let body = call_body("idle");
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: strata\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let (got, took) = raw_exchange(&strata, request.as_bytes()).await;
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    assert!(took >= header_read && took < header_read * 3, "{took:?}");
    assert_eq!(limit_hits(&strata, "header_timeout"), hits);
    assert!(fault_heads(&upstream).is_empty());
    beside.check("slowloris").await;
}

/// A request head over `limits.max_header_bytes`, or with more lines than
/// `limits.max_headers`: 431, counted as `header_size`, nothing forwarded.
#[tokio::test]
async fn oversized_heads_are_431_and_not_forwarded() {
    let (upstream, strata) = setup(|c| c.limits.max_headers = 50).await;
    let beside = Beside::start(strata.listen, Http2);
    let big = format!("x-big: {}\r\n", "a".repeat(70 * 1024));
    let many: String = (0..60).map(|i| format!("x-h{i}: v\r\n")).collect();
    for extra in [big, many] {
        let hits = limit_hits(&strata, "header_size");
        let request = format!("GET {FAULT_PATH} HTTP/1.1\r\nhost: strata\r\n{extra}\r\n");
        let (got, _) = raw_exchange(&strata, request.as_bytes()).await;
        assert!(
            got.starts_with("HTTP/1.1 431"),
            "{}",
            &got[..got.len().min(200)]
        );
        assert_eq!(
            wait_limit_hits(&strata, "header_size", hits + 1).await,
            hits + 1
        );
    }
    // h2: the header list is bounded by the same setting; h2 answers the stream itself.
    let mut h2 = RawH2::connect(strata.listen).await;
    let value = "a".repeat(70 * 1024);
    let block = h2raw::header_block(&[
        (":method", "GET"),
        (":scheme", "http"),
        (":authority", "strata"),
        (":path", FAULT_PATH),
        ("x-big", &value),
    ]);
    // Over h2's 16 KiB frame size: a HEADERS frame and CONTINUATION frames.
    let mut frames = Vec::new();
    let pieces: Vec<&[u8]> = block.chunks(16 * 1024).collect();
    for (i, piece) in pieces.iter().enumerate() {
        let last = i + 1 == pieces.len();
        let (kind, end) = (if i == 0 { HEADERS } else { 0x9 }, h2raw::END_HEADERS);
        let flags = if last { end } else { 0 } | if i == 0 { h2raw::END_STREAM } else { 0 };
        frames.extend(h2raw::frame(kind, flags, 1, piece));
    }
    h2.send(&frames).await.unwrap();
    let mut answered = false;
    while let Some(f) = h2.next(Duration::from_secs(2)).await {
        if f.stream == 1 && matches!(f.kind, HEADERS | RST_STREAM) || f.kind == GOAWAY {
            answered = true;
            break;
        }
    }
    assert!(answered, "h2: the oversized stream got no answer");
    sleep(Duration::from_millis(50)).await;
    assert!(fault_heads(&upstream).is_empty(), "{:?}", upstream.heads());
    beside.check("oversized heads").await;
}

/// Framing a request smuggler would use. Ambiguous or invalid `Content-Length`,
/// `Transfer-Encoding` other than chunked, and broken chunked framing: 400, and nothing
/// reaches the upstream (with the retry policy on, the default, the body is read whole
/// before anything is sent; with it off, see `broken_chunked_body_when_streaming`).
#[tokio::test]
async fn bad_framing_is_400_and_nothing_reaches_the_upstream() {
    let (upstream, strata) = setup(|_| {}).await;
    let beside = Beside::start(strata.listen, Http1);
    let body = call_body("smuggle");
    let len = body.len();
    let head = format!(
        "POST {FAULT_PATH} HTTP/1.1\r\nhost: strata\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\n"
    );
    let cases = [
        (
            "two different Content-Length",
            format!("{head}content-length: {len}\r\ncontent-length: 5\r\n\r\n{body}"),
        ),
        (
            "Content-Length not a number",
            format!("{head}content-length: abc\r\n\r\n{body}"),
        ),
        (
            "negative Content-Length",
            format!("{head}content-length: -{len}\r\n\r\n{body}"),
        ),
        (
            "Transfer-Encoding not chunked",
            format!("{head}transfer-encoding: gzip\r\n\r\n{body}"),
        ),
        (
            "chunk size not hex",
            format!("{head}transfer-encoding: chunked\r\n\r\nzz\r\n{body}\r\n0\r\n\r\n"),
        ),
        (
            "chunk shorter than its size, then the connection ends",
            format!("{head}transfer-encoding: chunked\r\n\r\nfff\r\n{body}"),
        ),
    ];
    for (what, request) in cases {
        let cut = what.starts_with("chunk shorter");
        let (got, _) = raw_exchange_then(&strata, request.as_bytes(), cut).await;
        // The last case ends the agent's side mid-body: strata answers 400 as well, which
        // the agent may or may not still read.
        if !cut {
            assert!(got.starts_with("HTTP/1.1 400"), "{what}: {got}");
        }
        sleep(Duration::from_millis(20)).await;
        assert!(
            fault_heads(&upstream).is_empty(),
            "{what}: {:?}",
            upstream.heads()
        );
    }
    beside.check("bad framing").await;
}

/// `Content-Length` and `Transfer-Encoding: chunked` together: hyper follows RFC 9112 §6.1
/// ("process the request in accordance with the Transfer-Encoding alone ... MUST close the
/// connection after responding"). The upstream gets one well-framed request (the whole
/// chunked body, no `Content-Length`), the bytes a smuggler hid after it are never parsed as
/// a request, and the agent's connection is closed after the response.
#[tokio::test]
async fn content_length_with_chunked_is_framed_by_chunked_and_the_connection_closed() {
    let (upstream, strata) = setup(|_| {}).await;
    let beside = Beside::start(strata.listen, Http2);
    let body = call_body("smuggle");
    let smuggled = "GET /smuggled HTTP/1.1\r\nhost: strata\r\n\r\n";
    let request = format!(
        "POST {FAULT_PATH} HTTP/1.1\r\nhost: strata\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\ncontent-length: 5\r\n\
         transfer-encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n{smuggled}",
        body.len()
    );
    let before = support::counts(&strata);
    let (got, took) = raw_exchange(&strata, request.as_bytes()).await;
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    assert_eq!(got.matches("HTTP/1.1").count(), 1, "one response: {got}");
    assert!(
        took < Duration::from_secs(2),
        "the connection was closed: {took:?}"
    );
    assert_eq!(fault_heads(&upstream).len(), 1);
    assert_eq!(upstream.requests_of("smuggle"), 1, "the whole body arrived");
    assert!(upstream.heads().iter().all(|h| !h.contains("/smuggled")));
    let d = delta_after(&strata, &before, 1).await;
    let mut d = d;
    d.retain(|k, _| k.tool == "smuggle");
    assert_eq!(d, just("tools/call", "smuggle", ToolSuccess));
    beside.check("CL + TE").await;
}

/// With the retry policy off, a request body streams to the upstream as it arrives, so a
/// chunked body that breaks after its head was forwarded cannot be un-sent: the upstream
/// sees a request whose body breaks (strata aborts it; the upstream never gets a whole
/// request), and the agent gets 502 (nothing was answered).
#[tokio::test]
async fn broken_chunked_body_when_streaming() {
    let (upstream, strata) = setup(|c| c.policy.retry.max_attempts = 1).await;
    let beside = Beside::start(strata.listen, Http1);
    let body = call_body("smuggle");
    let request = format!(
        "POST {FAULT_PATH} HTTP/1.1\r\nhost: strata\r\ncontent-type: application/json\r\n\
         transfer-encoding: chunked\r\n\r\n{:x}\r\n{body}\r\nzz\r\n",
        body.len()
    );
    let (got, _) = raw_exchange(&strata, request.as_bytes()).await;
    sleep(Duration::from_millis(50)).await;
    assert_eq!(
        upstream.requests_of("smuggle"),
        0,
        "no whole request: {got}"
    );
    eprintln!(
        "streaming, broken chunk: agent got {:?}; upstream heads {:?}",
        got.lines().next(),
        fault_heads(&upstream)
    );
    beside.check("broken chunked body, streaming").await;
}

/// A slow-body agent sends its head and part of its body, then pauses: strata answers 408
/// after `timeouts.request_body_idle`, counted as `request_body_timeout`, and nothing reaches
/// the upstream. (Before this limit, the connection was held for as long as the agent liked.)
#[tokio::test]
async fn a_paused_request_body_is_408_after_request_body_idle() {
    let idle = Duration::from_millis(300);
    let (upstream, strata) = setup(|c| c.timeouts.request_body_idle = Some(idle)).await;
    let beside = Beside::start(strata.listen, Http2);
    let hits = limit_hits(&strata, "request_body_timeout");
    let body = call_body("slow_body");
    let request = format!(
        "POST {FAULT_PATH} HTTP/1.1\r\nhost: strata\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{}",
        body.len(),
        &body[..10]
    );
    let (got, took) = raw_exchange(&strata, request.as_bytes()).await;
    assert!(got.starts_with("HTTP/1.1 408"), "{got}");
    assert!(got.contains("downstream:request_body_timeout"), "{got}");
    assert!(took >= idle && took < idle * 4, "{took:?}");
    assert_eq!(limit_hits(&strata, "request_body_timeout"), hits + 1);
    assert!(fault_heads(&upstream).is_empty());
    beside.check("paused request body").await;
}
