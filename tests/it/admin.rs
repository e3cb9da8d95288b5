//! The admin listener end to end: a real socket on 127.0.0.1:0, a real hyper client.
// Marks the whole file as test code, so clippy's allow-unwrap-in-tests also covers the helpers
// below: in them, as in the tests, a failed setup step should fail the test.
#![cfg(test)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use strata::admin::{Health, serve_admin};
use strata::classify::Outcome;
use strata::metrics::Metrics;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

struct Admin {
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

async fn start() -> Admin {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let metrics = Metrics::new(16, 16).unwrap();
    let health = Arc::new(Health::new());
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(serve_admin(
        listener,
        metrics.clone(),
        health.clone(),
        async move {
            let _ = rx.await;
        },
    ));
    Admin {
        addr,
        metrics,
        health,
        shutdown: Some(tx),
        task,
    }
}

fn client() -> Client<HttpConnector, Empty<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

/// (status, content type, body) of one request.
async fn send(
    client: &Client<HttpConnector, Empty<Bytes>>,
    method: Method,
    addr: SocketAddr,
    path: &str,
) -> (StatusCode, String, String) {
    let req = Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .body(Empty::new())
        .unwrap();
    let resp = client.request(req).await.unwrap();
    let status = resp.status();
    let content_type = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        content_type,
        String::from_utf8(body.to_vec()).unwrap(),
    )
}

async fn get(admin: &Admin, path: &str) -> (StatusCode, String) {
    let (status, _, body) = send(&client(), Method::GET, admin.addr, path).await;
    (status, body)
}

#[tokio::test]
async fn healthz_is_ok_while_running() {
    let admin = start().await;
    assert_eq!(get(&admin, "/healthz").await, (StatusCode::OK, "ok".into()));
    admin.health.set_draining(true);
    assert_eq!(get(&admin, "/healthz").await, (StatusCode::OK, "ok".into()));
}

#[tokio::test]
async fn readyz_follows_ready_and_draining() {
    let admin = start().await;
    let unavailable = StatusCode::SERVICE_UNAVAILABLE;
    assert_eq!(
        get(&admin, "/readyz").await,
        (unavailable, "not ready".into())
    );
    admin.health.set_ready(true);
    assert_eq!(
        get(&admin, "/readyz").await,
        (StatusCode::OK, "ready".into())
    );
    admin.health.set_draining(true);
    assert_eq!(
        get(&admin, "/readyz").await,
        (unavailable, "draining".into())
    );
    admin.health.set_draining(false);
    assert_eq!(
        get(&admin, "/readyz").await,
        (StatusCode::OK, "ready".into())
    );
}

#[tokio::test]
async fn metrics_are_prometheus_text() {
    let admin = start().await;
    admin
        .metrics
        .call("tools/call", "echo")
        .record(Outcome::ToolError, Duration::from_millis(5));
    let (status, content_type, body) = send(&client(), Method::GET, admin.addr, "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    assert!(body.contains("# HELP strata_calls_total "), "{body}");
    assert!(
        body.contains(
            r#"strata_calls_total{layer="application",method="tools/call",outcome="TOOL_ERROR",tool="echo"} 1"#
        ),
        "{body}"
    );
    assert!(body.contains("strata_build_info{version="), "{body}");
}

#[tokio::test]
async fn unknown_paths_404_and_other_methods_405() {
    let admin = start().await;
    let c = client();
    let (status, _, _) = send(&c, Method::GET, admin.addr, "/nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    for path in ["/metrics", "/healthz", "/readyz"] {
        let req = Request::builder()
            .method(Method::POST)
            .uri(format!("http://{}{path}", admin.addr))
            .body(Empty::new())
            .unwrap();
        let resp = c.request(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED, "{path}");
        assert_eq!(resp.headers()[header::ALLOW], "GET");
    }
}

#[tokio::test]
async fn serves_h2_prior_knowledge() {
    let admin = start().await;
    let h2: Client<HttpConnector, Empty<Bytes>> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let (status, _, body) = send(&h2, Method::GET, admin.addr, "/healthz").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "ok"));
}

#[tokio::test]
async fn shutdown_stops_the_listener_despite_idle_keepalive() {
    let mut admin = start().await;
    // A pooled client keeps its connection open after this request.
    let c = client();
    let (status, _, _) = send(&c, Method::GET, admin.addr, "/healthz").await;
    assert_eq!(status, StatusCode::OK);

    admin.shutdown.take().unwrap().send(()).unwrap();
    let result = tokio::time::timeout(Duration::from_secs(5), admin.task)
        .await
        .expect("serve_admin returns well within the drain timeout");
    assert!(result.unwrap().is_ok());
    assert!(
        tokio::net::TcpStream::connect(admin.addr).await.is_err(),
        "listener still accepting after shutdown"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stalled_request_head_is_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let admin = start().await;
    let mut stream = tokio::net::TcpStream::connect(admin.addr).await.unwrap();
    // The head never ends: no blank line.
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "connection still open after 60 s");
    let waited = started.elapsed();
    assert!(
        waited >= strata::admin::ADMIN_HEADER_READ_TIMEOUT && waited < Duration::from_secs(20),
        "closed after {waited:?}"
    );
}

#[tokio::test]
async fn connections_beyond_the_cap_are_closed() {
    use tokio::io::AsyncReadExt;
    let admin = start().await;
    let mut idle = Vec::new();
    for _ in 0..strata::admin::ADMIN_MAX_CONNECTIONS {
        idle.push(tokio::net::TcpStream::connect(admin.addr).await.unwrap());
    }
    // Each connection is accepted in order, so once this one is refused all the idle ones
    // before it are being served.
    let mut extra = tokio::net::TcpStream::connect(admin.addr).await.unwrap();
    let mut buf = [0u8; 1];
    let n = tokio::time::timeout(Duration::from_secs(5), extra.read(&mut buf))
        .await
        .expect("the connection over the cap is closed")
        .unwrap_or(0);
    assert_eq!(n, 0);

    drop(idle);
    // Freed slots are reaped as their tasks end; poll until a request gets through.
    let c = client();
    let uri = format!("http://{}/healthz", admin.addr);
    let ok = async {
        loop {
            let req = Request::get(&uri).body(Empty::new()).unwrap();
            if let Ok(resp) = c.request(req).await {
                break resp.status();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let status = tokio::time::timeout(Duration::from_secs(5), ok)
        .await
        .unwrap();
    assert_eq!(status, StatusCode::OK);
}
