//! The fault matrix, connection level: h2 streams beyond
//! `limits.max_h2_streams`, h2 rapid reset, and agent connections beyond
//! `limits.max_connections`. Each runs beside a loop of healthy calls on another connection
//! that must all succeed unchanged.
#![cfg(test)]

use crate::support;

use std::time::Duration;

use strata::testbed::client::Transport;
use support::LIMIT;
use support::agent::{limit_hits, raw_exchange, setup};
use support::h2raw::{self, GOAWAY, HEADERS, RST_STREAM, RawH2};
use support::raw::Beside;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, sleep, timeout};

use Transport::{Http1, Http2};

/// An h2 agent opening more streams than `limits.max_h2_streams`: the streams beyond it are
/// refused (RST_STREAM REFUSED_STREAM, safe for the agent to retry), the others proceed, the
/// upstream never sees more than the limit, and other agents are unaffected.
#[tokio::test]
async fn h2_streams_beyond_the_limit_are_refused() {
    let (upstream, strata) = setup(|c| c.limits.max_h2_streams = 8).await;
    let beside = Beside::start(strata.listen, Http2);
    let mut h2 = RawH2::connect(strata.listen).await;
    let authority = strata.listen.to_string();
    let burst: Vec<u8> = (0..12)
        .flat_map(|i| h2raw::get_stream(1 + 2 * i, &authority))
        .collect();
    h2.send(&burst).await.unwrap();
    let (mut refused, mut answered) = (Vec::new(), Vec::new());
    while refused.len() + answered.len() < 12 {
        let Some(f) = h2.next(Duration::from_secs(2)).await else {
            break;
        };
        match f.kind {
            RST_STREAM if f.error_code() == Some(h2raw::REFUSED_STREAM) => refused.push(f.stream),
            HEADERS => answered.push(f.stream),
            _ => {}
        }
    }
    assert_eq!(
        answered.len(),
        8,
        "answered {answered:?} refused {refused:?}"
    );
    assert_eq!(refused, [17, 19, 21, 23]);
    let gets = upstream
        .heads()
        .iter()
        .filter(|h| h.starts_with("GET"))
        .count();
    assert_eq!(gets, 8);
    beside.check("too many h2 streams").await;
}

/// h2 rapid reset (CVE-2023-44487): streams opened and reset at once, thousands in a burst.
/// h2 bounds the resets it will take before the request is accepted and then closes the
/// connection with GOAWAY; the upstream sees a bounded number of requests, and strata goes on
/// serving other agents.
#[tokio::test]
async fn h2_rapid_reset_is_bounded_and_the_connection_closed() {
    let (upstream, strata) = setup(|_| {}).await;
    let beside = Beside::start(strata.listen, Http1);
    let mut h2 = RawH2::connect(strata.listen).await;
    let authority = strata.listen.to_string();
    let sent = 5_000u32;
    let burst: Vec<u8> = (0..sent)
        .flat_map(|i| {
            let id = 1 + 2 * i;
            let mut f = h2raw::get_stream(id, &authority);
            f.extend(h2raw::rst_stream(id, h2raw::CANCEL));
            f
        })
        .collect();
    // The server may close mid-burst: a failed write is part of the expected outcome.
    let _ = h2.send(&burst).await;
    let (mut goaway, mut last_stream) = (None, 0);
    let started = Instant::now();
    while let Some(f) = h2.next(LIMIT).await {
        if f.kind == GOAWAY {
            goaway = f.error_code();
            let b = &f.payload;
            last_stream = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) & 0x7fff_ffff;
        }
    }
    let took = started.elapsed();
    assert!(took < LIMIT, "the connection stayed open");
    assert_eq!(goaway, Some(0xb), "GOAWAY ENHANCE_YOUR_CALM");
    sleep(Duration::from_millis(100)).await;
    let gets = upstream
        .heads()
        .iter()
        .filter(|h| h.starts_with("GET"))
        .count();
    eprintln!(
        "rapid reset: {sent} streams sent, GOAWAY after stream {last_stream} in {took:?} \
         (connection closed), {gets} reached the upstream"
    );
    assert!(
        gets < 100,
        "{gets} of {sent} reset streams reached the upstream"
    );
    beside.check("rapid reset").await;
}

/// Agent connections beyond `limits.max_connections` are closed as soon as they are
/// accepted, each counted as `max_connections`; the connections already open go on, and a
/// new one is accepted once one of them closes.
#[tokio::test]
async fn connections_beyond_max_connections_are_closed() {
    let (_upstream, strata) = setup(|c| c.limits.max_connections = 3).await;
    // One connection for the healthy calls beside, two holding SSE streams.
    let beside = Beside::start(strata.listen, Http1);
    let hold = "GET /mcp HTTP/1.1\r\nhost: strata\r\naccept: text/event-stream\r\n\r\n";
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut io = TcpStream::connect(strata.listen).await.unwrap();
        io.write_all(hold.as_bytes()).await.unwrap();
        let mut head = [0u8; 12];
        timeout(LIMIT, io.read_exact(&mut head))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&head, b"HTTP/1.1 200");
        held.push(io);
    }
    let hits = limit_hits(&strata, "max_connections");
    for _ in 0..3 {
        let (got, took) = raw_exchange(&strata, hold.as_bytes()).await;
        assert!(got.is_empty(), "{got}");
        assert!(took < Duration::from_secs(1), "closed at once: {took:?}");
    }
    assert_eq!(limit_hits(&strata, "max_connections"), hits + 3);
    drop(held.pop());
    // The freed slot is taken by the next connection (after strata sees the close).
    let deadline = Instant::now() + LIMIT;
    loop {
        let mut io = TcpStream::connect(strata.listen).await.unwrap();
        io.write_all(hold.as_bytes()).await.unwrap();
        let mut head = [0u8; 12];
        if let Ok(Ok(_)) = timeout(Duration::from_secs(1), io.read_exact(&mut head)).await {
            assert_eq!(&head, b"HTTP/1.1 200");
            break;
        }
        assert!(Instant::now() < deadline, "no slot freed");
        sleep(Duration::from_millis(20)).await;
    }
    beside.check("max_connections").await;
}
