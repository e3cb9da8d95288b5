use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::task::Waker;

use super::*;

/// What a sink was shown, in order.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<String>>>);

impl Seen {
    fn now(&self) -> Vec<String> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

impl BodySink for Seen {
    fn on_data(&mut self, chunk: &[u8]) {
        if let Ok(mut v) = self.0.lock() {
            v.push(String::from_utf8_lossy(chunk).into_owned());
        }
    }

    fn on_end(&mut self, end: BodyEnd) {
        if let Ok(mut v) = self.0.lock() {
            v.push(format!("{end:?}"));
        }
    }
}

/// A body of the given frames, ended once they are all out; `Err` entries fail it.
struct Frames(VecDeque<Result<&'static str, &'static str>>);

impl Body for Frames {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Poll::Ready(self.0.pop_front().map(|f| match f {
            Ok(data) => Ok(Frame::data(Bytes::from_static(data.as_bytes()))),
            Err(why) => Err(why.into()),
        }))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_empty()
    }
}

fn frames(list: &[Result<&'static str, &'static str>]) -> Frames {
    Frames(list.iter().copied().collect())
}

fn poll<B: Body + Unpin>(body: &mut B) -> Option<bool> {
    let mut cx = Context::from_waker(Waker::noop());
    match Pin::new(body).poll_frame(&mut cx) {
        Poll::Ready(Some(frame)) => Some(frame.is_ok()),
        Poll::Ready(None) => None,
        Poll::Pending => Some(false),
    }
}

#[test]
fn a_body_is_shown_each_chunk_as_it_passes_and_its_end_with_the_last() {
    let seen = Seen::default();
    let mut body = ObservedBody::new(frames(&[Ok("a"), Ok("b")]), seen.clone());
    assert_eq!(poll(&mut body), Some(true));
    assert_eq!(seen.now(), ["a"]);
    assert_eq!(poll(&mut body), Some(true));
    assert_eq!(seen.now(), ["a", "b", "Complete"]);
}

#[test]
fn a_body_dropped_mid_way_reports_dropped() {
    let seen = Seen::default();
    let mut body = ObservedBody::new(frames(&[Ok("a"), Ok("b")]), seen.clone());
    assert_eq!(poll(&mut body), Some(true));
    drop(body);
    assert_eq!(seen.now(), ["a", "Dropped"]);
}

#[test]
fn a_body_that_fails_reports_the_error_after_what_came_before() {
    let seen = Seen::default();
    let mut body = ObservedBody::new(frames(&[Ok("a"), Err("reset"), Ok("b")]), seen.clone());
    assert_eq!(poll(&mut body), Some(true));
    assert_eq!(poll(&mut body), Some(false));
    assert_eq!(seen.now(), ["a", "Error"]);
    drop(body);
    assert_eq!(seen.now(), ["a", "Error"]);
}

/// A sink whose end leaves work to settle: done when `gate` is sent to.
struct Settles {
    gate: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl BodySink for Settles {
    fn on_data(&mut self, _: &[u8]) {}

    fn on_end(&mut self, _: BodyEnd) {}

    fn settle(&mut self) -> Option<Settling> {
        let gate = self.gate.take()?;
        Some(Box::pin(async move {
            let _ = gate.await;
        }))
    }
}

/// The last frame waits for what the sink's end settles (a record stored in Redis before the
/// agent has the whole answer), and the body is not at its end meanwhile.
#[test]
fn the_last_frame_waits_until_the_end_settles() {
    let (open, gate) = tokio::sync::oneshot::channel();
    let sink = Settles { gate: Some(gate) };
    let mut body = ObservedBody::new(frames(&[Ok("a"), Ok("b")]), sink);
    let mut cx = Context::from_waker(Waker::noop());
    let mut next =
        |body: &mut ObservedBody<Frames, Settles>| match Pin::new(body).poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(frame))) => Some(frame.into_data().unwrap_or_default()),
            Poll::Ready(_) => None,
            Poll::Pending => Some(Bytes::from_static(b"pending")),
        };
    assert_eq!(next(&mut body), Some(Bytes::from_static(b"a")));
    assert_eq!(next(&mut body), Some(Bytes::from_static(b"pending")));
    assert!(!body.is_end_stream());
    assert_eq!(next(&mut body), Some(Bytes::from_static(b"pending")));
    open.send(()).unwrap();
    assert_eq!(next(&mut body), Some(Bytes::from_static(b"b")));
    assert!(body.is_end_stream());
}
