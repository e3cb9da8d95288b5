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
use hyper::body::Incoming;

use super::body::{BodySink, BoxError, ObservedBody};
use super::inspect::InspectSink;

/// What reading up to the cap gave.
pub(super) enum Buffered {
    /// The whole body, within the cap.
    Whole(Bytes),
    /// The cap was passed: the chunks read so far, and the rest still to stream.
    Over { prefix: Vec<Bytes>, rest: Incoming },
}

/// Reads a body until its end or until more than `cap` bytes were read.
pub(super) async fn read_up_to(mut body: Incoming, cap: usize) -> Result<Buffered, hyper::Error> {
    let mut chunks = Vec::new();
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        // Request trailers are not forwarded on the replay path (MCP requests have none).
        let Ok(data) = frame?.into_data() else {
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

/// The body of one upstream attempt.
pub enum RequestBody {
    /// Streamed as it comes, observed by the request inspector.
    Stream(ObservedBody<Incoming, InspectSink>),
    /// From the replay buffer (cheap to clone: `Bytes`).
    Replay(Option<Bytes>),
    /// Past the cap: the buffered prefix, then the rest streamed.
    Prefixed {
        prefix: VecDeque<Bytes>,
        rest: ObservedBody<Incoming, InspectSink>,
    },
}

impl RequestBody {
    pub fn prefixed(prefix: Vec<Bytes>, rest: Incoming, mut sink: InspectSink) -> RequestBody {
        for chunk in &prefix {
            sink.on_data(chunk);
        }
        RequestBody::Prefixed {
            prefix: prefix.into(),
            rest: ObservedBody::new(rest, sink),
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
