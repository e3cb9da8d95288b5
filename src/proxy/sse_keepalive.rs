//! Opt-in SSE keep-alive (`timeouts.sse_keepalive`): load balancers cut streams that stay
//! quiet for a few minutes, and MCP servers often send nothing while a tool runs. When the
//! upstream has sent nothing for the set time, strata sends the agent an SSE comment line
//! (`:` and a blank line; WHATWG HTML §9.2.6: a line starting with a colon is ignored).
//!
//! A comment must never land inside an event: its lines would join that event. So it is only
//! sent at an event boundary, when the bytes forwarded so far end with a blank line (or none
//! were forwarded yet). [`Boundary`] tracks that from the trailing line terminators of each
//! chunk alone, a few bytes per chunk, never the body.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// The comment strata sends.
pub(super) const COMMENT: &[u8] = b":\n\n";

/// Where the forwarded bytes stand, in terms of SSE lines (line ends: CRLF, LF or CR).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Boundary {
    /// Nothing forwarded yet, or the last line forwarded was blank: between events.
    Between,
    /// Inside a line.
    InLine,
    /// A line just ended with LF (or CRLF): one more line end is a blank line.
    AfterLf,
    /// A line just ended with CR: an LF next is the same line end; anything else starts a line.
    AfterCr,
    /// A blank line ended with CR: an LF next belongs to it.
    BetweenAfterCr,
}

impl Boundary {
    /// The state after `chunk`. Only the trailing run of CR and LF bytes can matter: any
    /// other byte puts the stream inside a line.
    pub(super) fn after(self, chunk: &[u8]) -> Boundary {
        let tail = chunk
            .iter()
            .rposition(|b| !matches!(b, b'\r' | b'\n'))
            .map_or(0, |at| at + 1);
        let start = if tail == 0 { self } else { Boundary::InLine };
        chunk[tail..].iter().fold(start, |state, &b| state.step(b))
    }

    fn step(self, b: u8) -> Boundary {
        use Boundary::*;
        match (self, b) {
            // LF right after a CR completes that CR's line end.
            (AfterCr, b'\n') => AfterLf,
            (BetweenAfterCr, b'\n') => Between,
            // A line end after another line end (or at the start) is a blank line.
            (Between | AfterLf, b'\n') => Between,
            (Between | AfterLf | BetweenAfterCr, _) => BetweenAfterCr,
            (AfterCr, _) => BetweenAfterCr,
            (InLine, b'\n') => AfterLf,
            (InLine, _) => AfterCr,
        }
    }

    pub(super) fn is_between(self) -> bool {
        matches!(self, Boundary::Between | Boundary::BetweenAfterCr)
    }
}

pin_project_lite::pin_project! {
    /// An SSE response body with keep-alive comments in its quiet spells.
    pub struct KeepAlive<B> {
        #[pin]
        inner: B,
        every: Duration,
        #[pin]
        quiet: Sleep,
        boundary: Boundary,
    }
}

impl<B> KeepAlive<B> {
    pub(super) fn new(inner: B, every: Duration) -> Self {
        KeepAlive {
            inner,
            every,
            quiet: tokio::time::sleep(every),
            boundary: Boundary::Between,
        }
    }
}

impl<B: Body<Data = Bytes>> Body for KeepAlive<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let mut this = self.project();
        if let Poll::Ready(frame) = this.inner.as_mut().poll_frame(cx) {
            if let Some(Ok(data)) = frame.as_ref().map(|f| f.as_ref().map(Frame::data_ref))
                && let Some(data) = data
            {
                *this.boundary = this.boundary.after(data);
            }
            this.quiet.as_mut().reset(Instant::now() + *this.every);
            return Poll::Ready(frame);
        }
        ready!(this.quiet.as_mut().poll(cx));
        // Quiet for `every`. Mid-event, wait for the upstream (its next bytes reset the
        // timer); a finished `Sleep` registers no waker, so this does not spin.
        if !this.boundary.is_between() {
            return Poll::Pending;
        }
        this.quiet.as_mut().reset(Instant::now() + *this.every);
        // Re-arm the timer's waker for the next quiet spell.
        let _ = this.quiet.as_mut().poll(cx);
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(COMMENT)))))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        // Comments add bytes: no exact length can be promised.
        let mut hint = SizeHint::new();
        hint.set_lower(self.inner.size_hint().lower());
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn after(chunks: &[&[u8]]) -> bool {
        chunks
            .iter()
            .fold(Boundary::Between, |b, c| b.after(c))
            .is_between()
    }

    #[test]
    fn boundaries_over_every_split() {
        let between: [&[u8]; 6] = [
            b"",
            b"data: x\n\n",
            b"data: x\r\n\r\n",
            b"data: x\r\r",
            b"event: a\ndata: x\n\n: c\n\n",
            b"data: x\n\r",
        ];
        let inside: [&[u8]; 6] = [
            b"data: x",
            b"data: x\n",
            b"data: x\r\n",
            b"data: x\r",
            b"data: x\n\ndata: y\n",
            b"\n\ndata",
        ];
        for (text, want) in between
            .iter()
            .map(|t| (t, true))
            .chain(inside.iter().map(|t| (t, false)))
        {
            for cut in 0..=text.len() {
                let (a, b) = text.split_at(cut);
                assert_eq!(
                    after(&[a, b]),
                    want,
                    "{:?} cut at {cut}",
                    String::from_utf8_lossy(text)
                );
            }
            // One byte at a time.
            let bytes: Vec<&[u8]> = text.chunks(1).collect();
            assert_eq!(
                after(&bytes),
                want,
                "{:?} bytewise",
                String::from_utf8_lossy(text)
            );
        }
    }
}
