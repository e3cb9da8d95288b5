//! Idempotency keys: the first completed answer to a keyed call answers its repeats
//! (IETF draft-ietf-httpapi-idempotency-key-header; Stripe's "Idempotent requests").
//!
//! Same key + same request (its [`Fingerprint`], which ignores the JSON-RPC id and `_meta`)
//! → the recorded answer, with the repeat's own ids put in; same key + a different request →
//! 422; a repeat while the first call still runs → 409. Records expire after `ttl`; the memory
//! store is bounded by entries and bytes, the Redis store by Redis.
//!
//! What the proxy does with a request carrying `Idempotency-Key`:
//! 1. [`Key::new`] from the header value, scoped (e.g. by a hash of `Authorization`) so one
//!    client can neither read nor block another's keys. `None` (empty, too long, control
//!    characters): forward without idempotency.
//! 2. [`Store::fingerprint`] of the request target and the whole body — so the body must be
//!    buffered (the replay buffer); a body past it, or not JSON: forward without idempotency.
//! 3. [`Store::claim`], before anything is sent upstream:
//!    - `Done(record)`: answer from it — `record.status`, [`Record::header_map`],
//!      [`Record::replay_body`] with the repeat's `ids` — never reaching the upstream;
//!    - `InFlight`: 409, `Mismatch`: 422, each with a JSON-RPC error body naming the reason;
//!    - `Fresh(ticket)`: forward (retries included), and keep the ticket with the response body;
//!    - `Err(_)`: forward without idempotency, and count it.
//! 4. With the final response head: if [`recordable_status`], start a [`Recording`] with
//!    [`Store::record_cap`] and push every body chunk forwarded to the agent into it; else
//!    release the ticket at once (the agent may try again with the same key).
//! 5. At the body's end: [`Ticket::complete`] with [`Recording::finish`] when the body ended
//!    cleanly, the record stayed under its cap and the call has its final response (not
//!    STREAM_INCOMPLETE); otherwise [`Ticket::release`]. A dropped ticket (agent gone, future
//!    dropped) releases itself. Neither result changes what the agent already got.

mod codec;
mod fingerprint;
mod jsonscan;
mod key;
mod memory;
mod record;
mod redis;
mod replace;
mod store;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

pub use fingerprint::{Fingerprint, Fingerprinted, Hashing, fingerprint};
pub use key::{Key, MAX_KEY_LEN};
pub use memory::Usage;
pub use record::{Record, Recording, keeps_header, recordable_status};
pub use redis::KEY_PREFIX;
pub use replace::{replace_id, replace_ids};
pub use store::{Claim, Completion, Store, Ticket};

/// Why the store could not answer. The store is neither side of the call: the proxy forwards
/// the call without idempotency, which is always safe to do once (it is what happens without
/// a key), and counts it.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Memory store: every entry is a call still in flight (those are never evicted).
    #[error("idempotency store (memory) is full: all {entries} entries are calls in flight")]
    Full { entries: usize },
    #[error("idempotency store (redis {addr}): {source}")]
    Redis {
        addr: Arc<str>,
        #[source]
        source: RedisError,
    },
}

/// What went wrong talking to Redis. Messages carry no credentials.
#[derive(Clone, Debug, thiserror::Error)]
pub enum RedisError {
    #[error("cannot connect: {0}")]
    Connect(String),
    /// A wrong password or user: the connection was refused until the settings change.
    #[error("authentication refused: {0}")]
    Auth(String),
    #[error("no connection within {0:?}")]
    ConnectTimeout(Duration),
    #[error("no reply within {0:?}")]
    Timeout(Duration),
    #[error("connection broke: {0}")]
    Broken(String),
    #[error("server error: {0}")]
    Server(String),
    #[error("the value under the key is not a strata record: {0}")]
    Corrupt(&'static str),
    #[error("not tried: unreachable within the last {0:?}")]
    CoolingDown(Duration),
    #[error("the key kept changing during the claim")]
    Contended,
}
