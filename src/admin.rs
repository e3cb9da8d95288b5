//! The admin listener: `GET /metrics`, `/healthz` and `/readyz`, on its own socket (loopback
//! by default) so scrapes and probes never queue behind agent traffic.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::metrics::Metrics;

pub mod page;

/// How long a client may take to send a request head. Bounds what a stalled or idle-by-design
/// client (slowloris) can hold; a scraper sends its head at once.
pub const ADMIN_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// After shutdown, how long open admin connections get to finish their current request
/// before they are closed regardless.
pub const ADMIN_DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Most admin connections open at once; further ones are closed as soon as they are accepted.
/// An h1 or h2 connection that sends nothing at all is not subject to the header timeout
/// (hyper-util's protocol sniffing has none), so this is what bounds idle sockets.
pub const ADMIN_MAX_CONNECTIONS: usize = 64;

/// Pause after a failed `accept` (e.g. out of file descriptors) so the loop does not spin.
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(100);

/// Liveness and readiness as the probes see them. Shared as `Arc<Health>`; all flags are
/// atomics, so the data path can flip them without locking.
#[derive(Debug, Default)]
pub struct Health {
    ready: AtomicBool,
    draining: AtomicBool,
}

/// What `/readyz` reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    /// Still starting (e.g. no listener bound yet).
    NotReady,
    /// Shutting down: load balancers should stop sending new work, even though in-flight
    /// calls are still being served.
    Draining,
}

/// The admin endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    Metrics,
    Healthz,
    Readyz,
}

/// Serves the admin endpoints on `listener` until `shutdown` completes, then lets open
/// connections finish for up to [`ADMIN_DRAIN_TIMEOUT`]. HTTP/1.1 and h2 (prior knowledge).
///
/// Accept errors are logged and retried rather than returned: losing metrics and probes
/// because of a transient EMFILE would turn a blip into a restart.
pub async fn serve_admin(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(ADMIN_HEADER_READ_TIMEOUT);
    let graceful = GracefulShutdown::new();
    let mut connections = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);

    loop {
        let (stream, peer) = tokio::select! {
            biased;
            () = &mut shutdown => break,
            // Reap finished connection tasks so the set does not grow with every scrape.
            Some(_) = connections.join_next() => continue,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "admin listener: accept failed");
                    tokio::time::sleep(ACCEPT_ERROR_BACKOFF).await;
                    continue;
                }
            },
        };
        if connections.len() >= ADMIN_MAX_CONNECTIONS {
            tracing::warn!(%peer, max = ADMIN_MAX_CONNECTIONS, "admin listener: too many connections; closing");
            drop(stream);
            continue;
        }
        let (metrics, health) = (metrics.clone(), health.clone());
        let service = service_fn(move |req: Request<hyper::body::Incoming>| {
            let response = respond(req.method(), req.uri().path(), &metrics, &health);
            async move { Ok::<_, Infallible>(response) }
        });
        let conn = builder.serve_connection(TokioIo::new(stream), service);
        let conn = graceful.watch(conn.into_owned());
        connections.spawn(async move {
            if let Err(error) = conn.await {
                tracing::debug!(%peer, %error, "admin connection ended with an error");
            }
        });
    }

    drop(listener);
    if tokio::time::timeout(ADMIN_DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            open = connections.len(),
            "admin connections still open after the drain timeout; closing them"
        );
    }
    // Dropping the set aborts whatever is left.
    drop(connections);
    Ok(())
}

/// Answers one admin request. Unknown paths are 404; known paths with a method other than
/// GET are 405 (the resource exists, the method does not).
fn respond(
    method: &Method,
    path: &str,
    metrics: &Metrics,
    health: &Health,
) -> Response<Full<Bytes>> {
    let Some(route) = Route::from_path(path) else {
        return text(StatusCode::NOT_FOUND, "not found");
    };
    if method != Method::GET {
        let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET"));
        return response;
    }
    match route {
        Route::Metrics => {
            let mut response = Response::new(Full::new(Bytes::from(metrics.render())));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(Metrics::CONTENT_TYPE),
            );
            response
        }
        // Answered at all means alive: liveness is about the process, not its upstream.
        Route::Healthz => text(StatusCode::OK, "ok"),
        Route::Readyz => match health.readiness() {
            Readiness::Ready => text(StatusCode::OK, "ready"),
            Readiness::NotReady => text(StatusCode::SERVICE_UNAVAILABLE, "not ready"),
            Readiness::Draining => text(StatusCode::SERVICE_UNAVAILABLE, "draining"),
        },
    }
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

// === impl Health ===

impl Health {
    /// Not ready and not draining: the state at startup.
    pub fn new() -> Self {
        Health::default()
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// Once draining, `/readyz` fails even if ready is still set.
    pub fn set_draining(&self, draining: bool) {
        self.draining.store(draining, Ordering::Release);
    }

    pub fn readiness(&self) -> Readiness {
        if self.draining.load(Ordering::Acquire) {
            Readiness::Draining
        } else if self.ready.load(Ordering::Acquire) {
            Readiness::Ready
        } else {
            Readiness::NotReady
        }
    }
}

// === impl Route ===

impl Route {
    fn from_path(path: &str) -> Option<Route> {
        match path {
            "/metrics" => Some(Route::Metrics),
            "/healthz" => Some(Route::Healthz),
            "/readyz" => Some(Route::Readyz),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draining_wins_over_ready() {
        let h = Health::new();
        assert_eq!(h.readiness(), Readiness::NotReady);
        h.set_ready(true);
        assert_eq!(h.readiness(), Readiness::Ready);
        h.set_draining(true);
        assert_eq!(h.readiness(), Readiness::Draining);
        h.set_ready(false);
        assert_eq!(h.readiness(), Readiness::Draining);
    }

    #[test]
    fn routes_and_methods() {
        let (m, h) = (Metrics::new(4, 4).unwrap(), Health::new());
        let status = |method: Method, path| respond(&method, path, &m, &h).status();
        assert_eq!(status(Method::GET, "/metrics"), StatusCode::OK);
        assert_eq!(status(Method::GET, "/healthz"), StatusCode::OK);
        assert_eq!(
            status(Method::GET, "/readyz"),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(status(Method::GET, "/"), StatusCode::NOT_FOUND);
        assert_eq!(status(Method::GET, "/metrics/"), StatusCode::NOT_FOUND);
        assert_eq!(status(Method::POST, "/nope"), StatusCode::NOT_FOUND);
        assert_eq!(
            status(Method::POST, "/metrics"),
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert_eq!(
            status(Method::HEAD, "/healthz"),
            StatusCode::METHOD_NOT_ALLOWED
        );
    }
}
