//! The body's reader, chosen by the response's content kind: the JSON scanner or the SSE
//! framer. Its state between two chunks is all it knows of the body so far, so a copy of it
//! taken at an offset resumes there (`remembered.rs` keeps such copies of a list answer).

use super::json::JsonScanner;
use super::sse::{SseFramer, SseSink};

/// Equal when the two read what follows alike (see `JsonScanner`'s `PartialEq`).
#[derive(Clone, PartialEq)]
pub(super) enum Scan {
    Json(Box<JsonScanner>),
    Sse(Box<SseFramer>),
    None,
}

impl Scan {
    #[inline]
    pub(super) fn feed<S: SseSink + ?Sized>(&mut self, chunk: &[u8], sink: &mut S) {
        match self {
            Scan::Json(scanner) => scanner.feed(chunk, sink),
            Scan::Sse(framer) => framer.feed(chunk, sink),
            Scan::None => {}
        }
    }

    /// Stands where `at` stood, in this reader's own box when both are of one kind.
    pub(super) fn restore(&mut self, at: &Scan) {
        match (self, at) {
            (Scan::Json(scanner), Scan::Json(at)) => scanner.clone_from(at),
            (Scan::Sse(framer), Scan::Sse(at)) => framer.clone_from(at),
            (this, at) => *this = at.clone(),
        }
    }
}
