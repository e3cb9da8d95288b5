//! Body wrappers on the data path. Each forwards frames unchanged and only *shows* the bytes
//! to a sink (borrowed, never copied): the proxy never buffers a body here. The one frame ever
//! held is an observed body's last, while its sink's end settles (a record stored in Redis).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use hyper::body::Incoming;
use tokio::time::{Instant, Sleep};

use super::after_ready::AfterReady;
use super::h1_conns::ResponseBody;
use crate::metrics::ResponseBytes;

/// Errors of bodies on the data path (hyper's, or strata's idle timeout).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How an observed body ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyEnd {
    /// The inner body reached its end cleanly.
    Complete,
    /// The inner body failed (the upstream connection broke, or framing was bad).
    Error,
    /// The body was dropped before its end: the receiving side went away.
    Dropped,
}

/// Work a sink's end leaves to finish before the body's last frame goes on (an idempotency
/// record stored in Redis), bounded by its own timeout.
pub type Settling = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Sees each data chunk of a body as it passes, then its end, exactly once.
pub trait BodySink: Send + 'static {
    fn on_data(&mut self, chunk: &[u8]);
    fn on_end(&mut self, end: BodyEnd);

    /// After `on_end`: what must be done before the last frame is handed on, if anything.
    fn settle(&mut self) -> Option<Settling> {
        None
    }

    /// The body reached its end (`Complete` or `Error`): `on_end`, then what it leaves to
    /// settle.
    fn end(&mut self, end: BodyEnd) -> Option<Settling> {
        self.on_end(end);
        self.settle()
    }
}

/// A boxed sink (the call tracker, `AgentBody`): the body that carries it moves as a pointer.
impl<S: BodySink + ?Sized> BodySink for Box<S> {
    fn on_data(&mut self, chunk: &[u8]) {
        (**self).on_data(chunk);
    }

    fn on_end(&mut self, end: BodyEnd) {
        (**self).on_end(end);
    }

    fn settle(&mut self) -> Option<Settling> {
        (**self).settle()
    }
}

/// The last frame, held while the sink's end settles.
struct Held<E> {
    frame: Option<Result<Frame<Bytes>, E>>,
    settling: Settling,
}

pin_project_lite::pin_project! {
    /// Forwards `inner` unchanged while showing each data chunk to `sink`; the last frame
    /// waits for what the sink's end must settle first (boxed: few bodies hold one, and
    /// every open stream keeps room for this type).
    pub struct ObservedBody<B: Body, S: BodySink> {
        #[pin]
        inner: B,
        sink: Option<S>,
        held: Option<Box<Held<B::Error>>>,
    }

    impl<B: Body, S: BodySink> PinnedDrop for ObservedBody<B, S> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            // Dropped before its end: the receiver went away (or the exchange was abandoned).
            if let Some(mut sink) = this.sink.take() {
                sink.on_end(BodyEnd::Dropped);
            }
            // The receiver left while the end settled: it settles without it.
            if let Some(held) = this.held.take() {
                tokio::spawn(held.settling);
            }
        }
    }
}

// === impl ObservedBody ===

impl<B: Body, S: BodySink> ObservedBody<B, S> {
    /// Whether the last frame is held until the sink's end settles.
    pub fn is_settling(&self) -> bool {
        self.held.is_some()
    }

    pub fn new(inner: B, mut sink: S) -> Self {
        // An empty body (202, 204, `Content-Length: 0`) is never polled by hyper: it ends now,
        // and what its end leaves settles in a task.
        let sink = if inner.is_end_stream() {
            if let Some(settling) = sink.end(BodyEnd::Complete) {
                tokio::spawn(settling);
            }
            None
        } else {
            Some(sink)
        };
        Self {
            inner,
            sink,
            held: None,
        }
    }
}

impl<B, S> Body for ObservedBody<B, S>
where
    B: Body<Data = Bytes>,
    S: BodySink,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let mut this = self.project();
        if let Some(held) = this.held.as_mut() {
            ready!(held.settling.as_mut().poll(cx));
            let frame = held.frame.take();
            *this.held = None;
            return Poll::Ready(frame);
        }
        let frame = ready!(this.inner.as_mut().poll_frame(cx));
        let end = match &frame {
            Some(Ok(frame)) => {
                if let (Some(data), Some(sink)) = (frame.data_ref(), this.sink.as_mut()) {
                    sink.on_data(data);
                }
                // hyper stops polling a body whose known length is reached, so the end must
                // be seen here, not only as a final `None`.
                this.inner.is_end_stream().then_some(BodyEnd::Complete)
            }
            Some(Err(_)) => Some(BodyEnd::Error),
            None => Some(BodyEnd::Complete),
        };
        if let Some(end) = end
            && let Some(mut sink) = this.sink.take()
            && let Some(mut settling) = sink.end(end)
            && settling.as_mut().poll(cx).is_pending()
        {
            *this.held = Some(Box::new(Held { frame, settling }));
            return Poll::Pending;
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.held.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The upstream went quiet for longer than `timeouts.body_idle`.
#[derive(Debug, thiserror::Error)]
#[error("upstream body idle for more than {0:?}")]
pub struct IdleTimeout(Duration);

/// A response body as the upstream client gives it.
pub enum FromUpstream {
    /// A connection of strata's own (`http://`, `h1_conns.rs`).
    H1(ResponseBody),
    /// hyper-util's client (`https://`, or a streamed request body).
    Pooled(Incoming),
}

impl FromUpstream {
    /// A response the retry policy passes over: what of its body has arrived is read past, so
    /// that a connection of strata's own serves the next attempt ([`ResponseBody::discard`]).
    /// hyper-util's client carries only streamed request bodies, never re-sent.
    pub(super) fn discard(self) {
        match self {
            FromUpstream::H1(body) => body.discard(),
            FromUpstream::Pooled(_) => {}
        }
    }

    /// [`Self::discard`] given the wait before a retry ([`ResponseBody::drain`]).
    pub(super) async fn drain(self) {
        match self {
            FromUpstream::H1(body) => body.drain().await,
            FromUpstream::Pooled(_) => {}
        }
    }
}

/// The upstream's response body, cut when it stays silent past an optional idle limit (off
/// by default: quiet SSE streams are normal). The timer runs only while strata waits for the
/// upstream, never while a slow agent holds the stream back (the body is not polled then).
pub struct UpstreamBody {
    inner: FromUpstream,
    idle: Option<(Duration, Pin<Box<Sleep>>)>,
    /// `strata_response_bytes_total`, this worker's copy.
    bytes: ResponseBytes,
    /// The head, or a data frame, went to hyper since this body last returned `Pending`.
    unflushed: bool,
    /// An error held back until what came before it was flushed, and the wait for that
    /// (boxed: rare, and every open stream would carry the room).
    deferred: Option<Box<(BoxError, AfterReady)>>,
}

/// The body strata sends to the agent: the upstream's, observed, or one strata wrote itself
/// (its own 502/504 answers).
pub enum ProxyBody<S: BodySink> {
    Observed(ObservedBody<UpstreamBody, S>),
    Plain(UpstreamBody),
    Local(Full<Bytes>),
    /// strata's own answer classified like an upstream's: a recorded answer replayed for an
    /// idempotency key, or a refused call's (`limited.rs`).
    Replayed(ObservedBody<Full<Bytes>, S>),
    /// An SSE stream with keep-alive comments (`timeouts.sse_keepalive`).
    KeepAlive(Pin<Box<super::sse_keepalive::KeepAlive<ProxyBody<S>>>>),
}

// === impl UpstreamBody ===

impl UpstreamBody {
    pub fn new(inner: FromUpstream, idle: Option<Duration>, bytes: ResponseBytes) -> Self {
        let idle = idle.map(|d| (d, Box::pin(tokio::time::sleep(d))));
        UpstreamBody {
            inner,
            idle,
            bytes,
            unflushed: true,
            deferred: None,
        }
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Some(held) = this.deferred.as_mut() {
            ready!(held.1.poll_ready(cx));
            if let Some(held) = this.deferred.take() {
                return Poll::Ready(Some(Err(held.0)));
            }
        }
        let polled = this.inner.poll_frame(cx);
        match polled {
            // hyper drops what it has not flushed yet when a body fails — its HTTP/1.1 server
            // the head and data still in its buffer, h2 the DATA frames still queued when it
            // resets the stream. So an error right behind the head or data waits until the
            // tasks ready to run have run (the connection's own, under h2), as it did when
            // the upstream connection ran in a task of its own: the agent gets the head and
            // the bytes before the break.
            Poll::Ready(Some(Err(err))) if this.unflushed => {
                this.unflushed = false;
                let mut flushed = AfterReady::new();
                // Pending the first time: this task is woken after the others.
                let _ = flushed.poll_ready(cx);
                this.deferred = Some(Box::new((err, flushed)));
                Poll::Pending
            }
            Poll::Ready(frame) => {
                if let Some(Ok(data)) = frame.as_ref().map(|f| f.as_ref().map(Frame::data_ref))
                    && let Some(data) = data
                {
                    this.bytes.add(data.len() as u64);
                    this.unflushed = true;
                }
                if let Some((limit, sleep)) = this.idle.as_mut() {
                    sleep.as_mut().reset(Instant::now() + *limit);
                }
                Poll::Ready(frame)
            }
            Poll::Pending => {
                this.unflushed = false;
                if let Some((limit, sleep)) = this.idle.as_mut()
                    && sleep.as_mut().poll(cx).is_ready()
                {
                    return Poll::Ready(Some(Err(Box::new(IdleTimeout(*limit)))));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            FromUpstream::H1(b) => b.is_end_stream(),
            FromUpstream::Pooled(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            FromUpstream::H1(b) => b.size_hint(),
            FromUpstream::Pooled(b) => b.size_hint(),
        }
    }
}

// === impl FromUpstream ===

impl FromUpstream {
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self {
            FromUpstream::H1(b) => Pin::new(b).poll_frame(cx).map_err(BoxError::from),
            FromUpstream::Pooled(b) => Pin::new(b).poll_frame(cx).map_err(BoxError::from),
        }
    }
}

// === impl ProxyBody ===

impl<S: BodySink> ProxyBody<S> {
    pub fn local(bytes: impl Into<Bytes>) -> Self {
        ProxyBody::Local(Full::new(bytes.into()))
    }

    /// The last frame is held while the sink's end settles: what is buffered before it can
    /// wait to go out with it, in one write.
    pub fn is_settling(&self) -> bool {
        match self {
            ProxyBody::Observed(b) => b.is_settling(),
            ProxyBody::Replayed(b) => b.is_settling(),
            // An SSE answer's keep-alive comments go out as they come, held frame or not.
            ProxyBody::Plain(_) | ProxyBody::Local(_) | ProxyBody::KeepAlive(_) => false,
        }
    }
}

impl<S: BodySink> Body for ProxyBody<S> {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        // SAFETY-free pin projection: every variant is Unpin (Incoming, Full, ObservedBody
        // over them, and a pinned box), so the enum is Unpin too.
        match self.get_mut() {
            ProxyBody::Observed(b) => Pin::new(b).poll_frame(cx),
            ProxyBody::Plain(b) => Pin::new(b).poll_frame(cx),
            ProxyBody::Local(b) => Pin::new(b).poll_frame(cx).map_err(|never| match never {}),
            ProxyBody::Replayed(b) => Pin::new(b).poll_frame(cx).map_err(|never| match never {}),
            ProxyBody::KeepAlive(b) => b.as_mut().poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ProxyBody::Observed(b) => b.is_end_stream(),
            ProxyBody::Plain(b) => b.is_end_stream(),
            ProxyBody::Local(b) => b.is_end_stream(),
            ProxyBody::Replayed(b) => b.is_end_stream(),
            ProxyBody::KeepAlive(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ProxyBody::Observed(b) => b.size_hint(),
            ProxyBody::Plain(b) => b.size_hint(),
            ProxyBody::Local(b) => b.size_hint(),
            ProxyBody::Replayed(b) => b.size_hint(),
            ProxyBody::KeepAlive(b) => b.size_hint(),
        }
    }
}

#[cfg(test)]
#[path = "body/tests.rs"]
mod tests;
