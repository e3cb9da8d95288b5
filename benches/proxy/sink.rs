//! The OTLP sink strata exports to in the telemetry rows and in training: hyper's HTTP/1.1
//! server on 127.0.0.1:0, in the harness's process but on a thread and a current-thread runtime
//! of its own, so it never takes a turn of the load generator's runtime (it still shares the
//! machine's cores with everything else). It decodes nothing.
//!
//! - [`Mode::Answer`]: reads each POST body to its end, counts the request and its bytes, and
//!   answers 200 with an empty body and `content-type: application/x-protobuf` (an empty
//!   `Export*ServiceResponse`: everything accepted);
//! - [`Mode::Stall`]: reads each body, counts it, and never answers: the request stays open
//!   until the sink is dropped (or strata's export timeout gives up on it).
//!
//! Dropping the sink stops its accept loop and its runtime, which closes every connection.

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;

use anyhow::Context;
use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// How the sink treats an export request.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Answer,
    Stall,
}

/// Requests to one path, and their body bytes.
#[derive(Default)]
struct Kind {
    requests: AtomicU64,
    bytes: AtomicU64,
}

impl Kind {
    fn figures(&self) -> Value {
        json!({
            "requests": self.requests.load(Ordering::Relaxed),
            "bytes": self.bytes.load(Ordering::Relaxed),
        })
    }
}

/// What the sink has received.
#[derive(Default)]
struct Counts {
    connections: AtomicU64,
    /// `/v1/traces`, `/v1/metrics`, anything else.
    traces: Kind,
    metrics: Kind,
    other: Kind,
}

/// A running sink; stopped when dropped.
pub(crate) struct Sink {
    pub(crate) addr: SocketAddr,
    counts: Arc<Counts>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Sink {
    pub(crate) fn start(mode: Mode) -> anyhow::Result<Sink> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let counts = Arc::new(Counts::default());
        let (stop, stopped) = oneshot::channel();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let c = counts.clone();
        let thread = std::thread::Builder::new()
            .name("otlp-sink".into())
            .spawn(move || {
                // Dropping the runtime at the end drops every connection's task: the held
                // requests of a stalling sink end there.
                let _ = rt.block_on(serve(listener, mode, c, stopped));
            })
            .context("starting the OTLP sink")?;
        Ok(Sink {
            addr,
            counts,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The endpoint to give strata (`telemetry.otlp.endpoint`).
    pub(crate) fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// What it received so far.
    pub(crate) fn figures(&self) -> Value {
        let c = &self.counts;
        json!({
            "connections": c.connections.load(Ordering::Relaxed),
            "traces": c.traces.figures(),
            "metrics": c.metrics.figures(),
            "other": c.other.figures(),
        })
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn serve(
    listener: TcpListener,
    mode: Mode,
    counts: Arc<Counts>,
    mut stopped: oneshot::Receiver<()>,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::from_std(listener)?;
    loop {
        let stream = tokio::select! {
            _ = &mut stopped => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        counts.connections.fetch_add(1, Ordering::Relaxed);
        let counts = counts.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| export(req, mode, counts.clone()));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn export(
    req: Request<Incoming>,
    mode: Mode,
    counts: Arc<Counts>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let kind = match req.uri().path() {
        "/v1/traces" => &counts.traces,
        "/v1/metrics" => &counts.metrics,
        _ => &counts.other,
    };
    kind.requests.fetch_add(1, Ordering::Relaxed);
    let mut body = req.into_body();
    while let Some(Ok(frame)) = body.frame().await {
        if let Some(data) = frame.data_ref() {
            kind.bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
        }
    }
    if mode == Mode::Stall {
        // Held until the runtime is dropped (the sink stopped) or strata gives up.
        std::future::pending::<()>().await;
    }
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/x-protobuf"),
    );
    Ok(response)
}
