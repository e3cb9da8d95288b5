//! A scripted upstream: records every request it receives (head and whole body) and answers
//! with whatever the test's handler builds, typically a body sent in given pieces with a flush
//! between them, or a body the test feeds through a channel. HTTP/1.1 and h2 (auto).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Response, StatusCode, Uri, Version};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::time::sleep;

/// The body type of scripted responses. An `Err` item breaks the body (hyper resets it).
pub type ScriptBody = UnsyncBoxBody<Bytes, std::io::Error>;

/// One request as the upstream received it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: Method,
    pub uri: Uri,
    pub version: Version,
    pub headers: HeaderMap,
    pub body: Bytes,
}

pub type Handler = Arc<dyn Fn(&Recorded) -> Response<ScriptBody> + Send + Sync>;

/// A running scripted upstream. Dropping it stops accepting.
pub struct ScriptedUpstream {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Recorded>>>,
    _stop: oneshot::Sender<()>,
}

impl ScriptedUpstream {
    pub async fn spawn(
        handler: impl Fn(&Recorded) -> Response<ScriptBody> + Send + Sync + 'static,
    ) -> ScriptedUpstream {
        let handler: Handler = Arc::new(handler);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (stop, mut stopped) = oneshot::channel::<()>();
        let recorded = seen.clone();
        tokio::spawn(async move {
            let builder = auto::Builder::new(TokioExecutor::new());
            loop {
                let (stream, _) = tokio::select! {
                    _ = &mut stopped => return,
                    accepted = listener.accept() => match accepted {
                        Ok(conn) => conn,
                        Err(_) => continue,
                    },
                };
                let _ = stream.set_nodelay(true);
                let (handler, recorded) = (handler.clone(), recorded.clone());
                let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let (handler, recorded) = (handler.clone(), recorded.clone());
                    async move {
                        let (parts, body) = req.into_parts();
                        let body = match body.collect().await {
                            Ok(c) => c.to_bytes(),
                            Err(_) => Bytes::new(),
                        };
                        let req = Recorded {
                            method: parts.method,
                            uri: parts.uri,
                            version: parts.version,
                            headers: parts.headers,
                            body,
                        };
                        let resp = handler(&req);
                        recorded.lock().unwrap().push(req);
                        Ok::<_, Infallible>(resp)
                    }
                });
                let conn = builder
                    .serve_connection(TokioIo::new(stream), service)
                    .into_owned();
                tokio::spawn(async move {
                    let _ = conn.await;
                });
            }
        });
        ScriptedUpstream {
            addr,
            seen,
            _stop: stop,
        }
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<Recorded> {
        self.seen.lock().unwrap().clone()
    }

    /// The latest request received.
    pub fn last(&self) -> Recorded {
        self.requests()
            .pop()
            .expect("the upstream received no request")
    }
}

/// A response with `status`, `headers` and `body`.
pub fn respond(status: u16, headers: &[(&str, &str)], body: ScriptBody) -> Response<ScriptBody> {
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::from_u16(status).unwrap();
    for (k, v) in headers {
        resp.headers_mut().append(
            HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    resp
}

/// A whole body in one frame.
pub fn full(bytes: impl Into<Bytes>) -> ScriptBody {
    http_body_util::Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// `bytes` split at `cuts` (offsets, any order, out-of-range ones ignored), each piece its own
/// frame, with `gap` between frames so each one is written and flushed on its own.
pub fn pieces(bytes: Bytes, cuts: &[usize], gap: Duration) -> ScriptBody {
    let mut at: Vec<usize> = cuts
        .iter()
        .copied()
        .filter(|&c| c > 0 && c < bytes.len())
        .collect();
    at.sort_unstable();
    at.dedup();
    let mut parts = Vec::with_capacity(at.len() + 1);
    let mut from = 0;
    for cut in at.into_iter().chain([bytes.len()]) {
        parts.push(bytes.slice(from..cut));
        from = cut;
    }
    let (tx, body) = channel();
    tokio::spawn(async move {
        for (i, part) in parts.into_iter().enumerate() {
            if i > 0 && !gap.is_zero() {
                sleep(gap).await;
            }
            if tx.send(Ok(part)).await.is_err() {
                return;
            }
        }
    });
    body
}

/// A body the test feeds: each `Ok` is one frame, an `Err` breaks the body, dropping the
/// sender ends it cleanly.
pub fn channel() -> (mpsc::Sender<Result<Bytes, std::io::Error>>, ScriptBody) {
    let (tx, rx) = mpsc::channel(1);
    (tx, ChannelBody { rx }.boxed_unsync())
}

struct ChannelBody {
    rx: mpsc::Receiver<Result<Bytes, std::io::Error>>,
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        self.rx
            .poll_recv(cx)
            .map(|item| item.map(|r| r.map(Frame::data)))
    }
}
