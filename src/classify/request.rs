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
use super::spare;

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
        let Some(fields) = Request::fields_of(env) else {
            return;
        };
        if self.0.requests.len() < MAX_BATCH_REQUESTS {
            // One request is the usual body: room for exactly it (a `Request` is ~800
            // bytes, and a first push would make room for four — kept for as long as the
            // response streams); batches then grow as usual.
            if self.0.requests.capacity() == 0 {
                self.0.requests.reserve_exact(1);
            }
            // Made once there is room for it, so it is built in that room: `push` takes a
            // request built on the stack and copies it over.
            let request = std::iter::once_with(|| Request::of(env, fields));
            self.0.requests.extend(request);
        } else {
            self.0.overflow += 1;
        }
    }
}

/// Push-fed request inspector.
#[derive(Default)]
pub struct RequestInspector {
    /// The thread's spare request scanner, taken at the first byte and handed back when the
    /// inspector drops (`spare.rs`): a fresh one was a 944-byte copy and an allocation per
    /// request.
    scanner: Option<Box<JsonScanner>>,
    found: Inspected,
    read: usize,
    cut: bool,
}

impl Drop for RequestInspector {
    fn drop(&mut self) {
        if let Some(scanner) = self.scanner.take() {
            spare::keep_request(scanner);
        }
    }
}

impl RequestInspector {
    pub fn new() -> Self {
        Self::default()
    }

    /// The inspector's scanner (`slot`, its field), taken from the thread's spare at first use.
    fn scanner(slot: &mut Option<Box<JsonScanner>>) -> &mut JsonScanner {
        slot.get_or_insert_with(spare::request_scanner)
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
        Self::scanner(&mut self.scanner).feed(take, &mut Collect(&mut self.found));
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
        let mut found = std::mem::take(&mut self.found);
        let scanner = Self::scanner(&mut self.scanner);
        let verdict = scanner.finish(&mut Collect(&mut found));
        found.batch = scanner.is_batch();
        found.valid = verdict.is_ok();
        if self.cut && found.requests.is_empty() && scanner.failed().is_none() {
            // Cut short: a lone request whose method and id were already read still counts.
            if let Some(request) = Request::from_envelope(scanner.current()) {
                found.requests.push(request);
                found.valid = true;
            }
        }
        if !self.cut && !found.valid {
            // Not JSON: nothing the upstream can answer by id; forwarded, not classified.
            found.requests.clear();
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inspect(body: &[u8], cap: usize) -> Inspected {
        let mut inspector = RequestInspector::new();
        inspector.feed(body, cap);
        inspector.finish()
    }

    fn summary(found: &Inspected) -> (Vec<(String, String, String)>, bool, bool) {
        let calls = found
            .requests
            .iter()
            .map(|r| {
                (
                    r.id.text_lossy().into_owned(),
                    r.method.text_lossy().into_owned(),
                    r.tool.text_lossy().into_owned(),
                )
            })
            .collect();
        (calls, found.batch, found.valid)
    }

    /// The thread's spare scanner, left in any state by the body before (malformed, cut at
    /// the cap, a batch, an initialize with client fields), reads the next body as a fresh
    /// one would.
    #[test]
    fn a_reused_scanner_reads_as_a_fresh_one() {
        let bodies: [(&[u8], usize); 6] = [
            (br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a""#, 1 << 20),
            (br#"[{"jsonrpc":"2.0","id":"x","method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]"#, 1 << 20),
            (br#"{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-11-25","clientInfo":{"name":"c","version":"1"}}}"#, 1 << 20),
            (br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"cut","arguments":{"q":"xxxxxxxx"}}}"#, 60),
            (b"not json {", 1 << 20),
            (br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"b"}}"#, 1 << 20),
        ];
        let fresh: Vec<_> = bodies
            .iter()
            .map(|&(body, cap)| {
                // A scanner of its own each time: the spare is taken out and not handed back.
                let taken = spare::request_scanner();
                drop(taken);
                summary(&inspect(body, cap))
            })
            .collect();
        for round in 0..2 {
            for (i, &(body, cap)) in bodies.iter().enumerate() {
                assert_eq!(
                    summary(&inspect(body, cap)),
                    fresh[i],
                    "round {round}, body {i}"
                );
            }
        }
        assert_eq!(
            fresh[5].0,
            vec![("5".into(), "tools/call".into(), "b".into())]
        );
        assert!(fresh[1].1 && fresh[1].0.len() == 2);
        assert!(!fresh[4].2);
    }
}
