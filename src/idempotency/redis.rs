//! The shared store: keys in Redis, so a repeat that lands on another replica is recognised.
//!
//! - claim: `SET strata:idem:<key> <marker> NX PX <ttl>` — atomic, first caller wins; on a
//!   conflict `GET` decides InFlight / Mismatch / Done (if the key vanished in between, the
//!   claim starts over, a bounded number of times);
//! - complete: a Lua script replaces the value with the record only while it is still this
//!   claim's own marker (its token), so a claim that expired and was taken by another call
//!   never has its successor overwritten;
//! - release: the same compare-and-delete.
//!
//! Bounds are Redis's own (`maxmemory`): every key strata writes has a TTL. Connections come
//! from a small pool (at most [`POOL_SIZE`], idle ones kept), each operation has a connect and
//! an operation timeout, and after a connect failure or timeout the store answers errors at
//! once for [`RedisTimeouts::cooldown`], so an unreachable Redis does not add its timeout to
//! every keyed call. Errors never fail a call: the proxy forwards it without idempotency.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Semaphore;
use tokio::time::{Instant, timeout};

use super::codec::{self, Stored};
use super::fingerprint::Fingerprint;
use super::record::Record;
use super::resp::{Conn, Reply};
use super::store::{Completion, Found};
use super::{RedisError, StoreError};

/// Every key strata writes starts with this.
pub const KEY_PREFIX: &str = "strata:idem:";

/// Connections open at most (and idle connections kept).
pub const POOL_SIZE: usize = 16;

/// Times a claim starts over when the key vanishes between `SET NX` and `GET`.
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

/// How long the Redis store waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RedisTimeouts {
    /// For a new connection (and its `SELECT`).
    pub connect: Duration,
    /// For one command's reply, the wait for a pooled connection included.
    pub operation: Duration,
    /// After a connect failure or a timeout, operations fail at once for this long.
    pub cooldown: Duration,
}

impl Default for RedisTimeouts {
    fn default() -> Self {
        // A Redis next to the proxy answers in well under a millisecond; these only bound
        // how long a keyed call waits when it does not.
        RedisTimeouts {
            connect: Duration::from_millis(500),
            operation: Duration::from_millis(500),
            cooldown: Duration::from_secs(1),
        }
    }
}

pub(super) struct RedisStore {
    host: String,
    port: u16,
    db: u32,
    /// `host:port/db`, for errors.
    addr: Arc<str>,
    ttl_ms: Vec<u8>,
    max_record_bytes: usize,
    timeouts: RedisTimeouts,
    permits: Semaphore,
    idle: Mutex<Vec<Conn>>,
    down_until: Mutex<Option<Instant>>,
}

impl RedisStore {
    pub(super) fn new(
        host: &str,
        port: u16,
        db: u32,
        ttl: Duration,
        max_record_bytes: usize,
        timeouts: RedisTimeouts,
    ) -> RedisStore {
        RedisStore {
            host: host.to_owned(),
            port,
            db,
            addr: format!("{host}:{port}/{db}").into(),
            ttl_ms: ttl.as_millis().max(1).to_string().into_bytes(),
            max_record_bytes,
            timeouts,
            permits: Semaphore::new(POOL_SIZE),
            idle: Mutex::new(Vec::new()),
            down_until: Mutex::new(None),
        }
    }

    fn error(&self, source: RedisError) -> StoreError {
        StoreError::Redis {
            addr: self.addr.clone(),
            source,
        }
    }

    pub(super) async fn claim(&self, key: &str, fp: Fingerprint) -> Result<Found, StoreError> {
        let k = redis_key(key);
        let token = fastrand::u64(..);
        let marker = codec::marker(fp, token);
        for _ in 0..CLAIM_ROUNDS {
            let set = [b"SET", &k[..], &marker[..], b"NX", b"PX", &self.ttl_ms[..]];
            match self.call(&set).await? {
                Reply::Status(_) => return Ok(Found::Fresh(token)),
                Reply::Bulk(None) => {}
                _ => return Err(self.error(RedisError::Protocol("unexpected reply to SET"))),
            }
            let value = match self.call(&[b"GET", &k[..]]).await? {
                Reply::Bulk(Some(value)) => value,
                // Expired or released between the two commands: try to claim again.
                Reply::Bulk(None) => continue,
                _ => return Err(self.error(RedisError::Protocol("unexpected reply to GET"))),
            };
            // Our own marker: the SET went through but its reply was lost, and the command
            // was sent again on a fresh connection.
            if value[..] == marker[..] {
                return Ok(Found::Fresh(token));
            }
            let stored =
                codec::decode(&value, fp).map_err(|e| self.error(RedisError::Corrupt(e)))?;
            return Ok(match stored {
                Stored::InFlight(theirs) if theirs == fp => Found::InFlight,
                Stored::Done(_, Some(record)) => Found::Done(record),
                Stored::InFlight(_) | Stored::Done(_, None) => Found::Mismatch,
            });
        }
        Err(self.error(RedisError::Contended))
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
        let args = [
            b"EVAL",
            COMPLETE.as_bytes(),
            b"1",
            &k[..],
            &marker[..],
            &value[..],
            &self.ttl_ms[..],
        ];
        match self.call(&args).await? {
            Reply::Integer(1) => Ok(Completion::Stored),
            Reply::Integer(_) => Ok(Completion::Lost),
            _ => Err(self.error(RedisError::Protocol("unexpected reply to EVAL"))),
        }
    }

    pub(super) async fn release(
        &self,
        key: &str,
        fp: Fingerprint,
        token: u64,
    ) -> Result<(), StoreError> {
        let k = redis_key(key);
        let marker = codec::marker(fp, token);
        match self
            .call(&[b"EVAL", RELEASE.as_bytes(), b"1", &k[..], &marker[..]])
            .await?
        {
            Reply::Integer(_) => Ok(()),
            _ => Err(self.error(RedisError::Protocol("unexpected reply to EVAL"))),
        }
    }

    /// One command on a pooled connection. A command that failed on a reused connection is
    /// sent once more on a new one: a pooled connection may have been closed by a Redis
    /// restart or its idle `timeout`. Every command the store sends is safe to repeat.
    async fn call(&self, args: &[&[u8]]) -> Result<Reply, StoreError> {
        if let Some(until) = *self.down_until.lock().unwrap_or_else(|e| e.into_inner())
            && Instant::now() < until
        {
            return Err(self.error(RedisError::CoolingDown(self.timeouts.cooldown)));
        }
        let reused = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let was_reused = reused.is_some();
        match self.call_on(reused, args).await {
            Err(RedisError::Io(_) | RedisError::Closed) if was_reused => {
                self.call_on(None, args).await.map_err(|e| self.failed(e))
            }
            result => result.map_err(|e| self.failed(e)),
        }
    }

    async fn call_on(&self, conn: Option<Conn>, args: &[&[u8]]) -> Result<Reply, RedisError> {
        let op = self.timeouts.operation;
        let Ok(Ok(_permit)) = timeout(op, self.permits.acquire()).await else {
            return Err(RedisError::Timeout(op));
        };
        let mut conn = match conn {
            Some(conn) => conn,
            None => {
                let max_bulk = self.max_record_bytes + VALUE_SLACK;
                let open = Conn::open(&self.host, self.port, self.db, max_bulk);
                timeout(self.timeouts.connect, open)
                    .await
                    .map_err(|_| RedisError::ConnectTimeout(self.timeouts.connect))??
            }
        };
        let reply = timeout(op, conn.call(args))
            .await
            .map_err(|_| RedisError::Timeout(op))??;
        // The exchange finished cleanly, so the connection is in a known state: keep it.
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < POOL_SIZE {
            idle.push(conn);
        }
        drop(idle);
        match reply {
            Reply::Error(message) => Err(RedisError::Server(message)),
            reply => Ok(reply),
        }
    }

    /// Notes a failure; ones that suggest Redis is unreachable start the cooldown.
    fn failed(&self, e: RedisError) -> StoreError {
        if matches!(
            e,
            RedisError::Connect(_) | RedisError::ConnectTimeout(_) | RedisError::Timeout(_)
        ) {
            let until = Instant::now() + self.timeouts.cooldown;
            *self.down_until.lock().unwrap_or_else(|e| e.into_inner()) = Some(until);
        }
        self.error(e)
    }
}

fn redis_key(key: &str) -> Bytes {
    let mut k = Vec::with_capacity(KEY_PREFIX.len() + key.len());
    k.extend_from_slice(KEY_PREFIX.as_bytes());
    k.extend_from_slice(key.as_bytes());
    Bytes::from(k)
}
