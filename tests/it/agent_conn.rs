//! strata's own agent-facing HTTP/1.1 connection (`src/proxy/agent_h1.rs`): what it serves
//! itself, what it hands to hyper mid-connection, and that the agent cannot tell the two
//! apart. Raw sockets, so the bytes on the wire are what is asserted.
#![cfg(test)]

use crate::support;

use std::time::Duration;

use strata::classify::Outcome::{ClientCancelled, ToolSuccess};
use strata::observe::call_record::hash_session;
use support::agent::{FAULT_PATH, call_body};
use support::raw::healthy_body;
use support::{LIMIT, delta_after, just, key, wait_records};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{sleep, timeout};

fn post(tool: &str, extra: &str) -> String {
    let body = call_body(tool);
    format!(
        "POST {FAULT_PATH} HTTP/1.1\r\nhost: strata\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\ncontent-length: {}\r\n{extra}\r\n{body}",
        body.len()
    )
}

fn chunked_post(tool: &str) -> String {
    let body = call_body(tool);
    format!(
        "POST {FAULT_PATH} HTTP/1.1\r\nhost: strata\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n\
         {:x}\r\n{body}\r\n0\r\n\r\n",
        body.len()
    )
}

/// Reads until strata closes the connection (or [`LIMIT`]).
async fn read_all(io: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let _ = timeout(LIMIT, io.read_to_end(&mut got)).await;
    String::from_utf8_lossy(&got).into_owned()
}

/// Sends a call to `tool` on `io` and checks it was answered 200 OK.
async fn answered_ok(io: &mut TcpStream, tool: &str) {
    io.write_all(post(tool, "").as_bytes()).await.unwrap();
    let got = read_answer(io).await;
    assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{tool}: {got}");
}

/// Reads one answer: its head, then its `content-length` bytes.
async fn read_answer(io: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = timeout(LIMIT, io.read(&mut buf)).await.unwrap().unwrap();
        assert!(n > 0, "strata closed a keep-alive connection");
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length: usize = text[..end]
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .unwrap()
                .parse()
                .unwrap();
            if got.len() >= end + 4 + length {
                return text;
            }
        }
    }
}

/// Pipelined on one connection: two calls this connection serves, a chunked one it hands to
/// hyper, and one more after it (hyper's now) that closes the connection. Four answers in
/// order, each whole, each call forwarded once and classified once.
#[tokio::test]
async fn pipelined_calls_and_a_hand_over_mid_connection_are_answered_in_order() {
    let (upstream, strata) = support::agent::setup(|_| {}).await;
    let before = support::counts(&strata);
    let wire = [
        post("first", ""),
        post("second", ""),
        chunked_post("third"),
        post("fourth", "connection: close\r\n"),
    ]
    .concat();
    let mut io = TcpStream::connect(strata.listen).await.unwrap();
    io.write_all(wire.as_bytes()).await.unwrap();
    let got = read_all(&mut io).await;
    let heads: Vec<_> = got.match_indices("HTTP/1.1 200 OK\r\n").collect();
    assert_eq!(heads.len(), 4, "{got}");
    let body = healthy_body(&serde_json::json!(1));
    assert_eq!(got.matches(&body).count(), 4, "each body whole: {got}");
    let last = &got[heads[3].0..];
    assert!(last.contains("connection: close\r\n"), "{last}");
    for tool in ["first", "second", "third", "fourth"] {
        assert_eq!(upstream.requests_of(tool), 1, "{tool}");
    }
    let d = delta_after(&strata, &before, 4).await;
    let mut want = just("tools/call", "first", ToolSuccess);
    for tool in ["second", "third", "fourth"] {
        want.insert(key("tools/call", tool, ToolSuccess), 1);
    }
    assert_eq!(d, want);
}

/// One connection's calls carry sessions A, A, B, A: the connection keeps the last call's
/// session for the next, and each record still has its own call's session, hashed.
#[tokio::test]
async fn each_call_of_a_connection_is_logged_with_its_own_session() {
    let (_guard, logs) = support::capture();
    let (_upstream, strata) = support::agent::setup(|_| {}).await;
    let mut io = TcpStream::connect(strata.listen).await.unwrap();
    let sessions = ["session-a", "session-a", "session-b", "session-a"];
    for (i, session) in sessions.iter().enumerate() {
        let call = post(
            &format!("call-{i}"),
            &format!("mcp-session-id: {session}\r\n"),
        );
        io.write_all(call.as_bytes()).await.unwrap();
        let got = read_answer(&mut io).await;
        assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{got}");
    }
    let (a, b) = (hash_session("session-a"), hash_session("session-b"));
    assert_ne!(a, b);
    for (i, session) in sessions.iter().enumerate() {
        let records = wait_records(&logs, &format!("call-{i}"), 1).await;
        let want = if *session == "session-a" { &a } else { &b };
        assert_eq!(records.len(), 1, "call-{i}");
        assert_eq!(records[0]["session"], want.as_str(), "call-{i}");
    }
}

/// A body written apart from its head (Node's `http` does so) is waited for, not handed
/// over or cut: the call is answered and forwarded whole.
#[tokio::test]
async fn a_body_written_after_its_head_is_read_whole() {
    let (upstream, strata) = support::agent::setup(|_| {}).await;
    let wire = post("apart", "connection: close\r\n");
    let split = wire.find("\r\n\r\n").unwrap() + 4;
    let mut io = TcpStream::connect(strata.listen).await.unwrap();
    io.write_all(&wire.as_bytes()[..split]).await.unwrap();
    sleep(Duration::from_millis(50)).await;
    io.write_all(&wire.as_bytes()[split..split + 10])
        .await
        .unwrap();
    sleep(Duration::from_millis(50)).await;
    io.write_all(&wire.as_bytes()[split + 10..]).await.unwrap();
    let got = read_all(&mut io).await;
    assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{got}");
    assert!(got.ends_with(&healthy_body(&serde_json::json!(1))), "{got}");
    assert_eq!(upstream.requests_of("apart"), 1);
}

/// An agent that closes its connection while its call is still with the upstream ends the
/// exchange: the call is counted once, as the client's cancellation.
#[tokio::test]
async fn an_agent_leaving_mid_call_cancels_it() {
    let (upstream, strata) = support::raw::setup(|_| {}).await;
    let before = support::counts(&strata);
    let mut io = TcpStream::connect(strata.listen).await.unwrap();
    io.write_all(post("never", "").as_bytes()).await.unwrap();
    // The upstream has the request (it never answers), then the agent leaves.
    let deadline = tokio::time::Instant::now() + LIMIT;
    while upstream.requests_of("never") == 0 && tokio::time::Instant::now() < deadline {
        sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(upstream.requests_of("never"), 1);
    drop(io);
    let d = delta_after(&strata, &before, 1).await;
    assert_eq!(d, just("tools/call", "never", ClientCancelled));
}

/// Every answer on the connection carries a `date` (hyper's server writes one, and so does
/// this connection), and keep-alive holds between calls.
#[tokio::test]
async fn keep_alive_answers_carry_a_date_and_the_connection_stays_open() {
    let (upstream, strata) = support::agent::setup(|_| {}).await;
    let mut io = TcpStream::connect(strata.listen).await.unwrap();
    let mut all = String::new();
    for round in 0..3 {
        io.write_all(post(&format!("round{round}"), "").as_bytes())
            .await
            .unwrap();
        let answer = read_answer(&mut io).await;
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        let date = answer
            .lines()
            .find_map(|l| l.strip_prefix("date: "))
            .unwrap_or_else(|| panic!("no date: {answer}"));
        assert!(httpdate::parse_http_date(date).is_ok(), "{date}");
        all.push_str(&answer);
    }
    assert_eq!(
        upstream.connections(),
        1,
        "the upstream connection was reused"
    );
    assert_eq!(all.matches("HTTP/1.1 200 OK").count(), 3);
}

/// After an exchange, an idle keep-alive connection is closed once `timeouts.header_read`
/// passes without a new head (as hyper's server does), and that is not counted as a
/// `header_timeout`: only a first request that never came is. The timer restarts with each
/// exchange, so a connection busy for longer than the limit is not cut.
#[tokio::test]
async fn an_idle_keep_alive_connection_closes_after_header_read_uncounted() {
    let header_read = Duration::from_millis(300);
    let (_upstream, strata) = support::agent::setup(|c| c.timeouts.header_read = header_read).await;
    let hits = support::agent::limit_hits(&strata, "header_timeout");
    let mut io = TcpStream::connect(strata.listen).await.unwrap();
    // Four exchanges 150 ms apart: 600 ms in all, past the limit, and all answered.
    for round in 0..4 {
        answered_ok(&mut io, &format!("busy{round}")).await;
        sleep(Duration::from_millis(150)).await;
    }
    let idle_from = tokio::time::Instant::now();
    let rest = read_all(&mut io).await;
    let idle = idle_from.elapsed();
    assert!(
        !rest.contains("HTTP/1.1"),
        "no answer without a request: {rest}"
    );
    assert!(
        idle < header_read + Duration::from_secs(1),
        "closed after header_read, not left open: {idle:?}"
    );
    assert_eq!(support::agent::limit_hits(&strata, "header_timeout"), hits);
}

/// At shutdown an idle keep-alive connection is closed at once — not left to
/// `timeouts.header_read` or the drain deadline — after any number of exchanges: a connection
/// waits for shutdown once for its life, from its first idle read (`agent_h1.rs`).
#[tokio::test]
async fn shutdown_closes_an_idle_keep_alive_connection_at_once() {
    let (_upstream, strata) = support::agent::setup(|c| {
        c.timeouts.header_read = Duration::from_secs(60);
        c.timeouts.drain = Duration::from_secs(30);
    })
    .await;
    let mut io = TcpStream::connect(strata.listen).await.unwrap();
    for round in 0..3 {
        answered_ok(&mut io, &format!("before{round}")).await;
    }
    let stopping = tokio::time::Instant::now();
    let stopped = tokio::spawn(strata.stop());
    let rest = read_all(&mut io).await;
    assert_eq!(rest, "", "closed without a byte");
    assert!(
        stopping.elapsed() < Duration::from_secs(5),
        "closed after {:?}",
        stopping.elapsed()
    );
    timeout(Duration::from_secs(5), stopped)
        .await
        .expect("strata stopped without waiting for the drain deadline")
        .unwrap();
}

/// A body far larger than one read (300 KiB, within a raised `retry.replay_buffer`) arriving
/// in pieces is read whole and forwarded intact.
#[tokio::test]
async fn a_large_body_in_pieces_is_forwarded_whole() {
    let (upstream, strata) =
        support::agent::setup(|c| c.policy.retry.replay_buffer = 2 << 20).await;
    let filler = "x".repeat(300 << 10);
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "large", "arguments": {"text": filler}}})
    .to_string();
    let wire = format!(
        "POST {FAULT_PATH} HTTP/1.1\r\nhost: strata\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nconnection: close\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut io = TcpStream::connect(strata.listen).await.unwrap();
    for piece in wire.as_bytes().chunks(100 << 10) {
        io.write_all(piece).await.unwrap();
        sleep(Duration::from_millis(20)).await;
    }
    let got = read_all(&mut io).await;
    assert!(
        got.starts_with("HTTP/1.1 200 OK\r\n"),
        "{}",
        &got[..got.len().min(300)]
    );
    assert_eq!(
        upstream.requests_of("large"),
        1,
        "the upstream parsed the whole body"
    );
}
