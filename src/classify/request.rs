//! The request inspector: reads the JSON-RPC requests of a POST body as it streams to the
//! upstream, with the same scanner as responses. The body is never held.
//!
//! Limits:
//! - the proxy stops feeding after its configured inspect cap (`limits.request_inspect_bytes`);
//!   a single request cut there still counts when its `method` and `id` were already read
//!   (they come first in every SDK's encoding);
//! - [`MAX_BATCH_REQUESTS`] requests per batch are classified; more are counted as
//!   unclassified by the proxy (`strata_limit_hits_total{limit="batch_requests"}`).

use super::capture::Envelope;
use super::envelope::Request;
use super::json::{JsonScanner, MessageSink};

/// Most requests of one batch (2025-03-26) that get a classification.
pub const MAX_BATCH_REQUESTS: usize = 256;

/// What the inspector learnt of one POST body.
#[derive(Debug, Default)]
pub struct Inspected {
    pub requests: Vec<Request>,
    /// The body was a JSON array (a 2025-03-26 batch).
    pub batch: bool,
    /// Requests past [`MAX_BATCH_REQUESTS`].
    pub overflow: usize,
    /// The body was valid JSON as far as it was read.
    pub valid: bool,
}

struct Collect<'a>(&'a mut Inspected);

impl MessageSink for Collect<'_> {
    fn message(&mut self, env: &Envelope) {
        if let Some(request) = Request::from_envelope(env) {
            if self.0.requests.len() < MAX_BATCH_REQUESTS {
                // One request is the usual body: room for exactly it (a `Request` is ~800
                // bytes, and a first push would make room for four — kept for as long as the
                // response streams); batches then grow as usual.
                if self.0.requests.capacity() == 0 {
                    self.0.requests.reserve_exact(1);
                }
                self.0.requests.push(request);
            } else {
                self.0.overflow += 1;
            }
        }
    }
}

/// Push-fed request inspector.
#[derive(Default)]
pub struct RequestInspector {
    scanner: JsonScanner,
    found: Inspected,
    read: usize,
    cut: bool,
}

impl RequestInspector {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds body bytes, reading at most `cap` bytes in all. Returns true when this chunk
    /// reached the cap (the first time only).
    pub fn feed(&mut self, chunk: &[u8], cap: usize) -> bool {
        let room = cap.saturating_sub(self.read);
        let newly_cut = chunk.len() > room && !self.cut;
        if chunk.len() > room {
            self.cut = true;
        }
        if room == 0 {
            return newly_cut;
        }
        let take = &chunk[..chunk.len().min(room)];
        self.read += take.len();
        self.scanner.feed(take, &mut Collect(&mut self.found));
        newly_cut
    }

    /// The inspector stops before the body's end (the response arrived first, or the body
    /// broke): what was read so far counts, as for a body cut by the cap.
    pub fn finish_partial(mut self) -> Inspected {
        self.cut = true;
        self.finish()
    }

    /// The body ended (or the inspector stops reading).
    pub fn finish(mut self) -> Inspected {
        let verdict = self.scanner.finish(&mut Collect(&mut self.found));
        self.found.batch = self.scanner.is_batch();
        self.found.valid = verdict.is_ok();
        if self.cut && self.found.requests.is_empty() && self.scanner.failed().is_none() {
            // Cut short: a lone request whose method and id were already read still counts.
            if let Some(request) = Request::from_envelope(self.scanner.current()) {
                self.found.requests.push(request);
                self.found.valid = true;
            }
        }
        if !self.cut && !self.found.valid {
            // Not JSON: nothing the upstream can answer by id; forwarded, not classified.
            self.found.requests.clear();
        }
        self.found
    }
}
