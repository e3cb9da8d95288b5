//! Helpers for the agent-side fault tests: a raw upstream that holds GET streams open and
//! answers the rest healthily, requests written on raw sockets, and what reached the upstream.

use std::time::Duration;

use serde_json::json;
use strata::app::Running;
use strata::config::Config;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};

use super::LIMIT;
use super::raw::{Act, RawUpstream};

/// The path faulty requests use, so the upstream's log of heads shows whether any got there.
pub const FAULT_PATH: &str = "/mcp-fault";

pub fn act(tool: &str) -> Act {
    match tool {
        "GET" => Act::SseThenWatch,
        _ => Act::Healthy,
    }
}

pub async fn setup(tweak: impl FnOnce(&mut Config)) -> (RawUpstream, Running) {
    super::raw::setup_with(act, tweak).await
}

pub fn limit_hits(strata: &Running, limit: &str) -> u64 {
    let prefix = format!("strata_limit_hits_total{{limit=\"{limit}\"}} ");
    strata
        .metrics
        .render()
        .lines()
        .find_map(|l| l.strip_prefix(&prefix)?.parse().ok())
        .unwrap_or(0)
}

/// Waits (up to [`LIMIT`]) until `limit` was hit at least `n` times; returns the count. A
/// limit that closes the connection is counted when the connection's task ends, which may be
/// after the agent has read the answer (on another worker thread).
pub async fn wait_limit_hits(strata: &Running, limit: &str, n: u64) -> u64 {
    let deadline = Instant::now() + LIMIT;
    loop {
        let hits = limit_hits(strata, limit);
        if hits >= n || Instant::now() >= deadline {
            return hits;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The heads that reached the upstream on [`FAULT_PATH`].
pub fn fault_heads(upstream: &RawUpstream) -> Vec<String> {
    let heads = upstream.heads();
    heads
        .into_iter()
        .filter(|h| h.contains(FAULT_PATH))
        .collect()
}

pub fn call_body(tool: &str) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": {}}})
    .to_string()
}

/// Writes `bytes` on a fresh connection and reads until strata closes it (or [`LIMIT`]).
/// Returns what came back and how long the connection stayed open.
pub async fn raw_exchange(strata: &Running, bytes: &[u8]) -> (String, Duration) {
    raw_exchange_then(strata, bytes, false).await
}

/// [`raw_exchange`], optionally ending the agent's side (FIN) after `bytes`.
pub async fn raw_exchange_then(strata: &Running, bytes: &[u8], fin: bool) -> (String, Duration) {
    let mut io = TcpStream::connect(strata.listen).await.unwrap();
    let started = Instant::now();
    io.write_all(bytes).await.unwrap();
    if fin {
        io.shutdown().await.unwrap();
    }
    let mut got = Vec::new();
    let _ = timeout(LIMIT, io.read_to_end(&mut got)).await;
    (
        String::from_utf8_lossy(&got).into_owned(),
        started.elapsed(),
    )
}
