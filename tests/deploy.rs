//! strata as Kubernetes runs it (deploy/kubernetes/deployment.yaml): the real binary, a real
//! SIGTERM. The pod's shutdown sequence rests on what these tests pin down: on SIGTERM strata
//! stops accepting at once (hence the preStop sleep before it), `/readyz` stops answering 200,
//! an SSE stream already open runs to its end within `timeouts.drain`, and the process exits 0,
//! also when the drain deadline cuts a stream short (hence a termination grace longer than
//! preStop + drain).
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};
use strata::testbed::Testbed;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// The strata binary, killed if a test fails before it exits.
struct Strata {
    child: Reaped,
    listen: SocketAddr,
    admin: SocketAddr,
    logs: mpsc::Receiver<String>,
    config: PathBuf,
}

impl Drop for Strata {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.config);
    }
}

/// A child process killed and waited for when dropped, on every path.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `strata --config FILE` on ephemeral ports; returns once it logs where it serves.
fn start_strata(upstream: SocketAddr, drain: &str) -> Strata {
    static N: AtomicU32 = AtomicU32::new(0);
    let config = std::env::temp_dir().join(format!(
        "strata-deploy-test-{}-{}.yaml",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(
        &config,
        format!(
            "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nupstream: http://{upstream}\n\
             timeouts:\n  drain: {drain}\nlog:\n  format: json\n  level: info\n"
        ),
    )
    .unwrap();
    let mut child = Reaped(
        Command::new(env!("CARGO_BIN_EXE_strata"))
            .arg("--config")
            .arg(&config)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let (tx, logs) = mpsc::channel();
    // Reads to EOF even once nobody listens, so strata never blocks on a full pipe.
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = logs
            .recv_timeout(left)
            .expect("strata did not log `strata is serving` in time");
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let field = |k: &str| {
            v.get(k)
                .or_else(|| v.get("fields").and_then(|f| f.get(k)))
                .and_then(Value::as_str)
                .and_then(|s| s.parse::<SocketAddr>().ok())
        };
        if let (Some(listen), Some(admin)) = (field("listen"), field("admin")) {
            return Strata {
                child,
                listen,
                admin,
                logs,
                config,
            };
        }
    }
}

fn sigterm(strata: &Strata) {
    let status = Command::new("kill")
        .args(["-TERM", &strata.child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

async fn wait_exit(strata: &mut Strata, within: Duration) -> ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = strata.child.0.try_wait().unwrap() {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "strata still running {within:?} after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The status of `GET path`, or `None` if nothing accepts the connection.
async fn get_status(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect(addr).await.ok()?;
    let req = format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.ok()?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).await.ok()?;
    std::str::from_utf8(&head[9..]).ok()?.parse().ok()
}

/// POSTs a 2026-07-28 `sse_drip` call (id 7) and returns the open connection.
async fn open_drip(listen: SocketAddr, count: u64, interval_ms: u64) -> TcpStream {
    let body = json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "sse_drip", "arguments": {"count": count, "interval_ms": interval_ms},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}}}
    })
    .to_string();
    let mut s = TcpStream::connect(listen).await.unwrap();
    let req = format!(
        "POST /mcp HTTP/1.1\r\nhost: {listen}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    s
}

/// Reads into `buf` until it holds `needle`, EOF, or `within` passes; whether `needle` came.
async fn read_until(s: &mut TcpStream, buf: &mut Vec<u8>, needle: &str, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let mut chunk = [0u8; 4096];
    loop {
        if String::from_utf8_lossy(buf).contains(needle) {
            return true;
        }
        match tokio::time::timeout_at(deadline, s.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return false,
            Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Reads until EOF (or `within`); whether EOF came.
async fn read_to_eof(s: &mut TcpStream, buf: &mut Vec<u8>, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let mut chunk = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Err(_) => return false,
            Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Polls until a new connection to `addr` is refused; whether that happened within `within`.
async fn refused_within(addr: SocketAddr, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if TcpStream::connect(addr).await.is_err() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_an_open_sse_stream_refuses_new_connections_and_exits_0() {
    let (upstream, _testbed, _handle) = Testbed::builder().spawn_local().await.unwrap();
    let mut strata = tokio::task::block_in_place(|| start_strata(upstream, "10s"));
    assert_eq!(get_status(strata.admin, "/readyz").await, Some(200));

    // 8 progress events 250 ms apart, then the result: about 2 s.
    let mut stream = open_drip(strata.listen, 8, 250).await;
    let mut body = Vec::new();
    assert!(
        read_until(
            &mut stream,
            &mut body,
            "notifications/progress",
            Duration::from_secs(10)
        )
        .await,
        "the stream opened"
    );
    let term = Instant::now();
    sigterm(&strata);

    assert!(
        refused_within(strata.listen, Duration::from_secs(2)).await,
        "new agent connections are refused once draining"
    );
    assert_ne!(
        get_status(strata.admin, "/readyz").await,
        Some(200),
        "/readyz no longer answers 200"
    );
    assert!(
        read_to_eof(&mut stream, &mut body, Duration::from_secs(10)).await,
        "the stream ended"
    );
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.contains("\"result\"") && text.contains("\"id\":7"),
        "the drained stream delivered its final result:\n{text}"
    );
    let status = wait_exit(&mut strata, Duration::from_secs(10)).await;
    assert!(status.success(), "exit status {status:?}");
    assert!(
        term.elapsed() < Duration::from_secs(10),
        "exited within the drain deadline"
    );
    let logs: Vec<String> = strata.logs.try_iter().collect();
    assert!(
        logs.iter()
            .any(|l| l.contains("\"sse_drip\"") && l.contains("\"TOOL_SUCCESS\"")),
        "the drained call was classified and logged:\n{}",
        logs.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drain_deadline_cuts_a_longer_stream_and_still_exits_0() {
    let (upstream, _testbed, _handle) = Testbed::builder().spawn_local().await.unwrap();
    let mut strata = tokio::task::block_in_place(|| start_strata(upstream, "1s"));

    // 40 events 250 ms apart: 10 s, far past the 1 s drain.
    let mut stream = open_drip(strata.listen, 40, 250).await;
    let mut body = Vec::new();
    assert!(
        read_until(
            &mut stream,
            &mut body,
            "notifications/progress",
            Duration::from_secs(10)
        )
        .await,
        "the stream opened"
    );
    let term = Instant::now();
    sigterm(&strata);

    let status = wait_exit(&mut strata, Duration::from_secs(6)).await;
    assert!(status.success(), "exit status {status:?}");
    let took = term.elapsed();
    assert!(
        took >= Duration::from_millis(900),
        "the stream was given the drain time ({took:?})"
    );
    assert!(
        read_to_eof(&mut stream, &mut body, Duration::from_secs(5)).await,
        "the stream was closed"
    );
    assert!(
        !String::from_utf8_lossy(&body).contains("\"result\""),
        "the stream was cut before its result"
    );
}

/// Kubernetes may send SIGTERM the moment a pod is ready (a rollout, a scale-down): the
/// handler must exist before `/readyz` answers 200, or strata dies by signal 15, no drain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_right_after_readiness_still_exits_0() {
    let (upstream, _testbed, _handle) = Testbed::builder().spawn_local().await.unwrap();
    for attempt in 0..20 {
        let mut strata = tokio::task::block_in_place(|| start_strata(upstream, "1s"));
        assert_eq!(get_status(strata.admin, "/readyz").await, Some(200));
        sigterm(&strata);
        let status = wait_exit(&mut strata, Duration::from_secs(5)).await;
        assert!(
            status.success(),
            "attempt {attempt}: exit status {status:?}"
        );
    }
}

/// The whole answer to a GET, as text (admin endpoints are small).
async fn get_text(addr: SocketAddr, path: &str) -> String {
    let Ok(mut s) = TcpStream::connect(addr).await else {
        return String::new();
    };
    let req = format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
    if s.write_all(req.as_bytes()).await.is_err() {
        return String::new();
    }
    let mut text = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut text)).await;
    text
}

/// Polls /metrics until `line` shows, or gives up after 10 s.
async fn wait_metric(admin: SocketAddr, line: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if get_text(admin, "/metrics").await.contains(line) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

fn sighup(strata: &Strata) {
    let status = Command::new("kill")
        .args(["-HUP", &strata.child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// SIGHUP re-reads the file: a good one is swapped in without a restart, a bad one is refused
/// (logged, counted) and the old config stays in force; the process keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_config_and_refuses_a_bad_one() {
    let (upstream, _testbed, _handle) = Testbed::builder().spawn_local().await.unwrap();
    let strata = tokio::task::block_in_place(|| start_strata(upstream, "1s"));
    let good = std::fs::read_to_string(&strata.config).unwrap();
    std::fs::write(&strata.config, good.replace("level: info", "level: warn")).unwrap();
    sighup(&strata);
    assert!(wait_metric(strata.admin, "strata_config_reloads_total{result=\"ok\"} 1").await);
    std::fs::write(&strata.config, format!("{good}bogus: 1\n")).unwrap();
    sighup(&strata);
    assert!(
        wait_metric(
            strata.admin,
            "strata_config_reloads_total{result=\"error\"} 1"
        )
        .await
    );
    assert_eq!(
        get_status(strata.admin, "/readyz").await,
        Some(200),
        "still serving"
    );
    let mut s = strata;
    assert!(
        s.child.0.try_wait().unwrap().is_none(),
        "SIGHUP must not end strata"
    );
}
