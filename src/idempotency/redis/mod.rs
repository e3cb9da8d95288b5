//! The shared store: keys in Redis, so a repeat that lands on another replica is recognised.
//!
//! One key per record, `strata:idem:<scope hash>:<key>`, so every command and script touches
//! exactly one key (one slot, in a Redis Cluster):
//! - claim: `SET <key> <marker> NX PX <ttl>` — atomic, first caller wins; on a conflict
//!   `GETRANGE` (a `GET` bounded by `max_record_bytes`) decides InFlight / Mismatch / Done
//!   (if the key vanished in between, the claim starts over, a bounded number of times);
//! - complete: a Lua script replaces the value with the record only while it is still this
//!   claim's own marker (its token), so a claim that expired and was taken by another call
//!   never has its successor overwritten;
//! - release: the same compare-and-delete.
//!
//! The scripts go as `EVAL` (a few hundred bytes): one round trip every time, where
//! `EVALSHA` would cost two more on each server that has not seen the script yet (a new
//! master after a failover, every master of a cluster), and completion races the agent's
//! repeat.
//!
//! Bounds are Redis's own (`maxmemory`): every key strata writes has a TTL. Each operation
//! (claim, complete, release) finishes within the configured `timeout`, every command and any
//! wait for a connection included, or is a store error; [`link`] keeps the connections (one
//! per worker thread).
//! Errors never fail a call: the proxy forwards it without idempotency.

mod connect;
mod link;

use std::sync::Arc;
use std::time::Duration;

use redis::RedisResult;
use tokio::time::{Instant, timeout_at};

use super::codec::{self, Stored};
use super::fingerprint::Fingerprint;
use super::record::Record;
use super::store::{Completion, Found};
use super::{RedisError, StoreError};
use crate::config::RedisConfig;
use link::{Link, Live};

/// Every key strata writes starts with this.
pub const KEY_PREFIX: &str = "strata:idem:";

/// Times a claim starts over when the key vanishes between `SET NX` and `GETRANGE`.
const CLAIM_ROUNDS: usize = 3;

/// Bytes of a Redis value beyond `max_record_bytes` that a reply may carry: `Record::size`
/// already counts the whole encoding, this is slack for a marker.
const VALUE_SLACK: usize = 1024;

/// Replace the marker with the record only while it is still ours.
const COMPLETE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
     redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) return 1 end return 0";

/// Delete the marker only while it is still ours.
const RELEASE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
     return redis.call('DEL', KEYS[1]) end return 0";

pub(super) struct RedisStore {
    link: Link,
    ttl_ms: u64,
    max_record_bytes: usize,
}

/// One round of a claim.
enum Round {
    Won,
    /// The key's value, up to the cap; empty when the key has gone.
    Held(Vec<u8>),
}

impl RedisStore {
    pub(super) fn new(config: &RedisConfig, ttl: Duration, max_record_bytes: usize) -> RedisStore {
        RedisStore {
            link: Link::new(config.clone()),
            ttl_ms: u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1),
            max_record_bytes,
        }
    }

    /// Starts connecting now, so a wrong password or an unreachable server is logged at start.
    pub(super) fn warm(&self) {
        self.link.warm();
    }

    pub(super) async fn claim(&self, key: &str, fp: Fingerprint) -> Result<Found, StoreError> {
        let deadline = self.deadline();
        let k = redis_key(key);
        let token = fastrand::u64(..);
        let marker = codec::marker(fp, token);
        for _ in 0..CLAIM_ROUNDS {
            match self.claim_round(deadline, &k, &marker).await? {
                Round::Won => return Ok(Found::Fresh(token)),
                // Expired or released between the two commands: try to claim again.
                Round::Held(value) if value.is_empty() => continue,
                // Our own marker: the SET went through but its reply was lost, and the
                // command was sent again on a new connection.
                Round::Held(value) if value == marker => return Ok(Found::Fresh(token)),
                Round::Held(value) => return self.found(value, fp),
            }
        }
        Err(self.error(RedisError::Contended))
    }

    /// `SET NX`, and when the key is taken, its value (at most `max_record_bytes` and the
    /// slack, plus one byte to tell a longer one).
    async fn claim_round(
        &self,
        deadline: Instant,
        k: &str,
        marker: &[u8],
    ) -> Result<Round, StoreError> {
        let cap = self.max_record_bytes + VALUE_SLACK;
        self.run(deadline, |mut conn| async move {
            let set: Option<String> = redis::cmd("SET")
                .arg(k)
                .arg(marker)
                .arg("NX")
                .arg("PX")
                .arg(self.ttl_ms)
                .query_async(&mut conn)
                .await?;
            if set.is_some() {
                return Ok(Round::Won);
            }
            let value: Vec<u8> = redis::cmd("GETRANGE")
                .arg(k)
                .arg(0)
                .arg(cap)
                .query_async(&mut conn)
                .await?;
            Ok(Round::Held(value))
        })
        .await
    }

    /// What another call's value under the key means for a request with fingerprint `fp`.
    fn found(&self, value: Vec<u8>, fp: Fingerprint) -> Result<Found, StoreError> {
        if value.len() > self.max_record_bytes + VALUE_SLACK {
            return Err(self.error(RedisError::Corrupt("larger than max_record_bytes")));
        }
        let stored =
            codec::decode(&value.into(), fp).map_err(|e| self.error(RedisError::Corrupt(e)))?;
        Ok(match stored {
            Stored::InFlight(theirs) if theirs == fp => Found::InFlight,
            Stored::Done(_, Some(record)) => Found::Done(record),
            Stored::InFlight(_) | Stored::Done(_, None) => Found::Mismatch,
        })
    }

    pub(super) async fn complete(
        &self,
        key: &str,
        fp: Fingerprint,
        token: u64,
        record: &Record,
    ) -> Result<Completion, StoreError> {
        if record.size() > self.max_record_bytes {
            self.release(key, fp, token).await?;
            return Ok(Completion::TooLarge);
        }
        let k = redis_key(key);
        let marker = codec::marker(fp, token);
        let value = codec::encode(fp, record);
        let stored: i64 = self
            .run(self.deadline(), |mut conn| {
                let mut eval = redis::cmd("EVAL");
                eval.arg(COMPLETE).arg(1).arg(&k);
                eval.arg(&marker).arg(&value).arg(self.ttl_ms);
                async move { eval.query_async(&mut conn).await }
            })
            .await?;
        Ok(if stored == 1 {
            Completion::Stored
        } else {
            Completion::Lost
        })
    }

    pub(super) async fn release(
        &self,
        key: &str,
        fp: Fingerprint,
        token: u64,
    ) -> Result<(), StoreError> {
        let k = redis_key(key);
        let marker = codec::marker(fp, token);
        let _deleted: i64 = self
            .run(self.deadline(), |mut conn| {
                let mut eval = redis::cmd("EVAL");
                eval.arg(RELEASE).arg(1).arg(&k).arg(&marker);
                async move { eval.query_async(&mut conn).await }
            })
            .await?;
        Ok(())
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.link.timeout()
    }

    /// `commands` on the connection, by `deadline`. Commands that failed on a connection that
    /// proved dead are sent once more on a new one: a connection may have been closed by a
    /// Redis restart, or point at a master that a failover demoted. Every command the store
    /// sends is safe to repeat.
    async fn run<'a, T, F, Fut>(&'a self, deadline: Instant, commands: F) -> Result<T, StoreError>
    where
        F: Fn(connect::Conn) -> Fut,
        Fut: Future<Output = RedisResult<T>> + 'a,
    {
        let mut tries = 2;
        loop {
            tries -= 1;
            let live: Live = self.link.get(deadline).await.map_err(|e| self.error(e))?;
            match timeout_at(deadline, commands(live.conn.clone())).await {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(e)) => {
                    let failure = self.link.failed(&live, e);
                    if !(failure.dead && tries > 0) {
                        return Err(self.error(failure.error));
                    }
                }
                Err(_) => {
                    self.link.timed_out(&live);
                    return Err(self.error(RedisError::Timeout(self.link.timeout())));
                }
            }
        }
    }

    fn error(&self, source: RedisError) -> StoreError {
        StoreError::Redis {
            addr: Arc::clone(self.link.name()),
            source,
        }
    }
}

fn redis_key(key: &str) -> String {
    let mut k = String::with_capacity(KEY_PREFIX.len() + key.len());
    k.push_str(KEY_PREFIX);
    k.push_str(key);
    k
}
