//! What the testbed sent: an opt-in record, per JSON-RPC request id, of each POST answer's
//! status and body bytes (length, hash, first bytes), so a soak can check that every byte an
//! agent received through strata is exactly what the upstream sent.
//!
//! The record is taken in-process rather than carried in a header: a header would add bytes
//! the upstream did not otherwise send, and the check is about transparency.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::Response;
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::BodyExt;

use super::body::{Body, BodyError};

/// Records held at most. A consumer takes each record once it has its answer, so the map only
/// holds the answers in flight; past this, new records are dropped and counted instead.
pub const MAX_SENT_RECORDS: usize = 65_536;
/// Body bytes kept verbatim at the start of each record: enough for every testbed body that
/// breaks mid-stream, so a receipt cut short can be checked as an exact prefix.
pub const SENT_PREFIX_BYTES: usize = 4096;

/// 64-bit FNV-1a, fed incrementally: cheap, deterministic across processes, and enough to
/// tell two bodies apart (corruption, not an adversary, is what it guards against).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyHash(u64);

impl Default for BodyHash {
    fn default() -> Self {
        BodyHash(0xcbf2_9ce4_8422_2325)
    }
}

impl BodyHash {
    pub fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    pub fn value(self) -> u64 {
        self.0
    }

    /// The hash of `bytes` alone.
    pub fn of(bytes: &[u8]) -> u64 {
        let mut h = BodyHash::default();
        h.update(bytes);
        h.value()
    }
}

/// How a recorded body ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SentEnd {
    /// Every byte was handed to hyper and the body ended cleanly.
    Complete,
    /// The scenario broke the body on purpose (`json_reset`, `sse_reset`).
    Aborted,
    /// hyper dropped the body before its end (the client went away).
    Dropped,
}

/// One answer as the testbed handed it to hyper.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentBody {
    pub status: u16,
    /// Body bytes handed to hyper.
    pub len: u64,
    /// [`BodyHash`] of those bytes.
    pub hash: u64,
    /// The first [`SENT_PREFIX_BYTES`] of them.
    pub prefix: Bytes,
    pub end: SentEnd,
}

/// The records, keyed by the request id's JSON text (`7`, `"a"`).
#[derive(Debug, Default)]
pub(crate) struct SentLog {
    map: Mutex<HashMap<String, SentBody>>,
    dropped: AtomicU64,
}

impl SentLog {
    /// Wraps `resp`'s body so that its record is written when it ends. A later answer to the
    /// same id replaces the earlier record: consumers that check records use unique ids.
    pub(crate) fn record(self: &Arc<Self>, key: String, resp: Response<Body>) -> Response<Body> {
        let status = resp.status().as_u16();
        resp.map(|inner| {
            let mut body = Recorded {
                inner,
                log: Arc::clone(self),
                key: Some(key),
                status,
                len: 0,
                hash: BodyHash::default(),
                prefix: BytesMut::new(),
            };
            // hyper never polls a body that is already at its end (no body, 202, 503).
            if body.inner.is_end_stream() {
                body.finish(SentEnd::Complete);
            }
            body.boxed_unsync()
        })
    }

    pub(crate) fn take(&self, key: &str) -> Option<SentBody> {
        self.lock().remove(key)
    }

    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn insert(&self, key: String, sent: SentBody) {
        let mut map = self.lock();
        if map.len() >= MAX_SENT_RECORDS && !map.contains_key(&key) {
            drop(map);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        map.insert(key, sent);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, SentBody>> {
        // Short critical sections that cannot leave the map half-updated.
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A body that hashes what it yields and writes its record at its end: before the last frame
/// (or the error) reaches hyper, so the record exists before the client can see that end.
struct Recorded {
    inner: Body,
    log: Arc<SentLog>,
    /// `None` once the record is written.
    key: Option<String>,
    status: u16,
    len: u64,
    hash: BodyHash,
    prefix: BytesMut,
}

impl Recorded {
    fn finish(&mut self, end: SentEnd) {
        let Some(key) = self.key.take() else {
            return;
        };
        let sent = SentBody {
            status: self.status,
            len: self.len,
            hash: self.hash.value(),
            prefix: std::mem::take(&mut self.prefix).freeze(),
            end,
        };
        self.log.insert(key, sent);
    }

    fn see(&mut self, data: &[u8]) {
        self.len += data.len() as u64;
        self.hash.update(data);
        let room = SENT_PREFIX_BYTES.saturating_sub(self.prefix.len());
        self.prefix
            .extend_from_slice(data.get(..room.min(data.len())).unwrap_or_default());
    }
}

impl HttpBody for Recorded {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Pending => {}
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.see(data);
                }
                if this.inner.is_end_stream() {
                    this.finish(SentEnd::Complete);
                }
            }
            Poll::Ready(Some(Err(_))) => this.finish(SentEnd::Aborted),
            Poll::Ready(None) => this.finish(SentEnd::Complete),
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Recorded {
    fn drop(&mut self) {
        self.finish(SentEnd::Dropped);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::body::{self, Chunk};
    use http::StatusCode;

    fn response(body: Body) -> Response<Body> {
        let mut resp = Response::new(body);
        *resp.status_mut() = StatusCode::OK;
        resp
    }

    async fn drain(resp: Response<Body>) -> Result<Bytes, BodyError> {
        resp.into_body().collect().await.map(|c| c.to_bytes())
    }

    #[tokio::test]
    async fn a_complete_body_is_recorded_with_its_hash_and_size_hint() {
        let log = Arc::new(SentLog::default());
        let resp = log.record("7".into(), response(body::full("hello")));
        assert_eq!(resp.body().size_hint().exact(), Some(5));
        assert!(log.take("7").is_none(), "recorded only at the end");
        let bytes = drain(resp).await.unwrap_or_default();
        let sent = log.take("7");
        assert_eq!(
            sent,
            Some(SentBody {
                status: 200,
                len: 5,
                hash: BodyHash::of(&bytes),
                prefix: Bytes::from_static(b"hello"),
                end: SentEnd::Complete,
            })
        );
        assert!(log.take("7").is_none(), "a record is taken once");
    }

    #[tokio::test]
    async fn empty_aborted_and_dropped_bodies_are_recorded() {
        let log = Arc::new(SentLog::default());
        let _resp = log.record("e".into(), response(body::empty()));
        assert_eq!(
            log.take("e").map(|s| (s.len, s.end)),
            Some((0, SentEnd::Complete))
        );

        let (tx, b) = body::channel();
        tokio::spawn(async move {
            let _ = tx.send(Chunk::Data(Bytes::from_static(b"half"))).await;
            let _ = tx.send(Chunk::Abort).await;
        });
        assert!(drain(log.record("a".into(), response(b))).await.is_err());
        let sent = log.take("a");
        assert_eq!(
            sent.map(|s| (s.prefix, s.end)),
            Some((Bytes::from_static(b"half"), SentEnd::Aborted))
        );

        let (_tx, b) = body::channel();
        drop(log.record("d".into(), response(b)));
        assert_eq!(log.take("d").map(|s| s.end), Some(SentEnd::Dropped));
    }

    #[tokio::test]
    async fn the_prefix_is_capped_and_the_hash_covers_everything() {
        let log = Arc::new(SentLog::default());
        let big = vec![b'x'; SENT_PREFIX_BYTES * 3 + 1];
        let resp = log.record("b".into(), response(body::full(big.clone())));
        drain(resp).await.unwrap_or_default();
        let sent = log.take("b");
        assert_eq!(
            sent.map(|s| (s.len, s.hash, s.prefix.len())),
            Some((big.len() as u64, BodyHash::of(&big), SENT_PREFIX_BYTES))
        );
    }

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        // From the FNV reference (draft-eastlake-fnv): "" and "a".
        assert_eq!(BodyHash::of(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(BodyHash::of(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
