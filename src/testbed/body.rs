//! Response bodies for the testbed: fixed, empty, channel-fed (SSE, drip, resets) and a
//! generated fill body for `large_result`.
//!
//! Every body streams. None of them holds a whole large response in memory: the channel body
//! carries one frame at a time (bounded channel) and the fill body slices a static buffer.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty, Full};
use tokio::sync::mpsc;

/// The body type of every testbed response.
pub(crate) type Body = UnsyncBoxBody<Bytes, BodyError>;

/// Frames in flight between a script task and hyper. Small on purpose: the script waits
/// for hyper to take each frame, so a slow reader slows the script instead of growing a queue.
const CHANNEL_FRAMES: usize = 4;

/// Size of the static buffer the fill body slices; also the largest data frame it yields.
const FILL_CHUNK: usize = 64 * 1024;

/// The filler byte of `large_result`'s text: plain ASCII, so it needs no JSON escaping.
static FILL: [u8; FILL_CHUNK] = [b'x'; FILL_CHUNK];

/// Why a testbed body failed. Always deliberate: the scenario asked for a broken stream.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyError {
    /// The scenario aborts the body mid-stream. hyper then resets the h2 stream, or closes the
    /// HTTP/1.1 connection without the chunked terminator or the promised Content-Length.
    #[error("testbed aborted the response body on purpose")]
    Aborted,
}

pub(crate) fn empty() -> Body {
    Empty::new().map_err(|never| match never {}).boxed_unsync()
}

pub(crate) fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// One item a script task pushes into a [`ChannelBody`].
#[derive(Debug)]
pub(crate) enum Chunk {
    Data(Bytes),
    /// End the body with an error frame (see [`BodyError::Aborted`]).
    Abort,
}

/// A body fed by a task through a bounded channel. When the sender is dropped the body ends
/// cleanly; when the receiver is dropped (the client left) the sender's `send` fails, which is
/// how the feeding task learns to stop.
///
/// An abort is delivered one poll late, after a `Pending`: hyper's HTTP/1.1 writer buffers a
/// data frame and flushes it only once the body returns `Pending`, and an error in the same
/// run drops the buffered bytes. Without the extra poll, a connection task that was not
/// polled during the script's pause (a loaded machine) would receive the data and the abort
/// together, and the client would never get the bytes before the break.
#[derive(Debug)]
pub(crate) struct ChannelBody {
    rx: mpsc::Receiver<Chunk>,
    done: bool,
    /// An abort was received and is delivered at the next poll.
    abort_next: bool,
}

/// A channel body and the sender that feeds it.
pub(crate) fn channel() -> (mpsc::Sender<Chunk>, Body) {
    let (tx, rx) = mpsc::channel(CHANNEL_FRAMES);
    let body = ChannelBody {
        rx,
        done: false,
        abort_next: false,
    };
    (tx, body.boxed_unsync())
}

impl HttpBody for ChannelBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        if this.abort_next {
            this.done = true;
            return Poll::Ready(Some(Err(BodyError::Aborted)));
        }
        match this.rx.poll_recv(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Chunk::Data(bytes))) => Poll::Ready(Some(Ok(Frame::data(bytes)))),
            Poll::Ready(Some(Chunk::Abort)) => {
                // See the type's comment: let hyper flush what came before.
                this.abort_next = true;
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            Poll::Ready(None) => {
                this.done = true;
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }
}

/// `prefix`, then `fill_len` filler bytes, then `suffix`; generated on demand with an exact
/// size hint, so hyper sends a Content-Length and never sees the whole body at once.
#[derive(Debug)]
pub(crate) struct FillBody {
    prefix: Option<Bytes>,
    fill_left: u64,
    suffix: Option<Bytes>,
}

pub(crate) fn fill(prefix: Bytes, fill_len: u64, suffix: Bytes) -> Body {
    FillBody {
        prefix: Some(prefix),
        fill_left: fill_len,
        suffix: Some(suffix),
    }
    .boxed_unsync()
}

impl FillBody {
    fn remaining(&self) -> u64 {
        let len = |b: &Option<Bytes>| b.as_ref().map_or(0, |b| b.len() as u64);
        len(&self.prefix) + self.fill_left + len(&self.suffix)
    }
}

impl HttpBody for FillBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        if let Some(prefix) = this.prefix.take() {
            return Poll::Ready(Some(Ok(Frame::data(prefix))));
        }
        if this.fill_left > 0 {
            let n = usize::try_from(this.fill_left).map_or(FILL_CHUNK, |n| n.min(FILL_CHUNK));
            this.fill_left -= n as u64;
            return Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(&FILL[..n])))));
        }
        Poll::Ready(this.suffix.take().map(|s| Ok(Frame::data(s))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining() == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fill_body_yields_exactly_the_promised_bytes() {
        let body = fill(
            Bytes::from_static(b"<"),
            FILL_CHUNK as u64 * 2 + 3,
            Bytes::from_static(b">"),
        );
        assert_eq!(body.size_hint().exact(), Some(FILL_CHUNK as u64 * 2 + 5));
        let bytes = body
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        assert_eq!(bytes.len(), FILL_CHUNK * 2 + 5);
        assert_eq!(bytes.first(), Some(&b'<'));
        assert_eq!(bytes.last(), Some(&b'>'));
    }

    #[tokio::test]
    async fn channel_body_ends_on_drop_and_errors_on_abort() {
        let (tx, body) = channel();
        tokio::spawn(async move {
            let _ = tx.send(Chunk::Data(Bytes::from_static(b"a"))).await;
        });
        let bytes = body
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        assert_eq!(&bytes[..], b"a");

        let (tx, body) = channel();
        tokio::spawn(async move {
            let _ = tx.send(Chunk::Data(Bytes::from_static(b"a"))).await;
            let _ = tx.send(Chunk::Abort).await;
        });
        assert!(body.collect().await.is_err());
    }
}
