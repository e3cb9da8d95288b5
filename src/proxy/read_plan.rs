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
    /// A POST is forwarded from its fields as read (`http/fields.rs`) when its body goes into
    /// the replay buffer, which strata's own connection takes: one without a key when retries
    /// are on; one with a key always. Neither when strata adds a `traceparent` (to a map).
    pub(super) fields_as_read: bool,
    pub(super) keyed_fields_as_read: bool,
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
            && match idempotency_key {
                true => self.keyed_fields_as_read,
                false => self.fields_as_read,
            }
    }
}
