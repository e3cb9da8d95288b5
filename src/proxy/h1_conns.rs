//! Connections to the upstream: HTTP/1.1 spoken by strata itself, over TCP (`http://`) or
//! TLS over it (`https://`), a cache of idle connections, each used by the call's own task.
//!
//! Why not hyper-util's pooled client here: its connections run in tasks of their own, so a
//! call crosses tasks for the request, for the response head and for every body chunk (the
//! body channel holds one chunk), and SSE events that arrive in one read go to the agent
//! in one write each (`bench/README.md`). Why not hyper's client connection driven by the
//! call: it still passes the request and the response through channels, and builds and
//! moves its messages by value, a large share of a call's instructions.
//! Here the call writes its request head and body in one `writev`, parses the response head
//! in place (`wire.rs`) and cuts the body's frames out of the read buffer as they arrive
//! (`framing.rs`): frames that arrived together go to the agent together, nothing is spawned
//! or sent across a channel. It takes requests whose body is known whole — the replay
//! buffer's, or none — which is every call while retries are on (the default); a streamed
//! body goes through hyper-util's client, in HTTP/1.1 too.
//!
//! Over TLS (rustls, the upstream client's settings: `pooled_client.rs`) no ALPN is offered,
//! so the server speaks HTTP/1.1, as to nginx's `proxy_pass https://`; rustls resumes sessions
//! for new connections. TCP connect and TLS handshake share `timeouts.connect`.
//!
//! Idle connections are not polled. One the server closed while idle is found at checkout
//! (polled once, it has ended) and dropped; one idle for the idle limit ([`POOL_IDLE_TIMEOUT`]
//! in service, below the servers' own keep-alive timeouts: see `pooled_client.rs`) is closed
//! unused — at checkout, check-in, or by a sweep every half limit, so a quiet sidecar does not keep
//! sockets the server has closed (CLOSE_WAIT). A request that a reused connection refused
//! unsent — it closed just then; hyper hands the request back — goes once more on a new
//! connection, as hyper-util's client does. At most [`MAX_IDLE`] connections wait; the oldest
//! go first.
//!
//! Measured (`bench/README.md`): at 16 and 64 agents fewer instructions and syscalls per call
//! (SSE 1.5x the calls/s). On a shared work-stealing runtime a single agent loses 10–20 % of
//! its calls/s (hyper's parts wake the very task polling them, and tokio wakes its idle worker
//! each time); each worker has a runtime of its own (`runtime/workers.rs`), so that cost is
//! not paid.

use crate::http::fields::HeadFields;
use std::collections::VecDeque;
use std::future::{Future, poll_fn};
use std::io::{self, IoSlice};
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::uri::{Authority, PathAndQuery};
use http::{Method, Response};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use rustls::pki_types::ServerName;
use thread_local::ThreadLocal;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

#[cfg(doc)]
use super::pooled_client::POOL_IDLE_TIMEOUT;
#[cfg(doc)]
use super::request_body::RequestBody;
use crate::http::forward::Hop;
use crate::http::io::MaybeTls;

mod framing;
pub(super) mod wire;

pub use framing::BodyError;
use framing::{Decoded, Decoder};
pub use wire::HeadError;

/// Idle connections kept at most (nginx's `keepalive` directive, per worker, has the same
/// role). Calls in flight hold theirs outside the cache and are not limited by it.
pub const MAX_IDLE: usize = 1024;

/// A request head's buffer is kept for the thread's next head up to this capacity.
const KEEP_HEAD: usize = 8 * 1024;

thread_local! {
    /// This thread's spare request-head buffer: each head is encoded into it and hands it
    /// back once written (the next call's head is encoded after that, on the same thread),
    /// so a call does not allocate and free a `Vec` for its head.
    static SPARE_HEAD: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// A buffer for a request head of `room` bytes: the thread's spare, emptied, or a new one.
fn head_buffer(room: usize) -> Vec<u8> {
    let mut head = SPARE_HEAD
        .try_with(std::cell::Cell::take)
        .unwrap_or_default();
    head.clear();
    head.reserve(room);
    head
}

/// Keeps a written head's buffer as the thread's spare (one grown past [`KEEP_HEAD`] is
/// freed).
fn keep_head(head: Vec<u8>) {
    if head.capacity() <= KEEP_HEAD {
        let _ = SPARE_HEAD.try_with(|spare| spare.set(head));
    }
}

/// A connection's first read buffer, and its smallest read (hyper's too).
const INIT_READ: usize = 8 * 1024;
/// Reads grow while they fill their room (a large body), up to this. 256 KiB gave a 200 MiB
/// answer 15–18 % less throughput (two harness runs, `--only big`, side by side); the buffer
/// is held only while reads fill it.
const MAX_READ: usize = 512 * 1024;

/// The most of a passed-over answer's body read while waiting to retry
/// ([`ResponseBody::drain`]): an error page's length. Past it the connection is closed rather
/// than read further.
const DRAIN_LIMIT: usize = 64 * 1024;

/// The idle HTTP/1.1 connections to one upstream.
pub struct H1Conns {
    host: Box<str>,
    port: u16,
    /// `https://`: the session's settings and the name the certificate must carry (SNI).
    tls: Option<(TlsConnector, ServerName<'static>)>,
    connect_timeout: Duration,
    idle_limit: Duration,
    /// One list per thread: a connection is registered with the runtime of the thread that
    /// made it (one per worker, `runtime/workers.rs`), and used from another it would wake that
    /// thread for every read.
    idle: ThreadLocal<Arc<IdleList>>,
}

/// One thread's idle connections, shared with the bodies of the responses on its connections,
/// which hand theirs back here. Each body holds this thread's list, not the `H1Conns`: the
/// reference count it adds to and takes from on every call is then on a line only its own
/// thread writes (an `Arc<H1Conns>` per body was a count both workers wrote on every call,
/// ~0.5 % of strata's CPU at 64 agents in its `lock incq` alone, `perf`).
struct IdleList {
    conns: Mutex<VecDeque<Box<Conn>>>,
    /// `H1Conns::idle_limit`.
    limit: Duration,
}

/// One connection and what was read from it, boxed once when it is made and handed around
/// by its box from then on.
struct Conn {
    io: MaybeTls<TlsStream<TcpStream>>,
    read: BytesMut,
    /// Room made for the next read: doubles while reads fill it, halves when they do not.
    next_read: usize,
    /// When it went idle (meaningful in the idle list only).
    since: Instant,
}

/// The body of a response on a connection of strata's: read from the connection as the agent
/// takes it. Ended whole on a connection that stays open, it hands the connection back to the
/// cache; dropped before that (the agent left, the body broke), it closes it.
pub struct ResponseBody {
    /// `None` once the body ended (or broke).
    conn: Option<Box<Conn>>,
    decoder: Decoder,
    keep_alive: bool,
    home: Arc<IdleList>,
}

/// Why no response head came back.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// No connection to the upstream: nothing was sent.
    #[error("upstream connect: {0}")]
    Connect(io::Error),
    /// The request could not be written, or the head read.
    #[error("upstream: {0}")]
    Io(#[from] io::Error),
    /// The connection closed before a response head.
    #[error("upstream closed the connection before a response head")]
    Closed,
    /// What came back was not an HTTP/1.1 response head.
    #[error("upstream: {0}")]
    Head(#[from] HeadError),
    /// From hyper-util's client (streamed bodies).
    #[error("upstream: {0}")]
    Pooled(#[from] hyper_util::client::legacy::Error),
}

impl SendError {
    /// Nothing reached the upstream: no connection could be made.
    pub fn is_connect(&self) -> bool {
        match self {
            SendError::Connect(_) => true,
            SendError::Io(_) | SendError::Closed | SendError::Head(_) => false,
            SendError::Pooled(err) => err.is_connect(),
        }
    }
}

// === impl H1Conns ===

impl H1Conns {
    /// The cache for `authority`, over TLS with `tls` (an `https://` upstream); its sweep
    /// runs on the current tokio runtime, if any, until the cache is dropped.
    pub fn new(
        authority: &Authority,
        tls: Option<Arc<rustls::ClientConfig>>,
        connect_timeout: Duration,
        idle_limit: Duration,
    ) -> Result<Arc<H1Conns>, rustls::pki_types::InvalidDnsNameError> {
        // `[::1]` in a URI is `::1` to a socket, and to a certificate's IP address.
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let tls = match tls {
            Some(config) => Some((
                TlsConnector::from(config),
                ServerName::try_from(host)?.to_owned(),
            )),
            None => None,
        };
        // The schemes' default ports (RFC 9110 §4.2.1, §4.2.2).
        let default_port = if tls.is_some() { 443 } else { 80 };
        let conns = Arc::new(H1Conns {
            host: host.into(),
            port: authority.port_u16().unwrap_or(default_port),
            tls,
            connect_timeout,
            idle_limit,
            idle: ThreadLocal::new(),
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let cache = Arc::downgrade(&conns);
            runtime.spawn(async move {
                let mut tick = tokio::time::interval(idle_limit / 2);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    let Some(conns) = cache.upgrade() else {
                        return;
                    };
                    conns.sweep();
                }
            });
        }
        Ok(conns)
    }

    /// Sends a request whose body is known whole ([`RequestBody::whole`]) on an idle
    /// connection, or a new one, and reads the response head.
    ///
    /// The head is written before the future is made, so the future holds the written head
    /// and the method, not the request's parts (an `async fn` would hold them twice, as its
    /// argument and as its local: ~450 bytes of every call's future). `now`: the attempt's
    /// start (the caller's clock reading).
    pub(crate) fn send(
        self: &Arc<Self>,
        parts: &http::request::Parts,
        fields: Option<&HeadFields>,
        body: Bytes,
        hop: &Hop<'_>,
        now: Instant,
    ) -> impl Future<Output = Result<(Response<ResponseBody>, Option<HeadFields>), SendError>>
    + Send
    + use<'_> {
        // The answer's fields are kept as read when the request's were (`http/fields.rs`).
        let as_read = fields.is_some();
        // To an origin server the target goes in origin form (RFC 9112 §3.2.1); the authority
        // travels in `Host` (`forward::set_host`).
        let target = parts.uri.path_and_query().map_or("/", PathAndQuery::as_str);
        // Room for the head at once (a grown one would be a `realloc` per call):
        // the agent's fields as long as they came, or ~64 bytes a field in a map; 128 for
        // the request line and what this hop adds.
        let room = fields.map_or(64 * parts.headers.len(), HeadFields::head_len);
        let mut head = head_buffer(128 + room);
        let fields = match fields {
            Some(fields) => wire::Fields::AsRead(fields),
            None => wire::Fields::Map(&parts.headers),
        };
        wire::encode_request(&mut head, &parts.method, target, fields, hop, body.len());
        let method = parts.method.clone();
        async move {
            // This thread's idle list: the connection comes from it, and goes back to it.
            let here = self.here();
            loop {
                let (mut conn, reused) = match here.checkout(now).await {
                    Some(conn) => (conn, true),
                    // Boxed: a TLS handshake's state would otherwise be room in every call's
                    // future, and a call makes a connection rarely.
                    None => (Box::pin(self.connect()).await?, false),
                };
                match conn.write_request(&head, &body).await {
                    Ok(()) => keep_head(std::mem::take(&mut head)),
                    // A reused connection the server closed just then: nothing of the request
                    // was taken (the server was done with it), so it goes on a new one, as
                    // hyper-util's client does with a request its connection refused unsent.
                    Err(_) if reused => continue,
                    Err(err) => return Err(SendError::Io(err)),
                }
                let head = conn.read_head(&method, as_read).await?;
                let mut body = ResponseBody {
                    conn: Some(conn),
                    decoder: head.framing.decoder(),
                    keep_alive: head.keep_alive,
                    home: here.clone(),
                };
                // No body (204, HEAD, `Content-Length: 0`): the connection serves the next
                // call now.
                if body.decoder.is_done() {
                    body.finish();
                }
                return Ok((head.response.map(|()| body), head.fields));
            }
        }
    }

    /// A new connection: TCP, and the TLS handshake over it for an `https://` upstream, both
    /// within `timeouts.connect`.
    async fn connect(&self) -> Result<Box<Conn>, SendError> {
        let io = match tokio::time::timeout(self.connect_timeout, self.dial()).await {
            Ok(Ok(io)) => io,
            Ok(Err(err)) => return Err(SendError::Connect(err)),
            Err(_elapsed) => {
                return Err(SendError::Connect(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "timeouts.connect elapsed",
                )));
            }
        };
        Ok(Box::new(Conn {
            io,
            read: BytesMut::new(),
            next_read: INIT_READ,
            since: Instant::now(),
        }))
    }

    async fn dial(&self) -> io::Result<MaybeTls<TlsStream<TcpStream>>> {
        let tcp = TcpStream::connect((&*self.host, self.port)).await?;
        // A request head and a small body go out at once, not after a delayed ACK.
        let _ = tcp.set_nodelay(true);
        let Some((connector, name)) = &self.tls else {
            return Ok(MaybeTls::Plain(tcp));
        };
        let tls = connector.connect(name.clone(), tcp).await?;
        Ok(MaybeTls::Tls(Box::new(tls)))
    }

    /// Keeps a connection whose response ended whole, for the next call (this thread's list).
    #[cfg(test)]
    fn checkin(&self, conn: Box<Conn>) {
        self.here().checkin(conn);
    }

    /// Closes the connections idle for the limit or longer, on every thread.
    fn sweep(&self) {
        let now = Instant::now();
        for list in self.idle.iter() {
            let mut conns = list.lock();
            let expired = list.expired(&mut conns, now);
            drop(conns);
            drop(expired);
        }
    }

    /// Idle connections now, on every thread (for tests).
    pub fn idle_count(&self) -> usize {
        self.idle.iter().map(|list| list.lock().len()).sum()
    }

    /// This thread's list.
    fn here(&self) -> &Arc<IdleList> {
        self.idle.get_or(|| {
            Arc::new(IdleList {
                conns: Mutex::default(),
                limit: self.idle_limit,
            })
        })
    }
}

// === impl IdleList ===

impl IdleList {
    /// The most recently used idle connection still open, if any. `now`: the attempt's
    /// start, for the idle limit.
    async fn checkout(&self, now: Instant) -> Option<Box<Conn>> {
        loop {
            let mut idle = {
                let mut list = self.lock();
                let expired = self.expired(&mut list, now);
                let idle = list.pop_back();
                drop(list);
                // Closed outside the lock.
                drop(expired);
                idle?
            };
            if poll_fn(|cx| Poll::Ready(idle.is_open(cx))).await {
                return Some(idle);
            }
        }
    }

    /// Keeps a connection whose response ended whole, for the next call.
    fn checkin(&self, mut conn: Box<Conn>) {
        let now = Instant::now();
        conn.since = now;
        let mut list = self.lock();
        let mut dropped = self.expired(&mut list, now);
        if list.len() >= MAX_IDLE {
            dropped.extend(list.pop_front());
        }
        list.push_back(conn);
        drop(list);
        // Closed outside the lock.
        drop(dropped);
    }

    /// Takes the connections idle for the limit or longer (the oldest are at the front).
    fn expired(&self, list: &mut VecDeque<Box<Conn>>, now: Instant) -> VecDeque<Box<Conn>> {
        let fresh = list
            .iter()
            .position(|i| now.duration_since(i.since) < self.limit)
            .unwrap_or(list.len());
        list.drain(..fresh).collect()
    }

    /// A poisoned lock only means a thread panicked while holding it; the list is still a
    /// list.
    fn lock(&self) -> MutexGuard<'_, VecDeque<Box<Conn>>> {
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }
}

// === impl Conn ===

impl Conn {
    /// Still open and quiet: a connection the server closed while idle has its end (or, from
    /// a confused server, stray bytes) waiting to be read. Over TLS the read takes what is not
    /// the application's (a session ticket) and finds nothing more on an open connection.
    fn is_open(&mut self, cx: &mut Context<'_>) -> bool {
        let mut probe = [0u8; 1];
        let mut probe = ReadBuf::new(&mut probe);
        Pin::new(&mut self.io)
            .poll_read(cx, &mut probe)
            .is_pending()
    }

    /// The head and the body in one `writev` (more only when the socket takes part of it).
    async fn write_request(&mut self, head: &[u8], body: &[u8]) -> io::Result<()> {
        let mut slices = [IoSlice::new(head), IoSlice::new(body)];
        let mut left: &mut [IoSlice<'_>] = &mut slices;
        if body.is_empty() {
            left = &mut left[..1];
        }
        while !left.is_empty() {
            let n = self.io.write_vectored(left).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            IoSlice::advance_slices(&mut left, n);
        }
        // TLS records a write left in the session (a socket that took part of them); plain
        // TCP has nothing to flush.
        self.io.flush().await
    }

    /// Reads until a final response head is whole (interim 1xx ones are skipped).
    async fn read_head(&mut self, method: &Method, as_read: bool) -> Result<wire::Head, SendError> {
        loop {
            if !self.read.is_empty()
                && let Some(head) = wire::parse_response(&mut self.read, method, as_read)?
            {
                return Ok(head);
            }
            if poll_fn(|cx| self.poll_fill(cx)).await? == 0 {
                return Err(SendError::Closed);
            }
        }
    }

    /// One read into the buffer; 0 at the connection's end.
    ///
    /// Through `AsyncRead` (tokio's `read_buf`) rather than `try_read_buf`: a read that does
    /// not fill its room tells tokio the socket is drained, so the next wait goes straight to
    /// the reactor instead of costing a `recvfrom` that finds nothing.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.read.capacity() - self.read.len() < self.next_read {
            self.read.reserve(self.next_read);
        }
        let room = self.read.capacity() - self.read.len();
        let n = ready!(pin!(self.io.read_buf(&mut self.read)).poll(cx))?;
        if n >= room {
            self.next_read = (self.next_read * 2).min(MAX_READ);
        } else if n < self.next_read / 4 {
            self.next_read = (self.next_read / 2).max(INIT_READ);
        }
        Poll::Ready(Ok(n))
    }
}

// === impl ResponseBody ===

impl ResponseBody {
    /// The body ended whole: a connection that stays open, with nothing more in its buffer,
    /// goes back to the cache.
    fn finish(&mut self) {
        if let Some(conn) = self.conn.take()
            && self.keep_alive
            && conn.read.is_empty()
        {
            self.home.checkin(conn);
        }
    }

    /// A response the retry policy passes over (a 503, say): a body that is already whole in
    /// the read buffer — a short error page arrives with its head — is read past, and the
    /// connection goes back to the cache for the next attempt, as it would after a body the
    /// agent took. A body still arriving is not waited for here (a retry without a wait goes
    /// out at once; [`Self::drain`] reads it during a wait): dropped, it closes the
    /// connection, and the retry goes out on another.
    pub fn discard(mut self) {
        while let Some(conn) = self.conn.as_mut() {
            match self.decoder.decode(&mut conn.read) {
                Ok(Decoded::End) => return self.finish(),
                Ok(Decoded::Data(_) | Decoded::Trailers(_)) if self.decoder.is_done() => {
                    return self.finish();
                }
                Ok(Decoded::Data(_) | Decoded::Trailers(_)) => {}
                Ok(Decoded::More) | Err(_) => return,
            }
        }
    }

    /// [`Self::discard`] given the wait before a retry: a body still arriving is read to its
    /// end — at most [`DRAIN_LIMIT`] bytes of it — and the connection goes back to the cache.
    /// Cut short (the caller's deadline passes first, the upstream errs, or the body is
    /// longer), the body is dropped and the connection closes.
    pub async fn drain(mut self) {
        let mut read = 0;
        while let Some(frame) = self.frame().await {
            let Ok(frame) = frame else { return };
            read += frame.data_ref().map_or(0, Bytes::len);
            if read > DRAIN_LIMIT {
                return;
            }
        }
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        loop {
            let Some(conn) = this.conn.as_mut() else {
                return Poll::Ready(None);
            };
            let decoded = match this.decoder.decode(&mut conn.read) {
                Ok(Decoded::More) => match ready!(conn.poll_fill(cx)) {
                    Ok(0) => this.decoder.at_eof(),
                    Ok(_) => continue,
                    Err(err) => Err(BodyError::Io(err)),
                },
                decoded => decoded,
            };
            let frame = match decoded {
                Ok(Decoded::Data(data)) => Frame::data(data),
                Ok(Decoded::Trailers(trailers)) => Frame::trailers(trailers),
                Ok(Decoded::End) => {
                    this.finish();
                    return Poll::Ready(None);
                }
                Ok(Decoded::More) => continue,
                Err(err) => {
                    this.conn = None;
                    return Poll::Ready(Some(Err(err)));
                }
            };
            // hyper stops polling a body whose end it was told of (`is_end_stream`): the
            // connection goes back now, not at a final poll that never comes.
            if this.decoder.is_done() {
                this.finish();
            }
            return Poll::Ready(Some(Ok(frame)));
        }
    }

    fn is_end_stream(&self) -> bool {
        self.decoder.is_done()
    }

    fn size_hint(&self) -> SizeHint {
        match self.decoder.remaining() {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::new(),
        }
    }
}

#[cfg(test)]
mod tests;

/// What [`read_response`] found.
#[doc(hidden)]
#[derive(Debug, PartialEq, Eq)]
pub struct ReadResponse {
    pub status: u16,
    pub body: Vec<u8>,
    /// Trailer fields seen.
    pub trailers: usize,
}

/// Reads `wire` as the connection does — a response head to a request with `method`, then
/// its body to its end — fed in pieces of `step` bytes, with the connection closing after
/// the last. `Err` names what was wrong. For the fuzz target (`fuzz/fuzz_targets/upstream_h1.rs`),
/// which checks that any bytes, at any cuts, end in an answer or an error, never a panic or
/// a loop, and that the cuts do not change the answer. An even `step` keeps the fields as
/// read, an odd one puts them in a map (`wire::parse_response`): the two must agree too.
#[doc(hidden)]
pub fn read_response(wire: &[u8], step: usize, method: &Method) -> Result<ReadResponse, String> {
    let step = step.max(1);
    let as_read = step.is_multiple_of(2);
    let mut pieces = wire.chunks(step);
    let mut buf = BytesMut::new();
    let head = loop {
        if let Some(head) =
            wire::parse_response(&mut buf, method, as_read).map_err(|e| e.to_string())?
        {
            break head;
        }
        match pieces.next() {
            Some(piece) => buf.extend_from_slice(piece),
            None => return Err(SendError::Closed.to_string()),
        }
    };
    let mut decoder = head.framing.decoder();
    let mut body = Vec::new();
    let mut trailers = 0;
    loop {
        let decoded = match decoder.decode(&mut buf).map_err(|e| e.to_string())? {
            Decoded::More => match pieces.next() {
                Some(piece) => {
                    buf.extend_from_slice(piece);
                    continue;
                }
                None => decoder.at_eof().map_err(|e| e.to_string())?,
            },
            decoded => decoded,
        };
        match decoded {
            Decoded::Data(data) => body.extend_from_slice(&data),
            Decoded::Trailers(fields) => trailers = fields.len(),
            Decoded::End | Decoded::More => {}
        }
        if decoder.is_done() {
            return Ok(ReadResponse {
                status: head.response.status().as_u16(),
                body,
                trailers,
            });
        }
    }
}
