//! strata's own agent-facing HTTP/1.1 connection, for plain-TCP agents.
//!
//! Why not hyper's server connection for these: it costs a large share of a proxied call's
//! instructions (measured in `bench/README.md`) — its dispatcher's state machine, a request head
//! copied into a message and moved by value, a response head encoded from a header map it
//! drains, the body polled through a channel-shaped `Incoming`. Here one task reads the
//! head into its buffer, parses it in place (`request.rs`), reads a body that fits the replay
//! buffer whole, serves the request with the proxy, and writes the answer: its head and
//! every frame that arrived together in one `write`, a large frame from its own buffer.
//!
//! It serves what MCP agents send (`request.rs` lists it). Anything else — a chunked request
//! body, `Expect: 100-continue`, a head past the limits, bytes that are not HTTP — is handed
//! to hyper before a byte of it is consumed ([`Rewound`]), and hyper serves the rest of the
//! connection as it served every connection before: the same answers, limits and metrics.
//!
//! Kept from hyper's server, so the agent sees no difference (hyper 1.x `proto/h1`):
//! - each request head must arrive within `timeouts.header_read`, the first from the accept,
//!   later ones from the end of the previous exchange (an idle keep-alive connection closes);
//! - the agent closing its side while its request is served ends the exchange (the proxy's
//!   future is dropped: the call gets its outcome from its guard);
//! - the response head as hyper writes it (`response.rs`), the body framed the same way;
//!   a body that fails, or ends short of its length, closes the connection unterminated;
//! - once strata is shutting down, an idle connection closes and a busy one closes after its
//!   exchange (`connection: close`).

use std::future::{Future, poll_fn};
use std::io::{self, IoSlice};
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body::Body;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;

use super::{
    AgentBody, AnswerFields, CurrentProxy, Deadline, FromAgent, HeadTimer, Peer, ProxyCache,
    RepeatedFields, Timer,
};

mod read_request;
pub(super) mod request;
mod response;
mod rewind;

#[doc(hidden)]
pub use read_request::{ReadRequest, read_request};
pub(crate) use request::HeadLimits;
use request::{Head, Parsed};
pub(super) use response::EncodeError;
use response::{BodySize, Framing};
pub(crate) use rewind::Rewound;

/// The read buffer's first size, and the least room a read is given (hyper's too).
const INIT_READ: usize = 8 * 1024;
/// Smaller data frames are copied into the write buffer, so frames that arrived together
/// leave in one `write`; a larger one is written from its own buffer.
const COPY_BELOW: usize = 16 * 1024;
/// The write buffer goes out once it holds this much, whether or not more is ready.
const FLUSH_AT: usize = 64 * 1024;
/// The most room reserved at once for a body still to arrive.
const READ_AHEAD_ROOM: usize = 64 * 1024;
/// A write buffer grown past this (a burst of frames) is not kept between exchanges.
const KEEP_OUT: usize = 16 * 1024;

/// The connection's settings (`timeouts.header_read`, `limits.*`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Settings {
    pub header_read: Duration,
    pub limits: HeadLimits,
}

/// How a connection ended here.
#[derive(Debug)]
pub(crate) enum Served {
    /// Closed: by the agent between exchanges, after `Connection: close`, at shutdown, or
    /// idle past `timeouts.header_read` after a first exchange.
    Closed,
    /// No first request head within `timeouts.header_read`.
    HeaderTimeout,
    /// The agent's side broke or closed mid-exchange.
    AgentLeft(io::Error),
    /// The answer could not be written as hyper would write it, or its body failed or ended
    /// short of its length: the connection was closed.
    AnswerBroken(&'static str),
    /// hyper serves the rest of the connection.
    HandOver(Rewound),
}

/// Why an exchange stopped the connection (a [`Served`], or a hand-over still to make).
enum Stop {
    HandOver,
    End(Served),
}

impl From<Served> for Stop {
    fn from(served: Served) -> Self {
        Stop::End(served)
    }
}

/// One agent connection: the socket, what was read and not yet consumed, what is to write.
struct Conn {
    tcp: TcpStream,
    read: BytesMut,
    out: Vec<u8>,
}

/// The agent at the connection's other end, as each exchange is lent it: its address, and
/// the MCP fields its last call carried (`repeated_fields.rs`).
struct Agent<'a> {
    peer: &'a Peer,
    repeated: RepeatedFields,
}

/// The connection's timers, lent to an exchange: one for the next head, one for the
/// upstream's answer to it. Each lives as long as the connection and is set for each
/// exchange, not made anew (`serve`, `head_timer::Deadline`).
struct Timers<'a> {
    header_read: Deadline<'a>,
    response_head: Pin<&'a mut Timer>,
}

/// strata's shutdown, as a connection waits for it (`serve`).
struct Shutdown<'a> {
    /// Ends (its sender dropped) when strata shuts down.
    stopping: &'a watch::Receiver<()>,
    /// `changed()` of a receiver of its own, kept for the connection's life.
    wait: Pin<&'a mut (dyn Future<Output = Result<(), watch::error::RecvError>> + Send)>,
    /// `wait` was polled: this task is on the signal's list, or the signal came.
    registered: bool,
}

impl Shutdown<'_> {
    /// True once strata is shutting down.
    fn begun(&self) -> bool {
        self.stopping.has_changed().is_err()
    }

    /// Ready once strata is shutting down. The first poll registers this task with the
    /// signal (the connection is served by one task for its life, so its waker stays
    /// valid); later ones read the signal's state alone.
    fn poll_begun(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if !self.registered {
            self.registered = true;
            if self.wait.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
            return Poll::Pending;
        }
        // Shutdown closes the signal; nothing is ever sent on it (`listen/accept.rs`).
        if self.begun() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// What gathering the answer's frames came to.
enum Gathered {
    /// Write what is buffered, and this large frame after it (with its chunk's end).
    Flush(Option<(Bytes, &'static [u8])>),
    /// The body ended (or its length was all sent).
    End,
    /// The body failed.
    Failed,
    /// The agent closed its side while the body was quiet.
    Gone(Served),
}

/// Serves `tcp` until it closes or is handed to hyper. `first_deadline` bounds the first
/// head; `started` is set once a request has been read; `stopping` ends (its sender dropped)
/// when strata shuts down.
pub(crate) async fn serve(
    tcp: TcpStream,
    proxy: &CurrentProxy,
    peer: &Peer,
    settings: Settings,
    first_deadline: Instant,
    started: &AtomicBool,
    stopping: &mut watch::Receiver<()>,
) -> Served {
    let mut conn = Conn {
        tcp,
        read: BytesMut::new(),
        out: Vec::new(),
    };
    // One timer for the connection's life, set for each head rather than made anew: it
    // stays registered while the exchange runs, so the next one is never the earliest timer
    // of the runtime. A timer that is — a new one, each
    // exchange — makes tokio wake its own driver (an `eventfd` write, and one more
    // `epoll_wait`) on every call (strace, `bench/README.md`). Nor is it reset per head: the
    // next head's deadline is later, and the timer moves on to it when it goes off early
    // (`head_timer::Deadline`).
    let mut header_read = Box::pin(Timer::new(first_deadline));
    let mut head_deadline = first_deadline;
    // The response-head timeout's, lent to each call (`head_timer.rs`); registered at the
    // first call's reset.
    let mut response_head = Box::pin(Timer::new(first_deadline));
    let mut cache = proxy.cache();
    let mut agent = Agent {
        peer,
        repeated: RepeatedFields::default(),
    };
    // Shutdown is waited for once for the connection's life, not once per idle read: a wait
    // joins the signal's list of waiters under its lock and leaves it under the lock again
    // (four atomic operations a call). Registered at the first idle read, it
    // wakes this task when strata shuts down; the signal's version tells the rest.
    let mut waiting = stopping.clone();
    let mut shutdown = Shutdown {
        stopping,
        wait: std::pin::pin!(waiting.changed()),
        registered: false,
    };
    loop {
        let timers = Timers {
            header_read: Deadline::new(header_read.as_mut(), head_deadline),
            response_head: response_head.as_mut(),
        };
        match conn
            .exchange(
                &mut cache,
                &mut agent,
                settings,
                timers,
                started,
                &mut shutdown,
            )
            .await
        {
            Ok(()) => head_deadline = Instant::now() + settings.header_read,
            Err(Stop::End(served)) => return served,
            Err(Stop::HandOver) => {
                return Served::HandOver(Rewound::new(conn.read.freeze(), conn.tcp));
            }
        }
    }
}

// === impl Conn ===

impl Conn {
    /// One request and its answer.
    async fn exchange(
        &mut self,
        cache: &mut ProxyCache<'_>,
        agent: &mut Agent<'_>,
        settings: Settings,
        timers: Timers<'_>,
        started: &AtomicBool,
        shutdown: &mut Shutdown<'_>,
    ) -> Result<(), Stop> {
        let first = !started.load(Ordering::Relaxed);
        let mut head = self
            .read_head(settings.limits, timers.header_read, first, shutdown)
            .await?;
        let (proxy, plan) = cache.get_with_plan();
        let length = usize::try_from(head.content_length).map_err(|_| Stop::HandOver)?;
        let total = head.len.checked_add(length).ok_or(Stop::HandOver)?;
        if self.read.len() < total {
            // Only a body `handle` would read into the replay buffer anyway is read ahead;
            // one it streams is hyper's to stream.
            let (_, idle) = plan
                .body_read_ahead(head.idempotency_key)
                .filter(|&(cap, _)| length <= cap)
                .ok_or(Stop::HandOver)?;
            self.read_body(total, idle).await?;
        }
        let bytes = self.read.split_to(head.len).freeze();
        let body = (length > 0).then(|| self.read.split_to(length).freeze());
        // The fields as read when `handle` forwards them so (`http/fields.rs`), else a map.
        let read = if plan.fields_as_read(head.method(), head.idempotency_key) {
            head.request_and_fields(bytes)
                .map(|(request, fields)| (request, Some(fields)))
        } else {
            head.request(&bytes)
                .map(|request| (request, None))
                .ok_or(bytes)
        };
        let (request, fields) = match read {
            Ok(read) => read,
            Err(bytes) => {
                self.put_back(&bytes, body.as_ref());
                return Err(Stop::HandOver);
            }
        };
        started.store(true, Ordering::Relaxed);
        let request = request.map(|()| FromAgent::Whole(body));
        // Boxed, as hyper boxes it (`listen/accept.rs`): this future is ~3.2 KB (the attempt's
        // within it), and inline it would size this connection's task for its life — an SSE
        // stream's hours. The box is allocated first and the future written into it: made
        // before its box (`Box::pin`), the future is built on the stack and copied over whole,
        // all ~3.2 KB of it, though its start fills in only the arguments.
        let head_timer = HeadTimer::new(Some(timers.response_head));
        let handle = Box::into_pin(Box::write(
            Box::new_uninit(),
            proxy.handle(request, fields, agent.peer, head_timer, &mut agent.repeated),
        ));
        let answered = tokio::select! {
            biased;
            answered = handle => answered,
            gone = poll_fn(|cx| self.poll_gone(cx)) => return Err(gone.into()),
        };
        let close = head.close || shutdown.begun();
        self.answer(answered.response, answered.fields, close).await
    }

    /// Reads until a head is whole; hands over one this connection does not serve.
    async fn read_head(
        &mut self,
        limits: HeadLimits,
        mut header_read: Deadline<'_>,
        first: bool,
        shutdown: &mut Shutdown<'_>,
    ) -> Result<Head, Stop> {
        loop {
            if !self.read.is_empty() {
                match request::parse(&self.read, limits) {
                    Parsed::Complete(head) => return Ok(head),
                    Parsed::HandOver => return Err(Stop::HandOver),
                    Parsed::Partial => {}
                }
            } else if shutdown.begun() {
                return Err(Served::Closed.into());
            }
            let idle = self.read.is_empty();
            let read = tokio::select! {
                biased;
                read = poll_fn(|cx| self.poll_fill(cx)) => read,
                () = poll_fn(|cx| header_read.poll_passed(cx)) => {
                    return Err(if first { Served::HeaderTimeout } else { Served::Closed }.into());
                }
                // Resolves once strata shuts down.
                () = poll_fn(|cx| shutdown.poll_begun(cx)), if idle => continue,
            };
            match read {
                Ok(0) if self.read.is_empty() => return Err(Served::Closed.into()),
                Ok(0) => {
                    let eof = io::Error::new(io::ErrorKind::UnexpectedEof, "mid request head");
                    return Err(Served::AgentLeft(eof).into());
                }
                Ok(_) => {}
                Err(err) => return Err(Served::AgentLeft(err).into()),
            }
        }
    }

    /// Reads until `total` bytes are buffered, at most `idle` apart. A pause past it hands
    /// the request to hyper, which answers it as the proxy does (408, `handle`).
    async fn read_body(&mut self, total: usize, idle: Option<Duration>) -> Result<(), Stop> {
        // Room for the body as it arrives, not all of it ahead: a head alone must not make
        // strata reserve a large `retry.replay_buffer` (reads grow the buffer as they fill it).
        self.read
            .reserve((total - self.read.len()).min(READ_AHEAD_ROOM));
        while self.read.len() < total {
            let read = poll_fn(|cx| self.poll_fill(cx));
            let read = match idle {
                Some(idle) => tokio::time::timeout(idle, read)
                    .await
                    .map_err(|_| Stop::HandOver)?,
                None => read.await,
            };
            match read {
                Ok(0) => {
                    let eof = io::Error::new(io::ErrorKind::UnexpectedEof, "mid request body");
                    return Err(Served::AgentLeft(eof).into());
                }
                Ok(_) => {}
                Err(err) => return Err(Served::AgentLeft(err).into()),
            }
        }
        Ok(())
    }

    /// Puts a request cut off the buffer back in front of it, for hyper to read.
    fn put_back(&mut self, head: &Bytes, body: Option<&Bytes>) {
        let rest = std::mem::take(&mut self.read);
        let body = body.map_or(&[][..], |b| &b[..]);
        let mut read = BytesMut::with_capacity(head.len() + body.len() + rest.len());
        read.extend_from_slice(head);
        read.extend_from_slice(body);
        read.extend_from_slice(&rest);
        self.read = read;
    }

    /// Writes the answer; `close`: the connection ends after it.
    /// `fields`: the upstream's fields as read, when the response has no map of them.
    ///
    /// The head is encoded before the returned future is, so the future holds only the body
    /// and what is left to write (an `async fn` would keep the response and the fields, each
    /// twice, in every exchange's future).
    fn answer(
        &mut self,
        response: http::Response<AgentBody>,
        fields: Option<AnswerFields>,
        close: bool,
    ) -> impl Future<Output = Result<(), Stop>> {
        let (parts, mut body) = response.into_parts();
        let size = if body.is_end_stream() {
            BodySize::None
        } else {
            body.size_hint()
                .exact()
                .map_or(BodySize::Unknown, BodySize::Known)
        };
        self.out.clear();
        let encoded = response::encode_head(&mut self.out, &parts, fields.as_ref(), size, close)
            .map_err(|err| Served::AnswerBroken(err.as_str()));
        drop(parts);
        drop(fields);
        async move {
            let encoded = encoded?;
            let mut owed = match encoded.framing {
                Framing::Length(length) => length,
                Framing::Empty | Framing::Chunked => 0,
            };
            if encoded.framing != Framing::Empty {
                loop {
                    let framing = encoded.framing;
                    match poll_fn(|cx| self.gather(cx, &mut body, framing, &mut owed)).await {
                        Gathered::Flush(large) => {
                            self.flush(large).await.map_err(Served::AgentLeft)?
                        }
                        Gathered::End => break,
                        Gathered::Failed => {
                            // What came before the failure still goes out (`UpstreamBody`
                            // holds its error back until then), then the unterminated end.
                            let _ = self.flush(None).await;
                            return Err(Served::AnswerBroken("the answer's body failed").into());
                        }
                        Gathered::Gone(served) => return Err(served.into()),
                    }
                }
                match encoded.framing {
                    Framing::Chunked => self.out.extend_from_slice(b"0\r\n\r\n"),
                    Framing::Length(_) if owed > 0 => {
                        let _ = self.flush(None).await;
                        return Err(
                            Served::AnswerBroken("the answer ended short of its length").into()
                        );
                    }
                    Framing::Length(_) | Framing::Empty => {}
                }
            }
            self.flush(None).await.map_err(Served::AgentLeft)?;
            // Dropped only now, the answer sent: a body whose end was not read (its length all
            // sent, or no body to send) settles its call as it drops — the verdict, the counters
            // and the call record — and the agent need not wait for that.
            drop(body);
            if self.out.capacity() > KEEP_OUT {
                self.out = Vec::new();
            }
            if encoded.close {
                let _ = self.tcp.shutdown().await;
                return Err(Served::Closed.into());
            }
            Ok(())
        }
    }

    /// Takes the body's frames until it is quiet, ends, or enough is buffered to write.
    /// `owed`: what a `Content-Length` answer still owes (more than that is not sent).
    fn gather(
        &mut self,
        cx: &mut Context<'_>,
        body: &mut AgentBody,
        framing: Framing,
        owed: &mut u64,
    ) -> Poll<Gathered> {
        let chunked = framing == Framing::Chunked;
        loop {
            if !chunked && *owed == 0 {
                return Poll::Ready(Gathered::End);
            }
            if self.out.len() >= FLUSH_AT {
                return Poll::Ready(Gathered::Flush(None));
            }
            let frame = match Pin::new(&mut *body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => frame,
                Poll::Ready(Some(Err(_))) => return Poll::Ready(Gathered::Failed),
                Poll::Ready(None) => return Poll::Ready(Gathered::End),
                // A last frame held while a record is stored goes out with what is buffered
                // (a JSON answer's head): one write, once it comes.
                Poll::Pending if !self.out.is_empty() && !body.is_settling() => {
                    return Poll::Ready(Gathered::Flush(None));
                }
                Poll::Pending => return self.poll_gone(cx).map(Gathered::Gone),
            };
            // Trailers are not sent: `Trailer` is hop-by-hop and removed, and hyper sends
            // only the fields it names.
            let Ok(mut data) = frame.into_data() else {
                continue;
            };
            if data.is_empty() {
                continue;
            }
            if chunked {
                response::chunk_size(&mut self.out, data.len());
            } else {
                let len = data.len() as u64;
                if len > *owed {
                    data.truncate(*owed as usize);
                }
                *owed = owed.saturating_sub(len);
            }
            let tail: &'static [u8] = if chunked { b"\r\n" } else { b"" };
            if data.len() >= COPY_BELOW {
                return Poll::Ready(Gathered::Flush(Some((data, tail))));
            }
            self.out.extend_from_slice(&data);
            self.out.extend_from_slice(tail);
            if chunked && body.is_end_stream() {
                return Poll::Ready(Gathered::End);
            }
        }
    }

    /// Writes the buffer, then `large` after it, in as few `writev`s as the socket takes.
    async fn flush(&mut self, large: Option<(Bytes, &'static [u8])>) -> io::Result<()> {
        let (data, tail) = large.unwrap_or_default();
        let Conn { tcp, out, .. } = self;
        let mut slices = [IoSlice::new(out), IoSlice::new(&data), IoSlice::new(tail)];
        let mut left: &mut [IoSlice<'_>] = &mut slices;
        while left.iter().any(|s| !s.is_empty()) {
            let n = tcp.write_vectored(left).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            IoSlice::advance_slices(&mut left, n);
        }
        out.clear();
        Ok(())
    }

    /// Ready when the agent has closed its side (or it broke) while an exchange is under
    /// way. Bytes that arrive instead (a pipelined request) are kept for the next exchange,
    /// and then nothing more is read until this one ends (hyper does the same).
    fn poll_gone(&mut self, cx: &mut Context<'_>) -> Poll<Served> {
        if !self.read.is_empty() {
            return Poll::Pending;
        }
        match ready!(self.poll_fill(cx)) {
            Ok(0) => {
                let eof = io::Error::new(io::ErrorKind::UnexpectedEof, "agent closed mid-exchange");
                Poll::Ready(Served::AgentLeft(eof))
            }
            Ok(_) => Poll::Pending,
            Err(err) => Poll::Ready(Served::AgentLeft(err)),
        }
    }

    /// One read into the buffer; 0 at the agent's end. Through `AsyncRead`, so a read that
    /// does not fill its room tells tokio the socket is drained (see `h1_conns.rs`).
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.read.capacity() - self.read.len() < INIT_READ / 8 {
            self.read.reserve(INIT_READ);
        }
        pin!(self.tcp.read_buf(&mut self.read)).poll(cx)
    }
}

/// A `Connection` value names `close` (RFC 9112 §9.6), the request's or the answer's.
fn has_close(tokens: &[u8]) -> bool {
    tokens
        .split(|&b| b == b',')
        .any(|token| token.trim_ascii().eq_ignore_ascii_case(b"close"))
}

impl EncodeError {
    fn as_str(&self) -> &'static str {
        match self {
            EncodeError::Informational => "a 1xx status cannot be a final response",
            EncodeError::ContentLength => {
                "the answer's Content-Length values disagree or are not numbers"
            }
        }
    }
}
