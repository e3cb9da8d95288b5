//! Server-Sent Events: frame formatting, scripted streams (progress, drip, early close, reset)
//! and the standalone GET stream.
//!
//! Frames follow what the TS SDK server writes: `event: message` plus one `data:` line of
//! compact JSON (compact JSON never contains a raw newline); priming events are
//! `id: <id>\ndata: \n\n` with no `event:` line (2025-11-25 transports §Sending Messages,
//! SEP-1699).

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::{Duration, sleep};

use super::body::{self, Body, Chunk};

/// How often the standalone GET stream writes a comment. The write is also how a stream whose
/// client vanished without a FIN gets noticed and freed.
pub(crate) const KEEPALIVE: Duration = Duration::from_secs(15);
/// The `retry:` field sent before a resumable stream closes, so SDK clients reconnect quickly
/// (2025-11-25 transports: the server SHOULD send `retry` before closing the connection).
pub(crate) const RESUME_RETRY_MS: u64 = 100;

/// One step of a scripted SSE response.
#[derive(Debug)]
pub(crate) enum Step {
    Send(Bytes),
    Pause(Duration),
    /// Break the body: hyper resets the stream instead of ending it.
    Abort,
}

/// A JSON-RPC message as an SSE event.
pub(crate) fn message(msg: &Value) -> Bytes {
    Bytes::from(format!("event: message\ndata: {msg}\n\n"))
}

/// A JSON-RPC message as an SSE event with an event id (resumable streams).
pub(crate) fn message_with_id(event_id: &str, msg: &Value) -> Bytes {
    Bytes::from(format!("id: {event_id}\nevent: message\ndata: {msg}\n\n"))
}

/// The 2025-11-25 priming event: "an event ID and an empty data field".
pub(crate) fn priming(event_id: &str) -> Bytes {
    Bytes::from(format!("id: {event_id}\ndata: \n\n"))
}

/// A lone `retry:` field; an event with no data is never dispatched, only the field applies.
pub(crate) fn retry(ms: u64) -> Bytes {
    Bytes::from(format!("retry: {ms}\n\n"))
}

pub(crate) fn comment(text: &str) -> Bytes {
    Bytes::from(format!(": {text}\n\n"))
}

/// Event ids are `<stream>-<n>`, so a `Last-Event-ID` names its stream (see
/// `Session::replay_after`).
pub(crate) fn event_id(stream: &str, n: u64) -> String {
    format!("{stream}-{n}")
}

/// A 200 `text/event-stream` response around `body`.
pub(crate) fn response(body: Body) -> Response<Body> {
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // 2026-07-28 transports §Receiving Messages: servers SHOULD set it, so reverse proxies
    // do not buffer the stream.
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

/// Resolves once the flag is `true` or its sender is gone. The borrow `wait_for` returns is
/// dropped here, so callers' futures stay `Send`.
async fn until_set(flag: &mut watch::Receiver<bool>) {
    let _ = flag.wait_for(|set| *set).await;
}

/// Plays `steps` into a streaming body on its own task. The task stops when the client goes
/// away (the body is dropped) and aborts the body when the testbed shuts down.
pub(crate) fn play<I>(steps: I, shutdown: watch::Receiver<bool>) -> Body
where
    I: IntoIterator<Item = Step>,
    I::IntoIter: Send + 'static,
{
    let steps = steps.into_iter();
    let (tx, body) = body::channel();
    tokio::spawn(async move {
        let mut shutdown = shutdown;
        for step in steps {
            match step {
                Step::Send(bytes) => {
                    if tx.send(Chunk::Data(bytes)).await.is_err() {
                        return;
                    }
                }
                Step::Pause(d) => {
                    tokio::select! {
                        () = sleep(d) => {}
                        () = tx.closed() => return,
                        () = until_set(&mut shutdown) => {
                            let _ = tx.send(Chunk::Abort).await;
                            return;
                        }
                    }
                }
                Step::Abort => {
                    let _ = tx.send(Chunk::Abort).await;
                    return;
                }
            }
        }
    });
    body
}

/// The standalone stream a legacy client opens with GET (2025-11-25 transports §Listening for
/// Messages from the Server). The testbed never pushes messages on it: it sends `: ok`, then
/// keep-alive comments, until the session ends, the testbed shuts down or the client leaves.
pub(crate) fn standalone(
    session_ended: watch::Receiver<bool>,
    shutdown: watch::Receiver<bool>,
) -> Body {
    let (tx, body) = body::channel();
    tokio::spawn(async move {
        let (mut session_ended, mut shutdown) = (session_ended, shutdown);
        if tx.send(Chunk::Data(comment("ok"))).await.is_err() {
            return;
        }
        loop {
            tokio::select! {
                () = until_set(&mut session_ended) => return,
                () = until_set(&mut shutdown) => return,
                () = tx.closed() => return,
                () = sleep(KEEPALIVE) => {
                    if tx.send(Chunk::Data(comment("keepalive"))).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn frames_are_well_formed() {
        assert_eq!(&priming("s1-0")[..], b"id: s1-0\ndata: \n\n");
        assert_eq!(
            &message(&json!({"a":"b\nc"}))[..],
            b"event: message\ndata: {\"a\":\"b\\nc\"}\n\n"
        );
        assert_eq!(
            &message_with_id("s1-2", &json!(1))[..],
            b"id: s1-2\nevent: message\ndata: 1\n\n"
        );
        assert_eq!(&comment("ok")[..], b": ok\n\n");
        assert_eq!(&retry(100)[..], b"retry: 100\n\n");
    }
}
