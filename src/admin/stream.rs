//! `GET /calls/stream`: each call the query selects, as it finishes, as server-sent events
//! (`id: <seq>`, `event: call`, `data: <the record's JSON>`).
//!
//! A reader never slows a call: the inspector's feed is a broadcast that overwrites what its
//! slowest reader has not taken. A pump task moves events from the feed into a short queue
//! the response body drains. A reader that stops reading fills its socket (the kernel's
//! buffers and hyper's, `ADMIN_MAX_BUF`), then the queue; the pump waits, and once the feed
//! has overwritten events it had not taken ([`FEED_BACKLOG`] behind) the reader's
//! connection is closed. Each reader costs at most the queue and its place in the feed.
//!
//! [`FEED_BACKLOG`]: crate::observe::recent::FEED_BACKLOG

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::Response;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, mpsc};

use super::calls::bad_request;
use super::{AdminBody, ConnControl};
use crate::observe::recent::{CallEntry, Filter, Inspector};

/// Events a reader's queue holds on top of what its socket does.
const STREAM_QUEUE: usize = 64;

/// The event stream's response; the pump runs until the reader leaves, falls behind, or the
/// listener stops.
pub(super) fn stream(
    inspector: &Inspector,
    query: Option<&str>,
    control: &ConnControl,
) -> Response<AdminBody> {
    let filter = match Filter::from_query(query) {
        Ok(filter) => filter,
        Err(message) => return bad_request(&message),
    };
    let (tx, rx) = mpsc::channel(STREAM_QUEUE);
    tokio::spawn(pump(inspector.subscribe(), filter, tx, control.clone()));
    let mut response = Response::new(EventBody(rx).boxed_unsync());
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Why a pump stopped.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// The reader left (its body was dropped).
    Left,
    /// The reader fell behind; its connection is closed.
    Lagged,
    /// The listener is stopping (or the feed is gone): the stream ends cleanly.
    Stopping,
}

async fn pump(
    mut feed: broadcast::Receiver<Arc<CallEntry>>,
    filter: Filter,
    tx: mpsc::Sender<Bytes>,
    mut control: ConnControl,
) {
    let ended = loop {
        let next = tokio::select! {
            () = tx.closed() => break Ended::Left,
            _ = control.stopping.wait_for(|stopping| *stopping) => break Ended::Stopping,
            next = feed.recv() => next,
        };
        let entry = match next {
            Ok(entry) => entry,
            Err(RecvError::Lagged(_)) => break Ended::Lagged,
            Err(RecvError::Closed) => break Ended::Stopping,
        };
        if !filter.matches(&entry, SystemTime::now()) {
            continue;
        }
        // Waits while the reader's queue is full; the feed keeps filling meanwhile, and
        // reports the lag once it has overwritten what this reader had not taken.
        tokio::select! {
            sent = tx.send(event(&entry)) => if sent.is_err() {
                break Ended::Left;
            },
            _ = control.stopping.wait_for(|stopping| *stopping) => break Ended::Stopping,
        }
    };
    if ended == Ended::Lagged {
        control.kill.notify_one();
    }
}

/// One call as an event.
fn event(entry: &CallEntry) -> Bytes {
    let mut text = String::with_capacity(entry.json.len() + 40);
    text.push_str("id: ");
    text.push_str(&entry.seq.to_string());
    text.push_str("\nevent: call\ndata: ");
    text.push_str(&entry.json);
    text.push_str("\n\n");
    Bytes::from(text)
}

/// The response body: the pump's events, in order; it ends when the pump does.
struct EventBody(mpsc::Receiver<Bytes>);

impl Body for EventBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.0
            .poll_recv(cx)
            .map(|event| event.map(|bytes| Ok(Frame::data(bytes))))
    }
}
