//! The recent calls inspector end to end: real calls through strata to the testbed, read back
//! from the admin listener's `/calls` endpoints, the live stream and `strata tap`.
#![cfg(test)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode, header};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use strata::config::{BearerToken, Config};
use strata::testbed::client::Transport::Http1;
use tokio::time::{Instant, sleep, timeout};

use crate::support::{self, LIMIT, Stack};

/// The testbed with strata in front, the inspector on.
async fn stack(tweak: impl FnOnce(&mut Config)) -> Stack {
    Stack::start(|c| {
        c.inspector.enabled = true;
        tweak(c);
    })
    .await
}

/// GET `path` on the admin listener: (status, headers, body).
async fn get(
    admin: SocketAddr,
    path: &str,
    token: Option<&str>,
) -> (StatusCode, HeaderMap, String) {
    let response = open(admin, path, token).await;
    let (parts, body) = response.into_parts();
    let body = timeout(LIMIT, body.collect()).await.unwrap().unwrap();
    let text = String::from_utf8(body.to_bytes().to_vec()).unwrap();
    (parts.status, parts.headers, text)
}

/// The response to GET `path`, its body still to read.
async fn open(admin: SocketAddr, path: &str, token: Option<&str>) -> http::Response<Incoming> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut req = Request::get(format!("http://{admin}{path}"));
    if let Some(token) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let req = req.body(Empty::new()).unwrap();
    timeout(LIMIT, client.request(req)).await.unwrap().unwrap()
}

/// `/calls` (with `query`) as records.
async fn calls(stack: &Stack, query: &str) -> Vec<Value> {
    let (status, headers, body) = get(stack.strata.admin, &format!("/calls{query}"), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(headers[header::CONTENT_TYPE], "application/json");
    serde_json::from_str::<Vec<Value>>(&body).unwrap()
}

fn tools(records: &[Value]) -> Vec<String> {
    let tool = |r: &Value| r["tool"].as_str().unwrap_or("-").to_owned();
    records.iter().map(tool).collect()
}

/// Makes one call of each tool, in order.
async fn call_each(stack: &Stack, names: &[&str]) {
    let client = stack.modern(Http1);
    for name in names {
        client.call_tool(name, json!({})).await.unwrap();
    }
}

/// Polls `/calls` until it lists `n` records.
async fn wait_calls(stack: &Stack, query: &str, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + LIMIT;
    loop {
        let found = calls(stack, query).await;
        if found.len() >= n || Instant::now() >= deadline {
            return found;
        }
        sleep(Duration::from_millis(5)).await;
    }
}

/// A record with the members only one side has taken out.
fn without(mut record: Value, names: &[&str]) -> Value {
    let members = record.as_object_mut().unwrap();
    for name in names {
        members.remove(*name);
    }
    record
}

#[tokio::test]
async fn calls_are_the_log_records_and_the_counts_are_the_metrics() {
    let (_guard, logs) = support::capture();
    let stack = stack(|_| {}).await;
    let names = ["ok", "tool_error", "jsonrpc_error", "malformed_json"];
    call_each(&stack, &names).await;
    let listed = wait_calls(&stack, "", names.len()).await;
    let logged = support::records(&logs);
    assert_eq!(listed.len(), names.len(), "{listed:?}");
    assert_eq!(logged.len(), names.len());
    // Newest first, numbered in order.
    let mut newest_first = names.map(str::to_owned).to_vec();
    newest_first.reverse();
    assert_eq!(tools(&listed), newest_first);
    let seqs: Vec<u64> = listed.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] > w[1]), "{seqs:?}");
    for record in &listed {
        let time = record["time"].as_str().unwrap();
        assert!(time.len() == 24 && time.ends_with('Z'), "{time}");
        let line = logged
            .iter()
            .find(|l| l["jsonrpc_id"] == record["jsonrpc_id"])
            .unwrap();
        let line = without(line.clone(), &["timestamp", "level", "message", "target"]);
        assert_eq!(without(record.clone(), &["seq", "time"]), line);
    }

    let (status, _, body) = get(stack.strata.admin, "/calls/counts", None).await;
    assert_eq!(status, StatusCode::OK);
    let counts: Value = serde_json::from_str(&body).unwrap();
    let mut by_outcome: BTreeMap<String, u64> = BTreeMap::new();
    let mut by_layer: BTreeMap<String, u64> = BTreeMap::new();
    for (key, n) in stack.counts() {
        *by_outcome.entry(key.outcome).or_default() += n;
        *by_layer.entry(key.layer).or_default() += n;
    }
    for (outcome, n) in &by_outcome {
        assert_eq!(counts["outcomes"][outcome], *n, "{outcome}: {body}");
    }
    for (layer, n) in &by_layer {
        assert_eq!(counts["layers"][layer], *n, "{layer}: {body}");
    }
    assert_eq!(counts["total"], names.len());
    assert_eq!(counts["outcomes"]["HTTP_ERROR"], 0);
    assert!(counts["started"].as_str().unwrap().ends_with('Z'));
}

#[tokio::test]
async fn filters_narrow_the_listing() {
    let stack = stack(|_| {}).await;
    call_each(&stack, &["ok", "tool_error", "ok", "malformed_json"]).await;
    let all = wait_calls(&stack, "", 4).await;
    assert_eq!(tools(&calls(&stack, "?tool=ok").await), ["ok", "ok"]);
    assert_eq!(
        tools(&calls(&stack, "?outcome=tool_error").await),
        ["tool_error"]
    );
    assert_eq!(
        tools(&calls(&stack, "?layer=PROTOCOL").await),
        ["malformed_json"]
    );
    assert_eq!(calls(&stack, "?method=tools%2Fcall").await.len(), 4);
    assert_eq!(calls(&stack, "?method=ping").await.len(), 0);
    assert_eq!(calls(&stack, "?client=nobody").await.len(), 0);
    assert_eq!(calls(&stack, "?limit=2").await, all[..2]);
    let second = all[2]["seq"].as_u64().unwrap();
    assert_eq!(calls(&stack, &format!("?since={second}")).await, all[..2]);
    assert_eq!(calls(&stack, "?since=1m").await, all);
    assert_eq!(tools(&calls(&stack, "?tool=ok&limit=1").await), ["ok"]);
    for bad in [
        "?limit=x",
        "?outcome=FINE",
        "?since=yesterday",
        "?colour=red",
    ] {
        let (status, headers, body) = get(stack.strata.admin, &format!("/calls{bad}"), None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(headers[header::CONTENT_TYPE], "application/json");
        assert_eq!(body.trim_end().lines().count(), 1, "{body}");
        let error: Value = serde_json::from_str(&body).unwrap();
        assert!(error["error"].is_string(), "{body}");
    }
}

#[tokio::test]
async fn the_ring_evicts_the_oldest_by_count() {
    let stack = stack(|c| c.inspector.recent = 3).await;
    call_each(
        &stack,
        &["ok", "tool_error", "jsonrpc_error", "malformed_json", "ok"],
    )
    .await;
    support::delta_after(&stack.strata, &BTreeMap::new(), 5).await;
    let kept = calls(&stack, "").await;
    assert_eq!(tools(&kept), ["ok", "malformed_json", "jsonrpc_error"]);
    // The default and largest limit is the ring's size.
    assert_eq!(calls(&stack, "?limit=100").await.len(), 3);
}

#[tokio::test]
async fn the_ring_evicts_the_oldest_by_bytes() {
    let stack = stack(|c| c.inspector.max_bytes = 1024).await;
    let names = [
        "ok",
        "tool_error",
        "jsonrpc_error",
        "malformed_json",
        "ok",
        "tool_error",
    ];
    call_each(&stack, &names).await;
    support::delta_after(&stack.strata, &BTreeMap::new(), names.len() as u64).await;
    let kept = calls(&stack, "").await;
    let bytes: usize = kept.iter().map(|r| r.to_string().len()).sum();
    assert!(bytes <= 1024, "{bytes} bytes kept");
    assert!((1..names.len()).contains(&kept.len()), "{kept:?}");
    // The newest ones, every one of them down to the oldest kept.
    let seqs: Vec<u64> = kept.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs[0], names.len() as u64);
    assert!(seqs.windows(2).all(|w| w[0] == w[1] + 1), "{seqs:?}");
}

#[tokio::test]
async fn off_the_inspector_is_not_there() {
    let stack = Stack::start(|_| {}).await;
    call_each(&stack, &["ok"]).await;
    let admin = stack.strata.admin;
    for path in [
        "/",
        "/calls",
        "/calls/stream",
        "/calls/inflight",
        "/calls/counts",
    ] {
        assert_eq!(
            get(admin, path, None).await.0,
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }
    for path in ["/metrics", "/healthz", "/readyz"] {
        assert_eq!(get(admin, path, None).await.0, StatusCode::OK, "{path}");
    }
}

/// A reload (SIGHUP) switches the inspector on and off and resizes its ring.
#[tokio::test]
async fn a_reload_applies_the_inspector_settings() {
    let stack = Stack::start(|_| {}).await;
    let admin = stack.strata.admin;
    assert_eq!(get(admin, "/calls", None).await.0, StatusCode::NOT_FOUND);
    let mut config = Config::default_with_upstream(
        strata::config::Upstream::parse(&format!("http://{}", stack.testbed_addr)).unwrap(),
    );
    config.listen = stack.strata.listen;
    config.admin = admin;
    config.inspector.enabled = true;
    config.inspector.recent = 2;
    stack.strata.reload(&config).unwrap();
    call_each(&stack, &["ok", "tool_error", "jsonrpc_error"]).await;
    assert_eq!(
        tools(&wait_calls(&stack, "", 2).await),
        ["jsonrpc_error", "tool_error"]
    );
    config.inspector.enabled = false;
    stack.strata.reload(&config).unwrap();
    assert_eq!(get(admin, "/calls", None).await.0, StatusCode::NOT_FOUND);
    config.inspector.enabled = true;
    stack.strata.reload(&config).unwrap();
    // Switched off, the kept records were dropped.
    assert_eq!(calls(&stack, "").await.len(), 0);
}

#[tokio::test]
async fn the_page_is_served_with_a_strict_policy() {
    let stack = stack(|_| {}).await;
    let (status, headers, body) = get(stack.strata.admin, "/", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "text/html; charset=utf-8");
    assert_eq!(body, strata::admin::page::INDEX_HTML);
    let csp = headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
    for part in [
        "default-src 'none'",
        "script-src 'self' 'unsafe-inline'",
        "connect-src 'self'",
    ] {
        assert!(csp.contains(part), "{csp}");
    }
}

/// A file in the system's temporary directory holding `text`, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, text: &str) -> TempFile {
        let path = std::env::temp_dir().join(format!("strata-{}-{name}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[tokio::test]
async fn off_loopback_a_token_is_required() {
    let file = TempFile::new("token", "s3cret-token\n");
    // Bound to every address (not loopback), reached over 127.0.0.1.
    let stack = stack(|c| {
        c.admin = SocketAddr::from(([0, 0, 0, 0], 0));
        c.inspector.token_file = Some(file.0.clone());
        c.inspector.token = BearerToken::from_text("s3cret-token");
    })
    .await;
    call_each(&stack, &["ok"]).await;
    let admin = SocketAddr::from(([127, 0, 0, 1], stack.strata.admin.port()));
    for path in [
        "/",
        "/calls",
        "/calls/inflight",
        "/calls/counts",
        "/calls/stream",
    ] {
        let (status, headers, _) = get(admin, path, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(headers[header::WWW_AUTHENTICATE], "Bearer realm=\"strata\"");
        assert_eq!(
            get(admin, path, Some("wrong")).await.0,
            StatusCode::UNAUTHORIZED
        );
    }
    for path in ["/", "/calls", "/calls/inflight", "/calls/counts"] {
        let (status, _, _) = get(admin, path, Some("s3cret-token")).await;
        assert_eq!(status, StatusCode::OK, "{path}");
    }
    assert_eq!(get(admin, "/metrics", None).await.0, StatusCode::OK);

    // The file as a config names it, and the rule that requires it.
    let dir = file.0.parent().unwrap().display().to_string();
    let name = file.0.file_name().unwrap().to_str().unwrap().to_owned();
    let config_file = format!("{dir}/strata.yaml");
    let text = |token: &str| {
        format!(
            "upstream: http://127.0.0.1:8000\nadmin: 0.0.0.0:9464\ninspector:\n  enabled: true\n{token}"
        )
    };
    let overrides = Default::default();
    let parsed = Config::parse(
        &text(&format!("  token_file: {name}\n")),
        &config_file,
        &overrides,
    )
    .unwrap();
    assert_eq!(
        parsed.inspector.token,
        BearerToken::from_text("s3cret-token")
    );
    let refused = Config::parse(&text(""), &config_file, &overrides).unwrap_err();
    let message = refused.to_string();
    assert!(
        message.contains("inspector.enabled") && message.contains("token_file"),
        "{message}"
    );
    let empty = TempFile::new("empty-token", " \n");
    let empty_name = empty.0.file_name().unwrap().to_str().unwrap().to_owned();
    let refused = Config::parse(
        &text(&format!("  token_file: {empty_name}\n")),
        &config_file,
        &overrides,
    )
    .unwrap_err()
    .to_string();
    assert!(
        refused.contains("inspector.token_file") && refused.contains("empty"),
        "{refused}"
    );
}

/// Reads the stream's events until `n` arrived: (id, event, data) each.
async fn events(body: &mut Incoming, n: usize) -> Vec<(String, String, Value)> {
    let mut text = String::new();
    let deadline = Instant::now() + LIMIT;
    let mut found = Vec::new();
    while found.len() < n {
        let frame = tokio::time::timeout_at(deadline, body.frame())
            .await
            .unwrap();
        let frame = frame.unwrap().unwrap();
        text.push_str(std::str::from_utf8(frame.data_ref().unwrap()).unwrap());
        while let Some(end) = text.find("\n\n") {
            let event: String = text.drain(..end + 2).collect();
            let field = |name: &str| {
                let prefix = format!("{name}: ");
                event
                    .lines()
                    .find_map(|l| l.strip_prefix(&prefix).map(str::to_owned))
                    .unwrap()
            };
            let data = serde_json::from_str(&field("data")).unwrap();
            found.push((field("id"), field("event"), data));
        }
    }
    found
}

#[tokio::test]
async fn the_stream_sends_each_call_as_it_finishes() {
    let stack = stack(|_| {}).await;
    let response = open(stack.strata.admin, "/calls/stream?tool=tool_error", None).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/event-stream"
    );
    let mut body = response.into_body();
    call_each(&stack, &["ok", "tool_error", "ok", "tool_error"]).await;
    let got = events(&mut body, 2).await;
    let listed = calls(&stack, "?tool=tool_error").await;
    for ((id, event, data), listed) in got.iter().zip(listed.iter().rev()) {
        assert_eq!(event, "call");
        assert_eq!(data, listed);
        assert_eq!(id, &listed["seq"].to_string());
    }
    let (status, _, _) = get(stack.strata.admin, "/calls/stream?layer=nope", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

/// A reader that asks for the stream and then reads nothing while many calls finish: the
/// calls all finish promptly, and strata closes that reader's connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_falls_behind_is_dropped() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stack = stack(|_| {}).await;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    // A small window: the reader's kernel holds little of what it does not read.
    socket.set_recv_buffer_size(4096).unwrap();
    let mut laggard = socket.connect(stack.strata.admin).await.unwrap();
    let head = format!(
        "GET /calls/stream HTTP/1.1\r\nhost: {}\r\n\r\n",
        stack.strata.admin
    );
    laggard.write_all(head.as_bytes()).await.unwrap();
    // Its response head has come: the stream is subscribed.
    let mut first = [0u8; 64];
    let n = timeout(LIMIT, laggard.read(&mut first))
        .await
        .unwrap()
        .unwrap();
    assert!(
        first[..n].starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&first[..n])
    );

    // Enough calls to fill the socket's buffers, the queue and the feed several times over.
    let mut slowest = Duration::ZERO;
    let client = std::sync::Arc::new(stack.modern(Http1));
    const CALLS: usize = 2048;
    for _ in 0..CALLS / 16 {
        let batch: Vec<_> = (0..16)
            .map(|_| {
                let client = client.clone();
                tokio::spawn(async move {
                    let started = Instant::now();
                    client.call_tool("ok", json!({})).await.unwrap();
                    started.elapsed()
                })
            })
            .collect();
        for call in batch {
            slowest = slowest.max(call.await.unwrap());
        }
    }
    assert!(slowest < Duration::from_secs(2), "a call took {slowest:?}");

    // What was sent before strata gave up on the reader, then the end of the connection.
    let mut buffer = vec![0u8; 64 << 10];
    let deadline = Instant::now() + LIMIT;
    let mut received = n;
    loop {
        match tokio::time::timeout_at(deadline, laggard.read(&mut buffer)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(more)) => received += more,
            Err(_) => panic!("strata kept the laggard's stream open ({received} bytes read)"),
        }
    }
    // Far less than every call's event: at most the socket's buffers, the body's queue and
    // the pump's backlog.
    let one_event = 400;
    assert!(received < CALLS * one_event, "{received}");
    assert!(received < 4 * strata::admin::STREAM_BACKLOG, "{received}");
}

#[tokio::test]
async fn calls_in_flight_are_listed_until_they_finish() {
    let stack = stack(|_| {}).await;
    let admin = stack.strata.admin;
    let client = std::sync::Arc::new(stack.modern(Http1));
    let slow = {
        let client = client.clone();
        tokio::spawn(async move { client.call_tool("slow", json!({"ms": 1500})).await })
    };
    let drip = {
        let client = client.clone();
        let args = json!({"count": 3, "interval_ms": 500});
        tokio::spawn(async move { client.call_tool("sse_drip", args).await })
    };
    let deadline = Instant::now() + LIMIT;
    let listed = loop {
        let (status, _, body) = get(admin, "/calls/inflight", None).await;
        assert_eq!(status, StatusCode::OK);
        let listed: Vec<Value> = serde_json::from_str(&body).unwrap();
        // Both in, the stream's head come (the head ends its wait).
        let streaming = listed.iter().any(|c| c["state"] == "streaming");
        if (listed.len() == 2 && streaming) || Instant::now() >= deadline {
            break listed;
        }
        sleep(Duration::from_millis(10)).await;
    };
    let state = |tool: &str| {
        let call = listed.iter().find(|c| c["tool"] == tool).unwrap();
        assert_eq!(call["method"], "tools/call");
        assert!(
            call["jsonrpc_id"].is_string() && call["age_ms"].is_u64(),
            "{call}"
        );
        call["state"].as_str().unwrap().to_owned()
    };
    assert_eq!(state("slow"), "waiting", "{listed:?}");
    assert_eq!(state("sse_drip"), "streaming", "{listed:?}");
    // Oldest first.
    let ages: Vec<u64> = listed
        .iter()
        .map(|c| c["age_ms"].as_u64().unwrap())
        .collect();
    assert!(ages[0] >= ages[1], "{ages:?}");
    slow.await.unwrap().unwrap();
    drip.await.unwrap().unwrap();
    let (_, _, body) = get(admin, "/calls/inflight", None).await;
    assert_eq!(body, "[]");
}

#[tokio::test]
async fn a_parked_call_is_listed_as_parked() {
    let stack = stack(|c| c.timeouts.resume_window = Duration::from_secs(5)).await;
    let client = stack.legacy(Http1).await;
    let post = client.call_tool("sse_resumable", json!({})).await.unwrap();
    assert_eq!(post.status, StatusCode::OK);
    let (_, _, body) = get(stack.strata.admin, "/calls/inflight", None).await;
    let listed: Vec<Value> = serde_json::from_str(&body).unwrap();
    assert_eq!(listed.len(), 1, "{body}");
    assert_eq!(listed[0]["state"], "parked");
    assert_eq!(listed[0]["tool"], "sse_resumable");
    assert!(listed[0]["session"].is_string(), "{body}");
    assert_ne!(listed[0]["session"].as_str(), client.session());
}

/// Lines of a child's stdout, read on a thread of their own.
fn lines_of(stdout: std::process::ChildStdout) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The next line within `wait`.
async fn next_line(lines: &std::sync::mpsc::Receiver<String>, wait: Duration) -> Option<String> {
    let deadline = Instant::now() + wait;
    loop {
        if let Ok(line) = lines.try_recv() {
            return Some(line);
        }
        if Instant::now() >= deadline {
            return None;
        }
        sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tap_prints_a_line_per_call_and_ends_when_strata_does() {
    use std::process::{Command, Stdio};
    let stack = stack(|_| {}).await;
    let admin = stack.strata.admin.to_string();
    let mut tap = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["tap", "--admin", &admin, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = lines_of(tap.stdout.take().unwrap());
    // Calls until tap shows one: from then on it is subscribed.
    let client = stack.modern(Http1);
    let mut subscribed = false;
    for _ in 0..100 {
        client.call_tool("ok", json!({})).await.unwrap();
        if next_line(&lines, Duration::from_millis(100))
            .await
            .is_some()
        {
            subscribed = true;
            break;
        }
    }
    assert!(subscribed, "tap printed nothing");
    call_each(&stack, &["tool_error", "jsonrpc_error", "malformed_json"]).await;
    let mut printed = Vec::new();
    while printed.len() < 3 {
        let line = next_line(&lines, LIMIT).await.expect("a line per call");
        printed.push(serde_json::from_str::<Value>(&line).unwrap());
    }
    let listed = calls(&stack, "").await;
    let mut newest_first = printed.clone();
    newest_first.reverse();
    assert_eq!(newest_first, listed[..3]);

    let Stack { strata, .. } = stack;
    strata.stop().await;
    let deadline = Instant::now() + LIMIT;
    let status = loop {
        if let Some(status) = tap.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "tap still running after strata stopped"
        );
        sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(status.code(), Some(1));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut tap.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("strata closed the stream"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tap_cannot_reach_a_strata_that_is_not_there() {
    let closed = support::closed_port().await.to_string();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["tap", "--admin", &closed])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("cannot reach strata at {closed}")),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tap_ends_cleanly_on_ctrl_c() {
    use std::process::{Command, Stdio};
    let stack = stack(|_| {}).await;
    let admin = stack.strata.admin.to_string();
    let mut tap = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["tap", "--admin", &admin])
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = lines_of(tap.stdout.take().unwrap());
    let client = stack.modern(Http1);
    let mut line = None;
    for _ in 0..100 {
        client.call_tool("tool_error", json!({})).await.unwrap();
        line = next_line(&lines, Duration::from_millis(100)).await;
        if line.is_some() {
            break;
        }
    }
    // A line as a terminal would show it, without colour here.
    let line = line.expect("tap printed nothing");
    assert!(
        line.contains(" TOOL_ERROR ") && line.contains(" tool_error "),
        "{line}"
    );
    assert!(!line.contains('\x1b'), "{line:?}");
    let pid = tap.id().to_string();
    let sent = Command::new("kill").args(["-INT", &pid]).status().unwrap();
    assert!(sent.success());
    let deadline = Instant::now() + LIMIT;
    let status = loop {
        if let Some(status) = tap.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "tap still running after Ctrl-C");
        sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(status.code(), Some(0));
}
