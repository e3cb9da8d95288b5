//! `GET /calls/stream`: each call the query selects, as it finishes, as server-sent events
//! (`id: <seq>`, `event: call`, `data: <the record's JSON>`).
//!
//! A reader never slows a call: the inspector's feed is a broadcast that never waits for its
//! readers, and wakes none of them. Each reader's pump task takes every event from the feed
//! every [`STREAM_EVERY`], as one chunk, and hands the chunks to the response body as hyper
//! asks for them. A reader that stops reading fills its socket (the kernel's send buffer,
//! `ADMIN_SEND_BUFFER`, and hyper's, `ADMIN_MAX_BUF`), then the body's short queue, then the
//! pump's backlog; once [`STREAM_BACKLOG`] bytes wait there (or the feed overwrote events
//! the pump had not taken) its connection is closed. A reader costs at most that backlog.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::Response;
use http::header::{self, HeaderValue};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use tokio::sync::broadcast::error::TryRecvError;
use tokio::sync::{broadcast, mpsc};
use tokio::time::MissedTickBehavior;

use super::calls::bad_request;
use super::{AdminBody, ConnControl};
use crate::observe::recent::{CallEntry, Filter, Inspector};

/// Chunks (a tick's events each) the body holds ready for hyper.
const STREAM_QUEUE: usize = 2;

/// Bytes of events a reader may be behind — taken from the feed, not yet in the body —
/// before it is dropped.
pub const STREAM_BACKLOG: usize = 256 << 10;

/// How often the pump takes what the feed holds: a reader sees a call at most this late.
/// At the feed's backlog (`FEED_BACKLOG`, 1,024 events) this keeps up with 100,000 calls a
/// second; a hundred wake-ups a second per reader cost nothing measurable.
const STREAM_EVERY: Duration = Duration::from_millis(10);

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
    // Chunks taken from the feed that the body has no room for yet.
    let mut backlog: VecDeque<Bytes> = VecDeque::new();
    let mut behind = 0;
    let mut tick = tokio::time::interval(STREAM_EVERY);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let ended = loop {
        tokio::select! {
            _ = control.stopping.wait_for(|stopping| *stopping) => break Ended::Stopping,
            permit = tx.reserve(), if !backlog.is_empty() => match (permit, backlog.pop_front()) {
                (Ok(permit), Some(chunk)) => {
                    behind -= chunk.len();
                    permit.send(chunk);
                }
                _ => break Ended::Left,
            },
            () = tx.closed(), if backlog.is_empty() => break Ended::Left,
            _ = tick.tick() => match take(&mut feed, &filter) {
                Ok(None) => {}
                Ok(Some(chunk)) if behind + chunk.len() > STREAM_BACKLOG => break Ended::Lagged,
                Ok(Some(chunk)) => {
                    behind += chunk.len();
                    backlog.push_back(chunk);
                }
                Err(ended) => break ended,
            },
        }
    };
    if ended == Ended::Lagged {
        control.kill.notify_one();
    }
}

/// Every event the feed holds now that `filter` selects, as one chunk (`None`: none).
///
/// The pump comes for the feed on a tick rather than waiting on it: a wait would be a
/// wake-up, a switch of threads, and a write to the reader's socket for every call, which
/// at thousands of calls a second cost more than the calls themselves.
fn take(
    feed: &mut broadcast::Receiver<Arc<CallEntry>>,
    filter: &Filter,
) -> Result<Option<Bytes>, Ended> {
    let now = SystemTime::now();
    let mut chunk = String::new();
    loop {
        match feed.try_recv() {
            Ok(entry) if filter.matches(&entry, now) => event(&entry, &mut chunk),
            Ok(_) => {}
            Err(TryRecvError::Empty) => break,
            Err(TryRecvError::Lagged(_)) => return Err(Ended::Lagged),
            Err(TryRecvError::Closed) => return Err(Ended::Stopping),
        }
    }
    Ok((!chunk.is_empty()).then(|| Bytes::from(chunk)))
}

/// One call as an event, appended to `text`.
fn event(entry: &CallEntry, text: &mut String) {
    text.push_str("id: ");
    text.push_str(&entry.seq.to_string());
    text.push_str("\nevent: call\ndata: ");
    entry.write_json(text);
    text.push_str("\n\n");
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
