use super::*;

#[derive(Default)]
struct Log {
    events: Vec<(EventData, Option<String>, Vec<String>)>,
    pending: Vec<String>,
}

impl MessageSink for Log {
    fn message(&mut self, e: &Envelope) {
        self.pending.push(e.id.text_lossy().into_owned());
    }
}

impl SseSink for Log {
    fn event(&mut self, data: EventData, id: Option<&Captured<MAX_EVENT_ID>>) {
        let msgs = std::mem::take(&mut self.pending);
        self.events
            .push((data, id.map(|c| c.text_lossy().into_owned()), msgs));
    }
}

fn frame(input: &[u8], step: usize) -> (Log, SseFramer) {
    let mut framer = SseFramer::new();
    let mut log = Log::default();
    for chunk in input.chunks(step.max(1)) {
        framer.feed(chunk, &mut log);
        // An empty chunk changes nothing: a `\r` at a chunk's end still waits for its `\n`.
        framer.feed(&[], &mut log);
    }
    framer.finish();
    (log, framer)
}

fn every_split(input: &[u8]) -> (Log, SseFramer) {
    let whole = frame(input, input.len().max(1));
    for step in 1..input.len().min(12) {
        let (log, _) = frame(input, step);
        assert_eq!(
            format!("{:?}", log.events),
            format!("{:?}", whole.0.events),
            "step {step}"
        );
    }
    whole
}

const OK: Result<Document, Malformed> = Ok(Document {
    batch: false,
    messages: 1,
});

#[test]
fn line_endings_lf_cr_crlf() {
    for eol in ["\n", "\r", "\r\n"] {
        let s = format!("data: {{\"id\":1}}{eol}{eol}: comment{eol}data:{{\"id\":2}}{eol}{eol}");
        let (log, framer) = every_split(s.as_bytes());
        assert_eq!(log.events.len(), 2, "eol {eol:?}");
        assert_eq!(log.events[0].0, EventData::Json(OK));
        assert_eq!(log.events[1].2, vec!["2".to_string()]);
        assert_eq!(framer.events(), 2);
    }
}

/// A stream that ends after one CRLF ends mid-event, however the CRLF is cut (an empty chunk
/// between its two bytes included): the event is never dispatched (WHATWG).
#[test]
fn a_crlf_cut_after_its_cr_is_one_line_end() {
    let (log, framer) = every_split(b"data: {\"id\":1}\r\n");
    assert!(log.events.is_empty());
    assert_eq!(framer.events(), 0);
}

#[test]
fn data_lines_join_with_lf() {
    let (log, _) = every_split(b"data: {\"id\":\ndata: 5}\n\n");
    assert_eq!(log.events[0].0, EventData::Json(OK));
    assert_eq!(log.events[0].2, vec!["5".to_string()]);
}

#[test]
fn bom_priming_and_ids() {
    let (log, framer) =
        every_split(b"\xEF\xBB\xBFid: e1\nretry: 1500\ndata: \n\nid: e2\ndata: {\"id\":3}\n\n");
    assert_eq!(log.events[0].0, EventData::Empty);
    assert_eq!(log.events[0].1.as_deref(), Some("e1"));
    assert_eq!(log.events[1].1.as_deref(), Some("e2"));
    assert_eq!(framer.retry_ms(), Some(1500));
    assert_eq!(framer.last_event_id().and_then(|c| c.text()), Some("e2"));
}

#[test]
fn other_event_types_are_ignored() {
    let (log, _) =
        every_split(b"event: ping\ndata: {\"id\":1}\n\nevent: message\ndata: {\"id\":2}\n\n");
    assert_eq!(log.events[0].0, EventData::Ignored);
    assert_eq!(log.events[1].0, EventData::Json(OK));
}

#[test]
fn malformed_data_is_reported_per_event() {
    let (log, _) = every_split(b"data: {oops\n\ndata: {\"id\":1}\n\n");
    assert_eq!(log.events[0].0, EventData::Json(Err(Malformed::Syntax)));
    assert_eq!(log.events[1].0, EventData::Json(OK));
}

#[test]
fn unterminated_event_is_not_dispatched() {
    let (log, framer) = every_split(b"data: {\"id\":1}\n\ndata: {\"id\":2}\n");
    assert_eq!(log.events.len(), 1);
    assert_eq!(framer.events(), 1);
}

#[test]
fn no_colon_lines_and_unknown_fields() {
    let (log, _) = every_split(b"data\nfoo: bar\nverylongfieldname: x\ndata: {\"id\":1}\n\n");
    // `data` with no colon is an empty data line; joined with LF the JSON is unchanged.
    assert_eq!(log.events[0].0, EventData::Json(OK));
}

#[test]
fn retry_needs_digits() {
    let (_, framer) = every_split(b"retry: 12x\n\nretry:\n\n");
    assert_eq!(framer.retry_ms(), None);
}

#[test]
fn last_event_id_is_set_at_dispatch_and_empty_resets_it() {
    // Regression (found by tests/it/classify_props.rs): the id was taken when its line ended,
    // so an id in an event the stream never finished made the stream look resumable.
    let (_, framer) = every_split(b"data: {\"id\":1}\n\nid: 7\ndata: x");
    assert!(framer.last_event_id().is_none());
    // A blank line sets it, even with no data (WHATWG dispatch, step 1).
    let (log, framer) = every_split(b"id: 7\n\ndata: {\"id\":1}\n\n");
    assert_eq!(framer.last_event_id().and_then(|c| c.text()), Some("7"));
    assert_eq!(log.events[0].1.as_deref(), Some("7"));
    // An empty id resets it: the client resumes without Last-Event-ID.
    for reset in [
        &b"id: 7\n\nid\n\n"[..],
        b"id: 7\n\nid:\n\n",
        b"id: 7\nid: \n\n",
    ] {
        let (_, framer) = every_split(reset);
        assert!(
            framer.last_event_id().is_none(),
            "{:?}",
            String::from_utf8_lossy(reset)
        );
    }
}

#[test]
fn a_partial_bom_is_content() {
    // Regression (fuzz/sse_framer): the bytes of a partial BOM were dropped, so
    // "\xEFdata:" read as a data line; a WHATWG client sees the field "\u{FFFD}data".
    let (log, _) = every_split(b"\xEFdata: {\"id\":1}\n\ndata: {\"id\":2}\n\n");
    assert_eq!(log.events.len(), 1);
    assert_eq!(log.events[0].2, vec!["2".to_string()]);
    let (log, _) = every_split(b"\xEF\xBBdata: {\"id\":1}\n\n");
    assert!(log.events.is_empty());
    // A whole BOM is still skipped.
    let (log, _) = every_split(b"\xEF\xBB\xBFdata: {\"id\":1}\n\n");
    assert_eq!(log.events.len(), 1);
}

#[test]
fn an_id_with_nul_past_the_capture_cap_is_ignored() {
    // Regression (fuzz/sse_framer): NUL was looked for only in the captured first bytes of
    // the id, so a long id with NUL further on replaced the last event ID. WHATWG ignores
    // an id field containing NUL anywhere.
    let long = format!("id: {}\0x\n\n", "a".repeat(MAX_EVENT_ID + 10));
    let (_, framer) = every_split(long.as_bytes());
    assert!(framer.last_event_id().is_none());
    let kept = format!("id: e1\n\n{long}");
    let (_, framer) = every_split(kept.as_bytes());
    assert_eq!(framer.last_event_id().and_then(|c| c.text()), Some("e1"));
}

#[test]
fn line_end_finds_the_first_lf_or_cr() {
    // Past 16 bytes `line_end` goes on with `line_break`'s 16-byte blocks; a data line starts
    // with it at once: both, across several blocks and their remainders.
    for len in 0..80 {
        for at in 0..=len {
            for end in [b'\n', b'\r'] {
                let mut bytes = vec![b'a'; len];
                // Bytes that a borrow could confuse: LF/CR plus or minus one.
                for (k, b) in bytes.iter_mut().enumerate() {
                    *b = [b'a', 0x0B, 0x0C, 0x0E, 0x09, 0x8A, 0x8D][k % 7];
                }
                if at < len {
                    bytes[at] = end;
                    if at + 1 < len {
                        bytes[at + 1] = b'\n';
                    }
                }
                let want = bytes.iter().position(|&b| b == b'\n' || b == b'\r');
                assert_eq!(line_end(&bytes), want, "{bytes:?}");
                assert_eq!(line_break(&bytes), want, "{bytes:?}");
            }
        }
    }
}

#[test]
fn whole_line_fast_paths_agree_with_cut_lines() {
    // `every_split` also cuts these lines, so the general path reads them too.
    // "message" counts only as the whole event type.
    let (log, _) = every_split(
        b"event: messages\ndata: {\"id\":1}\n\nevent: mess\ndata: {\"id\":2}\n\n\
          event: message\r\ndata: {\"id\":3}\r\n\r\nevent:message\ndata:{\"id\":4}\n\n",
    );
    let kinds: Vec<_> = log.events.iter().map(|e| e.0).collect();
    assert_eq!(
        kinds,
        [
            EventData::Ignored,
            EventData::Ignored,
            EventData::Json(OK),
            EventData::Json(OK)
        ]
    );
    // A short id with NUL is ignored; the last good one stays.
    let (log, framer) = every_split(b"id: e1\n\nid: a\0b\ndata: {\"id\":1}\n\n");
    assert_eq!(log.events[0].1.as_deref(), Some("e1"));
    assert_eq!(framer.last_event_id().and_then(|c| c.text()), Some("e1"));
    // Only one space is dropped; `id:` with no space; an empty data line joins with LF.
    let (log, framer) = every_split(b"id:e2\ndata:  {\"id\":\ndata:\ndata: 5}\n\n");
    assert_eq!(log.events[0].0, EventData::Json(OK));
    assert_eq!(log.events[0].2, vec!["5".to_string()]);
    assert_eq!(framer.last_event_id().and_then(|c| c.text()), Some("e2"));
}
