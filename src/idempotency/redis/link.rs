//! The store's connections to Redis, one per worker thread: each made in a task spawned on
//! the runtime of the thread that first needs it (so an operation that gives up waiting does
//! not cancel it), shared by that thread's operations, forgotten when it proves dead.
//!
//! Why one per worker: a `redis` connection's socket is driven by a task of its own, on the
//! runtime that made the connection; a command goes to that task by channel and its reply
//! comes back the same way. strata serves on worker threads that each run a runtime of their
//! own (`runtime/workers.rs`). With one connection for all, made on the main thread, every
//! command woke the main thread, and its reply woke the worker again: two eventfd writes and
//! two `epoll_wait`s more per command, on two threads. A worker's own connection has its task
//! on the worker's runtime, so the hop is a wake within the thread and the reply is read in
//! the worker's own `epoll_wait`. Threads share connections as they share [`PerWorker`]
//! copies: past the third worker, two workers share one (and its hop crosses threads again).
//!
//! - A connection is made on first use, and again after one was forgotten: on a broken
//!   connection, a server that is no longer the master (`READONLY`, after a Sentinel
//!   failover), a refused authentication, or a timeout (a server that stopped answering
//!   without closing the socket).
//! - After a failed connect or a timeout, operations on every thread fail at once for
//!   [`COOLDOWN`], so an unreachable Redis does not add its timeout to every keyed call. A
//!   connection made ends the cooldown.
//! - A failed connect is logged; no other connect starts during the cooldown that follows, so
//!   a wrong password or an unreachable server is named at start (strata's first connection
//!   is made then) and not once per call.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use futures_util::FutureExt;
use futures_util::future::Shared;
use tokio::time::{Duration, Instant, timeout, timeout_at};

use super::connect::{self, Conn};
use crate::config::RedisConfig;
use crate::idempotency::RedisError;
use crate::runtime::per_worker::{self, Line, PerWorker};

/// After a failed connect or a timeout, operations fail at once for this long.
pub(super) const COOLDOWN: Duration = Duration::from_secs(1);

/// The longest a connect may take (each of its handshakes, and all of them): a connect runs
/// on its own, so it may outlast the operation that started it.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

type Connecting = Shared<Pin<Box<dyn Future<Output = Result<Live, RedisError>> + Send>>>;

/// A connection, the copy it belongs to, and its number, so that a failure on an old one
/// never forgets a newer one.
#[derive(Clone)]
pub(super) struct Live {
    pub(super) conn: Conn,
    copy: usize,
    id: u64,
}

pub(super) struct Link {
    inner: Arc<Inner>,
}

struct Inner {
    config: RedisConfig,
    /// What errors and logs name the store by (no credentials).
    name: Arc<str>,
    /// Each thread's connection, by its [`PerWorker`] copy; each on its own cache lines, as
    /// every operation takes its thread's lock.
    slots: PerWorker<Line<Mutex<Slot>>>,
    /// Set with `cool_until`, so that an operation reads one flag no thread writes while
    /// Redis answers, rather than taking a lock every thread takes.
    cooling: AtomicBool,
    cool_until: Mutex<Option<Instant>>,
    made: AtomicU64,
}

#[derive(Default)]
enum Slot {
    #[default]
    Idle,
    Connecting(Connecting),
    Ready(Live),
}

/// How a command failed.
pub(super) struct Failure {
    pub(super) error: RedisError,
    /// The connection is not worth keeping (and the command may be sent again on a new one).
    pub(super) dead: bool,
}

// === impl Link ===

impl Link {
    pub(super) fn new(config: RedisConfig) -> Link {
        Link {
            inner: Arc::new(Inner {
                name: config.describe().into(),
                config,
                slots: PerWorker::new(|| Line(Mutex::default())),
                cooling: AtomicBool::new(false),
                cool_until: Mutex::new(None),
                made: AtomicU64::new(0),
            }),
        }
    }

    pub(super) fn name(&self) -> &Arc<str> {
        &self.inner.name
    }

    /// How long one store operation may take.
    pub(super) fn timeout(&self) -> Duration {
        self.inner.config.timeout
    }

    /// Starts this thread's connect, unless its connection is there or on its way (or there
    /// is no Tokio runtime to connect on: the first operation connects then).
    pub(super) fn warm(&self) {
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let copy = per_worker::copy_here();
        let mut slot = self.inner.slot(copy);
        if matches!(*slot, Slot::Idle) {
            *slot = Slot::Connecting(self.inner.clone().spawn_connect(copy));
        }
    }

    /// This thread's connection, waiting for one until `deadline`.
    pub(super) async fn get(&self, deadline: Instant) -> Result<Live, RedisError> {
        if self.inner.cooling() {
            return Err(RedisError::CoolingDown(COOLDOWN));
        }
        let copy = per_worker::copy_here();
        let connecting = {
            let mut slot = self.inner.slot(copy);
            match &*slot {
                Slot::Ready(live) => return Ok(live.clone()),
                Slot::Connecting(connecting) => connecting.clone(),
                Slot::Idle => {
                    let connecting = self.inner.clone().spawn_connect(copy);
                    *slot = Slot::Connecting(connecting.clone());
                    connecting
                }
            }
        };
        match timeout_at(deadline, connecting).await {
            Ok(result) => result,
            Err(_) => {
                self.inner.cool();
                Err(RedisError::ConnectTimeout(self.timeout()))
            }
        }
    }

    /// Notes that a command on `live` found no answer in time: the connection is forgotten
    /// (the server may be gone without closing it) and the cooldown starts.
    pub(super) fn timed_out(&self, live: &Live) {
        self.inner.forget(live);
        self.inner.cool();
    }

    /// Sorts a command's error; a dead connection is forgotten.
    pub(super) fn failed(&self, live: &Live, error: redis::RedisError) -> Failure {
        let failure = classify(error);
        if failure.dead {
            self.inner.forget(live);
        }
        failure
    }
}

// === impl Inner ===

impl Inner {
    fn slot(&self, copy: usize) -> MutexGuard<'_, Slot> {
        let Line(slot) = self.slots.nth(copy);
        slot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether operations fail at once; ends the cooldown when its time is up.
    fn cooling(&self) -> bool {
        if !self.cooling.load(Ordering::Acquire) {
            return false;
        }
        let mut until = self.cool_until.lock().unwrap_or_else(|e| e.into_inner());
        if until.is_some_and(|t| Instant::now() < t) {
            return true;
        }
        *until = None;
        self.cooling.store(false, Ordering::Release);
        false
    }

    fn cool(&self) {
        let mut until = self.cool_until.lock().unwrap_or_else(|e| e.into_inner());
        *until = Some(Instant::now() + COOLDOWN);
        self.cooling.store(true, Ordering::Release);
    }

    fn warmed(&self) {
        let mut until = self.cool_until.lock().unwrap_or_else(|e| e.into_inner());
        *until = None;
        self.cooling.store(false, Ordering::Release);
    }

    /// A connect for copy `copy` in its own task, on this thread's runtime (where the
    /// connection's own task will run too); the task settles the slot when it ends.
    fn spawn_connect(self: Arc<Inner>, copy: usize) -> Connecting {
        let task = tokio::spawn(async move {
            let result = match timeout(
                CONNECT_TIMEOUT,
                connect::connect(&self.config, CONNECT_TIMEOUT),
            )
            .await
            {
                Ok(Ok(conn)) => Ok(conn),
                Ok(Err(e)) => Err(classify(e).error.into_connect()),
                Err(_) => Err(RedisError::ConnectTimeout(CONNECT_TIMEOUT)),
            };
            self.settle(copy, result)
        });
        let joined = task.map(|joined| {
            joined.unwrap_or_else(|e| Err(RedisError::Connect(format!("connect task: {e}"))))
        });
        let boxed: Pin<Box<dyn Future<Output = _> + Send>> = Box::pin(joined);
        boxed.shared()
    }

    fn settle(&self, copy: usize, result: Result<Conn, RedisError>) -> Result<Live, RedisError> {
        match result {
            Ok(conn) => {
                let live = Live {
                    conn,
                    copy,
                    id: self.made.fetch_add(1, Ordering::Relaxed) + 1,
                };
                *self.slot(copy) = Slot::Ready(live.clone());
                self.warmed();
                tracing::info!(store = %self.name, "idempotency store connected");
                Ok(live)
            }
            Err(error) => {
                *self.slot(copy) = Slot::Idle;
                self.cool();
                tracing::error!(
                    store = %self.name,
                    error = %error,
                    "idempotency store: no connection; keyed calls are forwarded without idempotency"
                );
                Err(error)
            }
        }
    }

    fn forget(&self, live: &Live) {
        let mut slot = self.slot(live.copy);
        if let Slot::Ready(current) = &*slot
            && current.id == live.id
        {
            *slot = Slot::Idle;
        }
    }
}

// === impl RedisError ===

impl RedisError {
    /// The same error, said of a connect.
    fn into_connect(self) -> RedisError {
        match self {
            RedisError::Broken(why) | RedisError::Server(why) => RedisError::Connect(why),
            other => other,
        }
    }
}

/// What a `redis` crate error means for the store.
fn classify(error: redis::RedisError) -> Failure {
    use redis::ErrorKind;
    let code = error.code().unwrap_or_default();
    // NOPERM (an ACL that does not allow a command or key) is not among these: a new
    // connection would be refused the same, so it stays a server error.
    let auth =
        error.kind() == ErrorKind::AuthenticationFailed || matches!(code, "WRONGPASS" | "NOAUTH");
    let not_master = matches!(code, "READONLY" | "MASTERDOWN");
    let broken = error.is_io_error()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.is_unrecoverable_error();
    let text = error.to_string();
    let (error, dead) = if auth {
        (RedisError::Auth(text), true)
    } else if error.is_timeout() {
        (RedisError::Broken(text), true)
    } else if not_master {
        (RedisError::Server(text), true)
    } else if broken {
        (RedisError::Broken(text), true)
    } else {
        (RedisError::Server(text), false)
    };
    Failure { error, dead }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::{ErrorKind, ServerErrorKind};

    fn sorted(error: redis::RedisError) -> (String, bool) {
        let Failure { error, dead } = classify(error);
        (error.to_string(), dead)
    }

    #[test]
    fn errors_that_end_a_connection() {
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        let (text, dead) = sorted(reset.into());
        assert!(text.starts_with("connection broke"), "{text}");
        assert!(dead);
        let demoted = (ErrorKind::Server(ServerErrorKind::ReadOnly), "demoted");
        assert!(
            sorted(demoted.into()).1,
            "READONLY: a failover demoted the master"
        );
        let (text, dead) = sorted((ErrorKind::AuthenticationFailed, "WRONGPASS").into());
        assert!(text.starts_with("authentication refused"), "{text}");
        assert!(dead);
    }

    /// A thread warms the connection of its own worker's copy, and no other.
    #[test]
    fn each_worker_connects_its_own() {
        let link = Link::new(RedisConfig::single("127.0.0.1", 1, 0));
        for worker in [0, 1] {
            std::thread::scope(|s| {
                s.spawn(|| {
                    per_worker::enter(worker);
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    runtime.block_on(async { link.warm() });
                })
                .join()
                .unwrap()
            });
        }
        let idle: Vec<bool> = (0..per_worker::COPIES)
            .map(|copy| matches!(*link.inner.slot(copy), Slot::Idle))
            .collect();
        // Copy 0 is the main thread's; workers 0 and 1 use copies 1 and 2.
        assert_eq!(idle, [true, false, false, true]);
    }

    #[test]
    fn errors_that_keep_it() {
        for kind in [ServerErrorKind::ResponseError, ServerErrorKind::NoPerm] {
            let (text, dead) = sorted((ErrorKind::Server(kind), "refused").into());
            assert!(text.starts_with("server error"), "{text}");
            assert!(!dead, "{kind:?}");
        }
    }
}
