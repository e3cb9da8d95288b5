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
//!
//! `max_rate=N` (the page asks for it) caps a reader at about N events a second: past it, a
//! tick's events are sampled, the calls that did not succeed kept first, then the newest, and
//! an `event: skipped` (`data: {"skipped":K}`) says how many were left out. A sampled reader
//! costs the calls little more than none: what a call costs a reader is its event's text and
//! bytes on the socket, and past the cap neither is made.

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
    let reader = Reader::new(filter);
    tokio::spawn(pump(inspector.subscribe(), reader, tx, control.clone()));
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

/// What one reader asked for, and what its pump keeps between ticks.
struct Reader {
    filter: Filter,
    /// Events a tick may send under `max_rate` (`None`: all), credited per tick.
    allowance: Option<Allowance>,
    /// The tick's events, reused.
    picked: Vec<Arc<CallEntry>>,
}

/// Events a reader may still be sent: `per_tick` more each tick, a second's worth at most.
struct Allowance {
    per_tick: f64,
    credit: f64,
}

async fn pump(
    mut feed: broadcast::Receiver<Arc<CallEntry>>,
    mut reader: Reader,
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
            _ = tick.tick() => match reader.take(&mut feed) {
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

impl Reader {
    fn new(filter: Filter) -> Reader {
        // A new reader may be sent a second's worth at once.
        let allowance = filter.max_rate.map(|rate| Allowance {
            per_tick: f64::from(rate) * STREAM_EVERY.as_secs_f64(),
            credit: f64::from(rate),
        });
        Reader {
            filter,
            allowance,
            picked: Vec::new(),
        }
    }

    /// Every event the feed holds now that the filter selects (sampled under `max_rate`),
    /// as one chunk (`None`: none).
    ///
    /// The pump comes for the feed on a tick rather than waiting on it: a wait would be a
    /// wake-up, a switch of threads, and a write to the reader's socket for every call, which
    /// at thousands of calls a second cost more than the calls themselves.
    fn take(
        &mut self,
        feed: &mut broadcast::Receiver<Arc<CallEntry>>,
    ) -> Result<Option<Bytes>, Ended> {
        let now = SystemTime::now();
        loop {
            match feed.try_recv() {
                Ok(entry) if self.filter.matches(&entry, now) => self.picked.push(entry),
                Ok(_) => {}
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Lagged(_)) => return Err(Ended::Lagged),
                Err(TryRecvError::Closed) => return Err(Ended::Stopping),
            }
        }
        let skipped = match &mut self.allowance {
            Some(allowance) => allowance.sample(&mut self.picked),
            None => 0,
        };
        let mut chunk = String::new();
        for entry in self.picked.drain(..) {
            event(&entry, &mut chunk);
        }
        if skipped > 0 {
            chunk.push_str("event: skipped\ndata: {\"skipped\":");
            chunk.push_str(&skipped.to_string());
            chunk.push_str("}\n\n");
        }
        Ok((!chunk.is_empty()).then(|| Bytes::from(chunk)))
    }
}

impl Allowance {
    /// Keeps in `picked` (in order) as many as the credit allows — the calls that did not
    /// succeed first, then the newest — and says how many went.
    fn sample(&mut self, picked: &mut Vec<Arc<CallEntry>>) -> usize {
        self.credit = (self.credit + self.per_tick).min(self.per_tick / STREAM_EVERY.as_secs_f64());
        // Whole events only: the credit is at most the rate, a `u32`.
        let budget = self.credit.floor() as usize;
        let total = picked.len();
        if total <= budget {
            self.credit -= total as f64;
            return 0;
        }
        let mut keep = vec![false; total];
        let mut left = budget;
        for failures_only in [true, false] {
            for (i, entry) in picked.iter().enumerate().rev() {
                let eligible = !failures_only || !entry.outcome.succeeded();
                if left > 0 && !keep[i] && eligible {
                    keep[i] = true;
                    left -= 1;
                }
            }
        }
        let mut kept = keep.into_iter();
        picked.retain(|_| kept.next().unwrap_or(false));
        self.credit -= budget as f64;
        total - picked.len()
    }
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::classify::Outcome;
    use crate::observe::call_record::CallRecord;

    fn entries(outcomes: &[Outcome]) -> Vec<Arc<CallEntry>> {
        let entry = |(seq, outcome): (usize, &Outcome)| {
            let record = CallRecord::new("http://u", "tools/call", "1", *outcome, Duration::ZERO);
            let seq = seq as u64;
            Arc::new(CallEntry::new(
                &record,
                record.fields_text(),
                seq,
                SystemTime::now(),
            ))
        };
        outcomes.iter().enumerate().map(entry).collect()
    }

    #[test]
    fn past_the_rate_calls_that_failed_are_kept_first_then_the_newest() {
        use Outcome::{HttpError, ToolError, ToolSuccess};
        let mut allowance = Allowance {
            per_tick: 0.5,
            credit: 3.0,
        };
        let all = [
            ToolSuccess,
            HttpError,
            ToolSuccess,
            ToolSuccess,
            ToolError,
            ToolSuccess,
        ];
        let mut picked = entries(&all);
        assert_eq!(allowance.sample(&mut picked), 3);
        let seqs: Vec<u64> = picked.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 4, 5], "both failures, then the newest, in order");
        // Half an event of credit left, and half a tick's: the next tick sends one of two.
        let mut picked = entries(&[ToolSuccess, ToolSuccess]);
        assert_eq!(allowance.sample(&mut picked), 1);
        assert_eq!(picked[0].seq, 1, "the newest");
        // None left: the tick after sends none.
        let mut picked = entries(&[ToolSuccess]);
        assert_eq!(allowance.sample(&mut picked), 1);
        assert!(picked.is_empty());
    }

    #[test]
    fn under_the_rate_every_call_is_sent() {
        let mut allowance = Allowance {
            per_tick: 2.5,
            credit: 0.0,
        };
        let mut picked = entries(&[Outcome::Success, Outcome::Success]);
        assert_eq!(allowance.sample(&mut picked), 0);
        assert_eq!(picked.len(), 2);
    }
}
