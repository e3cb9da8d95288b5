//! The agent's request body, as either agent-facing connection gives it: hyper's (h2, TLS,
//! and HTTP/1.1 requests strata's own connection hands over) or strata's own HTTP/1.1
//! connection's (`agent_h1.rs`), which reads a body that fits the replay buffer whole before
//! the request is served.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

/// A request body from the agent.
#[derive(Debug)]
pub enum FromAgent {
    /// Read by hyper as the proxy takes it.
    Hyper(Incoming),
    /// Read whole by strata's own connection (`None` once taken, or for no body at all).
    Whole(Option<Bytes>),
}

impl Body for FromAgent {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.get_mut() {
            FromAgent::Hyper(body) => Pin::new(body).poll_frame(cx),
            FromAgent::Whole(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            FromAgent::Hyper(body) => body.is_end_stream(),
            FromAgent::Whole(bytes) => bytes.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            FromAgent::Hyper(body) => body.size_hint(),
            FromAgent::Whole(bytes) => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn a_whole_body_is_one_frame_then_its_end() {
        let mut body = FromAgent::Whole(Some(Bytes::from_static(b"{}")));
        assert!(!body.is_end_stream());
        assert_eq!(body.size_hint().exact(), Some(2));
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), Bytes::from_static(b"{}"));
        assert!(body.is_end_stream());
        assert!(body.frame().await.is_none());

        let none = FromAgent::Whole(None);
        assert!(none.is_end_stream());
    }
}
