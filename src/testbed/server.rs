//! The accept loop (HTTP/1.1 and h2 via hyper-util's auto builder, graceful stop) and the
//! routing of `/mcp` by HTTP method, including the legacy GET stream and DELETE.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use hyper::body::Incoming as IncomingBody;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio::time::{Duration, sleep, timeout};

use super::Testbed;
use super::body::{self, Body};
use super::post::{self, Reject, header_mentions};
use super::reply;
use super::rpc::{self, Era};
use super::sse;

/// The MCP endpoint path.
pub const MCP_PATH: &str = "/mcp";
/// How long a graceful stop waits for in-flight responses (a long `sse_drip` or `slow`)
/// before the remaining connections are dropped.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Back-off after a failed accept (e.g. out of file descriptors), so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

pub(crate) async fn serve(
    tb: Arc<Testbed>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let builder = auto::Builder::new(TokioExecutor::new());
    let graceful = GracefulShutdown::new();
    let mut conns = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    // SSE events are small and must leave at once.
                    let _ = stream.set_nodelay(true);
                    let tb = Arc::clone(&tb);
                    let service = service_fn(move |req| {
                        let tb = Arc::clone(&tb);
                        async move { Ok::<_, Infallible>(route(tb, req).await) }
                    });
                    let conn = builder.serve_connection(TokioIo::new(stream), service).into_owned();
                    let conn = graceful.watch(conn);
                    conns.spawn(async move {
                        if let Err(e) = conn.await {
                            tracing::debug!(%peer, error = %e, "testbed: connection ended with an error");
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "testbed: accept failed");
                    sleep(ACCEPT_BACKOFF).await;
                }
            },
            // Reap finished connections so the set does not grow with every client.
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    // End open GET streams and scripted streams first: graceful shutdown waits for every
    // in-flight response, and a standalone stream never finishes on its own.
    tb.begin_shutdown();
    if timeout(SHUTDOWN_GRACE, graceful.shutdown()).await.is_err() {
        tracing::warn!("testbed: graceful stop timed out; dropping the remaining connections");
    }
    conns.shutdown().await;
    Ok(())
}

async fn route(tb: Arc<Testbed>, req: Request<IncomingBody>) -> Response<Body> {
    if req.uri().path() != MCP_PATH {
        return reply::with(
            StatusCode::NOT_FOUND,
            Some(HeaderValue::from_static("text/plain")),
            body::full("not found: the MCP endpoint is /mcp\n"),
        );
    }
    match *req.method() {
        Method::POST => post::handle(&tb, req).await,
        Method::GET => get(&tb, &req),
        Method::DELETE => delete(&tb, &req),
        _ => reply::method_not_allowed("GET, POST, DELETE"),
    }
}

/// Admits a GET or DELETE only in the legacy era: 2026-07-28 removed both, and a
/// server "SHOULD answer with 405" (2026-07-28 transports §Backward Compatibility).
fn legacy_only_method(req: &Request<IncomingBody>) -> Result<(), Reject> {
    let version = req
        .headers()
        .get(post::VERSION_HEADER)
        .and_then(|v| v.to_str().ok());
    match Era::from_header(version) {
        Ok(Era::Legacy) => Ok(()),
        Ok(Era::Modern) => Err(Reject::MethodNotAllowed),
        Err(requested) => Err(Reject::UnsupportedVersion(requested)),
    }
}

/// GET `/mcp`: the standalone SSE stream, or with `Last-Event-ID` the resumption of a POST
/// stream (2025-11-25 transports §Listening for Messages, §Resumability and Redelivery).
fn get(tb: &Testbed, req: &Request<IncomingBody>) -> Response<Body> {
    if let Err(reject) = legacy_only_method(req) {
        return reject.response();
    }
    if !header_mentions(req.headers(), header::ACCEPT, "text/event-stream") {
        return reply::rejection(
            StatusCode::NOT_ACCEPTABLE,
            rpc::SDK_BAD_REQUEST,
            "Not Acceptable: Client must accept text/event-stream",
        );
    }
    let session = match post::require_session(tb, req.headers()) {
        Ok(session) => session,
        Err(reject) => return reject.response(),
    };
    let last_event_id = req
        .headers()
        .get("last-event-id")
        .and_then(|v| v.to_str().ok());
    match last_event_id {
        Some(last) => match session.replay_after(last) {
            // The stashed final response, then the stream ends: the client has what it
            // waited for.
            Some(frame) => sse::response(body::full(frame)),
            None => reply::rejection(
                StatusCode::BAD_REQUEST,
                rpc::SDK_BAD_REQUEST,
                "Bad Request: unknown Last-Event-ID",
            ),
        },
        None => sse::response(sse::standalone(session.ended(), tb.shutdown_signal())),
    }
}

/// DELETE `/mcp`: the client ends its session (2025-11-25 transports §Session Management).
fn delete(tb: &Testbed, req: &Request<IncomingBody>) -> Response<Body> {
    if let Err(reject) = legacy_only_method(req) {
        return reject.response();
    }
    match post::require_session(tb, req.headers()) {
        Ok(session) => {
            tb.sessions.remove(session.id());
            tracing::debug!(session = %session.id(), "testbed: session deleted");
            reply::status_only(StatusCode::OK)
        }
        Err(reject) => reject.response(),
    }
}
