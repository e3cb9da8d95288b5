//! The SSE framer with its per-event JSON scanner, through the whole exchange, differential
//! against the oracle (whole-string WHATWG framing + serde_json): the same outcome for every
//! request at any cut. Never panics, never loops.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata::classify::exchange::BodyEnd;
use strata::classify::sse::{EventData, SseFramer, SseSink};

#[path = "../../tests/oracle/mod.rs"]
mod oracle;
mod common;

/// Counts what the framer dispatches, to compare with the oracle's framing.
#[derive(Default)]
struct Count {
    json: usize,
    other: usize,
}

impl strata::classify::json::MessageSink for Count {
    fn message(&mut self, _: &strata::classify::Envelope) {}
}

impl SseSink for Count {
    fn event(&mut self, data: EventData, _: Option<&strata::classify::Captured<{ strata::classify::sse::MAX_EVENT_ID }>>) {
        match data {
            EventData::Json(_) => self.json += 1,
            EventData::Empty | EventData::Ignored => self.other += 1,
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let (cuts, stream, pick) = common::cuts_and_payload(data);

    // Framing alone: the events dispatched, and the last event id, agree with WHATWG.
    let mut framer = SseFramer::new();
    let mut count = Count::default();
    for chunk in oracle::pieces(stream, &cuts) {
        framer.feed(chunk, &mut count);
    }
    framer.finish();
    let parsed = oracle::parse_sse(stream);
    let json = parsed
        .events
        .iter()
        .filter(|e| !e.empty && (e.event_type.is_empty() || e.event_type == b"message"))
        .count();
    assert_eq!(count.json, json, "JSON events");
    assert_eq!(count.json + count.other, parsed.events.len(), "events");
    let id = framer.last_event_id().map(|c| c.bytes().to_vec()).unwrap_or_default();
    let want_id = &parsed.last_event_id[..parsed.last_event_id.len().min(strata::classify::sse::MAX_EVENT_ID)];
    assert_eq!(id, want_id, "last event id");

    // The whole exchange.
    let request = common::REQUESTS[usize::from(pick) % common::REQUESTS.len()];
    let end = [BodyEnd::Complete, BodyEnd::Complete, BodyEnd::UpstreamError, BodyEnd::AgentGone]
        [usize::from(pick >> 4) % 4];
    let ct = Some(&b"text/event-stream"[..]);
    let want = oracle::classify(request, 200, ct, stream, end);
    let got = oracle::streaming(request, &[], 200, ct, stream, &cuts, end);
    assert_eq!(got, want);
});
