//! The store the proxy talks to: claim a key, then complete or release the claim.

use std::fmt;
use std::sync::Arc;

use super::fingerprint::{self, Fingerprint, Fingerprinted, Hashing};
use super::memory::{MemoryStore, Usage};
use super::record::Record;
use super::redis::RedisStore;
use super::{Key, StoreError};
use crate::config::{IdempotencyConfig, StoreKind};

/// The idempotency-key store; cheap to clone (one shared backend).
#[derive(Clone)]
pub struct Store {
    backend: Arc<Backend>,
    max_record_bytes: usize,
}

enum Backend {
    Memory(MemoryStore),
    Redis(RedisStore),
}

/// What a claim found.
#[derive(Debug)]
pub enum Claim {
    /// The key is new: this call owns it. Forward the call, then complete or release the
    /// ticket (dropping it releases).
    Fresh(Ticket),
    /// The same request under this key is still running: answer 409.
    InFlight,
    /// The key was used with a different request: answer 422.
    Mismatch,
    /// The same request completed: answer from the record.
    Done(Record),
}

/// What `complete` did with a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    Stored,
    /// Over `max_record_bytes` (or the memory store's `max_bytes`): not stored, the key was
    /// released so a repeat is forwarded.
    TooLarge,
    /// The claim had expired (and may have been taken by another call): nothing written.
    Lost,
}

/// A backend's answer to a claim; `Fresh` carries the claim token.
pub(super) enum Found {
    Fresh(u64),
    InFlight,
    Mismatch,
    Done(Record),
}

/// One call's hold on its key.
///
/// Dropping an unsettled ticket releases the key (the call ended without a final answer: an
/// early return, a dropped future, a disconnected agent). The memory store releases at once;
/// the Redis store in a spawned task when a runtime is there, otherwise the marker's TTL ends it.
#[derive(Debug)]
pub struct Ticket {
    store: Option<Store>,
    key: Key,
    fp: Fingerprint,
    token: u64,
}

// === impl Store ===

impl Store {
    /// The store the config names. No I/O: a Redis store connects on first use, or when
    /// [`Store::warm`] is called.
    pub fn new(config: &IdempotencyConfig) -> Store {
        let backend = match &config.store {
            StoreKind::Memory => Backend::Memory(MemoryStore::new(
                config.ttl,
                config.max_entries,
                config.max_bytes,
                config.max_record_bytes,
            )),
            StoreKind::Redis(redis) => {
                Backend::Redis(RedisStore::new(redis, config.ttl, config.max_record_bytes))
            }
        };
        Store {
            backend: Arc::new(backend),
            max_record_bytes: config.max_record_bytes,
        }
    }

    /// Starts connecting a Redis store in the background (within a Tokio runtime), so that a
    /// wrong password or an unreachable server is logged when strata starts rather than at
    /// the first keyed call. The memory store has nothing to do.
    pub fn warm(&self) {
        if let Backend::Redis(r) = &*self.backend {
            r.warm();
        }
    }

    /// `memory` or `redis`, for logs and metric labels.
    pub fn kind(&self) -> &'static str {
        match *self.backend {
            Backend::Memory(_) => "memory",
            Backend::Redis(_) => "redis",
        }
    }

    /// The fingerprint of a request to claim a key with: hashed as this store's records need
    /// ([`Hashing`]). `None` when the body is not JSON.
    pub fn fingerprint(&self, target: &str, body: &[u8]) -> Option<Fingerprinted> {
        let hashing = match *self.backend {
            Backend::Memory(_) => Hashing::InProcess,
            Backend::Redis(_) => Hashing::Shared,
        };
        fingerprint::fingerprint(target, body, hashing)
    }

    /// The cap to give [`Recording::new`](super::Recording::new).
    pub fn record_cap(&self) -> usize {
        self.max_record_bytes
    }

    /// What the memory store holds; `None` for Redis.
    pub fn usage(&self) -> Option<Usage> {
        match &*self.backend {
            Backend::Memory(m) => Some(m.usage()),
            Backend::Redis(_) => None,
        }
    }

    /// Claims `key` for a request with fingerprint `fp`, atomically: of concurrent callers
    /// exactly one gets `Fresh`; the others get `InFlight` (same request) or `Mismatch`.
    pub async fn claim(&self, key: &Key, fp: Fingerprint) -> Result<Claim, StoreError> {
        let found = match &*self.backend {
            Backend::Memory(m) => m.claim(key, fp)?,
            Backend::Redis(r) => r.claim(key.as_str(), fp).await?,
        };
        Ok(match found {
            Found::Fresh(token) => Claim::Fresh(Ticket {
                store: Some(self.clone()),
                key: key.clone(),
                fp,
                token,
            }),
            Found::InFlight => Claim::InFlight,
            Found::Mismatch => Claim::Mismatch,
            Found::Done(record) => Claim::Done(record),
        })
    }
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store").field("kind", &self.kind()).finish()
    }
}

// === impl Ticket ===

impl Ticket {
    pub fn key(&self) -> &Key {
        &self.key
    }

    pub fn fingerprint(&self) -> Fingerprint {
        self.fp
    }

    /// Replaces the claim with the call's final answer, kept for `ttl`.
    pub async fn complete(mut self, record: Record) -> Result<Completion, StoreError> {
        let Some(store) = self.store.take() else {
            return Ok(Completion::Lost);
        };
        match &*store.backend {
            Backend::Memory(m) => Ok(m.complete(&self.key, self.token, record)),
            Backend::Redis(r) => {
                let key = self.key.as_str();
                let result = r.complete(key, self.fp, self.token, &record).await;
                if result.is_err() {
                    // The marker may still be there: give the agent its key back.
                    self.store = Some(store);
                }
                result
            }
        }
    }

    /// Completes the claim at once when the store is in this process (memory): the record is
    /// there before the answer's last byte goes to the agent, so a repeat sent as soon as the
    /// answer arrived is replayed, never told the call is still in flight. A Redis store's
    /// ticket and the record come back, for [`complete`](Self::complete) in a task.
    pub fn complete_here(mut self, record: Record) -> Result<Completion, Box<(Ticket, Record)>> {
        let Some(store) = self.store.take() else {
            return Ok(Completion::Lost);
        };
        match &*store.backend {
            Backend::Memory(m) => Ok(m.complete(&self.key, self.token, record)),
            Backend::Redis(_) => {
                self.store = Some(store);
                Err(Box::new((self, record)))
            }
        }
    }

    /// Forgets the claim: the call ended without an answer worth keeping, and the agent
    /// may send it again with the same key.
    pub async fn release(mut self) -> Result<(), StoreError> {
        let Some(store) = self.store.take() else {
            return Ok(());
        };
        match &*store.backend {
            Backend::Memory(m) => {
                m.release(&self.key, self.token);
                Ok(())
            }
            Backend::Redis(r) => r.release(self.key.as_str(), self.fp, self.token).await,
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let Some(store) = self.store.take() else {
            return;
        };
        if let Backend::Memory(m) = &*store.backend {
            m.release(&self.key, self.token);
            return;
        }
        let key = self.key.clone();
        let (fp, token) = (self.fp, self.token);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            if let Backend::Redis(r) = &*store.backend
                && let Err(e) = r.release(key.as_str(), fp, token).await
            {
                tracing::debug!(error = %e, "idempotency key not released; its TTL will end it");
            }
        });
    }
}
