//! `GET /calls/stream`: each call the query selects, as it finishes, as server-sent events
//! (`id: <seq>`, `event: call`, `data: <the record's JSON>`).
//!
//! A reader never slows a call: the inspector's feed is a broadcast that never waits for its
//! readers. Each reader's pump task takes every event from the feed at once, and hands them
//! to the response body as hyper asks for them. A reader that stops reading fills its socket
//! (the kernel's send buffer, `ADMIN_SEND_BUFFER`, and hyper's, `ADMIN_MAX_BUF`), then the
//! body's short queue, then the pump's backlog; once [`STREAM_BACKLOG`] events wait there (or
//! the feed overwrote events the pump had not taken) its connection is closed. A reader costs
//! at most that backlog.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

use bytes::Bytes;
use http::Response;
use http::header::{self, HeaderValue};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, mpsc};

use super::calls::bad_request;
use super::{AdminBody, ConnControl};
use crate::observe::recent::{CallEntry, Filter, Inspector};

/// Events the body holds ready for hyper.
const STREAM_QUEUE: usize = 16;

/// Events a reader may be behind (taken from the feed, not yet in the body) before it is
/// dropped.
pub const STREAM_BACKLOG: usize = 512;

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
    // Events taken from the feed that the body has no room for yet.
    let mut backlog: VecDeque<Bytes> = VecDeque::new();
    let ended = loop {
        tokio::select! {
            _ = control.stopping.wait_for(|stopping| *stopping) => break Ended::Stopping,
            permit = tx.reserve(), if !backlog.is_empty() => match (permit, backlog.pop_front()) {
                (Ok(permit), Some(event)) => permit.send(event),
                _ => break Ended::Left,
            },
            () = tx.closed(), if backlog.is_empty() => break Ended::Left,
            next = feed.recv() => match next {
                Ok(entry) if filter.matches(&entry, SystemTime::now()) => {
                    if backlog.len() >= STREAM_BACKLOG {
                        break Ended::Lagged;
                    }
                    backlog.push_back(event(&entry));
                }
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => break Ended::Lagged,
                Err(RecvError::Closed) => break Ended::Stopping,
            },
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
