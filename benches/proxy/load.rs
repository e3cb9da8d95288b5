//! The load generator: agents, each with its own keep-alive HTTP/1.1 connection (hyper's
//! low-level client, no pool), sending one call after another. Every round is bounded in time
//! and in calls; every latency (request sent → last body byte read) goes into a histogram.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};

use crate::hist::Histogram;
use crate::procs::{self, Target};
use crate::wire::{self, Sender, Wire};

/// A single call must finish within this, or it counts as an error.
const CALL_LIMIT: Duration = Duration::from_secs(10);

/// The JSON-RPC request every agent sends (id 1: the fixed upstream answers id 1).
pub(crate) const TOOLS_CALL: &[u8] =
    br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ok","arguments":{"query":"Instant::now"}}}"#;

/// The header a keyed call carries (`--only keys`).
pub(crate) const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// A fresh `Idempotency-Key`: unique over the run (every target and round: the Redis store
/// is shared by two of them) and over runs against one Redis (the harness's pid and start
/// time lead it), so every keyed call is claimed, forwarded and completed, never replayed.
pub(crate) fn fresh_key() -> header::HeaderValue {
    static RUN: OnceLock<String> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let run = RUN.get_or_init(|| format!("{:x}-{:x}", std::process::id(), now_ns()));
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    header::HeaderValue::from_str(&format!("bench-{run}-{n}"))
        .unwrap_or(header::HeaderValue::from_static("bench"))
}

/// What one round of one target measured.
pub(crate) struct Round {
    pub(crate) hist: Histogram,
    pub(crate) errors: u64,
    pub(crate) elapsed: Duration,
    /// CPU ticks the target's processes used during the round.
    pub(crate) cpu_ticks: u64,
    /// Highest RSS of the target's processes seen during the round (KiB).
    pub(crate) rss_max_kib: u64,
}

type Conn = SendRequest<Full<Bytes>>;

pub(crate) async fn connect(addr: SocketAddr) -> anyhow::Result<Conn> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(send)
}

/// A POST of `body` to `path`, with the headers an MCP client sends (Streamable HTTP,
/// stateless 2026-07-28, so the testbed needs no session).
pub(crate) fn request(addr: SocketAddr, path: &str, body: &Bytes) -> Request<Full<Bytes>> {
    let mut req = Request::new(Full::new(body.clone()));
    *req.method_mut() = Method::POST;
    *req.uri_mut() = path.parse().unwrap_or_default();
    let h = req.headers_mut();
    if let Ok(host) = header::HeaderValue::from_str(&addr.to_string()) {
        h.insert(header::HOST, host);
    }
    h.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    h.insert(
        header::ACCEPT,
        header::HeaderValue::from_static("application/json, text/event-stream"),
    );
    h.insert(
        "mcp-protocol-version",
        header::HeaderValue::from_static("2026-07-28"),
    );
    req
}

/// Sends one call and reads its whole response; the number of body bytes.
async fn call(conn: &mut Conn, req: Request<Full<Bytes>>) -> anyhow::Result<u64> {
    conn.ready().await?;
    let resp = conn.send_request(req).await?;
    if !resp.status().is_success() {
        bail!("status {}", resp.status());
    }
    drain(resp.into_body()).await
}

/// [`call`] on any [`Wire`]'s connection.
async fn call_on(conn: &mut Sender, req: Request<Full<Bytes>>) -> anyhow::Result<u64> {
    let resp = conn.send(req).await?;
    if !resp.status().is_success() {
        bail!("status {}", resp.status());
    }
    drain(resp.into_body()).await
}

async fn drain(mut body: Incoming) -> anyhow::Result<u64> {
    let mut n = 0;
    while let Some(frame) = body.frame().await {
        if let Some(data) = frame?.data_ref() {
            n += data.len() as u64;
        }
    }
    Ok(n)
}

/// One round: `agents` connections, each POSTing `body` to `path` back to back until `duration` has
/// passed or `max_calls` were started in all. `keyed`: every call carries a [`fresh_key`] (made
/// before its clock starts).
pub(crate) async fn round(
    target: &Target,
    path: &str,
    body: &Bytes,
    agents: usize,
    duration: Duration,
    max_calls: u64,
    keyed: bool,
) -> anyhow::Result<Round> {
    let calls = Calls {
        path,
        body,
        extra: &[],
        keyed,
    };
    round_on(target, &Wire::H1, &calls, agents, duration, max_calls).await
}

/// What each call of a round sends: a POST of `body` to `path`, with the fields of
/// [`request`] and `extra`'s; `keyed`: a [`fresh_key`] too (a new one per call).
pub(crate) struct Calls<'a> {
    pub(crate) path: &'a str,
    pub(crate) body: &'a Bytes,
    pub(crate) extra: &'static [(&'static str, &'static str)],
    pub(crate) keyed: bool,
}

impl Calls<'_> {
    fn request(&self, addr: SocketAddr, wire: &Wire) -> Request<Full<Bytes>> {
        let mut req = request(addr, self.path, self.body);
        for (name, value) in self.extra {
            req.headers_mut()
                .insert(*name, header::HeaderValue::from_static(value));
        }
        wire.shape(addr, req)
    }
}

/// [`round`] with the agents speaking `wire`, sending `calls`.
pub(crate) async fn round_on(
    target: &Target,
    wire: &Wire,
    calls: &Calls<'_>,
    agents: usize,
    duration: Duration,
    max_calls: u64,
) -> anyhow::Result<Round> {
    let mut conns = Vec::with_capacity(agents);
    for _ in 0..agents {
        conns.push(
            wire::connect(target.addr, wire)
                .await
                .context(target.name)?,
        );
    }
    let started_calls = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (pids, done) = (target.pids.clone(), done.clone());
        tokio::spawn(async move {
            let mut max = procs::rss_kib(&pids);
            while !done.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(100)).await;
                max = max.max(procs::rss_kib(&pids));
            }
            max
        })
    };
    let cpu0 = procs::cpu_ticks(&target.pids);
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::with_capacity(agents);
    for mut conn in conns {
        let addr = target.addr;
        let wire = wire.clone();
        // Every call's request, made once: a clone per call, outside its clock.
        let template = calls.request(addr, &wire);
        let keyed = calls.keyed;
        let started_calls = started_calls.clone();
        tasks.push(tokio::spawn(async move {
            let mut hist = Histogram::new();
            let mut errors = 0u64;
            while Instant::now() < deadline
                && started_calls.fetch_add(1, Ordering::Relaxed) < max_calls
            {
                let mut req = copy(&template);
                if keyed {
                    req.headers_mut().insert(IDEMPOTENCY_KEY, fresh_key());
                }
                let t0 = Instant::now();
                match timeout(CALL_LIMIT, call_on(&mut conn, req)).await {
                    Ok(Ok(_)) => hist.record(t0.elapsed().as_nanos() as u64),
                    _ => {
                        errors += 1;
                        // The connection may be gone: a new one, or this agent stops.
                        match wire::connect(addr, &wire).await {
                            Ok(c) => conn = c,
                            Err(_) => break,
                        }
                    }
                }
            }
            (hist, errors)
        }));
    }
    let mut hist = Histogram::new();
    let mut errors = 0;
    for task in tasks {
        let (h, e) = task.await?;
        hist.merge(&h);
        errors += e;
    }
    let elapsed = start.elapsed();
    let cpu_ticks = procs::cpu_ticks(&target.pids).saturating_sub(cpu0);
    done.store(true, Ordering::Relaxed);
    let rss_max_kib = sampler.await?;
    Ok(Round {
        hist,
        errors,
        elapsed,
        cpu_ticks,
        rss_max_kib,
    })
}

/// A copy of `req`: method, URI, fields and body (a `Request` with a body is not `Clone`).
fn copy(req: &Request<Full<Bytes>>) -> Request<Full<Bytes>> {
    let mut out = Request::new(req.body().clone());
    *out.method_mut() = req.method().clone();
    *out.uri_mut() = req.uri().clone();
    *out.headers_mut() = req.headers().clone();
    out
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// One SSE stream of `n` events `ms` apart: how late each event arrived (ns), measured from
/// the upstream's send time to the moment its bytes were read here.
pub(crate) async fn ticks(target: &Target, n: u64, ms: u64) -> anyhow::Result<Vec<u64>> {
    let mut conn = connect(target.addr).await?;
    let path = format!("/tick?n={n}&ms={ms}");
    let req = request(target.addr, &path, &Bytes::from_static(TOOLS_CALL));
    conn.ready().await?;
    let limit = Duration::from_millis(ms * (n + 2)) + CALL_LIMIT;
    let resp = timeout(limit, conn.send_request(req)).await??;
    let mut body = resp.into_body();
    let mut delays = Vec::with_capacity(n as usize);
    const MARK: &[u8] = b"sent_ns=";
    while let Some(frame) = timeout(limit, body.frame()).await? {
        let frame = frame?;
        let Some(data) = frame.data_ref() else {
            continue;
        };
        let now = now_ns();
        let mut rest: &[u8] = data;
        while let Some(at) = memchr::memmem::find(rest, MARK) {
            rest = &rest[at + MARK.len()..];
            let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
            let sent: u64 = std::str::from_utf8(&rest[..digits])?.parse()?;
            delays.push(now.saturating_sub(sent));
        }
    }
    Ok(delays)
}

/// One response of `bytes` body bytes: (bytes read, time taken).
pub(crate) async fn big(target: &Target, bytes: u64) -> anyhow::Result<(u64, Duration)> {
    let mut conn = connect(target.addr).await?;
    let path = format!("/big?bytes={bytes}");
    let req = request(target.addr, &path, &Bytes::from_static(TOOLS_CALL));
    let start = Instant::now();
    let n = timeout(Duration::from_secs(120), call(&mut conn, req)).await??;
    Ok((n, start.elapsed()))
}

/// An SSE stream held open: the connection and the unread rest of the body.
pub(crate) struct Held {
    _conn: Conn,
    _body: Incoming,
}

/// Opens one `/hold` stream and waits for its first event.
pub(crate) async fn hold(addr: SocketAddr) -> anyhow::Result<Held> {
    let open = async {
        let mut conn = connect(addr).await?;
        let req = request(addr, "/hold", &Bytes::from_static(TOOLS_CALL));
        conn.ready().await?;
        let resp = conn.send_request(req).await?;
        let mut body = resp.into_body();
        body.frame().await.context("stream ended")??;
        anyhow::Ok(Held {
            _conn: conn,
            _body: body,
        })
    };
    timeout(CALL_LIMIT, open).await?
}

/// `GET path` on `addr` (strata's admin listener): the body as text.
pub(crate) async fn get(addr: SocketAddr, path: &str) -> anyhow::Result<String> {
    let fetch = async {
        let mut conn = connect(addr).await?;
        let mut req = Request::new(Full::new(Bytes::new()));
        *req.uri_mut() = path.parse()?;
        req.headers_mut().insert(
            header::HOST,
            header::HeaderValue::from_str(&addr.to_string())?,
        );
        conn.ready().await?;
        let resp = conn.send_request(req).await?;
        if !resp.status().is_success() {
            bail!("GET {path}: status {}", resp.status());
        }
        let body = resp.into_body().collect().await?.to_bytes();
        Ok(String::from_utf8_lossy(&body).into_owned())
    };
    timeout(CALL_LIMIT, fetch).await?
}
