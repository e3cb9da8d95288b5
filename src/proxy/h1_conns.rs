//! Connections to a plain-HTTP (`http://`) upstream: HTTP/1.1, a cache of idle connections,
//! each driven by the call that uses it rather than by a task of its own.
//!
//! Why not hyper-util's pooled client here: its connections run in tasks of their own, so a
//! call crosses tasks for the request, for the response head and for every body chunk (the
//! body channel holds one chunk), and SSE events that arrived in one read went to the agent
//! in one write each (`bench/README.md`). Here the agent's task polls the upstream connection
//! itself — the request goes out and the response's frames come in within the same poll —
//! so frames that arrived together are written to the agent together, and nothing is spawned
//! per connection. `https://` upstreams keep hyper-util's client (TLS, h2 by ALPN).
//!
//! Idle connections are not polled. One the server closed while idle is found at checkout
//! (polled once, it has ended) and dropped; one idle for the idle limit ([`POOL_IDLE_TIMEOUT`]
//! in service, below the servers' own keep-alive timeouts: see `client.rs`) is closed unused —
//! at checkout, check-in, or by a sweep every half limit, so a quiet sidecar does not keep
//! sockets the server has closed (CLOSE_WAIT). A request that a reused connection refused
//! unsent — it closed just then; hyper hands the request back — goes once more on a new
//! connection, as hyper-util's client does. At most [`MAX_IDLE`] connections wait; the oldest
//! go first.
//!
//! Measured (`bench/README.md`): at 16 and 64 agents fewer instructions and syscalls per call
//! (SSE 1.5x the calls/s). On a shared work-stealing runtime a single agent lost 10–20 % of
//! its calls/s (hyper's parts wake the very task polling them, and tokio woke its idle worker
//! each time); since each worker has a runtime of its own (`workers.rs`) that cost is gone.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use http::uri::Authority;
use http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use thread_local::ThreadLocal;
use tokio::net::TcpStream;
use tokio::time::Instant;

#[cfg(doc)]
use super::client::POOL_IDLE_TIMEOUT;
use super::replay::RequestBody;

/// Idle connections kept at most (nginx's `keepalive` directive, per worker, has the same
/// role). Calls in flight hold theirs outside the cache and are not limited by it.
pub const MAX_IDLE: usize = 1024;

type Conn = http1::Connection<TokioIo<TcpStream>, RequestBody>;

/// The idle HTTP/1.1 connections to one plain-HTTP upstream.
pub struct H1Conns {
    host: Box<str>,
    port: u16,
    connect_timeout: Duration,
    idle_limit: Duration,
    builder: http1::Builder,
    /// One list per thread: a connection is registered with the runtime of the thread that
    /// made it (one per worker, `workers.rs`), and used from another it would wake that
    /// thread for every read.
    idle: ThreadLocal<Mutex<VecDeque<Box<Held>>>>,
}

/// One connection, boxed once when it is made and handed around by its box from then on: a
/// hyper connection is ~700 bytes, which moved by value at checkout, send and check-in cost
/// a copy each and a fresh box per call.
struct Held {
    send: SendRequest<RequestBody>,
    /// `None` once it ended (closed or broke).
    conn: Option<Conn>,
    /// When it went idle (meaningful in the idle list only).
    since: Instant,
}

/// A connection carrying a response: the response body polls it, and hands it back to the
/// cache when the response has ended whole. Dropped before that (the agent left, the body
/// broke), it closes the connection.
pub struct Driven {
    held: Box<Held>,
    home: Arc<H1Conns>,
}

/// Why no response head came back.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// No connection to the upstream: nothing was sent.
    #[error("upstream connect: {0}")]
    Connect(std::io::Error),
    /// The connection broke, or the response could not be read.
    #[error("upstream: {0}")]
    Http(#[from] hyper::Error),
    /// From hyper-util's client (`https://` upstreams).
    #[error("upstream: {0}")]
    Pooled(#[from] hyper_util::client::legacy::Error),
}

impl SendError {
    /// Nothing reached the upstream: no connection could be made.
    pub fn is_connect(&self) -> bool {
        match self {
            SendError::Connect(_) => true,
            SendError::Http(_) => false,
            SendError::Pooled(err) => err.is_connect(),
        }
    }
}

// === impl H1Conns ===

impl H1Conns {
    /// The cache for `authority`; its sweep runs on the current tokio runtime, if any, until
    /// the cache is dropped.
    pub fn new(
        authority: &Authority,
        connect_timeout: Duration,
        idle_limit: Duration,
    ) -> Arc<H1Conns> {
        // `[::1]` in a URI is `::1` to a socket.
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let conns = Arc::new(H1Conns {
            host: host.into(),
            port: authority.port_u16().unwrap_or(80),
            connect_timeout,
            idle_limit,
            builder: http1::Builder::new(),
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
        conns
    }

    /// Sends `request` on an idle connection, or a new one, and drives that connection until
    /// the response head has come back.
    pub async fn send(
        self: &Arc<Self>,
        mut request: Request<RequestBody>,
    ) -> Result<(Response<Incoming>, Driven), SendError> {
        // To an origin server the target goes in origin form (RFC 9112 §3.2.1); the authority
        // travels in `Host` (`forward::set_host`). hyper's connection writes the URI as given.
        if let Some(target) = request.uri().path_and_query().cloned() {
            *request.uri_mut() = Uri::from(target);
        }
        loop {
            let (mut held, reused) = match self.checkout().await {
                Some(held) => (held, true),
                None => (self.connect().await?, false),
            };
            let sent = {
                let Held { send, conn, .. } = &mut *held;
                let mut response = pin!(send.try_send_request(request));
                poll_fn(|cx| {
                    // Once it ended (closed, or broke), dropping it fails the request, if it
                    // is still waiting, with hyper's reason.
                    drive(conn, cx);
                    response.as_mut().poll(cx)
                })
                .await
            };
            match sent {
                Ok(response) => {
                    let home = self.clone();
                    return Ok((response, Driven { held, home }));
                }
                Err(mut err) => match err.take_message() {
                    Some(unsent) if reused => request = unsent,
                    _ => return Err(SendError::Http(err.into_error())),
                },
            }
        }
    }

    /// The most recently used idle connection still alive, if any.
    async fn checkout(&self) -> Option<Box<Held>> {
        loop {
            let mut idle = {
                let mut list = self.lock();
                let expired = self.expired(&mut list, Instant::now());
                let idle = list.pop_back();
                drop(list);
                // Closed outside the lock.
                drop(expired);
                idle?
            };
            // Polled once: one the server closed ends now; a healthy one settles into
            // waiting for the next request.
            let ended = poll_fn(|cx| Poll::Ready(drive(&mut idle.conn, cx))).await;
            if !ended && idle.send.is_ready() {
                return Some(idle);
            }
        }
    }

    async fn connect(&self) -> Result<Box<Held>, SendError> {
        let connect = TcpStream::connect((&*self.host, self.port));
        let tcp = match tokio::time::timeout(self.connect_timeout, connect).await {
            Ok(Ok(tcp)) => tcp,
            Ok(Err(err)) => return Err(SendError::Connect(err)),
            Err(_elapsed) => {
                return Err(SendError::Connect(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "timeouts.connect elapsed",
                )));
            }
        };
        // A request head and a small body go out at once, not after a delayed ACK.
        let _ = tcp.set_nodelay(true);
        let (send, conn) = self.builder.handshake(TokioIo::new(tcp)).await?;
        Ok(Box::new(Held {
            send,
            conn: Some(conn),
            since: Instant::now(),
        }))
    }

    /// Keeps a connection whose response ended whole, for the next call.
    fn checkin(&self, mut held: Box<Held>) {
        let now = Instant::now();
        held.since = now;
        let mut list = self.lock();
        let mut dropped = self.expired(&mut list, now);
        if list.len() >= MAX_IDLE {
            dropped.extend(list.pop_front());
        }
        list.push_back(held);
        drop(list);
        // Closed outside the lock.
        drop(dropped);
    }

    /// Closes the connections idle for the limit or longer, on every thread.
    fn sweep(&self) {
        let now = Instant::now();
        for list in self.idle.iter() {
            let mut list = list.lock().unwrap_or_else(|e| e.into_inner());
            let expired = self.expired(&mut list, now);
            drop(list);
            drop(expired);
        }
    }

    /// Takes the connections idle for the limit or longer (the oldest are at the front).
    fn expired(&self, list: &mut VecDeque<Box<Held>>, now: Instant) -> VecDeque<Box<Held>> {
        let fresh = list
            .iter()
            .position(|i| now.duration_since(i.since) < self.idle_limit)
            .unwrap_or(list.len());
        list.drain(..fresh).collect()
    }

    /// Idle connections now, on every thread (for tests).
    pub fn idle_count(&self) -> usize {
        self.idle
            .iter()
            .map(|list| list.lock().unwrap_or_else(|e| e.into_inner()).len())
            .sum()
    }

    /// This thread's list. A poisoned lock only means a thread panicked while holding it; the
    /// list is still a list.
    fn lock(&self) -> MutexGuard<'_, VecDeque<Box<Held>>> {
        self.idle
            .get_or_default()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }
}

/// Polls a connection once (reads what a response waits for, writes what a request has
/// left) and lets it go once it ended, closed or broken. True when there is none left.
fn drive(conn: &mut Option<Conn>, cx: &mut Context<'_>) -> bool {
    if let Some(c) = conn.as_mut()
        && Pin::new(c).poll(cx).is_ready()
    {
        *conn = None;
    }
    conn.is_none()
}

// === impl Driven ===

impl Driven {
    /// Moves the connection on: reads what the response body is waiting for, writes what is
    /// left of the request. A connection that ended is let go.
    pub fn poll(&mut self, cx: &mut Context<'_>) {
        drive(&mut self.held.conn, cx);
    }

    /// The response ended whole: the connection is polled once more, to settle into waiting
    /// for the next request, and goes back to the cache.
    pub fn finish(mut self, cx: &mut Context<'_>) {
        self.poll(cx);
        let Driven { held, home } = self;
        if held.conn.is_some() {
            home.checkin(held);
        }
    }
}

#[cfg(test)]
mod tests;
