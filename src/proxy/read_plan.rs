//! How strata's own agent connection reads a request, decided once per config: the
//! connection reads by the plan of the proxy in force, and never asks the proxy per request.

use std::time::Duration;

use http::Method;

/// How far a POST body is read before the call starts, and whose fields go out as read.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReadPlan {
    /// Retries on: a POST body is read ahead up to the replay buffer's cap, pausing at most
    /// this long between reads (`timeouts.request_body_idle`). `None`: it streams.
    pub(super) retries: Option<(usize, Option<Duration>)>,
    /// A body with an `Idempotency-Key` goes into the replay buffer whatever the retries.
    pub(super) keyed: (usize, Option<Duration>),
    /// Which POSTs go out from their fields as read (`http/fields.rs`).
    pub(super) as_read: AsRead,
}

/// Which POSTs are forwarded from their fields as read: those whose body goes into the
/// replay buffer, which strata's own connection takes — one with a key always, one without
/// when retries are on. None when strata adds a `traceparent` (to a map).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AsRead {
    None,
    Keyed,
    All,
}

impl ReadPlan {
    /// The replay buffer's cap and the pause allowed between reads, for a body the call
    /// reads into that buffer anyway; `None` for one it streams.
    pub(crate) fn body_read_ahead(
        &self,
        idempotency_key: bool,
    ) -> Option<(usize, Option<Duration>)> {
        match idempotency_key {
            true => Some(self.keyed),
            false => self.retries,
        }
    }

    /// Whether the request's fields go out as read rather than in a map.
    pub(crate) fn fields_as_read(&self, method: &Method, idempotency_key: bool) -> bool {
        *method == Method::POST
            && match self.as_read {
                AsRead::All => true,
                AsRead::Keyed => idempotency_key,
                AsRead::None => false,
            }
    }
}
