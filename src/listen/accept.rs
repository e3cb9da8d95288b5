//! The agent-facing listener: HTTP/1.1 and h2 (hyper-util's auto builder), one task per
//! connection, graceful drain on shutdown; TLS when configured (see `tls.rs`).
//!
//! Limits (each hit counted in `strata_limit_hits_total` and logged once per connection):
//! - `limits.max_connections`: a connection beyond it is closed as soon as it is accepted. A
//!   waiting connection could wait behind SSE streams that last hours; a closed one tells the
//!   agent at once.
//! - `timeouts.header_read`: hyper bounds each HTTP/1.1 request head. It does not bound the
//!   bytes before hyper-util decides between h1 and h2 (an agent that connects and sends
//!   nothing, or half an h2 preface), nor an h2 agent's first HEADERS, so a connection that has
//!   not started its first request within that time is closed here. Only then is it counted
//!   as `header_timeout`: hyper's timer also closes keep-alive connections left idle between
//!   requests, which is normal agent behaviour, not an attack.
//! - `limits.max_header_bytes`, `limits.max_headers`: 431 (hyper), counted as `header_size`.
//! - `limits.max_h2_streams`: streams beyond it are refused by h2 (RST_STREAM REFUSED_STREAM).
//!
//! A plain-TCP connection whose first bytes are not h2's preface is served by strata's own
//! HTTP/1.1 connection (`agent_h1.rs`), which hands to hyper's h1 connection whatever it does
//! not serve itself — with the bytes it read put back in front (`Rewound`). It is not given to
//! the auto builder: that reads up to 24 bytes to tell h1 from h2 and puts them in front of the
//! rest, so hyper's first read returns those 24 bytes alone, and its next read, finding its
//! 8 KiB buffer 24 bytes short, grows it to 16 KiB — for the connection's life (an SSE
//! stream's: hours). TLS and h2 agents go through the auto builder.
//!
//! The drain: hyper's connections are watched by `GracefulShutdown`; strata's own, which it
//! cannot watch, hold a receiver of `live` for their life, and the drain waits until none is
//! left. Both see shutdown begin when `stop` is dropped.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Instant;

use super::tls::{AgentIo, AgentTls};
use crate::http::io::MaybeTls;
use crate::metrics::{Limit, Metrics};
use crate::proxy::agent_h1::{self, HeadLimits, Served};
use crate::proxy::{AgentBody, CurrentProxy, FromAgent, HeadTimer, Peer, RepeatedFields};
use crate::runtime::balance::{Seat, WorkerListener};

/// Listener settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerSettings {
    /// The agent must send a request head within this (slowloris defence).
    pub header_read: Duration,
    /// Largest request head (h1 buffer, h2 header list).
    pub max_header_bytes: usize,
    /// Most HTTP/1.1 request header lines.
    pub max_headers: usize,
    /// Agent connections open at once.
    pub max_connections: usize,
    /// Concurrent h2 streams per agent connection.
    pub max_h2_streams: u32,
    /// On shutdown, how long in-flight exchanges (SSE streams included) may finish.
    pub drain: Duration,
}

/// What every connection task of one listener shares.
struct Shared {
    proxy: Arc<CurrentProxy>,
    tls: Arc<AgentTls>,
    /// hyper's: the auto builder (TLS, h2, anything not plain h1), and an h1 builder for
    /// what strata's own connection hands over.
    auto: auto::Builder<TokioExecutor>,
    h1: http1::Builder,
    own: agent_h1::Settings,
    metrics: Arc<Metrics>,
    header_read: Duration,
}

/// One accepted agent connection and what it holds for its life: its seat on this worker,
/// its share of `limits.max_connections`, and its place in the drain.
struct Accepted {
    stream: TcpStream,
    agent: SocketAddr,
    watcher: Watcher,
    stopping: watch::Receiver<()>,
    _held: (OwnedSemaphorePermit, Seat, watch::Receiver<()>),
}

/// Accepts agent connections until `shutdown` resolves, then drains. `permits` holds
/// `limits.max_connections`, shared by every worker serving the listener.
pub async fn serve(
    mut listener: WorkerListener,
    proxy: Arc<CurrentProxy>,
    tls: Arc<AgentTls>,
    settings: ServerSettings,
    permits: Arc<Semaphore>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let metrics = proxy.load().metrics().clone();
    let shared = Arc::new(Shared::new(proxy, tls, &settings, metrics.clone()));
    let graceful = GracefulShutdown::new();
    // Dropped at shutdown: a connection still waiting for its first bytes (`plain_h1`) is not
    // yet watched by `graceful`, and ends then rather than at `header_read`; strata's own
    // connections close when idle, or after the exchange under way.
    let (stop, stopping) = watch::channel(());
    // strata's own connections (`agent_h1.rs`) are not hyper's, so `graceful` does not
    // watch them: each holds a receiver of this, and the drain waits until none is left.
    let (live, unwatched) = watch::channel(());
    drop(unwatched);
    // Refusals are logged once per episode of saturation, not once per refused connection.
    let mut saturated = false;
    tokio::pin!(shutdown);
    loop {
        let (stream, agent, seat) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // EMFILE and friends: back off briefly rather than spin.
                    tracing::warn!(error = %err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            metrics.limit_hit(Limit::MaxConnections);
            if !saturated {
                tracing::warn!(%agent, max = settings.max_connections,
                    "limits.max_connections reached; closing new agent connections");
            }
            saturated = true;
            continue;
        };
        saturated = false;
        let _ = stream.set_nodelay(true);
        let accepted = Accepted {
            stream,
            agent,
            watcher: graceful.watcher(),
            stopping: stopping.clone(),
            // Held for the connection's life: the drain waits for every one.
            _held: (permit, seat, live.subscribe()),
        };
        tokio::spawn(connection(shared.clone(), accepted));
    }
    drop(listener);
    drop(stop);
    drop(stopping);
    tokio::select! {
        ((), ()) = async { tokio::join!(graceful.shutdown(), live.closed()) } => {}
        () = tokio::time::sleep(settings.drain) => {
            tracing::warn!("drain deadline reached; closing the remaining agent connections");
        }
    }
    Ok(())
}

impl Shared {
    fn new(
        proxy: Arc<CurrentProxy>,
        tls: Arc<AgentTls>,
        settings: &ServerSettings,
        metrics: Arc<Metrics>,
    ) -> Shared {
        // hyper panics below 8 KiB; config validation already enforces that floor.
        let max_buf = settings.max_header_bytes.max(8192);
        let mut auto = auto::Builder::new(TokioExecutor::new());
        auto.http1()
            .timer(TokioTimer::new())
            .header_read_timeout(settings.header_read)
            .max_headers(settings.max_headers)
            .max_buf_size(max_buf);
        auto.http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(settings.max_h2_streams)
            .max_header_list_size(u32::try_from(settings.max_header_bytes).unwrap_or(u32::MAX));
        // The same h1 settings as the auto builder's, for connections known to be h1
        // (`plain_h1`), and the head's size checked as such: `max_buf_size` alone bounds the
        // read buffer, which only refuses a head still incomplete when the buffer is full —
        // a larger head that arrived whole in fewer reads passed. hyper-util's auto builder
        // does not offer this setting.
        let mut h1 = http1::Builder::new();
        h1.timer(TokioTimer::new())
            .header_read_timeout(settings.header_read)
            .max_headers(settings.max_headers)
            .max_buf_size(max_buf)
            .max_header_size(settings.max_header_bytes);
        Shared {
            proxy,
            tls,
            auto,
            h1,
            own: agent_h1::Settings {
                header_read: settings.header_read,
                limits: HeadLimits {
                    max_bytes: settings.max_header_bytes,
                    max_fields: settings.max_headers,
                },
            },
            metrics,
            header_read: settings.header_read,
        }
    }
}

/// hyper's service for one connection: each request handled by the proxy in force.
fn hyper_service(
    proxy: Arc<CurrentProxy>,
    peer: Peer,
    started: Arc<AtomicBool>,
) -> impl hyper::service::Service<
    http::Request<hyper::body::Incoming>,
    Response = http::Response<AgentBody>,
    Error = std::convert::Infallible,
    Future = HandleFuture,
> + Clone {
    service_fn(move |req| {
        started.store(true, Ordering::Relaxed);
        // Boxed per request: hyper keeps room for the service's future for the connection's
        // life (h1's `in_flight`), and an SSE stream would keep `handle`'s for hours after
        // its head went out. Boxed, that room is a pointer and the future is freed once the
        // head is out.
        let req = req.map(FromAgent::Hyper);
        let current = proxy.load();
        let peer = peer.clone();
        // Written into a box allocated first, not copied into it (`agent_h1.rs`).
        let handle = Box::into_pin(Box::write(Box::new_uninit(), async move {
            // No fields as read go in, so none come back: the map is hyper's. An h2
            // connection's calls run at once, each reading its MCP fields itself.
            let mut repeated = RepeatedFields::default();
            Ok(current
                .handle(req, None, &peer, HeadTimer::new(None), &mut repeated)
                .await
                .response)
        }));
        let handle: HandleFuture = handle;
        handle
    })
}

/// One agent connection, from its TLS handshake (if any) to its end.
async fn connection(shared: Arc<Shared>, accepted: Accepted) {
    let Accepted {
        stream,
        agent,
        watcher,
        mut stopping,
        _held,
    } = accepted;
    let metrics = &shared.metrics;
    // The TLS handshake runs here, not in the accept loop: a slow agent delays only itself.
    // It is bounded by `header_read` too. Boxed: its future is larger than the connection's,
    // and would size this task for its life.
    let acceptor = shared.tls.load();
    let accept = Box::pin(
        shared
            .tls
            .accept(acceptor, stream, agent, shared.header_read),
    );
    let Some(io) = accept.await else {
        return;
    };
    // The agent must start its first request within `header_read` from here.
    let deadline = Instant::now() + shared.header_read;
    let Some(h1) = first_bytes(&io, deadline, &mut stopping, metrics, agent).await else {
        return;
    };
    let started = Arc::new(AtomicBool::new(false));
    let peer = Peer::new(agent);
    let service = hyper_service(shared.proxy.clone(), peer.clone(), started.clone());
    // Each connection is built in place, in one expression, and `run` borrows it: a
    // connection moved through named locals or into an async fn's argument keeps a slot in
    // this task's future at each step, for the connection's life.
    let ended = match io {
        MaybeTls::Plain(tcp) if h1 => {
            // strata's own HTTP/1.1 connection; hyper's for what it hands over.
            let served = agent_h1::serve(
                tcp,
                &shared.proxy,
                &peer,
                shared.own,
                deadline,
                &started,
                &mut stopping,
            )
            .await;
            drop(stopping);
            let Some(rewound) = handed_over(served, metrics, agent, &started) else {
                return;
            };
            // No upgrades: strata forwards none (`Upgrade` is hop-by-hop), and an upgrade
            // hyper would hand over has no taker either way.
            let conn = std::pin::pin!(
                watcher.watch(shared.h1.serve_connection(TokioIo::new(rewound), service))
            );
            run(conn, deadline, &started).await
        }
        io => {
            drop(stopping);
            // Boxed: inline beside the h1 connection, it nearly doubled this task's size for
            // every connection's life.
            let mut conn = Box::pin(
                watcher.watch(
                    shared
                        .auto
                        .serve_connection_with_upgrades(TokioIo::new(io), service)
                        .into_owned(),
                ),
            );
            run(conn.as_mut(), deadline, &started).await
        }
    };
    report(ended, metrics, agent, &started);
}

/// Waits for the connection's first bytes, until `deadline`: whether it is plain HTTP/1
/// (`plain_h1`). `None`: strata is shutting down, or nothing came (counted and closed).
async fn first_bytes(
    io: &AgentIo,
    deadline: Instant,
    stopping: &mut watch::Receiver<()>,
    metrics: &Metrics,
    agent: SocketAddr,
) -> Option<bool> {
    let first = async {
        tokio::select! {
            h1 = plain_h1(io) => Some(h1),
            // Only ends when the sender is dropped: strata is shutting down.
            _ = stopping.changed() => None,
        }
    };
    match tokio::time::timeout_at(deadline, first).await {
        Ok(first) => first,
        Err(_) => {
            // Nothing arrived: dropping the connection closes it.
            limit_hit(metrics, Limit::HeaderTimeout, agent);
            None
        }
    }
}

/// What strata's own connection hands to hyper, if anything; how it ended otherwise.
fn handed_over(
    served: Served,
    metrics: &Metrics,
    agent: SocketAddr,
    started: &AtomicBool,
) -> Option<agent_h1::Rewound> {
    match served {
        Served::HandOver(rewound) => return Some(rewound),
        Served::Closed => {}
        Served::HeaderTimeout => limit_hit(metrics, Limit::HeaderTimeout, agent),
        Served::AgentLeft(err) => {
            connection_error(metrics, &err, started.load(Ordering::Relaxed), agent);
        }
        Served::AnswerBroken(why) => tracing::debug!(%agent, "agent connection closed: {why}"),
    }
    None
}

/// Counts and logs how a connection hyper served ended, when not cleanly.
fn report(ended: Result<(), Ended>, metrics: &Metrics, agent: SocketAddr, started: &AtomicBool) {
    match ended {
        Ok(()) => {}
        Err(Ended::HeaderTimeout) => limit_hit(metrics, Limit::HeaderTimeout, agent),
        Err(Ended::Error(err)) => {
            connection_error(metrics, &*err, started.load(Ordering::Relaxed), agent);
        }
    }
}

/// True when the connection is plain TCP and its first bytes are not h2's preface: it is
/// HTTP/1 (hyper-util's auto builder decides the same at the first byte that differs), and
/// strata's own connection reads it from the socket itself. Peeked, not read, so the first
/// read takes the whole request head. False for TLS (nothing to peek below the session), for a
/// connection closed before a byte, and for bytes that may still become the preface: those
/// go through the auto builder, as before.
async fn plain_h1(io: &AgentIo) -> bool {
    const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let MaybeTls::Plain(tcp) = io else {
        return false;
    };
    let mut first = [0u8; H2_PREFACE.len()];
    match tcp.peek(&mut first).await {
        Ok(n) => first
            .get(..n)
            .is_some_and(|got| !got.is_empty() && !H2_PREFACE.starts_with(got)),
        Err(_) => false,
    }
}

type ConnError = Box<dyn std::error::Error + Send + Sync>;

/// What the service returns for one request (see `serve`).
type HandleFuture = Pin<
    Box<dyn Future<Output = Result<http::Response<AgentBody>, std::convert::Infallible>> + Send>,
>;

/// Why a connection ended, when not cleanly.
enum Ended {
    /// No request started before the deadline; the connection was dropped (closed).
    HeaderTimeout,
    Error(ConnError),
}

/// Drives a connection to its end; if no request has started by `deadline`, gives up on it
/// (the caller drops it, which closes it).
async fn run<E: Into<ConnError>>(
    mut conn: Pin<&mut impl Future<Output = Result<(), E>>>,
    deadline: Instant,
    started: &AtomicBool,
) -> Result<(), Ended> {
    let ended = tokio::select! {
        ended = conn.as_mut() => ended,
        () = tokio::time::sleep_until(deadline) => {
            if !started.load(Ordering::Relaxed) {
                return Err(Ended::HeaderTimeout);
            }
            conn.await
        }
    };
    ended.map_err(|err| Ended::Error(err.into()))
}

/// Counts and logs (once: the connection is over) a limit that ended an agent connection.
fn limit_hit(metrics: &Metrics, limit: Limit, agent: SocketAddr) {
    metrics.limit_hit(limit);
    let why = match limit {
        Limit::HeaderTimeout => "no complete request head within timeouts.header_read",
        _ => "request head over limits.max_header_bytes or limits.max_headers (431)",
    };
    tracing::info!(%agent, limit = limit.as_str(), "agent connection closed: {why}");
}

/// Sorts out why an agent connection ended with an error: a limit, or anything else (the
/// agent left mid-exchange, a protocol error), which is only worth a debug line.
fn connection_error(
    metrics: &Metrics,
    err: &(dyn std::error::Error + 'static),
    started: bool,
    agent: SocketAddr,
) {
    let mut source = Some(err);
    while let Some(e) = source {
        if let Some(hyper) = e.downcast_ref::<hyper::Error>() {
            if hyper.is_parse_too_large() {
                return limit_hit(metrics, Limit::HeaderSize, agent);
            }
            // After a first request, hyper's header timer also ends idle keep-alive
            // connections: normal, not counted.
            if hyper.is_timeout() && !started {
                return limit_hit(metrics, Limit::HeaderTimeout, agent);
            }
            break;
        }
        source = e.source();
    }
    tracing::debug!(error = %err, %agent, "agent connection ended with an error");
}
