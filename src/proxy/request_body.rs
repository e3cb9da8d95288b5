//! The request body strata sends upstream, and the one buffer on the data path: the named,
//! capped retry replay buffer (`retry.replay_buffer`). A POST body that ends within the cap is
//! kept whole so the call can be re-sent; a larger one is forwarded — what was read, then the
//! rest as it streams — and is never retried.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;

use tokio::sync::oneshot;

use super::body::{BodySink, BoxError, ObservedBody};
use super::from_agent::FromAgent;
use crate::observe::inspect::InspectSink;

/// What reading up to the cap gave.
pub(super) enum Buffered {
    /// The whole body, within the cap.
    Whole(Bytes),
    /// The cap was passed: the chunks read so far, and the rest still to stream.
    Over { prefix: Vec<Bytes>, rest: FromAgent },
}

/// Why a body could not be read into the buffer.
pub(super) enum ReadError {
    /// The agent's body broke (reset, bad framing).
    Broken,
    /// The agent paused longer than `timeouts.request_body_idle`.
    Idle,
}

/// Reads a body until its end or until more than `cap` bytes were read, with at most `idle`
/// between frames: the agent is waiting for nothing here, so a pause is its own doing. (A
/// body strata's own connection read whole, within `cap`, is taken without this future:
/// `Proxy::handle`.)
pub(super) async fn read_up_to(
    mut body: FromAgent,
    cap: usize,
    idle: Option<std::time::Duration>,
) -> Result<Buffered, ReadError> {
    let mut chunks = Vec::new();
    let mut total = 0usize;
    loop {
        let frame = match idle {
            Some(idle) => tokio::time::timeout(idle, body.frame())
                .await
                .map_err(|_| ReadError::Idle)?,
            None => body.frame().await,
        };
        let Some(frame) = frame else { break };
        // Request trailers are not forwarded on the replay path (MCP requests have none).
        let Ok(data) = frame.map_err(|_| ReadError::Broken)?.into_data() else {
            continue;
        };
        total += data.len();
        chunks.push(data);
        if total > cap {
            return Ok(Buffered::Over {
                prefix: chunks,
                rest: body,
            });
        }
    }
    Ok(Buffered::Whole(concat(chunks, total)))
}

fn concat(mut chunks: Vec<Bytes>, total: usize) -> Bytes {
    if chunks.len() == 1 {
        return chunks.pop().unwrap_or_default();
    }
    let mut all = BytesMut::with_capacity(total);
    for c in chunks {
        all.extend_from_slice(&c);
    }
    all.freeze()
}

/// The agent's body on its way upstream, observed by the request inspector.
pub(super) type Observed = ObservedBody<FromAgent, InspectSink>;

/// The body of one upstream attempt.
pub enum RequestBody {
    /// Streamed as it comes, observed by the request inspector.
    Stream(Reclaim<Observed>),
    /// From the replay buffer (cheap to clone: `Bytes`).
    Replay(Option<Bytes>),
    /// Past the cap: the buffered prefix, then the rest streamed.
    Prefixed {
        prefix: VecDeque<Bytes>,
        rest: ObservedBody<FromAgent, InspectSink>,
    },
}

impl RequestBody {
    /// A streamed body; the receiver gets it back if the client drops it (see [`Reclaim`]).
    pub fn stream(body: Observed) -> (RequestBody, oneshot::Receiver<Observed>) {
        let (body, back) = Reclaim::new(body);
        (RequestBody::Stream(body), back)
    }

    pub fn prefixed(prefix: Vec<Bytes>, rest: FromAgent, mut sink: InspectSink) -> RequestBody {
        for chunk in &prefix {
            sink.on_data(chunk);
        }
        RequestBody::Prefixed {
            prefix: prefix.into(),
            rest: ObservedBody::new(rest, sink),
        }
    }

    /// The whole body, when it is known before it is sent: the replay buffer's, or none at
    /// all (an empty stream), taken out (an empty body is left). `None` for one still to
    /// stream.
    pub fn take_whole(&mut self) -> Option<Bytes> {
        match self {
            RequestBody::Replay(bytes) => Some(bytes.take().unwrap_or_default()),
            RequestBody::Stream(b) if b.is_end_stream() => Some(Bytes::new()),
            RequestBody::Stream(_) | RequestBody::Prefixed { .. } => None,
        }
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            RequestBody::Stream(b) => Pin::new(b).poll_frame(cx).map_err(BoxError::from),
            RequestBody::Replay(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            RequestBody::Prefixed { prefix, rest } => match prefix.pop_front() {
                Some(chunk) => Poll::Ready(Some(Ok(Frame::data(chunk)))),
                None => Pin::new(rest).poll_frame(cx).map_err(BoxError::from),
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            RequestBody::Stream(b) => b.is_end_stream(),
            RequestBody::Replay(bytes) => bytes.is_none(),
            RequestBody::Prefixed { prefix, rest } => prefix.is_empty() && rest.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            RequestBody::Stream(b) => b.size_hint(),
            RequestBody::Replay(bytes) => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
            RequestBody::Prefixed { prefix, rest } => {
                let buffered: u64 = prefix.iter().map(|c| c.len() as u64).sum();
                let rest = rest.size_hint();
                // A fresh hint: `set_lower` past the old upper bound would panic.
                let mut hint = SizeHint::new();
                if let Some(upper) = rest.upper() {
                    hint.set_upper(upper.saturating_add(buffered));
                }
                hint.set_lower(rest.lower().saturating_add(buffered));
                hint
            }
        }
    }
}

/// Hands its inner body back through a channel when dropped. The upstream client drops a
/// request it could not send (connect error) before it reports the error; a streamed body was
/// then never read, and the inspector never saw the calls in it. With the body back, the
/// proxy reads it through the inspector ([`read_unsent`]) so they still get their outcome.
pub struct Reclaim<B> {
    inner: Option<B>,
    back: Option<oneshot::Sender<B>>,
}

impl<B> Reclaim<B> {
    pub fn new(inner: B) -> (Self, oneshot::Receiver<B>) {
        let (tx, rx) = oneshot::channel();
        let body = Reclaim {
            inner: Some(inner),
            back: Some(tx),
        };
        (body, rx)
    }
}

impl<B> Drop for Reclaim<B> {
    fn drop(&mut self) {
        if let (Some(inner), Some(back)) = (self.inner.take(), self.back.take()) {
            // Nobody waiting (the exchange went on normally): the body is dropped here.
            let _ = back.send(inner);
        }
    }
}

impl<B: Body + Unpin> Body for Reclaim<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        match self.get_mut().inner.as_mut() {
            Some(inner) => Pin::new(inner).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}

/// Longest strata reads a request body it could not send upstream, to learn the calls in it.
/// The agent sends its body right after the head; this only bounds a stalled one.
pub(super) const UNSENT_BODY_READ: std::time::Duration = std::time::Duration::from_secs(1);

/// Reads (and drops) up to `cap` bytes of a body the upstream never got, through its
/// inspector, at most [`UNSENT_BODY_READ`].
pub(super) async fn read_unsent(mut body: Observed, cap: usize) {
    let read = async {
        let mut seen = 0usize;
        while seen < cap {
            match body.frame().await {
                Some(Ok(frame)) => seen += frame.data_ref().map_or(0, Bytes::len),
                Some(Err(_)) | None => break,
            }
        }
    };
    let _ = tokio::time::timeout(UNSENT_BODY_READ, read).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Full;

    #[tokio::test]
    async fn reclaim_hands_an_unsent_body_back_on_drop() {
        let (body, back) = Reclaim::new(Full::new(Bytes::from_static(b"{}")));
        drop(body);
        let inner = back.await.unwrap();
        assert_eq!(&inner.collect().await.unwrap().to_bytes()[..], b"{}");

        // Read through: the same bytes; nobody waits for it back.
        let (body, back) = Reclaim::new(Full::new(Bytes::from_static(b"ab")));
        drop(back);
        assert_eq!(&body.collect().await.unwrap().to_bytes()[..], b"ab");
    }

    #[test]
    fn a_whole_body_is_taken_out_once() {
        let mut body = RequestBody::Replay(Some(Bytes::from_static(b"{}")));
        assert_eq!(body.take_whole().as_deref(), Some(&b"{}"[..]));
        // What is left is an empty body, whole too.
        assert!(body.is_end_stream());
        assert_eq!(body.take_whole().as_deref(), Some(&b""[..]));
    }
}
