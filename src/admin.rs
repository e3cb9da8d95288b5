//! The admin listener: `GET /metrics`, `/healthz` and `/readyz`, on its own socket (loopback
//! by default) so scrapes and probes never queue behind agent traffic; and, while the
//! inspector is on, its page (`/`) and the recent calls (`/calls`, `calls.rs`;
//! `/calls/stream`, `stream.rs`), behind a bearer token off loopback (`access.rs`).

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;

use crate::metrics::Metrics;
use crate::observe::recent::Inspector;

mod access;
mod calls;
pub mod page;
mod stream;

pub use stream::STREAM_BACKLOG;

/// A response body: whole, or an event stream.
pub type AdminBody = UnsyncBoxBody<Bytes, Infallible>;

/// What the admin endpoints serve.
#[derive(Clone, Debug)]
pub struct AdminState {
    pub metrics: Arc<Metrics>,
    pub health: Arc<Health>,
    /// The recent calls inspector; its endpoints answer only while it is enabled.
    pub inspector: Option<Arc<Inspector>>,
}

/// One admin connection's part in an event stream: what ends it.
#[derive(Clone, Debug)]
struct ConnControl {
    /// Closes the connection: its stream's reader fell behind.
    kill: Arc<Notify>,
    /// Set when the listener shuts down: streams end so connections can drain.
    stopping: watch::Receiver<bool>,
}

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
    /// The inspector's page.
    Page,
    Calls,
    CallsStream,
    CallsInflight,
    CallsCounts,
}

/// Most bytes hyper buffers for an admin connection (request heads, and a response not yet
/// written to the socket): an event stream's reader that stops reading is found to fall
/// behind after this much, not after hyper's default of some 400 KiB.
const ADMIN_MAX_BUF: usize = 64 << 10;

/// The admin sockets' kernel send buffer (Linux doubles it). Left to autotuning, a reader
/// that stops reading while its window stays open lets the kernel queue up to
/// `net.ipv4.tcp_wmem`'s maximum (4 MiB by default) before strata sees it fall behind.
const ADMIN_SEND_BUFFER: usize = 64 << 10;

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
    let state = AdminState {
        metrics,
        health,
        inspector: None,
    };
    serve_admin_with(listener, state, shutdown).await
}

/// [`serve_admin`] with the inspector's endpoints. Off loopback (the listener's address),
/// they need the inspector's token.
pub async fn serve_admin_with(
    listener: TcpListener,
    state: AdminState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let loopback = listener.local_addr()?.ip().is_loopback();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(ADMIN_HEADER_READ_TIMEOUT)
        .max_buf_size(ADMIN_MAX_BUF);
    let graceful = GracefulShutdown::new();
    let (stopping_tx, stopping) = watch::channel(false);
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
        // Set on each socket: one accepted before this loop first ran (already in the
        // listen queue) was made with the listener's sizes of then.
        if let Err(error) = socket2::SockRef::from(&stream).set_send_buffer_size(ADMIN_SEND_BUFFER)
        {
            tracing::debug!(%peer, %error, "admin connection: cannot set the send buffer size");
        }
        let control = ConnControl {
            kill: Arc::new(Notify::new()),
            stopping: stopping.clone(),
        };
        let (state, kill) = (state.clone(), control.kill.clone());
        let service = service_fn(move |req: Request<hyper::body::Incoming>| {
            let response = respond(&req, &state, loopback, &control);
            async move { Ok::<_, Infallible>(response) }
        });
        let conn = builder.serve_connection(TokioIo::new(stream), service);
        let conn = graceful.watch(conn.into_owned());
        connections.spawn(async move {
            tokio::select! {
                result = conn => if let Err(error) = result {
                    tracing::debug!(%peer, %error, "admin connection ended with an error");
                },
                () = kill.notified() => {
                    tracing::info!(%peer, "admin connection closed: its call stream fell behind");
                }
            }
        });
    }

    drop(listener);
    // Event streams end, so their connections can finish.
    let _ = stopping_tx.send(true);
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

/// Answers one admin request. Unknown paths are 404, and so are the inspector's while it is
/// off; known paths with a method other than GET are 405 (the resource exists, the method
/// does not); the inspector's without the token they need are 401.
fn respond<B>(
    req: &Request<B>,
    state: &AdminState,
    loopback: bool,
    control: &ConnControl,
) -> Response<AdminBody> {
    let Some(route) = Route::from_path(req.uri().path()) else {
        return text(StatusCode::NOT_FOUND, "not found");
    };
    let inspector = state.inspector.as_ref().filter(|i| i.enabled());
    if route.is_inspector() && inspector.is_none() {
        return text(StatusCode::NOT_FOUND, "not found");
    }
    if req.method() != Method::GET {
        let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET"));
        return response;
    }
    let query = req.uri().query();
    match (route, inspector) {
        (Route::Metrics, _) => whole(Metrics::CONTENT_TYPE, state.metrics.render()),
        // Answered at all means alive: liveness is about the process, not its upstream.
        (Route::Healthz, _) => text(StatusCode::OK, "ok"),
        (Route::Readyz, _) => match state.health.readiness() {
            Readiness::Ready => text(StatusCode::OK, "ready"),
            Readiness::NotReady => text(StatusCode::SERVICE_UNAVAILABLE, "not ready"),
            Readiness::Draining => text(StatusCode::SERVICE_UNAVAILABLE, "draining"),
        },
        (_, Some(inspector)) if !access::allowed(req.headers(), inspector, loopback) => {
            access::unauthorized()
        }
        (Route::Page, Some(_)) => calls::page(),
        (Route::Calls, Some(inspector)) => calls::list(inspector, query),
        (Route::CallsInflight, Some(inspector)) => calls::inflight(inspector),
        (Route::CallsCounts, Some(inspector)) => calls::counts(inspector, &state.metrics),
        (Route::CallsStream, Some(inspector)) => stream::stream(inspector, query, control),
        // Inspector routes without an inspector answered 404 above.
        (_, None) => text(StatusCode::NOT_FOUND, "not found"),
    }
}

/// A whole body of `content_type`.
fn whole(content_type: &'static str, body: impl Into<Bytes>) -> Response<AdminBody> {
    let mut response = Response::new(Full::new(body.into()).boxed_unsync());
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn text(status: StatusCode, body: &'static str) -> Response<AdminBody> {
    let mut response = whole("text/plain; charset=utf-8", body);
    *response.status_mut() = status;
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
            "/" => Some(Route::Page),
            "/calls" => Some(Route::Calls),
            "/calls/stream" => Some(Route::CallsStream),
            "/calls/inflight" => Some(Route::CallsInflight),
            "/calls/counts" => Some(Route::CallsCounts),
            _ => None,
        }
    }

    /// Served only while the inspector is on.
    fn is_inspector(self) -> bool {
        !matches!(self, Route::Metrics | Route::Healthz | Route::Readyz)
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

    fn state(inspector: Option<Arc<Inspector>>) -> AdminState {
        AdminState {
            metrics: Metrics::new(4, 4).unwrap(),
            health: Arc::new(Health::new()),
            inspector,
        }
    }

    fn control() -> ConnControl {
        ConnControl {
            kill: Arc::new(Notify::new()),
            stopping: watch::channel(false).1,
        }
    }

    fn get(path: &str) -> Request<()> {
        Request::get(path).body(()).unwrap()
    }

    #[test]
    fn routes_and_methods() {
        let state = state(None);
        let status = |method: Method, path: &str| {
            let req = Request::builder()
                .method(method)
                .uri(path)
                .body(())
                .unwrap();
            respond(&req, &state, true, &control()).status()
        };
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
    #[test]
    fn the_inspector_routes_answer_only_while_it_is_on() {
        let mut config = crate::config::InspectorConfig::default();
        let inspector = Inspector::new(&config);
        let state = state(Some(inspector.clone()));
        let status = |path: &str, loopback| respond(&get(path), &state, loopback, &control());
        for path in [
            "/",
            "/calls",
            "/calls/inflight",
            "/calls/counts",
            "/calls/stream",
        ] {
            assert_eq!(status(path, true).status(), StatusCode::NOT_FOUND, "{path}");
        }
        config.enabled = true;
        inspector.configure(&config);
        for path in ["/", "/calls", "/calls/inflight", "/calls/counts"] {
            assert_eq!(status(path, true).status(), StatusCode::OK, "{path}");
            // Off loopback without a token: nobody may read.
            assert_eq!(
                status(path, false).status(),
                StatusCode::UNAUTHORIZED,
                "{path}"
            );
        }
        assert_eq!(
            status("/calls?limit=x", true).status(),
            StatusCode::BAD_REQUEST
        );
        let page = status("/", true);
        let csp = page.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap();
        assert!(csp.starts_with("default-src 'none'"), "{csp}");
        assert_eq!(status("/metrics", false).status(), StatusCode::OK);
    }

    #[test]
    fn a_token_is_required_when_set() {
        let mut config = crate::config::InspectorConfig {
            enabled: true,
            ..Default::default()
        };
        config.token = crate::config::BearerToken::from_text("t0ken");
        let state = state(Some(Inspector::new(&config)));
        let with = |auth: Option<&str>, loopback| {
            let mut req = get("/calls");
            if let Some(auth) = auth {
                let value = HeaderValue::from_str(auth).unwrap();
                req.headers_mut().insert(header::AUTHORIZATION, value);
            }
            respond(&req, &state, loopback, &control()).status()
        };
        for loopback in [true, false] {
            assert_eq!(with(None, loopback), StatusCode::UNAUTHORIZED);
            assert_eq!(
                with(Some("Bearer nope"), loopback),
                StatusCode::UNAUTHORIZED
            );
            assert_eq!(
                with(Some("Basic t0ken"), loopback),
                StatusCode::UNAUTHORIZED
            );
            assert_eq!(with(Some("Bearer t0ken"), loopback), StatusCode::OK);
            assert_eq!(with(Some("bearer  t0ken"), loopback), StatusCode::OK);
        }
    }
}
