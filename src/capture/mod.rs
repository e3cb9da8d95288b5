//! Opt-in traffic capture (`capture` in the config, or `--capture FILE`): each HTTP exchange
//! strata proxies on the MCP path — its request and response heads (secrets redacted, the
//! session id hashed), bodies up to `capture.max_body`, when it started and how long it
//! took — appended to a HAR 1.2 file that `strata classify` reads.
//!
//! On the data path an exchange only copies into a [`Recorder`] it owns (at most
//! `max_body` bytes a side) and, when it ends, offers the finished [`Entry`] to a bounded
//! queue without waiting; the writer thread (`writer.rs`) serialises and appends it. A full
//! queue or a failed write loses the entry and counts it
//! (`strata_capture_entries_total{result="dropped"}`).

mod entry;
mod file;
mod har;
mod time;
mod writer;

use std::sync::Arc;
use std::sync::mpsc::{SyncSender, TrySendError};

use crate::config::CaptureConfig;
use crate::http::fields::Headers;
use crate::metrics::{CaptureResult, Metrics};

pub use entry::{
    AGENT_GONE, BodyCopy, End, Entry, Fields, REDACTED, Recorder, Redactor, UPSTREAM_BROKE,
};

/// Entries waiting for the writer at most.
const QUEUE: usize = 1024;

/// The capture in force: what an exchange needs to record itself and hand its entry over.
pub struct Capture {
    config: CaptureConfig,
    redactor: Redactor,
    queue: SyncSender<writer::Message>,
    metrics: Arc<Metrics>,
}

impl Capture {
    /// Starts the writer thread. The file is opened at the first entry: a path that cannot
    /// be written loses entries (counted, logged), never calls.
    pub fn start(config: &CaptureConfig, metrics: Arc<Metrics>) -> std::io::Result<Arc<Capture>> {
        let queue = writer::spawn(config, metrics.clone())?;
        Ok(Arc::new(Capture {
            config: config.clone(),
            redactor: Redactor::new(config),
            queue,
            metrics,
        }))
    }

    /// The settings it runs with.
    pub fn config(&self) -> &CaptureConfig {
        &self.config
    }

    /// A recorder for a request to `url` with these header fields.
    pub(crate) fn begin(&self, method: &str, url: String, headers: Headers<'_>) -> Box<Recorder> {
        let fields = self.redactor.fields(headers);
        Box::new(Recorder::new(method, url, fields, self.config.max_body))
    }

    /// The response's fields, as the capture holds them.
    pub(crate) fn fields(&self, headers: Headers<'_>) -> Fields {
        self.redactor.fields(headers)
    }

    /// Body bytes kept per side.
    pub fn max_body(&self) -> usize {
        self.config.max_body
    }

    /// Hands a finished exchange to the writer; never waits (a full queue drops it).
    pub fn submit(&self, entry: Entry) {
        match self.queue.try_send(writer::Message::Entry(Box::new(entry))) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.metrics.capture_entries(CaptureResult::Dropped, 1);
            }
        }
    }

    /// Waits (up to `within`) until the writer has written everything queued before now.
    pub async fn flush(&self, within: std::time::Duration) {
        let (done, written) = tokio::sync::oneshot::channel();
        let deadline = tokio::time::Instant::now() + within;
        let mut message = writer::Message::Flush(done);
        // Bounded by the deadline: a full queue is retried, never waited on blocking.
        loop {
            match self.queue.try_send(message) {
                Ok(()) => break,
                Err(TrySendError::Full(back)) if tokio::time::Instant::now() < deadline => {
                    message = back;
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                Err(_) => return,
            }
        }
        let _ = tokio::time::timeout_at(deadline, written).await;
    }
}

#[cfg(test)]
mod tests;
