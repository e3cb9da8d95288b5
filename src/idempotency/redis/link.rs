//! The store's one connection to Redis: made in a spawned task (so an operation that gives up
//! waiting does not cancel it), shared by every operation, forgotten when it proves dead.
//!
//! - A connection is made on first use, and again after one was forgotten: on a broken
//!   connection, a server that is no longer the master (`READONLY`, after a Sentinel
//!   failover), a refused authentication, or a timeout (a server that stopped answering
//!   without closing the socket).
//! - After a failed connect or a timeout, operations fail at once for [`COOLDOWN`], so an
//!   unreachable Redis does not add its timeout to every keyed call. A connection made
//!   ends the cooldown.
//! - A failed connect is logged (at most once per cooldown), so a wrong password or an
//!   unreachable server is named at start, when strata makes its first connection.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};

use futures_util::FutureExt;
use futures_util::future::Shared;
use tokio::time::{Duration, Instant, timeout, timeout_at};

use super::connect::{self, Conn};
use crate::config::RedisConfig;
use crate::idempotency::RedisError;

/// After a failed connect or a timeout, operations fail at once for this long.
pub(super) const COOLDOWN: Duration = Duration::from_secs(1);

/// The longest a connect may take (each of its handshakes, and all of them): a connect runs
/// on its own, so it may outlast the operation that started it.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

type Connecting = Shared<Pin<Box<dyn Future<Output = Result<Live, RedisError>> + Send>>>;

/// A connection and its number, so that a failure on an old one never forgets a newer one.
#[derive(Clone)]
pub(super) struct Live {
    pub(super) conn: Conn,
    id: u64,
}

pub(super) struct Link {
    inner: Arc<Inner>,
}

struct Inner {
    config: RedisConfig,
    /// What errors and logs name the store by (no credentials).
    name: Arc<str>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    slot: Slot,
    cool_until: Option<Instant>,
    made: u64,
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
                state: Mutex::default(),
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

    /// Starts connecting, unless a connection is there or on its way (or there is no Tokio
    /// runtime to connect on: the first operation connects then).
    pub(super) fn warm(&self) {
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let mut state = self.inner.lock();
        if matches!(state.slot, Slot::Idle) {
            state.slot = Slot::Connecting(self.inner.clone().spawn_connect());
        }
    }

    /// The connection, waiting for one until `deadline`.
    pub(super) async fn get(&self, deadline: Instant) -> Result<Live, RedisError> {
        let connecting = {
            let mut state = self.inner.lock();
            if let Some(until) = state.cool_until
                && Instant::now() < until
            {
                return Err(RedisError::CoolingDown(COOLDOWN));
            }
            match &state.slot {
                Slot::Ready(live) => return Ok(live.clone()),
                Slot::Connecting(connecting) => connecting.clone(),
                Slot::Idle => {
                    let connecting = self.inner.clone().spawn_connect();
                    state.slot = Slot::Connecting(connecting.clone());
                    connecting
                }
            }
        };
        match timeout_at(deadline, connecting).await {
            Ok(result) => result,
            Err(_) => {
                self.inner.lock().cool_until = Some(Instant::now() + COOLDOWN);
                Err(RedisError::ConnectTimeout(self.timeout()))
            }
        }
    }

    /// Notes that a command on `live` found no answer in time: the connection is forgotten
    /// (the server may be gone without closing it) and the cooldown starts.
    pub(super) fn timed_out(&self, live: &Live) {
        let mut state = self.inner.lock();
        state.forget(live);
        state.cool_until = Some(Instant::now() + COOLDOWN);
    }

    /// Sorts a command's error; a dead connection is forgotten.
    pub(super) fn failed(&self, live: &Live, error: redis::RedisError) -> Failure {
        let failure = classify(error);
        if failure.dead {
            self.inner.lock().forget(live);
        }
        failure
    }
}

// === impl Inner ===

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A connect in its own task; the task settles the state when it ends.
    fn spawn_connect(self: Arc<Inner>) -> Connecting {
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
            self.settle(result)
        });
        let joined = task.map(|joined| {
            joined.unwrap_or_else(|e| Err(RedisError::Connect(format!("connect task: {e}"))))
        });
        let boxed: Pin<Box<dyn Future<Output = _> + Send>> = Box::pin(joined);
        boxed.shared()
    }

    fn settle(&self, result: Result<Conn, RedisError>) -> Result<Live, RedisError> {
        let mut state = self.lock();
        match result {
            Ok(conn) => {
                state.made += 1;
                let live = Live {
                    conn,
                    id: state.made,
                };
                state.slot = Slot::Ready(live.clone());
                state.cool_until = None;
                drop(state);
                tracing::info!(store = %self.name, "idempotency store connected");
                Ok(live)
            }
            Err(error) => {
                state.slot = Slot::Idle;
                state.cool_until = Some(Instant::now() + COOLDOWN);
                drop(state);
                tracing::error!(
                    store = %self.name,
                    error = %error,
                    "idempotency store: no connection; keyed calls are forwarded without idempotency"
                );
                Err(error)
            }
        }
    }
}

// === impl State ===

impl State {
    fn forget(&mut self, live: &Live) {
        if let Slot::Ready(current) = &self.slot
            && current.id == live.id
        {
            self.slot = Slot::Idle;
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

    #[test]
    fn errors_that_keep_it() {
        for kind in [ServerErrorKind::ResponseError, ServerErrorKind::NoPerm] {
            let (text, dead) = sorted((ErrorKind::Server(kind), "refused").into());
            assert!(text.starts_with("server error"), "{text}");
            assert!(!dead, "{kind:?}");
        }
    }
}
