//! The fast fixed-response upstream. It runs as its own process (`proxy --role upstream`), so it
//! never shares a runtime with the load generator, and it does as little as a server can: read
//! the request body, send bytes that were built once. Routes, by path (every proxy passes the
//! path through unchanged):
//!
//! - `/json`: a fixed tools/call result, `application/json`, with Content-Length;
//! - `/sse`: the same call answered as an SSE stream: two progress notifications and the
//!   result, three frames, chunked;
//! - `/big?bytes=N`: one tools/call result whose text is N bytes of `x` (64 KiB frames,
//!   Content-Length), so a proxy's classifier scans all of it;
//! - `/tick?n=N&ms=M`: SSE, N progress notifications M ms apart, each carrying the time it was
//!   sent (ns since the Unix epoch: one clock for both processes), then the result;
//! - `/hold`: SSE, one progress notification, then silence until the agent leaves;
//! - `/tools_list`: a `tools/list` result of [`TOOLS_LIST_BYTES`] (thousands of tools, each with
//!   a description and an input schema), `application/json`, with Content-Length;
//! - `/tools_list?changing=1`: the same list, each answer ending in a cursor of its own
//!   (`"nextCursor"` and a count), so that no two answers are equal;
//! - `/tools_list?changing=start`: the same list with a count of its own first in `result`
//!   (`"_meta"`), so that no two answers are equal past their first few dozen bytes;
//! - `/flaky`: 503 with `Retry-After: 0` the first time a call's `Idempotency-Key` arrives, the
//!   `/json` result when it arrives again (and for a call without a key): every keyed call
//!   succeeds only if the proxy re-sends it.
//!
//! With `--tls` (`proxy --role upstream --tls`) it serves the same over TLS with a self-signed
//! certificate for 127.0.0.1, HTTP/1.1 by ALPN, TLS 1.3 with one cipher suite and group
//! ([`crate::tls::SUITE`]), so every proxy's upstream connection does the same TLS work: the
//! paths part's `https://` upstream, and `bench/pgo.sh`'s training.

use std::collections::HashSet;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{Request, Response, header};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::io::Write as _;
use tokio::net::TcpSocket;
use tokio::time::Sleep;

pub(crate) const RESULT: &[u8] = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Found 3 matching files:\nsrc/proxy/mod.rs:42: let started = Instant::now();\nsrc/proxy/body.rs:118: pub struct UpstreamBody {\nsrc/calllog.rs:130: pub fn emit(&self) {"}],"structuredContent":{"matches":3,"truncated":false},"isError":false}}"#;

const PROGRESS_1: &[u8] = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1,\"total\":2}}\n\n";
const PROGRESS_2: &[u8] = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":2,\"total\":2}}\n\n";
const SSE_RESULT: &[u8] = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"done\"}],\"isError\":false}}\n\n";
const SSE_FRAMES: &[&[u8]] = &[PROGRESS_1, PROGRESS_2, SSE_RESULT];

const BIG_PREFIX: &[u8] =
    br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":""#;
const BIG_SUFFIX: &[u8] = br#""}],"isError":false}}"#;
const BIG_FRAME: usize = 64 * 1024;
static XS: [u8; BIG_FRAME] = [b'x'; BIG_FRAME];

/// The size of `/tools_list`'s answer, at least: 4 MiB, a large server's tool list.
pub(crate) const TOOLS_LIST_BYTES: usize = 4 << 20;

/// `/tools_list`'s answer, built on first use: tools until [`TOOLS_LIST_BYTES`] are passed.
fn tools_list() -> Bytes {
    static LIST: std::sync::OnceLock<Bytes> = std::sync::OnceLock::new();
    LIST.get_or_init(|| {
        let mut out = String::from(r#"{"jsonrpc":"2.0","id":1,"result":{"tools":["#);
        let mut n = 0u32;
        while out.len() < TOOLS_LIST_BYTES {
            if n > 0 {
                out.push(',');
            }
            out.push_str(&format!(
                r#"{{"name":"search_{n:05}","title":"Search {n}","description":"Searches the files of project {n} for a pattern and returns the matching lines, with their paths and line numbers.","inputSchema":{{"type":"object","properties":{{"query":{{"type":"string","description":"The pattern"}},"limit":{{"type":"integer","minimum":1,"maximum":1000}}}},"required":["query"]}},"annotations":{{"readOnlyHint":true,"idempotentHint":true}}}}"#
            ));
            n += 1;
        }
        out.push_str("]}}");
        Bytes::from(out)
    })
    .clone()
}

/// `/tools_list` with a cursor of its own at the end: the list without its closing `}}`,
/// then `,"nextCursor":"…"}}` with the count of answers made so far (fixed width).
fn changing_tools_list() -> Reply {
    static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let list = tools_list();
    let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let head = list.slice(..list.len() - 2);
    let tail = Bytes::from(format!(r#","nextCursor":"{n:020}"}}}}"#));
    Reply::Pair(Some(head), Some(tail))
}

/// `/tools_list` with a count of its own before the tools: `"_meta":{"answer":"…"}` first in
/// `result` (fixed width), the rest of the list after it.
fn tools_list_changing_at_start() -> Reply {
    static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    const START: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"#;
    let list = tools_list();
    let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let head = Bytes::from(format!(r#"{START}"_meta":{{"answer":"{n:020}"}},"#));
    Reply::Pair(Some(head), Some(list.slice(START.len()..)))
}

/// Serves until the process is killed; prints the bound address on stdout first.
pub(crate) fn run(tls: bool) -> anyhow::Result<()> {
    let acceptor = if tls { Some(tls_acceptor()?) } else { None };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let socket = TcpSocket::new_v4()?;
        socket.bind(([127, 0, 0, 1], 0).into())?;
        // A deep backlog: thousands of streams are opened through the proxies in bursts.
        let listener = socket.listen(8192)?;
        // The harness reads this line to learn where to send traffic.
        let mut out = std::io::stdout();
        writeln!(out, "{}", listener.local_addr()?)?;
        out.flush()?;
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(_) => {
                    // Out of descriptors: wait rather than spin.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let server = hyper::server::conn::http1::Builder::new();
                match acceptor {
                    None => {
                        let _ = server
                            .serve_connection(TokioIo::new(stream), service_fn(route))
                            .await;
                    }
                    Some(acceptor) => {
                        if let Ok(stream) = acceptor.accept(stream).await {
                            let _ = server
                                .serve_connection(TokioIo::new(stream), service_fn(route))
                                .await;
                        }
                    }
                }
            });
        }
    })
}

/// A self-signed certificate for 127.0.0.1, made at start (strata is told not to verify it).
fn tls_acceptor() -> anyhow::Result<tokio_rustls::TlsAcceptor> {
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let rcgen::CertifiedKey { cert, signing_key } =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()])?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(signing_key.serialize_der()));
    let mut config =
        rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(crate::tls::provider()))
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config)))
}

async fn route(req: Request<Incoming>) -> Result<Response<Reply>, Infallible> {
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or("").to_owned();
    let refuse = path == "/flaky" && first_attempt(&req);
    // An MCP server reads the whole request before it answers.
    let mut body = req.into_body();
    while let Some(Ok(_)) = body.frame().await {}
    if refuse {
        return Ok(unavailable());
    }
    let (content_type, reply) = match path.as_str() {
        "/sse" => ("text/event-stream", Reply::Frames(SSE_FRAMES)),
        "/big" => {
            let bytes = param(&query, "bytes").unwrap_or(200 << 20);
            ("application/json", Reply::big(bytes))
        }
        "/tick" => {
            let n = param(&query, "n").unwrap_or(10);
            let ms = param(&query, "ms").unwrap_or(100);
            (
                "text/event-stream",
                Reply::tick(n, Duration::from_millis(ms)),
            )
        }
        "/hold" => ("text/event-stream", Reply::Hold { sent: false }),
        "/tools_list" if query == "changing=start" => {
            ("application/json", tools_list_changing_at_start())
        }
        "/tools_list" if param(&query, "changing") == Some(1) => {
            ("application/json", changing_tools_list())
        }
        "/tools_list" => ("application/json", Reply::Fixed(Some(tools_list()))),
        _ => (
            "application/json",
            Reply::Fixed(Some(Bytes::from_static(RESULT))),
        ),
    };
    let mut response = Response::new(reply);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    Ok(response)
}

/// Whether this is the first time the request's `Idempotency-Key` arrives (it is remembered
/// until it arrives again, so the keys held are those of calls waiting for their retry).
fn first_attempt<B>(req: &Request<B>) -> bool {
    static WAITING: std::sync::LazyLock<Mutex<HashSet<Bytes>>> =
        std::sync::LazyLock::new(Mutex::default);
    let Some(key) = req.headers().get(crate::load::IDEMPOTENCY_KEY) else {
        return false;
    };
    let key = Bytes::copy_from_slice(key.as_bytes());
    let Ok(mut waiting) = WAITING.lock() else {
        return false;
    };
    if waiting.remove(&key) {
        return false;
    }
    waiting.insert(key);
    true
}

/// `/flaky`'s first answer: 503, to be re-sent at once.
fn unavailable() -> Response<Reply> {
    let mut response = Response::new(Reply::Fixed(Some(Bytes::from_static(b"busy\n"))));
    *response.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
    let headers = response.headers_mut();
    headers.insert(header::RETRY_AFTER, header::HeaderValue::from_static("0"));
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain"),
    );
    response
}

fn param(query: &str, name: &str) -> Option<u64> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .and_then(|(_, v)| v.parse().ok())
}

/// The response bodies, each made of bytes built once (the `tick` events excepted).
enum Reply {
    Fixed(Option<Bytes>),
    /// Two frames, one after the other.
    Pair(Option<Bytes>, Option<Bytes>),
    Frames(&'static [&'static [u8]]),
    Big {
        /// 0: prefix next; 1: text; 2: suffix; 3: done.
        stage: u8,
        left: u64,
        total: u64,
    },
    Tick {
        n: u64,
        sent: u64,
        period: Duration,
        next: Pin<Box<Sleep>>,
    },
    Hold {
        sent: bool,
    },
}

impl Reply {
    fn big(bytes: u64) -> Reply {
        let total = bytes + (BIG_PREFIX.len() + BIG_SUFFIX.len()) as u64;
        Reply::Big {
            stage: 0,
            left: bytes,
            total,
        }
    }

    fn tick(n: u64, period: Duration) -> Reply {
        Reply::Tick {
            n,
            sent: 0,
            period,
            next: Box::pin(tokio::time::sleep(period)),
        }
    }
}

fn data(bytes: Bytes) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
    Poll::Ready(Some(Ok(Frame::data(bytes))))
}

/// One progress notification carrying its send time, as an SSE event.
fn tick_event(seq: u64) -> Bytes {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    Bytes::from(format!(
        "event: message\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\
         \"params\":{{\"progressToken\":1,\"progress\":{seq},\"message\":\"sent_ns={now}\"}}}}\n\n"
    ))
}

impl Body for Reply {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Reply::Fixed(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Reply::Pair(first, second) => Poll::Ready(
                first
                    .take()
                    .or_else(|| second.take())
                    .map(|b| Ok(Frame::data(b))),
            ),
            Reply::Frames(left) => match left.split_first() {
                Some((first, rest)) => {
                    *left = rest;
                    data(Bytes::from_static(first))
                }
                None => Poll::Ready(None),
            },
            Reply::Big { stage, left, .. } => match *stage {
                0 => {
                    *stage = 1;
                    data(Bytes::from_static(BIG_PREFIX))
                }
                1 if *left > 0 => {
                    let n = (*left).min(BIG_FRAME as u64) as usize;
                    *left -= n as u64;
                    data(Bytes::from_static(&XS[..n]))
                }
                1 => {
                    *stage = 3;
                    data(Bytes::from_static(BIG_SUFFIX))
                }
                _ => Poll::Ready(None),
            },
            Reply::Tick {
                n,
                sent,
                period,
                next,
            } => {
                if *sent > *n {
                    return Poll::Ready(None);
                }
                if next.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                // A fixed schedule, so a late wake-up does not push every later event back.
                let deadline = next.deadline() + *period;
                next.as_mut().reset(deadline);
                *sent += 1;
                if *sent > *n {
                    return data(Bytes::from_static(SSE_RESULT));
                }
                data(tick_event(*sent))
            }
            Reply::Hold { sent } => {
                if *sent {
                    // Silence: the connection's own I/O wakes hyper when the agent leaves.
                    return Poll::Pending;
                }
                *sent = true;
                data(Bytes::from_static(PROGRESS_1))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Reply::Fixed(bytes) => bytes.is_none(),
            Reply::Pair(first, second) => first.is_none() && second.is_none(),
            Reply::Frames(left) => left.is_empty(),
            Reply::Big { stage, .. } => *stage == 3,
            _ => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Reply::Fixed(Some(bytes)) => SizeHint::with_exact(bytes.len() as u64),
            Reply::Fixed(None) => SizeHint::with_exact(0),
            Reply::Pair(first, second) => {
                let len = |b: &Option<Bytes>| b.as_ref().map_or(0, Bytes::len) as u64;
                SizeHint::with_exact(len(first) + len(second))
            }
            Reply::Big {
                stage: 0, total, ..
            } => SizeHint::with_exact(*total),
            _ => SizeHint::default(),
        }
    }
}
