//! The testbed: a fault-injection MCP upstream over Streamable HTTP, used by `strata testbed`,
//! `strata demo` and the tests.
//!
//! It serves `POST/GET/DELETE /mcp` for both protocol eras:
//! - legacy (2025-03-26, 2025-06-18, 2025-11-25): `initialize` mints an `Mcp-Session-Id`,
//!   which every later request must carry; GET opens a standalone SSE stream (or resumes one
//!   with `Last-Event-ID`); DELETE ends the session.
//! - 2026-07-28 (a request with `MCP-Protocol-Version: 2026-07-28`): stateless, results carry
//!   `resultType`, `server/discover` answers, GET and DELETE are 405.
//!
//! Every entry of [`SCENARIOS`] is a tool; calling it produces one wire behaviour (a status,
//! a broken body, a malformed envelope, an SSE shape, …) that strata must classify.

mod body;
pub mod client;
mod post;
mod reply;
mod rpc;
mod scenarios;
mod sent;
mod server;
mod session;
mod sse;
mod tools;

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

pub use scenarios::{SCENARIOS, Scenario, scenario};
pub use sent::{BodyHash, MAX_SENT_RECORDS, SENT_PREFIX_BYTES, SentBody, SentEnd};
pub use server::{MCP_PATH, SHUTDOWN_GRACE};

use sent::SentLog;
use session::{Counters, Sessions};

/// Distinct tool names [`Testbed::calls_of`] remembers; calls of further names are not
/// counted (the names come from clients, so the map must be bounded).
pub const MAX_COUNTED_TOOLS: usize = 1024;

/// How the testbed answers plain tool results (`ok`, `tool_error`, `jsonrpc_error`, …).
/// Scenarios whose point is a particular shape (`sse_*`, `malformed_json`, …) ignore it. A
/// call may choose for itself with `arguments.response_mode`: `"json"` or `"sse"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ResponseMode {
    /// `application/json`, one JSON-RPC message.
    #[default]
    Json,
    /// `text/event-stream` with a single event, as the C# SDK answers everything.
    Sse,
}

#[derive(Clone, Copy, Debug)]
struct Options {
    fail_first_n: u64,
    response_mode: ResponseMode,
    record_sent: bool,
}

/// Builds a [`Testbed`] with non-default options.
#[derive(Clone, Copy, Debug)]
pub struct TestbedBuilder {
    options: Options,
}

impl TestbedBuilder {
    /// How many calls of `read_flaky` / `write_flaky` fail with 503 per session (or per
    /// testbed when stateless) before they succeed. Default 1.
    pub fn fail_first_n(mut self, n: u64) -> Self {
        self.options.fail_first_n = n;
        self
    }

    /// How plain tool results are sent. Default [`ResponseMode::Json`].
    pub fn response_mode(mut self, mode: ResponseMode) -> Self {
        self.options.response_mode = mode;
        self
    }

    /// Keep a [`SentBody`] record of every answer to a JSON-RPC request, for
    /// [`Testbed::take_sent`]. Off by default: a testbed serving real agents keeps nothing.
    pub fn record_sent(mut self, on: bool) -> Self {
        self.options.record_sent = on;
        self
    }

    pub fn build(self) -> Arc<Testbed> {
        let (shutdown, _) = watch::channel(false);
        Arc::new(Testbed {
            sent: self.options.record_sent.then(Arc::default),
            options: self.options,
            posts: AtomicU64::new(0),
            calls: Mutex::default(),
            in_flight: InFlight::default(),
            sessions: Sessions::default(),
            stateless_counters: Counters::default(),
            next_stream: AtomicU64::new(1),
            shutdown,
        })
    }

    /// Builds and serves on `127.0.0.1:0` (for tests). See [`Testbed::spawn_local`].
    pub async fn spawn_local(self) -> std::io::Result<(SocketAddr, Arc<Testbed>, TestbedHandle)> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let tb = self.build();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(Arc::clone(&tb).serve(listener, async move {
            // A send or a dropped handle both mean "stop".
            let _ = rx.await;
        }));
        Ok((
            addr,
            tb,
            TestbedHandle {
                stop: Some(tx),
                task,
            },
        ))
    }
}

/// The shared state of one testbed: sessions, counters and the shutdown signal.
#[derive(Debug)]
pub struct Testbed {
    options: Options,
    posts: AtomicU64,
    calls: Mutex<HashMap<String, u64>>,
    /// tools/call requests being handled now, and the most at once.
    in_flight: InFlight,
    sessions: Sessions,
    /// Fault counters for stateless (2026-07-28) calls, which have no session to hold them.
    stateless_counters: Counters,
    next_stream: AtomicU64,
    /// What was sent per request id, when [`TestbedBuilder::record_sent`] is on.
    sent: Option<Arc<SentLog>>,
    /// Turns `true` once, when serving stops; open streams watch it.
    shutdown: watch::Sender<bool>,
}

impl Testbed {
    /// A testbed with default options.
    pub fn new() -> Arc<Testbed> {
        Testbed::builder().build()
    }

    pub fn builder() -> TestbedBuilder {
        TestbedBuilder {
            options: Options {
                fail_first_n: 1,
                response_mode: ResponseMode::Json,
                record_sent: false,
            },
        }
    }

    /// Serves `/mcp` on `listener` until `shutdown` resolves, then stops gracefully: no new
    /// connections, open streams end, in-flight responses get [`SHUTDOWN_GRACE`] to finish.
    /// Serve a testbed once: after shutdown its streams end at once.
    pub async fn serve(
        self: Arc<Self>,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        server::serve(self, listener, shutdown).await
    }

    /// A default testbed on `127.0.0.1:0`, served on its own task. Keep the handle: dropping
    /// it stops the testbed.
    pub async fn spawn_local() -> std::io::Result<(SocketAddr, Arc<Testbed>, TestbedHandle)> {
        Testbed::builder().spawn_local().await
    }

    /// POSTs received on `/mcp` so far, including rejected ones.
    pub fn posts(&self) -> u64 {
        self.posts.load(Ordering::Relaxed)
    }

    /// `tools/call` requests received for `tool` so far (known scenario or not).
    pub fn calls_of(&self, tool: &str) -> u64 {
        let calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        calls.get(tool).copied().unwrap_or(0)
    }

    /// The most tools/call requests handled at once so far: from the request's arrival until
    /// its handler gives the response (`slow` holds it for its sleep; an SSE scenario's
    /// stream goes on after).
    pub fn max_calls_in_flight(&self) -> u64 {
        self.in_flight.max.load(Ordering::Relaxed)
    }

    /// Counts a tools/call in flight until the guard drops.
    fn call_in_flight(&self) -> InFlightGuard<'_> {
        let now = self.in_flight.now.fetch_add(1, Ordering::Relaxed) + 1;
        self.in_flight.max.fetch_max(now, Ordering::Relaxed);
        InFlightGuard(&self.in_flight)
    }

    /// Removes and returns the record of the answer to the request whose id has the JSON text
    /// `id` (`7`, `"a"`), once that answer's body has ended. `None` when recording is off, the
    /// body has not ended yet, or the record was dropped (see [`Testbed::sent_dropped`]).
    pub fn take_sent(&self, id: &str) -> Option<SentBody> {
        self.sent.as_ref().and_then(|log| log.take(id))
    }

    /// Records not kept because [`MAX_SENT_RECORDS`] were waiting to be taken.
    pub fn sent_dropped(&self) -> u64 {
        self.sent.as_ref().map_or(0, |log| log.dropped())
    }

    /// Legacy sessions currently live.
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    fn count_post(&self) {
        self.posts.fetch_add(1, Ordering::Relaxed);
    }

    fn count_call(&self, tool: &str) {
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = calls.get_mut(tool) {
            *n += 1;
        } else if calls.len() < MAX_COUNTED_TOOLS {
            calls.insert(tool.to_owned(), 1);
        }
    }

    fn next_stream_id(&self) -> u64 {
        self.next_stream.fetch_add(1, Ordering::Relaxed)
    }

    fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
        self.sessions.end_all();
    }
}

/// Calls being handled, and the most at once.
#[derive(Debug, Default)]
struct InFlight {
    now: AtomicU64,
    max: AtomicU64,
}

/// One call counted in [`InFlight`] while it lives.
struct InFlightGuard<'a>(&'a InFlight);

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Stops a testbed started with [`Testbed::spawn_local`]. Dropping it also stops the testbed
/// (without waiting).
#[derive(Debug)]
pub struct TestbedHandle {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

impl TestbedHandle {
    /// Signals a graceful stop and waits for it.
    pub async fn shutdown(mut self) -> std::io::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.task).await.map_err(std::io::Error::other)?
    }
}
