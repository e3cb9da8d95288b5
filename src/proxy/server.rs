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

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::tls::AgentTls;
use super::{CurrentProxy, Peer};
use crate::metrics::{Limit, Metrics};

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

/// Accepts agent connections until `shutdown` resolves, then drains. `permits` holds
/// `limits.max_connections`, shared by every worker serving the listener.
pub async fn serve(
    listener: TcpListener,
    proxy: Arc<CurrentProxy>,
    tls: Arc<AgentTls>,
    settings: ServerSettings,
    permits: Arc<Semaphore>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(settings.header_read)
        .max_headers(settings.max_headers)
        // hyper panics below 8 KiB; config validation already enforces that floor.
        .max_buf_size(settings.max_header_bytes.max(8192));
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(settings.max_h2_streams)
        .max_header_list_size(u32::try_from(settings.max_header_bytes).unwrap_or(u32::MAX));
    // Shared with the connection tasks, which build their connection after any TLS handshake.
    let builder = Arc::new(builder);
    let graceful = GracefulShutdown::new();
    let metrics = proxy.load().metrics().clone();
    // Refusals are logged once per episode of saturation, not once per refused connection.
    let mut saturated = false;
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, agent) = match accepted {
                    Ok(conn) => conn,
                    Err(err) => {
                        // EMFILE and friends: back off briefly rather than spin.
                        tracing::warn!(error = %err, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
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
                let current = proxy.clone();
                let started = Arc::new(AtomicBool::new(false));
                let first = started.clone();
                let peer = Peer::new(agent);
                let service = service_fn(move |req| {
                    first.store(true, Ordering::Relaxed);
                    current.load().handle(req, peer.clone())
                });
                // Read per connection: a reloaded certificate applies from the next accept.
                let acceptor = tls.load();
                let (tls, builder, watcher) = (tls.clone(), builder.clone(), graceful.watcher());
                let (metrics, header_read) = (metrics.clone(), settings.header_read);
                tokio::spawn(async move {
                    let _permit = permit;
                    // The TLS handshake runs here, not in the accept loop: a slow agent delays
                    // only itself. It is bounded by `header_read` too. Boxed: its future is
                    // larger than the connection's, and would size this task for its life.
                    let accept = Box::pin(tls.accept(acceptor, stream, agent, header_read));
                    let Some(io) = accept.await else {
                        return;
                    };
                    let conn = builder
                        .serve_connection_with_upgrades(TokioIo::new(io), service)
                        .into_owned();
                    let conn = watcher.watch(conn);
                    tokio::pin!(conn);
                    let ended = tokio::select! {
                        ended = &mut conn => ended,
                        () = tokio::time::sleep(header_read) => {
                            if !started.load(Ordering::Relaxed) {
                                // Dropping the connection closes it.
                                limit_hit(&metrics, Limit::HeaderTimeout, agent);
                                return;
                            }
                            conn.await
                        }
                    };
                    if let Err(err) = ended {
                        connection_error(&metrics, &*err, started.load(Ordering::Relaxed), agent);
                    }
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(settings.drain) => {
            tracing::warn!("drain deadline reached; closing the remaining agent connections");
        }
    }
    Ok(())
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
